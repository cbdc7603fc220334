// NoPFS's placement (Placer): the files ranked by how often the node's
// ranks read them over the horizon, equal counts in first-access
// order, and each given the fastest tier with room as its size becomes
// known.

package placement

import (
	"slices"

	"github.com/augur-hpc/augur/seed"
)

// Placement is what goes where: NoPFS's rule.
type Placement struct {
	Tier  []int8  // per file: the tier assigned, or -1 (staged when read)
	Freq  []int32 // per file: reads by this node's ranks over the horizon
	Bytes []int64 // per tier: bytes assigned
	Files []int   // per tier: files assigned
	// Reads is the node's reads per epoch (all ranks), for expected hits.
	Reads int
}

// Placer places the files in ranking order — most often read first,
// equal counts in order of first access — as their sizes become known:
// a file gets the fastest tier with room once every file ranked before
// it has been placed, so placing as sizes arrive, in any order, ends
// where placing with every size known does. It keeps 13 bytes per file.
type Placer struct {
	Placement
	capacities []int64
	ranking    []int32 // the files read, in placement order
	pos        []int32 // per file: its place in ranking, -1 if never read
	next       int     // ranking[:next] are placed
}

// Ranking is the files read, in placement order. It is pp's own: the
// caller must not modify it, and Keep and Prefer replace it.
func (pp *Placer) Ranking() []int32 { return pp.ranking }

// Rank is file f's place in the ranking, -1 for a file never read.
func (pp *Placer) Rank(f int) int { return int(pp.pos[f]) }

// Placed is how many files of the ranking are placed: Advance places
// them in ranking order, up to the first whose size is not known.
func (pp *Placer) Placed() int { return pp.next }

// clone is a copy of pp, nothing placed yet, whose preferring and
// placing leave pp as it is (the counts and the ranking they replace are
// shared).
func (pp *Placer) clone() *Placer {
	c := *pp
	c.pos = slices.Clone(pp.pos)
	c.Tier = slices.Clone(pp.Tier)
	c.Bytes = slices.Clone(pp.Bytes)
	c.Files = slices.Clone(pp.Files)
	return &c
}

// ReadSeq is the files one rank reads in one epoch: its order of dataset
// indices, and the file of each (nil: the index is the file).
type ReadSeq struct {
	Order seed.Order
	File  func(idx int) int
}

// NewPlacer ranks n files by the reads of horizon epochs, reads(e) being
// the sequences the ranks read in the e-th (from 0).
func NewPlacer(n int, capacities []int64, horizon int, reads func(e int) []ReadSeq) *Placer {
	pp := &Placer{capacities: capacities, pos: make([]int32, n),
		Placement: Placement{Tier: make([]int8, n), Freq: make([]int32, n),
			Bytes: make([]int64, len(capacities)), Files: make([]int, len(capacities))}}
	// The ranks read in step: visiting the epochs' positions in order,
	// every rank's at each, meets the files in order of first access,
	// whichever rank reads them.
	met := make([]int32, 0, n)
	var lens []int
	for e := 0; e < horizon; e++ {
		seqs := reads(e)
		longest := 0
		lens = lens[:0]
		for _, s := range seqs {
			n := s.Order.Len()
			lens = append(lens, n)
			longest = max(longest, n)
			if e == 0 {
				pp.Reads += n
			}
		}
		for k := 0; k < longest; k++ {
			for x, s := range seqs {
				if k >= lens[x] {
					continue
				}
				f := s.Order.At(k)
				if s.File != nil {
					f = s.File(f)
				}
				if pp.Freq[f] == 0 {
					met = append(met, int32(f))
				}
				pp.Freq[f]++
			}
		}
	}
	pp.ranking = byFrequency(met, pp.Freq)
	for i := range pp.Tier {
		pp.Tier[i], pp.pos[i] = -1, -1
	}
	for k, i := range pp.ranking {
		pp.pos[i] = int32(k)
	}
	return pp
}

