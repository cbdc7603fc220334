package test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/augur-hpc/augur/bench/pfsemu"
)

// mountPFS serves c.Dataset through the PFS emulator at a new mount
// point, which becomes the case's dataset root, and returns the server,
// whose counters are the independent measure of what the shared
// filesystem served.
func mountPFS(t *testing.T, c *Case, bandwidth float64) *pfsemu.Server {
	t.Helper()
	srv := mountPFSWith(t, c, func(o *pfsemu.Options) {
		o.OpenLatency, o.ReadLatency, o.MetaLatency = 0, 0, 0
		o.Bandwidth = bandwidth
	})
	c.Set("AUGUR_DATASET=" + filepath.Join(c.Dir, "pfs"))
	return srv
}

// mountPFSWith serves c.Dataset through the emulator at c.Dir/pfs, with
// the command's defaults as set tells.
func mountPFSWith(t *testing.T, c *Case, set func(*pfsemu.Options)) *pfsemu.Server {
	t.Helper()
	mnt := filepath.Join(c.Dir, "pfs")
	must(t, os.MkdirAll(mnt, 0o755))
	opts := pfsemu.DefaultOptions(c.Dataset, mnt)
	set(&opts)
	opts.Logf = t.Logf
	srv, err := pfsemu.Mount(opts)
	if err != nil {
		t.Fatalf("pfsemu (needs root and /dev/fuse): %v", err)
	}
	t.Cleanup(func() { srv.Unmount() })
	return srv
}

func dropCaches(t *testing.T) {
	t.Helper()
	syscall.Sync()
	must(t, os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200))
}

// augurRun runs `augur run` (a new job each time) with a C-free reader:
// cat of every file, whose output is compared with the originals.
func augurRun(t *testing.T, c *Case, files []string, want []byte) {
	t.Helper()
	out, _ := c.AugurRun(append([]string{"--", "cat"}, files...)...)
	if out != string(want) {
		t.Fatalf("augur run cat: %d bytes, want %d", len(out), len(want))
	}
}

// Copies persist across jobs and are validated at start: a second job on
// the node starts hot and reads no data from the shared filesystem, and
// the first read each file from it once (the copy reads the pages the
// reader just brought into the page cache).
func TestWarmRestartReadsNothingFromPFS(t *testing.T) {
	c := NewCase(t)
	c.Set("AUGUR_POLICY=reactive")
	src := c.RandomFiles("cls", 10, 200_000)
	srv := mountPFS(t, c, 0)
	var files []string
	var want []byte
	for _, f := range src {
		files = append(files, filepath.Join(c.Dir, "pfs", "cls", filepath.Base(f)))
		b, _ := os.ReadFile(f)
		want = append(want, b...)
	}
	dropCaches(t)
	before := srv.Stats()
	augurRun(t, c, files, want) // job 1: reads the PFS, copies in the background
	// The copies of job 1 finish before its leader (augur run) exits.
	job1 := srv.Stats().ReadBytes - before.ReadBytes
	if job1 > int64(len(want))*11/10 {
		t.Errorf("job 1 read %d bytes from the PFS, want at most 1.1 x %d", job1, len(want))
	}
	for _, f := range files {
		if _, err := os.Stat(c.CopyOf(c.RAM, f)); err != nil {
			t.Fatalf("job 1 left no copy of %s", f)
		}
	}
	dropCaches(t)
	before = srv.Stats()
	augurRun(t, c, files, want) // job 2: starts hot
	if d := srv.Stats(); d.Reads != before.Reads || d.ReadBytes != before.ReadBytes {
		t.Errorf("job 2 read %d bytes in %d reads from the PFS, want none",
			d.ReadBytes-before.ReadBytes, d.Reads-before.Reads)
	}
	// Control: without augur the same reads do reach the PFS, so the
	// zero above is augur's doing and not the page cache's.
	dropCaches(t)
	before = srv.Stats()
	out, err := exec.Command("cat", files...).Output()
	if err != nil || !bytes.Equal(out, want) {
		t.Fatal("plain cat read wrong bytes")
	}
	if srv.Stats().ReadBytes-before.ReadBytes < int64(len(want)) {
		t.Fatal("control run did not reach the PFS: the measurement cannot tell")
	}
}

// A leader killed with SIGKILL in the middle of a copy leaves at most a
// temporary file: no partial copy is ever served, and the next job's
// leader clears it and goes on.
func TestLeaderKilledMidCopy(t *testing.T) {
	c := NewCase(t)
	c.Set("AUGUR_POLICY=reactive")
	data := bytes.Repeat([]byte("0123456789abcdef"), 6<<20/16)
	f := c.Write("big/records.bin", data)
	mountPFS(t, c, 2<<20) // 2 MiB/s: the copy takes about 3 s
	pf := filepath.Join(c.Dir, "pfs", "big", filepath.Base(f))
	cp := c.CopyOf(c.RAM, pf)
	// The reader reads 4 KiB (the leader then copies the whole file) and
	// waits; augur run is the leader.
	cmd := exec.Command(Augur, "run", "--", Python, "-c",
		"import sys, time; f = open(sys.argv[1], 'rb'); f.read(4096); time.sleep(120)", pf)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(t, cmd.Start())
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	tmp := filepath.Join(c.RAM, "tmp")
	deadline := time.Now().Add(time.Minute)
	for {
		entries, _ := os.ReadDir(tmp)
		if len(entries) > 0 {
			if info, err := entries[0].Info(); err == nil && info.Size() > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the copy never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	must(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)) // leader and reader
	cmd.Wait()
	if _, err := os.Stat(cp); err == nil {
		t.Fatal("a copy was published although its writer was killed mid-copy")
	}
	c.Set("AUGUR_POLICY=static")
	augurRun(t, c, []string{pf}, data)
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("the next leader left the dead leader's temporary file: %v", entries)
	}
}
