package sim

import "math"

// The engine is a discrete-event simulation of the job under one policy.
// Only time is simulated: which file each rank reads when is seed's
// sampler order, where a file goes is package placement's, who holds or
// owns it is placement's and peers' rule. Actors: each rank's DataLoader workers
// (reading a batch file after file), each rank's compute loop (a step per
// batch, then DDP's barrier across the job), and each node's copy pool
// (augur's fetchpool: one queue, each tier's threads at once). Shared
// resources are reserved in time order: the PFS (one pipe whose
// throughput depends on its readers, as pfsemu's link) and each node's
// link to the others, both ways.

const (
	evRead    = iota // worker a reads on in its batch
	evReady          // worker a's batch b is ready
	evCompute        // rank a finished computing its step
	evCopy           // node a's prefetcher's copy from the PFS on its thread b landed
	evWait           // node a's copy on its thread b waits for the node that holds its file (see waiting)
	evPool           // node a's prefetcher looks again (a thread of it is free, or a copy may begin)
)

// waitCap is how long a reader waits for a copy on its way before it
// reads the original (the data plane's 200 ms).
const waitCap = 0.2

// queued marks a local file whose copy is queued but not begun.
const queued = math.MaxFloat64

var inf = math.Inf(1)

type runner struct {
	j    *job
	cfg  *Config
	peer bool // clairvoyant+peers
	// direct: every read from the PFS (pfs) or the first tier (perfect);
	// copyOnRead: a copy made on a read's miss (reactive, hvac);
	// prefetching: a prefetcher walks ahead of the ranks (staging and the
	// clairvoyant policies). Asked at every read and step: flags, not
	// the policy's name.
	perfect, direct, copyOnRead, prefetching bool
	// pendingBinds: a node has as many threads as copies may be in
	// flight, or more (else the bound is never reached: Lassen's 10
	// threads, 256 copies).
	pendingBinds bool

	q   queue
	seq uint64

	pfsFree float64
	gamma   int // readers with a PFS read in flight
	// copiesOut are when the copies counted in gamma are done with the
	// PFS, in order (see settle).
	copiesOut []float64
	outHead   int
	now       float64  // the time of the event being handled
	in, out   []link   // each node's link, both ways
	threads   [][2]int // each tier's threads: their span of a node's free
	// fs is the slab of every node's (see job.spare).
	fs []file

	nodes   []nodeState
	ranks   []rankState
	workers []workerState
	// holdLand (clairvoyant+peers) is when the holder's copy of each
	// dataset file lands; ownLand (hvac) the owner's.
	holdLand, ownLand []float64
	// placed and landed (clairvoyant+peers) are the files whose holder
	// keeps its copy (placed, not staged), and those of them whose copy
	// has landed (known at the first look after it did).
	placed, landed bits
	// waiting (clairvoyant+peers) is, per thread of every node's copy
	// pool, the copy that waits on it for its holder (see waitAt).
	waiting []wait
	// owns (hvac) are the files whose owner's copy has landed (known at
	// the first look after it did; see ownerLand).
	owns bits

	e, nb, arrivals int
	// next is the batch every rank computes next: DDP's barrier keeps
	// them in step.
	next       int
	epochStart float64
	cur        *EpochStats
	Epochs     []EpochStats
}

// wait is a copy c that waits for its holder since since.
type wait struct {
	c     copyOf
	since float64
}

// copyOf is a file to copy: its local number and size (asked by dataset
// index, at random, the size would be a miss of the cache), and under
// hvac its dataset index (asked of the node's list when its reader read
// the file, beside the file's state, not thousands of events later when
// the queue copies it: a miss each).
type copyOf struct{ f, size, g int32 }

