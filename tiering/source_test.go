package tiering

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/augur-hpc/augur/bench/pfsemu"
	"golang.org/x/sys/unix"
)

// overPFS serves a new directory holding one file of size bytes through
// the emulated shared filesystem (needs root and /dev/fuse), with no
// client page cache and attributes cached for a minute, and returns the
// file's path on the mount, its bytes and the emulator.
func overPFS(t *testing.T, size int, refuse pfsemu.Refusal, set ...func(*pfsemu.Options)) (string, []byte, *pfsemu.Server) {
	t.Helper()
	dir := t.TempDir()
	src, mnt := filepath.Join(dir, "src"), filepath.Join(dir, "mnt")
	for _, d := range []string{src, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*13 + 7)
	}
	if err := os.WriteFile(filepath.Join(src, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	o := pfsemu.DefaultOptions(src, mnt)
	o.OpenLatency, o.ReadLatency, o.MetaLatency, o.Bandwidth = 0, 0, 0, 0
	minute := time.Minute
	o.DirectIO, o.CacheTimeout, o.RefuseDirect, o.Logf = true, &minute, refuse, t.Logf
	for _, f := range set {
		f(&o)
	}
	srv, err := pfsemu.Mount(o)
	if err != nil {
		t.Fatalf("pfsemu (needs root and /dev/fuse): %v", err)
	}
	t.Cleanup(func() { srv.Unmount() })
	return filepath.Join(mnt, "f"), data, srv
}

// uncachedCopy copies path into a new tier as the reactive policy does
// (OpenSourceUncached, then PublishSource) and checks the copy's bytes.
func uncachedCopy(t *testing.T, path string, want []byte) *Source {
	t.Helper()
	tier, _ := newTier(t, 1<<30)
	src, err := OpenSourceUncached(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.File.Close()
	if n, err := tier.PublishSource(path, src); err != nil || n != int64(len(want)) {
		t.Fatalf("published %d of %d bytes: %v", n, len(want), err)
	}
	cp, _ := CopyPath(tier.Path, path)
	if got, _ := os.ReadFile(cp); !bytes.Equal(got, want) {
		t.Fatal("the copy differs from its source")
	}
	return src
}

// A copy costs the shared filesystem its open and its reads: the checks
// of the source before and after (size and mtime) are answered by the
// client's attribute cache, which a stat asking for the atime too would
// miss after every read (a FUSE client marks it stale).
func TestUncachedCopyAsksNoAttributes(t *testing.T) {
	path, data, srv := overPFS(t, 300_000, "")
	var st os.FileInfo
	st, _ = os.Stat(path) // the lookup a reader's open would make
	before := srv.Stats()
	src := uncachedCopy(t, path, data)
	s := srv.Stats()
	if !src.Direct || st == nil {
		t.Fatalf("read with O_DIRECT %v, stat %v: want an O_DIRECT copy of a file", src.Direct, st)
	}
	if got := s.Getattrs - before.Getattrs; got != 0 {
		t.Errorf("the copy sent %d GETATTR requests, want none", got)
	}
	if s.Opens-before.Opens != 1 || s.ReadBytes-before.ReadBytes != int64(len(data)) {
		t.Errorf("the copy opened %d times and read %d bytes, want 1 open and %d bytes",
			s.Opens-before.Opens, s.ReadBytes-before.ReadBytes, len(data))
	}
}

// A filesystem that refuses O_DIRECT at open is read through its cache,
// and so is every later source of the process (noDirect); one that
// refuses it at read is read on through the same descriptor with
// O_DIRECT cleared. Either way the copy is whole and the source is
// opened once and read once.
func TestUncachedCopyFallsBackWhereODirectIsRefused(t *testing.T) {
	for _, refuse := range []pfsemu.Refusal{pfsemu.RefuseOpen, pfsemu.RefuseRead} {
		t.Run(string(refuse), func(t *testing.T) {
			t.Cleanup(func() { noDirect.Store(false) })
			path, data, srv := overPFS(t, 3*copyBuf+100, refuse)
			src := uncachedCopy(t, path, data)
			s := srv.Stats()
			if want := refuse == pfsemu.RefuseRead; src.Direct != want || noDirect.Load() == want {
				t.Errorf("opened with O_DIRECT %v, later sources with it %v; want %v, %v", src.Direct, !noDirect.Load(), want, want)
			}
			if s.ReadBytes != int64(len(data)) {
				t.Errorf("the source served %d bytes, want %d", s.ReadBytes, len(data))
			}
			want := int64(1)
			if refuse == pfsemu.RefuseOpen {
				want = 2 // the refused open and the one through the cache
			}
			if s.Opens != want {
				t.Errorf("the source was opened %d times, want %d", s.Opens, want)
			}
		})
	}
}

// A copy a reader waits for has its parts' reads in flight together: the
// emulator, each read held 100 ms, sees as many client threads reading
// at once as the copy has parts (a sequential copy would show one).
func TestWaitedCopyReadsItsPartsAtOnce(t *testing.T) {
	path, data, srv := overPFS(t, copyStreams*copyPart, "", func(o *pfsemu.Options) {
		o.ReadLatency = 100 * time.Millisecond
	})
	uncachedCopy(t, path, data)
	if got := srv.Stats().PeakReaders; got < 2 {
		t.Errorf("at most %d read of the copy in flight at once, want its %d parts' together", got, copyStreams)
	}
}

// Resident tells a client that keeps a page cache from one that keeps
// none: after a read through an ordinary descriptor, the bytes are in
// the page cache only where the client caches. (The tier's reactive
// policy stops making readers wait for copies on the first answer.)
func TestResidentSaysWhetherTheClientCaches(t *testing.T) {
	for _, direct := range []bool{true, false} {
		path, data, _ := overPFS(t, 300_000, "", func(o *pfsemu.Options) { o.DirectIO = direct })
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data))
		if n, err := f.ReadAt(got, 0); n != len(data) || !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes (%v)", n, err)
		}
		if r := Resident(f, int64(len(data))); r == direct {
			t.Errorf("direct I/O %v: Resident = %v, want %v", direct, r, !direct)
		}
		f.Close()
	}
	// Before anything is read, nothing is resident; an empty file says no.
	path, data, _ := overPFS(t, 300_000, "", func(o *pfsemu.Options) { o.DirectIO = false })
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if Resident(f, int64(len(data))) || Resident(f, 0) {
		t.Error("Resident said yes of bytes never read")
	}
}

// ReadAhead is the window the kernel keeps for a filesystem's client, as
// its knob sets it: a FUSE mount's, set to 256 KiB and to 64 KiB. A device
// the kernel keeps no window for has none.
func TestReadAheadOfTheClient(t *testing.T) {
	path, _, _ := overPFS(t, 1000, "", func(o *pfsemu.Options) { o.DirectIO = false })
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	knob := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	for _, kb := range []int64{256, 64} {
		if err := os.WriteFile(knob, []byte(fmt.Sprint(kb)), 0o644); err != nil {
			t.Fatalf("setting the mount's read-ahead: %v", err)
		}
		if got := ReadAhead(st.Dev); got != kb<<10 {
			t.Errorf("read_ahead_kb %d: ReadAhead %d, want %d", kb, got, kb<<10)
		}
	}
	if got := ReadAhead(unix.Mkdev(4095, 1<<20-1)); got != 0 {
		t.Errorf("a device without a bdi: ReadAhead %d, want 0", got)
	}
}
