package shim

import (
	"context"
	"os"
	"sync/atomic"
	"time"

	"github.com/augur-hpc/augur/peers"
	"golang.org/x/sys/unix"
)

// Large files' blocks between a job's nodes. Each block of a large file
// has an owner among the nodes (peers.BlockOwner: a hash of the path and
// the block's index, so one file's blocks spread over all of them). A
// node about to copy a block from the shared filesystem asks its owner
// first (fromPeer); the owner answers from its tier if it holds every page
// asked for (Block), else copies the block from the shared filesystem into
// its own tier first, if the tiers have room (FillBlock), so that the
// shared filesystem serves each block once to the whole job. Bytes from a
// peer are written into the blocks file, and their pages marked present,
// only once the answer's tag is right (peers.Client.FetchBlock); any
// failure reads the shared filesystem, as a node alone would.

// The sizes peers' requests are checked with are the data plane's (an
// index out of range, negative or not, fails the build).
var (
	_ = [1]struct{}{}[peers.BlockSize-blockSize]
	_ = [1]struct{}{}[peers.PageSize-pageSize]
)

// peerNone is bigFile.peerIno for a file no peer is asked about.
const peerNone = ^uint64(0)

// fillPoll is how often a fill for a peer looks whether a copy of the
// block under way has ended.
const fillPoll = 5 * time.Millisecond

// fromPeer reads buf, the bytes at off of c's block, from the block's
// owner, and reports whether it did: never for a copy made for a peer
// (this node owns the block), nor in a job of one node, nor for a file
// that is not the dataset's own (peerInode).
func (m *blocks) fromPeer(c blockCopy, off int64, buf []byte) bool {
	p := m.l.peers
	if p == nil || c.forPeer {
		return false
	}
	ino := m.peerInode(c.f, p)
	return ino != peerNone && p.fetchBlock(c.f.path, &c.f.st, ino, c.b, off, buf)
}

// peerInode is the inode a peer is asked for f's blocks by: the source
// as peers.StatSource finds it (below its root, without a symlink, one
// name), if it is the file f was entered as; else peerNone. It is looked
// at once per file: a metadata request to the shared filesystem.
func (m *blocks) peerInode(f *bigFile, p *peering) uint64 {
	m.mu.Lock()
	ino := f.peerIno
	m.mu.Unlock()
	if ino != 0 {
		return ino
	}
	var st unix.Stat_t
	ino = peerNone
	if p.Stat(f.path, &st) == nil && sameVersion(&st, &f.st) {
		ino = st.Ino
	}
	m.mu.Lock()
	f.peerIno = ino
	m.mu.Unlock()
	return ino
}

// sameVersion says whether a and b describe one version of one file.
func sameVersion(a, b *unix.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Size == b.Size && a.Mtim == b.Mtim
}

// Block implements peers.Blocks: a descriptor of the blocks file of the
// tier that holds every page of [off, off+n) of source, if one does, and
// the identity source was entered with.
func (m *blocks) Block(source string, off, n int64) (*os.File, peers.BlockFile, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.files[pathKey(source)]
	if f == nil || f.path != source {
		return nil, peers.BlockFile{}, false
	}
	id := peers.BlockFile{Dev: f.st.Dev, Ino: f.st.Ino, Size: f.st.Size, Mtime: f.st.Mtim.Nano()}
	return m.openHeld(f, off, n), id, true
}

// openHeld opens, for a peer, a tier's blocks file of f if the tier holds
// every page of [off, off+n) (within one block), or nil. The descriptor is
// the caller's: the pages it holds stay whatever the leader does with its
// own (a change of the file removes the blocks file; the bytes the peer
// gets are then those of the file it asked for, as a read just before
// the change would have been).
//
// Preconditions: m.mu is held.
func (m *blocks) openHeld(f *bigFile, off, n int64) *os.File {
	seg := m.l.seg
	seq := seg.blockSeq(f.slot)
	if seq&1 != 0 || seg.blockKey(f.slot) != f.key {
		return nil
	}
	b := off >> blockShift
	need := pageSpan(off-b*blockSize, n)
	tiers := seg.blockTiers(f.slot)
	for t := range m.l.tiers {
		if tiers>>t&1 == 0 || atomic.LoadUint64(seg.pageWord(f.slot, t, b))&need != need {
			continue
		}
		d, err := m.blocksFileLocked(f, t)
		if err != nil {
			return nil
		}
		fd, err := unix.FcntlInt(d.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil
		}
		if seg.blockSeq(f.slot) != seq {
			unix.Close(fd) // pages taken away meanwhile
			return nil
		}
		return os.NewFile(uintptr(fd), d.Name())
	}
	return nil
}