type nodeState struct {
	// fs is the node's local files, by local number: what a read or a
	// copy asks of a file, in one place (a node's files are asked for at
	// random: one cache line, not one per array).
	fs []file
	// files is each local file's dataset index (the job's nodeOrder).
	files []int32
	used  []int64 // per tier: bytes of copies
	// free is, per thread of the copy pool (tier after tier: the runner's
	// threads), when the thread is
	// free: the prefetcher books a copy from a peer on it ahead and holds
	// it (inf) for the others until their own event; a reactive copy
	// books it until the copy lands. poolAt is when an evPool is due
	// (inf: none).
	free   []float64
	poolAt float64
	// q is the read of the node (its slot: epoch, position, rank) the
	// prefetcher considers next, and fresh the local number of the file
	// the node reads first next: every read of a file staged (not placed)
	// may need a copy, of a placed file only its first.
	q         int
	fresh     int32
	stageUsed int64
	copyQ     []copyOf // reactive: local files to copy, in order of first read
	copyHead  int
	// stopped (reactive, hvac): no tier had room for a copy a reader
	// asked for, and the node's readers ask no more (wait_max 0).
	stopped bool
}

// file is a node's local file under one policy, in 12 bytes: every
// node's are a slab of gigabytes at scale, asked at random, and the first
// two policies' are fresh pages of this machine. Its dataset index, which
// only the policies with peers ask (for a copy, and hvac at a read that
// may queue one), is the node's (nodeState.files).
type file struct {
	// lo and hi are the bits of when its copy lands (inf: none;
	// queued), a float64 in two halves (one would align the record to 16
	// bytes): see land.
	lo, hi uint32
	peer   int16 // the node that holds it (clairvoyant+peers) or owns it (hvac)
	tier   int8  // the tier of its copy (-1: staged)
}

// land is when fl's copy lands.
func (fl *file) land() float64 { return math.Float64frombits(uint64(fl.hi)<<32 | uint64(fl.lo)) }

// setLand has fl's copy land at t.
func (fl *file) setLand(t float64) {
	b := math.Float64bits(t)
	fl.lo, fl.hi = uint32(b), uint32(b>>32)
}

type rankState struct {
	sent     int // batches handed to workers
	released bool
	barrier  float64   // when the last step's barrier let it go
	ready    []float64 // per batch of the epoch: when ready (inf: not yet)
	opened   int       // the furthest position of the epoch its workers have read (-1: none)
}

// workerState is 24 bytes: a worker's is asked at every read, one
// worker's after another's at random.
type workerState struct {
	c     float64
	next  int32 // batch it reads next (its own: w, w+W, ...)
	pos   int32 // next file of it
	busy  bool
	inPFS bool
}

// EpochStats is one epoch of one policy: time, mean stall over ranks,
// and bytes by source (read by readers from each tier; from the PFS and
// from peers by readers and copies).
type EpochStats struct {
	Epoch     int       `json:"epoch"`
	Seconds   float64   `json:"seconds"`
	Stall     float64   `json:"stall_seconds"`
	PFSBytes  int64     `json:"pfs_bytes"`
	PeerBytes int64     `json:"peer_bytes"`
	TierBytes []int64   `json:"tier_bytes"`
	stalls    []float64 // per rank
}

// direct says whether policy pol reads straight from the PFS (pfs) or
// the first tier (perfect): it keeps no file's state.
func direct(pol string) bool { return pol == "pfs" || pol == "perfect" }

