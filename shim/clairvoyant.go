package shim

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/augur-hpc/augur/fetchpool"
	"github.com/augur-hpc/augur/tiering"
)

// clairvoyant is NoPFS's policy. The seed fixes every rank's access
// order, so the leader places the files this node reads most often in its
// fastest tiers, then prefetches in exactly the order of access, ahead of
// each rank's cursor (learned from the event ring): files assigned to a
// tier stay; others are staged in tier 0 within a byte budget and dropped
// once read. When the accesses stop matching the prediction it says so
// once and falls back to the reactive policy.
type clairvoyant struct {
	l      *Leader
	pred   *Prediction
	pool   *fetchpool.Pool
	stage  int64         // staging budget in tier 0
	window int           // how far from the cursor an access still counts as predicted
	epochs int           // 0: unbounded
	quit   chan struct{} // closed by close: stops the stat workers

	mu          sync.Mutex // guards everything below
	sizes       []int64    // per file; unknownSize until stat'ed
	place       *placer    // settles as the sizes arrive
	cursors     map[int]*cursor
	where       []int8         // per file: tier holding a copy, -1 none
	seen        []int32        // per file: 1 + the last epoch a rank opened it in, 0 never
	pending     map[int]bool   // files being fetched
	staged      map[int]bool   // staged copies (read once, then dropped)
	stagedBytes int64          // staged and being staged
	opens       map[[2]int]int // (pid, fd) → file index, until close
	recent      [256]bool      // recent accesses: matched the prediction?
	nRecent     int
	fellBack    bool
}

// cursor is one rank's position in its predicted sequence.
type cursor struct {
	rank       int
	epoch, pos int // next expected access
	aEpoch     int // prefetch pointer: next file to consider
	aPos       int
	synced     bool
	posOf      map[int][]int32 // epoch → position of each file (-1: not read)
}

const (
	maxPending  = 256 // copies queued at once
	fallbackAt  = 128 // accesses observed before judging the prediction
	minAccuracy = 0.5
)

// planClairvoyant predicts the accesses; start then stats the files,
// places them in tiers of capacities caps as their sizes arrive, and
// prefetches what is placed. It touches nothing of l but its
// configuration and segment, so it may run beside l's run goroutine.
func planClairvoyant(l *Leader, caps []int64) (*clairvoyant, error) {
	pred, err := Predict(l.cfg, nil)
	if err != nil {
		return nil, err
	}
	a := l.cfg.Access
	stage, horizon := placeParams(a, caps)
	c := &clairvoyant{l: l, pred: pred, stage: stage, epochs: a.Epochs, quit: make(chan struct{}),
		sizes: make([]int64, len(pred.Files)), place: pred.placer(horizon, caps),
		where: make([]int8, len(pred.Files)), seen: make([]int32, len(pred.Files)), cursors: map[int]*cursor{},
		pending: map[int]bool{}, staged: map[int]bool{}, opens: map[[2]int]int{}}
	c.window = 64 + 4*max(a.BatchSize, 1)
	for i := range c.sizes {
		c.sizes[i], c.where[i] = unknownSize, -1
	}
	for _, r := range pred.Ranks {
		c.cursors[r] = &cursor{rank: r, posOf: map[int][]int32{}}
	}
	setU64(&l.seg.s.leader.predicted, uint64(len(pred.Files)))
	return c, nil
}

// start prefetches through pool, whose copies must end in c.done, as the
// files' sizes arrive. Files are stat'ed in placement order (for a
// dataset read once per epoch, the order of first access), so
// prefetching starts after the first few stats, not after a million.
func (c *clairvoyant) start(pool *fetchpool.Pool) {
	c.mu.Lock()
	c.pool = pool
	c.mu.Unlock()
	order := slices.Clone(c.place.ranking) // then the files read only after the horizon
	for i, k := range c.place.pos {
		if k < 0 {
			order = append(order, i)
		}
	}
	go c.pred.measure(order, c.quit, c.measured)
}

