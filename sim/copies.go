package sim

import "math"

// augur's copy pool on each node: the clairvoyant prefetcher (and the
// staging buffer's, which places nothing) walks the node's reads ahead of
// its ranks; the reactive policy copies a file on its first read.

// prefetch starts the copies node i's prefetcher may start at t: in the
// order of the node's reads, at most Lookahead reads ahead of its
// slowest rank and Pending copies at once, one queue for all tiers (a
// copy whose tier has no thread free holds up the rest), staged files
// within the staging budget. Files with a copy (or one on its way) are
// passed over; a staged file the ranks have passed already is not
// fetched (no read will come for it).
//
// A copy from a peer touches only the two nodes' links, so it is booked
// on its thread when the walk reaches it, also for when the thread is
// free again (the copies of a thread follow each other without an event
// each; the walk is where the prefetcher would be at each landing, since
// what it checks changes only at a step, which walks again, or at a
// read, which an evPool looks after). A copy from the PFS, or one that
// must wait for its holder, begins at its own time, in the PFS's time
// order: the walk stops and an event takes it up.
func (r *runner) prefetch(i int, t float64) {
	switch {
	case r.copyOnRead:
		r.copyQueued(i, t)
		return
	case !r.prefetching:
		return
	}
	ns := &r.nodes[i]
	reading := r.reading()
	limit := min(reading+r.cfg.Prefetch.Lookahead*r.cfg.RanksPerNode, r.j.slots())
	last := t // when the walk's last copy began: the queue's order
	for ns.q < limit {
		slot := ns.q
		rd := r.j.nodeRead(i, slot)
		f := rd.f
		fl := &ns.fs[f]
		tier := fl.tier
		if f != ns.fresh && tier >= 0 { // a placed file read again
			ns.q++
			continue
		}
		if fl.land() != inf || (tier < 0 && slot < reading) {
			ns.pass(f)
			continue
		}
		size := int64(rd.size)
		target := max(int(tier), 0)
		if tier < 0 && ns.stageUsed+size > r.j.stage {
			r.poolLater(i, t)
			return
		}
		k, s := ns.thread(r.threads[target], last)
		if s == inf { // every thread held until an event of its own
			return
		}
		if r.pendingBinds && ns.inFlight(s) >= r.cfg.Prefetch.Pending {
			r.poolLater(i, t)
			return
		}
		var g int32 // asked only with peers
		if r.peer {
			g = ns.files[f]
		}
		if s > t && (r.mustWait(i, f, g, s) || r.source(i, f, g, float64(size), s) < 0) {
			r.poolAt(i, s)
			return
		}
		last = s
		if tier < 0 {
			ns.stageUsed += size
		}
		if r.mustWait(i, f, g, t) {
			ns.free[k] = inf
			fl.setLand(queued)
			r.awaitHolder(i, copyOf{f: f, size: rd.size}, k, t, t)
			ns.pass(f)
			continue
		}
		land := r.begin(i, target, k, f, g, float64(size), s)
		fl.setLand(land)
		if r.peer && int(fl.peer) == i {
			r.holdLand[g] = land
			if tier >= 0 {
				r.placed.set(g)
			}
		}
		ns.pass(f)
	}
}

// pass moves ns's prefetcher past its read of local file f.
func (ns *nodeState) pass(f int32) {
	ns.q++
	if f == ns.fresh {
		ns.fresh++
	}
}

// thread is the thread of a tier (its threads' span of ns.free) that is
// free first, and when a copy may begin on it: not before after.
func (ns *nodeState) thread(span [2]int, after float64) (int, float64) {
	k, s := span[0], math.Float64bits(inf)
	for j, f := range ns.free[span[0]:span[1]] {
		// Without a branch, which a thread's times (alike) mispredict:
		// a time is never negative, so its bits order as the numbers
		// do, and integers' min and a mask take none (c+p at 1024 x 30
		// 8.6-9.4 s against 9.2-11.6 s).
		b := math.Float64bits(f)
		lt := 0
		if b < s { // a SETcc
			lt = 1
		}
		k ^= (k ^ (span[0] + j)) & -lt // k = span[0]+j if lt
		s = min(s, b)
	}
	return k, max(math.Float64frombits(s), after)
}

// inFlight is the number of ns's copies under way at s.
func (ns *nodeState) inFlight(s float64) int {
	n := 0
	for _, f := range ns.free {
		if f > s {
			n++
		}
	}
	return n
}

// poolLater has node i's prefetcher look again when the first thread
// booked ahead of t is free (a thread held by a copy of the PFS or a
// wait looks again at its own event).
func (r *runner) poolLater(i int, t float64) {
	next := inf
	for _, f := range r.nodes[i].free {
		if f > t && f < next {
			next = f
		}
	}
	if next != inf {
		r.poolAt(i, next)
	}
}