func newRunner(j *job, pol string) *runner {
	cfg := j.cfg
	if !direct(pol) && passesThrough(cfg, j.ds.sizes) {
		pol = "pfs" // augur copies nothing of a source as fast as its tier
	}
	r := &runner{j: j, cfg: cfg, in: newLinks(cfg.Nodes), out: newLinks(cfg.Nodes),
		peer: pol == "clairvoyant+peers", perfect: pol == "perfect",
		direct:      direct(pol),
		copyOnRead:  pol == "reactive" || pol == "hvac",
		prefetching: pol == "clairvoyant" || pol == "clairvoyant+peers" || pol == "staging"}
	R, W := cfg.RanksPerNode, cfg.Loop.Workers
	r.nb = (j.k + cfg.Loop.Batch - 1) / cfg.Loop.Batch
	r.nodes = make([]nodeState, cfg.Nodes)
	total := 0
	for _, no := range j.nodes {
		total += len(no.files)
	}
	var fs []file
	if !r.direct { // pfs and perfect ask no file's state
		fs = j.spareFiles(total) // one allocation for every node's, a finished policy's if any
		r.fs = fs
	}
	threads := 0
	r.threads = make([][2]int, len(cfg.Tiers))
	for t, tier := range cfg.Tiers {
		r.threads[t] = [2]int{threads, threads + tier.Threads}
		threads += tier.Threads
	}
	r.pendingBinds = cfg.Prefetch.Pending <= threads
	used, free := slab[int64](&j.mem, cfg.Nodes*len(cfg.Tiers)), slab[float64](&j.mem, cfg.Nodes*threads)
	for i := range r.nodes {
		no := j.nodes[i]
		ns := &r.nodes[i]
		var tier []int8
		var peer []int16
		switch pol {
		case "clairvoyant":
			tier = no.tier
		case "clairvoyant+peers":
			tier, peer = no.tierPeers, no.held
		case "hvac":
			peer = no.owner
		}
		if fs != nil {
			n := len(no.files)
			ns.fs, fs = fs[:n:n], fs[n:]
		}
		ns.files = no.files
		for f := range ns.fs {
			fl := file{tier: -1}
			fl.setLand(inf)
			if tier != nil {
				fl.tier = tier[f]
			}
			if peer != nil {
				fl.peer = peer[f]
			}
			ns.fs[f] = fl
		}
		ns.used, used = used[:len(cfg.Tiers):len(cfg.Tiers)], used[len(cfg.Tiers):]
		ns.free, free = free[:threads:threads], free[threads:]
		ns.poolAt = inf
	}
	r.ranks = make([]rankState, cfg.Nodes*R)
	for k := range r.ranks {
		r.ranks[k].ready = make([]float64, r.nb)
	}
	r.workers = make([]workerState, cfg.Nodes*R*W)
	if r.peer {
		r.waiting = make([]wait, cfg.Nodes*threads)
		r.holdLand = infs(len(j.ds.sizes))
		r.placed, r.landed = newBits(len(j.ds.sizes)), newBits(len(j.ds.sizes))
	}
	if pol == "hvac" {
		r.ownLand = infs(len(j.ds.sizes))
		r.owns = newBits(len(j.ds.sizes))
	}
	return r
}

// passThroughBelow is augur's passBelow (shim/sources.go): a source whose
// file of the dataset's mean size reads in at most this many times the
// fastest tier's time is passed through, its files not copied.
const passThroughBelow = 1.5

// passesThrough says whether augur passes the PFS of cfg through for a
// dataset of sizes: one reader's read of a file of their mean size (its
// latency, its requests' and its bytes at the PFS's rate for one reader)
// within passThroughBelow of the first tier's.
func passesThrough(cfg *Config, sizes []int32) bool {
	if len(cfg.Tiers) == 0 || len(sizes) == 0 || len(cfg.PFS.Curve) == 0 {
		return false
	}
	var sum float64
	for _, s := range sizes {
		sum += float64(s)
	}
	size := sum / float64(len(sizes))
	p, t := &cfg.PFS, cfg.Tiers[0]
	pfs := p.Latency + size/p.Curve[0].Rate
	if p.RequestSize > 0 {
		pfs += math.Ceil(size/float64(p.RequestSize)) * p.ReadLatency
	}
	return pfs <= passThroughBelow*(t.Latency+size/t.Bandwidth)
}

func infs(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = inf
	}
	return s
}

// at schedules an event of kind at t.
func (r *runner) at(t float64, kind uint8, a, b int) {
	r.seq++
	r.q.push(event{t: t, key: r.seq<<kindBits | uint64(kind), a: int32(a), b: int32(b)})
}

