package seed

import (
	"errors"
	"fmt"
	"testing"
)

// loaderOpens is the order in which a DataLoader with workers workers and
// batches of batch opens the first k samples of order: worker w fetches
// batches w, w+workers, ..., the workers one sample each in turn.
func loaderOpens(order []int, batch, workers, k int) []int {
	var out []int
	next := make([]int, workers) // per worker: its next batch, counted in its own
	off := make([]int, workers)  // per worker: the next sample of that batch
	for len(out) < k {
		progress := false
		for w := 0; w < workers && len(out) < k; w++ {
			b := w + next[w]*workers
			if b*batch >= len(order) {
				continue
			}
			progress = true
			out = append(out, order[b*batch+off[w]])
			if off[w]++; off[w] == batch || b*batch+off[w] == len(order) {
				off[w], next[w] = 0, next[w]+1
			}
		}
		if !progress {
			break
		}
	}
	return out
}

// Every world size, rank, epoch and seed below is found from the first
// opens of one rank's DataLoader, with and without the world size given;
// and also from opens in the middle of an epoch, given the epochs to try.
func TestInferDistributed(t *testing.T) {
	for _, n := range []int{1000, 50_000} {
		for _, w := range []int{1, 2, 3, 8} {
			for _, shuffle := range []bool{true, false} {
				for _, c := range []struct {
					seed        int64
					epoch, rank int
				}{{42, 0, 0}, {0, 5, w - 1}, {42, 37, w / 2}} {
					name := fmt.Sprintf("n%d/W%d/shuffle%v/seed%d/epoch%d/rank%d", n, w, shuffle, c.seed, c.epoch, c.rank)
					s := &DistributedSampler{n: n, replicas: w, rank: c.rank, shuffle: shuffle, setEpoch: true, seed: c.seed}
					order := s.Epoch(c.epoch)
					for _, known := range []int{0, w} {
						seen := loaderOpens(order, 4, 3, 24)
						f, err := Infer(n, seen, Hints{Seeds: []int64{42, 0}, EpochTo: 99, Replicas: known, Rank: -1})
						checkFound(t, name, f, err, shuffle, c.seed, c.epoch, w, c.rank)
					}
					mid := loaderOpens(order[len(order)/2:], 4, 3, 24)
					f, err := Infer(n, mid, Hints{Seeds: []int64{42, 0}, EpochFrom: max(c.epoch-2, 0), EpochTo: c.epoch + 2, Rank: -1})
					checkFound(t, name+"/mid-epoch", f, err, shuffle, c.seed, c.epoch, w, c.rank)
				}
			}
		}
	}
}

func checkFound(t *testing.T, name string, f Found, err error, shuffle bool, seed int64, epoch, w, rank int) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if f.Shuffle != shuffle || f.Replicas != w || f.Rank != rank || shuffle && (f.Seed != seed || f.Epoch != epoch) {
		t.Errorf("%s: found %+v", name, f)
	}
}

// Against the real torch: every (world size, rank, epoch) of a
// DistributedSampler over 600 samples, from the first 16 indices of the
// rank's real order.
func TestInferAgainstTorch(t *testing.T) {
	const n, seed = 600, 7
	type c struct{ w, rank, epoch int }
	var cases []c
	var reqs []request
	for w := 1; w <= 4; w++ {
		for r := 0; r < w; r++ {
			for e := 0; e <= 5; e++ {
				cases = append(cases, c{w, r, e})
				reqs = append(reqs, request{"op": "distributed", "n": n, "R": w, "rank": r,
					"shuffle": true, "seed": seed, "drop_last": false, "epoch": e})
			}
		}
	}
	a := oracle(t, reqs, false)
	for i, k := range cases {
		order := decode[[]int](t, a[i])
		f, err := Infer(n, order[:MinSeen], Hints{Seeds: []int64{seed, 0}, EpochTo: 9, Rank: -1})
		checkFound(t, fmt.Sprintf("W%d rank%d epoch%d", k.w, k.rank, k.epoch), f, err, true, seed, k.epoch, k.w, k.rank)
	}
	t.Logf("%d (world size, rank, epoch) found from torch's orders", len(cases))
}

