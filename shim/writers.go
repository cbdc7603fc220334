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
// regular file, counts them by file (device and inode), and, for a
// dataset path, by path too (preload/writers.c, struct augur_writes).
// The leader never copies a file so held, and discards a copy whose file
// changed while it was made: writeGuard is the fetch pool's
// fetchpool.Guard. Registrations of processes that died without closing
// are released by releaseDead.

// hold is the writes table's entry of path.
func (s *Segment) hold(path string) *C.struct_augur_hold {
	return &s.s.writes.hold[pathKey(path)&(C.AUGUR_HOLD_SLOTS-1)]
}

// writeGuard is a fetchpool.Guard over the job's writes table.
type writeGuard struct{ seg *Segment }

// token is what Begin hands Commit: the file's change generation and the
// namespace's (a directory renamed or removed).
func token(h *C.struct_augur_hold, w *C.struct_augur_writes) uint64 {
	gen := atomic.LoadUint32((*uint32)(unsafe.Pointer(&h.gen)))
	ns := uint32(atomic.LoadUint64((*uint64)(unsafe.Pointer(&w.ns_gen))))
	return uint64(gen) | uint64(ns)<<32
}

// Begin refuses a file that a process of the job may be writing (or
// changed by another name: a stale mark), and otherwise returns its
// token.
func (g writeGuard) Begin(path string) (uint64, bool) {
	h := g.seg.hold(path)
	return token(h, &g.seg.s.writes), atomic.LoadUint32((*uint32)(unsafe.Pointer(&h.writers))) == 0
}

// Commit puts a copy of path made since Begin returned tok in place if
// no process writes the file and it did not change meanwhile, and takes
// it back if that is no longer so once it is renamed. It counts itself in
// the file's publishing, and in all files', while it does; a change of the
// file, or of a directory, waits after it has removed the copies until
// that count is 0 (preload/waits.c, augur_await_publishers). All these
// loads and stores are sequentially consistent (Go's atomics, the data
// plane's __ATOMIC_SEQ_CST), so a change either moves the token before
// the check that follows the rename (and this removes the copy before the
// change returns) or after it: then the rename came before the change's
// removal of the copies, which removes it.
//
// Before the rename it records the copy's source, src, in the identity
// table and then asks whether any process of the job writes that file
// under any name; a writer counts itself before it looks in the table,
// so one of the two sees the other (ident.go).
func (g writeGuard) Commit(path string, tok uint64, src *unix.Stat_t, rename func() error, remove func()) error {
	w := &g.seg.s.writes
	h := g.seg.hold(path)
	defer publishing(&h.publishing, &h.waiting)()
	defer publishing(&w.publishing, &w.waiting)()
	if !unchanged(h, w, tok) {
		return fetchpool.ErrHeld
	}
	key := pathKey(path)
	if err := g.seg.identInsert(src.Dev, src.Ino, key); err != nil {
		return err
	}
	if g.seg.identWritten(src.Dev, src.Ino) {
		g.seg.identForget(src.Dev, src.Ino, key)
		return fetchpool.ErrHeld
	}
	if err := rename(); err != nil {
		g.seg.identForget(src.Dev, src.Ino, key)
		return err
	}
	if !unchanged(h, w, tok) {
		remove()
		g.seg.identForget(src.Dev, src.Ino, key)
		return fetchpool.ErrHeld
	}
	return nil
}

// publishing counts a publication under way in *count until the function
// it returns is called, which wakes the changes waiting for it.
func publishing(count, waiting *C.uint32_t) func() {
	c := (*uint32)(unsafe.Pointer(count))
	atomic.AddUint32(c, 1)
	return func() {
		atomic.AddUint32(c, ^uint32(0))
		// A change counts itself waiting before it loads the count
		// again, so one this load misses sees the count just dropped.
		if atomic.LoadUint32((*uint32)(unsafe.Pointer(waiting))) != 0 {
			futexWake(c)
		}
	}
}

// unchanged says whether h's file has no writer and no stale mark, and
// neither it nor the namespace changed since tok.
func unchanged(h *C.struct_augur_hold, w *C.struct_augur_writes, tok uint64) bool {
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&h.writers))) == 0 && token(h, w) == tok
}

// releaseDead releases the registrations of writers whose process has
// died (killed, or exited without closing), so that their files may be
// copied again, and returns how many it released.
func (s *Segment) releaseDead() int {
	w := &s.s.writes
	n := 0
	for i := range w.slot {
		sl := &w.slot[i]
		state := (*uint32)(unsafe.Pointer(&sl.state))
		if atomic.LoadUint32(state) != C.AUGUR_WRITER_USED ||
			!errors.Is(unix.Kill(int(sl.pid), 0), unix.ESRCH) ||
			!atomic.CompareAndSwapUint32(state, C.AUGUR_WRITER_USED, C.AUGUR_WRITER_FILLING) {
			continue
		}
		if sl.dev != 0 || sl.ino != 0 { // counted by identity (preload/writers.c, ident_counted)
			atomic.AddUint32(s.identCount(uint64(sl.dev), uint64(sl.ino)), ^uint32(0))
		}
		if sl.key != 0 { // a dataset path's writer: counted in its hold too
			h := &w.hold[uint64(sl.key)&(C.AUGUR_HOLD_SLOTS-1)]
			atomic.AddUint32((*uint32)(unsafe.Pointer(&h.gen)), 1)
			atomic.AddUint64((*uint64)(unsafe.Pointer(&w.active)), ^uint64(0))
			atomic.AddUint32((*uint32)(unsafe.Pointer(&h.writers)), ^uint32(0))
		}
		atomic.StoreUint32(state, C.AUGUR_WRITER_FREE)
		n++
	}
	return n
}