// waitAt has node's copy c on thread k, waiting for its holder since
// since, look again at t.
func (r *runner) waitAt(t float64, node int, c copyOf, k int, since float64) {
	*r.waitOn(node, k) = wait{c, since}
	r.at(t, evWait, node, k)
}

// waitOn is the copy that waits on node's thread k for its holder.
func (r *runner) waitOn(node, k int) *wait { return &r.waiting[node*len(r.nodes[node].free)+k] }

// run simulates every epoch.
func (r *runner) run() []EpochStats {
	r.startEpoch(0, 0)
	for {
		ev, ok := r.q.pop()
		if !ok {
			break
		}
		r.now = ev.t
		switch ev.kind() {
		case evRead:
			r.readOn(int(ev.a), ev.t)
		case evReady:
			r.batchReady(int(ev.a), int(ev.b), ev.t)
		case evCompute:
			r.computed(ev.t)
		case evCopy:
			r.copied(int(ev.a), int(ev.b), ev.t)
		case evWait:
			i, k := int(ev.a), int(ev.b)
			w := r.waitOn(i, k)
			r.awaitHolder(i, w.c, k, w.since, ev.t)
		case evPool:
			if ns := &r.nodes[ev.a]; ns.poolAt == ev.t {
				ns.poolAt = inf
				r.prefetch(int(ev.a), ev.t)
			}
		}
	}
	return r.Epochs
}

func (r *runner) startEpoch(e int, t float64) {
	r.e, r.epochStart, r.next = e, t, 0
	r.Epochs = append(r.Epochs, EpochStats{Epoch: e + 1, TierBytes: make([]int64, len(r.cfg.Tiers)),
		stalls: make([]float64, len(r.ranks))})
	r.cur = &r.Epochs[len(r.Epochs)-1]
	W, P := r.cfg.Loop.Workers, r.cfg.Loop.Prefetch
	for k := range r.ranks {
		rk := &r.ranks[k]
		rk.released, rk.barrier, rk.opened = true, t, -1
		rk.sent = min(P*W, r.nb)
		for b := range rk.ready {
			rk.ready[b] = inf
		}
		for w := range W {
			wk := &r.workers[k*W+w]
			*wk = workerState{next: int32(w)}
			if w < rk.sent {
				wk.busy = true
				r.at(t, evRead, k*W+w, 0)
			}
		}
	}
	for i := range r.nodes {
		r.prefetch(i, t)
	}
}

// readOn goes on reading worker a's batch at t: files from a node's
// tiers without a stop, a file from the PFS as an event of its own (the
// PFS is reserved in time order).
func (r *runner) readOn(a int, t float64) {
	W, R, B := r.cfg.Loop.Workers, r.cfg.RanksPerNode, r.cfg.Loop.Batch
	wk := &r.workers[a]
	if wk.inPFS {
		wk.inPFS = false
		r.gamma--
	}
	rank := a / W
	node := rank / R
	reads := r.j.rankReads(r.e, rank)
	b := int(wk.next)
	if wk.pos == 0 {
		wk.c = t
	}
	end := min((b+1)*B, r.j.k)
	for p := b*B + int(wk.pos); p < end; p++ {
		rd := reads[p*r.j.w]
		c, stop := r.read(node, rd.f, float64(rd.size), wk.c, t)
		if stop {
			wk.c = c
			r.at(c, evRead, a, 0)
			return
		}
		if c < 0 { // read the PFS now
			wk.inPFS = true
			r.gamma++
			c = -c
		}
		wk.c = c
		wk.pos++
		if r.peer { // only clairvoyant+peers asks (passed)
			rk := &r.ranks[rank]
			rk.opened = max(rk.opened, p)
		}
	}
	wk.pos = 0
	r.at(wk.c, evReady, a, b)
}

