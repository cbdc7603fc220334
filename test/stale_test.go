package test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func sha256Hex(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }

// staleWrites are the ways a Python program changes a dataset file by
// name. The program reads the file first (served from the tier copy),
// then changes it, then reads it again; NEW is a file outside the dataset
// holding replacement bytes.
var staleWrites = map[string]string{
	"open-r+b":       `with open(p, 'r+b') as f: f.write(new[:1000])`,
	"open-wb":        `with open(p, 'wb') as f: f.write(new)`,
	"open-ab":        `with open(p, 'ab') as f: f.write(new[:10])`,
	"open-w-text":    `with open(p, 'w') as f: f.write('text now')`,
	"os.open-wronly": `fd = os.open(p, os.O_WRONLY); os.write(fd, new[:64]); os.close(fd)`,
	"os.truncate":    `os.truncate(p, 1234)`,
	"rename-onto":    `open(p + '.tmp', 'wb').write(new); os.rename(p + '.tmp', p)`,
	"os.replace":     `open(p + '.tmp', 'wb').write(new); os.replace(p + '.tmp', p)`,
	"unlink-create":  `os.unlink(p); open(p, 'wb').write(new[:777])`,
	"shutil.copy":    `shutil.copyfile(NEW, p)`,
}

const staleScript = `import hashlib, os, shutil, sys
p, NEW = sys.argv[1], sys.argv[2]
new = open(NEW, 'rb').read()
print(hashlib.sha256(open(p, 'rb').read()).hexdigest())
%s
for _ in range(3):
    print(hashlib.sha256(open(p, 'rb').read()).hexdigest())
`

const readScript = `import hashlib, sys
for p in sys.argv[1:]:
    try:
        print(hashlib.sha256(open(p, 'rb').read()).hexdigest())
    except FileNotFoundError:
        print('ENOENT')
`

// TestStaleWrites changes a warmed dataset file through the shim, each
// way Python can, and requires that the writer's own later reads, and a
// new process's, see the new bytes: the write-open (or truncate, rename)
// removed the tier copies before it returned, and the kernel opened the
// original from then on.
func TestStaleWrites(t *testing.T) {
	c := NewCase(t)
	newBytes := filepath.Join(c.Dir, "new.bin")
	must(t, os.WriteFile(newBytes, randomBytes(50_000), 0o644))
	files := map[string]string{}
	for name := range staleWrites {
		files[name] = c.Write(name+".bin", randomBytes(100_000))
	}
	c.Warm()
	primeJob(c)
	for name, code := range staleWrites {
		t.Run(name, func(t *testing.T) {
			p := files[name]
			old, err := os.ReadFile(p)
			must(t, err)
			copies := []string{c.CopyOf(c.RAM, p), c.CopyOf(c.Disk, p)}
			if _, err := os.Stat(copies[0]); err != nil {
				t.Fatalf("no RAM copy before the write: %v", err)
			}
			obs := Observe(t, c.Dataset, c.RAM)
			r := c.MustRun(time.Minute, Python, "-c", fmt.Sprintf(staleScript, code), p, newBytes)
			obs.Stop()
			cur, err := os.ReadFile(p)
			must(t, err)
			if sha256Hex(cur) == sha256Hex(old) {
				t.Fatalf("the write did not change the file")
			}
			want := []string{sha256Hex(old), sha256Hex(cur), sha256Hex(cur), sha256Hex(cur)}
			if got := strings.Fields(r.Stdout); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("same process: read before, then after the write:\n got %v\nwant %v (old, then new)", got, want)
			}
			if obs.Opens(copies[0]) == 0 {
				t.Errorf("the read before the write did not come from the RAM copy")
			}
			if obs.Opens(p) == 0 {
				t.Errorf("the original was never opened")
			}
			for _, cp := range copies {
				if _, err := os.Stat(cp); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("tier copy %s still exists after the write (%v)", cp, err)
				}
			}
			obs = Observe(t, c.Dataset, c.RAM)
			r = c.MustRun(time.Minute, Python, "-c", readScript, p)
			obs.Stop()
			if got := strings.TrimSpace(r.Stdout); got != sha256Hex(cur) {
				t.Errorf("new process read %s, want the new content %s", got, sha256Hex(cur))
			}
			if obs.Opens(p) == 0 {
				t.Errorf("new process: the original was not opened")
			}
		})
	}
}

// staleChanges change a source without the shim between two jobs. Each
// returns the bytes the file should hold afterwards (nil: removed).
var staleChanges = map[string]func(t *testing.T, p string, old []byte, mt time.Time) []byte{
	"bigger": func(t *testing.T, p string, old []byte, mt time.Time) []byte {
		b := append(append([]byte(nil), old...), "grown"...)
		must(t, os.WriteFile(p, b, 0o644))
		return b
	},
	"smaller-same-mtime": func(t *testing.T, p string, old []byte, mt time.Time) []byte {
		b := old[:len(old)/2]
		must(t, os.WriteFile(p, b, 0o644))
		must(t, os.Chtimes(p, mt, mt))
		return b
	},
	"same-size-later-mtime": func(t *testing.T, p string, old []byte, mt time.Time) []byte {
		b := randomBytes(len(old))
		must(t, os.WriteFile(p, b, 0o644))
		must(t, os.Chtimes(p, mt.Add(time.Second), mt.Add(time.Second)))
		return b
	},
	"same-size-earlier-mtime": func(t *testing.T, p string, old []byte, mt time.Time) []byte {
		b := randomBytes(len(old))
		must(t, os.WriteFile(p, b, 0o644))
		must(t, os.Chtimes(p, mt.Add(-time.Hour), mt.Add(-time.Hour)))
		return b
	},
	"same-size-1ns-later": func(t *testing.T, p string, old []byte, mt time.Time) []byte {
		b := randomBytes(len(old))
		must(t, os.WriteFile(p, b, 0o644))
		must(t, os.Chtimes(p, mt.Add(time.Nanosecond), mt.Add(time.Nanosecond)))
		return b
	},
	"removed": func(t *testing.T, p string, old []byte, mt time.Time) []byte {
		must(t, os.Remove(p))
		return nil
	},
}

