// Command shimbench measures what the shim costs, side by side in one
// run, as ratios of "with the shim" to "without":
//
//	(a) non-dataset open+read+close of a small file, and a 4 KiB pread
//	    from the page cache (target: under 3%), for a single-threaded host
//	    and a multi-threaded one (every training framework is: Python with
//	    torch runs OpenMP and loader threads). The measured processes run
//	    under a live leader (this process, as `augur run` would be), so
//	    they take the configuration from the segment and never start a Go
//	    runtime: a single-threaded host stays single-threaded;
//	(b) reading dataset files through the shim while they are in the RAM
//	    tier vs. reading the tier files directly (target: under 5%); and
//	    4 KiB files, at small-file rates: served from the tier (under
//	    10%), and no tier holding them (under 5%);
//	(c) the start-up cost the preload adds to /bin/true.
//
// The readers are a small C program (bench/c/micro.c) calling libc, as
// training frameworks do. Each pair is measured in alternating rounds and
// the medians compared, so drift on a shared machine hits both sides.
//
//	go run ./bench/shimbench [-rounds 21] [-json FILE]
package main

import (
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/augur-hpc/augur/shim"
	"github.com/augur-hpc/augur/tiering"
	"github.com/rs/zerolog"
)

// Result is one measured pair. Spread is the middle half (25th to 75th
// percentile) of the rounds' own ratios, with to without in the same
// round: how much the host moved the figure.
type Result struct {
	Name    string    `json:"name"`
	Without float64   `json:"without_ns"`
	With    float64   `json:"with_ns"`
	Ratio   float64   `json:"ratio"`
	Spread  []float64 `json:"round_ratios_iqr,omitempty"`
	Target  float64   `json:"target_ratio,omitempty"`
}

func main() {
	rounds := flag.Int("rounds", 21, "alternating rounds per measurement")
	jsonOut := flag.String("json", "", "also write the results as JSON to this file")
	lib := flag.String("lib", "build/libaugur.so", "the shim library")
	instr := flag.Bool("instructions", false, "also count instructions per call with valgrind (callgrind; slow)")
	flag.Parse()
	if err := run(*rounds, *lib, *jsonOut, *instr); err != nil {
		fmt.Fprintln(os.Stderr, "shimbench:", err)
		os.Exit(1)
	}
}

