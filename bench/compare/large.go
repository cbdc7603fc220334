package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/augur-hpc/augur/bench/dlbench"
	"github.com/augur-hpc/augur/bench/pfsemu"
	"github.com/augur-hpc/augur/shim"
)

// Large files (issue 43): samples inside files, as HDF5 datasets, record
// files and tar shards keep them, on the emulated PFS with direct I/O at
// its default 200 MiB/s, 512 MiB datasets, each against a tier that holds
// it, a tier of half of it, or a file larger than the tier. The rows of
// issue 43's table, so that the block work's gains show beside
// whole-file tiering's figures.
type largeScenario struct {
	Name  string `json:"name"`
	About string `json:"about"`
	// Data names the dataset (generated once under the work directory and
	// shared by the scenarios that name it).
	Data     string          `json:"data"`
	Gen      dlbench.GenSpec `json:"generate"`
	Order    string          `json:"order"`
	ReadMode string          `json:"read_mode"`
	Tier     int64           `json:"tier_bytes"` // one RAM tier
}

const (
	largeRecord = 1 << 20
	// largeHeader is what comes before the first record of each file: an
	// HDF5 file's superblock and object headers take 2 KiB and some;
	// 2148 bytes align the records to nothing (not 512, not 4 KiB).
	largeHeader = 2148
)

var (
	h5Files  = dlbench.GenSpec{Layout: dlbench.LayoutRecords, Count: 512, Size: largeRecord, Files: 8, Header: largeHeader, Seed: 1}
	h5OneBig = dlbench.GenSpec{Layout: dlbench.LayoutRecords, Count: 512, Size: largeRecord, Files: 1, Header: largeHeader, Seed: 1}
	tarFiles = dlbench.GenSpec{Layout: dlbench.LayoutTar, Count: 512, Size: largeRecord, Files: 8, Seed: 1}
)

var largeScenarios = []largeScenario{
	{Name: "L1", About: "8 HDF5-like files x 64 samples of 1 MiB, random samples, tier holds the dataset",
		Data: "L-h5", Gen: h5Files, Order: dlbench.OrderSamples, ReadMode: dlbench.ReadPread, Tier: 1 << 30},
	{Name: "L2", About: "the same, tier half the dataset",
		Data: "L-h5", Gen: h5Files, Order: dlbench.OrderSamples, ReadMode: dlbench.ReadPread, Tier: 256 * mib},
	{Name: "L3", About: "the same files, shuffled groups of 16 contiguous samples (CosmoFlow), tier holds the dataset",
		Data: "L-h5", Gen: h5Files, Order: dlbench.OrderGroups, ReadMode: dlbench.ReadPread, Tier: 1 << 30},
	{Name: "L4", About: "one 512 MiB HDF5-like file, random samples, tier 256 MiB",
		Data: "L-one", Gen: h5OneBig, Order: dlbench.OrderSamples, ReadMode: dlbench.ReadPread, Tier: 256 * mib},
	{Name: "L5", About: "the same file, tier holds it",
		Data: "L-one", Gen: h5OneBig, Order: dlbench.OrderSamples, ReadMode: dlbench.ReadPread, Tier: 1 << 30},
	{Name: "L6", About: "8 tar shards of 64 MiB read member by member, shard order shuffled (WebDataset), tier holds the dataset",
		Data: "L-tar", Gen: tarFiles, Order: dlbench.OrderShards, ReadMode: dlbench.ReadStream, Tier: 1 << 30},
}

// largeConfigs are the configurations the large-file scenarios run:
// no augur, the local copy and the two policies (entries of configs).
var largeConfigs = []string{"pfs", "local", "augur-reactive", "augur-clairvoyant"}

// largeWorkload is one rank with a DataLoader's 2 workers, batches of 16
// samples, 10 ms of compute per batch, 3 epochs, every sample checked.
func largeWorkload(s largeScenario) dlbench.Workload {
	w := dlbench.DefaultWorkload()
	w.Ranks, w.Workers, w.Batch, w.Compute = 1, 2, 16, 10*time.Millisecond
	w.Order, w.ReadMode, w.Verify = s.Order, s.ReadMode, true
	return w
}

// largeResult is one large-file scenario's runs: Rounds[i] are round i's
// runs, one per configuration, the configurations run in turn.
type largeResult struct {
	largeScenario
	Dataset  string               `json:"dataset"`
	Bytes    int64                `json:"dataset_bytes"`
	Workload dlbench.Workload     `json:"workload"`
	PFS      map[string]string    `json:"pfs"`
	Rounds   [][]*run             `json:"rounds"`
	Seconds  float64              `json:"seconds"`
	Medians  map[string][]float64 `json:"median_epoch_seconds"`
}

