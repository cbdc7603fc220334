package seed

import "math/bits"

// bitSource is numpy's bitgen_t as the shuffle sees it: the next 32 or 64
// random bits.
type bitSource interface {
	next32() uint32
	next64() uint64
}

// NumpyRandomState is numpy.random.RandomState: the legacy generator, an
// MT19937 seeded the way numpy 1.17+ (and randomkit before it) seeds it.
// It is not safe for concurrent use; copying it forks the stream.
type NumpyRandomState struct {
	mt mt19937
}

// NewNumpyRandomState returns RandomState(seed) for an integer seed, which
// numpy limits to 0 ≤ seed < 2**32 and feeds to init_genrand.
func NewNumpyRandomState(seed uint32) *NumpyRandomState {
	r := &NumpyRandomState{}
	r.mt.seedGenrand(seed)
	return r
}

// NewNumpyRandomStateArray returns RandomState(key) for a non-empty
// sequence of integers, which numpy feeds to init_by_array.
// An empty key panics: numpy refuses it too.
func NewNumpyRandomStateArray(key []uint32) *NumpyRandomState {
	if len(key) == 0 {
		panic("seed: RandomState with an empty key")
	}
	r := &NumpyRandomState{}
	r.mt.seedByArray(key)
	return r
}

func (r *NumpyRandomState) next32() uint32 { return r.mt.next() }

// next64 is mt19937_next64: the first output is the high half.
func (r *NumpyRandomState) next64() uint64 {
	hi := uint64(r.mt.next())
	return hi<<32 | uint64(r.mt.next())
}

// Permutation is RandomState.permutation(n): np.arange(n) shuffled in place.
func (r *NumpyRandomState) Permutation(n int) []int { return numpyPermutation(r, n) }

// NumpyGenerator is numpy.random.default_rng(seed): a Generator over PCG64
// seeded through SeedSequence. It is not safe for concurrent use; copying it
// forks the stream.
type NumpyGenerator struct {
	pcg pcg64
}

// NewNumpyGenerator returns default_rng(seed) for a non-negative integer
// seed.
func NewNumpyGenerator(seed uint64) *NumpyGenerator {
	g := &NumpyGenerator{}
	w := seedSequenceState(intToUint32Words(seed), 4)
	g.pcg.setSeed(w[0], w[1], w[2], w[3])
	return g
}

func (g *NumpyGenerator) next32() uint32 { return g.pcg.next32() }
func (g *NumpyGenerator) next64() uint64 { return g.pcg.next64() }

// Permutation is Generator.permutation(n): np.arange(n) shuffled in place.
func (g *NumpyGenerator) Permutation(n int) []int { return numpyPermutation(g, n) }

// numpyPermutation is np.arange(n) followed by the shuffle both
// RandomState and Generator use for a 1-d array (_shuffle_raw): a backward
// Fisher-Yates whose partner j ≤ i comes from random_interval.
func numpyPermutation(src bitSource, n int) []int {
	a := make([]int, n)
	for i := range a {
		a[i] = i
	}
	for i := n - 1; i >= 1; i-- {
		j := int(randomInterval(src, uint64(i)))
		a[i], a[j] = a[j], a[i]
	}
	return a
}

// randomInterval is numpy's random_interval: a uniform value in [0, max] by
// masking to the smallest enclosing power of two and rejecting values above
// max. It draws 32 bits at a time while max fits in 32 bits.
func randomInterval(src bitSource, max uint64) uint64 {
	if max == 0 {
		return 0
	}
	mask := uint64(1)<<bits.Len64(max) - 1 // wraps to all ones for k = 64
	if max <= 0xffffffff {
		for {
			if v := uint64(src.next32()) & mask; v <= max {
				return v
			}
		}
	}
	for {
		if v := src.next64() & mask; v <= max {
			return v
		}
	}
}

// pcg64 is numpy's PCG64 bit generator: a 128-bit LCG with the XSL-RR
// output function, plus the one-word buffer numpy uses to serve 32-bit
// draws from a 64-bit output.
type pcg64 struct {
	stateHi, stateLo uint64
	incHi, incLo     uint64
	hasUint32        bool
	uinteger         uint32
}

// PCG_DEFAULT_MULTIPLIER_128.
const (
	pcgMultHi = 2549297995355413924
	pcgMultLo = 4865540595714422341
)