// Keep ranks, among files read equally often, those a tier already holds
// first, the fastest tier's first, before anything is placed, so that a
// plan made again for tiers of another room keeps the copies the last
// one made (shim's clairvoyant.resize). tier(f) is the tier holding f, or -1;
// tiers is how many there are. Stable.
func (pp *Placer) Keep(tier func(f int32) int, tiers int) {
	var most int32
	for _, f := range pp.ranking {
		most = max(most, pp.Freq[f])
	}
	key := func(f int32) int {
		t := tier(f)
		if t < 0 || t >= tiers {
			t = tiers
		}
		return int(most-pp.Freq[f])*(tiers+1) + t
	}
	start := make([]int, int(most+1)*(tiers+1)+1)
	for _, f := range pp.ranking {
		start[key(f)+1]++
	}
	for k := 1; k < len(start); k++ {
		start[k] += start[k-1]
	}
	out := make([]int32, len(pp.ranking))
	for _, f := range pp.ranking {
		k := &start[key(f)]
		out[*k] = f
		*k++
	}
	pp.ranking = out
	for k, f := range out {
		pp.pos[f] = int32(k)
	}
}

// Prefer puts the files first says at the front of the ranking before
// anything is placed: a node of a job of several places the files it
// holds for the job (shim/holders.go) before any other, so that the nodes'
// tiers hold every file once before any twice. Those its own ranks read
// within the horizon come first, in ranking order, then those it holds
// for the other nodes only (by file): without them the node would drop,
// once its own ranks are done with them, copies the others still ask for.
func (pp *Placer) Prefer(first func(f int32) bool) {
	is := make([]bool, len(pp.pos)) // first, asked once a file
	for f := range is {
		is[f] = first(int32(f))
	}
	out := make([]int32, 0, len(pp.ranking))
	for _, f := range pp.ranking {
		if is[f] {
			out = append(out, f)
		}
	}
	for f, k := range pp.pos {
		if k < 0 && is[f] {
			out = append(out, int32(f))
		}
	}
	for _, f := range pp.ranking {
		if !is[f] {
			out = append(out, f)
		}
	}
	pp.ranking = out
	for k, f := range out {
		pp.pos[f] = int32(k)
	}
}

// byFrequency sorts files, met in order of first access, most often read
// first and stably (a counting sort: the counts are small), in place.
func byFrequency(met []int32, freq []int32) []int32 {
	var most int32
	for _, f := range met {
		most = max(most, freq[f])
	}
	start := make([]int, most+2) // start[most-c]: where count c begins
	for _, f := range met {
		start[most-freq[f]+1]++
	}
	for c := 1; c < len(start); c++ {
		start[c] += start[c-1]
	}
	out := make([]int32, len(met))
	for _, f := range met {
		k := &start[most-freq[f]]
		out[*k] = f
		*k++
	}
	return out
}

// Staged is the share of the files read that the placement keeps in no
// tier, which are staged for each read; 1 until every file read is
// placed (the share is not known yet: staging may need all of it).
func (pp *Placer) Staged() float64 {
	if len(pp.ranking) == 0 || pp.next < len(pp.ranking) {
		return 1
	}
	kept := 0
	for _, n := range pp.Files {
		kept += n
	}
	return float64(len(pp.ranking)-kept) / float64(len(pp.ranking))
}

// Advance places the files of the ranking whose sizes are known, up to
// the first one not stat'ed yet, and reports how many it placed.
func (pp *Placer) Advance(sizes []int64) int {
	from := pp.next
	for ; pp.next < len(pp.ranking); pp.next++ {
		i := int(pp.ranking[pp.next])
		if sizes[i] == UnknownSize {
			break
		}
		if sizes[i] < 0 {
			continue
		}
		for t := range pp.capacities {
			if pp.Bytes[t]+sizes[i] <= pp.capacities[t] {
				pp.Tier[i] = int8(t)
				pp.Bytes[t] += sizes[i]
				pp.Files[t]++
				break
			}
		}
	}
	return pp.next - from
}
