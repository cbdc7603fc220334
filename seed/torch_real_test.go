package seed

import (
	"slices"
	"testing"
)

// torchSeeds cover 0, small, negative (two's complement) and > 32-bit seeds.
var torchSeeds = []int64{0, 1, 42, -1, -12345, 1<<32 + 7, 1<<63 - 1, 123456789}

func TestTorchStreamAgainstTorch(t *testing.T) {
	const k = 2000 // past the first twist at 624
	var reqs []request
	for _, s := range torchSeeds {
		reqs = append(reqs, request{"op": "torch_stream", "seed": s, "k": k},
			request{"op": "torch_int64", "seed": s, "k": 20})
	}
	a := oracle(t, reqs, false)
	for i, s := range torchSeeds {
		want := decode[[]uint32](t, a[2*i])
		g := NewTorchGenerator(uint64(s))
		for j, w := range want {
			if got := g.Random(); got != w {
				t.Fatalf("seed %d: output %d = %d, torch %d", s, j, got, w)
			}
		}
		want64 := decode[[]int64](t, a[2*i+1])
		g = NewTorchGenerator(uint64(s))
		for j, w := range want64 {
			if got := g.RandomInt64(); got != w {
				t.Fatalf("seed %d: random_() %d = %d, torch %d", s, j, got, w)
			}
		}
	}
}

// Every n from 0 to 3000 (to 1000 for more seeds), and two large n.
func TestRandpermAgainstTorch(t *testing.T) {
	type c struct {
		seed int64
		n    int
	}
	var cases []c
	for _, s := range []int64{0, 1, 42, -7} {
		top := 1000
		if s == 0 {
			top = 3000
		}
		for n := 0; n <= top; n++ {
			cases = append(cases, c{s, n})
		}
	}
	cases = append(cases, c{0, 1_000_003}, c{2025, 4_000_037})
	reqs := make([]request, len(cases))
	for i, k := range cases {
		reqs[i] = request{"op": "randperm", "seed": k.seed, "n": k.n, "digest": k.n > 64}
	}
	a := oracle(t, reqs, false)
	v := TorchVersion{1, 13}
	for i, k := range cases {
		got := NewTorchGenerator(uint64(k.seed)).Randperm(k.n, v)
		if diff, ok := sameList(t, got, a[i]); !ok {
			t.Fatalf("randperm(%d) seed %d: %s", k.n, k.seed, diff)
		}
	}
	t.Logf("%d randperm cases equal to torch", len(cases))
}

// The installed torch predates the inside-out randperm, so this compares it
// with a Python transcription of the torch source fed by the real torch
// random64() stream, for small n (the algorithm does not depend on n beyond
// the threshold that selects it, which TestInsideOutChoice covers).
func TestInsideOutAgainstTranscription(t *testing.T) {
	var reqs []request
	for _, s := range []int64{0, 5, -9} {
		for n := 0; n <= 300; n++ {
			reqs = append(reqs, request{"op": "insideout", "seed": s, "n": n, "digest": true})
		}
	}
	a := oracle(t, reqs, false)
	for i, r := range reqs {
		s, n := r["seed"].(int64), r["n"].(int)
		got := make([]int, n)
		randpermInsideOut(NewTorchGenerator(uint64(s)), got)
		if diff, ok := sameList(t, got, a[i]); !ok {
			t.Fatalf("inside-out randperm(%d) seed %d: %s", n, s, diff)
		}
	}
}

func TestDistributedSamplerAgainstTorch(t *testing.T) {
	var reqs []request
	var specs []Spec
	var epochs []int
	for _, n := range []int{0, 1, 2, 3, 5, 7, 10, 16, 31, 64, 100, 257, 1000, 4099} {
		for _, r := range []int{1, 2, 3, 4, 7, 8, 16} {
			for rank := 0; rank < r; rank++ {
				for _, shuffle := range []bool{true, false} {
					for _, drop := range []bool{false, true} {
						for _, seed := range []int64{0, 42, -3, 1<<32 + 1} {
							for _, e := range []int{0, 1, 5} {
								reqs = append(reqs, request{"op": "distributed", "n": n, "R": r, "rank": rank,
									"shuffle": shuffle, "seed": seed, "epoch": e, "drop_last": drop, "digest": n > 300})
								specs = append(specs, Spec{Sampler: KindDistributed, Len: n, Replicas: r, Rank: rank,
									NoShuffle: !shuffle, DropLast: drop, Seed: seed})
								epochs = append(epochs, e)
							}
						}
					}
				}
			}
		}
	}
	a := oracle(t, reqs, false)
	for i, sp := range specs {
		got := mustNew(t, sp).Epoch(epochs[i])
		if diff, ok := sameList(t, got, a[i]); !ok {
			t.Fatalf("%+v epoch %d: %s", sp, epochs[i], diff)
		}
	}
	t.Logf("%d DistributedSampler combinations equal to torch", len(specs))
}

// A whole training loop: seed, DataLoader, every epoch to the end.
func TestDataLoaderLoopAgainstTorch(t *testing.T) {
	type loop struct {
		n          int
		seed       int64
		mode       string
		batch      int
		dropLast   bool
		workers    int
		persistent bool
		numSamples int // 0: default
	}
	var loops []loop
	batches := []int{1, 4, 32}
	i := 0
	for _, n := range []int{1, 2, 7, 10, 33, 100, 1000} {
		for _, seed := range []int64{0, 7, -5} {
			for _, mode := range []string{GeneratorGlobal, GeneratorLoader, GeneratorSampler} {
				b := batches[i%len(batches)]
				loops = append(loops, loop{n: n, seed: seed, mode: mode, batch: b, dropLast: i%2 == 1})
				i++
			}
		}
	}
	for _, mode := range []string{GeneratorGlobal, GeneratorLoader, GeneratorSampler} {
		for _, ns := range []int{5, 13, 71} {
			loops = append(loops, loop{n: 10, seed: 3, mode: mode, batch: 3, numSamples: ns})
		}
		// Workers: persistent ones draw the base seed once; others every epoch.
		loops = append(loops,
			loop{n: 50, seed: 11, mode: mode, batch: 8, workers: 1, persistent: true},
			loop{n: 50, seed: 11, mode: mode, batch: 8, workers: 2})
	}
	const epochs = 4
	reqs := make([]request, len(loops))
	for i, l := range loops {
		reqs[i] = request{"op": "loader", "n": l.n, "seed": l.seed, "mode": l.mode, "batch": l.batch,
			"drop_last": l.dropLast, "workers": l.workers, "persistent": l.persistent, "epochs": epochs}
		if l.numSamples > 0 {
			reqs[i]["num_samples"] = l.numSamples
		}
	}
	a := oracle(t, reqs, false)
	for i, l := range loops {
		want := decode[[][]int](t, a[i])
		s := mustNew(t, Spec{Sampler: KindRandom, Len: l.n, Seed: l.seed, Generator: l.mode,
			BatchSize: l.batch, DropLastBatch: l.dropLast, PersistentWorkers: l.persistent, NumSamples: l.numSamples})
		for e := 0; e < epochs; e++ {
			if got := s.Epoch(e); !slices.Equal(got, want[e]) {
				t.Fatalf("%+v epoch %d:\ngot  %s\nwant %s", l, e, short(got), short(want[e]))
			}
		}
	}
	t.Logf("%d DataLoader loops × %d epochs equal to torch", len(loops), epochs)
}
