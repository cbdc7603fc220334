package seed

import (
	"fmt"
	"strconv"
	"strings"
)

// TorchGenerator is torch.Generator() on the CPU after manual_seed: an
// MT19937 engine plus the two ways ATen reads it.
//
// A TorchGenerator is a value that owns its whole state (2.5 KiB); copying
// it forks the stream. It is not safe for concurrent use.
type TorchGenerator struct {
	mt mt19937
}

// NewTorchGenerator returns the generator torch.Generator().manual_seed(seed)
// makes. torch keeps the seed as a uint64 (a negative Python seed s is taken
// as uint64(s), its two's complement) but the engine only sees its low 32
// bits, so seeds that differ only above bit 31 give the same stream.
func NewTorchGenerator(seed uint64) *TorchGenerator {
	g := &TorchGenerator{}
	g.mt.seedGenrand(uint32(seed))
	return g
}

// Random is CPUGeneratorImpl::random(): one 32-bit engine output.
func (g *TorchGenerator) Random() uint32 { return g.mt.next() }

// Random64 is CPUGeneratorImpl::random64(): two outputs, the first one in
// the high half.
func (g *TorchGenerator) Random64() uint64 {
	hi := uint64(g.mt.next())
	return hi<<32 | uint64(g.mt.next())
}

// RandomInt64 is torch.empty((), dtype=torch.int64).random_(generator=g).item():
// ATen's uniform_int for int64 reduces random64() modulo 2**63. The
// DataLoader draws its base seed this way, and RandomSampler without a
// generator draws its own seed this way too.
func (g *TorchGenerator) RandomInt64() int64 {
	return int64(g.Random64() % (1 << 63))
}

// Randperm is torch.randperm(n, generator=g) on the CPU for the torch
// release v. n < 0 panics, as it is a caller bug.
func (g *TorchGenerator) Randperm(n int, v TorchVersion) []int {
	if n < 0 {
		panic("seed: Randperm of negative n")
	}
	a := make([]int, n)
	randpermInto(g, a, v)
	return a
}

// randpermInto fills a with randperm(len(a)); int32 elements keep a large
// dataset's permutation at 4 bytes per sample.
func randpermInto[T int | int32](g *TorchGenerator, a []T, v TorchVersion) {
	if v.insideOut(len(a)) {
		randpermInsideOut(g, a)
		return
	}
	randpermSwap(g, a)
}

// randpermSwap is the algorithm of every torch release for
// n < insideOutMinN: a forward Fisher-Yates whose swap partner is drawn with
// a plain (slightly biased) modulo of one 32-bit output.
func randpermSwap[T int | int32](g *TorchGenerator, a []T) {
	n := len(a)
	for i := range a {
		a[i] = T(i)
	}
	for i := 0; i < n-1; i++ {
		z := int(uint64(g.Random()) % uint64(n-i))
		a[i], a[i+z] = a[i+z], a[i]
	}
}

// randpermInsideOut is the algorithm torch switched to for large n (PyTorch
// PR 143682): the inside-out Fisher-Yates, one random64() per element,
// including the first (whose draw is always reduced to 0).
func randpermInsideOut[T int | int32](g *TorchGenerator, a []T) {
	for i := range a {
		z := int(g.Random64() % uint64(i+1))
		a[i] = a[z]
		a[z] = T(i)
	}
}

// randpermDraws is how many 32-bit outputs Randperm(n, v) consumes. It lets
// a caller skip a permutation it does not need.
func randpermDraws(n int, v TorchVersion) int {
	if v.insideOut(n) {
		return 2 * n
	}
	return max(n-1, 0)
}

// skip advances the engine by k 32-bit outputs.
func (g *TorchGenerator) skip(k int) {
	for ; k > 0; k-- {
		g.mt.next()
	}
}

// TorchVersion is a PyTorch release, major.minor. It matters only for
// randperm of very large n (see InsideOutMinN). The zero value means "not
// given": Randperm treats it as a release before 2.6, and New refuses it
// when the dataset is large enough for the release to matter.
type TorchVersion struct {
	Major, Minor int
}

// InsideOutMinN is the smallest n for which newer torch releases use the
// inside-out randperm: std::numeric_limits<uint32_t>::max() / 20.
const InsideOutMinN = 214748364

// insideOutSince is the first release with the inside-out randperm.
var insideOutSince = TorchVersion{2, 6}

// ParseTorchVersion reads torch.__version__ strings such as "2.5",
// "2.6.0", "2.6.0+cu124", "1.13.0a0" or "2.7.0.dev20250101". Only major and
// minor are kept.
func ParseTorchVersion(s string) (TorchVersion, error) {
	core := s
	if i := strings.IndexByte(core, '+'); i >= 0 {
		core = core[:i]
	}
	parts := strings.SplitN(core, ".", 3)
	if len(parts) < 2 {
		return TorchVersion{}, fmt.Errorf("%w: %q: want major.minor, e.g. \"2.5\"", ErrTorchVersion, s)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(leadingDigits(parts[1]))
	if err1 != nil || err2 != nil || major < 0 || minor < 0 {
		return TorchVersion{}, fmt.Errorf("%w: %q: want major.minor, e.g. \"2.5\"", ErrTorchVersion, s)
	}
	return TorchVersion{Major: major, Minor: minor}, nil
}

// leadingDigits returns the longest all-digit prefix of s ("0a0" → "0"),
// since pre-release suffixes may follow the minor number directly.
func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// String returns "major.minor".
func (v TorchVersion) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// IsZero reports whether v was not given.
func (v TorchVersion) IsZero() bool { return v == TorchVersion{} }

// atLeast reports whether v is release w or later.
func (v TorchVersion) atLeast(w TorchVersion) bool {
	if v.Major != w.Major {
		return v.Major > w.Major
	}
	return v.Minor >= w.Minor
}

// insideOut reports whether randperm(n) uses the inside-out algorithm in
// release v.
func (v TorchVersion) insideOut(n int) bool {
	return n >= InsideOutMinN && v.atLeast(insideOutSince)
}
