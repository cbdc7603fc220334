package shim

/*
#include "../preload/segment.h"
*/
import "C"

import (
	"errors"
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

// ErrAlias: another name of the same file has a copy already; a file
// gets one, so that a change through any name finds it.
var ErrAlias = errors.New("another name of this file has a copy; not copied")

// ErrIdentFull: the identity table has no room for this copy (both of its
// buckets full); the file is read from its source.
var ErrIdentFull = errors.New("the identity table is full; not copied")

// identMu serializes the leader's inserts: only the leader process
// inserts, from the pool's workers at once. Removals (any process) are
// compare-and-swaps of the key.
var identMu sync.Mutex

// identEntry is entry w of bucket which of the file (dev, ino).
func (s *Segment) identBucket(dev, ino uint64, which int) *[C.AUGUR_IDENT_WAYS]C.struct_augur_ident {
	b := C.augur_ident_bucket(C.uint64_t(dev), C.uint64_t(ino), C.int(which))
	return &s.s.ident[b]
}

func identKey(e *C.struct_augur_ident) *uint64 { return (*uint64)(unsafe.Pointer(&e.key)) }

// identInsert records that the copy found by key is of the file (dev,
// ino).
func (s *Segment) identInsert(dev, ino, key uint64) error {
	identMu.Lock()
	defer identMu.Unlock()
	var free *C.struct_augur_ident
	frees := -1
	for which := 0; which < 2; which++ {
		b := s.identBucket(dev, ino, which)
		n := 0
		var first *C.struct_augur_ident
		for w := range b {
			e := &b[w]
			k := atomic.LoadUint64(identKey(e))
			switch {
			case k == 0:
				n++
				if first == nil {
					first = e
				}
			case uint64(e.dev) == dev && uint64(e.ino) == ino:
				if k == key {
					return nil
				}
				return ErrAlias
			}
		}
		if n > frees {
			free, frees = first, n
		}
	}
	if free == nil {
		return ErrIdentFull
	}
	free.dev, free.ino = C.uint64_t(dev), C.uint64_t(ino)
	atomic.StoreUint64(identKey(free), key)
	return nil
}

// identForget removes the entry of (dev, ino) under key; key 0: under
// any key.
func (s *Segment) identForget(dev, ino, key uint64) {
	for which := 0; which < 2; which++ {
		b := s.identBucket(dev, ino, which)
		for w := range b {
			e := &b[w]
			k := atomic.LoadUint64(identKey(e))
			if k != 0 && (key == 0 || k == key) && uint64(e.dev) == dev && uint64(e.ino) == ino {
				atomic.CompareAndSwapUint64(identKey(e), k, 0)
			}
		}
	}
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
	for b := range s.s.ident {
		for w := range s.s.ident[b] {
			e := &s.s.ident[b][w]
			if k := atomic.LoadUint64(identKey(e)); k != 0 && k&(C.AUGUR_HOLD_SLOTS-1) == slot {
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
