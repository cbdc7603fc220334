package main

import (
	"bytes"
	"errors"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augur-hpc/augur/bench/dlbench"
	"github.com/augur-hpc/augur/bench/pfsemu"
	"golang.org/x/sys/unix"
)

func TestConfigTable(t *testing.T) {
	seen := map[string]bool{}
	policies := map[string]bool{}
	for _, c := range configs {
		if seen[c.name] {
			t.Errorf("configuration %s listed twice", c.name)
		}
		seen[c.name] = true
		if c.read != "pfs" && c.read != "local" && c.read != "none" {
			t.Errorf("%s: read %q", c.name, c.read)
		}
		if c.warm && c.policy == "" {
			t.Errorf("%s: warm without the shim", c.name)
		}
		if c.policy != "" {
			policies[c.policy] = true
		}
	}
	for _, want := range []string{"pfs", "local", "noio", "augur-warm"} {
		if !seen[want] {
			t.Errorf("configuration %s missing", want)
		}
	}
	for _, p := range []string{"static", "reactive", "clairvoyant"} {
		if !policies[p] {
			t.Errorf("no configuration for policy %s", p)
		}
	}
}

// fakeAugur writes a script standing in for augur check: it accepts only
// the policies given.
func fakeAugur(t *testing.T, accept ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "augur")
	script := "#!/bin/sh\ncase \"$AUGUR_POLICY\" in\n"
	for _, a := range accept {
		script += a + ") echo ok; exit 0;;\n"
	}
	script += "*) echo \"AUGUR_POLICY: unknown policy \\\"$AUGUR_POLICY\\\" (known: static)\" >&2; exit 1;;\nesac\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProbePolicy(t *testing.T) {
	e := &env{augur: fakeAugur(t, "static"), work: t.TempDir()}
	if got := e.probePolicy("static"); got != "available" {
		t.Errorf("static: %q", got)
	}
	got := e.probePolicy("reactive")
	if !strings.HasPrefix(got, "not available yet") || !strings.Contains(got, `unknown policy "reactive"`) {
		t.Errorf("reactive: %q", got)
	}
	if entries, _ := os.ReadDir(e.work); len(entries) != 0 {
		t.Errorf("probe left %d entries in the work directory", len(entries))
	}
}

func result(name string, secs ...float64) *dlbench.Result {
	r := &dlbench.Result{Name: name}
	for i, s := range secs {
		r.Epochs = append(r.Epochs, dlbench.Epoch{Epoch: i + 1, Seconds: s})
		r.Seconds += s
	}
	return r
}

func TestTablesAndPlot(t *testing.T) {
	sr := &scenarioResult{scenario: scenario{Name: "S1", About: "fits"}, Runs: []*run{
		{Config: "pfs", Result: result("pfs", 4, 4, 4)},
		{Config: "local", Result: result("local", 1, 1, 1)},
		{Config: "augur-warm", WarmSecs: 3, Result: result("augur-warm", 1, 1, 1)},
		{Config: "augur-reactive", Skipped: "not available yet (test)"},
	}}
	var b bytes.Buffer
	printScenario(&b, sr)
	out := b.String()
	// augur-warm: total 3 + 3 = 6 s: 2.00 x local, pfs (12 s) / 6 = 2.00.
	if !strings.Contains(out, "| augur-warm | 1.00 | 1.00 | 1.00 | 3.00 | 6.00 | 2.00 | 2.00 |") {
		t.Errorf("augur-warm row wrong:\n%s", out)
	}
	if !strings.Contains(out, "| pfs | 4.00 | 4.00 | 4.00 | - | 12.00 | 4.00 | 1.00 |") {
		t.Errorf("pfs row wrong:\n%s", out)
	}
	if !strings.Contains(out, "| augur-reactive | not available yet (test) |") {
		t.Errorf("skipped row wrong:\n%s", out)
	}
	b.Reset()
	printSummary(&b, &report{Scenarios: []*scenarioResult{sr}})
	if !strings.Contains(b.String(), "| S1 | augur-warm | 6.00 | 2.00 | 2.00 |") || strings.Contains(b.String(), "reactive") {
		t.Errorf("summary:\n%s", b.String())
	}

	name := filepath.Join(t.TempDir(), "bench.png")
	if err := plotEpochs(name, &report{Scenarios: []*scenarioResult{sr, sr, sr}}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 500 {
		t.Errorf("plot is %v", b)
	}
}

// TestEnsureMountedRemounts: a mount lost to an outside unmount is
// replaced, and the run says so.
func TestEnsureMountedRemounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts the emulated PFS through FUSE and must run as root")
	}
	src, mnt := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o644)
	o := pfsemu.Options{Source: src, Mount: mnt, Logf: t.Logf}
	srv, err := pfsemu.Mount(o)
	if err != nil {
		t.Fatal(err)
	}
	r := &run{}
	if same, err := ensureMounted(srv, o, r); err != nil || same != srv || len(r.Notes) != 0 {
		t.Fatalf("live mount replaced: %v, notes %v", err, r.Notes)
	}
	if err := unix.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	<-srv.Done()
	n, err := ensureMounted(srv, o, r)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Unmount()
	if b, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(b) != "data" {
		t.Errorf("after remount: %q, %v", b, err)
	}
	if len(r.Notes) != 1 {
		t.Errorf("notes %v", r.Notes)
	}
}

