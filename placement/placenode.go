// The clairvoyant policy's placement (PlaceNode) and holders' rule
// (Holders) for callers that have orders and sizes but no walked
// directory: augur sim (package sim) runs jobs of up to a thousand nodes
// over synthetic datasets, and must place their files by this code, not
// a copy of it. PlaceNodes (jobplan.go) does the same for a Prediction.

package placement

import (
	"slices"

	"github.com/augur-hpc/augur/seed"
)

// PlaceNode places one node's files as the leader of that node does:
// the staging budget (a.Stage, by default an eighth of the first tier)
// kept out of caps[0], the files ranked by how often the node's ranks
// read them over the horizon (a.Epochs, DefaultHorizon when 0), equal
// counts in first-access order, those holds says the node holds for a
// job of several nodes first (nil: a node alone), then each given the
// fastest tier with room. The files are numbered 0..n-1 in the caller's
// own numbering (a node's files only, if it likes: placement costs 13
// bytes per file numbered); reads(e) is the orders of the node's ranks in
// epoch e over that numbering; sizes are by that numbering too (-1: never
// placed). caps is not modified. It returns a placement for each of
// holds (the reads counted once for all) and the staging budget.
func PlaceNode(n int, a Access, caps, sizes []int64, reads func(e int) []seed.Order, holds ...func(f int32) bool) ([]Placement, int64) {
	caps = slices.Clone(caps)
	stage, horizon := Params(a, caps)
	pp := NewPlacer(n, caps, horizon, func(e int) []ReadSeq {
		var seqs []ReadSeq
		for _, o := range reads(e) {
			seqs = append(seqs, ReadSeq{Order: o})
		}
		return seqs
	})
	out := make([]Placement, len(holds))
	for k, h := range holds {
		q := pp
		if k < len(holds)-1 {
			q = pp.clone()
		}
		if h != nil {
			q.Prefer(h)
		}
		q.Advance(sizes)
		out[k] = q.Placement
	}
	return out, stage
}

// Holders is the holders' rule of a job of several nodes (shim/holders.go):
// the node that holds each of n files is the one whose rank reads it
// first in the epoch whose orders order(r) gives for each of w ranks,
// ranks laid out in blocks of w/nodes per node as the launchers do; -1
// for a file no rank reads. pos is where in that rank's order it reads
// it: another node's copy waits until that node's ranks have passed it
// (shim's clairvoyant.holderOf). It keeps 6 bytes per file.
func Holders(w, nodes, n int, order func(r int) seed.Order) (node []int16, pos []int32) {
	per := w / nodes
	node, pos = make([]int16, n), make([]int32, n)
	for i := range node {
		node[i] = -1
	}
	FirstReaders(w, n, order, func(idx, r, k int) { node[idx], pos[idx] = int16(r/per), int32(k) })
	return node, pos
}
