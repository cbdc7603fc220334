package fetchpool

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

// fakeSource fills copies by fill and counts what the pool asks of it.
type fakeSource struct {
	fill func(path string, st *unix.Stat_t, dst *os.File) (int64, bool)

	mu       sync.Mutex
	fills    int   // guarded by mu
	pfs      int   // copies from the shared filesystem begun; guarded by mu
	pfsBytes int64 // and ended; guarded by mu
}

var _ Source = (*fakeSource)(nil)

func (s *fakeSource) Fill(path string, st *unix.Stat_t, dst *os.File) (int64, bool) {
	s.mu.Lock()
	s.fills++
	s.mu.Unlock()
	return s.fill(path, st, dst)
}

func (s *fakeSource) BeginPFS(int64) func(int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pfs++
	return func(n int64) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.pfsBytes += n
	}
}

// serving is a fill that writes b, as a peer's transfer would, and
// reports n bytes and ok.
func serving(b []byte, n int, ok bool) func(string, *unix.Stat_t, *os.File) (int64, bool) {
	return func(_ string, _ *unix.Stat_t, dst *os.File) (int64, bool) {
		dst.Write(b)
		return int64(n), ok
	}
}

// fakeGuard allows copies as told and records the tokens it is shown.
type fakeGuard struct {
	begin, keep bool
	kept        []uint64
}

func (g *fakeGuard) Begin(string) (uint64, bool) { return 7, g.begin }

func (g *fakeGuard) Commit(_ string, token uint64, _ *unix.Stat_t, rename func() error, _ func()) error {
	g.kept = append(g.kept, token)
	if !g.keep {
		return ErrHeld
	}
	return rename()
}

// fetchOne copies file (of size bytes) into a new tier through a pool
// with src and, unless nil, g, and returns the result and the pool's
// accounts of the tier.
func fetchOne(t *testing.T, file string, size int64, src Source, g Guard) (Result, TierState, *tiering.Tree) {
	t.Helper()
	tr := tier(t, filepath.Join(t.TempDir(), "tier"), 1<<20)
	results := make(chan Result, 1)
	p := New([]*tiering.Tree{tr}, []int64{0}, func(r Result) { results <- r })
	defer p.Close()
	if g != nil {
		p.Guard(g)
	}
	p.Source(src)
	if !p.Fetch(file, size) {
		t.Fatal("Fetch refused")
	}
	r := <-results
	return r, p.Tiers()[0], tr
}

// sameCopy checks that tr's copy of file holds what file holds now and
// that no temporary file is left.
func sameCopy(t *testing.T, tr *tiering.Tree, file string) {
	t.Helper()
	cp, _ := tiering.CopyPath(tr.Path, file)
	got, err := os.ReadFile(cp)
	want, _ := os.ReadFile(file)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("copy differs from the source (%v)", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(tr.Path, "tmp")); len(entries) != 0 {
		t.Errorf("temporary files left: %v", entries)
	}
}

// A copy the Source fills is published with its bytes, within the
// guard, and said to come from the peer; the shared filesystem is not
// read.
func TestSourceFillsCopies(t *testing.T) {
	const size = 10000
	files, _ := world(t, 1, size)
	peerCopy, _ := os.ReadFile(files[0])
	var stated unix.Stat_t
	src := &fakeSource{fill: func(path string, st *unix.Stat_t, dst *os.File) (int64, bool) {
		stated = *st
		return serving(peerCopy, size, true)(path, st, dst)
	}}
	g := &fakeGuard{begin: true, keep: true}
	r, st, tr := fetchOne(t, files[0], size, src, g)
	if r.Err != nil || !r.Peer || r.Bytes != size {
		t.Fatalf("result %+v; want %d bytes from the peer", r, size)
	}
	sameCopy(t, tr, files[0])
	if src.fills != 1 || src.pfs != 0 || st.Used != size {
		t.Errorf("%d fills, %d copies from the shared filesystem, %d bytes used; want 1, 0, %d", src.fills, src.pfs, st.Used, size)
	}
	if stated.Size != size || stated.Mode&unix.S_IFMT != unix.S_IFREG {
		t.Errorf("Fill was told size %d mode %o; want the source's stat", stated.Size, stated.Mode)
	}
	if len(g.kept) != 1 || g.kept[0] != 7 {
		t.Errorf("guard asked to keep %v; want the one copy, token 7", g.kept)
	}
}

