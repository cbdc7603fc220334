package shim

/*
#include "../intercept.h"
*/
import "C"

import (
	"hash/fnv"
	"sync/atomic"
	"unsafe"
)

// The pending table tells readers which copies are being written, so an
// open of such a file waits for the copy instead of reading the shared
// filesystem a second time (see struct augur_pending). Only the leader
// writes it; the hash is the data plane's (FNV-1a 64 of the path).

func (s *Segment) pendingSlot(path string) (*C.struct_augur_pending, uint64) {
	sum := pathKey(path)
	return &s.s.pending[sum&(C.AUGUR_PENDING_SLOTS-1)], sum
}

// pathKey is the data plane's key of a path: FNV-1a 64 (augur_fnv1a).
func pathKey(path string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(path))
	return h.Sum64()
}

// markCopying says a copy of path is being written.
func (s *Segment) markCopying(path string) {
	p, h := s.pendingSlot(path)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&p.state)), C.AUGUR_PENDING_NONE)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&p.hash)), h)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&p.state)), C.AUGUR_PENDING_COPYING)
}

// clearCopying says the copy of path is published or abandoned.
func (s *Segment) clearCopying(path string) {
	p, h := s.pendingSlot(path)
	if atomic.LoadUint64((*uint64)(unsafe.Pointer(&p.hash))) == h {
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&p.state)), C.AUGUR_PENDING_NONE)
	}
}
