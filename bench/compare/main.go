// Command compare is `make bench`: every configuration that exists so far
// (the emulated PFS alone, a local copy, the compute loop alone, augur with
// each policy it accepts) runs the same training-style workload side by
// side, in three scenarios of dataset size against the tiers, then samples
// inside large files (L1-L6, large.go), then a real PyTorch DataLoader
// does the same over JPEG files, then twice more with augur told nothing
// of the job (learning.go). It prints ratio tables, saves JSON and a PNG
// plot under bench/results/.
//
//	go run ./bench/compare [-out bench/results] [-work /tmp/augur-bench] [-scale 1]
//	go run ./bench/compare -only L -pytorch=false -out bench/results/large   # make bench-large
//
// It needs root (to drop the page cache and mount the emulated PFS) and
// the binaries make builds: build/augur, build/libaugur.so, build/dlreader.
// See docs/bench.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/augur-hpc/augur/bench/dlbench"
	"github.com/augur-hpc/augur/bench/pfsemu"
)

// config is one way of running the workload: one entry of configs.
type config struct {
	name  string
	about string
	// read is where the readers find the dataset: "pfs" (the emulated PFS
	// mount), "local" (a copy on local disk made beforehand) or "none"
	// (no I/O: the compute loop alone).
	read string
	// policy, when set, runs the readers under augur (LD_PRELOAD) with
	// AUGUR_POLICY=policy, reading the PFS mount. Such a configuration
	// runs only if `augur check` accepts the policy.
	policy string
	// warm runs `augur warm` into the tiers before the first epoch; its
	// time is reported on its own and as part of the total.
	warm bool
	// startup runs the configuration a second time, after a start-up of
	// the job (see startup): a policy may use that time.
	startup bool
}

// configs is the comparison. Adding a policy is one entry; it appears in
// the results as soon as `augur check` accepts AUGUR_POLICY=<policy>.
var configs = []config{
	{name: "pfs", read: "pfs", about: "no shim, through the emulated PFS"},
	{name: "local", read: "local", about: "dataset copied to local disk beforehand: the physical limit"},
	{name: "noio", read: "none", about: "the compute loop alone"},
	{name: "augur-warm", read: "pfs", policy: "static", warm: true, about: "augur warm before epoch 1, then the shim (static policy)"},
	// Slots for the policies of later issues: skipped, and listed as not
	// available, until augur accepts them.
	{name: "augur-reactive", read: "pfs", policy: "reactive", startup: true, about: "copy on first read (MONARCH)"},
	{name: "augur-clairvoyant", read: "pfs", policy: "clairvoyant", startup: true, about: "prefetch in seed order (NoPFS)"},
}

// startup is the time a real training job spends before its first read:
// `import torch, torchvision` alone takes 1.2-1.7 s on the 2-core VM of
// the README's figures, before the model is built or the ranks connect.
// The main tables start reading at once (the hardest case for a first
// epoch); the policies run a second time with this start-up.
const startup = time.Second

// scenario is a dataset size against the tiers.
type scenario struct {
	Name  string `json:"name"`
	About string `json:"about"`
	Bytes int64  `json:"bytes"` // dataset size, before scaling
	// DirectIO: the PFS client keeps no page cache (pfsemu --direct-io);
	// else it keeps one, dropped between epochs. Every scenario runs in
	// both modes.
	DirectIO bool `json:"direct_io"`
}

const (
	mib      = 1 << 20
	ramTier  = 48 * mib
	diskTier = 96 * mib
	meanSize = 128 << 10
)

var scenarios = []scenario{
	{Name: "S1", About: "fits the RAM tier", Bytes: 40 * mib},
	{Name: "S2", About: "2x the RAM tier, fits RAM+disk", Bytes: 2 * ramTier},
	{Name: "S3", About: "larger than all tiers", Bytes: 2 * (ramTier + diskTier) * 2 / 3},
}

// workload is what every configuration runs: DDP-like, 2 ranks of 2
// forked readers, batches of 16, 15 ms of compute per batch, 3 epochs in
// DistributedSampler order.
func workload() dlbench.Workload {
	w := dlbench.DefaultWorkload()
	w.Ranks, w.Workers, w.Batch, w.Compute = 2, 2, 16, 15*time.Millisecond
	return w
}

// pfsOptions is the emulated PFS: a busy Lustre client, with its page
// cache. The scaled-down datasets would fit in that cache, so the driver
// drops it between epochs (dropCaches), as a dataset larger than the
// client's memory would: every epoch's reads reach the PFS, while a file
// read twice at the same moment (by a reader and by augur's copier) is
// served once, as on a real client. With direct, the client keeps no
// page cache at all (a node whose memory training takes, or a mount
// without client caching): every read reaches the PFS; attributes are
// cached alike in both modes.
func pfsOptions(src, mnt string, direct bool) pfsemu.Options {
	o := pfsemu.DefaultOptions(src, mnt)
	o.Bandwidth = 150 * mib
	ct := time.Second
	o.CacheTimeout = &ct
	o.DirectIO = direct
	return o
}