// poolAt has node i's prefetcher look again at s.
func (r *runner) poolAt(i int, s float64) {
	ns := &r.nodes[i]
	if ns.poolAt <= s {
		return
	}
	ns.poolAt = s
	r.at(s, evPool, i, 0)
}

// Waiting for the holder (shim's peering.await and the holder's
// awaitHeld): a copy of a file another node holds waits, its thread with
// it, polling every 5 ms for at most 5 s, until that node has its copy
// (in the first epoch also while that node has not begun it). Then it
// comes from that node, else from the PFS. Waiting here rather than
// booking the link for when the holder's copy lands keeps the links
// reserved in time order.
const (
	holderPoll = 0.005
	holderWait = 5.0
)

// mustWait says whether node i's copy of its local file f (dataset file
// g) must wait at t for its holder: in the first epoch until node i's
// ranks have read past where the holder's rank reads the file (shim's
// holderOf: only then should the holder have it), and until the holder's
// copy has landed (in the first epoch also while it has not begun).
func (r *runner) mustWait(i int, f, g int32, t float64) bool {
	if !r.peer {
		return false
	}
	h := int(r.nodes[i].fs[f].peer)
	if h < 0 || h == i {
		return false
	}
	if r.e == 0 && !r.passed(i, r.j.holdPos[g]) {
		return true
	}
	land := r.holderLand(g)
	return land > t && (land != inf || r.e == 0)
}

// passed says whether a rank of node i has read position pos of the
// epoch's order or past it.
func (r *runner) passed(i int, pos int32) bool {
	R := r.cfg.RanksPerNode
	for k := i * R; k < (i+1)*R; k++ {
		if r.ranks[k].opened >= int(pos) {
			return true
		}
	}
	return false
}

// holderLand is when the holder's copy of g lands (inf: it has none), or
// 0 once a copy the holder keeps has landed (by the clock: every
// question is asked for now or later): what holdLand says, asked of a
// bit that stays in the cache for the many nodes that copy g from its
// holder after it landed (holdLand is asked at random).
func (r *runner) holderLand(g int32) float64 {
	if r.landed.has(g) {
		return 0
	}
	land := r.holdLand[g]
	if land <= r.now && r.placed.has(g) {
		r.landed.set(g)
	}
	return land
}

// bits is a set of dataset files.
type bits []uint64

func newBits(n int) bits        { return make(bits, (n+63)/64) }
func (b bits) set(g int32)      { b[g>>6] |= 1 << (g & 63) }
func (b bits) has(g int32) bool { return b[g>>6]&(1<<(g&63)) != 0 }

// awaitHolder goes on with node i's waiting copy c, on thread k, at t.
func (r *runner) awaitHolder(i int, c copyOf, k int, since, t float64) {
	ns := &r.nodes[i]
	fl, g := &ns.fs[c.f], ns.files[c.f]
	if r.mustWait(i, c.f, g, t) && t-since < holderWait {
		r.waitAt(t+holderPoll, i, c, k, since)
		return
	}
	fl.setLand(r.begin(i, max(int(fl.tier), 0), k, c.f, g, float64(c.size), t))
	r.prefetch(i, t)
}

// reading is the read of each node's order its ranks are at: the first
// of the batch they compute next (every rank of the job is in step).
func (r *runner) reading() int {
	return (r.e*r.j.k + min(r.j.k, r.next*r.cfg.Loop.Batch)) * r.cfg.RanksPerNode
}

// begin makes a copy of node i's local file f (dataset file g) in tier
// target on thread k of the prefetcher's pool, begun at t, and returns
// when it lands: from the node that holds it (clairvoyant+peers) once
// that node's copy has landed, else from the PFS.
func (r *runner) begin(i, target, k int, f, g int32, size, t float64) float64 {
	ns := &r.nodes[i]
	if src := r.source(i, f, g, size, t); src >= 0 {
		land := r.netXfer(src, i, max(t, r.sourceLand(src, g)), size) + size/r.cfg.Tiers[target].Bandwidth
		ns.free[k] = land
		return land
	}
	land := r.pfsCopy(t, size, 1) + size/r.cfg.Tiers[target].Bandwidth
	ns.free[k] = inf
	r.at(land, evCopy, i, k)
	return land
}

// fetch makes a reactive copy of dataset file g (node i's local file f)
// on node i in tier target, begun at t on the tier's thread k, and
// returns when it lands: from the node that owns it (hvac), else from the
// PFS. The thread is booked until then; nothing waits for the landing
// (a reader finds it by the time, the queue's next copy by the thread's).
func (r *runner) fetch(i, target, k int, f, g int32, size, t float64) float64 {
	var done float64
	switch src := r.source(i, f, g, size, t); {
	case src >= 0:
		done = r.netXfer(src, i, max(t, r.sourceLand(src, g)), size)
	default:
		done = r.pfsCopy(t, size, 1)
	}
	land := done + size/r.cfg.Tiers[target].Bandwidth
	r.nodes[i].free[k] = land
	return land
}

