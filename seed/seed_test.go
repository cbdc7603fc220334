package seed

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Known values: the first outputs of torch.Generator().manual_seed(0) as
// real torch prints them, and the reference output of Matsumoto and
// Nishimura's mt19937ar.c (init_by_array {0x123, 0x234, 0x345, 0x456}).
func TestMT19937KnownValues(t *testing.T) {
	g := NewTorchGenerator(0)
	want := []uint32{2357136044, 2546248239, 3071714933, 3626093760}
	for i, w := range want {
		if got := g.Random(); got != w {
			t.Fatalf("seed 0 output %d = %d, want %d", i, got, w)
		}
	}

	var m mt19937
	m.seedByArray([]uint32{0x123, 0x234, 0x345, 0x456})
	ref := []uint32{1067595299, 955945823, 477289528, 4107218783, 4228976476}
	for i, w := range ref {
		if got := m.next(); got != w {
			t.Fatalf("mt19937ar reference output %d = %d, want %d", i, got, w)
		}
	}
}

func TestTorchSeedLow32Bits(t *testing.T) {
	a := NewTorchGenerator(uint64(1) << 32) // same low bits as 0
	b := NewTorchGenerator(0)
	minusOne := int64(-1)
	c := NewTorchGenerator(uint64(minusOne)) // two's complement: 0xffffffff low bits
	d := NewTorchGenerator(0xffffffff)
	for i := 0; i < 10; i++ {
		if a.Random() != b.Random() || c.Random() != d.Random() {
			t.Fatalf("seeds equal in their low 32 bits gave different streams at draw %d", i)
		}
	}
}

func TestRandom64AndRandomInt64(t *testing.T) {
	g := NewTorchGenerator(0)
	if got, want := g.Random64(), uint64(2357136044)<<32|2546248239; got != want {
		t.Fatalf("Random64 = %d, want %d", got, want)
	}
	g = NewTorchGenerator(0)
	if got, want := g.RandomInt64(), int64((uint64(2357136044)<<32|2546248239)&(1<<63-1)); got != want {
		t.Fatalf("RandomInt64 = %d, want %d", got, want)
	}
}

func TestRandpermKnownValue(t *testing.T) {
	got := NewTorchGenerator(0).Randperm(10, TorchVersion{1, 13})
	want := []int{4, 1, 7, 5, 3, 9, 0, 8, 6, 2}
	if !slices.Equal(got, want) {
		t.Fatalf("randperm(10) seed 0 = %v, want %v", got, want)
	}
}

func TestRandpermIsPermutation(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	for _, n := range []int{0, 1, 2, 3, 17, 1000} {
		for _, v := range []TorchVersion{{1, 13}} {
			p := NewTorchGenerator(seed).Randperm(n, v)
			checkPermutation(t, p, n)
		}
		p := make([]int, n)
		randpermInsideOut(NewTorchGenerator(seed), p)
		checkPermutation(t, p, n)
	}
}

func checkPermutation(t *testing.T, p []int, n int) {
	t.Helper()
	s := slices.Clone(p)
	sort.Ints(s)
	if !slices.Equal(s, arange(n)) {
		t.Fatalf("not a permutation of 0..%d: %v", n-1, p)
	}
}

func TestRandpermDraws(t *testing.T) {
	for _, n := range []int{0, 1, 2, 50} {
		a, b := NewTorchGenerator(7), NewTorchGenerator(7)
		a.Randperm(n, TorchVersion{})
		b.skip(randpermDraws(n, TorchVersion{}))
		if a.Random() != b.Random() {
			t.Fatalf("randpermDraws(%d) does not match what Randperm consumes", n)
		}
		a, b = NewTorchGenerator(7), NewTorchGenerator(7)
		randpermInsideOut(a, make([]int, n))
		b.skip(2 * n)
		if a.Random() != b.Random() {
			t.Fatalf("inside-out randperm(%d) does not consume 2n outputs", n)
		}
	}
}