// Whatever goes wrong with the Source's copy, the file is copied from the
// shared filesystem in the same job: the caller sees a copy from there,
// right, and no temporary file.
func TestSourceFailureFallsBackToPFS(t *testing.T) {
	const size = 10000
	garbage := bytes.Repeat([]byte{0xee}, size)
	cases := map[string]func(string, *unix.Stat_t, *os.File) (int64, bool){
		"declines":                   serving(nil, 0, false),
		"fails halfway":              serving(garbage[:size/2], size/2, false),
		"short":                      serving(garbage[:size-1], size-1, true),
		"long":                       serving(append(garbage, 0xee), size+1, true),
		"reports more than it wrote": serving(garbage[:size/2], size, true),
		"source changed meanwhile": func(path string, st *unix.Stat_t, dst *os.File) (int64, bool) {
			old, _ := os.ReadFile(path)
			os.WriteFile(path, garbage, 0o644) // same size, new bytes
			later := time.Unix(0, st.Mtim.Nano()).Add(time.Second)
			os.Chtimes(path, later, later) // a new mtime, however coarse the clock
			return serving(old, size, true)(path, st, dst)
		},
	}
	for name, fill := range cases {
		t.Run(name, func(t *testing.T) {
			files, _ := world(t, 1, size)
			src := &fakeSource{fill: fill}
			r, st, tr := fetchOne(t, files[0], size, src, nil)
			if r.Err != nil || r.Peer || r.Bytes != size {
				t.Fatalf("result %+v; want %d bytes from the shared filesystem", r, size)
			}
			sameCopy(t, tr, files[0])
			if src.fills != 1 || src.pfs != 1 || src.pfsBytes != size || st.Used != size {
				t.Errorf("%d fills, %d copies from the shared filesystem of %d bytes, %d bytes used; want 1, 1, %d, %d",
					src.fills, src.pfs, src.pfsBytes, st.Used, size, size)
			}
		})
	}
}

// The guard applies to a copy from the Source as to any: a file that may
// be being written is not asked of the Source, and a copy whose file
// changed while the Source filled it is not put in place, nor copied
// again from the shared filesystem.
func TestGuardAppliesToSourceCopies(t *testing.T) {
	const size = 100
	files, _ := world(t, 1, size)
	peerCopy, _ := os.ReadFile(files[0])
	cases := []struct {
		guard fakeGuard
		fills int
	}{
		{guard: fakeGuard{begin: false}, fills: 0},
		{guard: fakeGuard{begin: true, keep: false}, fills: 1},
	}
	for _, c := range cases {
		src := &fakeSource{fill: serving(peerCopy, size, true)}
		r, st, tr := fetchOne(t, files[0], size, src, &c.guard)
		if !errors.Is(r.Err, ErrHeld) || r.Peer || st.Used != 0 {
			t.Errorf("guard %+v: result %+v, %d bytes used; want ErrHeld, nothing kept", c.guard, r, st.Used)
		}
		if src.fills != c.fills || src.pfs != 0 {
			t.Errorf("guard %+v: %d fills, %d copies from the shared filesystem; want %d, 0", c.guard, src.fills, src.pfs, c.fills)
		}
		cp, _ := tiering.CopyPath(tr.Path, files[0])
		if _, err := os.Lstat(cp); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("guard %+v: a copy is left (%v)", c.guard, err)
		}
	}
}

// statSource is a fakeSource with its own stat (Statter).
type statSource struct {
	*fakeSource
	stat func(path string, st *unix.Stat_t) error
}

var _ Statter = statSource{}

func (s statSource) Stat(path string, st *unix.Stat_t) error { return s.stat(path, st) }

// A Source's own stat stands in for the pool's: what it says is what
// Fill is told, and a file it refuses is copied from the shared
// filesystem without asking Fill.
func TestSourceStatsItsFiles(t *testing.T) {
	const size = 10000
	files, _ := world(t, 1, size)
	peerCopy, _ := os.ReadFile(files[0])
	var told unix.Stat_t
	src := statSource{&fakeSource{fill: func(path string, st *unix.Stat_t, dst *os.File) (int64, bool) {
		told = *st
		return serving(peerCopy, size, true)(path, st, dst)
	}}, func(path string, st *unix.Stat_t) error {
		err := tiering.Stat(path, st)
		st.Nlink += 100 // a mark Fill must see (not one a copy's check compares)
		return err
	}}
	var want unix.Stat_t
	must(t, tiering.Stat(files[0], &want))
	if r, _, _ := fetchOne(t, files[0], size, src, nil); r.Err != nil || !r.Peer || told.Nlink != want.Nlink+100 {
		t.Errorf("result %+v, Fill told %d links; want the peer's copy and the Source's stat (%d)", r, told.Nlink, want.Nlink+100)
	}
	refused := statSource{&fakeSource{fill: serving(peerCopy, size, true)}, func(string, *unix.Stat_t) error {
		return errors.New("linked")
	}}
	r, _, tr := fetchOne(t, files[0], size, refused, nil)
	if r.Err != nil || r.Peer || refused.fills != 0 || refused.pfs != 1 {
		t.Errorf("result %+v, %d fills, %d from the shared filesystem; want the shared filesystem's copy only", r, refused.fills, refused.pfs)
	}
	sameCopy(t, tr, files[0])
}
