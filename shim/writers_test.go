package shim

import (
	"errors"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/augur-hpc/augur/fetchpool"
	"golang.org/x/sys/unix"
)

// word is a uint32 field of the segment, for the test to move as the data
// plane would.
func word(p unsafe.Pointer) *uint32 { return (*uint32)(p) }

// writeGuard.Commit renames a copy into place only while its file has no
// writer and the change generation Begin gave, takes it back when the
// generation moves during the rename, and counts itself in the file's
// publishing for exactly as long as it may rename: a change of the file
// (preload/invalidate.c's augur_invalidate_abs) waits on that count after it has
// removed the copies, so no copy of the old file is in place once it
// returns.
func TestCommitKeepsNoCopyOfAChangedFile(t *testing.T) {
	const path = "/data/cls/f.bin"
	seg := testSegment(t, "unit-commit")
	g := writeGuard{seg}
	h := seg.hold(path)
	gen, writers, publishing := word(unsafe.Pointer(&h.gen)), word(unsafe.Pointer(&h.writers)), word(unsafe.Pointer(&h.publishing))
	all := word(unsafe.Pointer(&seg.s.writes.publishing))
	ns := (*uint64)(unsafe.Pointer(&seg.s.writes.ns_gen))
	src := &unix.Stat_t{Dev: 42, Ino: 7}
	// A process writes the file by another name: its slot, counted by
	// identity, as preload/writers.c's claim makes it.
	otherWriter := func() {
		sl := &seg.s.writes.slot[5]
		sl.dev, sl.ino = 42, 7
		atomic.StoreUint32(word(unsafe.Pointer(&sl.state)), 2) // AUGUR_WRITER_USED
		atomic.AddUint32(seg.identCount(42, 7), 1)
	}
	cases := []struct {
		name     string
		before   func() // between Begin and Commit
		inRename func() // while the copy is renamed
		renamed  bool
		removed  bool
		err      error
	}{
		{name: "unchanged", renamed: true},
		{name: "changed-before", before: func() { atomic.AddUint32(gen, 1) }, err: fetchpool.ErrHeld},
		{name: "writer-came", before: func() { atomic.AddUint32(writers, 1) }, err: fetchpool.ErrHeld},
		{name: "changed-during-rename", inRename: func() { atomic.AddUint32(gen, 1) }, renamed: true, removed: true, err: fetchpool.ErrHeld},
		{name: "writer-during-rename", inRename: func() { atomic.AddUint32(writers, 1) }, renamed: true, removed: true, err: fetchpool.ErrHeld},
		{name: "stale-during-rename", inRename: func() { atomic.OrUint32(writers, 0x80000000) }, renamed: true, removed: true, err: fetchpool.ErrHeld},
		{name: "directory-renamed-before", before: func() { atomic.AddUint64(ns, 1) }, err: fetchpool.ErrHeld},
		{name: "directory-renamed-during-rename", inRename: func() { atomic.AddUint64(ns, 1) }, renamed: true, removed: true, err: fetchpool.ErrHeld},
		{name: "written-by-another-name", before: otherWriter, err: fetchpool.ErrHeld},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			atomic.StoreUint32(writers, 0)
			seg.identForget(42, 7, 0)
			clearSlots(seg)
			token, ok := g.Begin(path)
			if !ok {
				t.Fatal("Begin refused a file nobody writes")
			}
			if c.before != nil {
				c.before()
			}
			renamed, removed := false, false
			var during uint32
			err := g.Commit(path, token, src, func() error {
				renamed, during = true, atomic.LoadUint32(publishing)
				if atomic.LoadUint32(all) != 1 {
					t.Error("the publication is not counted among all files'")
				}
				if c.inRename != nil {
					c.inRename()
				}
				return nil
			}, func() {
				removed = true
				if atomic.LoadUint32(publishing) == 0 {
					t.Error("the copy was taken back after the publication stopped counting itself")
				}
			})
			if !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
				t.Errorf("Commit = %v, want %v", err, c.err)
			}
			if renamed != c.renamed || removed != c.removed {
				t.Errorf("renamed %v, removed %v; want %v, %v", renamed, removed, c.renamed, c.removed)
			}
			if renamed && during != 1 {
				t.Errorf("publishing was %d during the rename, want 1", during)
			}
			if n := atomic.LoadUint32(publishing); n != 0 {
				t.Errorf("publishing is %d after Commit, want 0", n)
			}
			if key, found := identOf(seg, 42, 7); found != (err == nil && renamed) {
				t.Errorf("identity table holds the copy: %v (key %x), want %v", found, key, err == nil)
			}
		})
	}
	// A rename that fails is the tier's error, returned as it is.
	atomic.StoreUint32(writers, 0)
	seg.identForget(42, 7, 0)
	clearSlots(seg)
	token, _ := g.Begin(path)
	full := errors.New("no space")
	if err := g.Commit(path, token, src, func() error { return full }, func() { t.Error("removed a copy never renamed") }); err != full {
		t.Errorf("Commit of a failed rename = %v, want %v", err, full)
	}
	if _, found := identOf(seg, 42, 7); found {
		t.Error("a copy never renamed stays in the identity table")
	}
}

