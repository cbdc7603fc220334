package shim

import (
	"bytes"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

// readerPages writes data's pages [lo, hi) of block b into f's blocks
// file in tier 0 and marks them present, as a reader's tee does.
func readerPages(t *testing.T, seg *Segment, bp string, slot int, data []byte, b int64, lo, hi int) {
	t.Helper()
	w, err := os.OpenFile(bp, os.O_WRONLY, 0)
	must(t, err)
	defer w.Close()
	from, to := b*blockSize+int64(lo)*pageSize, min(b*blockSize+int64(hi)*pageSize, int64(len(data)))
	_, err = w.WriteAt(data[from:to], from)
	must(t, err)
	atomic.OrUint64(seg.pageWord(slot, 0, b), pageRun(lo, hi))
}

// enterBig enters src in the block table and returns its entry and slot.
func enterBig(t *testing.T, m *blocks, seg *Segment, src string) (*bigFile, int) {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Stat(src, &st))
	m.enter(src, &st)
	m.mu.Lock()
	f := m.files[pathKey(src)]
	m.mu.Unlock()
	if f == nil {
		t.Fatal("the file was not entered")
	}
	return f, f.slot
}

// A large file its readers have read more than half of is copied whole,
// and only the pages no tier holds are read from the source: pages a
// reader put in the middle of a block stay as they are.
func TestBlocksFillHalfReadFile(t *testing.T) {
	l, seg, tier, src, data := leadBlocks(t, "unit-blocks-fill", 6*blockSize+5000, 64*blockSize)
	m := l.big.Load()
	f, slot := enterBig(t, m, seg, src)
	bp, _ := tiering.BlockPath(tier.Path, src)
	// Pages 10-19 of block 4 a reader put there (first: the fill may
	// begin once blocks 0-3 are there too); made different from the
	// source here so that a second read of them would show.
	marked := bytes.Repeat([]byte{0xAA}, int(10*pageSize))
	readerPages(t, seg, bp, slot, append(make([]byte, 4*blockSize+10*pageSize), marked...), 4, 10, 20)
	for b := int64(0); b < 4; b++ {
		readerPages(t, seg, bp, slot, data, b, 0, 64)
	}

	waitFor(t, "the file filled", func() int {
		if p, all := m.presentFor(f); p == all {
			return 1
		}
		return -1
	})
	got, err := os.ReadFile(bp)
	must(t, err)
	at := 4*blockSize + 10*pageSize
	if !bytes.Equal(got[at:at+10*pageSize], marked) {
		t.Error("pages a reader had put in the tier were read from the source again")
	}
	copy(got[at:], data[at:at+10*pageSize])
	if !bytes.Equal(got, data) {
		t.Error("the filled blocks file differs from the source")
	}
}

// A file read under half, or not read for a while, is not filled.
func TestBlocksFillWaitsForHalfAndReaders(t *testing.T) {
	l, seg, tier, src, data := leadBlocks(t, "unit-blocks-nofill", 6*blockSize, 64*blockSize)
	m := l.big.Load()
	f, slot := enterBig(t, m, seg, src)
	bp, _ := tiering.BlockPath(tier.Path, src)
	queued := func() int {
		t.Helper()
		m.mu.Lock()
		defer m.mu.Unlock()
		m.looked = time.Time{}
		m.fillFiles()
		return m.queued[copyFill] + len(f.copying)
	}
	readerPages(t, seg, bp, slot, data, 0, 0, 64)
	readerPages(t, seg, bp, slot, data, 1, 0, 64)
	if n := queued(); n != 0 {
		t.Fatalf("a file read a third: %d blocks queued to fill it, want 0", n)
	}
	readerPages(t, seg, bp, slot, data, 2, 0, 64)
	m.mu.Lock()
	f.read, f.readAt = 3*64, time.Now().Add(-2*fillActive) // read half, long ago
	m.mu.Unlock()
	if n := queued(); n != 0 {
		t.Fatalf("a file not read for %v: %d blocks queued to fill it, want 0", 2*fillActive, n)
	}
	readerPages(t, seg, bp, slot, data, 3, 0, 1) // read again
	if n := queued(); n == 0 {
		t.Fatal("a file read half and now: nothing queued to fill it")
	}
}

// presentFor is m.presentPages under m.mu.
func (m *blocks) presentFor(f *bigFile) (present, total int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.presentPages(f)
}
