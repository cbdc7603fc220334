package shim

import (
	"fmt"
	"path/filepath"
	"sort"
	"sync"

	"github.com/augur-hpc/augur/seed"
	"golang.org/x/sys/unix"
)

// Prediction is the access order of this node's ranks, computed from the
// seed before training starts (package seed reproduces the samplers bit
// for bit).
type Prediction struct {
	Root  string
	Files []string // absolute paths, by dataset index
	Ranks []int    // global ranks on this node, by local rank
	index map[string]int

	mu       sync.Mutex           // guards samplers and cache
	samplers map[int]seed.Sampler // by global rank
	cache    map[[2]int][]int     // (rank, epoch) → order; a few entries
}

// Predict lists the dataset as the training script will (the layout) and
// prepares the sampler of each of this node's ranks.
func Predict(cfg *Config) (*Prediction, error) {
	if len(cfg.Roots) != 1 {
		return nil, fmt.Errorf("the clairvoyant policy needs exactly one dataset root, not %d", len(cfg.Roots))
	}
	a := cfg.Access
	root := cfg.Roots[0]
	layout := a.Layout
	if layout == "flat" {
		layout = seed.LayoutFiles
	}
	rel, err := seed.NewLayout(layout, root)
	if err != nil {
		return nil, fmt.Errorf("dataset layout: %w", err)
	}
	if len(rel) == 0 {
		return nil, fmt.Errorf("dataset layout %q finds no files under %s", a.Layout, root)
	}
	p := &Prediction{Root: root, index: map[string]int{}, samplers: map[int]seed.Sampler{},
		cache: map[[2]int][]int{}}
	for i, r := range rel {
		abs := r
		if !filepath.IsAbs(r) {
			abs = filepath.Join(root, r)
		}
		p.Files = append(p.Files, abs)
		p.index[abs] = i
	}
	for local := 0; local < a.RanksPerNode; local++ {
		g := a.NodeRank*a.RanksPerNode + local
		if g >= a.WorldSize {
			break
		}
		s, err := seed.New(seed.Spec{Sampler: a.Sampler, Len: len(rel), Seed: cfg.Seed,
			Replicas: a.WorldSize, Rank: g, NoShuffle: !a.Shuffle, DropLast: a.DropLast,
			BatchSize: a.BatchSize, Torch: a.Torch, Layout: rel, Root: root})
		if err != nil {
			return nil, fmt.Errorf("sampler: %w", err)
		}
		p.Ranks = append(p.Ranks, g)
		p.samplers[g] = s
	}
	return p, nil
}

// Order is the sequence of dataset indices rank reads in epoch.
func (p *Prediction) Order(rank, epoch int) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := [2]int{rank, epoch}
	if o, ok := p.cache[key]; ok {
		return o
	}
	s, ok := p.samplers[rank]
	if !ok {
		return nil
	}
	if len(p.cache) > 4*len(p.samplers) {
		p.cache = map[[2]int][]int{}
	}
	o := s.Epoch(epoch)
	p.cache[key] = o
	return o
}

// Index returns the dataset index of an absolute path.
func (p *Prediction) Index(path string) (int, bool) {
	i, ok := p.index[path]
	return i, ok
}

// statters is how many stats Sizes has in flight: each is a metadata
// round trip to the shared filesystem, which serves many at once.
const statters = 64

// Sizes stats every file (in parallel: each is a metadata round trip to
// the shared filesystem). A file that cannot be stat'ed gets size -1 and
// is never placed.
func (p *Prediction) Sizes() []int64 {
	sizes := make([]int64, len(p.Files))
	work := make(chan int, 256)
	var wg sync.WaitGroup
	for w := 0; w < statters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				var st unix.Stat_t
				if statRetry(p.Files[i], &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
					sizes[i] = st.Size
				} else {
					sizes[i] = -1
				}
			}
		}()
	}
	for i := range p.Files {
		work <- i
	}
	close(work)
	wg.Wait()
	return sizes
}

// Placement is what goes where: NoPFS's rule.
type Placement struct {
	Tier  []int   // per file: the tier assigned, or -1 (staged when read)
	Freq  []int   // per file: reads by this node's ranks over the horizon
	Bytes []int64 // per tier: bytes assigned
	Files []int   // per tier: files assigned
	// Reads is the node's reads per epoch (all ranks), for expected hits.
	Reads int
}

// Place counts how often this node's ranks read each file over horizon
// epochs and gives the most frequently read files the fastest tier, then
// the next, until each is full (capacities); among equals the file read
// first goes first, so the files epoch 1 needs first are placed first.
func (p *Prediction) Place(horizon int, sizes []int64, capacities []int64) Placement {
	n := len(p.Files)
	pl := Placement{Tier: make([]int, n), Freq: make([]int, n),
		Bytes: make([]int64, len(capacities)), Files: make([]int, len(capacities))}
	first := make([]int, n)
	for i := range first {
		first[i] = -1
		pl.Tier[i] = -1
	}
	for e := 0; e < horizon; e++ {
		for _, r := range p.Ranks {
			o := p.Order(r, e)
			if e == 0 {
				pl.Reads += len(o)
			}
			for pos, idx := range o {
				pl.Freq[idx]++
				if step := e*n + pos; first[idx] < 0 || step < first[idx] {
					first[idx] = step
				}
			}
		}
	}
	var cands []int
	for i := range pl.Freq {
		if pl.Freq[i] > 0 && sizes[i] >= 0 {
			cands = append(cands, i)
		}
	}
	sort.Slice(cands, func(a, b int) bool {
		x, y := cands[a], cands[b]
		if pl.Freq[x] != pl.Freq[y] {
			return pl.Freq[x] > pl.Freq[y]
		}
		return first[x] < first[y]
	})
	for _, i := range cands {
		for t := range capacities {
			if pl.Bytes[t]+sizes[i] <= capacities[t] {
				pl.Tier[i] = t
				pl.Bytes[t] += sizes[i]
				pl.Files[t]++
				break
			}
		}
	}
	return pl
}

// PlaceFor applies the clairvoyant policy's placement to tiers of the
// given capacities: it keeps the staging budget out of the first tier
// (Access.Stage, by default an eighth of it) and looks Access.Epochs
// ahead (DefaultHorizon when unknown). The leader and augur plan both
// call it, so the plan is what the leader does. It returns the placement,
// the staging budget and the horizon. caps is modified.
func (p *Prediction) PlaceFor(a Access, sizes, caps []int64) (Placement, int64, int) {
	stage := a.Stage
	if stage == 0 && len(caps) > 0 {
		stage = caps[0] / 8
	}
	if len(caps) > 0 {
		caps[0] = max(caps[0]-stage, 0)
	}
	horizon := a.Epochs
	if horizon == 0 {
		horizon = DefaultHorizon
	}
	return p.Place(horizon, sizes, caps), stage, horizon
}
