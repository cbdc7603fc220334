// The access order the configuration predicts (Prediction): the dataset
// walked as the layout lists it, each rank's sampler; and its placement
// in tiers of given capacities (PlaceFor, as the leader and augur plan
// place it).

package placement

import (
	"fmt"
	"strings"
	"sync"

	"github.com/augur-hpc/augur/seed"
)

// Prediction is the access order the configuration describes: the dataset
// root listed as the layout lists it, and the samplers of this node's
// ranks (package seed reproduces them bit for bit). augur plan shows it;
// the clairvoyant policy starts from it, and learns from the job where the
// job reads otherwise (shim/learn.go).
type Prediction struct {
	Root  string
	Cat   *seed.Catalog // the root's walk: every directory a dataset could be
	DS    *seed.Dataset // the root itself as a dataset; nil when it is none (train/ and val/ under it)
	Why   error         // why DS is nil
	Ranks []int         // global ranks on this node, by local rank

	spec     seed.Spec            // the samplers', but for the rank
	mu       sync.Mutex           // guards samplers
	samplers map[int]seed.Sampler // by global rank
	perms    Perms
}

// Predict walks the dataset root (the configuration's roots: exactly
// one) as the training script would list it and prepares the sampler,
// drawing from jobSeed, of each of this node's ranks. listed, when not nil,
// is told of the directory entries listed so far. A root that is no
// dataset of the layout itself (its datasets are below it) gives a
// Prediction without DS, and the reason in Why.
func Predict(roots []string, jobSeed int64, a Access, listed func(n int)) (*Prediction, error) {
	if len(roots) != 1 {
		return nil, fmt.Errorf("the clairvoyant policy needs exactly one dataset root, not %d", len(roots))
	}
	root := roots[0]
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
	p := &Prediction{Root: root, Cat: cat, samplers: map[int]seed.Sampler{}}
	if p.DS, p.Why = cat.Dataset(""); p.Why != nil {
		return p, nil
	}
	p.spec = seed.Spec{Sampler: a.Sampler, Len: p.DS.Len(), Seed: jobSeed, Replicas: a.WorldSize,
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

// Reads is the order of dataset indices rank reads in epoch; nil for a
// rank not predicted.
func (p *Prediction) Reads(rank, epoch int) seed.Order {
	s := p.Sampler(rank)
	if s == nil {
		return nil
	}
	return p.perms.OrderOf(s, epoch, p.Len())
}

// Sampler is global rank's sampler, nil if it is not predicted.
func (p *Prediction) Sampler(rank int) seed.Sampler {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.samplers[rank]
}

// Perms is the permutations the node's orders share: a cursor that
// follows one of p's datasets draws its epochs through it too.
func (p *Prediction) Perms() *Perms { return &p.perms }

// Order is Reads as a list.
func (p *Prediction) Order(rank, epoch int) []int {
	o := p.Reads(rank, epoch)
	if o == nil {
		return nil
	}
	return seed.Indices(o)
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

// Place counts how often this node's ranks read each file over horizon
// epochs and gives the most frequently read files the fastest tier, then
// the next, until each is full (capacities); among equals the file read
// first goes first, so the files epoch 1 needs first are placed first.
func (p *Prediction) Place(horizon int, sizes []int64, capacities []int64) Placement {
	pp := p.placer(horizon, capacities)
	pp.Advance(sizes)
	return pp.Placement
}

func (p *Prediction) placer(horizon int, capacities []int64) *Placer {
	return NewPlacer(p.Len(), capacities, horizon, func(e int) []ReadSeq {
		var seqs []ReadSeq
		for _, r := range p.Ranks {
			seqs = append(seqs, ReadSeq{Order: p.Reads(r, e)})
		}
		return seqs
	})
}

// PlaceFor applies the clairvoyant policy's placement to tiers of the
// given capacities: it keeps the staging budget out of the first tier
// (Access.Stage, by default an eighth of it) and looks Access.Epochs
// ahead (DefaultHorizon when unknown). The leader and augur plan both
// call it, so the plan is what the leader does. It returns the placement,
// the staging budget and the horizon. caps is modified.
func (p *Prediction) PlaceFor(a Access, sizes, caps []int64) (Placement, int64, int) {
	stage, horizon := Params(a, caps)
	return p.Place(horizon, sizes, caps), stage, horizon
}

// Params is PlaceFor's staging budget and horizon; it takes the
// budget out of caps[0].
func Params(a Access, caps []int64) (stage int64, horizon int) {
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
