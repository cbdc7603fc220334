package test

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/augur-hpc/augur/shim"
	"golang.org/x/sys/unix"
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

// A change of a dataset file waits for the leader's publication of a copy
// of it under way (shim/writers.go, writeGuard.Commit): the publication
// renames the copy between two checks of the file's change generation,
// and takes it back if the second finds it moved, so the change, which
// moves it and then removes the copies, must not return before that
// publication ends. Here the test stands for the publication (it counts
// itself in the file's publishing word) and rm is the change: rm has
// moved the generation but does not unlink the file until the count
// drops, or until a second has passed if it never does.
func TestChangeWaitsForAPublicationUnderWay(t *testing.T) {
	c := NewCase(t)
	stop := holdJob(c)
	defer stop()
	seg, err := shim.AttachSegment(c.job())
	must(t, err)
	defer seg.Close()
	for _, ends := range []bool{true, false} {
		f := c.Write(map[bool]string{true: "p/ends.bin", false: "p/never.bin"}[ends], []byte("old bytes"))
		pub, gen := publishingWord(seg.Ptr(), f), genWord(seg.Ptr(), f)
		atomic.AddUint32(pub, 1)
		gen0 := atomic.LoadUint32(gen)
		cmd := exec.Command("rm", f)
		cmd.Env = append(append(os.Environ(), c.Env...), "LD_PRELOAD="+Lib)
		must(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		for deadline := time.Now().Add(time.Minute); atomic.LoadUint32(gen) == gen0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatal("rm never moved the file's change generation")
			}
		}
		time.Sleep(100 * time.Millisecond)
		if _, err := os.Stat(f); err != nil {
			t.Errorf("ends %v: rm unlinked the file while a publication of it was under way (%v)", ends, err)
		}
		select {
		case err := <-done:
			t.Fatalf("ends %v: rm returned (%v) while a publication of the file was under way", ends, err)
		default:
		}
		if ends {
			atomic.AddUint32(pub, ^uint32(0))
			unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(pub)), 1 /* FUTEX_WAKE */, math.MaxInt32, 0, 0, 0)
		}
		select {
		case err := <-done:
			must(t, err)
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			t.Fatalf("ends %v: rm still waits", ends)
		}
		if !ends {
			atomic.AddUint32(pub, ^uint32(0))
		}
		if _, err := os.Stat(f); err == nil {
			t.Errorf("ends %v: rm did not remove the file", ends)
		}
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
