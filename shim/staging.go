// Staging: copies of files the placement keeps in no tier, made in tier
// 0 within the staging budget for one read and dropped once read
// (onClose), or reclaimed when no read will come for them soon.

package shim

import (
	"slices"
	"time"

	"github.com/augur-hpc/augur/seed"
)

// stagedFor says which read a staged copy is for: cur's, at pos of epoch.
type stagedFor struct {
	cur        *cursor
	epoch, pos int
}

// reclaim drops the staged copies no read will come for soon: doomed
// ones, and those of a cursor idle while others read (a training set's
// next epoch waits while its validation set is read). It returns how
// many.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) reclaim() int {
	if time.Since(c.reclaimed) < reclaimEvery { // it walks every staged copy
		return 0
	}
	c.reclaimed = time.Now()
	n := 0
	for f, at := range c.staged {
		doomed, cur := c.doomed(f, at), at.cur
		if (doomed || c.idle(cur)) && c.unstage(f) {
			n++
			if !doomed && (at.epoch < cur.aEpoch || (at.epoch == cur.aEpoch && at.pos < cur.aPos)) {
				cur.aEpoch, cur.aPos = at.epoch, at.pos // staged again when it reads again
			}
		}
	}
	return n
}

// doomed says whether no read will come for f's staged copy: its cursor
// is gone, the read it was staged for came (from the original, before
// the copy was there), or the cursor has passed it (read before the
// cursor was learned). Its position alone does not tell: with many
// workers reading an epoch at once, the window is most of the epoch.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) doomed(f seed.FileID, at stagedFor) bool {
	cur := at.cur
	return !slices.Contains(c.cursors, cur) || c.seen[f] > int32(at.epoch) || at.epoch < cur.epoch-1 ||
		(at.epoch < cur.epoch && at.pos < cur.order(at.epoch).Len()-cur.window) ||
		(at.epoch == cur.epoch && at.pos < cur.pos-cur.window)
}

// idle says whether cur waits while its stream reads another dataset
// (a training set's next epoch while its validation set is read).
//
// Preconditions: c.mu is held.
func (c *clairvoyant) idle(cur *cursor) bool {
	return cur.reader != nil && cur.reader.last != cur
}

// reclaimEvery is how often a full staging budget is searched for copies
// no read will come for.
const reclaimEvery = 20 * time.Millisecond

// unstage removes staged copy f from tier 0, unless it is being copied.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) unstage(f seed.FileID) bool {
	if c.pending[f] || c.where[f] != 0 || c.l.removeCopy(c.l.tiers[0].tree, c.cat.Path(f), false) != nil {
		return false
	}
	delete(c.staged, f)
	c.setWhere(f, -1)
	c.stagedBytes -= c.sizes[f]
	c.pool.Release(0, c.sizes[f])
	return true
}

// onClose drops a staged file once read.
func (c *clairvoyant) onClose(ev Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := [2]int{ev.PID, ev.FD}
	f, ok := c.opens[key]
	if !ok {
		return
	}
	delete(c.opens, key)
	if _, staged := c.staged[f]; !staged || !c.unstage(f) {
		return
	}
	c.publishCounts()
	c.pumpAll()
}
