package dlbench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/augur-hpc/augur/bench/pfsemu"
	"github.com/augur-hpc/augur/seed"
)

var (
	readerOnce sync.Once
	readerBin  string
	readerErr  error
)

// reader compiles bench/c/dlreader once per test binary.
func reader(t *testing.T) string {
	t.Helper()
	readerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dlbench-test-")
		if err != nil {
			readerErr = err
			return
		}
		readerBin, readerErr = BuildReader(filepath.Join("..", "c", "dlreader"), filepath.Join(dir, "dlreader"))
	})
	if readerErr != nil {
		t.Fatal(readerErr)
	}
	return readerBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if readerBin != "" {
		os.RemoveAll(filepath.Dir(readerBin))
	}
	os.Exit(code)
}

func TestPercentiles(t *testing.T) {
	var ns []uint64
	for v := 1000; v >= 1; v-- { // unsorted on purpose
		ns = append(ns, uint64(v)*1000)
	}
	l := Percentiles(ns)
	want := Latency{N: 1000, Mean: 500.5, P50: 500, P95: 950, P99: 990, P999: 999, Max: 1000}
	if *l != want {
		t.Errorf("Percentiles = %+v, want %+v", *l, want)
	}
	if one := Percentiles([]uint64{7000}); one.P50 != 7 || one.P999 != 7 {
		t.Errorf("one value: %+v", *one)
	}
	if Percentiles(nil) != nil {
		t.Error("no values should give nil")
	}
}

func TestOrdersAreDistributedSampler(t *testing.T) {
	const n, ranks, epochs = 10, 3, 2
	o, err := Orders("", n, ranks, epochs, 42)
	if err != nil {
		t.Fatal(err)
	}
	for e := 0; e < epochs; e++ {
		var all []int
		for r := 0; r < ranks; r++ {
			s, err := seed.New(seed.Spec{Sampler: seed.KindDistributed, Len: n, Seed: 42, Replicas: ranks, Rank: r})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(o[e][r], s.Epoch(e)) {
				t.Errorf("epoch %d rank %d: %v, DistributedSampler says %v", e, r, o[e][r], s.Epoch(e))
			}
			if len(o[e][r]) != 4 { // ceil(10/3), padded
				t.Errorf("epoch %d rank %d reads %d samples, want 4", e, r, len(o[e][r]))
			}
			all = append(all, o[e][r]...)
		}
		slices.Sort(all)
		all = slices.Compact(all)
		if len(all) != n {
			t.Errorf("epoch %d: ranks together read %d distinct samples, want %d", e, len(all), n)
		}
	}
	if slices.Equal(o[0][0], o[1][0]) {
		t.Error("epochs 0 and 1 have the same order: set_epoch is not applied")
	}
}

func TestParseFile(t *testing.T) {
	src := `
[global]
epochs = 2
workers = 3
compute = "5ms"
env = ["A=1"]

[dataset]
generate = "/tmp/x"
count = 50
size = "4KiB"

[pfs]
enable = true
bandwidth = "100MiB/s"

[[job]]
name = "first"

[[job]]
name = "second"
workers = 0
no_io = true
`
	f, err := parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Jobs) != 2 || f.Jobs[0].Name != "first" || f.Jobs[1].Name != "second" {
		t.Fatalf("jobs %+v", f.Jobs)
	}
	if f.Jobs[0].Workers != 3 || f.Jobs[1].Workers != 0 || !f.Jobs[1].NoIO || f.Jobs[0].NoIO {
		t.Errorf("overrides wrong: %+v", f.Jobs)
	}
	if f.Jobs[1].Epochs != 2 || f.Jobs[1].Batch != 32 || f.Jobs[1].Env[0] != "A=1" {
		t.Errorf("global or default keys not inherited: %+v", f.Jobs[1])
	}
	w, err := f.Jobs[0].Workload()
	if err != nil || w.Compute != 5*time.Millisecond {
		t.Errorf("Workload = %+v, %v", w, err)
	}
	if f.Dataset.Count != 50 || f.Dataset.Layout != LayoutImageFolder || !f.PFS.Enable {
		t.Errorf("sections: %+v %+v", f.Dataset, f.PFS)
	}
	o, err := f.PFS.Options("/src", "/mnt")
	if err != nil || o.Bandwidth != 100<<20 || o.OpenLatency != pfsemu.DefaultOpenLatency {
		t.Errorf("pfs options %+v, %v", o, err)
	}

	// Flags override every job and the sections.
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	apply := Flags(fs)
	if err := fs.Parse([]string{"--workers", "1", "--no-io=false", "--count", "7", "--direct-io"}); err != nil {
		t.Fatal(err)
	}
	if err := apply(f); err != nil {
		t.Fatal(err)
	}
	if f.Jobs[0].Workers != 1 || f.Jobs[1].Workers != 1 || f.Jobs[1].NoIO || f.Dataset.Count != 7 || !f.PFS.DirectIO {
		t.Errorf("flags not applied: %+v %+v %+v", f.Jobs, f.Dataset, f.PFS)
	}

	for _, bad := range []struct{ src, want string }{
		{"[global]\nepoch = 3\n", `unknown key "epoch"`},
		{"[[job]]\nname = \"a\"\nbogus = 1\n", `unknown key "bogus"`},
		{"[dataset]\ncount = \"x\"\n", "[dataset]"},
		{"[nope]\n", `unknown key "nope"`},
	} {
		if _, err := parse([]byte(bad.src)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("parse(%q) = %v, want an error containing %q", bad.src, err, bad.want)
		}
	}
	js := defaultJobSpec()
	js.ReadMode = "streamed"
	if _, err := js.Workload(); err == nil || !strings.Contains(err.Error(), "read mode") {
		t.Errorf("bad read mode accepted: %v", err)
	}
}

