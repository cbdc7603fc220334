// Following: each open of a dataset file matched with the cursor whose
// order expects it there (onOpen, follow, locate), and that cursor
// moved past it (advance).

package shim

import (
	"fmt"

	"github.com/augur-hpc/augur/placement"
	"github.com/augur-hpc/augur/seed"
)

// onOpen matches an open with the cursors, counts it, learns from it, and
// prefetches further.
func (c *clairvoyant) onOpen(ev Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, known := c.cat.Lookup(ev.Path)
	ld := &c.l.seg.s.leader
	if !known {
		addU64(&ld.unpredicted, 1)
		c.react.onOpen(ev)
		return
	}
	if m := c.l.big.Load(); m != nil && ev.Tier < 0 && !ev.Truncated {
		switch {
		case m.large(c.sizes[f]):
			m.opened(ev.Path) // tiered in blocks as it is read (blocks.go)
		case c.sizes[f] == placement.UnknownSize:
			c.unsized[f] = true // measured looks at it
		}
	}
	st := c.stream(ev)
	cur, locked := c.follow(st, f)
	hopeless := false
	if !locked {
		hopeless = c.learnFrom(st, f)
	}
	switch {
	case cur == nil:
		addU64(&ld.unpredicted, 1)
		if hopeless { // else it is predicted soon: a copy now would take a placed file's room
			c.react.onOpen(ev)
		}
	case ev.Tier >= 0:
		addU64(&ld.pred_hits, 1)
	case c.pending[f]:
		addU64(&ld.pred_late, 1)
	default:
		addU64(&ld.pred_misses, 1)
	}
	if cur != nil {
		c.seen[f] = int32(cur.epoch + 1)
	}
	if locked {
		st.last, cur.reader = cur, st
	}
	c.opens[[2]int{ev.PID, ev.FD}] = f
	c.acc.add(cur != nil)
	setU64(&ld.accuracy_ppm, uint64(1e6*c.acc.rate()))
	c.streamsChanged = true
	c.pumpAll()
}

// follow moves the cursor stream st follows in f's dataset past f, if f
// is where its order expects it; else it tries the other cursors of that
// dataset (a stream's first opens, or a worker of its own stream) and
// follows the one that expects f. It returns the cursor that expected f,
// or nil, and whether st follows it (a provisional cursor is moved on,
// but the stream's own sampler is still learned).
//
// Preconditions: c.mu is held.
func (c *clairvoyant) follow(st *stream, f seed.FileID) (*cursor, bool) {
	for _, tr := range st.by {
		cur := tr.cur
		if cur == nil {
			continue
		}
		idx, in := cur.ds.Index(f)
		if !in {
			continue
		}
		if c.advance(cur, idx, tr.trusted(), false) {
			tr.hit()
			tr.window = max(tr.window, cur.window)
			return cur, true
		}
		if tr.miss() { // lost it: learn again
			tr.cur = nil
			tr.why = fmt.Sprintf("its opens left the order it followed (%s); learning again", cur.describe())
			c.l.log.Info().Msgf("%s: %s", st.id, tr.why)
			c.streamsChanged = true
			c.dropUnfollowed()
		}
		return nil, false
	}
	for _, cur := range c.cursors {
		if tr := st.by[cur.ds.Dir]; tr != nil && (tr.cur != nil || tr.distrusted()) {
			continue
		}
		idx, in := cur.ds.Index(f)
		if !in || !c.advance(cur, idx, false, true) {
			continue
		}
		if cur.provisional {
			return cur, false
		}
		tr := st.track(cur.ds.Dir)
		tr.lock(cur)
		tr.hit()
		c.streamsChanged = true
		return cur, true
	}
	return nil, false
}

// locate says where cur's order expects idx: in this epoch near its
// position, if not read in it yet; else at the start of the next, if
// this one nears its end (or was read already: a loader of many workers
// with large batches reads all over an epoch at once, and only what was
// read tells its epochs apart); else, a file read again, in this epoch
// without moving. Before the first match (the job may have started
// before the prediction was ready) any position counts, and so does any
// this epoch has not read when far says the stream follows the cursor
// closely (its readers are further apart than the window said: many
// workers with large batches). ok is false when the order does not
// expect idx. A stream adopting another cursor (adopt) must meet it in
// this epoch.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) locate(cur *cursor, idx int, adopt, far bool) (epoch, p int, ok bool) {
	this := cur.order(cur.epoch)
	p = this.Pos(idx)
	near := p >= 0 && (!cur.synced || far || (p >= cur.pos-cur.window && p <= cur.pos+cur.window))
	again := c.seen[cur.ds.File(idx)] == int32(cur.epoch+1)
	if near && !again {
		return cur.epoch, p, true
	}
	if adopt && cur.synced {
		return 0, 0, false
	}
	if !cur.synced || cur.pos >= this.Len()-cur.window || again {
		if q := cur.order(cur.epoch + 1).Pos(idx); q >= 0 && (!cur.synced || q <= cur.window || (again && far)) {
			return cur.epoch + 1, q, true
		}
	}
	return cur.epoch, p, near
}

// advance moves cur past idx if idx is where the prediction expects it
// (locate). Workers open a few batches out of order, hence the window,
// which grows to what the readers are seen to do when grow says the
// stream has followed the cursor well (else a wrong order's chance
// matches would widen it until anything matched).
//
// Preconditions: c.mu is held.
func (c *clairvoyant) advance(cur *cursor, idx int, grow, adopt bool) bool {
	e, p, ok := c.locate(cur, idx, adopt, grow)
	switch {
	case !ok:
		return false
	case e > cur.epoch:
		cur.epoch, cur.pos = e, p+1
	default:
		if cur.synced && grow {
			cur.window = max(cur.window, 2*abs(cur.pos-p))
		}
		cur.pos = max(cur.pos, p+1)
	}
	cur.synced = true
	return true
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
