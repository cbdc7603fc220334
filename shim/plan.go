// Planning: the files stat'ed, ranked by how often the cursors will read
// them and placed in the tiers as their sizes arrive (package
// placement's placer), placed again when the cursors or the tiers'
// room change; and the staging budget grown to what the loaders hold
// in flight.

package shim

import (
	"slices"

	"github.com/augur-hpc/augur/placement"
	"github.com/augur-hpc/augur/seed"
	"github.com/augur-hpc/augur/tiering"
)

// startMeasuring stats every file of the catalog, those placement ranks
// first (for a dataset read once per epoch, in order of first access), so
// that prefetching starts after the first stats, not after a million. It
// starts once there is a placement.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) startMeasuring() {
	if c.measuring || c.place == nil || c.pool == nil {
		return
	}
	c.measuring = true
	order := slices.Clone(c.place.Ranking())
	for i := range c.place.Tier {
		if c.place.Rank(i) < 0 {
			order = append(order, int32(i))
		}
	}
	go placement.Measure(func(i int) string { return c.cat.Path(seed.FileID(i)) }, order, c.quit, c.measured)
}

// measured records the size of file i and whether a tier already holds
// it, and prefetches what that settles. It runs on a stat worker.
func (c *clairvoyant) measured(i int, size int64) {
	t := -1
	if size >= 0 {
		t = tiering.LookupPath(c.l.open, c.cat.Path(seed.FileID(i)))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sizes[i] = size
	if c.unsized[seed.FileID(i)] {
		delete(c.unsized, seed.FileID(i))
		if m := c.l.big.Load(); m.large(size) {
			m.opened(c.cat.Path(seed.FileID(i))) // read since before its size was known
		}
	}
	c.setWhere(seed.FileID(i), t)
	c.sized++
	c.sizedBytes += max(size, 0)
	setU64(&c.l.seg.s.leader.sized, c.sized)
	if c.place != nil && (c.place.Advance(c.sizes) > 0 || c.place.Rank(i) < 0) {
		c.pumpAll()
	}
}

// replan ranks the files by how often the cursors' ranks read them over
// the horizon and places them (as far as their sizes are known).
//
// Preconditions: c.mu is held, or c is not started.
func (c *clairvoyant) replan() { c.plan(false) }

// resize places the files again in tiers whose room changed (a grown
// staging budget), keeping, among files read equally often, the copies
// the tiers hold (Placer.Keep). What is known of the reads did not
// change, so neither should the choice among equals; made afresh, the
// ties go by first access from the moment of the plan, and a node that
// reads every file once an epoch chose other files than the plan before
// (make bench S3 dropped and read again hundreds of copies: its epochs
// 2-3 read 92 and 64 MB of the PFS where 55 MB are staged). A replan for
// a stream learned does not keep them: those copies were chosen knowing
// fewer of the ranks, and keeping them pushed the files the others read
// first out of the tier (TestClairvoyantLearnsTheJob/spawn-ranks-in-code:
// 84-96% of opens from the tier where 96-98% without).
//
// Preconditions: c.mu is held.
func (c *clairvoyant) resize() { c.plan(true) }

// plan is replan, keeping the tiers' copies among equals if keep.
func (c *clairvoyant) plan(keep bool) {
	caps := slices.Clone(c.caps)
	c.place = nil // collectable while its successor is built
	c.place = placement.NewPlacer(c.cat.NumFiles(), caps, c.horizon, func(e int) []placement.ReadSeq {
		var seqs []placement.ReadSeq
		for _, cur := range c.cursors {
			if c.epochs > 0 && cur.epoch+e >= c.epochs {
				continue
			}
			// Not cur.order: the horizon's epochs pass through once.
			seqs = append(seqs, placement.ReadSeq{Order: cur.perms.OrderOf(cur.sampler, cur.epoch+e, cur.ds.Len()),
				File: func(idx int) int { return int(cur.ds.File(idx)) }})
		}
		return seqs
	})
	if keep {
		c.place.Keep(func(f int32) int {
			if _, staged := c.staged[seed.FileID(f)]; staged {
				return -1 // staged copies are dropped once read
			}
			return int(c.where[f])
		}, len(caps))
	}
	if c.hold != nil {
		c.place.Prefer(c.mine)
	}
	c.place.Advance(c.sizes)
	c.orphans = c.orphans[:0]
	for f, t := range c.where {
		if _, staged := c.staged[seed.FileID(f)]; t >= 0 && !staged && c.place.Tier[f] != t {
			c.orphans = append(c.orphans, seed.FileID(f))
		}
	}
	c.startMeasuring()
}

// settled reports whether file f's size and place are known.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) settled(f seed.FileID) bool {
	if k := c.place.Rank(int(f)); k >= 0 {
		return k < c.place.Placed()
	}
	return c.sizes[f] != placement.UnknownSize
}

// growStage widens the staging budget, when the configuration does not
// fix it, to what the cursors' readers hold in flight. A DataLoader of W
// workers reads W batches at once and starts each epoch by asking for
// prefetch_factor x W of them; a cursor's window (twice the furthest its
// readers were seen apart) is that many files, and the prefetch pointer
// must stage that far ahead of the earliest one not read. Only the files
// the placement keeps in no tier are staged: the window's share of them
// (Placer.Staged) is what the budget must hold. (Counting the whole
// window put half of S3's RAM tier into staging, and the placement lost
// the rest: each later epoch read it from the shared filesystem again.)
// An eighth of the first tier holds that for ordinary loaders on
// ordinary tiers; 8 workers with batches of 256 on a small tier need
// more, or every epoch's first batches read the originals. Readers never seen apart
// (the window as it started) need nothing more. The budget at least
// doubles each time, up to half the first tier, so the placement (which
// the tier's rest holds) is made again only a few times.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) growStage() {
	if c.l.cfg.Access.Stage > 0 || c.sized == 0 || len(c.caps) == 0 {
		return
	}
	first := c.caps[0] + c.stage
	if c.stage >= first/2 {
		return
	}
	files := 0
	for _, cur := range c.cursors {
		if cur.window > minWindow {
			files += cur.window
		}
	}
	need := int64(float64(files) * c.place.Staged() * float64(c.sizedBytes/int64(c.sized)))
	if need <= c.stage {
		return
	}
	stage := min(max(need, 2*c.stage), first/2)
	c.l.log.Info().Msgf("staging budget %s -> %s: the loaders hold up to %d files in flight, %.0f%% of them staged",
		FormatSize(c.stage), FormatSize(stage), files, 100*c.place.Staged())
	c.caps[0] -= stage - c.stage
	c.stage = stage
	setU64(&c.l.seg.s.leader.stage_budget, uint64(stage))
	c.resize()
}
