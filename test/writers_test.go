package test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A dataset file written inside the job (issue 14): while any process of
// the job may write it, no copy is served or made; once the last writer
// is gone it is copied again. Each case of test/python/writers.py runs
// under augur run with the reactive policy, which copies a file at its
// first read, and checks every read against what was last written.
func TestWritersInsideTheJob(t *testing.T) {
	initial := map[string][]byte{"mmap": bytes.Repeat([]byte("m"), 100), "ftruncate": bytes.Repeat([]byte("t"), 100)}
	for _, name := range []string{"before-copy", "fork-child", "fork-shared", "other-process",
		"exec-inherit", "posix-spawn", "mmap", "ftruncate"} {
		t.Run(name, func(t *testing.T) {
			c := NewCase(t)
			f := c.Write("w/file.bin", initial[name])
			c.Set("AUGUR_POLICY=reactive")
			c.Set("AUGUR_BIN=" + Augur)
			out, stderr := c.AugurRun("--", Python, filepath.Join(repoRoot, "test", "python", "writers.py"), name, f)
			if strings.TrimSpace(out) != "ok" || len(augurLines(stderr)) != 0 {
				t.Errorf("%s: printed %q\nstderr:\n%s", name, out, stderr)
			}
		})
	}
}

// TestRevalidateEveryOpen: a writer outside the job (no shim) rewrites a
// file with the same size; with revalidate = 0 the next open compares
// the copy with its source and is served the new bytes.
func TestRevalidateEveryOpen(t *testing.T) {
	c := NewCase(t)
	f := c.Write("r/file.bin", bytes.Repeat([]byte("o"), 4096))
	c.Warm()
	c.Set("AUGUR_REVALIDATE=0s")
	stop := holdJob(c)
	defer stop()
	if r := c.MustRun(time.Minute, "cat", f); r.Stdout != strings.Repeat("o", 4096) {
		t.Fatalf("first read: %q...", head(r.Stdout))
	}
	later := time.Now().Add(time.Second)
	must(t, os.WriteFile(f, bytes.Repeat([]byte("n"), 4096), 0o644))
	must(t, os.Chtimes(f, later, later))
	obs := Observe(t, c.Dataset)
	r := c.MustRun(time.Minute, "cat", f)
	obs.Stop()
	if r.Stdout != strings.Repeat("n", 4096) {
		t.Errorf("after the source changed behind the job: read %q..., want the new bytes", head(r.Stdout))
	}
	if obs.Opens(f) == 0 {
		t.Errorf("the original was not opened")
	}
}

// TestMetadataThroughTierDescriptors: what a descriptor says of its file
// beyond its bytes is the original's, also when the descriptor was
// served from a tier: extended attributes (once, CPython's test_os listed
// the copy's own user.augur.src), and mode changes go to the original.
func TestMetadataThroughTierDescriptors(t *testing.T) {
	c := NewCase(t)
	f := c.Write("x/file.bin", []byte("data"))
	must(t, exec.Command("setfattr", "-n", "user.mine", "-v", "1", f).Run())
	c.Warm()
	primeJob(c)
	obs := Observe(t, c.RAM)
	r := c.MustRun(time.Minute, Python, "-c", `import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print(sorted(os.listxattr(fd)), os.getxattr(fd, "user.mine"))
os.setxattr(fd, "user.more", b"2")
os.chmod(fd, 0o600)
print(sorted(os.listxattr(sys.argv[1])), oct(os.stat(sys.argv[1]).st_mode & 0o777))
os.removexattr(fd, "user.more")
print(sorted(os.listxattr(sys.argv[1])))`, f)
	obs.Stop()
	if obs.Opens(c.CopyOf(c.RAM, f)) == 0 {
		t.Fatal("the descriptor was not served from the tier: the test proves nothing")
	}
	want := "['user.mine'] b'1'\n['user.mine', 'user.more'] 0o600\n['user.mine']\n"
	if r.Stdout != want {
		t.Errorf("printed\n%s\nwant\n%s", r.Stdout, want)
	}
}
