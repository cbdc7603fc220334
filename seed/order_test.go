package seed

import "testing"

// A rank's view of a shared permutation reads what the sampler's list
// does (checked against torch itself in torch_real_test.go), and finds
// every index where the list has it first, with padding (more ranks than
// samples too) and drop_last.
func TestViewMatchesList(t *testing.T) {
	for _, n := range []int{1, 2, 7, 10, 64, 101} {
		for _, w := range []int{1, 2, 3, 4, 8, 13, 150} {
			for _, shuffle := range []bool{true, false} {
				for _, drop := range []bool{false, true} {
					for r := 0; r < w; r++ {
						s, err := New(Spec{Sampler: KindDistributed, Len: n, Seed: 3, Replicas: w, Rank: r,
							NoShuffle: !shuffle, DropLast: drop})
						if err != nil {
							t.Fatal(err)
						}
						d := s.(*DistributedSampler)
						for e := 0; e < 3; e++ {
							checkView(t, d, e, n)
						}
					}
				}
			}
		}
	}
}

func checkView(t *testing.T, d *DistributedSampler, e, n int) {
	t.Helper()
	perm := arange(n)
	if d.shuffle {
		perm = NewTorchGenerator(uint64(d.seed)+uint64(e)).Randperm(n, d.torch)
	}
	want := make([]int, d.numSamples())
	for j := range want {
		want[j] = perm[(d.rank+j*d.replicas)%n]
	}
	v := d.View(d.Perm(e))
	if v.Len() != len(want) {
		t.Fatalf("n %d %+v: length %d, want %d", n, d, v.Len(), len(want))
	}
	first := map[int]int{}
	for j, idx := range want {
		if v.At(j) != idx {
			t.Fatalf("n %d %+v epoch %d: At(%d) = %d, want %d", n, d, e, j, v.At(j), idx)
		}
		if _, ok := first[idx]; !ok {
			first[idx] = j
		}
	}
	for idx := -1; idx <= n; idx++ {
		p, ok := first[idx]
		if !ok {
			p = -1
		}
		if got := v.Pos(idx); got != p {
			t.Fatalf("n %d %+v epoch %d: Pos(%d) = %d, want %d", n, d, e, idx, got, p)
		}
	}
}

// Ranks of one sampler share a permutation; another seed + epoch sum or
// another length does not.
func TestPermKey(t *testing.T) {
	mk := func(seed int64, n, r int) *DistributedSampler {
		s, err := New(Spec{Sampler: KindDistributed, Len: n, Seed: seed, Replicas: 4, Rank: r})
		if err != nil {
			t.Fatal(err)
		}
		return s.(*DistributedSampler)
	}
	if mk(5, 100, 0).PermKey(2) != mk(5, 100, 3).PermKey(2) || mk(5, 100, 0).PermKey(2) != mk(6, 100, 1).PermKey(1) {
		t.Fatal("ranks of one permutation have different keys")
	}
	if mk(5, 100, 0).PermKey(2) == mk(5, 100, 0).PermKey(3) || mk(5, 100, 0).PermKey(2) == mk(5, 101, 0).PermKey(2) {
		t.Fatal("different permutations have one key")
	}
}