// pageSpan is the page bits of the bytes [at, at+n) of a block.
func pageSpan(at, n int64) uint64 {
	lo, hi := uint(at>>pageShift), uint((at+n-1)>>pageShift)
	return (^uint64(0) >> (63 - hi)) &^ (1<<lo - 1)
}

// FillBlock implements peers.Blocks: it copies from the shared filesystem
// the pages of [off, off+n) that no tier holds (waiting for a copy of the
// block under way instead), entering source as st first if it is not
// entered, and opens the range as Block does. At most blockWorkers such
// copies are made at once. Only the range: the asker's own reader read
// the rest of the block itself, or will ask for it, and this node's
// readers may never read it.
func (m *blocks) FillBlock(ctx context.Context, source string, st *unix.Stat_t, off, n int64) *os.File {
	f := m.enteredAs(source, st)
	if f == nil {
		return nil
	}
	select {
	case m.fills <- struct{}{}:
		defer func() { <-m.fills }()
	case <-ctx.Done():
		return nil
	case <-m.l.stop:
		return nil
	}
	b := off >> blockShift
	if !m.fill(ctx, f, b, pageSpan(off-b*blockSize, n)) {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.files[f.key] != f {
		return nil
	}
	return m.openHeld(f, off, n)
}

// enteredAs is source's entry, made as st if there is none and st is a
// large file; nil if there is none, or if st (not nil) is not the file
// it was entered as.
func (m *blocks) enteredAs(source string, st *unix.Stat_t) *bigFile {
	key := pathKey(source)
	m.mu.Lock()
	f := m.files[key]
	m.mu.Unlock()
	if f == nil && st != nil && m.large(st.Size) {
		m.enter(source, st)
		m.mu.Lock()
		f = m.files[key]
		m.mu.Unlock()
	}
	if f == nil || f.path != source || st != nil && !sameVersion(st, &f.st) {
		return nil
	}
	return f
}

// fill copies the pages of need, of block b of f, that no tier holds from
// the shared filesystem, within ctx, unless a copy of the block is under
// way, whose end it waits for; it reports false if the tiers have no room
// for the block or f went meanwhile.
func (m *blocks) fill(ctx context.Context, f *bigFile, b int64, need uint64) bool {
	for {
		m.mu.Lock()
		if m.files[f.key] != f {
			m.mu.Unlock()
			return false
		}
		if f.copying[b] {
			m.mu.Unlock()
			select {
			case <-ctx.Done():
				return false
			case <-time.After(fillPoll):
			}
			continue
		}
		pages := m.absent(f, b) & need
		if pages == 0 {
			m.mu.Unlock()
			return true
		}
		t := m.reserve(f, b)
		if t < 0 {
			m.l.notCached(f.path, "cached in part: the tiers have no room for more of its blocks (blocks are not evicted)")
			m.mu.Unlock()
			return false
		}
		f.copying[b] = true
		w, bit := m.l.seg.copyingWord(f.slot, b)
		atomic.OrUint64(w, bit) // this node's readers wait for the copy too
		c := blockCopy{f: f, b: b, tier: t, seq: m.l.seg.blockSeq(f.slot), pages: pages, forPeer: true}
		m.mu.Unlock()
		buf, _ := m.bufs.Get().(*[blockSize]byte)
		if buf == nil {
			buf = new([blockSize]byte)
		}
		m.copyBlock(c, buf[:])
		m.bufs.Put(buf)
		return true
	}
}