func run(rounds int, lib, jsonOut string, instr bool) error {
	lib, _ = filepath.Abs(lib)
	if _, err := os.Stat(lib); err != nil {
		return fmt.Errorf("%s: %w (run make build)", lib, err)
	}
	// This process (the job's leader) on CPU 0, the measured processes on
	// CPU 1: they never take turns on one core, which made the ratios
	// move by several percent from run to run.
	if out, err := exec.Command("taskset", "-a", "-p", "-c", "0", strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
		return fmt.Errorf("taskset: %v: %s", err, out)
	}
	w, err := newWorld(lib)
	if err != nil {
		return err
	}
	defer w.close()
	results := []Result{
		w.pair("(a) open+read+close, non-dataset, 1 thread", 0.03, rounds,
			[]string{"orc", w.small, "40000"}, []string{"orc", w.small, "40000"}),
		w.pair("(a) open+read+close, non-dataset, threaded", 0.03, rounds,
			[]string{"orc", w.small, "40000", "mt"}, []string{"orc", w.small, "40000", "mt"}),
		w.pair("(a) pread 4 KiB, 1 thread", 0.03, rounds,
			[]string{"pread", w.small, "200000"}, []string{"pread", w.small, "200000"}),
		w.pair("(a) pread 4 KiB, threaded", 0.03, rounds,
			[]string{"pread", w.small, "200000", "mt"}, []string{"pread", w.small, "200000", "mt"}),
		w.pair("(b) dataset files from the RAM tier", 0.05, rounds,
			[]string{"files", w.big.copies, "20", "mt"}, []string{"files", w.big.data, "20", "mt"}),
		w.pair("(b) 4 KiB dataset files from the RAM tier", 0.10, rounds,
			[]string{"files", w.small4k.copies, "20", "mt"}, []string{"files", w.small4k.data, "20", "mt"}),
		w.pair("(b) 4 KiB dataset files, not in a tier", 0.05, rounds,
			[]string{"files", w.missed.data, "20", "mt"}, []string{"files", w.missed.data, "20", "mt"}),
		w.startup(rounds),
	}
	fmt.Printf("%-46s %14s %14s %8s %13s %8s\n", "measurement", "without", "with shim", "ratio", "rounds' IQR", "target")
	for _, r := range results {
		target := "-"
		if r.Target > 0 {
			target = fmt.Sprintf("<%.2f", 1+r.Target)
		}
		spread := "-"
		if len(r.Spread) == 2 {
			spread = fmt.Sprintf("%.3f-%.3f", r.Spread[0], r.Spread[1])
		}
		fmt.Printf("%-46s %11.0f ns %11.0f ns %8.3f %13s %8s\n", r.Name, r.Without, r.With, r.Ratio, spread, target)
	}
	fmt.Printf("(%d alternating rounds, medians, and the middle half of the rounds' own ratios; %d files of %d KiB,\n"+
		" and %d of 4 KiB each way, in (b); %s)\n", rounds, nFiles, fileSize>>10, nSmall, runtime.Version())
	if instr {
		ir, err := w.instructions()
		if err != nil {
			return err
		}
		fmt.Printf("\n%-46s %14s %14s %8s\n", "per operation (instructions: calling thread)", "without", "with shim", "added")
		for _, r := range ir {
			fmt.Printf("%-46s %14.1f %14.1f %8.1f\n", r.Name, r.Without, r.With, r.With-r.Without)
		}
		fmt.Println("(callgrind; the difference of two runs of n and 2n calls, so start-up cancels out)")
		results = append(results, ir...)
	}
	fmt.Printf("\n%-46s %14s %14s %14s %8s %8s\n", "the leader's processor (static policy)", "ns per open",
		"events per open", "ns per event", "100k/s", "700k/s")
	for _, c := range w.leaderShare() {
		share := func(rate float64) string {
			return fmt.Sprintf("%.1f%%", 100*rate*c.perOpen/1e9/float64(runtime.NumCPU()))
		}
		perEvent := "-" // no event: the leader's time is its own polling
		results = append(results, Result{Name: "leader's processor ns per open, " + c.name, With: c.perOpen})
		if c.events > 0 {
			perEvent = fmt.Sprintf("%.0f", c.perEvent)
			results = append(results, Result{Name: "leader's processor ns per event, " + c.name, With: c.perEvent})
		}
		fmt.Printf("%-46s %14.0f %14.3f %14s %8s %8s\n", c.name, c.perOpen, c.events/c.opens, perEvent,
			share(100e3), share(700e3))
	}
	fmt.Printf("(its share of the node's %d processors at 100k and 700k opens/s: the rate times its time per open)\n",
		runtime.NumCPU())
	if jsonOut != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		return os.WriteFile(jsonOut, append(b, '\n'), 0o644)
	}
	return nil
}

const (
	nFiles   = 256
	fileSize = 128 << 10
	nSmall   = 1024 // files of 4 KiB: the rate of opens the serving path must keep up with
)

// fileSet is a dataset's files, listed by path (data) and by their
// copies' paths in the RAM tier (copies, "" when not published).
type fileSet struct{ data, copies string }

// world is the scratch setup: a dataset on disk, its copies in a RAM
// tier, a small non-dataset file, and this process as the job's leader
// (as `augur run` would be), so the measured processes only serve.
type world struct {
	dir, ram, micro, lib string
	small                string
	big, small4k, missed fileSet
	env                  []string
	leader               *shim.Leader
	seg                  *shim.Segment
}

func newWorld(lib string) (*world, error) {
	dir, err := os.MkdirTemp("", "shimbench-")
	if err != nil {
		return nil, err
	}
	ram, err := os.MkdirTemp("/dev/shm", "shimbench-")
	if err != nil {
		return nil, err
	}
	w := &world{dir: dir, ram: ram, lib: lib, micro: filepath.Join(dir, "micro")}
	src := filepath.Join(filepath.Dir(lib), "..", "bench", "c", "micro.c")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", w.micro, src).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("gcc micro.c: %v\n%s", err, out)
	}
	w.small = filepath.Join(dir, "small")
	os.WriteFile(w.small, make([]byte, 4096), 0o644)
	tier, err := tiering.Open(tiering.Tier{Path: w.ram, Capacity: 1 << 30})
	if err != nil {
		return nil, err
	}
	defer tier.Close()
	for _, m := range []struct {
		set     *fileSet
		name    string
		n, size int
		publish bool
	}{{&w.big, "big", nFiles, fileSize, true}, {&w.small4k, "small", nSmall, 4096, true}, {&w.missed, "missed", nSmall, 4096, false}} {
		if *m.set, err = w.makeFiles(tier, m.name, m.n, m.size, m.publish); err != nil {
			return nil, err
		}
	}
	job := "shimbench-" + strconv.Itoa(os.Getpid())
	w.env = append(os.Environ(), "AUGUR_DATASET="+filepath.Join(dir, "ds"),
		"AUGUR_TIERS="+ram+":1GiB", "AUGUR_JOB="+job, "AUGUR_LOG=error")
	for _, kv := range w.env[len(w.env)-4:] {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	cfg, err := shim.Load()
	if err != nil {
		return nil, err
	}
	if w.seg, err = shim.AttachSegment(job); err != nil {
		return nil, err
	}
	w.leader, err = shim.Lead(cfg, w.seg, zerolog.Nop())
	return w, err
}