// setSeed is pcg64_set_seed followed by pcg_setseq_128_srandom_r.
func (p *pcg64) setSeed(seedHi, seedLo, incHi, incLo uint64) {
	p.stateHi, p.stateLo = 0, 0
	// inc = initseq << 1 | 1
	p.incHi = incHi<<1 | incLo>>63
	p.incLo = incLo<<1 | 1
	p.step()
	var carry uint64
	p.stateLo, carry = bits.Add64(p.stateLo, seedLo, 0)
	p.stateHi, _ = bits.Add64(p.stateHi, seedHi, carry)
	p.step()
	p.hasUint32 = false
}

// step is state = state*mult + inc modulo 2**128.
func (p *pcg64) step() {
	hi, lo := bits.Mul64(p.stateLo, pcgMultLo)
	hi += p.stateHi*pcgMultLo + p.stateLo*pcgMultHi
	var carry uint64
	lo, carry = bits.Add64(lo, p.incLo, 0)
	hi, _ = bits.Add64(hi, p.incHi, carry)
	p.stateHi, p.stateLo = hi, lo
}

// next64 advances and returns the XSL-RR output of the new state.
func (p *pcg64) next64() uint64 {
	p.step()
	return bits.RotateLeft64(p.stateHi^p.stateLo, -int(p.stateHi>>58))
}

// next32 serves the low half of a 64-bit output and keeps the high half for
// the next call, as pcg64_next32 does.
func (p *pcg64) next32() uint32 {
	if p.hasUint32 {
		p.hasUint32 = false
		return p.uinteger
	}
	v := p.next64()
	p.hasUint32 = true
	p.uinteger = uint32(v >> 32)
	return uint32(v)
}

// SeedSequence constants (numpy/random/bit_generator.pyx).
const (
	ssPoolSize = 4
	ssInitA    = 0x43b0d7e5
	ssMultA    = 0x931e8875
	ssInitB    = 0x8b51f9dd
	ssMultB    = 0x58f38ded
	ssMixMultL = 0xca01f9dd
	ssMixMultR = 0x4973f715
	ssXShift   = 16
)

// intToUint32Words is _int_to_uint32_array: little-endian 32-bit words,
// with 0 as the single word 0.
func intToUint32Words(n uint64) []uint32 {
	if n == 0 {
		return []uint32{0}
	}
	var w []uint32
	for ; n > 0; n >>= 32 {
		w = append(w, uint32(n))
	}
	return w
}

// seedSequenceState is SeedSequence(entropy).generate_state(n64, np.uint64)
// for a SeedSequence without spawn key.
func seedSequenceState(entropy []uint32, n64 int) []uint64 {
	pool := seedSequencePool(entropy)
	hashConst := uint32(ssInitB)
	words := make([]uint32, 2*n64)
	for i := range words {
		v := pool[i%ssPoolSize]
		v ^= hashConst
		hashConst *= ssMultB
		v *= hashConst
		v ^= v >> ssXShift
		words[i] = v
	}
	out := make([]uint64, n64)
	for i := range out {
		out[i] = uint64(words[2*i]) | uint64(words[2*i+1])<<32
	}
	return out
}

// seedSequencePool is SeedSequence.mix_entropy.
func seedSequencePool(entropy []uint32) [ssPoolSize]uint32 {
	var pool [ssPoolSize]uint32
	hashConst := uint32(ssInitA)
	hashmix := func(v uint32) uint32 {
		v ^= hashConst
		hashConst *= ssMultA
		v *= hashConst
		v ^= v >> ssXShift
		return v
	}
	mix := func(x, y uint32) uint32 {
		r := ssMixMultL*x - ssMixMultR*y
		return r ^ r>>ssXShift
	}
	for i := range pool {
		var e uint32
		if i < len(entropy) {
			e = entropy[i]
		}
		pool[i] = hashmix(e)
	}
	for src := range pool {
		for dst := range pool {
			if src != dst {
				pool[dst] = mix(pool[dst], hashmix(pool[src]))
			}
		}
	}
	for src := ssPoolSize; src < len(entropy); src++ {
		for dst := range pool {
			pool[dst] = mix(pool[dst], hashmix(entropy[src]))
		}
	}
	return pool
}