// run is one configuration's outcome in one scenario.
type run struct {
	Config    string          `json:"config"`
	About     string          `json:"about"`
	Skipped   string          `json:"skipped,omitempty"`
	WarmSecs  float64         `json:"warm_seconds,omitempty"`
	WarmPFS   *pfsemu.Stats   `json:"warm_pfs,omitempty"`
	WarmOut   string          `json:"warm_output,omitempty"`
	Result    *dlbench.Result `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	AugurStat json.RawMessage `json:"augur_stat,omitempty"`
	Notes     []string        `json:"notes,omitempty"`
}

// epochs is the sum of the epoch times; total adds warm-up and process
// start-up: the wall time a user waits.
func (r *run) epochs() float64 {
	if r.Result == nil {
		return 0
	}
	return r.Result.TotalSeconds()
}

func (r *run) total() float64 {
	if r.Result == nil {
		return 0
	}
	return r.WarmSecs + r.Result.Seconds
}

type scenarioResult struct {
	scenario
	Samples  int    `json:"samples"`
	Dataset  string `json:"dataset"`
	RAMTier  int64  `json:"ram_tier_bytes"`
	DiskTier int64  `json:"disk_tier_bytes"`
	Runs     []*run `json:"runs"`
	// WithStartup are runs of the same job after a start-up.
	WithStartup []*run  `json:"with_startup,omitempty"`
	Seconds     float64 `json:"seconds"`
	// FirstEpochs are epoch 1 alone of no augur (pfs) and augur's
	// reactive policy, run interleaved for firstRounds rounds: seconds
	// and PFS bytes by config and round.
	FirstEpochs      map[string][]float64 `json:"first_epoch_rounds,omitempty"`
	FirstEpochsBytes map[string][]int64   `json:"first_epoch_rounds_pfs_bytes,omitempty"`
	// PFSRate is what the emulated PFS delivers to many parallel readers
	// (bytes/s): its practical bandwidth, for the epoch-1 bound.
	PFSRate float64 `json:"pfs_deliverable_bytes_per_second"`
}

type report struct {
	Started   time.Time         `json:"started"`
	Seconds   float64           `json:"seconds"`
	Command   string            `json:"command"`
	Host      map[string]any    `json:"host"`
	Workload  dlbench.Workload  `json:"workload"`
	PFS       map[string]any    `json:"pfs"`
	Scenarios []*scenarioResult `json:"scenarios"`
	Policies  map[string]string `json:"policies"`        // policy → "available" or why not
	Large     []*largeResult    `json:"large,omitempty"` // L1-L6
	Fast      []*fastResult     `json:"fast,omitempty"`  // F1, F2
	Nodes     *nodesResult      `json:"nodes,omitempty"` // S4
	// FirstEpoch is R1, per PFS mode and read mode.
	FirstEpoch []*firstEpochResult `json:"first_epoch,omitempty"`
	// WaitMinSide is R1 over files larger than the client's read-ahead,
	// with a page cache, per read mode.
	WaitMinSide []*firstEpochResult `json:"wait_min_side,omitempty"`
	// WaitMaxSides is R1's reader of headers over files under and over
	// wait_max.
	WaitMaxSides []*firstEpochResult `json:"wait_max_sides,omitempty"`
	PyTorch      *pytorchResult      `json:"pytorch,omitempty"`
	Learning     []*learnSetup       `json:"learning,omitempty"`
	Notes        []string            `json:"notes"`
}

type env struct {
	augur, lib, reader, work string
	scale                    float64
	ctx                      context.Context
}

func main() {
	out := flag.String("out", "bench/results", "directory for bench.json and bench.png")
	work := flag.String("work", filepath.Join(os.TempDir(), "augur-bench"), "work directory (datasets, copies, mounts)")
	augur := flag.String("augur", "build/augur", "the augur binary")
	lib := flag.String("lib", "build/libaugur.so", "the shim")
	reader := flag.String("reader", "build/dlreader", "the dlreader binary")
	scale := flag.Float64("scale", 1, "scale dataset and tier sizes")
	pytorch := flag.Bool("pytorch", true, "also run the PyTorch DataLoader comparison")
	only := flag.String("only", "", "comma-separated scenarios to run (default all; L: every large-file scenario L1-L6; F: the fast sources F1-F2)")
	largeRounds := flag.Int("large-rounds", 1, "rounds of the large-file scenarios' configurations, run in turn (medians)")
	fastRounds := flag.Int("fast-rounds", 3, "rounds of the fast-source scenarios' configurations, run in turn (medians)")
	flag.StringVar(&s4Configs, "s4-configs", "", "comma-separated configurations of S4 to run (default all)")
	replot := flag.String("replot", "", "only redraw OUT/bench.png and reprint the tables from this bench.json")
	flag.Parse()
	if *replot != "" {
		if err := redraw(*replot, *out); err != nil {
			fmt.Fprintf(os.Stderr, "make bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := mainErr(*out, *work, *augur, *lib, *reader, *scale, *pytorch, *only, *largeRounds, *fastRounds); err != nil {
		fmt.Fprintf(os.Stderr, "make bench: %v\n", err)
		os.Exit(1)
	}
}

func mainErr(out, work, augur, lib, reader string, scale float64, pytorch bool, only string, largeRounds, fastRounds int) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root: it mounts the emulated PFS (FUSE) and drops the page cache between configurations")
	}
	e := &env{scale: scale, ctx: context.Background()}
	for _, p := range []struct {
		dst *string
		src string
	}{{&e.augur, augur}, {&e.lib, lib}, {&e.reader, reader}, {&e.work, work}} {
		abs, err := filepath.Abs(p.src)
		if err != nil {
			return err
		}
		*p.dst = abs
	}
	for _, f := range []string{e.augur, e.lib, e.reader} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%v (run make first)", err)
		}
	}
	if err := os.MkdirAll(e.work, 0o755); err != nil {
		return err
	}
	start := time.Now()
	rep := &report{Started: start.UTC(), Command: "make bench", Workload: workload(), Policies: map[string]string{},
		Host: map[string]any{"cpus": runtime.NumCPU(), "go": runtime.Version(), "kernel": kernel()}}
	o := pfsOptions("", "", false)
	rep.PFS = map[string]any{"open_latency": o.OpenLatency.String(), "read_latency": o.ReadLatency.String(),
		"meta_latency": o.MetaLatency.String(), "bandwidth": pfsemu.FormatRate(o.Bandwidth),
		"direct_io": "both: each scenario's direct_io", "cache_timeout": o.CacheTimeout.String()}
	rep.Notes = notes
	for _, c := range configs {
		if c.policy == "" {
			continue
		}
		if _, done := rep.Policies[c.policy]; !done {
			rep.Policies[c.policy] = e.probePolicy(c.policy)
		}
	}
	fmt.Printf("make bench: workload %s\n", rep.Workload.Describe())
	fmt.Printf("emulated PFS: open %v, read %v, meta %v, %s shared, with a page cache and with direct I/O; tiers: RAM %s, disk %s\n",
		o.OpenLatency, o.ReadLatency, o.MetaLatency, pfsemu.FormatRate(o.Bandwidth),
		fmtMiB(e.sized(ramTier)), fmtMiB(e.sized(diskTier)))
	for _, c := range configs {
		if c.policy != "" && rep.Policies[c.policy] != "available" {
			fmt.Printf("%s: skipped, %s\n", c.name, rep.Policies[c.policy])
		}
	}
	prog := dlbench.NewProgressLine(os.Stderr)
	for _, s := range scenarios {
		if only != "" && !strings.Contains(","+only+",", ","+s.Name+",") {
			continue
		}
		for _, direct := range []bool{false, true} {
			s.DirectIO = direct
			sr, err := e.runScenario(s, rep.Policies, prog)
			if err != nil {
				return fmt.Errorf("%s: %w", s.Name, err)
			}
			rep.Scenarios = append(rep.Scenarios, sr)
			printScenario(os.Stdout, sr)
		}
	}
	for _, s := range largeWanted(only) {
		lr, err := e.runLarge(s, max(largeRounds, 1), rep.Policies, prog)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		rep.Large = append(rep.Large, lr)
		printLarge(os.Stdout, lr)
	}
	for _, s := range fastWanted(only) {
		fr, err := e.runFast(s, max(fastRounds, 1), rep.Policies, prog)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		rep.Fast = append(rep.Fast, fr)
		printFast(os.Stdout, fr)
	}
	if only == "" || strings.Contains(","+only+",", ",R1,") {
		fr, err := e.runFirstEpoch(prog)
		if err != nil {
			return err
		}
		rep.FirstEpoch = fr
		if rep.WaitMinSide, err = e.runWaitMinSide(prog); err != nil {
			return err
		}
		if rep.WaitMaxSides, err = e.runWaitMaxSides(prog); err != nil {
			return err
		}
	}
	if only == "" || strings.Contains(","+only+",", ",S4,") {
		nr, err := e.runNodes(rep.Policies, prog)
		if err != nil {
			return fmt.Errorf("S4: %w", err)
		}
		rep.Nodes = nr
		printNodes(os.Stdout, nr)
	}
	if pytorch {
		pr, err := e.runPyTorch(rep.Policies)
		if err != nil {
			return fmt.Errorf("pytorch: %w", err)
		}
		rep.PyTorch = pr
		printPyTorch(os.Stdout, pr)
		if rep.Learning, err = e.runLearning(rep.Policies); err != nil {
			return fmt.Errorf("learning: %w", err)
		}
		printLearning(os.Stdout, rep.Learning)
	}
	rep.Seconds = time.Since(start).Seconds()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "bench.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := plotEpochs(filepath.Join(out, "bench.png"), rep); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if err := writeTables(filepath.Join(out, "bench.txt"), rep); err != nil {
		return err
	}
	printSummary(os.Stdout, rep)
	fmt.Printf("\nwrote bench.json, bench.txt and bench.png in %s in %.0fs\n", out, rep.Seconds)
	return nil
}

// writeTables writes every table of rep into the file name.
func writeTables(name string, rep *report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "make bench, %s", rep.Started.Format(time.RFC3339))
	if len(rep.Scenarios) > 0 || rep.PyTorch != nil { // the workload of theirs (L1-L6 give their own)
		fmt.Fprintf(&b, ": workload %s", rep.Workload.Describe())
	}
	fmt.Fprintln(&b)
	for _, sr := range rep.Scenarios {
		printScenario(&b, sr)
	}
	for _, lr := range rep.Large {
		printLarge(&b, lr)
	}
	for _, fr := range rep.FirstEpoch {
		printFirstEpoch(&b, fr)
	}
	for _, fr := range rep.WaitMinSide {
		printWaitMinSide(&b, fr)
	}
	for _, fr := range rep.WaitMaxSides {
		printWaitMaxSide(&b, fr)
	}
	printNodes(&b, rep.Nodes)
	if rep.PyTorch != nil {
		printPyTorch(&b, rep.PyTorch)
	}
	printLearning(&b, rep.Learning)
	printSummary(&b, rep)
	return os.WriteFile(name, []byte(b.String()), 0o644)
}

var notes = []string{
	"Every configuration runs the same C reader (bench/c/dlreader) with the same DistributedSampler order.",
	"The page cache is dropped before every configuration, and again after augur warm, so epoch 1 starts cold everywhere.",
	"Each scenario runs twice: the emulated PFS's client with a page cache, dropped before every epoch (a dataset larger than the client's memory), and with direct I/O (no client cache at all); either way every epoch's reads reach the PFS. Local disk and tiers keep the page cache (the datasets are scaled down and fit it), which flatters local and the disk tier in epochs 2-3.",
	"R1 is MONARCH's best case (one reader, 320 files of 128 KiB, same order for 3 epochs, no compute) under `augur pfsemu`'s defaults in both modes, no augur and augur's reactive policy interleaved for 5 rounds: medians.",
	"Compute is a sleep per batch (an accelerator); JPEG decoding cost appears only in the PyTorch comparison.",
	"augur-warm's total includes the augur warm time; its PFS traffic is reported as warm_pfs.",
}

func (e *env) sized(n int64) int64 { return int64(float64(n) * e.scale) }

// probePolicy asks augur check whether it accepts AUGUR_POLICY=p.
func (e *env) probePolicy(p string) string {
	dir, err := os.MkdirTemp(e.work, "probe-")
	if err != nil {
		return "probe failed: " + err.Error()
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(e.augur, "check")
	for _, d := range []string{"data", "tier"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return "probe failed: " + err.Error()
		}
	}
	cmd.Env = append(os.Environ(), "AUGUR_POLICY="+p, "AUGUR_DATASET="+filepath.Join(dir, "data"),
		"AUGUR_TIERS="+filepath.Join(dir, "tier")+":1MiB", "AUGUR_CONFIG=")
	msg, err := cmd.CombinedOutput()
	if err == nil {
		return "available"
	}
	return fmt.Sprintf("not available yet (augur check rejects AUGUR_POLICY=%s: %s)", p, strings.TrimSpace(lastLine(string(msg))))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func kernel() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

func fmtMiB(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/mib) }

// redraw reprints the tables and redraws the plot of a saved run.
func redraw(from, out string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("%s: %v", from, err)
	}
	for _, sr := range rep.Scenarios {
		printScenario(os.Stdout, sr)
	}
	for _, lr := range rep.Large {
		printLarge(os.Stdout, lr)
	}
	rep.Nodes.bound() // by this version's rule
	printNodes(os.Stdout, rep.Nodes)
	if rep.PyTorch != nil {
		printPyTorch(os.Stdout, rep.PyTorch)
	}
	printLearning(os.Stdout, rep.Learning)
	printSummary(os.Stdout, &rep)
	if err := writeTables(filepath.Join(out, "bench.txt"), &rep); err != nil {
		return err
	}
	return plotEpochs(filepath.Join(out, "bench.png"), &rep)
}
