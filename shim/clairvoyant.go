package shim

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/augur-hpc/augur/fetchpool"
	"github.com/augur-hpc/augur/seed"
	"github.com/augur-hpc/augur/tiering"
)

// clairvoyant is NoPFS's policy, with the access order learned from the
// job rather than told. The seed fixes every rank's order; the leader
// places the files this node reads most often in its fastest tiers and
// prefetches in exactly the order of access, ahead of each rank's cursor:
// files assigned to a tier stay, others are staged in tier 0 within a
// byte budget and dropped once read.
//
// A cursor is one rank's place in one dataset's order. The configuration
// gives the first ones (the dataset root as the layout lists it, the
// configured sampler, this node's ranks), so prefetching starts before
// the first read. Each process's opens (a stream: the global rank its
// launcher named, else the process its readers were forked from) then
// follow a cursor that matches them, or, when none does, are kept and
// handed to seed.Infer, which finds the dataset directory (learn.go),
// seed, epoch, world size and rank that explain them: a new cursor. A
// stream whose opens stop matching its cursor (a restart, an evaluation
// pass, another epoch) is learned again. What no cursor predicts is
// copied on first read, as the reactive policy does.
type clairvoyant struct {
	l       *Leader
	pred    *Prediction // the configuration's; pred.Cat is the root's walk
	cat     *seed.Catalog
	pool    *fetchpool.Pool
	react   *reactive // what no cursor predicts; shares the pool
	caps    []int64   // the tiers' capacities, less the staging budget
	horizon int       // epochs placement looks ahead
	epochs  int       // 0: unbounded
	quit    chan struct{}
	learn   chan learnReq // to the inference worker

	mu          sync.Mutex // guards everything below
	stage       int64      // staging budget in tier 0 (grows with the loaders' spread: growStage)
	sizes       []int64    // per catalog file; unknownSize until stat'ed
	where       []int8     // per file: tier holding a copy, -1 none (set by setWhere)
	tierFiles   []uint64   // per tier: files where says it holds
	seen        []int32    // per file: 1 + the last epoch a cursor matched it in, 0 never
	pending     map[seed.FileID]bool
	staged      map[seed.FileID]stagedFor // staged copies (read once, then dropped)
	stagedBytes int64                     // staged and being staged
	reclaimed   time.Time                 // the last search for staged copies no read will come for
	orphans     []seed.FileID             // copies the placement may not keep where they are
	opens       map[[2]int]seed.FileID
	sized       uint64                   // files stat'ed
	sizedBytes  int64                    // their bytes
	datasets    map[string]*seed.Dataset // candidates listed so far; nil: not a dataset
	cursors     []*cursor
	streams     map[streamID]*stream
	place       *placer // over the cursors' reads, by catalog file; rebuilt when they change
	measuring   bool
	acc         hits            // of all opens of dataset files
	warned      map[string]bool // directories whose streams nothing explained, said once
	unexplained bool            // a stream's opens were explained by no seed tried
	hold        []holdAt        // per file, in a job of several nodes: who reads it first (holders.go); nil: not known
	holdBy      []holding       // the samplers and epochs hold was found from; holdAt.by indexes it
	// streamsChanged: augur stat's stream table is out of date.
	streamsChanged bool
}