func TestGenerateAndScan(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ds")
	g := GenSpec{Layout: LayoutImageFolder, Count: 25, Size: 1000, SizeStddev: 300, Classes: 4, Seed: 7}
	ds, err := Generate(root, g)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Samples) != 25 || ds.Files != 25 {
		t.Fatalf("%d samples in %d files, want 25", len(ds.Samples), ds.Files)
	}
	want, err := seed.ImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for i, s := range ds.Samples {
		if s.Path != want[i] || s.Record || s.Offset != 0 {
			t.Errorf("sample %d = %+v, torchvision order has %s", i, s, want[i])
		}
		sizes = append(sizes, s.Length)
	}
	if slices.Min(sizes) == slices.Max(sizes) {
		t.Errorf("sizes all equal (%d) with a standard deviation", sizes[0])
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 4 {
		t.Errorf("%d entries in the root, want the 4 class directories only", len(entries))
	}
	// The same spec reuses the files; another regenerates them.
	probe := filepath.Join(root, filepath.FromSlash(ds.Samples[0].Path))
	before, _ := os.Stat(probe)
	time.Sleep(10 * time.Millisecond)
	if _, err := Generate(root, g); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(probe)
	if !after.ModTime().Equal(before.ModTime()) {
		t.Error("the same spec regenerated the dataset")
	}
	g.Count = 30
	if ds, err = Generate(root, g); err != nil || len(ds.Samples) != 30 {
		t.Errorf("changed spec: %v samples, %v", len(ds.Samples), err)
	}

	rec, err := Generate(filepath.Join(t.TempDir(), "rec"), GenSpec{Layout: LayoutRecords, Count: 10, Size: 512, Files: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Samples) != 10 || rec.Files != 3 || rec.Bytes != 5120 {
		t.Fatalf("records: %d samples, %d files, %d bytes", len(rec.Samples), rec.Files, rec.Bytes)
	}
	if s := rec.Samples[5]; !s.Record || s.Path != "shard-0001.rec" || s.Offset != 512 || s.Length != 512 {
		t.Errorf("record 5 = %+v", s)
	}
	if _, err := Generate(t.TempDir(), GenSpec{Layout: LayoutRecords, Count: 3, Size: 10, SizeStddev: 1}); err == nil {
		t.Error("variable-size records accepted")
	}
}

func readIdx(t *testing.T, dir string, e int) []int {
	t.Helper()
	raw, err := readLatencies(filepath.Join(dir, fmt.Sprintf("idx-%d.bin", e)))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int, len(raw))
	for i, v := range raw {
		out[i] = int(v)
	}
	return out
}

