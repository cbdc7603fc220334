package shim

import (
	"context"

	"github.com/augur-hpc/augur/placement"
	"github.com/augur-hpc/augur/seed"
)

// Holders: in a job of several nodes, every leader knows which node
// holds each file without asking, from the plan (NoPFS). The node that
// holds a file is the one whose rank reads it first in the job: it reads
// it from the shared filesystem anyway, so the job's first epoch reads
// every file once, and its placement keeps the files it reads first
// before any other (placement.Placer.Prefer), so that the nodes' tiers hold every
// file once before any file twice. Which node runs which rank is the
// launchers' rule (torchrun and SLURM's block distribution): node i
// runs ranks i*W/N to (i+1)*W/N-1 of W.

// holdAt says where a file is first read in the job: by which node, in
// which holding (clairvoyant.holdBy) and at which position of the
// orders of its epoch.
type holdAt struct {
	node int16 // -1: not known
	by   int16
	pos  int32
}

// holding is the first epoch of one dataset's DistributedSampler in the
// job, from which the holders of its files were found.
type holding struct {
	ds    *seed.Dataset
	key   cursorKey // of the sampler, rank -1
	epoch int
}

// holdFor finds the holder of every file of cur's dataset from the
// orders of every rank of cur's sampler in cur's epoch, unless known
// from that sampler already. A rank that is not this node's by the
// launchers' rule is said once, and the other nodes' copies of that
// dataset are then not asked for.
//
// Preconditions: c.mu is held, or c is not started; c.l.peers is not nil.
func (c *clairvoyant) holdFor(cur *cursor) {
	me, nodes := c.l.peers.cfg.Node, c.l.peers.cfg.Nodes
	key := cur.key
	key.rank = -1
	by := -1
	for i, h := range c.holdBy {
		switch {
		case h.ds == cur.ds && h.key == key:
			return
		case h.ds == cur.ds:
			by = i // another sampler of the dataset: it is the job's now
		}
	}
	w := key.replicas
	if w < nodes || w%nodes != 0 || cur.key.rank/(w/nodes) != me {
		if msg := "peers:" + cur.ds.Dir; !c.warned[msg] {
			c.warned[msg] = true
			c.l.log.Warn().Msgf("peers: rank %d of %d is not one of node %d's of %d by the launchers' rule (%d consecutive ranks per node); "+
				"the other nodes' copies of %s/%s are not asked for", cur.key.rank, w, me, nodes, max(w/nodes, 1), c.cat.Root, cur.ds.Dir)
		}
		return
	}
	samplers := make([]seed.Sampler, w)
	for r := range samplers {
		f := cur.found
		f.Rank = r
		s, err := c.distributed(cur.ds, f)
		if err != nil {
			return
		}
		samplers[r] = s
	}
	if c.hold == nil {
		c.hold = make([]holdAt, c.cat.NumFiles())
		for i := range c.hold {
			c.hold[i].node = -1
		}
	}
	h := holding{cur.ds, key, cur.epoch}
	if by < 0 {
		by = len(c.holdBy)
		c.holdBy = append(c.holdBy, h)
	} else {
		c.holdBy[by] = h
		for i := range cur.ds.Len() {
			c.hold[cur.ds.File(i)].node = -1
		}
	}
	per := w / nodes
	placement.FirstReaders(w, cur.ds.Len(), func(r int) seed.Order { return cur.perms.OrderOf(samplers[r], cur.epoch, cur.ds.Len()) },
		func(idx, r, k int) {
			c.hold[cur.ds.File(idx)] = holdAt{node: int16(r / per), by: int16(by), pos: int32(k)}
		})
}

// holderOf names the node that holds path's copy and says whether it
// should have it by now: this node's ranks, which read in step with
// that node's, have passed the place where that node's rank read it; and
// whether they have begun to read its dataset. It is the copy pool's view
// (peering.Fill), so it takes c.mu.
func (c *clairvoyant) holderOf(path string) (int, readiness) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.cat.Lookup(path)
	if !ok || c.hold == nil || c.hold[f].node < 0 {
		return -1, nil
	}
	at := c.hold[f]
	h := c.holdBy[at.by]
	return int(at.node), func() (ready, begun bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, cur := range c.cursors {
			if cur.ds == h.ds {
				ready = ready || cur.epoch > h.epoch || (cur.epoch == h.epoch && cur.pos > int(at.pos))
				begun = begun || cur.epoch > 0 || cur.pos > 0
			}
		}
		return ready, begun
	}
}

// awaitHeld is the server's copy on demand under the clairvoyant policy:
// another node asks for a file the moment its rank, in step with this
// node's, has passed the read of it here, which may be before this
// node's copy of it has landed. A copy of a file this node holds that is
// queued or on its way is waited for, within ctx; nothing else is copied
// for the asker, as the plan decides what this node holds (its ranks
// read those files anyway).
func (c *clairvoyant) awaitHeld(ctx context.Context, path string, size, mtime int64) bool {
	c.mu.Lock()
	f, ok := c.cat.Lookup(path)
	if !ok || c.hold == nil || !c.mine(int32(f)) || !c.pending[f] {
		c.mu.Unlock()
		return false
	}
	w := c.react.waits.add(path) // under c.mu: done settles it under c.mu too
	c.mu.Unlock()
	return c.react.waits.wait(ctx, path, w)
}

// mine says whether this node holds file f by the holders' rule.
//
// Preconditions: c.mu is held; c.hold is not nil.
func (c *clairvoyant) mine(f int32) bool {
	return int(c.hold[f].node) == c.l.peers.cfg.Node
}
