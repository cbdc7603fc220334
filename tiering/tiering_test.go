package tiering

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestCopyPathRoundTrip(t *testing.T) {
	cases := map[string]string{
		"/pfs/ds/a.jpg":         "/t/files/pfs@/ds@/a.jpg",
		"/a":                    "/t/files/a",
		"/x/y@/z":               "/t/files/x@/y@@/z",
		"/with space/ünï/c.png": "/t/files/with space@/ünï@/c.png",
	}
	for src, want := range cases {
		got, err := CopyPath("/t", src)
		if err != nil || got != want {
			t.Errorf("CopyPath(%q) = %q, %v; want %q", src, got, err, want)
		}
		back, ok := SourcePath("/t", got)
		if !ok || back != src {
			t.Errorf("SourcePath(%q) = %q, %v; want %q", got, back, ok, src)
		}
	}
	for _, bad := range []string{"rel/a", "/", "/a/../b", "/a/b@", "/a//b"} {
		if _, err := CopyPath("/t", bad); !errors.Is(err, ErrNotCopyable) {
			t.Errorf("CopyPath(%q) err = %v, want ErrNotCopyable", bad, err)
		}
	}
	if _, ok := SourcePath("/t", "/t/files/a/b"); ok {
		t.Error("SourcePath accepted a directory without its mark")
	}
}

// newTier makes an open tier in a temp dir and a source directory.
func newTier(t *testing.T, capacity int64) (*Tree, string) {
	t.Helper()
	dir := t.TempDir()
	tier, err := Open(Tier{Path: filepath.Join(dir, "tier"), Capacity: capacity, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tier.Close() })
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	return tier, src
}

func write(t *testing.T, p string, data []byte) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, data, 0o640); err != nil {
		t.Fatal(err)
	}
}

func TestPublishCopiesBytesModeAndTimes(t *testing.T) {
	tier, src := newTier(t, 1<<20)
	p := filepath.Join(src, "d", "f.bin")
	data := bytes.Repeat([]byte("augur"), 1000)
	write(t, p, data)
	old := time.Date(2020, 1, 2, 3, 4, 5, 6789, time.UTC)
	os.Chtimes(p, old, old)
	n, err := tier.Publish(p)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("Publish = %d, %v", n, err)
	}
	cp, _ := CopyPath(tier.Path, p)
	got, err := os.ReadFile(cp)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("copy content differs (%v)", err)
	}
	ci, _ := os.Stat(cp)
	if ci.Mode().Perm() != 0o640 || !ci.ModTime().Equal(old) {
		t.Errorf("copy mode %v mtime %v, want 0640 %v", ci.Mode().Perm(), ci.ModTime(), old)
	}
	if entries, _ := os.ReadDir(filepath.Join(tier.Path, tmpDir)); len(entries) != 0 {
		t.Errorf("temporary files left: %v", entries)
	}
	if _, err := tier.Publish(src); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Publish(dir) = %v, want ErrNotRegular", err)
	}
}