// makeFiles writes n files of size bytes under the dataset's directory
// name, publishes each into the RAM tier if publish, and lists both the
// dataset paths and the copy paths.
func (w *world) makeFiles(tier *tiering.Tree, name string, n, size int, publish bool) (fileSet, error) {
	var data, copies []string
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		p := filepath.Join(w.dir, "ds", name, fmt.Sprintf("c%d", i%8), fmt.Sprintf("f%04d.bin", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		rand.Read(buf)
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			return fileSet{}, err
		}
		data = append(data, p)
		if publish {
			if _, err := tier.Publish(p); err != nil {
				return fileSet{}, err
			}
			cp, _ := tiering.CopyPath(w.ram, p)
			copies = append(copies, cp)
		}
	}
	set := fileSet{data: filepath.Join(w.dir, name+".data")}
	if err := os.WriteFile(set.data, []byte(strings.Join(data, "\n")+"\n"), 0o644); err != nil || !publish {
		return set, err
	}
	set.copies = filepath.Join(w.dir, name+".copies")
	return set, os.WriteFile(set.copies, []byte(strings.Join(copies, "\n")+"\n"), 0o644)
}

func (w *world) close() {
	w.leader.Close()
	os.RemoveAll(w.dir)
	os.RemoveAll(w.ram)
	shim.RemoveJob(w.seg.Job)
}

// micro runs the C reader once and returns its ns per operation.
func (w *world) microRun(preload bool, args []string) float64 {
	cmd := exec.Command("taskset", append([]string{"-c", "1", w.micro}, args...)...) // see run
	cmd.Env = w.env
	if preload {
		cmd.Env = append(cmd.Env, "LD_PRELOAD="+w.lib)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "shimbench: %v: %v\n%s", args, err, out)
		os.Exit(1)
	}
	var ns float64
	fmt.Sscanf(strings.TrimSpace(string(out)), "ns_per_op %f", &ns)
	return ns
}

// pair measures without (plain args) and with the shim (shim args) in
// alternating rounds.
func (w *world) pair(name string, target float64, rounds int, plain, withShim []string) Result {
	var a, b []float64
	w.microRun(false, plain) // warm the page cache
	for i := 0; i < rounds; i++ {
		if i%2 == 0 {
			a = append(a, w.microRun(false, plain))
			b = append(b, w.microRun(true, withShim))
		} else {
			b = append(b, w.microRun(true, withShim))
			a = append(a, w.microRun(false, plain))
		}
	}
	return result(name, target, a, b)
}

// leaderCost is the processor time the job's leader spends per open of
// the measured processes and per event it consumes.
type leaderCost struct {
	name              string
	perOpen, perEvent float64 // ns
	opens, events     float64
}

// leaderShare measures leaderCost, this process being the leader, for
// 4 KiB dataset files served from the RAM tier and for files no tier
// holds: the leader's share of the node at a rate of opens is that rate
// times its time per open.
func (w *world) leaderShare() []leaderCost {
	var out []leaderCost
	for _, m := range []struct{ name, list string }{{"served", w.small4k.data}, {"missed", w.missed.data}} {
		const passes = 100
		before, events := cpuTime(), w.seg.Stats().Events
		w.microRun(true, []string{"files", m.list, strconv.Itoa(passes), "mt"})
		time.Sleep(200 * time.Millisecond) // the leader drains the ring
		cpu, ev := float64(cpuTime()-before), float64(w.seg.Stats().Events-events)
		out = append(out, leaderCost{m.name, cpu / (passes * nSmall), cpu / max(ev, 1), passes * nSmall, ev})
	}
	return out
}

// cpuTime is this process's processor time (user and system), in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// startup times /bin/true with and without the preload.
func (w *world) startup(rounds int) Result {
	const perRound = 40
	timeIt := func(preload bool) float64 {
		t0 := time.Now()
		for i := 0; i < perRound; i++ {
			cmd := exec.Command("/bin/true")
			cmd.Env = w.env
			if preload {
				cmd.Env = append(cmd.Env, "LD_PRELOAD="+w.lib)
			}
			cmd.Run()
		}
		return float64(time.Since(t0).Nanoseconds()) / perRound
	}
	var a, b []float64
	for i := 0; i < rounds; i++ {
		a = append(a, timeIt(false))
		b = append(b, timeIt(true))
	}
	return result("(c) start-up of /bin/true", 0, a, b)
}

