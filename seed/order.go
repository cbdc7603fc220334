package seed

import (
	"slices"
	"sync"
)

// An Order is one rank's reads in one epoch as a sequence that can also
// be searched: the dataset index read at each position, and where an
// index is read. A prefetcher follows a rank through it and, on each
// open, asks where the file opened was expected.
type Order interface {
	Len() int
	At(pos int) int  // the index read at pos, 0 <= pos < Len()
	Pos(idx int) int // the first position reading idx; -1 if none does
}

// Perm is the permutation a DistributedSampler draws in one epoch, and
// its inverse (made when first searched), at 4 bytes per sample each. Every rank of a job draws the
// same one (ranks differ only in the positions they read), so a node's
// ranks share it: the orders of all of them cost 8 bytes per sample, not
// 12 per rank as lists of indices and positions would. A Perm of an
// unshuffled sampler is the identity and holds nothing.
type Perm struct {
	n      int
	at     []int32 // nil: identity
	invert sync.Once
	pos    []int32 // at's inverse, made when first asked for
}

// PermKey names a Perm: samplers whose keys are equal draw the same
// permutation, whatever their seed, epoch, rank or dataset.
type PermKey struct {
	N       int
	Shuffle bool
	// Gen is the generator's seed, seed+epoch: only its low 32 bits reach
	// the engine.
	Gen       uint32
	InsideOut bool
}

func (p *Perm) atIdx(g int) int {
	if p.at == nil {
		return g
	}
	return int(p.at[g])
}

func (p *Perm) posOf(idx int) int {
	if p.at == nil {
		return idx
	}
	p.invert.Do(func() {
		p.pos = make([]int32, p.n)
		for g, idx := range p.at {
			p.pos[idx] = int32(g)
		}
	})
	return int(p.pos[idx])
}

// PermKey is the key of the permutation s draws in epoch e.
func (s *DistributedSampler) PermKey(e int) PermKey {
	checkEpoch(e)
	if !s.setEpoch {
		e = 0
	}
	if !s.shuffle {
		return PermKey{N: s.n}
	}
	return PermKey{N: s.n, Shuffle: true, Gen: uint32(uint64(s.seed) + uint64(e)), InsideOut: s.torch.insideOut(s.n)}
}

// Perm draws the permutation of epoch e, as every rank of s's sampler
// does.
func (s *DistributedSampler) Perm(e int) *Perm {
	k := s.PermKey(e)
	p := &Perm{n: s.n}
	if !k.Shuffle {
		return p
	}
	// seed + epoch wraps like the uint64 torch keeps; only the low 32
	// bits reach the engine, and those do not depend on the wrap.
	p.at = make([]int32, s.n)
	randpermInto(NewTorchGenerator(uint64(k.Gen)), p.at, s.torch)
	return p
}

// View is s's rank's order through p, which must be s's permutation of
// the epoch (Perm, or a Perm of an equal PermKey).
func (s *DistributedSampler) View(p *Perm) Order {
	return rankOrder{p: p, replicas: s.replicas, rank: s.rank, k: s.numSamples()}
}

// rankOrder is one rank's positions of a Perm: the padded (or, with
// drop_last, truncated) permutation of k·replicas positions, from rank on,
// every replicas-th. Padding repeats the permutation from its head as
// often as needed, so position g of the padded list is perm[g mod n].
type rankOrder struct {
	p              *Perm
	replicas, rank int
	k              int // numSamples
}

func (o rankOrder) Len() int { return o.k }

func (o rankOrder) At(j int) int { return o.p.atIdx((o.rank + j*o.replicas) % o.p.n) }

func (o rankOrder) Pos(idx int) int {
	if idx < 0 || idx >= o.p.n {
		return -1
	}
	for g := o.p.posOf(idx); g < o.k*o.replicas; g += o.p.n {
		if g%o.replicas == o.rank {
			return (g - o.rank) / o.replicas
		}
	}
	return -1
}

// ListOrder is the Order of an explicit sequence of indices below n
// (the orders of samplers other than DistributedSampler).
func ListOrder(seq []int, n int) Order {
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = -1
	}
	for k := len(seq) - 1; k >= 0; k-- {
		if i := seq[k]; i >= 0 && i < n {
			pos[i] = int32(k)
		}
	}
	return listOrder{seq: seq, pos: pos}
}

type listOrder struct {
	seq []int
	pos []int32
}

func (o listOrder) Len() int     { return len(o.seq) }
func (o listOrder) At(k int) int { return o.seq[k] }
func (o listOrder) Pos(i int) int {
	if i < 0 || i >= len(o.pos) {
		return -1
	}
	return int(o.pos[i])
}

// Indices is o as a list.
func Indices(o Order) []int {
	if l, ok := o.(listOrder); ok {
		return slices.Clone(l.seq)
	}
	out := make([]int, o.Len())
	for k := range out {
		out[k] = o.At(k)
	}
	return out
}