func TestValidateRemovesStaleKeepsFresh(t *testing.T) {
	tier, src := newTier(t, 1<<20)
	keep := filepath.Join(src, "keep")
	grown := filepath.Join(src, "grown")
	touched := filepath.Join(src, "touched")
	gone := filepath.Join(src, "gone")
	for _, p := range []string{keep, grown, touched, gone} {
		write(t, p, []byte("0123456789"))
		if _, err := tier.Publish(p); err != nil {
			t.Fatal(err)
		}
	}
	write(t, grown, []byte("0123456789abc"))
	later := time.Now().Add(time.Hour)
	os.Chtimes(touched, later, later)
	os.Remove(gone)
	write(t, filepath.Join(tier.Path, tmpDir, "copy-crashed"), []byte("partial"))

	rep := tier.Validate()
	if rep.Stale != 3 || rep.Files != 1 || rep.Bytes != 10 || len(rep.Errors) != 0 {
		t.Fatalf("Validate = %+v, want 3 stale, 1 file of 10 bytes", rep)
	}
	for p, want := range map[string]bool{keep: true, grown: false, touched: false, gone: false} {
		cp, _ := CopyPath(tier.Path, p)
		if _, err := os.Stat(cp); (err == nil) != want {
			t.Errorf("%s: copy present = %v, want %v", p, err == nil, want)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(tier.Path, tmpDir)); len(entries) != 0 {
		t.Errorf("temporary files survived validation: %v", entries)
	}
}

// A copy stands for a file, not a name: one whose path now names another
// file of the same size and mtime (a rename over it, times kept), or its
// file written in place and its mtime put back, is stale; a copy kept is
// told to Kept with its source's stat.
func TestCheckComparesIdentity(t *testing.T) {
	tier, src := newTier(t, 1<<20)
	keep := filepath.Join(src, "keep")
	replaced := filepath.Join(src, "replaced")
	rewritten := filepath.Join(src, "rewritten")
	for _, p := range []string{keep, replaced, rewritten} {
		write(t, p, []byte("0123456789"))
		if _, err := tier.Publish(p); err != nil {
			t.Fatal(err)
		}
	}
	var before unix.Stat_t
	if err := unix.Stat(replaced, &before); err != nil {
		t.Fatal(err)
	}
	mtime := time.Unix(before.Mtim.Unix())
	write(t, replaced+".new", []byte("abcdefghij"))
	os.Chtimes(replaced+".new", mtime, mtime)
	if err := os.Rename(replaced+".new", replaced); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // a ctime the write below moves
	write(t, rewritten, []byte("ABCDEFGHIJ"))
	os.Chtimes(rewritten, mtime, mtime)

	var kept []string
	var mu sync.Mutex
	tier.Kept = func(source string, st *unix.Stat_t) bool {
		mu.Lock()
		defer mu.Unlock()
		kept = append(kept, source)
		return true
	}
	rep := tier.Check()
	if rep.Stale != 2 || rep.Files != 1 {
		t.Fatalf("Check = %+v, want 2 stale, 1 kept", rep)
	}
	if len(kept) != 1 || kept[0] != keep {
		t.Errorf("Kept told of %v, want [%s]", kept, keep)
	}
}

// A directory's copies moved to the trash, as the data plane moves them
// (one rename, the source directory on the subtree), are removed by
// EmptyTrash, which names each copy's source and identity.
func TestEmptyTrashNamesWhatItRemoves(t *testing.T) {
	tier, src := newTier(t, 1<<20)
	dir := filepath.Join(src, "dir")
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "sub", "b")
	want := map[string]Ident{}
	for _, p := range []string{a, b} {
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		write(t, p, []byte("0123456789"))
		if _, err := tier.Publish(p); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		must(t, unix.Stat(p, &st))
		want[p] = IdentOf(&st)
	}
	cp, _ := CopyPath(tier.Path, a)
	must(t, os.Mkdir(filepath.Join(tier.Path, TrashDir), 0o700))
	moved := filepath.Join(tier.Path, TrashDir, "1.1")
	must(t, os.Rename(filepath.Dir(cp), moved))
	must(t, unix.Lsetxattr(moved, TrashDirXattr, []byte(dir), 0))
	got := map[string]Ident{}
	u := tier.EmptyTrash(func(source string, id Ident) { got[source] = id })
	if u.Files != 2 || u.Bytes != 20 {
		t.Errorf("EmptyTrash removed %+v, want 2 files of 20 bytes", u)
	}
	if len(got) != 2 || got[a] != want[a] || got[b] != want[b] {
		t.Errorf("EmptyTrash named %+v, want %+v", got, want)
	}
	if entries, _ := os.ReadDir(filepath.Join(tier.Path, TrashDir)); len(entries) != 0 {
		t.Errorf("the trash still holds %v", entries)
	}
}

func TestWarmFillsFastestFirstWithinCapacity(t *testing.T) {
	fast, src := newTier(t, 25)
	slow, err := Open(Tier{Path: filepath.Join(filepath.Dir(fast.Path), "slow"), Capacity: 15, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		write(t, filepath.Join(src, name), []byte("0123456789"))
	}
	tiers := []*Tree{fast, slow}
	var prog warmCounts
	res := Warm(tiers, make([]Usage, 2), []string{src}, &prog)
	if len(res.Errors) != 0 {
		t.Fatal(res.Errors)
	}
	if res.Copied[0].Files != 2 || res.Copied[1].Files != 1 || res.Unfit != 2 {
		t.Fatalf("Warm = %+v, want 2 in fast, 1 in slow, 2 unfit", res)
	}
	// Every file found and dealt with; the bytes of the 3 copies.
	if want := [2]int64{5, 30}; prog.expect != want || prog.add != want || !prog.known {
		t.Errorf("progress: expected %v, added %v, total known %v; want %v, %v, true",
			prog.expect, prog.add, prog.known, want, want)
	}
	again := Warm(tiers, []Usage{fast.Usage(), slow.Usage()}, []string{src}, nil)
	if again.Present != 3 || again.Copied[0].Files+again.Copied[1].Files != 0 {
		t.Fatalf("second Warm = %+v, want 3 present and nothing copied", again)
	}
}

// warmCounts is a WarmProgress that sums what it is told.
type warmCounts struct {
	mu          sync.Mutex
	expect, add [2]int64 // files, bytes
	known       bool
}

func (w *warmCounts) Expect(files, bytes int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expect[0] += files
	w.expect[1] += bytes
}

func (w *warmCounts) Add(files, bytes int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.add[0] += files
	w.add[1] += bytes
}

func (w *warmCounts) TotalKnown() { w.known = true }

func TestLockExcludesOtherProcesses(t *testing.T) {
	tier, _ := newTier(t, 1)
	l, err := tier.TryLock()
	if err != nil {
		t.Fatal(err)
	}
	// A POSIX lock is per process: probe from another process.
	cmd := exec.Command(os.Args[0], "-test.run=TestLockHelper")
	cmd.Env = append(os.Environ(), "AUGUR_LOCK_PROBE="+tier.Path)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("locked by another process")) {
		t.Fatalf("probe while locked: %v\n%s", err, out)
	}
	l.Unlock()
	cmd = exec.Command(os.Args[0], "-test.run=TestLockHelper")
	cmd.Env = append(os.Environ(), "AUGUR_LOCK_PROBE="+tier.Path)
	out, err = cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("acquired")) {
		t.Fatalf("probe after unlock: %v\n%s", err, out)
	}
}

