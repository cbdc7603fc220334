// The clairvoyant policy's copies: a file's copy queued for the tier
// placement gives it or for staging (fetch), settled when the pool is
// done, evicted when the placement no longer keeps it there, and
// forgotten when it goes stale; where each file's copy is, and the
// counts augur stat shows.

package shim

import (
	"errors"

	"github.com/augur-hpc/augur/fetchpool"
	"github.com/augur-hpc/augur/seed"
)

// evict removes copies in tier t that the placement does not keep there
// (placed by an earlier plan, or copied before the stream that read them
// was learned) until size bytes are free, as far as there are such
// copies. It reports whether it removed any.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) evict(t int, size int64) bool {
	removed := false
	for i := 0; i < len(c.orphans) && !c.pool.Fits(t, size); {
		f := c.orphans[i]
		_, staged := c.staged[f]
		switch {
		case int(c.where[f]) != t || staged || c.pending[f] || int(c.place.Tier[f]) == t:
			i++
			continue
		case c.l.removeCopy(c.l.tiers[t].tree, c.cat.Path(f), false) == nil:
			c.setWhere(f, -1)
			c.pool.Release(t, c.sizes[f])
			removed = true
		}
		c.orphans[i] = c.orphans[len(c.orphans)-1]
		c.orphans = c.orphans[:len(c.orphans)-1]
	}
	return removed
}

// fetch queues one file for its tier, or for staging. It reports whether
// it queued a copy, and false for ok only when the file must wait: its
// place is not settled yet, its staged copy is for an earlier read, or
// the staging budget or the first tier has no room.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) fetch(f seed.FileID, at stagedFor) (queued, ok bool) {
	if !c.settled(f) {
		return false, false // wait for its size
	}
	size := c.sizes[f]
	if old, staged := c.staged[f]; staged {
		if c.doomed(f, old) { // no read will come for it: it is this one's
			c.staged[f] = at
			return false, true
		}
		return false, false // staged for an earlier read, and dropped after it: wait, then stage it again
	}
	if c.where[f] >= 0 || c.pending[f] || size < 0 || c.l.big.Load().large(size) {
		return false, true // a large file is tiered in blocks as it is read (blocks.go)
	}
	path := c.cat.Path(f)
	switch {
	case c.l.sources.undecided(path):
		return false, false // wait for its root's judgment (sources.go)
	case c.l.sources.passes(path):
		return false, true // worth no copy
	}
	if t := int(c.place.Tier[f]); t >= 0 && (c.pool.FetchTo(path, size, t) || (c.evict(t, size) && c.pool.FetchTo(path, size, t))) {
		c.queued(f, path)
		return true, true
	}
	if c.idle(at.cur) { // stage for it when it is read again, not in others' way
		return false, false
	}
	if c.stagedBytes+size > c.stage && (c.reclaim() == 0 || c.stagedBytes+size > c.stage) {
		return false, false
	}
	if c.pool.FetchTo(path, size, 0) || (c.evict(0, size) && c.pool.FetchTo(path, size, 0)) {
		c.queued(f, path)
		c.staged[f] = at
		c.stagedBytes += size
		return true, true
	}
	return false, false // no room in the tier: wait, rather than pass files by
}

// queued records that file f's copy is queued.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) queued(f seed.FileID, path string) {
	c.pending[f] = true
	c.l.seg.markCopying(path)
}

