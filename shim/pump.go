// Pumping: the next files of the cursors' orders queued for copies, the
// cursor least ahead of its reads first, each within its lookahead.

package shim

// pumpAll queues the next files of every cursor, always the one of the
// cursor whose prefetch is least ahead of its reads: the ranks read in
// step, so the files needed soonest go first, and no rank is starved
// when only one copy at a time may be added.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) pumpAll() {
	if c.pool == nil || c.place == nil {
		return
	}
	c.growStage()
	blocked := make([]bool, len(c.cursors))
	for len(c.pending) < maxPending {
		best, bestLead := -1, 0
		for i, cur := range c.cursors {
			if blocked[i] {
				continue
			}
			if l := c.lead(cur); best < 0 || l < bestLead {
				best, bestLead = i, l
			}
		}
		if best < 0 {
			return
		}
		blocked[best] = !c.pumpOne(c.cursors[best])
	}
}

// lookahead is how far cur's prefetch pointer runs ahead of its reads:
// the configured lookahead, or the spread of its readers if wider. A
// DataLoader starts each epoch by asking its workers for prefetch_factor
// batches each at once; the pointer must be that far into the next epoch
// before this one ends, or the burst reads the originals.
func (c *clairvoyant) lookahead(cur *cursor) int {
	return max(c.l.cfg.Access.Lookahead, cur.window)
}

// lead is how many accesses cur's prefetch pointer is ahead of its
// reads (negative: behind). A pointer the reads overtook by more than the
// window moves up to it: within the window, workers that open batches
// out of order may not have opened a file yet, and pumpOne skips those
// they have.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) lead(cur *cursor) int {
	if from := max(cur.pos-cur.window, 0); cur.aEpoch < cur.epoch || (cur.aEpoch == cur.epoch && cur.aPos < from) {
		cur.aEpoch, cur.aPos = cur.epoch, from
	}
	lead := cur.aPos - cur.pos
	for e := cur.epoch; e < cur.aEpoch; e++ {
		lead += cur.order(e).Len()
	}
	return lead
}

// pumpOne queues the next file of cur's order that needs a copy, from
// its prefetch pointer, if the pointer is within the lookahead and (for a
// file no tier keeps) the staging budget has room. It reports whether it
// queued one.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) pumpOne(cur *cursor) bool {
	look := c.lookahead(cur)
	for {
		if c.epochs > 0 && cur.aEpoch >= c.epochs {
			return false
		}
		order := cur.order(cur.aEpoch)
		if cur.aPos >= order.Len() {
			cur.aEpoch, cur.aPos = cur.aEpoch+1, 0
			continue
		}
		if c.lead(cur) >= look {
			return false
		}
		f := cur.ds.File(order.At(cur.aPos))
		if c.seen[f] == int32(cur.aEpoch+1) { // read already
			cur.aPos++
			continue
		}
		queued, ok := c.fetch(f, stagedFor{cur, cur.aEpoch, cur.aPos})
		if !ok {
			return false // wait for a size, or for reads to free staging room
		}
		cur.aPos++
		if queued {
			return true
		}
	}
}