// A seed no candidate has, and too few indices, say so; so few that a
// loader of many workers could have opened them is not yet a "no".
func TestInferRefuses(t *testing.T) {
	s := &DistributedSampler{n: 20_000, replicas: 2, rank: 1, shuffle: true, setEpoch: true, seed: 12345}
	seen := loaderOpens(s.Epoch(3), 8, 2, 256)
	if _, err := Infer(20_000, seen, Hints{Seeds: []int64{42, 0}, Rank: -1}); !errors.Is(err, ErrNoCandidate) {
		t.Errorf("unknown seed: %v, want ErrNoCandidate", err)
	}
	if _, err := Infer(20_000, seen[:32], Hints{Seeds: []int64{42, 0}, Rank: -1}); !errors.Is(err, ErrInconclusive) {
		t.Errorf("unknown seed, 32 opens: %v, want ErrInconclusive", err)
	}
	if _, err := Infer(20_000, seen[:MinSeen-1], Hints{Seeds: []int64{12345}, Rank: -1}); !errors.Is(err, ErrTooFew) {
		t.Errorf("too few: %v, want ErrTooFew", err)
	}
	f, err := Infer(20_000, seen[:32], Hints{Seeds: []int64{42, 12345}, Rank: -1})
	checkFound(t, "the seed among the candidates", f, err, true, 12345, 3, 2, 1)
}

// Large batches read by many workers open samples all over the epoch at
// once (16 workers of 1,024: one sample of each of 16 batches first): the
// runs each worker reads in order tell the sampler once there are a few
// of each, and until then the answer is "see more", never a wrong one.
func TestInferManyWorkers(t *testing.T) {
	for _, c := range []struct{ batch, workers int }{{64, 2}, {256, 4}, {512, 8}, {1024, 16}, {16, 0}} {
		s := &DistributedSampler{n: 20_000, replicas: 2, rank: 1, shuffle: true, setEpoch: true, seed: 42}
		order := s.Epoch(4)
		found := false
		for k := MinSeen; k <= 512 && !found; k *= 2 {
			seen := order[:k]
			if c.workers > 0 {
				seen = loaderOpens(order, c.batch, c.workers, k)
			}
			f, err := Infer(20_000, seen, Hints{Seeds: []int64{42, 0}, Rank: -1})
			switch {
			case err == nil:
				checkFound(t, fmt.Sprintf("batch %d workers %d, %d opens", c.batch, c.workers, k), f, err, true, 42, 4, 2, 1)
				found = true
			case !errors.Is(err, ErrInconclusive):
				t.Errorf("batch %d workers %d, %d opens: %v", c.batch, c.workers, k, err)
			}
		}
		if !found {
			t.Errorf("batch %d workers %d: not found from 512 opens", c.batch, c.workers)
		}
	}
}

func BenchmarkInferEpochStart(b *testing.B) {
	s := &DistributedSampler{n: 1_281_167, replicas: 8, rank: 5, shuffle: true, setEpoch: true, seed: 42}
	seen := loaderOpens(s.Epoch(250), 64, 8, 32)
	for i := 0; i < b.N; i++ {
		if _, err := Infer(1_281_167, seen, Hints{Seeds: []int64{42, 0}, Rank: -1}); err != nil {
			b.Fatal(err)
		}
	}
}

// A rank of a larger world than the hint's is not taken for a rank of
// the hint's world: rank 1 of 2 reads every other position of the
// permutation, which one rank of one would read all of.
func TestInferRefusesASmallerWorld(t *testing.T) {
	s, err := New(Spec{Sampler: KindDistributed, Len: 320, Seed: 42, Replicas: 2, Rank: 1})
	if err != nil {
		t.Fatal(err)
	}
	seen := s.Epoch(0)[:80]
	if f, err := Infer(320, seen, Hints{Seeds: []int64{42}, EpochTo: 1, Replicas: 1, Rank: -1}); err == nil {
		t.Errorf("rank 1 of 2 found as %+v under a hint of one rank", f)
	}
	f, err := Infer(320, seen, Hints{Seeds: []int64{42}, EpochTo: 1, Rank: -1})
	if err != nil || f.Replicas != 2 || f.Rank != 1 || !f.Shuffle || f.Seed != 42 {
		t.Errorf("without the hint: %+v, %v; want rank 1 of 2, seed 42", f, err)
	}
}
