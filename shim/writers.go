package shim

/*
#include "../intercept.h"
*/
import "C"

import (
	"errors"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Writers inside the job. The data plane registers every descriptor and
// shared writable mapping through which a process of the job may write a
// dataset file, and counts them per file (intercept_write.c, struct
// augur_writes). The leader never copies a file so held, and discards a
// copy whose file changed while it was made: writeGuard is the fetch
// pool's fetchpool.Guard. Registrations of processes that died without
// closing are released by releaseDead.

// hold is the writes table's entry of path.
func (s *Segment) hold(path string) *C.struct_augur_hold {
	return &s.s.writes.hold[pathKey(path)&(C.AUGUR_HOLD_SLOTS-1)]
}

// writeGuard is a fetchpool.Guard over the job's writes table.
type writeGuard struct{ seg *Segment }

// Begin refuses a file that a process of the job may be writing, and
// otherwise returns its change generation.
func (g writeGuard) Begin(path string) (uint64, bool) {
	h := g.seg.hold(path)
	gen := atomic.LoadUint32((*uint32)(unsafe.Pointer(&h.gen)))
	return uint64(gen), atomic.LoadUint32((*uint32)(unsafe.Pointer(&h.writers))) == 0
}

// Keep says whether a copy of path made since Begin returned gen may
// stay: no writer now, and no change meanwhile. A writer that came after
// this check drops the copy itself (it registers before it removes the
// copies), so no copy outlives a change.
func (g writeGuard) Keep(path string, gen uint64) bool {
	h := g.seg.hold(path)
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&h.writers))) == 0 &&
		uint64(atomic.LoadUint32((*uint32)(unsafe.Pointer(&h.gen)))) == gen
}

// releaseDead releases the registrations of writers whose process has
// died (killed, or exited without closing), so that their files may be
// copied again, and returns how many it released.
func (s *Segment) releaseDead() int {
	w := &s.s.writes
	if u64(&w.active) == 0 {
		return 0
	}
	n := 0
	for i := range w.slot {
		sl := &w.slot[i]
		state := (*uint32)(unsafe.Pointer(&sl.state))
		if atomic.LoadUint32(state) != C.AUGUR_WRITER_USED ||
			!errors.Is(unix.Kill(int(sl.pid), 0), unix.ESRCH) ||
			!atomic.CompareAndSwapUint32(state, C.AUGUR_WRITER_USED, C.AUGUR_WRITER_FILLING) {
			continue
		}
		h := &w.hold[uint64(sl.key)&(C.AUGUR_HOLD_SLOTS-1)]
		atomic.AddUint32((*uint32)(unsafe.Pointer(&h.gen)), 1)
		atomic.AddUint64((*uint64)(unsafe.Pointer(&w.active)), ^uint64(0))
		atomic.AddUint32((*uint32)(unsafe.Pointer(&h.writers)), ^uint32(0))
		atomic.StoreUint32(state, C.AUGUR_WRITER_FREE)
		n++
	}
	return n
}