// largeWanted is the large-file scenarios only names: each by name, or
// all of them by "L".
func largeWanted(only string) []largeScenario {
	var out []largeScenario
	for _, s := range largeScenarios {
		if only == "" || strings.Contains(","+only+",", ","+s.Name+",") || strings.Contains(","+only+",", ",L,") {
			out = append(out, s)
		}
	}
	return out
}

func (e *env) runLarge(s largeScenario, rounds int, policies map[string]string, prog *dlbench.ProgressLine) (*largeResult, error) {
	start := time.Now()
	s.Gen.Count, s.Tier = int(e.sized(int64(s.Gen.Count))), e.sized(s.Tier) // -scale
	fmt.Printf("\n== %s: %s; %s tier\n", s.Name, s.About, fmtMiB(s.Tier))
	ds, local, mnt, err := prepare(filepath.Join(e.work, s.Data), s.Gen)
	if err != nil {
		return nil, err
	}
	if err := ds.Checksum(); err != nil {
		return nil, err
	}
	popts := pfsemu.DefaultOptions(ds.Root, mnt)
	popts.DirectIO = true
	srv, err := pfsemu.Mount(popts)
	if err != nil {
		return nil, fmt.Errorf("mounting the emulated PFS: %w", err)
	}
	defer func() { srv.Unmount() }()
	ram, err := benchRAM(s.Name)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(filepath.Dir(ram))
	w := largeWorkload(s)
	lr := &largeResult{largeScenario: s, Dataset: ds.Describe(), Bytes: ds.Bytes, Workload: w,
		PFS: map[string]string{"open_latency": popts.OpenLatency.String(), "read_latency": popts.ReadLatency.String(),
			"bandwidth": pfsemu.FormatRate(popts.Bandwidth), "direct_io": "yes"}}
	for round := 0; round < rounds; round++ {
		var runs []*run
		for _, name := range largeConfigs {
			c := configNamed(name)
			r := &run{Config: c.name, About: c.about}
			runs = append(runs, r)
			if c.policy != "" && policies[c.policy] != "available" {
				r.Skipped = policies[c.policy]
				continue
			}
			if srv, err = ensureMounted(srv, popts, r); err != nil {
				return nil, err
			}
			x := dlbench.Exec{Reader: e.reader, Root: mnt, BetweenEpochs: dlbench.DropCaches,
				Counters: func() (pfsemu.Stats, error) { return srv.Stats(), nil }}
			job := ""
			switch {
			case c.read == "local":
				x.Root = local
			case c.policy != "":
				if err := os.RemoveAll(ram); err != nil {
					return nil, err
				}
				job = fmt.Sprintf("bench-%d-%s-%s-%d", os.Getpid(), s.Name, c.name, round)
				x.Preload = e.lib
				x.Env = policyEnv(mnt, fmt.Sprintf("%s:%d", ram, s.Tier), c.policy, job, w)
			}
			if err := dlbench.DropCaches(); err != nil {
				return nil, err
			}
			x.Progress = prog.Func(fmt.Sprintf("%s %s round %d", s.Name, c.name, round+1))
			res, err := dlbench.Run(e.ctx, c.name, ds, w, x)
			prog.Clear()
			if job != "" {
				defer removeJob(job)
			}
			r.Result = res
			if err == nil {
				err = readErrors(res)
			}
			if err == nil && job != "" {
				r.AugurStat, err = e.augurStat(job, 1)
			}
			if err != nil {
				r.Error = err.Error()
				fmt.Printf("  %-18s failed: %v\n", c.name, err)
				continue
			}
			fmt.Printf("  %-18s epochs %s  PFS MB %s\n", c.name, epochList(r), pfsMBList(r))
		}
		lr.Rounds = append(lr.Rounds, runs)
	}
	lr.Medians = map[string][]float64{}
	for _, name := range largeConfigs {
		for ep := 0; ep < w.Epochs; ep++ {
			lr.Medians[name] = append(lr.Medians[name], median(largeEpochs(lr, name, ep, epochSeconds)))
		}
	}
	lr.Seconds = time.Since(start).Seconds()
	return lr, nil
}

// configNamed is the entry of configs called name.
func configNamed(name string) config {
	for _, c := range configs {
		if c.name == name {
			return c
		}
	}
	panic("no configuration " + name)
}

func epochSeconds(ep dlbench.Epoch) float64 { return ep.Seconds }

func epochPFSBytes(ep dlbench.Epoch) float64 {
	if ep.PFS == nil {
		return 0
	}
	return float64(ep.PFS.ReadBytes)
}

// largeEpochs is a figure of epoch ep of config over the rounds that ran.
func largeEpochs(lr *largeResult, config string, ep int, f func(dlbench.Epoch) float64) []float64 {
	var out []float64
	for _, runs := range lr.Rounds {
		for _, r := range runs {
			if r.Config == config && r.Error == "" && r.Result != nil && ep < len(r.Result.Epochs) {
				out = append(out, f(r.Result.Epochs[ep]))
			}
		}
	}
	return out
}