// TestRunReadsInSamplerOrder runs the real C reader with forked ranks and
// workers and checks that every position of every rank's order was read,
// in full, and reported.
func TestRunReadsInSamplerOrder(t *testing.T) {
	ds, err := Generate(filepath.Join(t.TempDir(), "ds"), GenSpec{Layout: LayoutFlat, Count: 30, Size: 3000, SizeStddev: 1000})
	if err != nil {
		t.Fatal(err)
	}
	w := Workload{Epochs: 2, Seed: 3, Sampler: "distributed", Ranks: 2, Workers: 2, Batch: 4, Prefetch: 2, ReadMode: ReadWhole}
	work := t.TempDir()
	var progress []Progress
	res, err := Run(context.Background(), "t", ds, w, Exec{Reader: reader(t), WorkDir: work,
		Progress: func(p Progress) { progress = append(progress, p) }})
	if err != nil {
		t.Fatal(err)
	}
	orders, _ := Orders("distributed", 30, 2, 2, 3)
	if len(res.Epochs) != 2 {
		t.Fatalf("%d epochs", len(res.Epochs))
	}
	for e, ep := range res.Epochs {
		want := append(append([]int(nil), orders[e][0]...), orders[e][1]...)
		if got := readIdx(t, work, e+1); !slices.Equal(got, want) {
			t.Errorf("epoch %d read %v, want %v", e+1, got, want)
		}
		var bytes int64
		for _, i := range want {
			bytes += ds.Samples[i].Length
		}
		if ep.Samples != 30 || ep.Bytes != bytes || ep.Errors != 0 {
			t.Errorf("epoch %d: %d samples, %d bytes, %d errors; want 30, %d, 0", e+1, ep.Samples, ep.Bytes, ep.Errors, bytes)
		}
		if ep.Latency == nil || ep.Latency.N != 30 || ep.Latency.P50 <= 0 || ep.Latency.P999 < ep.Latency.P50 {
			t.Errorf("epoch %d latency %+v", e+1, ep.Latency)
		}
		if ep.Seconds <= 0 || ep.Stall < 0 || ep.Stall > ep.Seconds {
			t.Errorf("epoch %d: %.6fs, stall %.6fs", e+1, ep.Seconds, ep.Stall)
		}
	}
	if len(progress) == 0 || progress[0].Epochs != 2 || progress[0].Total != 30 {
		t.Errorf("progress %+v", progress)
	}
	var buf bytes.Buffer
	WriteTable(&buf, res)
	if !strings.Contains(buf.String(), "p99.9") || strings.Count(buf.String(), "\n") < 4 {
		t.Errorf("table:\n%s", buf.String())
	}
}

