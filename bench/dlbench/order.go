package dlbench

import (
	"bufio"
	"fmt"
	"os"

	"github.com/augur-hpc/augur/seed"
)

// Orders returns the indices every rank reads in every epoch:
// orders[e][r], as the sampler kind (a seed.Spec Sampler, default
// "distributed": torch's DistributedSampler after set_epoch(e)) gives them
// for a dataset of n samples. This is the order a clairvoyant prefetcher
// predicts from the same seed.
func Orders(kind string, n, ranks, epochs int, seedValue int64) ([][][]int, error) {
	if kind == "" {
		kind = seed.KindDistributed
	}
	out := make([][][]int, epochs)
	for e := range out {
		out[e] = make([][]int, ranks)
	}
	for r := 0; r < ranks; r++ {
		s, err := seed.New(seed.Spec{Sampler: kind, Len: n, Seed: seedValue, Replicas: ranks, Rank: r})
		if err != nil {
			return nil, err
		}
		for e := 0; e < epochs; e++ {
			out[e][r] = s.Epoch(e)
		}
	}
	return out, nil
}

// WriteOrder writes orders in the reader's ORDER format.
func WriteOrder(name string, orders [][][]int) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "epochs %d ranks %d\n", len(orders), len(orders[0]))
	for e, ranks := range orders {
		for r, idx := range ranks {
			fmt.Fprintf(w, "%d %d %d", e, r, len(idx))
			for _, i := range idx {
				fmt.Fprintf(w, " %d", i)
			}
			w.WriteByte('\n')
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
