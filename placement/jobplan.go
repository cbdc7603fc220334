// A job of several nodes with peers placed as its leaders place it
// (PlaceNodes, augur plan --nodes): each node's placement, and what each
// epoch is expected to read from the shared filesystem and from peers.

package placement

import (
	"fmt"
	"slices"

	"github.com/augur-hpc/augur/seed"
)

// NodePlan is one node's part of a job of several nodes with peers, as
// its leader places the files (augur plan --nodes).
type NodePlan struct {
	Node      int
	Ranks     []int
	Placement       // of the dataset's indices
	Holds     int   // files this node's ranks read first in the job
	HoldBytes int64 // their bytes
}

// JobPlan is the placement of every node of a job and what each epoch
// is expected to read from the shared filesystem and from peers.
type JobPlan struct {
	Nodes   []NodePlan
	Stage   int64 // each node's staging budget
	Horizon int
	Epochs  []JobEpoch
}

// JobEpoch is what one epoch of the job reads, by source.
type JobEpoch struct {
	Epoch int `json:"epoch"` // from 1
	// Without peers every node reads from the shared filesystem what
	// its tiers do not hold; with them, only what no node holds.
	PFSBytes      int64 `json:"expected_pfs_bytes_without_peers"`
	PFSBytesPeers int64 `json:"expected_pfs_bytes_with_peers"`
	PeerBytes     int64 `json:"expected_peer_bytes"`
}

// PlaceNodes places the dataset on each of nodes nodes whose tiers have
// capacities caps (every node alike), the ranks of the configured world
// size laid out in blocks as the launchers do, as the leaders of a job
// with peers place it (shim/holders.go): each node's placement takes the
// files its ranks read first in the job before any other. It needs the
// DistributedSampler. It keeps a byte per file per node.
func (p *Prediction) PlaceNodes(a Access, sizes, caps []int64, nodes int) (*JobPlan, error) {
	w := a.WorldSize
	if a.Sampler != seed.KindDistributed {
		return nil, fmt.Errorf("a plan of several nodes needs the DistributedSampler, not %q", a.Sampler)
	}
	if nodes < 1 || w < nodes || w%nodes != 0 {
		return nil, fmt.Errorf("world size %d is not a whole number of ranks on each of %d nodes", w, nodes)
	}
	per := w / nodes
	samplers := make([]seed.Sampler, w)
	for r := range samplers {
		spec := p.spec
		spec.Rank = r
		s, err := seed.New(spec)
		if err != nil {
			return nil, fmt.Errorf("sampler: %w", err)
		}
		samplers[r] = s
	}
	reads := func(r, e int) seed.Order { return p.perms.OrderOf(samplers[r], e, p.Len()) }
	stage, horizon := Params(a, slices.Clone(caps))
	jp := &JobPlan{Stage: stage, Horizon: horizon}
	first := make([]int16, p.Len())
	for i := range first {
		first[i] = -1 // read by no rank (DropLast)
	}
	FirstReaders(w, p.Len(), func(r int) seed.Order { return reads(r, 0) }, func(idx, r, _ int) { first[idx] = int16(r / per) })
	for n := range nodes {
		np := NodePlan{Node: n}
		for r := n * per; r < (n+1)*per; r++ {
			np.Ranks = append(np.Ranks, r)
		}
		nc := slices.Clone(caps)
		Params(a, nc)
		pp := NewPlacer(p.Len(), nc, horizon, func(e int) []ReadSeq {
			var seqs []ReadSeq
			for _, r := range np.Ranks {
				seqs = append(seqs, ReadSeq{Order: reads(r, e)})
			}
			return seqs
		})
		pp.Prefer(func(f int32) bool { return int(first[f]) == n })
		pp.Advance(sizes)
		np.Placement = pp.Placement
		for idx, h := range first {
			if int(h) == n {
				np.Holds++
				np.HoldBytes += max(sizes[idx], 0)
			}
		}
		jp.Nodes = append(jp.Nodes, np)
	}
	jp.Epochs = jp.expect(sizes, reads, min(horizon, 3))
	return jp, nil
}

// expect counts what each of the first epochs reads from the shared
// filesystem and from peers. The first epoch reads every file once from
// the shared filesystem with peers (its first reader's node does), and
// every file each node reads without; later epochs read what the
// reading node does not hold, from a node that does if any (with
// peers), else from the shared filesystem.
func (jp *JobPlan) expect(sizes []int64, reads func(r, e int) seed.Order, epochs int) []JobEpoch {
	heldAnywhere := make([]bool, len(sizes))
	for _, np := range jp.Nodes {
		for idx, t := range np.Tier {
			if t >= 0 {
				heldAnywhere[idx] = true
			}
		}
	}
	var out []JobEpoch
	for e := range epochs {
		je := JobEpoch{Epoch: e + 1}
		read := make([]bool, len(sizes)) // by anyone this epoch
		for _, np := range jp.Nodes {
			mine := make([]bool, len(sizes)) // by this node this epoch
			for _, r := range np.Ranks {
				o := reads(r, e)
				for k := range o.Len() {
					idx := o.At(k)
					size := max(sizes[idx], 0)
					if mine[idx] {
						continue // a copy staged for one read serves the node's other ranks too
					}
					mine[idx] = true
					switch {
					case e == 0:
						je.PFSBytes += size
						if !read[idx] {
							je.PFSBytesPeers += size
						}
					case np.Tier[idx] >= 0:
					case heldAnywhere[idx]:
						je.PFSBytes += size
						je.PeerBytes += size
					default:
						je.PFSBytes += size
						je.PFSBytesPeers += size
					}
					read[idx] = true
				}
			}
		}
		out = append(out, je)
	}
	return out
}

// FirstReaders finds, for each index w ranks read in an epoch (order(r)
// being rank r's), the rank that reads it first, in the order of
// positions and then ranks (the ranks read in step), and calls
// first(idx, rank, position) once for it.
func FirstReaders(w, n int, order func(r int) seed.Order, first func(idx, rank, pos int)) {
	orders := make([]seed.Order, w)
	longest := 0
	for r := range orders {
		orders[r] = order(r)
		longest = max(longest, orders[r].Len())
	}
	met := make([]uint64, (n+63)/64)
	for k := range longest {
		for r, o := range orders {
			if k >= o.Len() {
				continue
			}
			idx := o.At(k)
			if bit := uint64(1) << (idx % 64); met[idx/64]&bit == 0 {
				met[idx/64] |= bit
				first(idx, r, k)
			}
		}
	}
}
