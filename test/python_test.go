package test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// pyReaders are the ways CPython code reads a file; each prints the
// sha256 of the bytes it got.
var pyReaders = map[string]string{
	"open.read": `hashlib.sha256(open(p, 'rb').read()).hexdigest()`,
	"os.read":   `(lambda fd: (hashlib.sha256(b''.join(iter(lambda: os.read(fd, 65536), b''))).hexdigest(), os.close(fd))[0])(os.open(p, os.O_RDONLY))`,
	"os.pread":  `(lambda fd: (hashlib.sha256(os.pread(fd, os.fstat(fd).st_size, 0)).hexdigest(), os.close(fd))[0])(os.open(p, os.O_RDONLY))`,
	"mmap":      `(lambda f: hashlib.sha256(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)[:]).hexdigest())(open(p, 'rb'))`,
}

func TestPythonReaders(t *testing.T) {
	c := NewCase(t)
	files := c.RandomFiles("cls", 4, 200_000)
	c.Warm()
	want := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		must(t, err)
		want[f] = fmt.Sprintf("%x", sha256.Sum256(b))
	}
	for name, expr := range pyReaders {
		t.Run(name, func(t *testing.T) {
			obs := Observe(t, c.Dataset, c.RAM)
			script := "import hashlib, mmap, os, sys\nfor p in sys.argv[1:]:\n    print(" + expr + ")\n"
			r := c.MustRun(time.Minute, Python, append([]string{"-c", script}, files...)...)
			obs.Stop()
			got := strings.Fields(r.Stdout)
			if len(got) != len(files) {
				t.Fatalf("got %d digests, want %d:\n%s%s", len(got), len(files), r.Stdout, r.Stderr)
			}
			for i, f := range files {
				if got[i] != want[f] {
					t.Errorf("%s: sha256 %s, want %s", f, got[i], want[f])
				}
				if n := obs.Opens(f); n != 0 {
					t.Errorf("%s: original opened %d times, want 0 (it has a RAM copy)", f, n)
				}
				if n := obs.Opens(c.CopyOf(c.RAM, f)); n == 0 {
					t.Errorf("%s: RAM copy never opened", f)
				}
			}
		})
	}
}
