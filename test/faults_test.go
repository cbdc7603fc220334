package test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"github.com/augur-hpc/augur/tiering"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// epochReader is a preloaded Python process that reads every file whole
// each time a line arrives on its stdin and prints the sha256 digests, so
// a test can change the world between epochs.
type epochReader struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Scanner
	stderr bytes.Buffer
	files  []string
}

func startEpochReader(t *testing.T, c *Case, files []string) *epochReader {
	t.Helper()
	script := `
import hashlib, sys
for line in sys.stdin:
    print(" ".join(hashlib.sha256(open(p, 'rb').read()).hexdigest() for p in sys.argv[1:]), flush=True)
`
	r := &epochReader{t: t, files: files}
	r.cmd = exec.Command(Python, append([]string{"-c", script}, files...)...)
	r.cmd.Env = append(append(os.Environ(), c.Env...), "LD_PRELOAD="+Lib)
	var err error
	r.stdin, err = r.cmd.StdinPipe()
	must(t, err)
	stdout, err := r.cmd.StdoutPipe()
	must(t, err)
	r.cmd.Stderr = &r.stderr
	r.out = bufio.NewScanner(stdout)
	must(t, r.cmd.Start())
	t.Cleanup(func() { r.cmd.Process.Kill(); r.cmd.Wait() })
	return r
}

// epoch reads all files once and returns their digests.
func (r *epochReader) epoch() []string {
	r.t.Helper()
	fmt.Fprintln(r.stdin, "go")
	done := make(chan bool, 1)
	go func() { done <- r.out.Scan() }()
	select {
	case ok := <-done:
		if !ok {
			r.t.Fatalf("reader died; stderr:\n%s", r.stderr.String())
		}
	case <-time.After(2 * time.Minute):
		r.t.Fatal("reader hung")
	}
	return strings.Fields(r.out.Text())
}

func hashOf(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }

// A source rewritten behind augur's back (not through the shim) during a
// job: a reader sees the old content or the new, whole, never a mix; the
// stale copy is dropped and later reads see the new content.
func TestSourceChangedDuringRun(t *testing.T) {
	c := NewCase(t)
	c.Set("AUGUR_REVALIDATE=0s")
	old := bytes.Repeat([]byte("old!"), 50_000)
	f := c.Write("cls/a.bin", old)
	c.Warm()
	r := startEpochReader(t, c, []string{f})
	if got := r.epoch()[0]; got != hashOf(old) {
		t.Fatalf("epoch 1: wrong bytes")
	}
	newer := bytes.Repeat([]byte("new!!"), 30_000)
	must(t, os.WriteFile(f+".tmp", newer, 0o644))
	must(t, os.Rename(f+".tmp", f)) // plain Go I/O: the shim does not see it
	got2 := r.epoch()[0]
	if got2 != hashOf(old) && got2 != hashOf(newer) {
		t.Fatalf("epoch 2 read a mix of old and new content")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got := r.epoch()[0]; got == hashOf(newer) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stale copy was still served 30s after the source changed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if b, err := os.ReadFile(c.CopyOf(c.RAM, f)); err == nil && !bytes.Equal(b, newer) {
		t.Error("a stale copy is still in the tier")
	}
}

// A source changed behind augur's back while revalidate is above 0: the
// reader's opens before the change mark its copy compared lately, and
// such opens send the leader no event (the static policy reads only the
// due ones); still, within an interval and a comparison of the change,
// an open reads the new content. Many opens of one copy after the
// leader marked it send no event.
func TestSourceChangedSeenWithinRevalidate(t *testing.T) {
	c := NewCase(t)
	c.Set("AUGUR_REVALIDATE=1s")
	old := bytes.Repeat([]byte("old!"), 50_000)
	f := c.Write("cls/a.bin", old)
	c.Warm()
	r := startEpochReader(t, c, []string{f})
	for i := 0; i < 50; i++ {
		if got := r.epoch()[0]; got != hashOf(old) {
			t.Fatalf("epoch %d: wrong bytes", i+1)
		}
	}
	newer := bytes.Repeat([]byte("new!!"), 30_000)
	must(t, os.WriteFile(f+".tmp", newer, 0o644))
	must(t, os.Rename(f+".tmp", f)) // plain Go I/O: the shim does not see it
	changed := time.Now()
	for r.epoch()[0] != hashOf(newer) {
		if time.Since(changed) > 10*time.Second {
			t.Fatal("the stale copy was still served 10 s after its source changed (revalidate 1s)")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("new content read %v after the change", time.Since(changed).Round(time.Millisecond))

	c = NewCase(t)
	f = c.Write("cls/a.bin", old)
	c.Warm()
	many := `import sys, time
open(sys.argv[1], 'rb').read()
time.sleep(0.5) # the leader takes the event, queues the comparison and marks the copy
for i in range(500): open(sys.argv[1], 'rb').read()`
	c.AugurRun(statsAfter(c, []string{Python, "-c", many, f})...)
	st := statsOfRun(t, c)
	t.Logf("501 opens served from the tier: %d events", st.Events)
	if st.Tiers[0].Hits != 501 || st.Events > 10 {
		t.Errorf("%d of 501 opens served, %d events: want each served and an event only while the copy was due",
			st.Tiers[0].Hits, st.Events)
	}
}

// A job that cannot lock a tier (another job writes it) keeps no filter
// of the copies there (struct augur_present): a copy the other writer
// publishes while the job runs is served at the job's next open, as one
// present at its start is.
func TestCopyOfAnotherWriterIsServed(t *testing.T) {
	c := NewCase(t)
	before := c.Write("cls/before.bin", bytes.Repeat([]byte("b"), 40_000))
	later := c.Write("cls/later.bin", bytes.Repeat([]byte("l"), 40_000))
	c.Warm()
	tree, err := tiering.Open(tiering.Tier{Path: c.RAM})
	must(t, err)
	defer tree.Close()
	lock, err := tree.TryLock() // this test is the tier's writer now
	must(t, err)
	defer lock.Unlock()
	must(t, tree.Remove(later))
	r := startEpochReader(t, c, []string{before, later})
	r.epoch()
	hits := jobStats(t, c, c.job()).Tiers[0].Hits
	if _, err := tree.Publish(later); err != nil {
		t.Fatal(err)
	}
	r.epoch()
	if got := jobStats(t, c, c.job()).Tiers[0].Hits - hits; got != 2 {
		t.Errorf("%d of 2 opens served from the tier after another writer published the second file's copy", got)
	}
}

// The tier directory removed while a job runs: reads fall back to the
// originals, every byte right.
func TestTierDeletedWhileRunning(t *testing.T) {
	c := NewCase(t)
	files := c.RandomFiles("cls", 4, 50_000)
	want := sha256Of(t, files)
	c.Warm()
	r := startEpochReader(t, c, files)
	check := func(n int, got []string) {
		for i, f := range files {
			if got[i] != want[f] {
				t.Errorf("epoch %d: %s: wrong bytes", n, f)
			}
		}
	}
	check(1, r.epoch())
	must(t, os.RemoveAll(c.RAM))
	obs := Observe(t, c.Dataset)
	check(2, r.epoch())
	obs.Stop()
	for _, f := range files {
		if obs.Opens(f) == 0 {
			t.Errorf("%s: original not read after its tier vanished", f)
		}
	}
}

// A RAM tier on a filesystem smaller than its configured capacity fills
// up mid-job (ENOSPC): augur marks it full, puts the rest on the next
// tier, and the reader gets every byte right throughout.
func TestTierFullDuringRun(t *testing.T) {
	c := NewCase(t)
	small := filepath.Join(c.Dir, "small")
	must(t, os.MkdirAll(small, 0o755))
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", small).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", small).Run() })
	c.Set("AUGUR_POLICY=reactive")
	c.Set("AUGUR_TIERS=" + small + ":1GiB," + c.Disk + ":1GiB")
	files := c.RandomFiles("cls", 8, 100_000)
	want := sha256Of(t, files)
	r := startEpochReader(t, c, files)
	for e := 1; e <= 2; e++ {
		for i, got := range r.epoch() {
			if got != want[files[i]] {
				t.Errorf("epoch %d: %s: wrong bytes", e, files[i])
			}
		}
	}
	var placed []string
	for _, f := range files {
		placed = append(placed, c.CopyOf(small, f), c.CopyOf(c.Disk, f))
	}
	deadline := time.Now().Add(time.Minute)
	for {
		n := 0
		for i := 0; i < len(placed); i += 2 {
			_, e1 := os.Stat(placed[i])
			_, e2 := os.Stat(placed[i+1])
			if e1 == nil || e2 == nil {
				n++
			}
		}
		if n == len(files) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d files placed after ENOSPC", n, len(files))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, got := range r.epoch() {
		if got != want[files[i]] {
			t.Errorf("epoch 3: %s: wrong bytes", files[i])
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(small, "tmp")); len(entries) != 0 {
		t.Errorf("partial copies left in the full tier: %d", len(entries))
	}
}