// pfsCopy reserves a copy's read of size bytes of the PFS at t (now), in
// parts read at once (1: one request after another): each part a reader
// of the PFS until the bytes are done.
func (r *runner) pfsCopy(t, size float64, parts int) float64 {
	done := r.pfsReadParts(t, size, parts, 0)
	r.gamma += parts
	for range parts {
		r.copiesOut = append(r.copiesOut, done)
	}
	return done
}

// The parts of a copy a reader waits for (tiering's copyParallel): up to
// copyStreams, of at least copyPart bytes (a FUSE client's request), each
// but the last a whole number of directAlign blocks.
const (
	copyStreams = 4
	copyPart    = 128 << 10
	directAlign = 4096
)

// copyParts is how many parts a copy of size bytes that a reader waits
// for is read in.
func copyParts(size float64) int {
	return int(min(copyStreams, math.Ceil(size/copyPart)))
}

// settle counts out of the PFS's readers the copies whose bytes were done
// by now: their times only grow, as the pipe's reservations do.
func (r *runner) settle() {
	for r.outHead < len(r.copiesOut) && r.copiesOut[r.outHead] <= r.now {
		r.gamma--
		r.outHead++
	}
	if r.outHead > 1024 && r.outHead > len(r.copiesOut)/2 {
		r.copiesOut = r.copiesOut[:copy(r.copiesOut, r.copiesOut[r.outHead:])]
		r.outHead = 0
	}
}

// source is the node a copy of g for node i comes from, or -1 for the
// PFS. Under hvac the owner, asked for a file it has no copy of, makes
// one from the PFS at once if it has room (and keeps it), as augur's
// reactive owner does.
func (r *runner) source(i int, f, g int32, size, t float64) int {
	switch {
	case r.peer:
		if h := int(r.nodes[i].fs[f].peer); h >= 0 && h != i && r.holderLand(g) <= t {
			return h
		}
	case r.ownLand != nil:
		o := int(r.nodes[i].fs[f].peer)
		if o == i {
			return -1
		}
		if !r.owns.has(g) && r.ownLand[g] == inf {
			on := &r.nodes[o]
			t0 := r.roomIn(on, int64(size))
			if t0 < 0 {
				return -1
			}
			on.used[t0] += int64(size)
			r.ownLand[g] = r.pfsCopy(t, size, 1)
		}
		return o
	}
	return -1
}

// sourceLand is when src's copy of g lands, for a copy from it begun at
// now or later (so any time up to now stands for one landed by then).
func (r *runner) sourceLand(src int, g int32) float64 {
	if r.peer {
		return r.holderLand(g)
	}
	return r.ownerLand(g)
}

// ownerLand is when the owner's copy of g lands (inf: it has none), or 0
// once it has landed (by the clock: asked for now or later): hvac's
// holderLand, a bit in the cache for the many nodes that copy g from its
// owner over the run rather than ownLand, asked at random. A landing time
// only moves earlier (owned), so a copy landed stays landed.
func (r *runner) ownerLand(g int32) float64 {
	if r.owns.has(g) {
		return 0
	}
	land := r.ownLand[g]
	if land <= r.now {
		r.owns.set(g)
	}
	return land
}

// roomIn is the first tier of ns with room for size bytes, -1 if none.
func (r *runner) roomIn(ns *nodeState, size int64) int {
	for t, tier := range r.cfg.Tiers {
		if ns.used[t]+size <= tier.Capacity {
			return t
		}
	}
	return -1
}

// copied frees thread k of node i's prefetcher, whose copy from the PFS
// landed, and lets the prefetcher go on.
func (r *runner) copied(i, k int, t float64) {
	r.nodes[i].free[k] = t
	r.prefetch(i, t)
}