// read reads local file f of node, of size bytes, at c (now is the event's time): it
// returns when the read is done, or stop when the read must wait for its
// own event at c (it needs the PFS and c is later than now). A read of
// the PFS is returned negated.
func (r *runner) read(node int, f int32, size, c, now float64) (float64, bool) {
	pre := 0.0
	if r.cfg.Loop.PreprocessRate > 0 {
		pre = size / r.cfg.Loop.PreprocessRate
	}
	if r.direct {
		if r.perfect {
			return r.tierRead(0, c, size) + pre, false
		}
		if c > now {
			return c, true
		}
		return -(r.pfsReadParts(c, size, 1, r.endRequest(nil, nil, size)) + pre), false
	}
	ns := &r.nodes[node]
	fl := &ns.fs[f]
	var g int32 // asked only by hvac (see copyOf)
	if r.ownLand != nil {
		g = ns.files[f]
	}
	land, tier := fl.land(), fl.tier
	if r.ownLand != nil && int(fl.peer) == node {
		if own := r.ownLand[g]; own < land {
			land, tier = own, 0 // a copy this node made for another
		}
	}
	if land <= c+waitCap {
		done := r.tierRead(max(int(tier), 0), max(c, land), size)
		if tier < 0 && land != inf { // staged: dropped once read
			fl.setLand(inf)
			ns.stageUsed -= int64(size)
			if r.peer && int(fl.peer) == node {
				r.holdLand[ns.files[f]] = inf
			}
		}
		return done + pre, false
	}
	if c > now {
		return c, true
	}
	begin := c
	if r.copyOnRead && land == inf {
		done, ok := r.request(node, f, size, c)
		if ok {
			return done + pre, false
		}
		begin = done
	}
	done := r.pfsReadParts(begin, size, 1, r.endRequest(ns, fl, size))
	if r.copyOnRead {
		r.copyOnMiss(node, f, g, size, c, done)
	}
	return -(done + pre), false
}

// endRequest is how many requests a reader's read of the original of a
// file of size bytes sends after its bytes: 1, the read that returns 0,
// where the readers read to it (PFS.EndRequest) and the client keeps no
// page cache (one that does answers it from the file's size), but 0 for a
// reader that tees the file (fl, of node ns, has no copy and finds room):
// its descriptor answers that read itself (augur_fd_at_end).
func (r *runner) endRequest(ns *nodeState, fl *file, size float64) int {
	p := &r.cfg.PFS
	if !p.EndRequest || p.ClientCache {
		return 0
	}
	if r.copyOnRead && fl.land() == inf && r.tees(size) && r.roomIn(ns, int64(size)) >= 0 {
		return 0
	}
	return 1
}

func (r *runner) tierRead(t int, c, size float64) float64 {
	tier := r.cfg.Tiers[t]
	r.cur.TierBytes[t] += int64(size)
	return c + tier.Latency + size/tier.Bandwidth
}

// pfsReadParts reserves a read of size bytes of the PFS at c (now), in
// parts read at once (as many readers of the PFS, each part's requests
// one after another) and extra requests after them, and returns when it
// is done: the latency of its longest part and of the extra requests,
// then its bytes through the one pipe at the throughput of the readers
// there now.
func (r *runner) pfsReadParts(c, size float64, parts, extra int) float64 {
	p := &r.cfg.PFS
	lat := p.Latency + float64(extra)*p.ReadLatency
	if p.RequestSize > 0 {
		part := size
		if parts > 1 {
			part = math.Ceil(math.Ceil(size/float64(parts))/directAlign) * directAlign
		}
		lat += math.Ceil(part/float64(p.RequestSize)) * p.ReadLatency
	}
	start := max(c+lat, r.pfsFree)
	r.pfsFree = start + size/r.pfsRate(parts)
	r.cur.PFSBytes += int64(size)
	return r.pfsFree
}

