package seed

import (
	"fmt"
	"slices"
	"sync"
)

// Sampler is the access order of one rank: the dataset indices it reads in
// epoch e (counted from 0), in the order it reads them.
//
// Epoch is a pure function of e: the same e always gives the same order,
// whatever was asked before. The caller owns the returned slice.
// Implementations are safe for concurrent use. e < 0 panics.
type Sampler interface {
	Epoch(e int) []int
}

var (
	_ Sampler = (*SequentialSampler)(nil)
	_ Sampler = (*DistributedSampler)(nil)
	_ Sampler = (*RandomSampler)(nil)
	_ Sampler = (*NumpySampler)(nil)
	_ Sampler = (*OrderFile)(nil)
)

func checkEpoch(e int) {
	if e < 0 {
		panic(fmt.Sprintf("seed: negative epoch %d", e))
	}
}

// arange returns [0, 1, ..., n-1].
func arange(n int) []int {
	a := make([]int, n)
	for i := range a {
		a[i] = i
	}
	return a
}

// SequentialSampler is torch.utils.data.SequentialSampler (DataLoader with
// shuffle=False): every epoch reads 0..n-1 in order. New builds it.
type SequentialSampler struct {
	n int
}

// Epoch returns 0..n-1.
func (s *SequentialSampler) Epoch(e int) []int {
	checkEpoch(e)
	return arange(s.n)
}

// DistributedSampler is torch.utils.data.DistributedSampler as one rank sees
// it after sampler.set_epoch(e): a permutation from a fresh generator seeded
// with seed+e, padded by repeating its head (or truncated when drop_last) to
// a multiple of the number of replicas, then every replicas-th index from
// rank on. New builds it.
type DistributedSampler struct {
	n, replicas, rank int
	shuffle, dropLast bool
	setEpoch          bool // false: the script never calls set_epoch
	seed              int64
	torch             TorchVersion
}

// numSamples is DistributedSampler.num_samples: how many indices each rank
// reads per epoch.
func (s *DistributedSampler) numSamples() int {
	if s.dropLast && s.n%s.replicas != 0 {
		// math.ceil((n - R) / R) = ceil(n/R) - 1 = floor(n/R) when R
		// does not divide n; 0 when n < R.
		return s.n / s.replicas
	}
	return (s.n + s.replicas - 1) / s.replicas
}

// Epoch returns the indices rank reads in epoch e.
func (s *DistributedSampler) Epoch(e int) []int { return Indices(s.View(s.Perm(e))) }

// Generator modes of a RandomSampler: which torch.Generator it draws from.
const (
	// GeneratorGlobal: DataLoader(shuffle=True) or RandomSampler(dataset)
	// without generator, after torch.manual_seed(seed). Each epoch the
	// DataLoader iterator draws its base seed from the default generator,
	// then the sampler draws a seed from it and permutes with a fresh
	// generator seeded with that.
	GeneratorGlobal = "global"
	// GeneratorLoader: DataLoader(shuffle=True, generator=g) with
	// g.manual_seed(seed). The base seed and the permutations all come from
	// g, which runs on across epochs.
	GeneratorLoader = "loader"
	// GeneratorSampler: DataLoader(sampler=RandomSampler(dataset,
	// generator=g)) with g.manual_seed(seed); the base seed comes from the
	// default generator and does not touch g.
	GeneratorSampler = "sampler"
)

// RandomSampler is torch.utils.data.RandomSampler (replacement=False) inside
// a DataLoader that runs every epoch to the end, the common training loop:
//
//	torch.manual_seed(seed)
//	loader = DataLoader(dataset, shuffle=True, ...)
//	for epoch in range(E):
//	    for batch in loader: ...
//
// When its generator runs on across epochs, the state at the start of each
// epoch is kept once computed (2.5 KiB per epoch), so asking for epoch e
// costs one epoch's work after the first time. New builds it.
type RandomSampler struct {
	n, numSamples int
	mode          string
	persistent    bool // persistent_workers: the base seed is drawn only once
	torch         TorchVersion
	chain         *chain[TorchGenerator]
}

func newRandomSampler(n, numSamples int, mode string, persistent bool, seed int64, v TorchVersion) *RandomSampler {
	s := &RandomSampler{n: n, numSamples: numSamples, mode: mode, persistent: persistent, torch: v}
	s.chain = newChain(*NewTorchGenerator(uint64(seed)), s.play)
	return s
}

// Epoch returns the indices read in epoch e.
func (s *RandomSampler) Epoch(e int) []int {
	checkEpoch(e)
	return s.chain.epoch(e)
}

// play runs epoch e on g, the generator that carries over between epochs,
// and returns the order if want is set.
func (s *RandomSampler) play(g *TorchGenerator, e int, want bool) []int {
	// _BaseDataLoaderIter.__init__ draws the base seed for the workers
	// from loader.generator (the default one when None) on every new
	// iterator; with persistent workers the iterator is made once and
	// only reset afterwards.
	if s.mode != GeneratorSampler && (e == 0 || !s.persistent) {
		g.RandomInt64()
	}
	if s.mode == GeneratorGlobal {
		// RandomSampler.__iter__ without generator: a fresh generator
		// seeded from the default one. Nothing it draws carries over.
		seed := g.RandomInt64()
		if !want {
			return nil
		}
		return s.draw(NewTorchGenerator(uint64(seed)), true)
	}
	return s.draw(g, want)
}

