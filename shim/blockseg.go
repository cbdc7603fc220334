package shim

/*
#include "../preload/segment.h"
*/
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// The segment's side of large files tiered in blocks (struct
// augur_blocks, preload/segment.h): entries, presence and reservation
// words, the readers' budgets. Only the leader makes and frees entries;
// readers set page and reservation bits.

const (
	pageShift  = C.AUGUR_PAGE_SHIFT
	blockShift = C.AUGUR_BLOCK_SHIFT
	blockSize  = int64(1) << blockShift
	pageSize   = int64(1) << pageShift
	bfileSlots = C.AUGUR_BFILES
	bwords     = C.AUGUR_BWORDS
	bfileGone  = C.AUGUR_BFILE_GONE
)

// bslot is entry i of the block table.
func (s *Segment) bslot(i int) *C.struct_augur_bfile { return &s.s.blocks.files[i] }

func u32p(p *C.uint32_t) *uint32 { return (*uint32)(unsafe.Pointer(p)) }
func u64p(p *C.uint64_t) *uint64 { return (*uint64)(unsafe.Pointer(p)) }

// bword is word w of the presence and reservation words.
func (s *Segment) bword(w uint32) *uint64 { return u64p(&s.s.blocks.words[w]) }

// entryWords is how many words an entry of n blocks in ntiers tiers
// takes: pages and reservations per tier, and the blocks being copied.
func entryWords(n, ntiers int) int { return ntiers*(n+(n+63)/64) + (n+63)/64 }

// bentry describes an entry to make.
type bentry struct {
	key, size, dev, ino uint64
	nblocks, words      uint32
	ntiers, tiers       uint32
}

// blockFind is the slot of key in the table, or -1; free is the first
// slot, on key's probe, that a new entry of key may take (free, or freed
// and released: reusable), or -1.
func (s *Segment) blockFind(key uint64, reusable func(int) bool) (at, free int) {
	at, free = -1, -1
	for n := 0; n < bfileSlots; n++ {
		i := int((key + uint64(n)) & (bfileSlots - 1))
		k := atomic.LoadUint64(u64p(&s.bslot(i).key))
		switch {
		case k == key:
			return i, free
		case k == 0:
			if free < 0 {
				free = i
			}
			return -1, free
		case k == bfileGone && free < 0 && reusable(i):
			free = i
		}
	}
	return -1, free
}

// blockMake writes e into slot i, words cleared, key last: readers find
// it from then on.
func (s *Segment) blockMake(i int, e bentry) {
	f := s.bslot(i)
	for w := uint32(0); w < uint32(entryWords(int(e.nblocks), int(e.ntiers))); w++ {
		atomic.StoreUint64(s.bword(e.words+w), 0)
	}
	f.size, f.dev, f.ino = C.uint64_t(e.size), C.uint64_t(e.dev), C.uint64_t(e.ino)
	f.nblocks, f.words, f.ntiers = C.uint32_t(e.nblocks), C.uint32_t(e.words), C.uint32_t(e.ntiers)
	atomic.StoreUint32(u32p(&f.flags), 0)
	atomic.StoreUint32(u32p(&f.tiers), e.tiers)
	atomic.AddUint32(u32p(&f.gen), 1)
	atomic.StoreUint64(u64p(&f.key), e.key)
	atomic.AddUint64(u64p(&s.s.blocks.gen), 1)
}

// blockGone frees slot i as the data plane does (preload/blocks.c,
// augur_big_invalidate): pages taken away with seq odd.
func (s *Segment) blockGone(i int) {
	f := s.bslot(i)
	atomic.AddUint32(u32p(&f.seq), 1)
	atomic.StoreUint64(u64p(&f.key), bfileGone)
	for w := uint32(0); w < uint32(entryWords(int(f.nblocks), int(f.ntiers))); w++ {
		atomic.StoreUint64(s.bword(uint32(f.words)+w), 0)
	}
	atomic.AddUint32(u32p(&f.gen), 1)
	atomic.AddUint32(u32p(&f.seq), 1)
}

// blockKey is slot i's key now.
func (s *Segment) blockKey(i int) uint64 { return atomic.LoadUint64(u64p(&s.bslot(i).key)) }

// blockSeq is slot i's seq now.
func (s *Segment) blockSeq(i int) uint32 { return atomic.LoadUint32(u32p(&s.bslot(i).seq)) }

// pageWord is the presence word of block b of slot i in tier t.
func (s *Segment) pageWord(i, t int, b int64) *uint64 {
	f := s.bslot(i)
	return s.bword(uint32(f.words) + uint32(t)*uint32(f.nblocks) + uint32(b))
}

// reserveWord is the reservation word of block b of slot i in tier t,
// and b's bit in it.
func (s *Segment) reserveWord(i, t int, b int64) (*uint64, uint64) {
	f := s.bslot(i)
	per := (uint32(f.nblocks) + 63) / 64
	return s.bword(uint32(f.words) + uint32(f.ntiers)*uint32(f.nblocks) + uint32(t)*per + uint32(b/64)), 1 << (b % 64)
}

// copyingWord is the word of slot i saying which blocks the leader is
// copying, and b's bit in it.
func (s *Segment) copyingWord(i int, b int64) (*uint64, uint64) {
	f := s.bslot(i)
	per := (uint32(f.nblocks) + 63) / 64
	return s.bword(uint32(f.words) + uint32(f.ntiers)*(uint32(f.nblocks)+per) + uint32(b/64)), 1 << (b % 64)
}

// copied clears block b's copying bit and wakes the readers waiting for
// copies of slot i's blocks.
func (s *Segment) copied(i int, b int64) {
	w, bit := s.copyingWord(i, b)
	atomic.AndUint64(w, ^bit)
	wake := u32p(&s.bslot(i).wake)
	atomic.AddUint32(wake, 1)
	futexWake(wake)
}

// blockTiers is the tiers slot i has blocks files in, as a bit set.
func (s *Segment) blockTiers(i int) uint32 { return atomic.LoadUint32(u32p(&s.bslot(i).tiers)) }

// budget is tier t's blocks a reader may reserve.
func (s *Segment) budget(t int) *int64 { return (*int64)(unsafe.Pointer(&s.s.blocks.budget[t])) }

// setThreshold tells the readers which files are large.
func (s *Segment) setThreshold(n int64) { setU64(&s.s.blocks.threshold, uint64(n)) }
