package seed

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Inference. A training script seldom says where it is: the world size and
// rank may be set in code (torch.multiprocessing.spawn), the loop may
// resume at set_epoch(5), the seed is the script's. But the permutation of
// a DistributedSampler depends only on seed + epoch, and rank r of W reads
// positions r, r+W, r+2W, ... of it. So the positions of a handful of
// indices one rank read lie, in the permutation of the right (seed,
// epoch), on one residue modulo W and close together; in the permutation
// of any other they are scattered over the dataset. Infer tries the
// candidates and keeps the one under which that is so.
//
// It does not build each candidate's whole permutation. torch's randperm
// is a forward Fisher-Yates (for n < InsideOutMinN): position i is final
// once step i is done, and the first indices a rank reads in an epoch sit
// at its first positions. So Infer generates every candidate's first L
// positions only, for L = 4096, then 8 times more, until the indices seen
// are all among them under some candidate: at the start of an epoch that
// is a few thousand draws per candidate, and a thousand epochs of two
// seeds take some tens of milliseconds.

// Found is the DistributedSampler a rank reads from, as Infer learned it.
type Found struct {
	Seed     int64 // meaningless when !Shuffle
	Epoch    int   // the epoch of the indices seen; meaningless when !Shuffle
	Shuffle  bool
	Replicas int
	Rank     int
	// First and Last are the positions in the rank's order (j in
	// r + jW) of the earliest and the latest index seen: readers that
	// open batches out of order are within Last-First of each other.
	First, Last int
}

// Hints narrow the search. Seeds must not be empty.
type Hints struct {
	Seeds []int64 // seeds to try (the configured one, DistributedSampler's default 0)
	// EpochFrom..EpochTo (inclusive) are the epochs tried; EpochTo 0
	// means EpochFrom+DefaultEpochs-1.
	EpochFrom, EpochTo int
	Replicas           int // the world size, 0 if unknown
	Rank               int // the rank, -1 if unknown (with Replicas known)
	Torch              TorchVersion
}

// DefaultEpochs is how many epochs Infer tries when not told: resumed jobs
// start at whatever epoch their checkpoint was taken.
const DefaultEpochs = 1000

// MinSeen is how many distinct indices Infer needs: with fewer, a wrong
// candidate could explain them by chance.
const MinSeen = 16

// Errors of Infer.
var (
	// ErrTooFew: fewer than MinSeen distinct indices; see more and ask again.
	ErrTooFew = errors.New("seed: too few indices seen to infer the sampler")
	// ErrNoCandidate: no DistributedSampler of the seeds and epochs tried,
	// shuffled or not, reads the indices seen as one rank would.
	ErrNoCandidate = errors.New("seed: no DistributedSampler of the seeds and epochs tried explains the indices seen")
	// ErrAmbiguous: several candidates explain them; see more and ask again.
	ErrAmbiguous = errors.New("seed: several samplers explain the indices seen")
	// ErrInconclusive: none explains them, but so few that readers of
	// many workers at once could have opened them under one that would
	// with more; see more and ask again.
	ErrInconclusive = errors.New("seed: too few indices seen to tell the sampler from chance")
)

// maxChance is the chance allowed that a candidate other than the sampler
// that read the indices explains them (summed over the candidates tried).
const maxChance = 1e-6