// TestMountPointClearsDeadMount: a mount whose server is gone ("transport
// endpoint is not connected") is detached so the next run can mount there.
func TestMountPointClearsDeadMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts the emulated PFS through FUSE and must run as root")
	}
	src, mnt := t.TempDir(), t.TempDir()
	var uncached time.Duration // the kernel asks the (dead) server for every stat
	srv, err := pfsemu.Mount(pfsemu.Options{Source: src, Mount: mnt, Logf: t.Logf, CacheTimeout: &uncached})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Unmount()
	// Abort the connection, as a killed server leaves it.
	mountFusectl(t)
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil {
		t.Fatal(err)
	}
	abort := fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", unix.Minor(st.Dev))
	if err := os.WriteFile(abort, []byte("1"), 0o200); err != nil {
		t.Fatalf("aborting the connection: %v", err)
	}
	if _, err := os.Stat(mnt); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("after abort: stat = %v, want ENOTCONN", err)
	}
	if err := mountPoint(mnt); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(mnt); err != nil || !fi.IsDir() {
		t.Errorf("mount point after mountPoint: %v", err)
	}
}

// mountFusectl mounts the FUSE control filesystem, through which a test
// aborts a connection, unless it is mounted; a fresh machine has it
// unmounted. What this test mounted it unmounts.
func mountFusectl(t *testing.T) {
	const dir = "/sys/fs/fuse/connections"
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatalf("%s: %v (is the fuse module loaded?)", dir, err)
	}
	const fusectlMagic = 0x65735543
	if fs.Type == fusectlMagic {
		return
	}
	if err := unix.Mount("none", dir, "fusectl", 0, ""); err != nil {
		t.Fatalf("mount -t fusectl none %s: %v", dir, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) })
}