func pfsMBList(r *run) string {
	var parts []string
	for _, ep := range r.Result.Epochs {
		parts = append(parts, fmt.Sprintf("%.0f", epochPFSBytes(ep)/1e6))
	}
	return strings.Join(parts, " · ")
}

// printLarge prints a large-file scenario: per configuration the median
// over rounds of each epoch's time, epoch 1 against no augur's, epochs 2+
// against local's, and the PFS's bytes by epoch and over the run against
// the dataset; the last round's augur stat.
func printLarge(w io.Writer, lr *largeResult) {
	fmt.Fprintf(w, "\n%s: %s — %s; %s RAM tier; PFS %s with direct I/O; %s; medians of %d round(s)\n",
		lr.Name, lr.About, lr.Dataset, fmtMiB(lr.Tier), lr.PFS["bandwidth"], lr.Workload.Describe(), len(lr.Rounds))
	fmt.Fprintf(w, "| config | epoch 1 | epoch 2 | epoch 3 | epoch 1 x pfs | epochs 2+ x local | stall | PFS / dataset by epoch | PFS / dataset | augur stat |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|\n")
	pfs1 := median(largeEpochs(lr, "pfs", 0, epochSeconds))
	var local2 []float64
	for ep := 1; ep < lr.Workload.Epochs; ep++ {
		local2 = append(local2, largeEpochs(lr, "local", ep, epochSeconds)...)
	}
	for _, name := range largeConfigs {
		r := lastRun(lr, name)
		switch {
		case r == nil:
			continue
		case r.Skipped != "":
			fmt.Fprintf(w, "| %s | %s |\n", name, r.Skipped)
			continue
		case r.Error != "" || r.Result == nil:
			fmt.Fprintf(w, "| %s | failed: %s |\n", name, firstLine(r.Error))
			continue
		}
		row := []string{name}
		var later []float64
		for ep := 0; ep < 3; ep++ {
			if ep >= lr.Workload.Epochs {
				row = append(row, "-")
				continue
			}
			secs := largeEpochs(lr, name, ep, epochSeconds)
			row = append(row, fmt.Sprintf("%.2f", median(secs)))
			if ep > 0 {
				later = append(later, secs...)
			}
		}
		row = append(row, ratio(median(largeEpochs(lr, name, 0, epochSeconds)), pfs1), ratio(mean(later), mean(local2)))
		var stall float64
		for _, ep := range r.Result.Epochs {
			stall += ep.Stall
		}
		row = append(row, fmt.Sprintf("%.2f", stall))
		if name == "local" {
			row = append(row, "-", "-")
		} else {
			var by []string
			var total float64
			for ep := 0; ep < lr.Workload.Epochs; ep++ {
				b := median(largeEpochs(lr, name, ep, epochPFSBytes))
				by = append(by, fmt.Sprintf("%.2f", b/float64(lr.Bytes)))
				total += b
			}
			row = append(row, strings.Join(by, " · "), fmt.Sprintf("%.2f", total/float64(lr.Bytes)))
		}
		row = append(row, augurStatLine(r))
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintf(w, "epoch 1's bound: max(compute %.2fs, dataset / %s = %.2fs)\n",
		lr.Workload.Compute.Seconds()*float64(batches(lr)), lr.PFS["bandwidth"],
		float64(lr.Bytes)/float64(pfsemu.DefaultBandwidth))
}

// batches is the batches of one epoch of lr's single rank.
func batches(lr *largeResult) int {
	return (lr.Gen.Count + lr.Workload.Batch - 1) / lr.Workload.Batch
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// lastRun is config's run of the last round.
func lastRun(lr *largeResult, config string) *run {
	if len(lr.Rounds) == 0 {
		return nil
	}
	for _, r := range lr.Rounds[len(lr.Rounds)-1] {
		if r.Config == config {
			return r
		}
	}
	return nil
}

// augurStatLine is what augur stat said of a run: its opens, those a tier
// served, the copies made, the bytes read from the originals and from
// large files' blocks, and the blocks copied ahead of readers in order.
func augurStatLine(r *run) string {
	var st shim.Stats
	if len(r.AugurStat) == 0 || json.Unmarshal(r.AugurStat, &st) != nil {
		return "-"
	}
	var blocks uint64
	for _, t := range st.Tiers {
		blocks += t.BlockBytes
	}
	return fmt.Sprintf("opens %d, from the tier %d, copies %d (%s), originals read %s, blocks read %s, ahead %s",
		st.Opens, st.Opens-st.Misses, st.Copies, shim.FormatSize(int64(st.CopyBytes)),
		shim.FormatSize(int64(st.OriginalBytes)), shim.FormatSize(int64(blocks)), shim.FormatSize(int64(st.BigAheadBytes)))
}