// Infer finds the DistributedSampler over n samples, and the rank of it,
// that read seen (dataset indices, in the order they were read; repeats
// are ignored). The indices must come from one epoch of one rank; a rank
// reads them a few batches out of order when several DataLoader workers
// fetch at once, which Infer allows for.
func Infer(n int, seen []int, h Hints) (Found, error) {
	uniq := dedupe(seen, n)
	if len(uniq) < MinSeen {
		return Found{}, fmt.Errorf("%w (%d of %d)", ErrTooFew, len(uniq), MinSeen)
	}
	if len(h.Seeds) == 0 {
		return Found{}, fmt.Errorf("%w: no seed to try", ErrSpec)
	}
	from, to := h.EpochFrom, h.EpochTo
	if to == 0 {
		to = from + DefaultEpochs - 1
	}
	cands := 1 + len(h.Seeds)*(to-from+1)
	inf := inference{n: n, seen: uniq, h: h, cands: cands}
	// Not shuffled (a validation set read in order): the positions are
	// the indices themselves.
	if f, ok := inf.judge(uniq, Found{Shuffle: false}); ok {
		return f, nil
	}
	if n >= InsideOutMinN && h.Torch.atLeast(insideOutSince) {
		return Found{}, fmt.Errorf("%w: datasets of %d samples or more are not searched", ErrNoCandidate, InsideOutMinN)
	}
	inf.prepare()
	for L := min(4096, n); ; L = min(8*L, n) {
		var found []Found
		// One permutation per seed + epoch (the generator sees only
		// that sum's low 32 bits): seed 7 at epoch 0 is seed 0 at epoch
		// 7, and the seed tried first, the configured one, names it.
		tried := map[uint32]bool{}
		for _, s := range h.Seeds {
			for e := from; e <= to; e++ {
				key := uint32(uint64(s) + uint64(e))
				if tried[key] {
					continue
				}
				tried[key] = true
				pos := inf.positions(s, e, L)
				if pos == nil {
					continue
				}
				if f, ok := inf.judge(pos, Found{Seed: s, Epoch: e, Shuffle: true}); ok {
					found = append(found, f)
				}
			}
		}
		switch {
		case len(found) == 1:
			return found[0], nil
		case len(found) > 1:
			return Found{}, fmt.Errorf("%w (%d of them)", ErrAmbiguous, len(found))
		case L == n && !inf.conclusive():
			return Found{}, fmt.Errorf("%w (%d seen)", ErrInconclusive, len(uniq))
		case L == n:
			return Found{}, ErrNoCandidate
		}
	}
}

// dedupe drops repeats and indices outside [0, n), keeping the order.
func dedupe(seen []int, n int) []int {
	have := make(map[int]bool, len(seen))
	var out []int
	for _, i := range seen {
		if i >= 0 && i < n && !have[i] {
			have[i] = true
			out = append(out, i)
		}
	}
	return out
}

// inference is one Infer call's state.
type inference struct {
	n     int
	seen  []int
	h     Hints
	cands int
	perm  []int32  // identity, and again after each candidate
	touch []int32  // positions of perm a candidate changed
	isSee []uint64 // bitset of seen
	where map[int32]int
}

func (inf *inference) prepare() {
	inf.perm = make([]int32, inf.n)
	for i := range inf.perm {
		inf.perm[i] = int32(i)
	}
	inf.isSee = make([]uint64, (inf.n+63)/64)
	inf.where = make(map[int32]int, len(inf.seen))
	for k, i := range inf.seen {
		inf.isSee[i/64] |= 1 << (i % 64)
		inf.where[int32(i)] = k
	}
}

// positions returns the positions of the seen indices in the first L
// positions of randperm(n) seeded with seed+epoch, or nil if some are
// not among them.
func (inf *inference) positions(seed int64, epoch, L int) []int {
	g := NewTorchGenerator(uint64(seed) + uint64(epoch))
	n, perm := inf.n, inf.perm
	pos := make([]int, len(inf.seen))
	found := 0
	for i := 0; i < L; i++ {
		if i < n-1 {
			j := i + int(uint64(g.Random())%uint64(n-i))
			perm[i], perm[j] = perm[j], perm[i]
			inf.touch = append(inf.touch, int32(j))
		}
		if v := perm[i]; inf.isSee[v/64]&(1<<(v%64)) != 0 {
			pos[inf.where[v]] = i
			found++
		}
	}
	for k := len(inf.touch) - 1; k >= 0; k-- { // undo, last swap first
		i := k
		j := int(inf.touch[k])
		perm[i], perm[j] = perm[j], perm[i]
	}
	inf.touch = inf.touch[:0]
	if found < len(inf.seen) {
		return nil
	}
	return pos
}

