package shim

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/augur-hpc/augur/seed"
	"golang.org/x/sys/unix"
)

// Prediction is the access order the configuration describes: the dataset
// root listed as the layout lists it, and the samplers of this node's
// ranks (package seed reproduces them bit for bit). augur plan shows it;
// the clairvoyant policy starts from it, and learns from the job where the
// job reads otherwise (learn.go).
type Prediction struct {
	Root  string
	Cat   *seed.Catalog // the root's walk: every directory a dataset could be
	DS    *seed.Dataset // the root itself as a dataset; nil when it is none (train/ and val/ under it)
	Why   error         // why DS is nil
	Ranks []int         // global ranks on this node, by local rank

	spec     seed.Spec            // the samplers', but for the rank
	mu       sync.Mutex           // guards samplers and cache
	samplers map[int]seed.Sampler // by global rank
	cache    map[[2]int][]int     // (rank, epoch) → order; a few entries
}

// Predict walks the dataset as the training script would list it and
// prepares the sampler of each of this node's ranks. listed, when not
// nil, is told of the directory entries listed so far. A root that is
// no dataset of the layout itself (its datasets are below it) gives a
// Prediction without DS, and the reason in Why.
func Predict(cfg *Config, listed func(n int)) (*Prediction, error) {
	if len(cfg.Roots) != 1 {
		return nil, fmt.Errorf("the clairvoyant policy needs exactly one dataset root, not %d", len(cfg.Roots))
	}
	a := cfg.Access
	root := cfg.Roots[0]
	cat, err := catalog(root, a.Layout, listed)
	if err != nil {
		return nil, fmt.Errorf("dataset layout: %w", err)
	}
	if cat.NumFiles() == 0 {
		if _, err := cat.Dataset(""); err != nil { // the layout's own words: "no class folder"
			return nil, fmt.Errorf("dataset layout: %w", err)
		}
		return nil, fmt.Errorf("dataset layout %q finds no files under %s", a.Layout, root)
	}
	p := &Prediction{Root: root, Cat: cat, samplers: map[int]seed.Sampler{}, cache: map[[2]int][]int{}}
	if p.DS, p.Why = cat.Dataset(""); p.Why != nil {
		return p, nil
	}
	p.spec = seed.Spec{Sampler: a.Sampler, Len: p.DS.Len(), Seed: cfg.Seed, Replicas: a.WorldSize,
		NoShuffle: !a.Shuffle, DropLast: a.DropLast, BatchSize: a.BatchSize, Torch: a.Torch,
		Layout: p.DS.Rels(), Root: root}
	if !strings.HasPrefix(a.Sampler, seed.KindFilePrefix) {
		p.spec.Layout = nil // only order files name files
	}
	for local := 0; local < a.RanksPerNode; local++ {
		g := a.NodeRank*a.RanksPerNode + local
		if g >= a.WorldSize {
			break
		}
		if err := p.AddRank(g); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// catalog walks root for a configured layout; a list layout is the
// catalog of the files it lists, in its order.
func catalog(root, layout string, listed func(n int)) (*seed.Catalog, error) {
	switch {
	case layout == "flat":
		return seed.NewCatalog(root, seed.LayoutFiles, listed)
	case strings.HasPrefix(layout, seed.LayoutListPrefix):
		rels, err := seed.FileList(strings.TrimPrefix(layout, seed.LayoutListPrefix))
		if err != nil {
			return nil, err
		}
		return seed.ListCatalog(root, rels), nil
	}
	return seed.NewCatalog(root, layout, listed)
}

// AddRank predicts the order of global rank g too (one the configuration
// did not place on this node, whose events name it).
func (p *Prediction) AddRank(g int) error {
	if p.DS == nil {
		return fmt.Errorf("no dataset at %s: %w", p.Root, p.Why)
	}
	spec := p.spec
	spec.Rank = g
	s, err := seed.New(spec)
	if err != nil {
		return fmt.Errorf("sampler: %w", err)
	}
	p.mu.Lock()
	p.samplers[g] = s
	p.mu.Unlock()
	p.Ranks = append(p.Ranks, g)
	return nil
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

// Len is the dataset's length.
func (p *Prediction) Len() int {
	if p.DS == nil {
		return 0
	}
	return p.DS.Len()
}

// Path is the path of dataset index i.
func (p *Prediction) Path(i int) string { return p.Cat.Path(p.DS.File(i)) }

// statters is how many stats Sizes has in flight: each is a metadata
// round trip to the shared filesystem, which serves many at once.
const statters = 64

// unknownSize marks a file not stat'ed yet; -1 is one that cannot be.
const unknownSize = -2

// Sizes stats every file of the dataset (in parallel: each is a metadata
// round trip to the shared filesystem). A file that cannot be stat'ed
// gets size -1 and is never placed. stated, when not nil, is told of each
// file stat'ed (n is 1), from the stat workers.
func (p *Prediction) Sizes(stated func(n int)) []int64 {
	all := make([]int, p.Len())
	for i := range all {
		all[i] = i
	}
	sizes := make([]int64, len(all))
	measure(p.Path, all, nil, func(i int, size int64) {
		sizes[i] = size
		if stated != nil {
			stated(1)
		}
	})
	return sizes
}

// measure stats the files path(i) of idx, statters at a time and roughly
// in that order, and hands each size (-1: cannot be stat'ed) to got, from
// the stat workers. It returns when all are done, or soon after quit
// closes.
func measure(path func(int) string, idx []int, quit <-chan struct{}, got func(i int, size int64)) {
	work := make(chan int, statters)
	var wg sync.WaitGroup
	for w := 0; w < statters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				var st unix.Stat_t
				size := int64(-1)
				if statRetry(path(i), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
					size = st.Size
				}
				got(i, size)
			}
		}()
	}
	defer wg.Wait()
	defer close(work)
	for _, i := range idx {
		select {
		case work <- i:
		case <-quit:
			return
		}
	}
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
	pp := p.placer(horizon, capacities)
	pp.advance(sizes)
	return pp.Placement
}