// cursor is one rank's position in one dataset's predicted sequence.
type cursor struct {
	ds         *seed.Dataset
	key        cursorKey
	sampler    seed.Sampler
	perms      *perms // the node's shared permutations
	epoch, pos int    // next expected access
	aEpoch     int    // prefetch pointer: next file to consider
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

// stagedFor says which read a staged copy is for: cur's, at pos of epoch.
type stagedFor struct {
	cur        *cursor
	epoch, pos int
}

// cursorKey says which sampler and rank a cursor follows.
type cursorKey struct {
	dir      string
	shuffle  bool
	seed     int64
	replicas int
	rank     int
}

const (
	maxPending = 256 // copies queued at once
	minWindow  = 64  // the window of a cursor whose readers were not seen yet
)

// planClairvoyant walks the dataset and prepares the cursors the
// configuration describes; start then stats the files, places them in
// tiers of capacities caps as their sizes arrive, and prefetches what is
// placed. It touches nothing of l but its configuration and segment, so
// it may run beside l's run goroutine.
func planClairvoyant(l *Leader, caps []int64) (*clairvoyant, error) {
	pred, err := Predict(l.cfg, nil)
	if err != nil {
		return nil, err
	}
	a := l.cfg.Access
	stage, horizon := placeParams(a, caps)
	n := pred.Cat.NumFiles()
	c := &clairvoyant{l: l, pred: pred, cat: pred.Cat, stage: stage, caps: caps, horizon: horizon,
		epochs: a.Epochs, quit: make(chan struct{}), learn: make(chan learnReq, 64),
		sizes: make([]int64, n), where: make([]int8, n), tierFiles: make([]uint64, len(l.tiers)), seen: make([]int32, n),
		pending: map[seed.FileID]bool{}, staged: map[seed.FileID]stagedFor{}, opens: map[[2]int]seed.FileID{},
		datasets: map[string]*seed.Dataset{}, streams: map[streamID]*stream{}, warned: map[string]bool{}}
	for i := range c.sizes {
		c.sizes[i], c.where[i] = unknownSize, -1
	}
	if pred.DS != nil {
		c.datasets[""] = pred.DS
		if a.Sampler == seed.KindDistributed {
			for _, r := range pred.Ranks {
				if cur := c.addCursor(pred.DS, seed.Found{Seed: l.cfg.Seed, Shuffle: a.Shuffle,
					Replicas: a.WorldSize, Rank: r}, false); cur != nil {
					cur.provisional = true
				}
			}
		} else {
			for _, r := range pred.Ranks { // told samplers that cannot be learned
				c.cursors = append(c.cursors, c.toldCursor(r))
			}
		}
	}
	setU64(&l.seg.s.leader.predicted, uint64(n))
	setU64(&l.seg.s.leader.stage_budget, uint64(stage))
	return c, nil
}

// toldCursor follows a configured sampler other than a DistributedSampler
// (random, numpy, an order file): it is taken as told.
func (c *clairvoyant) toldCursor(rank int) *cursor {
	return newCursor(c.pred.DS, cursorKey{rank: rank}, c.pred.sampler(rank), &c.pred.perms)
}

func newCursor(ds *seed.Dataset, key cursorKey, s seed.Sampler, ps *perms) *cursor {
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
	cur := newCursor(ds, key, s, &c.pred.perms)
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
	o := cur.perms.orderOf(cur.sampler, epoch, cur.ds.Len())
	cur.orders[epoch] = o
	return o
}

// start prefetches through pool, whose copies must end in c.done.
func (c *clairvoyant) start(pool *fetchpool.Pool) {
	c.mu.Lock()
	c.pool = pool
	c.react = reactiveWith(c.l)
	c.react.pool = pool
	c.startMeasuring()
	c.mu.Unlock()
	go c.inferrer()
}

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
	order := slices.Clone(c.place.ranking)
	for i, k := range c.place.pos {
		if k < 0 {
			order = append(order, int32(i))
		}
	}
	go measure(func(i int) string { return c.cat.Path(seed.FileID(i)) }, order, c.quit, c.measured)
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
	c.setWhere(seed.FileID(i), t)
	c.sized++
	c.sizedBytes += max(size, 0)
	setU64(&c.l.seg.s.leader.sized, c.sized)
	if c.place != nil && (c.place.advance(c.sizes) > 0 || c.place.pos[i] < 0) {
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
// the tiers hold (placer.keep). What is known of the reads did not
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
	c.place = newPlacer(c.cat.NumFiles(), caps, c.horizon, func(e int) []readSeq {
		var seqs []readSeq
		for _, cur := range c.cursors {
			if c.epochs > 0 && cur.epoch+e >= c.epochs {
				continue
			}
			// Not cur.order: the horizon's epochs pass through once.
			seqs = append(seqs, readSeq{order: cur.perms.orderOf(cur.sampler, cur.epoch+e, cur.ds.Len()),
				file: func(idx int) int { return int(cur.ds.File(idx)) }})
		}
		return seqs
	})
	if keep {
		c.place.keep(func(f int32) int {
			if _, staged := c.staged[seed.FileID(f)]; staged {
				return -1 // staged copies are dropped once read
			}
			return int(c.where[f])
		}, len(caps))
	}
	if c.hold != nil {
		c.place.prefer(c.mine)
	}
	c.place.advance(c.sizes)
	c.orphans = c.orphans[:0]
	for f, t := range c.where {
		if _, staged := c.staged[seed.FileID(f)]; t >= 0 && !staged && c.place.Tier[f] != t {
			c.orphans = append(c.orphans, seed.FileID(f))
		}
	}
	c.startMeasuring()
}

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
		case c.l.tiers[t].tree.Remove(c.cat.Path(f)) == nil:
			c.setWhere(f, -1)
			c.pool.Release(t, c.sizes[f])
			removed = true
		}
		c.orphans[i] = c.orphans[len(c.orphans)-1]
		c.orphans = c.orphans[:len(c.orphans)-1]
	}
	return removed
}

// settled reports whether file f's size and place are known.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) settled(f seed.FileID) bool {
	if k := c.place.pos[f]; k >= 0 {
		return int(k) < c.place.next
	}
	return c.sizes[f] != unknownSize
}

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

// growStage widens the staging budget, when the configuration does not
// fix it, to what the cursors' readers hold in flight. A DataLoader of W
// workers reads W batches at once and starts each epoch by asking for
// prefetch_factor x W of them; a cursor's window (twice the furthest its
// readers were seen apart) is that many files, and the prefetch pointer
// must stage that far ahead of the earliest one not read. Only the files
// the placement keeps in no tier are staged: the window's share of them
// (placer.staged) is what the budget must hold. (Counting the whole
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
	need := int64(float64(files) * c.place.staged() * float64(c.sizedBytes/int64(c.sized)))
	if need <= c.stage {
		return
	}
	stage := min(max(need, 2*c.stage), first/2)
	c.l.log.Info().Msgf("staging budget %s -> %s: the loaders hold up to %d files in flight, %.0f%% of them staged",
		FormatSize(c.stage), FormatSize(stage), files, 100*c.place.staged())
	c.caps[0] -= stage - c.stage
	c.stage = stage
	setU64(&c.l.seg.s.leader.stage_budget, uint64(stage))
	c.resize()
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
	if c.where[f] >= 0 || c.pending[f] || size < 0 {
		return false, true
	}
	path := c.cat.Path(f)
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
	if c.pending[f] || c.where[f] != 0 || c.l.tiers[0].tree.Remove(c.cat.Path(f)) != nil {
		return false
	}
	delete(c.staged, f)
	c.setWhere(f, -1)
	c.stagedBytes -= c.sizes[f]
	c.pool.Release(0, c.sizes[f])
	return true
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

func (c *clairvoyant) close() {
	c.mu.Lock()
	c.publishStreams()
	c.mu.Unlock()
	close(c.quit)
	c.pool.Close()
}