func TestInsideOutChoice(t *testing.T) {
	cases := []struct {
		v    TorchVersion
		n    int
		want bool
	}{
		{TorchVersion{2, 5}, InsideOutMinN, false},
		{TorchVersion{2, 6}, InsideOutMinN - 1, false},
		{TorchVersion{2, 6}, InsideOutMinN, true},
		{TorchVersion{2, 10}, InsideOutMinN, true},
		{TorchVersion{3, 0}, InsideOutMinN + 1, true},
		{TorchVersion{1, 13}, 1 << 40, false},
		{TorchVersion{}, 1 << 40, false},
	}
	for _, c := range cases {
		if got := c.v.insideOut(c.n); got != c.want {
			t.Errorf("%v insideOut(%d) = %v, want %v", c.v, c.n, got, c.want)
		}
	}
	if InsideOutMinN != int(^uint32(0)/20) {
		t.Fatalf("InsideOutMinN = %d, want uint32 max / 20", InsideOutMinN)
	}
}

func TestParseTorchVersion(t *testing.T) {
	good := map[string]TorchVersion{
		"2.5": {2, 5}, "2.6.0": {2, 6}, "2.6.0+cu124": {2, 6}, "1.13.0a0": {1, 13},
		"2.7.0.dev20250101": {2, 7}, "2.10.1": {2, 10}, "1.13.1+dfsg": {1, 13},
	}
	for s, want := range good {
		got, err := ParseTorchVersion(s)
		if err != nil || got != want {
			t.Errorf("ParseTorchVersion(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "2", "x.y", "2.x", "-1.2", "+2.6"} {
		if _, err := ParseTorchVersion(s); !errors.Is(err, ErrTorchVersion) {
			t.Errorf("ParseTorchVersion(%q) error = %v, want ErrTorchVersion", s, err)
		}
	}
}

// The ranks of a DistributedSampler together read the padded (or
// truncated) permutation exactly once, interleaved.
func TestDistributedSamplerPartition(t *testing.T) {
	for _, n := range []int{0, 1, 5, 10, 11} {
		for _, r := range []int{1, 2, 3, 4, 12} {
			for _, drop := range []bool{false, true} {
				perm := NewTorchGenerator(5+2).Randperm(n, TorchVersion{})
				var all []int
				var per [][]int
				for rank := 0; rank < r; rank++ {
					s := mustNew(t, Spec{Sampler: KindDistributed, Len: n, Seed: 5, Replicas: r, Rank: rank, DropLast: drop})
					per = append(per, s.Epoch(2))
				}
				for j := 0; j < len(per[0]); j++ {
					for rank := 0; rank < r; rank++ {
						all = append(all, per[rank][j])
					}
				}
				var want []int
				if drop {
					want = perm[:n/r*r]
				} else {
					for p := 0; p < (n+r-1)/r*r; p++ {
						want = append(want, perm[p%n])
					}
				}
				if !slices.Equal(all, want) {
					t.Fatalf("n=%d R=%d drop=%v: ranks read %v, want %v", n, r, drop, all, want)
				}
			}
		}
	}
}

func TestDistributedNoSetEpochAndNoShuffle(t *testing.T) {
	s := mustNew(t, Spec{Sampler: KindDistributed, Len: 20, Seed: 3, NoSetEpoch: true})
	if !slices.Equal(s.Epoch(0), s.Epoch(5)) {
		t.Fatal("without set_epoch every epoch must repeat epoch 0")
	}
	s = mustNew(t, Spec{Sampler: KindDistributed, Len: 7, Replicas: 2, Rank: 1, NoShuffle: true})
	if got := s.Epoch(3); !slices.Equal(got, []int{1, 3, 5, 0}) {
		t.Fatalf("shuffle=False rank 1 of 2 over 7 = %v, want [1 3 5 0]", got)
	}
}

// Epoch must not depend on which epochs were asked before.
func TestEpochIsPure(t *testing.T) {
	specs := []Spec{
		{Sampler: KindRandom, Len: 33, Seed: 9},
		{Sampler: KindRandom, Len: 33, Seed: 9, Generator: GeneratorLoader},
		{Sampler: KindRandom, Len: 33, Seed: 9, Generator: GeneratorSampler, NumSamples: 70},
		{Sampler: KindNumpy, Len: 33, Seed: 9},
		{Sampler: KindNumpyLegacy, Len: 33, Seed: 9},
	}
	for _, sp := range specs {
		a, b := mustNew(t, sp), mustNew(t, sp)
		var fwd [][]int
		for e := 0; e < 5; e++ {
			fwd = append(fwd, a.Epoch(e))
		}
		for e := 4; e >= 0; e-- {
			if got := b.Epoch(e); !slices.Equal(got, fwd[e]) {
				t.Fatalf("%+v: epoch %d asked last differs from asked in order", sp, e)
			}
		}
		if slices.Equal(fwd[0], fwd[1]) {
			t.Fatalf("%+v: epochs 0 and 1 are the same order", sp)
		}
	}
}

func TestEpochConcurrent(t *testing.T) {
	s := mustNew(t, Spec{Sampler: KindRandom, Len: 100, Seed: 1, Generator: GeneratorLoader})
	want := make([][]int, 8)
	for e := range want {
		want[e] = mustNew(t, Spec{Sampler: KindRandom, Len: 100, Seed: 1, Generator: GeneratorLoader}).Epoch(e)
	}
	done := make(chan error)
	for e := range want {
		go func() {
			if !slices.Equal(s.Epoch(e), want[e]) {
				done <- errors.New("concurrent Epoch gave a different order")
				return
			}
			done <- nil
		}()
	}
	for range want {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestDropLastBatch(t *testing.T) {
	full := mustNew(t, Spec{Sampler: KindRandom, Len: 10, Seed: 4})
	cut := mustNew(t, Spec{Sampler: KindRandom, Len: 10, Seed: 4, BatchSize: 4, DropLastBatch: true})
	if got := cut.Epoch(1); !slices.Equal(got, full.Epoch(1)[:8]) {
		t.Fatalf("drop_last batches = %v, want the first 8 of %v", got, full.Epoch(1))
	}
}

func TestSpecErrors(t *testing.T) {
	cases := []struct {
		spec Spec
		want error
	}{
		{Spec{}, ErrSpec},
		{Spec{Sampler: "shuffled", Len: 3}, ErrSpec},
		{Spec{Sampler: KindDistributed, Len: -1}, ErrSpec},
		{Spec{Sampler: KindDistributed, Len: 3, Replicas: 2, Rank: 2}, ErrSpec},
		{Spec{Sampler: KindDistributed, Len: 3, Rank: -1}, ErrSpec},
		{Spec{Sampler: KindDistributed, Len: 3, Replicas: -2}, ErrSpec},
		{Spec{Sampler: KindDistributed, Len: 3, Layout: []string{"a"}}, ErrSpec},
		{Spec{Sampler: KindDistributed, Len: InsideOutMinN}, ErrTorchVersion},
		{Spec{Sampler: KindDistributed, Len: 3, Torch: "two"}, ErrTorchVersion},
		{Spec{Sampler: KindRandom, Len: 0}, ErrSpec},
		{Spec{Sampler: KindRandom, Len: 3, Generator: "cuda"}, ErrSpec},
		{Spec{Sampler: KindRandom, Len: 3, NumSamples: -1}, ErrSpec},
		{Spec{Sampler: KindRandom, Len: 3, DropLastBatch: true}, ErrSpec},
		{Spec{Sampler: KindNumpy, Len: 3, Seed: -1}, ErrSpec},
		{Spec{Sampler: KindNumpyLegacy, Len: 3, Seed: 1 << 32}, ErrSpec},
		{Spec{Sampler: "file:"}, ErrSpec},
		{Spec{Sampler: "file:/nonexistent/order"}, ErrOrderFile},
	}
	for _, c := range cases {
		_, err := New(c.spec)
		if !errors.Is(err, c.want) {
			t.Errorf("New(%+v) error = %v, want %v", c.spec, err, c.want)
		}
	}
	if _, err := New(Spec{Sampler: KindDistributed, Len: InsideOutMinN, Torch: "2.6"}); err != nil {
		t.Errorf("a large dataset with a torch version must be accepted: %v", err)
	}
}

func TestReadOrder(t *testing.T) {
	layout := []string{"a/x.jpg", "b/y.jpg", "c d/z.png"}
	text := "# epoch 0\r\n2\r\nb/y.jpg\n/data/c d/z.png\n\n\n# a comment\n0\n# epoch 2\n1\n  \n"
	o, err := ReadOrder(strings.NewReader(text), layout, "/data/")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int{{2, 1, 2}, {0}, {1}}
	if o.Epochs() != len(want) {
		t.Fatalf("%d epochs, want %d", o.Epochs(), len(want))
	}
	for e := 0; e < 5; e++ {
		if got := o.Epoch(e); !slices.Equal(got, want[e%3]) {
			t.Fatalf("epoch %d = %v, want %v", e, got, want[e%3])
		}
	}
	bad := []struct {
		text   string
		layout []string
	}{
		{"", layout},
		{"# epoch 0\n\n", layout},
		{"3\n", layout},
		{"b/none.jpg\n", layout},
		{"a/x.jpg\n", nil},
		{"99999999999999999999999\n", nil},
	}
	for _, b := range bad {
		if _, err := ReadOrder(strings.NewReader(b.text), b.layout, ""); !errors.Is(err, ErrOrderFile) {
			t.Errorf("ReadOrder(%q) error = %v, want ErrOrderFile", b.text, err)
		}
	}
}

func TestOrderFileSpec(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rank1.txt"), []byte("4\n0\n\n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(Spec{Sampler: "file:" + filepath.Join(dir, "rank{rank}.txt"), Replicas: 2, Rank: 1, Len: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Epoch(0); !slices.Equal(got, []int{4, 0}) {
		t.Fatalf("epoch 0 = %v", got)
	}
	if _, err := New(Spec{Sampler: "file:" + filepath.Join(dir, "rank{rank}.txt"), Replicas: 2, Rank: 1, Len: 4}); !errors.Is(err, ErrOrderFile) {
		t.Fatalf("index 4 with Len 4: error = %v, want ErrOrderFile", err)
	}
}

func TestPyCompare(t *testing.T) {
	// Python: sorted(["a/x", "a-b", "a", "é", "z", "\udcff", "\U0001F600"]).
	in := []string{"z", "a/x", "\xff", "a-b", "é", "a", "😀"}
	slices.SortFunc(in, pyCompare)
	want := []string{"a", "a-b", "a/x", "z", "é", "\xff", "😀"}
	if !slices.Equal(in, want) {
		t.Fatalf("sorted = %q, want %q", in, want)
	}
}

func TestPyLower(t *testing.T) {
	cases := map[string]string{
		"A.JPG":   "a.jpg",
		"x.tİf":   "x.ti\u0307f",
		"K.PNG":   "k.png", // KELVIN SIGN lowers to ASCII k
		"\xff.JP": "\xff.jp",
	}
	for in, want := range cases {
		if got := pyLower(in); got != want {
			t.Errorf("pyLower(%q) = %q, want %q", in, got, want)
		}
	}
	if hasExtension("x.tİf", IMGExtensions) {
		t.Error("x.tİf lowers to x.ti̇f, which torchvision does not take as .tif")
	}
}

func TestNegativeEpochPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Epoch(-1) did not panic")
		}
	}()
	mustNew(t, Spec{Sampler: KindSequential, Len: 3}).Epoch(-1)
}

func mustNew(t *testing.T, spec Spec) Sampler {
	t.Helper()
	s, err := New(spec)
	if err != nil {
		t.Fatalf("New(%+v): %v", spec, err)
	}
	return s
}