// measured records the size of file i and whether a tier already holds
// it, and prefetches what that settles. It runs on a stat worker.
func (c *clairvoyant) measured(i int, size int64) {
	t := -1
	if size >= 0 {
		t = tiering.LookupPath(c.l.open, c.pred.Files[i])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sizes[i], c.where[i] = size, int8(t)
	if (c.place.advance(c.sizes) > 0 || c.place.pos[i] < 0) && !c.fellBack {
		c.pumpAll()
	}
}

// settled reports whether file i's size and place are known.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) settled(i int) bool {
	if k := c.place.pos[i]; k >= 0 {
		return k < c.place.next
	}
	return c.sizes[i] != unknownSize
}

// positions returns where each file sits in rank's order of epoch.
func (c *clairvoyant) positions(cur *cursor, epoch int) []int32 {
	if p, ok := cur.posOf[epoch]; ok {
		return p
	}
	for e := range cur.posOf {
		if e < epoch-1 {
			delete(cur.posOf, e)
		}
	}
	p := make([]int32, len(c.pred.Files))
	for i := range p {
		p[i] = -1
	}
	for pos, idx := range c.pred.Order(cur.rank, epoch) {
		p[idx] = int32(pos)
	}
	cur.posOf[epoch] = p
	return p
}

// onOpen matches an open with the prediction, counts it, and prefetches
// further.
func (c *clairvoyant) onOpen(ev Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fellBack {
		return
	}
	idx, known := c.pred.Index(ev.Path)
	cur := c.cursorOf(ev)
	matched := known && cur != nil && c.advance(cur, idx)
	if matched {
		c.seen[idx] = int32(cur.epoch + 1)
	}
	ld := &c.l.seg.s.leader
	switch {
	case !matched:
		addU64(&ld.unpredicted, 1)
	case ev.Tier >= 0:
		addU64(&ld.pred_hits, 1)
	case c.pending[idx]:
		addU64(&ld.pred_late, 1)
	default:
		addU64(&ld.pred_misses, 1)
	}
	if known {
		c.opens[[2]int{ev.PID, ev.FD}] = idx
	}
	c.judge(matched)
	if !c.fellBack {
		c.pumpAll()
	}
}

// cursorOf is the cursor of the rank an event's process reads as: the
// global rank its environment names (a cursor made on first sight), else
// its node-local rank placed on this node by the configuration, else the
// node's first rank.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) cursorOf(ev Event) *cursor {
	a := c.l.cfg.Access
	g := ev.Rank
	switch {
	case g >= 0:
	case ev.Local >= 0:
		g = a.NodeRank*a.RanksPerNode + ev.Local
	case len(c.pred.Ranks) > 0:
		g = c.pred.Ranks[0]
	}
	if g < 0 || g >= a.WorldSize {
		return nil
	}
	if cur, ok := c.cursors[g]; ok {
		return cur
	}
	if c.pred.AddRank(g) != nil {
		return nil
	}
	cur := &cursor{rank: g, posOf: map[int][]int32{}}
	c.cursors[g] = cur
	return cur
}

// advance moves cur past idx if idx is where the prediction expects it:
// near the cursor in this epoch or at the start of the next. Workers
// open a few batches out of order, hence the window. Before the first
// match (the job may have started before the prediction was ready) any
// position counts.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) advance(cur *cursor, idx int) bool {
	n := len(c.pred.Order(cur.rank, cur.epoch))
	if p := int(c.positions(cur, cur.epoch)[idx]); p >= 0 &&
		(!cur.synced || (p >= cur.pos-c.window && p <= cur.pos+c.window)) {
		cur.pos = max(cur.pos, p+1)
		cur.synced = true
		return true
	}
	if cur.pos >= n-c.window || !cur.synced {
		if p := int(c.positions(cur, cur.epoch+1)[idx]); p >= 0 && (!cur.synced || p <= c.window) {
			cur.epoch, cur.pos, cur.synced = cur.epoch+1, p+1, true
			return true
		}
	}
	return false
}

