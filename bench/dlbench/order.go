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

// Orders of samples inside files (Workload.Order): what a loader of
// samples inside files reads, built over the sampler's order of larger
// units.
const (
	// OrderSamples: the sampler's order over sample indices (a map-style
	// dataset: h5py or np.memmap indexed sample by sample). The default.
	OrderSamples = "samples"
	// OrderGroups: the sampler's order over groups of Workload.Group
	// contiguous samples of one file, each group read front to back:
	// CosmoFlow's (seed 003) reads of a shuffled group at a time.
	OrderGroups = "groups"
	// OrderShards: the sampler's order over files (shards), each rank's
	// shards dealt to its workers in turn, each worker reading its shards'
	// samples in file order, its batches taken from the workers in turn:
	// WebDataset's shard shuffle, split_by_node and split_by_worker under
	// a DataLoader.
	OrderShards = "shards"
)

// DefaultGroup is the samples of a group of OrderGroups: seed 003's 16.
const DefaultGroup = 16

// jobOrders returns what each of ranks ranks reads in every epoch of w
// over ds: orders[e][r], sample indices.
func jobOrders(w Workload, ds *Dataset, ranks int) ([][][]int, error) {
	switch w.Order {
	case "", OrderSamples:
		return Orders(w.Sampler, len(ds.Samples), ranks, w.Epochs, w.Seed)
	case OrderGroups:
		group := w.Group
		if group == 0 {
			group = DefaultGroup
		}
		return unitOrders(w, runs(ds.Samples, group), ranks, nil)
	case OrderShards:
		return unitOrders(w, runs(ds.Samples, 0), ranks, func(r int, shards [][]int) ([]int, error) {
			return dealShards(r, shards, max(w.Workers, 1), w.Batch)
		})
	}
	return nil, fmt.Errorf("order %q: want %s, %s or %s", w.Order, OrderSamples, OrderGroups, OrderShards)
}

// runs cuts the samples, in index order, into runs of contiguous indices
// of one file, of at most limit samples (0: no limit): groups, or shards.
func runs(samples []Sample, limit int) [][]int {
	var out [][]int
	for i, s := range samples {
		n := len(out)
		if n == 0 || samples[i-1].Path != s.Path || limit > 0 && len(out[n-1]) == limit {
			out = append(out, nil)
			n++
		}
		out[n-1] = append(out[n-1], i)
	}
	return out
}

// unitOrders orders units (runs of sample indices) by w's sampler, as if
// they were the samples, and expands each rank's units into samples:
// whole, one after the other, or as deal arranges them.
func unitOrders(w Workload, units [][]int, ranks int, deal func(rank int, units [][]int) ([]int, error)) ([][][]int, error) {
	per, err := Orders(w.Sampler, len(units), ranks, w.Epochs, w.Seed)
	if err != nil {
		return nil, err
	}
	out := make([][][]int, w.Epochs)
	for e := range per {
		out[e] = make([][]int, ranks)
		for r, idx := range per[e] {
			mine := make([][]int, len(idx))
			for k, u := range idx {
				mine[k] = units[u]
			}
			if deal != nil {
				if out[e][r], err = deal(r, mine); err != nil {
					return nil, err
				}
				continue
			}
			for _, u := range mine {
				out[e][r] = append(out[e][r], u...)
			}
		}
	}
	return out, nil
}

// dealShards is a rank's read order over its shards: worker k of workers
// reads shards k, k+workers, ... in turn, each front to back, and batch b
// is worker b mod workers's next batch, as dlreader hands batches to its
// workers. Every worker must read the same whole number of batches:
// dlreader's batches are all full but the last.
func dealShards(rank int, shards [][]int, workers, batch int) ([]int, error) {
	streams := make([][]int, workers)
	for k, s := range shards {
		streams[k%workers] = append(streams[k%workers], s...)
	}
	n := len(streams[0])
	for _, s := range streams {
		if workers > 1 && (len(s) != n || n%batch != 0) {
			var lens []int
			for _, s := range streams {
				lens = append(lens, len(s))
			}
			return nil, fmt.Errorf("order shards: rank %d's %d shards give its %d workers %v samples: "+
				"each worker must read as many whole batches of %d", rank, len(shards), workers, lens, batch)
		}
	}
	var out []int
	for b := 0; b*batch < n; b++ {
		for _, s := range streams {
			out = append(out, s[b*batch:min((b+1)*batch, len(s))]...)
		}
	}
	return out, nil
}