// TestLockHelper runs only as the child of TestLockExcludesOtherProcesses.
func TestLockHelper(t *testing.T) {
	dir := os.Getenv("AUGUR_LOCK_PROBE")
	if dir == "" {
		return
	}
	tr, err := Open(Tier{Path: dir})
	if err == nil {
		_, err = tr.TryLock()
	}
	if err != nil {
		os.Stdout.WriteString(err.Error() + "\n")
		return
	}
	os.Stdout.WriteString("acquired\n")
}

// Where openat2 is refused (a kernel before 5.6, a seccomp filter), the
// tier's directories are reached one component at a time, with the same
// results: a copy is published into directories made on the way, found,
// counted and removed.
func TestWithoutOpenat2(t *testing.T) {
	noOpenat2.Store(true)
	defer noOpenat2.Store(false)
	tr, src := newTier(t, 1<<20)
	p := filepath.Join(src, "a", "b", "f.bin")
	write(t, p, []byte("stepwise"))
	if n, err := tr.Publish(p); err != nil || n != 8 {
		t.Fatalf("Publish = %d, %v", n, err)
	}
	var st unix.Stat_t
	if err := Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	if Lookup([]*Tree{tr}, p, &st) != 0 || tr.Usage().Files != 1 {
		t.Fatalf("the copy was not found (%d files counted)", tr.Usage().Files)
	}
	if err := tr.Remove(p); err != nil || tr.Usage().Files != 0 {
		t.Fatalf("Remove: %v, %d files left", err, tr.Usage().Files)
	}
}

// The Tree keeps tmp/ open; a copy is made in tmp/ as the tier has it
// now, even when the kept descriptor no longer names it: tmp/ removed and
// made again, or the descriptor closed by the host program and its number
// given to a directory of the program's, where no file may be created and
// which the Tree's Close must leave open.
func TestPublishWhenTheKeptTmpIsGone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, tr *Tree) (programs int)
	}{
		{"tmp-made-again", func(t *testing.T, tr *Tree) int {
			must(t, os.Remove(filepath.Join(tr.Path, tmpDir)))
			must(t, os.Mkdir(filepath.Join(tr.Path, tmpDir), 0o700))
			return -1
		}},
		{"number-reused", func(t *testing.T, tr *Tree) int {
			must(t, unix.Close(tr.tmp.fd))
			fd, err := unix.Open(t.TempDir(), unix.O_RDONLY|unix.O_DIRECTORY, 0)
			must(t, err)
			t.Cleanup(func() { unix.Close(fd) })
			if fd != tr.tmp.fd {
				t.Fatalf("the number %d went to %d, not to the program's directory", tr.tmp.fd, fd)
			}
			return fd
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, src := newTier(t, 1<<20)
			programs := tc.spoil(t, tr)
			created := watchCreates(t, programs)
			p := filepath.Join(src, "f.bin")
			write(t, p, []byte("bytes"))
			if n, err := tr.Publish(p); err != nil || n != 5 {
				t.Fatalf("Publish = %d, %v", n, err)
			}
			if err := tr.Usable(); err != nil {
				t.Fatalf("Usable: %v", err)
			}
			if got := tr.Usage().Files; got != 1 {
				t.Fatalf("%d copies in the tier, want 1", got)
			}
			if created() {
				t.Fatal("a file was created in the program's directory")
			}
			must(t, tr.Close())
			if _, err := unix.FcntlInt(uintptr(programs), unix.F_GETFD, 0); programs >= 0 && err != nil {
				t.Fatalf("Close closed the program's descriptor: %v", err)
			}
		})
	}
}

// watchCreates reports, when called, whether anything was created in the
// directory open as fd since (never, for fd -1).
func watchCreates(t *testing.T, fd int) func() bool {
	if fd < 0 {
		return func() bool { return false }
	}
	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	must(t, err)
	t.Cleanup(func() { unix.Close(in) })
	_, err = unix.InotifyAddWatch(in, fmt.Sprintf("/proc/self/fd/%d", fd), unix.IN_CREATE)
	must(t, err)
	return func() bool {
		var buf [4096]byte
		n, _ := unix.Read(in, buf[:])
		return n > 0
	}
}
