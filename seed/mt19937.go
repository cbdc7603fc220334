package seed

// mt19937 is the 32-bit Mersenne Twister of Matsumoto and Nishimura, the
// engine behind both torch.Generator (CPU) and numpy.random.RandomState.
// Both libraries use the reference algorithm unchanged, so one
// implementation serves both; they differ only in how they seed it and in
// how they turn its 32-bit words into bounded integers.
//
// The zero value is not seeded; use seedGenrand or seedByArray.
type mt19937 struct {
	state [mtN]uint32
	pos   int // next word of state to temper; mtN means "regenerate first"
}

const (
	mtN         = 624
	mtM         = 397
	mtMatrixA   = 0x9908b0df
	mtUpperMask = 0x80000000
	mtLowerMask = 0x7fffffff
)

// seedGenrand is the reference init_genrand. torch's manual_seed and
// numpy's RandomState(int) both end here with the seed's low 32 bits.
func (m *mt19937) seedGenrand(s uint32) {
	m.state[0] = s
	for i := 1; i < mtN; i++ {
		prev := m.state[i-1]
		m.state[i] = 1812433253*(prev^(prev>>30)) + uint32(i)
	}
	m.pos = mtN
}

// seedByArray is the reference init_by_array, which numpy's RandomState
// uses when it is seeded with a sequence of integers.
func (m *mt19937) seedByArray(key []uint32) {
	m.seedGenrand(19650218)
	i, j := 1, 0
	k := max(mtN, len(key))
	for ; k > 0; k-- {
		prev := m.state[i-1]
		m.state[i] = (m.state[i] ^ ((prev ^ (prev >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= mtN {
			m.state[0] = m.state[mtN-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k = mtN - 1; k > 0; k-- {
		prev := m.state[i-1]
		m.state[i] = (m.state[i] ^ ((prev ^ (prev >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= mtN {
			m.state[0] = m.state[mtN-1]
			i = 1
		}
	}
	m.state[0] = 0x80000000 // MSB set: the state is never all zero
	m.pos = mtN
}

// next returns the next tempered 32-bit output.
func (m *mt19937) next() uint32 {
	if m.pos >= mtN {
		m.twist()
	}
	y := m.state[m.pos]
	m.pos++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// twist regenerates the whole state block, as the reference does every 624
// outputs.
func (m *mt19937) twist() {
	for i := 0; i < mtN; i++ {
		y := (m.state[i] & mtUpperMask) | (m.state[(i+1)%mtN] & mtLowerMask)
		v := m.state[(i+mtM)%mtN] ^ (y >> 1)
		if y&1 != 0 {
			v ^= mtMatrixA
		}
		m.state[i] = v
	}
	m.pos = 0
}
