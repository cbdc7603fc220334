// The environment's part of the configuration: the AUGUR_* variables,
// and the world layout that torchrun or SLURM publish.

package shim

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/augur-hpc/augur/placement"
)

func (c *Config) applyEnv() error {
	if v := os.Getenv("AUGUR_DATASET"); v != "" {
		c.Roots = strings.Split(v, ":")
	}
	if v := os.Getenv("AUGUR_TIERS"); v != "" {
		tiers, err := ParseTiers(v)
		if err != nil {
			return fmt.Errorf("AUGUR_TIERS: %w", err)
		}
		c.specs = nil
		for _, t := range tiers {
			c.specs = append(c.specs, tierSpec{t, "AUGUR_TIERS"})
		}
	}
	if v := os.Getenv("AUGUR_POLICY"); v != "" {
		if !validPolicy(v) {
			return fmt.Errorf("AUGUR_POLICY: %s", badPolicy(v))
		}
		c.Policy = v
	}
	if v := os.Getenv("AUGUR_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 0, 64)
		if err != nil {
			return fmt.Errorf("AUGUR_SEED: %q is not an integer", v)
		}
		c.Seed = s
	}
	if err := applyAccessEnv(&c.Access); err != nil {
		return err
	}
	if v := os.Getenv("AUGUR_REVALIDATE"); v != "" {
		d, err := parseDuration(v)
		if err != nil {
			return fmt.Errorf("AUGUR_REVALIDATE: %w", err)
		}
		c.Revalidate = d
	}
	if v := os.Getenv("AUGUR_PASSTHROUGH"); v != "" {
		if v != "auto" && v != "off" {
			return fmt.Errorf("AUGUR_PASSTHROUGH: %q: want auto or off", v)
		}
		c.PassThrough = v
	}
	if v := os.Getenv("AUGUR_WAIT_MAX"); v != "" {
		n, err := ParseSize(v)
		if err != nil {
			return fmt.Errorf("AUGUR_WAIT_MAX: %w", err)
		}
		c.WaitMax = n
	}
	if v := os.Getenv("AUGUR_BLOCK_ABOVE"); v != "" {
		n, err := ParseSize(v)
		if err != nil {
			return fmt.Errorf("AUGUR_BLOCK_ABOVE: %w", err)
		}
		c.BlockAbove = n
	}
	if v := os.Getenv("AUGUR_LOG"); v != "" {
		level, file, _ := strings.Cut(v, ":")
		if !validLevel(level) {
			return fmt.Errorf("AUGUR_LOG: %s", badLevel(level))
		}
		c.LogLevel, c.LogFile = level, file
	}
	return c.Peers.FromEnv(peerEnv)
}

// peerEnv is getenv for the job's membership, less an AUGUR_JOB that
// augur made up (the preload or augur run names a job that has no
// name): every node makes up another, and the nodes' one job id is then
// the launcher's (SLURM_JOB_ID, TORCHELASTIC_RUN_ID).
func peerEnv(key string) string {
	v := os.Getenv(key)
	if key == "AUGUR_JOB" && v != "" && v == os.Getenv(JobMadeVar) {
		return ""
	}
	return v
}

// JobMadeVar holds the AUGUR_JOB augur made up, when it did.
const JobMadeVar = "AUGUR_JOB_MADE"

// applyAccessEnv takes the AUGUR_* access variables and the world layout that
// torchrun or SLURM publish (explicit AUGUR_ variables win).
func applyAccessEnv(a *placement.Access) error {
	strs := map[string]*string{"AUGUR_SAMPLER": &a.Sampler, "AUGUR_LAYOUT": &a.Layout, "AUGUR_TORCH_VERSION": &a.Torch}
	for k, dst := range strs {
		if v := os.Getenv(k); v != "" {
			*dst = v
		}
	}
	if msg := badSampler(a.Sampler); msg != "" {
		return fmt.Errorf("AUGUR_SAMPLER: %s", msg)
	}
	if msg := badLayout(a.Layout); msg != "" {
		return fmt.Errorf("AUGUR_LAYOUT: %s", msg)
	}
	ints := []struct {
		keys []string
		dst  *int
		min  int
	}{
		{[]string{"AUGUR_EPOCHS"}, &a.Epochs, 0},
		{[]string{"AUGUR_BATCH_SIZE"}, &a.BatchSize, 0},
		{[]string{"AUGUR_WORLD_SIZE", "WORLD_SIZE", "SLURM_NTASKS"}, &a.WorldSize, 1},
		{[]string{"AUGUR_RANKS_PER_NODE", "LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"}, &a.RanksPerNode, 1},
		{[]string{"AUGUR_NODE_RANK", "GROUP_RANK", "SLURM_NODEID"}, &a.NodeRank, 0},
		{[]string{"AUGUR_LOOKAHEAD"}, &a.Lookahead, 1},
	}
	for _, i := range ints {
		for _, k := range i.keys {
			v := os.Getenv(k)
			if v == "" {
				continue
			}
			// SLURM writes counts like "4(x2)": the leading number is ours.
			digits := strings.TrimRightFunc(v, func(r rune) bool { return r < '0' || r > '9' })
			if k == "SLURM_NTASKS_PER_NODE" {
				if j := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' }); j > 0 {
					digits = v[:j]
				}
			}
			n, err := strconv.Atoi(digits)
			if err != nil || n < i.min {
				return fmt.Errorf("%s: %q is not an integer of at least %d", k, v, i.min)
			}
			*i.dst = n
			break
		}
	}
	bools := map[string]*bool{"AUGUR_DROP_LAST": &a.DropLast, "AUGUR_SHUFFLE": &a.Shuffle}
	for k, dst := range bools {
		if v := os.Getenv(k); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not a boolean (1, 0, true, false)", k, v)
			}
			*dst = b
		}
	}
	if v := os.Getenv("AUGUR_STAGE"); v != "" {
		n, err := ParseSize(v)
		if err != nil {
			return fmt.Errorf("AUGUR_STAGE: %w", err)
		}
		a.Stage = n
	}
	return nil
}
