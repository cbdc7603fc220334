package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"github.com/augur-hpc/augur/seed"
)

// files is a dataset as the simulator sees it: each file's size, by
// dataset index, and its path (for HVAC's ownership, a hash of it).
type files struct {
	sizes []int32
	path  func(i int) string
	bytes int64
}

// makeFiles draws the synthetic dataset of d (the same for the same seed),
// or lists d.Dir as an ImageFolder does and stats its files.
func makeFiles(d Dataset, seedv int64) (*files, error) {
	if d.Dir != "" {
		return listFiles(d.Dir)
	}
	r := rand.New(rand.NewPCG(uint64(seedv), 0x5eed))
	f := &files{sizes: make([]int32, d.Count), path: func(i int) string { return fmt.Sprintf("/dataset/train/%08d.jpg", i) }}
	// Log-normal with the given mean and deviation: NoPFS's σ is about
	// its mean, where a normal distribution would go below zero one
	// time in seven, and truncating it would raise the mean by a quarter.
	s2 := math.Log(1 + d.Sigma*d.Sigma/(d.Mean*d.Mean))
	mu := math.Log(d.Mean) - s2/2
	for i := range f.sizes {
		v := math.Exp(mu + math.Sqrt(s2)*r.NormFloat64())
		f.sizes[i] = int32(min(max(math.Round(v), 1), 1<<31-1))
		f.bytes += int64(f.sizes[i])
	}
	return f, nil
}

// listFiles is dir's ImageFolder, by seed's catalog (the order the
// training script lists it in), with sizes from stat.
func listFiles(dir string) (*files, error) {
	cat, err := seed.NewCatalog(dir, seed.LayoutImageFolder, nil)
	if err != nil {
		return nil, err
	}
	ds, err := cat.Dataset("")
	if err != nil {
		return nil, err
	}
	f := &files{sizes: make([]int32, ds.Len()), path: func(i int) string { return cat.Path(ds.File(i)) }}
	for i := range f.sizes {
		st, err := os.Stat(f.path(i))
		if err != nil {
			return nil, err
		}
		f.sizes[i] = int32(min(st.Size(), 1<<31-1))
		f.bytes += int64(f.sizes[i])
	}
	return f, nil
}
