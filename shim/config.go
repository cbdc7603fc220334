// The configuration of a job (Config) as Load builds it: the defaults,
// then the file (configfile.go), then the environment (configenv.go);
// the tiers' part is configtiers.go.

package shim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/augur-hpc/augur/peers"
	"github.com/augur-hpc/augur/placement"
	"github.com/augur-hpc/augur/seed"
	"github.com/augur-hpc/augur/tiering"
)

// Config is everything a process of a job needs to know. Load builds it
// from the built-in defaults, the TOML file named by AUGUR_CONFIG, and
// the AUGUR_* environment variables, in that order of precedence (the
// environment wins).
type Config struct {
	Roots    []string       // dataset roots, absolute and clean
	Tiers    []tiering.Tier // fastest first
	Policy   string         // static, reactive or clairvoyant
	Seed     int64
	LogLevel string
	LogFile  string
	File     string // the config file read, if any
	// Revalidate is how often, at most, the leader compares a served
	// copy with its source during a job (0: at every open).
	Revalidate time.Duration
	// WaitMax is the largest file whose first reader waits for its copy
	// under the reactive policy (0: none waits; see reactive).
	WaitMax int64
	// BlockAbove is the size above which a dataset file is tiered in
	// blocks (blocks.go) rather than copied whole (0: none is).
	BlockAbove int64
	// PassThrough says whether a root found as fast as the fastest tier
	// is passed through, its files not copied (sources.go): "auto" (the
	// default) or "off" (copy whatever the root).
	PassThrough string
	Access      placement.Access
	// Peers is the job's membership across nodes (package peers); a job
	// of one node has none.
	Peers peers.Config
	// Problems are what is wrong with the configuration that augur works
	// around: tiers it does not use, and warnings. Each is said once by
	// whoever loads the configuration (the preload, augur run, augur
	// check, which fails on any).
	Problems []Problem
	specs    []tierSpec // the tiers as configured, until check
}

// Problem is one thing wrong with the configuration.
type Problem struct {
	Where   string // file:line, the variable, or "" (a built-in default)
	Msg     string
	Warning bool // the tier is used all the same
}

func (p Problem) String() string {
	if p.Where == "" {
		return p.Msg
	}
	return p.Where + ": " + p.Msg
}

// tierSpec is a tier as configured, with where it was.
type tierSpec struct {
	tiering.Tier
	where string
}

// Policies the control plane knows.
var Policies = []string{"static", "reactive", "clairvoyant"}

// ConfigError is an error in a configuration file, at a line.
type ConfigError struct {
	File string
	Line int
	Msg  string
}

func (e *ConfigError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// DefaultBlockAbove is the size above which a file is tiered in blocks:
// two blocks, and the reactive policy's wait_max, below which a file is
// copied whole at its first read.
const DefaultBlockAbove = 8 << 20

// Load reads the configuration of this process.
func Load() (*Config, error) {
	c := &Config{Policy: "static", LogLevel: "warn", Revalidate: 30 * time.Second, PassThrough: "auto", WaitMax: placement.DefaultWaitMax,
		BlockAbove: DefaultBlockAbove,
		Access: placement.Access{Sampler: "distributed", Layout: "imagefolder", Shuffle: true,
			WorldSize: 1, RanksPerNode: 1, Lookahead: 1024}, Peers: peers.Defaults()}
	if path := os.Getenv("AUGUR_CONFIG"); path != "" {
		if err := c.readFile(path); err != nil {
			return nil, err
		}
	}
	if err := c.applyEnv(); err != nil {
		return nil, err
	}
	if len(c.specs) == 0 {
		for _, t := range DefaultTiers() {
			c.specs = append(c.specs, tierSpec{Tier: t})
		}
	}
	return c, c.check()
}

// check normalises the dataset roots and keeps the tiers that can work;
// the others become Problems.
func (c *Config) check() error {
	for i, r := range c.Roots {
		abs, err := filepath.Abs(r)
		if err != nil || r == "" {
			return fmt.Errorf("dataset root %q is not a path", r)
		}
		c.Roots[i] = abs
	}
	for _, s := range c.specs {
		if msg := c.tierProblem(&s.Tier); msg != "" {
			c.Problems = append(c.Problems, Problem{s.where, msg + "; tier not used", false})
			continue
		}
		if msg := capacityProblem(s.Tier); msg != "" {
			c.Problems = append(c.Problems, Problem{s.where, msg, true})
		}
		if s.Threads == 0 {
			s.Threads = 16
		}
		c.Tiers = append(c.Tiers, s.Tier)
	}
	c.specs = nil
	if c.Peers.Enabled() {
		if err := c.Peers.Validate(); err != nil {
			c.Problems = append(c.Problems, Problem{"peers", strings.ReplaceAll(err.Error(), "\n", "; ") + "; this node fetches nothing from other nodes and serves them nothing", false})
			c.Peers = peers.Defaults()
		}
	}
	return nil
}

// RootForms is what the data plane matches paths against: every root as
// given and, when it differs, with its symlinks resolved.
func (c *Config) RootForms() []string {
	var forms []string
	for _, r := range c.Roots {
		forms = append(forms, r)
		if real, err := filepath.EvalSymlinks(r); err == nil && real != r {
			forms = append(forms, real)
		}
	}
	return forms
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration (examples: 30s, 5m, 0s)", s)
	}
	return d, nil
}

func validPolicy(p string) bool {
	for _, q := range Policies {
		if p == q {
			return true
		}
	}
	return false
}

func badPolicy(p string) string {
	return fmt.Sprintf("unknown policy %q (known: %s)", p, strings.Join(Policies, ", "))
}

var levels = []string{"debug", "info", "warn", "error", "off"}

func validLevel(l string) bool {
	for _, x := range levels {
		if l == x {
			return true
		}
	}
	return false
}

func badLevel(l string) string {
	return fmt.Sprintf("unknown log level %q (known: %s)", l, strings.Join(levels, ", "))
}

// badSampler and badLayout name what is wrong with a sampler or layout
// setting ("" when nothing is), so that a typo is reported by augur check
// rather than found when the leader starts.
func badSampler(k string) string {
	switch {
	case k == seed.KindDistributed, k == seed.KindRandom, k == seed.KindSequential,
		k == seed.KindNumpy, k == seed.KindNumpyLegacy,
		strings.HasPrefix(k, seed.KindFilePrefix) && len(k) > len(seed.KindFilePrefix):
		return ""
	}
	return fmt.Sprintf("unknown sampler %q (known: distributed, random, sequential, numpy, numpy-legacy, file:<order file>)", k)
}

func badLayout(l string) string {
	switch {
	case l == seed.LayoutImageFolder, l == "flat", l == seed.LayoutFiles,
		strings.HasPrefix(l, seed.LayoutListPrefix) && len(l) > len(seed.LayoutListPrefix):
		return ""
	}
	return fmt.Sprintf("unknown layout %q (known: imagefolder, flat, list:<file>)", l)
}