// pfsRate is t(γ) for the readers in the PFS now and the n arriving.
func (r *runner) pfsRate(n int) float64 {
	curve := r.cfg.PFS.Curve
	r.settle()
	g := r.gamma + n
	if g <= curve[0].Readers {
		return curve[0].Rate
	}
	for i := 1; i < len(curve); i++ {
		if g <= curve[i].Readers {
			a, b := curve[i-1], curve[i]
			return a.Rate + (b.Rate-a.Rate)*float64(g-a.Readers)/float64(b.Readers-a.Readers)
		}
	}
	return curve[len(curve)-1].Rate
}

// netXfer books size bytes from node src to dst, to begin at t or
// later, on both nodes' links (the first gap both have) and returns when
// they have arrived. An empty file's copy takes the latency alone: no
// byte holds up a link (a link joins bookings back to back, so the
// instant between two is not a gap, see book).
func (r *runner) netXfer(src, dst int, t, size float64) float64 {
	d := size / r.cfg.Net.Bandwidth
	if d == 0 {
		return t + r.cfg.Net.Latency
	}
	out, in := &r.out[src], &r.in[dst]
	out.tidy(r.now)
	in.tidy(r.now)
	// The link in first: a node's prefetcher books its own ahead, and
	// that link holds it up more often than the one out of the node it
	// copies from. Done when the link out is free where the link in is.
	s := t + r.cfg.Net.Latency
	i, j := -1, -1
	for {
		s, j = in.fit(s, d, j)
		var o float64
		if o, i = out.fit(s, d, i); o == s {
			break
		}
		s = o
	}
	out.book(i, s, d)
	in.book(j, s, d)
	r.cur.PeerBytes += int64(size)
	return s + d
}

// batchReady hands worker a's batch b to its rank, and the worker its
// next batch if it was handed one.
func (r *runner) batchReady(a, b int, t float64) {
	W := r.cfg.Loop.Workers
	wk := &r.workers[a]
	if wk.inPFS {
		wk.inPFS = false
		r.gamma--
	}
	rank := a / W
	rk := &r.ranks[rank]
	rk.ready[b] = t
	wk.busy = false
	wk.next += int32(W)
	if int(wk.next) < rk.sent {
		wk.busy = true
		r.readOn(a, t)
	}
	if b == r.next && rk.released {
		r.step(rank, t)
	}
}

// step starts rank's next step at t: the wait since the barrier is its
// stall; a batch more goes to a worker; compute begins.
func (r *runner) step(rank int, t float64) {
	W, R := r.cfg.Loop.Workers, r.cfg.RanksPerNode
	rk := &r.ranks[rank]
	r.cur.stalls[rank] += t - rk.barrier
	rk.released = false
	if rk.sent < r.nb {
		a := rank*W + rk.sent%W
		if wk := &r.workers[a]; !wk.busy && int(wk.next) == rk.sent {
			wk.busy = true
			r.at(t, evRead, a, 0)
		}
		rk.sent++
	}
	c := r.cfg.Loop.Compute
	if r.cfg.Loop.ComputeRate > 0 {
		c += float64(r.j.batchBytes(r.e, r.next, rank)) / r.cfg.Loop.ComputeRate
	}
	r.at(t+c, evCompute, rank, 0)
	r.prefetch(rank/R, t)
}

// computed counts a rank at the step's barrier; the last one releases
// them all (DDP's all-reduce), and the last step ends the epoch.
func (r *runner) computed(t float64) {
	if r.arrivals++; r.arrivals < len(r.ranks) {
		return
	}
	r.arrivals = 0
	if r.next+1 == r.nb {
		r.endEpoch(t)
		return
	}
	r.next++
	for k := range r.ranks {
		rk := &r.ranks[k]
		rk.released, rk.barrier = true, t
		if rk.ready[r.next] <= t {
			r.step(k, t)
		}
	}
}

func (r *runner) endEpoch(t float64) {
	ep := r.cur
	ep.Seconds = t - r.epochStart
	for _, s := range ep.stalls {
		ep.Stall += s / float64(len(ep.stalls))
	}
	ep.stalls = nil
	if r.e+1 < r.cfg.Epochs {
		r.startEpoch(r.e+1, t)
	}
}