// judge says whether positions pos (of the seen indices) are one rank's:
// on one residue modulo the world size (given, or the greatest common
// divisor of their differences) and in so few runs of consecutive ones
// (each worker reads its batch in order), for how many there are, that
// no other candidate could have put them there by chance.
func (inf *inference) judge(pos []int, f Found) (Found, bool) {
	lo := pos[0]
	for _, p := range pos {
		lo = min(lo, p)
	}
	g := 0
	for _, p := range pos {
		g = gcd(g, p-lo)
	}
	w := inf.h.Replicas
	if w == 0 {
		w = g
	}
	if w <= 0 {
		return f, false
	}
	if g > w && g%w == 0 {
		// One rank of a larger world: a world of w would read the
		// positions between them too (rank 1 of 2 read as rank 0 of 1).
		return f, false
	}
	r := lo % w
	for _, p := range pos {
		if p%w != r {
			return f, false
		}
	}
	if inf.h.Replicas > 0 && inf.h.Rank >= 0 && r != inf.h.Rank {
		return f, false
	}
	js := make([]int, len(pos)) // the rank's positions
	for i, p := range pos {
		js[i] = p / w
	}
	slices.Sort(js)
	runs := 1
	for i := 1; i < len(js); i++ {
		if js[i] != js[i-1]+1 {
			runs++
		}
	}
	if inf.chance(len(js), runs, w) > math.Log(maxChance) {
		return f, false
	}
	f.Replicas, f.Rank, f.First, f.Last = w, r, js[0], js[len(js)-1]
	return f, true
}

// chance is the log of the chance that a wrong candidate puts k seen
// indices, which it places at random among the n positions, on one
// residue modulo w in at most runs runs of consecutive positions of the
// rank: w·C(n/w-k+1, runs)·C(k-1, runs-1) of the C(n, k) placements do,
// for each candidate tried (and each world size, when w was inferred).
func (inf *inference) chance(k, runs, w int) float64 {
	slots := (inf.n + w - 1) / w
	c := math.Log(float64(inf.cands)) + math.Log(float64(w)) +
		logChoose(slots-k+1, runs) + logChoose(k-1, runs-1) - logChoose(inf.n, k)
	if inf.h.Replicas == 0 {
		c += math.Log(float64(inf.n))
	}
	return c
}

// maxRuns is how many runs the seen indices of a rank may make whose
// readers are many: 16 workers with 4 batches in flight each.
const maxRuns = 64

// conclusive says whether the seen indices are enough that the sampler
// that read them would have explained them however many workers read:
// only then does no candidate explaining them mean none is the one.
func (inf *inference) conclusive() bool {
	k := len(inf.seen)
	return inf.chance(k, min(k, maxRuns), 1) <= math.Log(maxChance)
}

// logChoose is the log of the binomial coefficient C(a, b).
func logChoose(a, b int) float64 {
	if b < 0 || b > a {
		return math.Inf(-1)
	}
	la, _ := math.Lgamma(float64(a + 1))
	lb, _ := math.Lgamma(float64(b + 1))
	lc, _ := math.Lgamma(float64(a - b + 1))
	return la - lb - lc
}

func gcd(a, b int) int {
	if a < 0 {
		a = -a
	}
	if b < 0 {
		b = -b
	}
	return int(gcdU(uint64(a), uint64(b)))
}

func gcdU(a, b uint64) uint64 {
	if a == 0 {
		return b
	}
	if b == 0 {
		return a
	}
	s := bits.TrailingZeros64(a | b)
	a >>= bits.TrailingZeros64(a)
	for b != 0 {
		b >>= bits.TrailingZeros64(b)
		if a > b {
			a, b = b, a
		}
		b -= a
	}
	return a << s
}