// draw is the body of RandomSampler.__iter__ without replacement: num//n
// whole permutations, then one more permutation cut to num%n. That last one
// is drawn even when num%n == 0, when the epoch ends and the generator asks
// for the element after the last; it shifts a shared generator by a whole
// permutation per epoch.
func (s *RandomSampler) draw(g *TorchGenerator, want bool) []int {
	if !want {
		g.skip((s.numSamples/s.n + 1) * randpermDraws(s.n, s.torch))
		return nil
	}
	out := make([]int, 0, s.numSamples)
	for k := 0; k < s.numSamples/s.n; k++ {
		out = append(out, g.Randperm(s.n, s.torch)...)
	}
	if rest := s.numSamples % s.n; rest > 0 {
		out = append(out, g.Randperm(s.n, s.torch)[:rest]...)
	} else {
		// The chain does not keep g after an epoch it returns, but g
		// stays exact for any caller that does.
		g.skip(randpermDraws(s.n, s.torch))
	}
	return out
}

// NumpySampler is a loader that shuffles with numpy: each epoch reads
// permutation(n) of numpy.random.default_rng (PCG64) or of the legacy
// RandomState (MT19937, also np.random.seed + np.random.permutation).
// Either one generator is seeded once and draws one permutation per epoch,
// or (reseed) a new generator is seeded with seed+epoch each epoch. With
// several replicas a rank reads perm[rank::replicas]. New builds it.
type NumpySampler struct {
	n, replicas, rank int
	legacy, reseed    bool
	seed              int64
	chain             *chain[numpyState]
}

// numpyState is one numpy generator, legacy or not, as a copyable value.
type numpyState struct {
	legacy bool
	rs     NumpyRandomState
	gen    NumpyGenerator
}

func newNumpyState(legacy bool, seed uint64) numpyState {
	if legacy {
		return numpyState{legacy: true, rs: *NewNumpyRandomState(uint32(seed))}
	}
	return numpyState{gen: *NewNumpyGenerator(seed)}
}

func (st *numpyState) permutation(n int) []int {
	if st.legacy {
		return st.rs.Permutation(n)
	}
	return st.gen.Permutation(n)
}

func newNumpySampler(n, replicas, rank int, legacy, reseed bool, seed int64) *NumpySampler {
	s := &NumpySampler{n: n, replicas: replicas, rank: rank, legacy: legacy, reseed: reseed, seed: seed}
	s.chain = newChain(newNumpyState(legacy, uint64(seed)),
		func(st *numpyState, _ int, _ bool) []int { return st.permutation(n) })
	return s
}

// Epoch returns the indices rank reads in epoch e.
func (s *NumpySampler) Epoch(e int) []int {
	checkEpoch(e)
	var perm []int
	if s.reseed {
		st := newNumpyState(s.legacy, uint64(s.seed)+uint64(e))
		perm = st.permutation(s.n)
	} else {
		perm = s.chain.epoch(e)
	}
	if s.replicas == 1 {
		return perm
	}
	out := make([]int, 0, len(perm)/s.replicas+1)
	for p := s.rank; p < len(perm); p += s.replicas {
		out = append(out, perm[p])
	}
	return out
}

// chain replays a generator that runs on from epoch to epoch. starts[e] is
// the generator state at the start of epoch e; play runs one epoch from a
// state, advancing it, and returns the order when asked to.
type chain[S any] struct {
	play func(s *S, e int, want bool) []int

	mu     sync.Mutex
	starts []S // guarded by mu; never empty
}

func newChain[S any](initial S, play func(s *S, e int, want bool) []int) *chain[S] {
	return &chain[S]{play: play, starts: []S{initial}}
}

// epoch returns the order of epoch e, playing (without keeping the orders)
// the epochs before it that were not played yet.
func (c *chain[S]) epoch(e int) []int {
	c.mu.Lock()
	for len(c.starts) <= e {
		last := len(c.starts) - 1
		s := c.starts[last]
		c.play(&s, last, false)
		c.starts = append(c.starts, s)
	}
	s := c.starts[e]
	c.mu.Unlock()
	return c.play(&s, e, true)
}

// OrderFile is an access order written down by hand or recorded from any
// other framework (see ReadOrder for the format). An epoch past the last one
// in the file repeats the file from its first epoch. ReadOrder and New
// build it.
type OrderFile struct {
	epochs [][]int // never empty
}

// Epoch returns the indices of epoch e mod the number of epochs in the file.
func (f *OrderFile) Epoch(e int) []int {
	checkEpoch(e)
	return slices.Clone(f.epochs[e%len(f.epochs)])
}

// Epochs is the number of epochs written in the file.
func (f *OrderFile) Epochs() int { return len(f.epochs) }
