package shim

/*
#include <linux/futex.h>
#include "../preload/segment.h"
*/
import "C"

import (
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The pending table tells readers which copies are being written, so an
// open of such a file waits for the copy instead of reading the shared
// filesystem a second time, and carries a reader's request for a copy
// and the leader's answer (see struct augur_pending). The hash is the
// data plane's key of the path (pathKey).

func (s *Segment) pendingSlot(path string) (*C.struct_augur_pending, uint64) {
	sum := pathKey(path)
	return &s.s.pending[sum&(C.AUGUR_PENDING_SLOTS-1)], sum
}

// pathKey is the data plane's key of a path in every table of the
// segment: the very function it calls (augur_path_key), which reads the
// path's bytes and keeps nothing.
func pathKey(path string) uint64 {
	return uint64(C.augur_path_key((*C.char)(unsafe.Pointer(unsafe.StringData(path))), C.uint64_t(len(path))))
}

// markCopying says a copy of path is being written. A slot that holds
// path's request already becomes COPYING without passing through NONE,
// which would send its reader to the original.
func (s *Segment) markCopying(path string) {
	p, h := s.pendingSlot(path)
	state := (*uint32)(unsafe.Pointer(&p.state))
	if atomic.LoadUint64((*uint64)(unsafe.Pointer(&p.hash))) == h && atomic.CompareAndSwapUint32(state, C.AUGUR_PENDING_REQUESTED, C.AUGUR_PENDING_COPYING) {
		return
	}
	atomic.StoreUint32(state, C.AUGUR_PENDING_NONE)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&p.hash)), h)
	atomic.StoreUint32(state, C.AUGUR_PENDING_COPYING)
}

// clearCopying says the copy of path is published or abandoned, or that
// none will be made for the reader that asked: the readers waiting on the
// slot look for the copy, or read the original.
func (s *Segment) clearCopying(path string) {
	p, h := s.pendingSlot(path)
	if atomic.LoadUint64((*uint64)(unsafe.Pointer(&p.hash))) == h {
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&p.state)), C.AUGUR_PENDING_NONE)
		futexWake((*uint32)(unsafe.Pointer(&p.state)))
	}
}

// futexWake wakes every process sleeping on w, a word of the shared
// segment (not FUTEX_PRIVATE: the sleepers are other processes).
func futexWake(w *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), C.FUTEX_WAKE, math.MaxInt32, 0, 0, 0)
}

// futexWait sleeps while *w is v, at most d (or until a wake).
func futexWait(w *uint32, v uint32, d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), C.FUTEX_WAIT, uintptr(v), uintptr(unsafe.Pointer(&ts)), 0, 0)
}
