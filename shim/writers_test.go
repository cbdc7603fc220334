package shim

import (
	"errors"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/augur-hpc/augur/fetchpool"
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
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			atomic.StoreUint32(writers, 0)
			token, ok := g.Begin(path)
			if !ok {
				t.Fatal("Begin refused a file nobody writes")
			}
			if c.before != nil {
				c.before()
			}
			renamed, removed := false, false
			var during uint32
			err := g.Commit(path, token, func() error {
				renamed, during = true, atomic.LoadUint32(publishing)
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
		})
	}
	// A rename that fails is the tier's error, returned as it is.
	atomic.StoreUint32(writers, 0)
	token, _ := g.Begin(path)
	full := errors.New("no space")
	if err := g.Commit(path, token, func() error { return full }, func() { t.Error("removed a copy never renamed") }); err != full {
		t.Errorf("Commit of a failed rename = %v, want %v", err, full)
	}
}
