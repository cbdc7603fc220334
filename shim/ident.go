package shim

/*
#include "../preload/segment.h"
*/
import "C"

import (
	"errors"

	"github.com/augur-hpc/augur/fetchpool"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A copy belongs to a file, not to a name. The segment's identity table
// (struct augur_ident) holds the device and inode of every copy's source,
// with the key of the path the copy is found by; the leader inserts an
// entry before it publishes a copy and for every copy it keeps at start.
// The data plane looks a file up there when a process writes it or
// removes it through another name (a hard link, a symlink, a bind
// mount), and marks the copy's hold stale (AUGUR_HOLD_STALE); the leader
// then removes the copy and clears the mark once no process writes the
// file (clearStale). See preload/segment.h and preload/writers.c.

// ErrIdentFull: the identity table has no room for this copy (both of its
// buckets full); the file is read from its source.
var ErrIdentFull = errors.New("the identity table is full; not copied")

// refused says whether res is a copy the identity table refused, and
// says why once per kind.
func (l *Leader) refused(res fetchpool.Result) bool {
	switch {
	case errors.Is(res.Err, ErrIdentFull):
		l.fullOnce.Do(func() {
			l.log.Warn().Msgf("%s: %v: some two million copies, or an unlucky spread; files beyond it are read from their source", res.Path, res.Err)
		})
	default:
		return false
	}
	return true
}

// identMu serializes the leader's inserts: only the leader process
// inserts, from the pool's workers at once. Removals (any process) are
// compare-and-swaps of the key.
var identMu sync.Mutex

// identBucket is bucket which (0, 1) of the file (dev, ino) in level.
func (s *Segment) identBucket(dev, ino uint64, level, which int) *[C.AUGUR_IDENT_WAYS]C.struct_augur_ident {
	b := C.augur_ident_bucket(C.uint64_t(dev), C.uint64_t(ino), C.int(level), C.int(which))
	return &s.s.ident[b]
}

func identKey(e *C.struct_augur_ident) *uint64 { return (*uint64)(unsafe.Pointer(&e.key)) }

// identLevels is the number of levels of the table in use.
func (s *Segment) identLevels() int {
	return int(atomic.LoadUint32((*uint32)(unsafe.Pointer(&s.s.writes.ident_levels))))
}

// identEach calls fn for each entry of the file (dev, ino)'s buckets in
// the levels in use, until it returns false.
func (s *Segment) identEach(dev, ino uint64, fn func(e *C.struct_augur_ident) bool) {
	for level := 0; level < s.identLevels(); level++ {
		for which := 0; which < 2; which++ {
			b := s.identBucket(dev, ino, level, which)
			for w := range b {
				if !fn(&b[w]) {
					return
				}
			}
		}
	}
}

// identInsert records that the copy found by key is of the file (dev,
// ino): in the first level with room in one of the file's buckets (the
// emptier), raising the levels in use when none has. A file may have
// entries under several keys (a copy under each of its names).
func (s *Segment) identInsert(dev, ino, key uint64) error {
	identMu.Lock()
	defer identMu.Unlock()
	there := false
	s.identEach(dev, ino, func(e *C.struct_augur_ident) bool {
		there = atomic.LoadUint64(identKey(e)) == key && uint64(e.dev) == dev && uint64(e.ino) == ino
		return !there
	})
	if there {
		return nil
	}
	for level := 0; level < identMaxLevels; level++ {
		if e := s.identFree(dev, ino, level); e != nil {
			e.dev, e.ino = C.uint64_t(dev), C.uint64_t(ino)
			atomic.StoreUint64(identKey(e), key)
			if level >= s.identLevels() {
				atomic.StoreUint32((*uint32)(unsafe.Pointer(&s.s.writes.ident_levels)), uint32(level+1))
			}
			return nil
		}
	}
	return ErrIdentFull
}

// identMaxLevels is how many levels the table can grow to.
const identMaxLevels = C.AUGUR_IDENT_LEVELS

// identFree is a free entry of the file (dev, ino) in level, in the
// emptier of its two buckets, or nil.
func (s *Segment) identFree(dev, ino uint64, level int) *C.struct_augur_ident {
	var best *C.struct_augur_ident
	bestFree := 0
	for which := 0; which < 2; which++ {
		b := s.identBucket(dev, ino, level, which)
		n := 0
		var first *C.struct_augur_ident
		for w := range b {
			if atomic.LoadUint64(identKey(&b[w])) == 0 {
				n++
				if first == nil {
					first = &b[w]
				}
			}
		}
		if n > bestFree {
			best, bestFree = first, n
		}
	}
	return best
}

// identForget removes the entry of (dev, ino) under key; key 0: under
// any key.
func (s *Segment) identForget(dev, ino, key uint64) {
	s.identEach(dev, ino, func(e *C.struct_augur_ident) bool {
		k := atomic.LoadUint64(identKey(e))
		if k != 0 && (key == 0 || k == key) && uint64(e.dev) == dev && uint64(e.ino) == ino {
			atomic.CompareAndSwapUint64(identKey(e), k, 0)
		}
		return true
	})
}

// identWritten says whether a process of the job has the file (dev, ino)
// open for writing or mapped to write (a slot names it): one load when no
// slot names a file of its hash, else a look at every slot.
func (s *Segment) identWritten(dev, ino uint64) bool {
	w := &s.s.writes
	if atomic.LoadUint32(s.identCount(dev, ino)) == 0 {
		return false
	}
	for i := range w.slot {
		sl := &w.slot[i]
		if atomic.LoadUint32((*uint32)(unsafe.Pointer(&sl.state))) == C.AUGUR_WRITER_USED &&
			uint64(sl.dev) == dev && uint64(sl.ino) == ino {
			return true
		}
	}
	return false
}

// identCount is the count of slots naming a file of (dev, ino)'s hash.
func (s *Segment) identCount(dev, ino uint64) *uint32 {
	c := C.augur_ident_hash(C.uint64_t(dev), C.uint64_t(ino)) & (C.AUGUR_IDENT_COUNTS - 1)
	return (*uint32)(unsafe.Pointer(&s.s.writes.ident_count[c]))
}

// staleFile is a file whose copy a process of the job changed by another
// name: its source path's key, and the file.
type staleFile struct {
	key, dev, ino uint64
}

// parseStale reads an EvStale event.
func parseStale(ev Event) (staleFile, bool) {
	d, i, ok := strings.Cut(ev.Path, ":")
	dev, err1 := strconv.ParseUint(d, 10, 64)
	ino, err2 := strconv.ParseUint(i, 10, 64)
	return staleFile{ev.Bytes, dev, ino}, ok && err1 == nil && err2 == nil
}

// findMarks adds to marks the keys marked stale in the writes table
// that it does not hold (their events were dropped by a full ring), with
// their files as the identity table has them, and returns marks.
func (s *Segment) findMarks(marks map[uint64]*staleMark) map[uint64]*staleMark {
	w := &s.s.writes
	if u64(&w.stale) == 0 {
		return marks
	}
	slots := map[uint64]bool{}
	for k := range marks {
		slots[k&(C.AUGUR_HOLD_SLOTS-1)] = true
	}
	for i := range w.hold {
		if atomic.LoadUint32((*uint32)(unsafe.Pointer(&w.hold[i].writers)))&C.AUGUR_HOLD_STALE == 0 || slots[uint64(i)] {
			continue
		}
		// Known by its slot (i is a key of it); its files, if the
		// identity table still has them, keep it until no one writes
		// them.
		m := &staleMark{files: s.identFiles(uint64(i))}
		marks[uint64(i)] = m
	}
	return marks
}

// holdMask takes a key to its hold slot.
const holdMask = C.AUGUR_HOLD_SLOTS - 1

// identFiles are the entries of the identity table whose key falls in
// hold slot slot.
func (s *Segment) identFiles(slot uint64) []staleFile {
	var out []staleFile
	end := C.AUGUR_IDENT_BUCKETS0 * (1<<s.identLevels() - 1)
	for b := 0; b < end; b++ {
		for w := range s.s.ident[b] {
			e := &s.s.ident[b][w]
			if k := atomic.LoadUint64(identKey(e)); k != 0 && k&holdMask == slot {
				out = append(out, staleFile{k, uint64(e.dev), uint64(e.ino)})
			}
		}
	}
	return out
}

// clearStale clears the stale mark of key once none of files is
// written, and reports whether it did. The caller has removed the
// copies.
func (s *Segment) clearStale(key uint64, files []staleFile) bool {
	for _, f := range files {
		if s.identWritten(f.dev, f.ino) {
			return false
		}
	}
	h := &s.s.writes.hold[key&holdMask]
	writers := (*uint32)(unsafe.Pointer(&h.writers))
	for {
		v := atomic.LoadUint32(writers)
		if v&C.AUGUR_HOLD_STALE == 0 {
			return true
		}
		if atomic.CompareAndSwapUint32(writers, v, v&^C.AUGUR_HOLD_STALE) {
			break
		}
	}
	for _, f := range files {
		s.identForget(f.dev, f.ino, f.key)
	}
	atomic.AddUint64((*uint64)(unsafe.Pointer(&s.s.writes.active)), ^uint64(0))
	atomic.AddUint64((*uint64)(unsafe.Pointer(&s.s.writes.stale)), ^uint64(0))
	return true
}
