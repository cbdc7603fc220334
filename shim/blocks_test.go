package shim

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/augur-hpc/augur/tiering"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// A large file opened from its original is entered in the block table
// with an empty blocks file in the tier and the readers' budget set
// aside; a stream has the blocks ahead of it copied, page bits set and
// bytes right; a change of the file frees the entry and gives its room
// back to the tier, and with no large file left, the readers' budget too.
func TestBlocksEnterCopyAheadAndForget(t *testing.T) {
	l, seg, tier, src, data := leadBlocks(t, "unit-blocks", 5*blockSize+12345, 64*blockSize)
	m := l.big.Load()
	if m == nil {
		t.Fatal("no blocks: a reactive leader with a tier tiers large files in blocks")
	}

	l.handle(Event{Kind: EvOpen, Tier: -1, Path: src})
	slot := waitFor(t, "the file's entry", func() int {
		at, _ := seg.blockFind(pathKey(src), func(int) bool { return true })
		return at
	})
	if f := seg.bslot(slot); uint64(f.size) != uint64(len(data)) || f.nblocks != 6 || seg.blockTiers(slot) != 1 {
		t.Fatalf("entry: size %d, %d blocks, tiers %b; want %d, 6, 1", f.size, f.nblocks, seg.blockTiers(slot), len(data))
	}
	bp, _ := tiering.BlockPath(tier.Path, src)
	if info, err := os.Stat(bp); err != nil || info.Size() != int64(len(data)) {
		t.Fatalf("blocks file %s: %v (want %d bytes)", bp, err, len(data))
	}
	waitFor(t, "the readers' budget", func() int {
		if atomic.LoadInt64(seg.budget(0)) == budgetOf(64*blockSize) {
			return 1
		}
		return -1
	})

	// A reader reached the middle of block 1: the rest of it and the
	// blocks after it are copied.
	l.handle(Event{Kind: EvStream, PID: 1, FD: 3, Path: src, Bytes: uint64(blockSize + 3*pageSize + 10)})
	// Each block is its own copy, done in any order: wait for all three.
	waitFor(t, "blocks 1 to 3 copied", func() int {
		if atomic.LoadUint64(seg.pageWord(slot, 0, 1)) != 0 && atomic.LoadUint64(seg.pageWord(slot, 0, 2)) == ^uint64(0) &&
			atomic.LoadUint64(seg.pageWord(slot, 0, 3)) == ^uint64(0) {
			return 1
		}
		return -1
	})
	if w, want := atomic.LoadUint64(seg.pageWord(slot, 0, 1)), uint64(1<<64-1)&^7; w != want {
		t.Errorf("block 1's pages %x, want those from page 3 on (%x)", w, want)
	}
	got, err := os.ReadFile(bp)
	must(t, err)
	for b := int64(1); b < 4; b++ {
		from := b * blockSize
		if b == 1 {
			from += 3 * pageSize
		}
		if !bytes.Equal(got[from:(b+1)*blockSize], data[from:(b+1)*blockSize]) {
			t.Errorf("block %d's bytes differ from the source's", b)
		}
	}
	if cw, bit := seg.copyingWord(slot, 2); atomic.LoadUint64(cw)&bit != 0 {
		t.Error("block 2 still marked as being copied")
	}

	// The file changes: the data plane frees the entry (as
	// augur_big_invalidate does) and tells the leader.
	seg.blockGone(slot)
	l.handle(Event{Kind: EvInvalidate, Path: src})
	m.mu.Lock()
	_, known := m.files[pathKey(src)]
	m.mu.Unlock()
	if known {
		t.Error("the leader still knows the file's entry after its change")
	}
	m.keep()
	m.mu.Lock()
	held := m.held[0]
	m.mu.Unlock()
	if b := atomic.LoadInt64(seg.budget(0)); held != 0 || b != 0 {
		t.Errorf("blocks taken from the tier after the change: %d, budget %d; want 0, 0 (no large file is left)", held, b)
	}
}

// A tier with no room for a block still takes large files in: their
// readers get no budget, read the original, and the leader says once
// that the tier is full.
func TestBlocksFullTier(t *testing.T) {
	l, seg, _, src, _ := leadBlocks(t, "unit-blocks-full", 3*blockSize, blockSize/2)
	m := l.big.Load()
	var st unix.Stat_t
	must(t, unix.Stat(src, &st))
	m.enter(src, &st)
	m.keep()
	m.mu.Lock()
	full, files := m.full[0], len(m.files)
	m.mu.Unlock()
	if files != 1 || !full || atomic.LoadInt64(seg.budget(0)) != 0 {
		t.Errorf("files %d, tier said full %v, budget %d; want 1, true, 0", files, full, atomic.LoadInt64(seg.budget(0)))
	}
}

// waitFor polls f until it returns a value of 0 or more, for 20 s at most.
func waitFor(t *testing.T, what string, f func() int) int {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if v := f(); v >= 0 {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20 s", what)
		}
	}
}

// leadBlocks writes a large file of size random bytes in a new dataset
// root and leads a reactive job of it, with one tier of capacity bytes
// and files above 8 MiB in blocks, until the test ends.
func leadBlocks(t *testing.T, job string, size, capacity int64) (*Leader, *Segment, tiering.Tier, string, []byte) {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join(root, "cls", "big.bin")
	must(t, os.MkdirAll(filepath.Dir(src), 0o755))
	data := make([]byte, size)
	rand.Read(data)
	must(t, os.WriteFile(src, data, 0o644))
	tier := tiering.Tier{Path: t.TempDir(), Capacity: capacity, Threads: 1}
	seg := testSegment(t, job)
	cfg := &Config{Roots: []string{root}, Policy: "reactive", Tiers: []tiering.Tier{tier}, BlockAbove: 8 << 20}
	l, err := Lead(cfg, seg, zerolog.Nop())
	if err != nil || l == nil {
		t.Fatalf("Lead: %v", err)
	}
	t.Cleanup(l.Close)
	return l, seg, tier, src, data
}
