package shim

import (
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// What a node serves its peers of a large file: a range of a block of a
// file it has not entered is entered as the file the server found and
// copied from the shared filesystem into the tier (FillBlock), its pages
// marked present, and opened; a range it holds is opened (Block) with the identity it
// was entered as, one it does not hold is not; a file of another version
// is not filled, and a tier without room fills nothing.
func TestBlocksForPeers(t *testing.T) {
	l, seg, _, src, data := leadBlocks(t, "unit-blocks-peers", 3*blockSize+777, 64*blockSize)
	m := l.big.Load()
	var st unix.Stat_t
	must(t, unix.Stat(src, &st))

	if f, _, entered := m.Block(src, blockSize, blockSize); f != nil || entered {
		t.Fatalf("a file not entered: %v, entered %v", f, entered)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := m.FillBlock(ctx, src, &st, 3*blockSize, 777)
	if f == nil {
		t.Fatal("FillBlock of the last block: nothing")
	}
	got := make([]byte, 777)
	if _, err := f.ReadAt(got, 3*blockSize); err != nil || !bytes.Equal(got, data[3*blockSize:]) {
		t.Errorf("the last block's bytes differ from the source's (%v)", err)
	}
	f.Close()
	slot := m.files[pathKey(src)].slot
	if w := atomic.LoadUint64(seg.pageWord(slot, 0, 3)); w != 1 {
		t.Errorf("block 3's pages %x; want 1 (its one page)", w)
	}

	f, id, entered := m.Block(src, 3*blockSize+10, 100)
	if f == nil || !entered || id.Size != st.Size || id.Ino != st.Ino || id.Mtime != st.Mtim.Nano() || id.Dev != st.Dev {
		t.Fatalf("Block of a range held: %v, %+v, entered %v", f, id, entered)
	}
	b, _ := io.ReadAll(io.NewSectionReader(f, 3*blockSize+10, 100))
	f.Close()
	if !bytes.Equal(b, data[3*blockSize+10:3*blockSize+110]) {
		t.Error("the range's bytes differ from the source's")
	}
	if f, _, entered := m.Block(src, blockSize, pageSize); f != nil || !entered {
		t.Errorf("Block of a range not held: %v, entered %v; want nil, entered", f, entered)
	}
	// A range is filled, not its whole block: the asker read the rest,
	// or will ask for it.
	if f := m.FillBlock(ctx, src, nil, blockSize+2*pageSize+5, 2*pageSize); f == nil {
		t.Error("FillBlock of pages 2 to 4 of block 1: nothing")
	} else {
		f.Close()
	}
	if w := atomic.LoadUint64(seg.pageWord(slot, 0, 1)); w != 0b11100 {
		t.Errorf("block 1's pages %b after a fill of pages 2 to 4; want 11100", w)
	}
	if n := seg.s.leader.big_ahead; n != 0 {
		t.Errorf("a copy for a peer counted as %d blocks copied ahead", n)
	}
	other := st
	other.Mtim.Nsec++
	if f := m.FillBlock(ctx, src, &other, blockSize, blockSize); f != nil {
		f.Close()
		t.Error("filled a block for a file of another mtime than the one entered")
	}
}

// A tier without room for a block takes a large file in for a peer, and
// fills none of its blocks.
func TestBlocksForPeersNoRoom(t *testing.T) {
	l, _, _, src, _ := leadBlocks(t, "unit-blocks-peers-full", 3*blockSize, blockSize/2)
	var st unix.Stat_t
	must(t, unix.Stat(src, &st))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if f := l.big.Load().FillBlock(ctx, src, &st, 0, blockSize); f != nil {
		f.Close()
		t.Error("filled a block into a tier without room")
	}
	if _, _, entered := l.big.Load().Block(src, 0, blockSize); !entered {
		t.Error("the file was not entered")
	}
}