// identOf is a key the identity table holds for (dev, ino).
func identOf(seg *Segment, dev, ino uint64) (key uint64, found bool) {
	if keys := identKeys(seg, dev, ino); len(keys) > 0 {
		return keys[0], true
	}
	return 0, false
}

// identKeys are the keys the identity table holds for (dev, ino).
func identKeys(seg *Segment, dev, ino uint64) []uint64 {
	var keys []uint64
	for level := 0; level < seg.identLevels(); level++ {
		for which := 0; which < 2; which++ {
			b := seg.identBucket(dev, ino, level, which)
			for w := range b {
				if k := atomic.LoadUint64(identKey(&b[w])); k != 0 && uint64(b[w].dev) == dev && uint64(b[w].ino) == ino {
					keys = append(keys, k)
				}
			}
		}
	}
	return keys
}

// clearSlots frees every writer slot and identity count.
func clearSlots(seg *Segment) {
	w := &seg.s.writes
	for i := range w.slot {
		atomic.StoreUint32(word(unsafe.Pointer(&w.slot[i].state)), 0)
	}
	for i := range w.ident_count {
		atomic.StoreUint32(word(unsafe.Pointer(&w.ident_count[i])), 0)
	}
}

// The identity table takes a file once under each key (a copy under each
// of its names), forgets one key's entry or every one, and, once both of
// a file's buckets are full in every level, refuses more.
func TestIdentityTable(t *testing.T) {
	seg := testSegment(t, "unit-ident")
	must(t, seg.identInsert(1, 2, 100))
	must(t, seg.identInsert(1, 2, 100))
	must(t, seg.identInsert(1, 2, 101))
	if keys := identKeys(seg, 1, 2); len(keys) != 2 {
		t.Errorf("entries %x, want one under each of two keys", keys)
	}
	seg.identForget(1, 2, 100)
	if keys := identKeys(seg, 1, 2); len(keys) != 1 || keys[0] != 101 {
		t.Errorf("entries %x after forgetting 100, want [101]", keys)
	}
	// Other files fill both buckets of (1, 2) in a level: it goes to the
	// next, and the levels in use grow; with every level full, no room.
	seg.identForget(1, 2, 0)
	fill := func(level int) {
		for which := 0; which < 2; which++ {
			b := seg.identBucket(1, 2, level, which)
			for w := range b {
				*(*uint64)(unsafe.Pointer(&b[w].dev)) = 9
				*(*uint64)(unsafe.Pointer(&b[w].ino)) = uint64(100*level + 10*which + w + 10)
				atomic.StoreUint64(identKey(&b[w]), 500)
			}
		}
	}
	fill(0)
	must(t, seg.identInsert(1, 2, 102))
	if seg.identLevels() != 2 {
		t.Errorf("levels in use %d after the first level was full, want 2", seg.identLevels())
	}
	if key, found := identOf(seg, 1, 2); !found || key != 102 {
		t.Errorf("the file in the second level: %x, %v", key, found)
	}
	seg.identForget(1, 2, 0)
	for level := 0; level < identMaxLevels; level++ {
		fill(level)
	}
	if err := seg.identInsert(1, 2, 103); err != ErrIdentFull {
		t.Errorf("every level full = %v, want ErrIdentFull", err)
	}
}