func TestRunRecordsEveryMode(t *testing.T) {
	ds, err := Generate(filepath.Join(t.TempDir(), "rec"), GenSpec{Layout: LayoutRecords, Count: 24, Size: 5000, Files: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{ReadWhole, ReadPread, ReadMmap} {
		for _, workers := range []int{0, 3} {
			w := Workload{Epochs: 1, Seed: 1, Sampler: "distributed", Ranks: 1, Workers: workers, Batch: 5, Prefetch: 1, ReadMode: mode}
			res, err := Run(context.Background(), mode, ds, w, Exec{Reader: reader(t)})
			if err != nil {
				t.Fatalf("%s, %d workers: %v", mode, workers, err)
			}
			if e := res.Epochs[0]; e.Bytes != 24*5000 || e.Samples != 24 || e.Errors != 0 {
				t.Errorf("%s, %d workers: %+v", mode, workers, e)
			}
		}
	}
}

func TestRunNoIOAndErrors(t *testing.T) {
	ds, err := Generate(filepath.Join(t.TempDir(), "ds"), GenSpec{Layout: LayoutFlat, Count: 12, Size: 100})
	if err != nil {
		t.Fatal(err)
	}
	w := Workload{Epochs: 1, Seed: 1, Sampler: "sequential", Ranks: 1, Workers: 2, Batch: 4, Prefetch: 2,
		ReadMode: ReadWhole, NoIO: true, Compute: 10 * time.Millisecond}
	res, err := Run(context.Background(), "noio", ds, w, Exec{Reader: reader(t)})
	if err != nil {
		t.Fatal(err)
	}
	// Three batches, each sleeping 10ms: a lower bound, whatever the machine.
	if e := res.Epochs[0]; e.Bytes != 0 || e.Samples != 12 || e.Latency != nil || e.Seconds < 0.030 {
		t.Errorf("no-io epoch %+v", e)
	}

	// Start-up comes before the first epoch and outside it.
	w.Startup = 200 * time.Millisecond
	res, err = Run(context.Background(), "startup", ds, w, Exec{Reader: reader(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Overhead < 0.200 || res.Seconds < res.Epochs[0].Seconds+0.200 {
		t.Errorf("with 200ms of start-up: process %.3fs, overhead %.3fs, epoch %.3fs",
			res.Seconds, res.Overhead, res.Epochs[0].Seconds)
	}
	w.Startup = 0

	// A missing sample is an error of that epoch, not the end of the run.
	os.Remove(filepath.Join(ds.Root, filepath.FromSlash(ds.Samples[3].Path)))
	w.NoIO = false
	w.Compute = 0
	res, err = Run(context.Background(), "missing", ds, w, Exec{Reader: reader(t)})
	if err != nil {
		t.Fatal(err)
	}
	if e := res.Epochs[0]; e.Errors != 1 || e.Bytes != 11*100 {
		t.Errorf("with one file missing: %+v", e)
	}

	// A reader that cannot start is an error that says so.
	if _, err := Run(context.Background(), "bad", ds, w, Exec{Reader: "/nonexistent/dlreader"}); err == nil {
		t.Error("a missing reader binary gave no error")
	}
}

func requireFUSE(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts the emulated PFS through FUSE and must run as root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Fatalf("FUSE is unavailable: %v", err)
	}
}

// TestPFSCountersPerEpoch reads through a pfsemu mount with direct I/O:
// each epoch's counters must show exactly its own opens and bytes.
func TestPFSCountersPerEpoch(t *testing.T) {
	requireFUSE(t)
	ds, err := Generate(filepath.Join(t.TempDir(), "ds"), GenSpec{Layout: LayoutImageFolder, Count: 20, Size: 2000, Classes: 2})
	if err != nil {
		t.Fatal(err)
	}
	mnt := t.TempDir()
	srv, err := pfsemu.Mount(pfsemu.Options{Source: ds.Root, Mount: mnt, DirectIO: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Unmount()
	w := Workload{Epochs: 3, Seed: 9, Sampler: "distributed", Ranks: 2, Workers: 1, Batch: 3, Prefetch: 2, ReadMode: ReadPread}
	res, err := Run(context.Background(), "pfs", ds, w, Exec{Reader: reader(t), Root: mnt,
		Counters: func() (pfsemu.Stats, error) { return srv.Stats(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Epochs {
		if e.PFS == nil || e.PFS.Opens != 20 || e.PFS.ReadBytes != 20*2000 || e.Bytes != 20*2000 {
			t.Errorf("epoch %d: reader %d bytes, PFS %+v", e.Epoch, e.Bytes, e.PFS)
		}
	}
}

func TestCommandJSON(t *testing.T) {
	dir := t.TempDir()
	job := filepath.Join(dir, "job.toml")
	os.WriteFile(job, []byte(fmt.Sprintf(`
[global]
epochs = 1
batch = 4
workers = 1

[dataset]
generate = %q
layout = "flat"
count = 8
size = "1KiB"

[[job]]
name = "read"

[[job]]
name = "compute"
no_io = true
`, filepath.Join(dir, "ds"))), 0o644)
	var out, errb bytes.Buffer
	code := Command([]string{"--reader", reader(t), "--json", "-", job}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		Jobs []Result `json:"jobs"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v in %s", err, out.String())
	}
	if len(got.Jobs) != 2 || got.Jobs[0].Name != "read" || got.Jobs[0].Epochs[0].Bytes != 8*1024 ||
		got.Jobs[1].Epochs[0].Bytes != 0 {
		t.Errorf("results %+v", got.Jobs)
	}
	if code := Command([]string{"--epochs", "x"}, &out, &errb); code != 2 {
		t.Errorf("bad flag: exit %d", code)
	}
	if code := Command([]string{"--reader", reader(t), "--read-mode", "nope", job}, &out, &errb); code != 2 {
		t.Errorf("bad read mode: exit %d", code)
	}
}

// TestStatsFileCounters reads an external emulator's stats file, waiting
// for a version written after the call.
func TestStatsFileCounters(t *testing.T) {
	name := filepath.Join(t.TempDir(), "stats.json")
	os.WriteFile(name, []byte(`{"opens": 1, "read_bytes": 10}`), 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(name, old, old)
	get := StatsFileCounters(name, 5*time.Second)
	go func() {
		time.Sleep(50 * time.Millisecond)
		tmp := name + ".tmp"
		os.WriteFile(tmp, []byte(`{"opens": 7, "read_bytes": 70}`), 0o644)
		os.Rename(tmp, name)
	}()
	st, err := get()
	if err != nil {
		t.Fatal(err)
	}
	if st.Opens != 7 || st.ReadBytes != 70 {
		t.Errorf("got the old or a wrong version: %+v", st)
	}
	os.WriteFile(name, []byte(`not json`), 0o644)
	if _, err := StatsFileCounters(name, 0)(); err == nil {
		t.Error("a broken stats file gave no error")
	}
}

// A node of a job of several reads its ranks' part of the job's orders:
// the nodes together read what the job's ranks read, each rank once.
func TestNodeOrdersAreTheJobsRanks(t *testing.T) {
	w := DefaultWorkload()
	w.Ranks, w.Nodes = 2, 3
	job, err := Orders(w.Sampler, 100, 6, w.Epochs, w.Seed)
	if err != nil {
		t.Fatal(err)
	}
	ds := &Dataset{Samples: make([]Sample, 100)}
	for node := range 3 {
		got, err := nodeOrders(w, node, ds)
		if err != nil {
			t.Fatal(err)
		}
		for e := range job {
			if !reflect.DeepEqual(got[e], job[e][node*2:node*2+2]) {
				t.Errorf("node %d epoch %d: its ranks' orders differ from the job's ranks %d-%d", node, e, node*2, node*2+1)
			}
		}
	}
	if _, err := nodeOrders(w, 3, ds); err == nil {
		t.Error("node 3 of 3 accepted")
	}
}

// Two nodes of one job, each a reader of its own, keep their ranks in
// step through the job's barrier file: the node that computes nothing
// waits for the one that computes 20 ms per batch at every step, so its
// epoch lasts at least the other's compute after their first meeting (a
// lower bound no machine beats), and each reads its own ranks' part of
// the job's orders.
func TestNodesKeepInStep(t *testing.T) {
	ds, err := Generate(filepath.Join(t.TempDir(), "ds"), GenSpec{Layout: LayoutFlat, Count: 40, Size: 2000})
	if err != nil {
		t.Fatal(err)
	}
	steps := filepath.Join(t.TempDir(), "steps")
	w := Workload{Epochs: 1, Seed: 5, Sampler: "distributed", Ranks: 1, Nodes: 2, Workers: 0, Batch: 4, Prefetch: 1, ReadMode: ReadWhole}
	slow := w
	slow.Compute = 20 * time.Millisecond
	works := []string{t.TempDir(), t.TempDir()}
	res := make([]*Result, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for node, wl := range []Workload{w, slow} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[node], errs[node] = Run(context.Background(), "node", ds, wl, Exec{Reader: reader(t), Node: node,
				WorkDir: works[node], StepBarrier: steps})
		}()
	}
	wg.Wait()
	for node := range 2 {
		if errs[node] != nil {
			t.Fatalf("node %d: %v", node, errs[node])
		}
	}
	orders, _ := Orders("distributed", 40, 2, 1, 5)
	for node := range 2 {
		if got := readIdx(t, works[node], 1); !slices.Equal(got, orders[0][node]) {
			t.Errorf("node %d read %v; want rank %d's %v", node, got, node, orders[0][node])
		}
	}
	// 20 samples per node in batches of 4: 5 steps. After the first
	// barrier, whenever each node started, the slow one computes 4 more
	// times 20 ms before the last.
	if fast := res[0].Epochs[0]; fast.Seconds < 0.08 || fast.Sync < 0.04 {
		t.Errorf("the node that computes nothing took %.3fs, %.3fs of it waiting for the other; want at least 0.08s and 0.04s",
			fast.Seconds, fast.Sync)
	}
}

// The head mode reads the first 4 KiB of each whole file (all of a
// smaller one), and records whole.
func TestRunHeadReadsHeaders(t *testing.T) {
	for _, tc := range []struct {
		spec GenSpec
		want int64
	}{
		{GenSpec{Layout: LayoutFlat, Count: 6, Size: 10000}, 6 * 4096},
		{GenSpec{Layout: LayoutFlat, Count: 6, Size: 1000}, 6 * 1000},
		{GenSpec{Layout: LayoutRecords, Count: 6, Size: 5000, Files: 2}, 6 * 5000},
	} {
		ds, err := Generate(filepath.Join(t.TempDir(), "ds"), tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		w := Workload{Epochs: 1, Seed: 1, Sampler: "sequential", Ranks: 1, Workers: 0, Batch: 2, Prefetch: 1, ReadMode: ReadHead}
		res, err := Run(context.Background(), "head", ds, w, Exec{Reader: reader(t)})
		if err != nil {
			t.Fatal(err)
		}
		if e := res.Epochs[0]; e.Bytes != tc.want || e.Samples != 6 || e.Errors != 0 {
			t.Errorf("%s of %d bytes: %+v; want %d bytes", tc.spec.Layout, tc.spec.Size, e, tc.want)
		}
	}
}
