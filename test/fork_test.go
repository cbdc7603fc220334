package test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// forkChildren is how many children each start method creates (spawn: how
// many tasks its pool runs, in forkChildren/5 processes).
const forkChildren = 200

// TestForkStress creates 200 children per start method — os.fork and the
// multiprocessing contexts fork and forkserver (Process, in batches), and
// a spawn pool running 200 tasks in 40 spawned processes — from a Python
// leader whose Go runtime collects garbage without pause
// (AUGUR_DEBUG_GC_STRESS=1), so that the forks land while the runtime
// holds its locks; the forkserver's server, which does the forking there,
// is under the same stress. Every child reads dataset files through the
// shim three ways and checks their bytes. A child that entered Go would
// hang: every run must end within its timeout, every child must exit 0,
// and the kernel must have opened only the RAM copies.
func TestForkStress(t *testing.T) {
	c := NewCase(t)
	files := c.RandomFiles("shard", 16, 64<<10)
	c.Warm()
	type entry [2]string
	var manifest []entry
	for _, f := range files {
		b, err := os.ReadFile(f)
		must(t, err)
		manifest = append(manifest, entry{f, fmt.Sprintf("%x", sha256.Sum256(b))})
	}
	mf := filepath.Join(c.Dir, "manifest.json")
	mb, _ := json.Marshal(manifest)
	must(t, os.WriteFile(mf, mb, 0o644))
	script := filepath.Join(repoRoot, "test", "python", "fork_readers.py")
	c.Set("AUGUR_DEBUG_GC_STRESS=1")
	primeJob(c)

	for _, mode := range []string{"os.fork", "fork", "forkserver", "spawn"} {
		t.Run(mode, func(t *testing.T) {
			obs := Observe(t, c.Dataset, c.RAM)
			start := time.Now()
			r := c.Run(2*time.Minute, Python, script, mode, fmt.Sprint(forkChildren), mf)
			obs.Stop()
			if r.Err != nil || strings.TrimSpace(r.Stdout) != fmt.Sprintf("ok %d", forkChildren) {
				t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", mode, r.Err, r.Stdout, r.Stderr)
			}
			// inotify merges identical consecutive events, so counts
			// are lower bounds: every copy opened, no original.
			for _, f := range files {
				if n := obs.Opens(f); n != 0 {
					t.Errorf("%s: original opened %d times, want 0", f, n)
				}
				if obs.Opens(c.CopyOf(c.RAM, f)) == 0 {
					t.Errorf("%s: RAM copy never opened", f)
				}
			}
			t.Logf("%d children in %v", forkChildren, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestSecondPreload loads another library whose constructor opens, reads
// and maps a dataset file, in both LD_PRELOAD orders: constructors run in
// reverse order, so with augur first the other library's runs before
// augur's own and calls the wrappers before augur has started; with augur
// second it calls them while augur's Go runtime is still starting. Neither
// may hang or fail, its bytes must be right, and the program's own read
// (cat) must be served from the RAM copy.
func TestSecondPreload(t *testing.T) {
	c := NewCase(t)
	theirs := c.Write("theirs.bin", randomBytes(70_000))
	mine := c.Write("cat.bin", randomBytes(120_000))
	c.Warm()
	lib := compileTestC(t, t.TempDir(), "theirs", "-shared", "-fPIC")
	tb, err := os.ReadFile(theirs)
	must(t, err)
	wantTheirs := fmt.Sprintf("theirs: %d %s %s", len(tb), fnv64Hex(tb), fnv64Hex(tb))
	mb, err := os.ReadFile(mine)
	must(t, err)
	c.Set("THEIRS_FILE=" + theirs)
	c.Set("AUGUR_DEBUG_GC_STRESS=1")
	primeJob(c)

	for _, order := range []struct{ name, preload string }{
		{"augur-first", Lib + ":" + lib},
		{"theirs-first", lib + ":" + Lib},
	} {
		t.Run(order.name, func(t *testing.T) {
			for i := 0; i < 5; i++ {
				obs := Observe(t, c.Dataset, c.RAM)
				r := c.RunPlain(30*time.Second, "env", "LD_PRELOAD="+order.preload, "cat", mine)
				obs.Stop()
				if r.Err != nil {
					t.Fatalf("run %d: %v\nstderr:\n%s", i, r.Err, r.Stderr)
				}
				if r.Stdout != string(mb) {
					t.Fatalf("run %d: cat printed %d bytes, not the file's %d", i, len(r.Stdout), len(mb))
				}
				if got := strings.TrimSpace(r.Stderr); got != wantTheirs {
					t.Fatalf("run %d: the other library's constructor said %q, want %q", i, got, wantTheirs)
				}
				if n := obs.Opens(mine); n != 0 {
					t.Errorf("run %d: cat.bin original opened %d times, want 0", i, n)
				}
				if obs.Opens(c.CopyOf(c.RAM, mine)) == 0 {
					t.Errorf("run %d: cat.bin RAM copy never opened", i)
				}
			}
		})
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
