package sim

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
func (r *runner) prefetch(i int, t float64) {
	switch r.pol {
	case "clairvoyant", "clairvoyant+peers", "staging":
	case "reactive", "hvac":
		r.copyQueued(i, t)
		return
	default:
		return
	}
	ns, no := &r.nodes[i], r.j.nodes[i]
	reading := r.readingAt(i)
	limit := reading + r.cfg.Prefetch.Lookahead*r.cfg.RanksPerNode
	for ns.pending < r.cfg.Prefetch.Pending && ns.q < len(ns.fetches) {
		slot := int(ns.fetches[ns.q])
		if slot >= limit {
			return
		}
		f := no.slots[slot]
		tier := ns.tier[f]
		if ns.land[f] != inf || (tier < 0 && slot < reading) {
			ns.q++
			continue
		}
		g := no.files[f]
		size := int64(r.j.ds.sizes[g])
		target := max(int(tier), 0)
		if tier < 0 && ns.stageUsed+size > r.j.stage {
			return
		}
		if ns.busy[target] >= r.cfg.Tiers[target].Threads {
			return
		}
		if tier < 0 {
			ns.stageUsed += size
		}
		if r.mustWait(i, g, t) {
			ns.busy[target]++
			ns.pending++
			ns.land[f] = queued
			r.awaitHolder(i, f, t, t)
			ns.q++
			continue
		}
		land := r.fetch(i, target, g, float64(size), t)
		ns.land[f] = land
		if r.peer && int(r.j.holder[g]) == i {
			r.holdLand[g] = land
		}
		ns.q++
	}
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

// mustWait says whether node i's copy of g must wait at t for its holder.
func (r *runner) mustWait(i int, g int32, t float64) bool {
	if !r.peer {
		return false
	}
	h, land := int(r.j.holder[g]), r.holdLand[g]
	return h >= 0 && h != i && land > t && (land != inf || r.e == 0)
}

// awaitHolder goes on with node i's waiting copy of local file f at t.
func (r *runner) awaitHolder(i int, f int32, since, t float64) {
	ns := &r.nodes[i]
	g := r.j.nodes[i].files[f]
	if r.mustWait(i, g, t) && t-since < holderWait {
		r.waitAt(t+holderPoll, i, f, since)
		return
	}
	target := max(int(ns.tier[f]), 0)
	ns.busy[target]--
	ns.pending--
	ns.land[f] = r.fetch(i, target, g, float64(r.j.ds.sizes[g]), t)
}

// readingAt is the read of node i's order its slowest rank is at.
func (r *runner) readingAt(i int) int {
	R := r.cfg.RanksPerNode
	least := r.j.k
	for k := i * R; k < (i+1)*R; k++ {
		least = min(least, r.ranks[k].next*r.cfg.Loop.Batch)
	}
	return (r.e*r.j.k + least) * R
}

// fetch makes a copy of dataset file g on node i in tier target, begun
// at t by one of its threads, and returns when it lands: from the node
// that holds it (clairvoyant+peers) once that node's copy has landed, from
// the node that owns it (hvac), else from the PFS.
func (r *runner) fetch(i, target int, g int32, size, t float64) float64 {
	ns := &r.nodes[i]
	ns.busy[target]++
	ns.pending++
	flag := 0
	var done float64
	switch src := r.source(i, g, size, t); {
	case src >= 0:
		done = r.netXfer(src, i, max(t, r.sourceLand(src, g)), size)
	default:
		r.gamma++
		flag = pfsFlag
		done = r.pfsRead(t, size)
	}
	land := done + size/r.cfg.Tiers[target].Bandwidth
	r.at(land, evCopy, i, target|flag)
	return land
}

// source is the node a copy of g for node i comes from, or -1 for the
// PFS. Under hvac the owner, asked for a file it has no copy of, makes
// one from the PFS at once if it has room (and keeps it), as augur's
// reactive owner does.
func (r *runner) source(i int, g int32, size, t float64) int {
	switch {
	case r.peer:
		if h := int(r.j.holder[g]); h >= 0 && h != i && r.holdLand[g] <= t {
			return h
		}
	case r.ownLand != nil:
		o := int(r.owner[g])
		if o == i {
			return -1
		}
		if r.ownLand[g] == inf {
			on := &r.nodes[o]
			t0 := r.roomIn(on, int64(size))
			if t0 < 0 {
				return -1
			}
			on.used[t0] += int64(size)
			r.ownLand[g] = r.pfsRead(t, size)
		}
		return o
	}
	return -1
}

func (r *runner) sourceLand(src int, g int32) float64 {
	if r.peer {
		return r.holdLand[g]
	}
	return r.ownLand[g]
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

// copied frees the thread of a landed copy and lets the pool go on.
func (r *runner) copied(i, b int, t float64) {
	ns := &r.nodes[i]
	ns.busy[b&0xff]--
	ns.pending--
	if b&pfsFlag != 0 {
		r.gamma--
	}
	r.prefetch(i, t)
}

// copyOnMiss is the reactive policy's copy of a file read from the PFS
// (its read begun at now, done at done) into the first tier with room, never evicting.
// When the client caches the PFS's pages and the copy is to come from the
// PFS, it rides the reader's pages and lands as the read ends; else it
// waits its turn in the node's queue.
func (r *runner) copyOnMiss(i int, f, g int32, size, now, done float64) {
	ns := &r.nodes[i]
	if ns.land[f] != inf {
		return
	}
	t := r.roomIn(ns, int64(size))
	if t < 0 {
		return
	}
	ns.used[t] += int64(size)
	ns.tier[f] = int8(t)
	fromPFS := r.ownLand == nil || int(r.owner[g]) == i
	if fromPFS && r.cfg.PFS.ClientCache {
		ns.land[f] = done + size/r.cfg.Tiers[t].Bandwidth
		r.owned(i, g, ns.land[f])
		return
	}
	ns.land[f] = queued
	ns.copyQ = append(ns.copyQ, f)
	r.copyQueued(i, now)
}

// owned records, under hvac, the owner's own copy of g.
func (r *runner) owned(i int, g int32, land float64) {
	if r.ownLand != nil && int(r.owner[g]) == i {
		r.ownLand[g] = min(r.ownLand[g], land)
	}
}

// copyQueued starts the reactive copies node i's threads can take at t,
// in the order of the queue.
func (r *runner) copyQueued(i int, t float64) {
	ns, no := &r.nodes[i], r.j.nodes[i]
	for ns.copyHead < len(ns.copyQ) {
		f := ns.copyQ[ns.copyHead]
		target := int(ns.tier[f])
		if ns.busy[target] >= r.cfg.Tiers[target].Threads {
			return
		}
		g := no.files[f]
		ns.land[f] = r.fetch(i, target, g, float64(r.j.ds.sizes[g]), t)
		r.owned(i, g, ns.land[f])
		ns.copyHead++
	}
	if ns.copyHead == len(ns.copyQ) {
		ns.copyQ, ns.copyHead = ns.copyQ[:0], 0
	}
}
