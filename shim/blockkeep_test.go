package shim

import (
	"bytes"
	"os"
	"sync/atomic"
	"testing"

	"github.com/augur-hpc/augur/tiering"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// The pages a job's readers put in the tier are the next job's from its
// start: entered, present and reserved, with the blocks file's bytes; a
// file changed between the jobs starts with none.
func TestBlocksKeptForTheNextJob(t *testing.T) {
	l, seg, tier, src, data := leadBlocks(t, "unit-blocks-keep", 3*blockSize+777, 64*blockSize)
	m := l.big.Load()
	_, slot := enterBig(t, m, seg, src)
	bp, _ := tiering.BlockPath(tier.Path, src)
	readerPages(t, seg, bp, slot, data, 0, 0, 64)
	readerPages(t, seg, bp, slot, data, 3, 0, 64) // the last block, whole
	readerPages(t, seg, bp, slot, data, 1, 5, 9)
	l.Close()

	next := func(job string) (*blocks, *Segment) {
		seg := testSegment(t, job)
		cfg := &Config{Roots: l.cfg.Roots, Policy: "reactive", Tiers: []tiering.Tier{tier}, BlockAbove: 8 << 20}
		l2, err := Lead(cfg, seg, zerolog.Nop())
		if err != nil || l2 == nil {
			t.Fatalf("Lead: %v", err)
		}
		t.Cleanup(l2.Close)
		return l2.big.Load(), seg
	}
	m2, seg2 := next("unit-blocks-keep2")
	m2.mu.Lock()
	f := m2.files[pathKey(src)]
	held := m2.held[0]
	m2.mu.Unlock()
	if f == nil {
		t.Fatal("the next job did not enter the file")
	}
	want := map[int64]uint64{0: ^uint64(0), 1: pageRun(5, 9), 2: 0, 3: pagesOf(f.st.Size, 3)}
	for b, w := range want {
		if got := atomic.LoadUint64(seg2.pageWord(f.slot, 0, b)); got != w {
			t.Errorf("block %d's pages %x, want %x", b, got, w)
		}
		rw, bit := seg2.reserveWord(f.slot, 0, b)
		if reserved := atomic.LoadUint64(rw)&bit != 0; reserved != (w != 0) {
			t.Errorf("block %d reserved %v, want %v", b, reserved, w != 0)
		}
	}
	if held < 3 {
		t.Errorf("%d blocks taken from the tier, want at least the 3 kept", held)
	}
	got, err := os.ReadFile(bp)
	must(t, err)
	if !bytes.Equal(got[:blockSize], data[:blockSize]) || !bytes.Equal(got[3*blockSize:], data[3*blockSize:]) {
		t.Error("the kept blocks' bytes differ from the source's")
	}

	// The source changes between jobs: its blocks go.
	m2.l.Close()
	must(t, os.WriteFile(src, data, 0o644))
	m3, seg3 := next("unit-blocks-keep3")
	m3.mu.Lock()
	f = m3.files[pathKey(src)]
	m3.mu.Unlock()
	if f != nil {
		var st unix.Stat_t
		must(t, unix.Stat(src, &st))
		t.Errorf("a file changed between jobs was entered (pages of block 0: %x)", atomic.LoadUint64(seg3.pageWord(f.slot, 0, 0)))
	}
	if _, err := os.Stat(bp); err == nil {
		t.Error("the blocks file of a file changed between jobs is still there")
	}
}