// TestStaleBetweenJobs changes warmed sources without the shim between
// two jobs — a different size, the same size with a later, an earlier or
// a 1 ns different mtime, removal — and requires that no reader of the
// next job ever sees an old copy: its first process checks the tiers
// before its first open is served, removing every copy whose source
// changed. The reader starts at once, with no priming, and reads each
// file several times; then a primed run of the same job must find the
// copies gone and read the originals. Twice: after the first job ended,
// and while its leader still runs and holds the tiers' writer locks (two
// jobs of one user on one node share the default tiers).
func TestStaleBetweenJobs(t *testing.T) {
	for _, running := range []bool{false, true} {
		name := "first-job-ended"
		if running {
			name = "first-job-running"
		}
		t.Run(name, func(t *testing.T) { staleBetweenJobs(t, running) })
	}
}

func staleBetweenJobs(t *testing.T, firstRunning bool) {
	c := NewCase(t)
	keep := c.Write("unchanged.bin", randomBytes(30_000))
	paths := map[string]string{}
	var names []string
	for name := range staleChanges {
		names = append(names, name)
		paths[name] = c.Write(name+".bin", randomBytes(80_000))
	}
	c.Warm()
	primeJob(c)
	all := []string{keep}
	for _, n := range names {
		all = append(all, paths[n])
	}
	// Job 1 reads every file from its RAM copy.
	obs := Observe(t, c.Dataset, c.RAM)
	c.MustRun(time.Minute, Python, append([]string{"-c", readScript}, all...)...)
	obs.Stop()
	for _, p := range all {
		if obs.Opens(p) != 0 || obs.Opens(c.CopyOf(c.RAM, p)) == 0 {
			t.Fatalf("job 1 did not read %s from its RAM copy", p)
		}
	}
	if firstRunning {
		stop := holdJob(c)
		defer stop()
		deadline := time.Now().Add(20 * time.Second)
		for tierLockHolder(c.RAM) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("job 1's leader never took the RAM tier's writer lock")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	want := map[string]string{keep: sha256Hex(mustRead(t, keep))}
	for _, n := range names {
		p := paths[n]
		old := mustRead(t, p)
		info, err := os.Stat(p)
		must(t, err)
		if b := staleChanges[n](t, p, old, info.ModTime()); b == nil {
			want[p] = "ENOENT"
		} else {
			want[p] = sha256Hex(b)
		}
	}

	c.Set("AUGUR_JOB=" + c.job() + "-2")
	t.Cleanup(func() {
		removeJobState(c.job())
	})
	// Each file three times in a row, from the first instant of the job.
	var reads []string
	for i := 0; i < 3; i++ {
		reads = append(reads, all...)
	}
	r := c.MustRun(time.Minute, Python, append([]string{"-c", readScript}, reads...)...)
	got := strings.Fields(r.Stdout)
	if len(got) != len(reads) {
		t.Fatalf("got %d results for %d reads:\n%s%s", len(got), len(reads), r.Stdout, r.Stderr)
	}
	for i, p := range reads {
		if got[i] != want[p] {
			t.Errorf("job 2, read %d of %s: %s, want %s (the new content)", i/len(all), filepath.Base(p), got[i], want[p])
		}
	}

	primeJob(c)
	for _, n := range names {
		if _, err := os.Stat(c.CopyOf(c.RAM, paths[n])); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: stale RAM copy still present after job 2 validated (%v)", n, err)
		}
	}
	if _, err := os.Stat(c.CopyOf(c.RAM, keep)); err != nil {
		t.Errorf("unchanged file lost its RAM copy: %v", err)
	}
	obs = Observe(t, c.Dataset, c.RAM)
	r = c.MustRun(time.Minute, Python, append([]string{"-c", readScript}, all...)...)
	obs.Stop()
	got = strings.Fields(r.Stdout)
	for i, p := range all {
		if i < len(got) && got[i] != want[p] {
			t.Errorf("job 2, primed: %s read %s, want %s", filepath.Base(p), got[i], want[p])
		}
		if n := obs.Opens(c.CopyOf(c.RAM, p)); p != keep && n != 0 {
			t.Errorf("job 2, primed: %s: RAM copy opened %d times", filepath.Base(p), n)
		}
	}
	if obs.Opens(c.CopyOf(c.RAM, keep)) == 0 {
		t.Errorf("job 2: the unchanged file was not served from its RAM copy")
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return b
}

// tierLockHolder is the pid holding tier's writer lock, or 0.
func tierLockHolder(tier string) int {
	f, err := os.OpenFile(filepath.Join(tier, "lock"), os.O_RDWR, 0)
	if err != nil {
		return 0
	}
	defer f.Close() // this process holds no lock on it to lose
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk) != nil || lk.Type == unix.F_UNLCK {
		return 0
	}
	return int(lk.Pid)
}