// request is augur's reactive policy at the first open of node's local
// file f, which has no copy and none on its way, at c (now): the reader
// asks its node's leader for a copy (wait_max) and waits (shim's
// reactive.onRequest and copyNow). The leader copies the file at once,
// beside the queue and its threads, reading the PFS once (uncached), into
// the first tier with room, and the reader then reads the copy: request
// returns when that read is done, ok true. Else the reader reads the
// original, from the time returned (ok false): at once when it does not
// ask (wait_max 0; a file whose reader tees it or whose copy rides its
// pages, see asks; or the node stopped asking) or when another node owns
// the file (hvac: that copy comes through the owner, behind the queue);
// after the leader's open of the source (a PFS latency) when the file is
// larger than wait_max (the queue copies it) or when no tier has room for
// it, after which the node's readers stop asking.
func (r *runner) request(node int, f int32, size, c float64) (float64, bool) {
	ns := &r.nodes[node]
	fl := &ns.fs[f]
	wait := r.cfg.Reactive.WaitMax
	if wait <= 0 || ns.stopped || !r.asks(size) || (r.ownLand != nil && int(fl.peer) != node) {
		return c, false
	}
	if size > float64(wait) {
		return c + r.cfg.PFS.Latency, false
	}
	t := r.roomIn(ns, int64(size))
	if t < 0 {
		ns.stopped = true
		return c + r.cfg.PFS.Latency, false
	}
	ns.used[t] += int64(size)
	fl.tier = int8(t)
	land := r.pfsCopy(c, size, copyParts(size)) + size/r.cfg.Tiers[t].Bandwidth
	fl.setLand(land)
	r.owned(node, f, land)
	return r.tierRead(t, land, size), true
}

// asks says whether the first reader of a file of size bytes asks for
// its copy and waits (shim's learnClient). Where the client keeps a page
// cache, only for a file larger than its read-ahead (wait_min, here the
// PFS's request size): the copy reads its requests in parallel, the
// client one after another; a smaller file's reader reads the original,
// as fast as the copy would. Where it keeps none, a job of one node asks
// for nothing (its readers tee, see tees), a job of several nodes (hvac)
// for every file.
func (r *runner) asks(size float64) bool {
	p := &r.cfg.PFS
	if p.ClientCache {
		return p.RequestSize > 0 && size > float64(p.RequestSize)
	}
	return r.ownLand != nil
}

// tees says whether the reader of a file of size bytes that did not wait
// for its copy makes it (shim's tee: a job of one node whose client keeps
// no page cache, files of at most wait_max bytes): the copy is the
// reader's bytes and lands as its read ends. (Where the client caches,
// the leader copies from the pages the reader left: see copyOnMiss.)
func (r *runner) tees(size float64) bool {
	w := r.cfg.Reactive.WaitMax
	return r.ownLand == nil && !r.cfg.PFS.ClientCache && w > 0 && size <= float64(w)
}

// copyOnMiss is the reactive policy's copy of local file f (dataset index
// g, asked only under hvac) that a reader read from the PFS without
// waiting for a copy (see request: wait_max 0, the node
// stopped asking, a file larger than wait_max, another node's file),
// its read begun at now and done at done, into the first tier with room,
// never evicting.
// When the reader tees it, or the client caches the PFS's pages and the
// copy is to come from the PFS (it rides the reader's pages), it lands as
// the read ends; else it waits its turn in the node's queue.
func (r *runner) copyOnMiss(i int, f, g int32, size, now, done float64) {
	ns := &r.nodes[i]
	fl := &ns.fs[f]
	if fl.land() != inf {
		return
	}
	t := r.roomIn(ns, int64(size))
	if t < 0 {
		return
	}
	ns.used[t] += int64(size)
	fl.tier = int8(t)
	fromPFS := r.ownLand == nil || int(fl.peer) == i
	if r.tees(size) || fromPFS && r.cfg.PFS.ClientCache {
		land := done + size/r.cfg.Tiers[t].Bandwidth
		fl.setLand(land)
		r.owned(i, f, land)
		return
	}
	fl.setLand(queued)
	ns.copyQ = append(ns.copyQ, copyOf{f, int32(size), g})
	r.copyQueued(i, now)
}

// owned records, under hvac, the owner's own copy of node i's local file
// f, landing at land.
func (r *runner) owned(i int, f int32, land float64) {
	if ns := &r.nodes[i]; r.ownLand != nil && int(ns.fs[f].peer) == i {
		g := ns.files[f]
		r.ownLand[g] = min(r.ownLand[g], land)
	}
}

// copyQueued starts the reactive copies node i's threads can take at t,
// in the order of the queue.
func (r *runner) copyQueued(i int, t float64) {
	ns := &r.nodes[i]
	for ns.copyHead < len(ns.copyQ) {
		c := ns.copyQ[ns.copyHead]
		f := c.f
		fl := &ns.fs[f]
		target := int(fl.tier)
		k, s := ns.thread(r.threads[target], t)
		if s > t { // every thread of the tier busy: look again when one is free
			r.poolAt(i, s)
			return
		}
		land := r.fetch(i, target, k, f, c.g, float64(c.size), t)
		fl.setLand(land)
		r.owned(i, f, land)
		ns.copyHead++
	}
	if ns.copyHead == len(ns.copyQ) {
		ns.copyQ, ns.copyHead = ns.copyQ[:0], 0
	}
}