// done settles one finished copy; it runs on a pool worker. A copy the
// reactive side asked for is its own.
func (c *clairvoyant) done(res fetchpool.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.cat.Lookup(res.Path)
	if !ok || !c.pending[f] {
		c.react.done(res)
		if ok && res.Err == nil {
			c.landed(f, res.Tier)
		}
		return
	}
	delete(c.pending, f)
	defer c.l.seg.clearCopying(res.Path) // after publish_gen moves: waiters then find the copy
	defer c.react.waits.settle(res)      // another node's request for it (awaitHeld), once published
	ld := &c.l.seg.s.leader
	if res.Err != nil {
		if errors.Is(res.Err, fetchpool.ErrHeld) {
			addU64(&ld.copies_held, 1)
		}
		c.l.refused(res)
		if _, staged := c.staged[f]; staged {
			delete(c.staged, f)
			c.stagedBytes -= c.sizes[f]
		}
		c.l.log.Debug().Msgf("prefetch %s: %v", res.Path, res.Err)
		return
	}
	if _, staged := c.staged[f]; staged {
		c.stagedBytes += res.Bytes - c.sizes[f]
	}
	c.sizes[f] = res.Bytes // what the tier now holds: a file that changed since its stat is released by its copy's size
	c.l.copied(res.Path)
	if _, staged := c.staged[f]; staged && res.Tier != 0 { // moved on by a tier failure: not staged
		delete(c.staged, f)
		c.stagedBytes -= c.sizes[f]
	}
	c.landed(f, res.Tier)
	if at, staged := c.staged[f]; staged && c.doomed(f, at) { // late: its read came meanwhile
		c.unstage(f)
	}
	addU64(&ld.copies, 1)
	addU64(&ld.copy_bytes, uint64(res.Bytes))
	c.publishCounts()
	addU64(&ld.publish_gen, 1) // descriptors of the original look for it
	c.pumpAll()
}

// landed records a copy of f made in tier t. One the placement does not
// keep there (copied for a plan replaced meanwhile, moved on by a full
// tier, or copied on first read) may be evicted when room is needed.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) landed(f seed.FileID, t int) {
	c.setWhere(f, t)
	if _, staged := c.staged[f]; !staged && int(c.place.Tier[f]) != t {
		c.orphans = append(c.orphans, f)
	}
}

// forget marks the copy of a file a revalidator found stale and removed
// as gone, and gives its bytes back to its tier: the file is fetched again
// with its new content when the prefetch reaches it, or read from the
// original.
func (c *clairvoyant) forget(d dropped) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.react.known.Delete(d.path)
	f, ok := c.cat.Lookup(d.path)
	if !ok || int(c.where[f]) != d.tier {
		c.pool.Release(d.tier, d.bytes)
		return
	}
	c.setWhere(f, -1)
	if _, staged := c.staged[f]; staged {
		delete(c.staged, f)
		c.stagedBytes -= c.sizes[f]
	}
	c.pool.Release(d.tier, d.bytes)
	c.publishCounts()
}

// forgetTree forgets the copies of every file under dir: a process
// renamed or removed the directory, and its copies went to the trash,
// whose emptying gives their bytes back (Leader.release).
func (c *clairvoyant) forgetTree(dir string) {
	forgetTree(c.react, dir)
	c.mu.Lock()
	defer c.mu.Unlock()
	first, end := c.cat.Under(dir)
	for f := first; f < end; f++ {
		if c.where[f] < 0 {
			continue
		}
		c.setWhere(f, -1)
		if _, staged := c.staged[f]; staged {
			delete(c.staged, f)
			c.stagedBytes -= c.sizes[f]
		}
	}
	c.publishCounts()
}

// invalidated forgets that path was copied: a process wrote it.
func (c *clairvoyant) invalidated(path string) {
	c.react.known.Delete(path)
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.cat.Lookup(path); ok {
		c.setWhere(f, -1)
	}
}

// setWhere records that tier t (-1: none) holds file f's copy.
//
// Preconditions: c.mu is held, or c is not started.
func (c *clairvoyant) setWhere(f seed.FileID, t int) {
	if old := c.where[f]; old >= 0 {
		c.tierFiles[old]--
	}
	if t >= 0 {
		c.tierFiles[t]++
	}
	c.where[f] = int8(t)
}

// publishCounts writes tier usage and staging to the segment.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) publishCounts() {
	ld := &c.l.seg.s.leader
	for i, ts := range c.pool.Tiers() {
		setU64(&ld.tier_used[i], uint64(ts.Used))
		setU64(&ld.tier_files[i], c.tierFiles[i])
	}
	setU64(&ld.staged_files, uint64(len(c.staged)))
	setU64(&ld.staged_bytes, uint64(c.stagedBytes))
}
