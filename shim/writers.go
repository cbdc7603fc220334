package shim

/*
#include "../preload/segment.h"
*/
import "C"

import (
	"errors"
	"sync/atomic"
	"unsafe"

	"github.com/augur-hpc/augur/fetchpool"
	"golang.org/x/sys/unix"
)

// Writers inside the job. The data plane registers every descriptor and
// shared writable mapping through which a process of the job may write a
// dataset file, and counts them per file (preload/writers.c, struct
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

// Commit puts a copy of path made since Begin returned gen in place if
// no process writes the file and it did not change meanwhile, and takes
// it back if that is no longer so once it is renamed. It counts itself in
// the file's publishing while it does, and a change of the file waits,
// after it has removed the copies, until that count is 0
// (preload/waits.c, augur_await_publishers). All these loads and stores are sequentially
// consistent (Go's atomics, the data plane's __ATOMIC_SEQ_CST), so a
// change either moves gen before the check that follows the rename (and
// this removes the copy before the change returns) or after it: then the
// rename came before the change's removal of the copies, which removes it.
func (g writeGuard) Commit(path string, gen uint64, rename func() error, remove func()) error {
	h := g.seg.hold(path)
	publishing := (*uint32)(unsafe.Pointer(&h.publishing))
	atomic.AddUint32(publishing, 1)
	defer func() {
		atomic.AddUint32(publishing, ^uint32(0))
		// A change counts itself waiting before it loads publishing
		// again, so one this load misses sees the count just dropped.
		if atomic.LoadUint32((*uint32)(unsafe.Pointer(&h.waiting))) != 0 {
			futexWake(publishing)
		}
	}()
	if !unchanged(h, gen) {
		return fetchpool.ErrHeld
	}
	if err := rename(); err != nil {
		return err
	}
	if !unchanged(h, gen) {
		remove()
		return fetchpool.ErrHeld
	}
	return nil
}

// unchanged says whether h's file has no writer and gen as its change
// generation.
func unchanged(h *C.struct_augur_hold, gen uint64) bool {
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