func (p *Prediction) placer(horizon int, capacities []int64) *placer {
	return newPlacer(p.Len(), capacities, func(yield func(int, []int)) {
		for e := 0; e < horizon; e++ {
			for _, r := range p.Ranks {
				yield(e, p.Order(r, e))
			}
		}
	})
}

// placer places the files in ranking order — most often read first,
// equal counts in order of first access — as their sizes become known:
// a file gets the fastest tier with room once every file ranked before
// it has been placed, so placing as sizes arrive, in any order, ends
// where placing with every size known does.
type placer struct {
	Placement
	capacities []int64
	ranking    []int // the files read, in placement order
	pos        []int // per file: its place in ranking, -1 if never read
	next       int   // ranking[:next] are placed
}

// newPlacer ranks n files by the sequences reads yields: each the files
// one rank reads in one epoch (counted from the first one yielded), in
// order of epoch.
func newPlacer(n int, capacities []int64, reads func(yield func(epoch int, seq []int))) *placer {
	pp := &placer{capacities: capacities, pos: make([]int, n),
		Placement: Placement{Tier: make([]int, n), Freq: make([]int, n),
			Bytes: make([]int64, len(capacities)), Files: make([]int, len(capacities))}}
	first := make([]int, n)
	for i := range first {
		first[i] = -1
		pp.Tier[i] = -1
		pp.pos[i] = -1
	}
	firstEpoch := -1
	reads(func(epoch int, seq []int) {
		if firstEpoch < 0 {
			firstEpoch = epoch
		}
		if epoch == firstEpoch {
			pp.Reads += len(seq)
		}
		for pos, idx := range seq {
			pp.Freq[idx]++
			// The ranks read in step: a file's first access is its
			// position in the epoch, whichever rank reads it.
			if step := (epoch-firstEpoch)*n + pos; first[idx] < 0 || step < first[idx] {
				first[idx] = step
			}
		}
	})
	for i := range pp.Freq {
		if pp.Freq[i] > 0 {
			pp.ranking = append(pp.ranking, i)
		}
	}
	sort.Slice(pp.ranking, func(a, b int) bool {
		x, y := pp.ranking[a], pp.ranking[b]
		if pp.Freq[x] != pp.Freq[y] {
			return pp.Freq[x] > pp.Freq[y]
		}
		return first[x] < first[y]
	})
	for k, i := range pp.ranking {
		pp.pos[i] = k
	}
	return pp
}

// advance places the files of the ranking whose sizes are known, up to
// the first one not stat'ed yet, and reports how many it placed.
func (pp *placer) advance(sizes []int64) int {
	from := pp.next
	for ; pp.next < len(pp.ranking); pp.next++ {
		i := pp.ranking[pp.next]
		if sizes[i] == unknownSize {
			break
		}
		if sizes[i] < 0 {
			continue
		}
		for t := range pp.capacities {
			if pp.Bytes[t]+sizes[i] <= pp.capacities[t] {
				pp.Tier[i] = t
				pp.Bytes[t] += sizes[i]
				pp.Files[t]++
				break
			}
		}
	}
	return pp.next - from
}

// PlaceFor applies the clairvoyant policy's placement to tiers of the
// given capacities: it keeps the staging budget out of the first tier
// (Access.Stage, by default an eighth of it) and looks Access.Epochs
// ahead (DefaultHorizon when unknown). The leader and augur plan both
// call it, so the plan is what the leader does. It returns the placement,
// the staging budget and the horizon. caps is modified.
func (p *Prediction) PlaceFor(a Access, sizes, caps []int64) (Placement, int64, int) {
	stage, horizon := placeParams(a, caps)
	return p.Place(horizon, sizes, caps), stage, horizon
}

// placeParams is PlaceFor's staging budget and horizon; it takes the
// budget out of caps[0].
func placeParams(a Access, caps []int64) (stage int64, horizon int) {
	stage = a.Stage
	if stage == 0 && len(caps) > 0 {
		stage = caps[0] / 8
	}
	if len(caps) > 0 {
		caps[0] = max(caps[0]-stage, 0)
	}
	horizon = a.Epochs
	if horizon == 0 {
		horizon = DefaultHorizon
	}
	return stage, horizon
}