// judge keeps the recent accuracy and falls back to the reactive policy
// when the prediction is mostly wrong.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) judge(matched bool) {
	c.recent[c.nRecent%len(c.recent)] = matched
	c.nRecent++
	n := min(c.nRecent, len(c.recent))
	good := 0
	for _, m := range c.recent[:n] {
		if m {
			good++
		}
	}
	acc := float64(good) / float64(n)
	setU64(&c.l.seg.s.leader.accuracy_ppm, uint64(acc*1e6))
	if c.nRecent >= fallbackAt && acc < minAccuracy {
		c.fellBack = true
		setU64(&c.l.seg.s.leader.fell_back, 1)
		fmt.Fprintf(os.Stderr, "augur: the accesses do not match the predicted order "+
			"(%.0f%% of the last %d opens expected): another seed or sampler? "+
			"falling back to the reactive policy\n", 100*acc, n)
		c.l.fallBack(c.pool)
	}
}

// pumpAll queues the next files of every rank, always the one of the
// rank whose prefetch is least ahead of its reads: the ranks read in
// step, so the files needed soonest go first, and no rank is starved
// when only one copy at a time may be added.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) pumpAll() {
	blocked := make([]bool, len(c.pred.Ranks))
	for len(c.pending) < maxPending {
		best, bestLead := -1, 0
		for i, r := range c.pred.Ranks {
			if blocked[i] {
				continue
			}
			if l := c.lead(c.cursors[r]); best < 0 || l < bestLead {
				best, bestLead = i, l
			}
		}
		if best < 0 {
			return
		}
		blocked[best] = !c.pumpOne(c.cursors[c.pred.Ranks[best]])
	}
}

// lead is how many accesses cur's prefetch pointer is ahead of its
// reads (negative: behind). A pointer the reads overtook by more than the
// window moves up to it: within the window, workers that open batches
// out of order may not have opened a file yet, and pumpOne skips those
// they have.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) lead(cur *cursor) int {
	if from := max(cur.pos-c.window, 0); cur.aEpoch < cur.epoch || (cur.aEpoch == cur.epoch && cur.aPos < from) {
		cur.aEpoch, cur.aPos = cur.epoch, from
	}
	lead := cur.aPos - cur.pos
	for e := cur.epoch; e < cur.aEpoch; e++ {
		lead += len(c.pred.Order(cur.rank, e))
	}
	return lead
}

// pumpOne queues the next file of rank's access order that needs a copy,
// from its prefetch pointer, if the pointer is within the lookahead and
// (for a file no tier keeps) the staging budget has room. It reports
// whether it queued one.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) pumpOne(cur *cursor) bool {
	look := c.l.cfg.Access.Lookahead
	for {
		if c.epochs > 0 && cur.aEpoch >= c.epochs {
			return false
		}
		order := c.pred.Order(cur.rank, cur.aEpoch)
		if cur.aPos >= len(order) {
			cur.aEpoch, cur.aPos = cur.aEpoch+1, 0
			continue
		}
		if c.lead(cur) >= look {
			return false
		}
		if c.seen[order[cur.aPos]] == int32(cur.aEpoch+1) { // read already
			cur.aPos++
			continue
		}
		queued, ok := c.fetch(order[cur.aPos])
		if !ok {
			return false // wait for a size, or for reads to free staging room
		}
		cur.aPos++
		if queued {
			return true
		}
	}
}

// fetch queues one file for its tier, or for staging. It reports whether
// it queued a copy, and false for ok only when the file must wait: its
// place is not settled yet, or the staging budget has no room.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) fetch(idx int) (queued, ok bool) {
	if !c.settled(idx) {
		return false, false // wait for its size
	}
	size := c.sizes[idx]
	if c.where[idx] >= 0 || c.pending[idx] || size < 0 {
		return false, true
	}
	path := c.pred.Files[idx]
	if t := c.place.Tier[idx]; t >= 0 && c.pool.FetchTo(path, size, t) {
		c.queued(idx)
		return true, true
	}
	if c.stagedBytes+size > c.stage {
		return false, false
	}
	if c.pool.FetchTo(path, size, 0) {
		c.queued(idx)
		c.staged[idx] = true
		c.stagedBytes += size
		return true, true
	}
	return false, true
}