func result(name string, target float64, a, b []float64) Result {
	ma, mb := median(a), median(b)
	ratios := make([]float64, len(a))
	for i := range a {
		ratios[i] = b[i] / a[i]
	}
	return Result{Name: name, Without: ma, With: mb, Ratio: mb / ma, Target: target,
		Spread: []float64{quantile(ratios, 0.25), quantile(ratios, 0.75)}}
}

func median(xs []float64) float64 { return quantile(xs, 0.5) }

// quantile is the q-quantile of xs, by rank.
func quantile(xs []float64, q float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}

// instructions counts, with callgrind, the instructions the calling
// thread executes per call with and without the shim, and with strace
// the system calls: unlike time, the counts do not depend on what else
// the machine does. The kernel's work in a call is not counted.
func (w *world) instructions() ([]Result, error) {
	var out []Result
	for _, m := range []struct {
		name, mode    string
		plain, served string // the path (or list) read without the shim, and with it
		n, per        int    // calls (passes over a list) and operations each
	}{
		{"(a) open+read+close, non-dataset", "orc", w.small, w.small, 10000, 1},
		{"(a) pread 4 KiB", "pread", w.small, w.small, 100000, 1},
		{"(b) 4 KiB dataset file from the RAM tier", "files", w.small4k.copies, w.small4k.data, 4, nSmall},
		{"(b) 4 KiB dataset file, not in a tier", "files", w.missed.data, w.missed.data, 4, nSmall},
	} {
		var per, calls [2]float64
		for i, preload := range []bool{false, true} {
			path := m.plain
			if preload {
				path = m.served
			}
			a, err := w.callgrind(preload, m.mode, path, m.n)
			if err != nil {
				return nil, err
			}
			b, err := w.callgrind(preload, m.mode, path, 2*m.n)
			if err != nil {
				return nil, err
			}
			per[i] = float64(b-a) / float64(m.n*m.per)
			a, err = w.syscalls(preload, m.mode, path, m.n)
			if err != nil {
				return nil, err
			}
			b, err = w.syscalls(preload, m.mode, path, 2*m.n)
			if err != nil {
				return nil, err
			}
			calls[i] = float64(b-a) / float64(m.n*m.per)
		}
		out = append(out, Result{Name: m.name + " (instructions)", Without: per[0], With: per[1], Ratio: per[1] / per[0]},
			Result{Name: m.name + " (system calls)", Without: calls[0], With: calls[1], Ratio: calls[1] / calls[0]})
	}
	return out, nil
}

// syscalls runs micro under strace and returns the system calls of all
// its threads.
func (w *world) syscalls(preload bool, mode, path string, n int) (int64, error) {
	out := filepath.Join(w.dir, fmt.Sprintf("st-%v-%s-%s-%d", preload, mode, filepath.Base(path), n))
	cmd := exec.Command("strace", "-f", "-c", "-o", out, w.micro, mode, path, strconv.Itoa(n), "mt")
	cmd.Env = w.env
	if preload {
		cmd.Env = append(cmd.Env, "LD_PRELOAD="+w.lib)
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("strace (test/deps.sh installs it): %v\n%s", err, lastLine(string(msg)))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 5 && f[len(f)-1] == "total" {
			return strconv.ParseInt(f[3], 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no total", out)
}

// callgrind runs micro under valgrind and returns the instructions of its
// main thread. Valgrind 3.19 now and then aborts on the Go runtime's
// signals (an assertion in its own signal bookkeeping); such a run is
// repeated, up to three times.
func (w *world) callgrind(preload bool, mode, path string, n int) (int64, error) {
	var err error
	for try := 0; try < 3; try++ {
		var v int64
		if v, err = w.callgrindOnce(preload, mode, path, n); err == nil {
			return v, nil
		}
	}
	return 0, err
}

func (w *world) callgrindOnce(preload bool, mode, path string, n int) (int64, error) {
	out := filepath.Join(w.dir, fmt.Sprintf("cg-%v-%s-%s-%d", preload, mode, filepath.Base(path), n))
	cmd := exec.Command("valgrind", "--tool=callgrind", "--separate-threads=yes",
		"--callgrind-out-file="+out, w.micro, mode, path, strconv.Itoa(n), "mt")
	cmd.Env = w.env
	if preload {
		cmd.Env = append(cmd.Env, "LD_PRELOAD="+w.lib)
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("valgrind (apt install valgrind): %v\n%s", err, lastLine(string(msg)))
	}
	b, err := os.ReadFile(out + "-01")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "summary: "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s-01: no summary", out)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