// TestHostBusy: the S4 table gives the share of the host's processors
// busy in each epoch, read from /proc/stat.
func TestHostBusy(t *testing.T) {
	if got := (hostCPU{busy: 150, total: 300}).busySince(hostCPU{busy: 100, total: 200}); got != 0.5 {
		t.Errorf("busySince = %v, want 0.5", got)
	}
	if got := (hostCPU{busy: 150, total: 300}).busySince(hostCPU{}); got != 0 {
		t.Errorf("busySince with nothing read before = %v, want 0", got)
	}
	a := readHostCPU()
	if a.total == 0 || a.busy > a.total {
		t.Fatalf("/proc/stat read as %+v", a)
	}
	var b bytes.Buffer
	printNodes(&b, &nodesResult{Nodes: 4, Bytes: 1e8, TierBytes: 1e7, LinkRate: 5e7, PFS: "50MiB/s",
		Runs: []*nodesRun{{Config: "pfs", Epochs: []nodesEpoch{{Epoch: 1, Seconds: 3, Bound: 2, Stall: 1, PFSBytes: 1e8, HostBusy: 0.456}}}}})
	if want := "| pfs | 1 | 3.00 | 2.00 | 1.50 | 1.00 | 100.0 | 0.0 | 46% | 1.00 |"; !strings.Contains(b.String(), want) {
		t.Errorf("S4 row: want %q in\n%s", want, b.String())
	}
	// An older bench.json has no host_cpu_busy: the table says so, not 0%.
	b.Reset()
	printNodes(&b, &nodesResult{Nodes: 4, Bytes: 1e8, TierBytes: 1e7, LinkRate: 5e7, PFS: "100MiB/s",
		Runs: []*nodesRun{{Config: "pfs", Epochs: []nodesEpoch{{Epoch: 1, Seconds: 3, Bound: 2, Stall: 1, PFSBytes: 1e8}}}}})
	if want := "| pfs | 1 | 3.00 | 2.00 | 1.50 | 1.00 | 100.0 | 0.0 | - | 1.00 |"; !strings.Contains(b.String(), want) {
		t.Errorf("S4 row without host_cpu_busy: want %q in\n%s", want, b.String())
	}
}

// -only picks large-file scenarios by name, or all of them by L.
func TestLargeWanted(t *testing.T) {
	names := func(only string) string {
		var n []string
		for _, s := range largeWanted(only) {
			n = append(n, s.Name)
		}
		return strings.Join(n, ",")
	}
	for only, want := range map[string]string{"": "L1,L2,L3,L4,L5,L6", "L": "L1,L2,L3,L4,L5,L6",
		"L2,S1,L6": "L2,L6", "S1,R1": "", "L10": ""} {
		if got := names(only); got != want {
			t.Errorf("-only %q: %q, want %q", only, got, want)
		}
	}
	for _, s := range largeScenarios {
		w := largeWorkload(s)
		if err := w.Validate(); err != nil || !w.Verify {
			t.Errorf("%s: workload %+v: %v; every sample must be checked", s.Name, w, err)
		}
	}
}

// A large-file table gives each configuration's median epochs over the
// rounds, epoch 1 against no augur's, epochs 2+ against local's, and the
// PFS's bytes against the dataset.
func TestLargeTable(t *testing.T) {
	withPFS := func(name string, bytes int64, secs ...float64) *dlbench.Result {
		r := result(name, secs...)
		for i := range r.Epochs {
			r.Epochs[i].PFS = &pfsemu.Stats{ReadBytes: bytes}
		}
		return r
	}
	s := largeScenarios[0]
	lr := &largeResult{largeScenario: s, Bytes: 100, Workload: largeWorkload(s), PFS: map[string]string{"bandwidth": "200MiB/s"}}
	for _, round := range [][]float64{{4, 1, 2}, {6, 3, 2}, {5, 2, 2}} {
		lr.Rounds = append(lr.Rounds, []*run{
			{Config: "pfs", Result: withPFS("pfs", 100, 4, 4, 4)},
			{Config: "local", Result: result("local", 1, 1, 1)},
			{Config: "augur-reactive", Result: withPFS("augur-reactive", 50, round...)},
			{Config: "augur-clairvoyant", Error: "3 samples read wrong bytes"},
		})
	}
	var b bytes.Buffer
	printLarge(&b, lr)
	out := b.String()
	// reactive: medians 5, 2, 2; 5/4 = 1.25; its epochs 2+ average 2 against local's 1.
	for _, want := range []string{
		"| pfs | 4.00 | 4.00 | 4.00 | 1.00 | 4.00 |",
		"| augur-reactive | 5.00 | 2.00 | 2.00 | 1.25 | 2.00 | 0.00 | 0.50 · 0.50 · 0.50 | 1.50 | - |",
		"| local | 1.00 | 1.00 | 1.00 | 0.25 | 1.00 | 0.00 | - | - | - |",
		"| augur-clairvoyant | failed: 3 samples read wrong bytes |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	}
}
