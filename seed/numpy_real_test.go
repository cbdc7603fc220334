package seed

import (
	"encoding/json"
	"testing"
)

var numpySizes = []int{0, 1, 2, 3, 10, 100, 1000, 65537}

type numpyAnswer struct {
	Perms []json.RawMessage `json:"perms"`
	Raw   []uint64          `json:"raw"`
}

// RandomState(seed) and RandomState([key...]): the raw MT19937 stream and
// three permutations drawn one after another, as a loader that seeds once
// draws them epoch after epoch.
func TestNumpyRandomStateAgainstNumpy(t *testing.T) {
	const epochs, raw = 3, 1300
	type c struct {
		seed uint32
		key  []uint32
		n    int
	}
	var cases []c
	for _, s := range []uint32{0, 1, 42, 123456, 1<<32 - 1} {
		for _, n := range numpySizes {
			cases = append(cases, c{seed: s, n: n})
		}
	}
	long := make([]uint32, 700) // longer than the 624-word state
	for i := range long {
		long[i] = uint32(i*2654435761 + 1)
	}
	for _, k := range [][]uint32{{0}, {1, 2, 3}, {1<<32 - 1, 0, 7}, long} {
		cases = append(cases, c{key: k, n: 1000})
	}
	reqs := make([]request, len(cases))
	for i, k := range cases {
		reqs[i] = request{"op": "np_legacy", "seed": k.seed, "n": k.n, "epochs": epochs, "raw": raw, "digest": k.n > 100}
		if k.key != nil {
			reqs[i]["key"] = k.key
		}
	}
	a := oracle(t, reqs, false)
	for i, k := range cases {
		want := decode[numpyAnswer](t, a[i])
		mk := func() *NumpyRandomState {
			if k.key != nil {
				return NewNumpyRandomStateArray(k.key)
			}
			return NewNumpyRandomState(k.seed)
		}
		r := mk()
		for j, w := range want.Raw {
			if got := r.next32(); uint64(got) != w {
				t.Fatalf("RandomState(%v %v) raw %d = %d, numpy %d", k.seed, k.key, j, got, w)
			}
		}
		r = mk()
		for e := 0; e < epochs; e++ {
			if diff, ok := sameList(t, r.Permutation(k.n), want.Perms[e]); !ok {
				t.Fatalf("RandomState(%v %v).permutation(%d) #%d: %s", k.seed, k.key, k.n, e, diff)
			}
		}
	}
	t.Logf("%d RandomState cases × %d permutations equal to numpy", len(cases), epochs)
}

// default_rng(seed): the raw PCG64 stream (which checks SeedSequence) and
// three permutations in a row.
func TestNumpyGeneratorAgainstNumpy(t *testing.T) {
	const epochs, raw = 3, 50
	var reqs []request
	type c struct {
		seed uint64
		n    int
	}
	var cases []c
	for _, s := range []uint64{0, 1, 42, 1 << 32, 1<<32 - 1, 1<<63 + 5, 12345678901234567890} {
		for _, n := range numpySizes {
			cases = append(cases, c{s, n})
			reqs = append(reqs, request{"op": "np_gen", "seed": s, "n": n, "epochs": epochs, "raw": raw, "digest": n > 100})
		}
	}
	a := oracle(t, reqs, false)
	for i, k := range cases {
		want := decode[numpyAnswer](t, a[i])
		g := NewNumpyGenerator(k.seed)
		for j, w := range want.Raw {
			if got := g.next64(); got != w {
				t.Fatalf("default_rng(%d) raw %d = %d, numpy %d", k.seed, j, got, w)
			}
		}
		g = NewNumpyGenerator(k.seed)
		for e := 0; e < epochs; e++ {
			if diff, ok := sameList(t, g.Permutation(k.n), want.Perms[e]); !ok {
				t.Fatalf("default_rng(%d).permutation(%d) #%d: %s", k.seed, k.n, e, diff)
			}
		}
	}
	t.Logf("%d default_rng cases × %d permutations equal to numpy", len(cases), epochs)
}

// The numpy samplers through Spec: one generator per run, or reseeded with
// seed+epoch each epoch, sharded perm[rank::R].
func TestNumpySamplerAgainstNumpy(t *testing.T) {
	const epochs = 3
	var reqs []request
	var specs []Spec
	for _, legacy := range []bool{false, true} {
		kind := KindNumpy
		if legacy {
			kind = KindNumpyLegacy
		}
		for _, n := range []int{1, 9, 500} {
			for _, r := range []int{1, 3} {
				for rank := 0; rank < r; rank++ {
					sp := Spec{Sampler: kind, Len: n, Seed: 77, Replicas: r, Rank: rank}
					specs = append(specs, sp)
					reqs = append(reqs, request{"op": "np_stream_shard", "legacy": legacy, "seed": 77, "n": n,
						"R": r, "rank": rank, "epochs": epochs})
					sp.Reseed = true
					specs = append(specs, sp)
					reqs = append(reqs, request{"op": "np_reseed", "legacy": legacy, "seed": 77, "n": n,
						"R": r, "rank": rank, "epochs": epochs})
				}
			}
		}
	}
	a := oracle(t, reqs, false)
	for i, sp := range specs {
		want := decode[[]json.RawMessage](t, a[i])
		s := mustNew(t, sp)
		for e := 0; e < epochs; e++ {
			if diff, ok := sameList(t, s.Epoch(e), want[e]); !ok {
				t.Fatalf("%+v epoch %d: %s", sp, e, diff)
			}
		}
	}
}
