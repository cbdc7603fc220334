// The clairvoyant policy's cursors: one rank's place in one dataset's
// predicted order, made from the configuration or from what a
// stream's opens were learned to be, dropped when no stream follows
// them any more.

package shim

import (
	"github.com/augur-hpc/augur/placement"
	"github.com/augur-hpc/augur/seed"
)

// cursor is one rank's position in one dataset's predicted sequence.
type cursor struct {
	ds         *seed.Dataset
	key        cursorKey
	sampler    seed.Sampler
	perms      *placement.Perms // the node's shared permutations
	epoch, pos int              // next expected access
	aEpoch     int              // prefetch pointer: next file to consider
	aPos       int
	synced     bool
	reader     *stream            // the stream that read it last
	window     int                // how far out of order its readers open; learned
	orders     map[int]seed.Order // by epoch; three kept
	learned    bool               // from the job's opens, not the configuration
	found      seed.Found         // what was learned
	// provisional: the configuration's DistributedSampler, prefetched
	// before the first open, followed by no stream until one is
	// learned to read it (the configuration's world size and ranks may
	// not be the job's: its default is one process).
	provisional bool
}

// cursorKey says which sampler and rank a cursor follows.
type cursorKey struct {
	dir      string
	shuffle  bool
	seed     int64
	replicas int
	rank     int
}

// toldCursor follows a configured sampler other than a DistributedSampler
// (random, numpy, an order file): it is taken as told.
func (c *clairvoyant) toldCursor(rank int) *cursor {
	return newCursor(c.pred.DS, cursorKey{rank: rank}, c.pred.Sampler(rank), c.pred.Perms())
}

func newCursor(ds *seed.Dataset, key cursorKey, s seed.Sampler, ps *placement.Perms) *cursor {
	return &cursor{ds: ds, key: key, sampler: s, perms: ps, window: minWindow, orders: map[int]seed.Order{}}
}

// addCursor makes (or finds) the cursor of a DistributedSampler found in
// dataset ds, placed after the indices it explained when learned, and
// replans.
//
// Preconditions: c.mu is held, or c is not started.
func (c *clairvoyant) addCursor(ds *seed.Dataset, f seed.Found, learned bool) *cursor {
	key := cursorKey{ds.Dir, f.Shuffle, f.Seed, f.Replicas, f.Rank}
	if !f.Shuffle {
		key.seed = 0
	}
	for _, cur := range c.cursors {
		if cur.key == key {
			ahead := f.Epoch > cur.epoch || (f.Epoch == cur.epoch && f.Last+1 > cur.pos+cur.window)
			behind := f.Epoch < cur.epoch || (f.Epoch == cur.epoch && f.Last+1 < cur.pos-cur.window)
			// A jump, or a restart; but not back while other streams read
			// it (a worker's opens seen a while ago, of the same rank).
			if learned && (ahead || (behind && !c.followed(cur))) {
				cur.epoch, cur.pos = f.Epoch, f.Last+1
			}
			if learned {
				cur.learned, cur.found, cur.provisional = true, f, false
			}
			return cur
		}
	}
	s, err := c.distributed(ds, f)
	if err != nil {
		return nil
	}
	cur := newCursor(ds, key, s, c.pred.Perms())
	cur.learned, cur.found = learned, f
	if learned {
		cur.epoch, cur.pos, cur.synced = f.Epoch, f.Last+1, true
		cur.aEpoch, cur.aPos = cur.epoch, cur.pos
		cur.window = max(minWindow, 2*(f.Last-f.First+1))
	}
	c.cursors = append(c.cursors, cur)
	if c.l.peers != nil {
		c.holdFor(cur)
	}
	c.replan()
	return cur
}

// distributed is the DistributedSampler f found in dataset ds.
func (c *clairvoyant) distributed(ds *seed.Dataset, f seed.Found) (seed.Sampler, error) {
	return seed.New(seed.Spec{Sampler: seed.KindDistributed, Len: ds.Len(), Seed: f.Seed,
		Replicas: f.Replicas, Rank: f.Rank, NoShuffle: !f.Shuffle, DropLast: c.l.cfg.Access.DropLast,
		Torch: c.l.cfg.Access.Torch})
}

// followed says whether a stream follows cur.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) followed(cur *cursor) bool {
	for _, st := range c.streams {
		for _, tr := range st.by {
			if tr.cur == cur {
				return true
			}
		}
	}
	return false
}

// order is what cur's rank reads in epoch. The orders of the epochs
// next to the last one asked for are kept (a cursor reads one epoch,
// looks into the next, and may be asked about the last).
func (cur *cursor) order(epoch int) seed.Order {
	if o, ok := cur.orders[epoch]; ok {
		return o
	}
	for e := range cur.orders {
		if e < epoch-1 || e > epoch+1 {
			delete(cur.orders, e)
		}
	}
	o := cur.perms.OrderOf(cur.sampler, epoch, cur.ds.Len())
	cur.orders[epoch] = o
	return o
}

// dropUnfollowed removes the learned cursors no stream follows any more,
// and the provisional ones once every stream follows one of its own or
// the configured seed explained none: and replans without them.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) dropUnfollowed() {
	followed := map[*cursor]bool{}
	all := true
	for _, st := range c.streams {
		all = all && st.following()
		for _, tr := range st.by {
			followed[tr.cur] = true
		}
	}
	kept := c.cursors[:0]
	for _, cur := range c.cursors {
		told := !cur.learned && !cur.provisional
		if told || followed[cur] || (cur.provisional && !all && !c.unexplained) {
			kept = append(kept, cur)
		}
	}
	if len(kept) != len(c.cursors) {
		clear(c.cursors[len(kept):])
		c.cursors = kept
		c.replan()
	}
}