// queued records that file idx's copy is queued.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) queued(idx int) {
	c.pending[idx] = true
	c.l.seg.markCopying(c.pred.Files[idx])
}

// done settles one finished copy; it runs on a pool worker.
func (c *clairvoyant) done(res fetchpool.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fellBack {
		c.l.react.done(res)
		return
	}
	idx, _ := c.pred.Index(res.Path)
	delete(c.pending, idx)
	defer c.l.seg.clearCopying(res.Path) // after publish_gen moves: waiters then find the copy
	ld := &c.l.seg.s.leader
	if res.Err != nil {
		if errors.Is(res.Err, fetchpool.ErrHeld) {
			addU64(&ld.copies_held, 1)
		}
		if c.staged[idx] {
			delete(c.staged, idx)
			c.stagedBytes -= c.sizes[idx]
		}
		c.l.log.Debug().Msgf("prefetch %s: %v", res.Path, res.Err)
		return
	}
	if c.staged[idx] {
		c.stagedBytes += res.Bytes - c.sizes[idx]
	}
	c.sizes[idx] = res.Bytes // what the tier now holds: a file that changed since its stat is released by its copy's size
	c.where[idx] = int8(res.Tier)
	c.l.copied(res.Path)
	if c.staged[idx] && res.Tier != 0 { // moved on by a tier failure: not staged
		delete(c.staged, idx)
		c.stagedBytes -= c.sizes[idx]
	}
	addU64(&ld.copies, 1)
	addU64(&ld.copy_bytes, uint64(res.Bytes))
	c.publishCounts()
	addU64(&ld.publish_gen, 1) // descriptors of the original look for it
	c.pumpAll()
}

// onClose drops a staged file once read.
func (c *clairvoyant) onClose(ev Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := [2]int{ev.PID, ev.FD}
	idx, ok := c.opens[key]
	if !ok {
		return
	}
	delete(c.opens, key)
	if c.fellBack || !c.staged[idx] || c.pending[idx] || c.where[idx] != 0 {
		return
	}
	if c.l.tiers[0].tree.Remove(c.pred.Files[idx]) != nil {
		return
	}
	delete(c.staged, idx)
	c.where[idx] = -1
	c.stagedBytes -= c.sizes[idx]
	c.pool.Release(0, c.sizes[idx])
	c.publishCounts()
	c.pumpAll()
}

// forget marks the copy of a file a revalidator found stale and removed
// as gone, and gives its bytes back to its tier: the file is fetched again
// with its new content when the prefetch reaches it, or read from the
// original.
func (c *clairvoyant) forget(d dropped) {
	c.mu.Lock()
	defer c.mu.Unlock()
	idx, ok := c.pred.Index(d.path)
	if !ok || int(c.where[idx]) != d.tier {
		return
	}
	c.where[idx] = -1
	if c.staged[idx] {
		delete(c.staged, idx)
		c.stagedBytes -= c.sizes[idx]
	}
	c.pool.Release(d.tier, d.bytes)
	c.publishCounts()
}

// publishCounts writes tier usage and staging to the segment.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) publishCounts() {
	ld := &c.l.seg.s.leader
	files := make([]uint64, len(c.l.tiers))
	for _, t := range c.where {
		if t >= 0 {
			files[t]++
		}
	}
	for i, ts := range c.pool.Tiers() {
		setU64(&ld.tier_used[i], uint64(ts.Used))
		setU64(&ld.tier_files[i], files[i])
	}
	setU64(&ld.staged_files, uint64(len(c.staged)))
	setU64(&ld.staged_bytes, uint64(c.stagedBytes))
}

func (c *clairvoyant) close() {
	close(c.quit)
	c.pool.Close()
}
