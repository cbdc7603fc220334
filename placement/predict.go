package placement

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/augur-hpc/augur/seed"
	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
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

// statters is how many stats Sizes has in flight: each is a metadata
// round trip to the shared filesystem, which serves many at once.
const statters = 64

// UnknownSize marks a file not stat'ed yet; -1 is one that cannot be.
const UnknownSize = -2

// Sizes stats every file of the dataset (in parallel: each is a metadata
// round trip to the shared filesystem). A file that cannot be stat'ed
// gets size -1 and is never placed. stated, when not nil, is told of each
// file stat'ed (n is 1), from the stat workers.
func (p *Prediction) Sizes(stated func(n int)) []int64 {
	all := make([]int32, p.Len())
	for i := range all {
		all[i] = int32(i)
	}
	sizes := make([]int64, len(all))
	Measure(p.Path, all, nil, func(i int, size int64) {
		sizes[i] = size
		if stated != nil {
			stated(1)
		}
	})
	return sizes
}

// Measure stats the files path(i) of idx, statters at a time and roughly
// in that order, and hands each size (-1: cannot be stat'ed) to got, from
// the stat workers. It returns when all are done, or soon after quit
// closes.
func Measure(path func(int) string, idx []int32, quit <-chan struct{}, got func(i int, size int64)) {
	work := make(chan int, statters)
	var wg sync.WaitGroup
	for w := 0; w < statters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				var st unix.Stat_t
				size := int64(-1)
				if tiering.Stat(path(i), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
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
		case work <- int(i):
		case <-quit:
			return
		}
	}
}

// Placement is what goes where: NoPFS's rule.
type Placement struct {
	Tier  []int8  // per file: the tier assigned, or -1 (staged when read)
	Freq  []int32 // per file: reads by this node's ranks over the horizon
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

// Placer places the files in ranking order — most often read first,
// equal counts in order of first access — as their sizes become known:
// a file gets the fastest tier with room once every file ranked before
// it has been placed, so placing as sizes arrive, in any order, ends
// where placing with every size known does. It keeps 13 bytes per file.
type Placer struct {
	Placement
	capacities []int64
	ranking    []int32 // the files read, in placement order
	pos        []int32 // per file: its place in ranking, -1 if never read
	next       int     // ranking[:next] are placed
}

// Ranking is the files read, in placement order. It is pp's own: the
// caller must not modify it, and Keep and Prefer replace it.
func (pp *Placer) Ranking() []int32 { return pp.ranking }

// Rank is file f's place in the ranking, -1 for a file never read.
func (pp *Placer) Rank(f int) int { return int(pp.pos[f]) }

// Placed is how many files of the ranking are placed: Advance places
// them in ranking order, up to the first whose size is not known.
func (pp *Placer) Placed() int { return pp.next }

// clone is a copy of pp, nothing placed yet, whose preferring and
// placing leave pp as it is (the counts and the ranking they replace are
// shared).
func (pp *Placer) clone() *Placer {
	c := *pp
	c.pos = slices.Clone(pp.pos)
	c.Tier = slices.Clone(pp.Tier)
	c.Bytes = slices.Clone(pp.Bytes)
	c.Files = slices.Clone(pp.Files)
	return &c
}

// ReadSeq is the files one rank reads in one epoch: its order of dataset
// indices, and the file of each (nil: the index is the file).
type ReadSeq struct {
	Order seed.Order
	File  func(idx int) int
}

// NewPlacer ranks n files by the reads of horizon epochs, reads(e) being
// the sequences the ranks read in the e-th (from 0).
func NewPlacer(n int, capacities []int64, horizon int, reads func(e int) []ReadSeq) *Placer {
	pp := &Placer{capacities: capacities, pos: make([]int32, n),
		Placement: Placement{Tier: make([]int8, n), Freq: make([]int32, n),
			Bytes: make([]int64, len(capacities)), Files: make([]int, len(capacities))}}
	// The ranks read in step: visiting the epochs' positions in order,
	// every rank's at each, meets the files in order of first access,
	// whichever rank reads them.
	met := make([]int32, 0, n)
	var lens []int
	for e := 0; e < horizon; e++ {
		seqs := reads(e)
		longest := 0
		lens = lens[:0]
		for _, s := range seqs {
			n := s.Order.Len()
			lens = append(lens, n)
			longest = max(longest, n)
			if e == 0 {
				pp.Reads += n
			}
		}
		for k := 0; k < longest; k++ {
			for x, s := range seqs {
				if k >= lens[x] {
					continue
				}
				f := s.Order.At(k)
				if s.File != nil {
					f = s.File(f)
				}
				if pp.Freq[f] == 0 {
					met = append(met, int32(f))
				}
				pp.Freq[f]++
			}
		}
	}
	pp.ranking = byFrequency(met, pp.Freq)
	for i := range pp.Tier {
		pp.Tier[i], pp.pos[i] = -1, -1
	}
	for k, i := range pp.ranking {
		pp.pos[i] = int32(k)
	}
	return pp
}

// Keep ranks, among files read equally often, those a tier already holds
// first, the fastest tier's first, before anything is placed, so that a
// plan made again for tiers of another room keeps the copies the last
// one made (shim's clairvoyant.resize). tier(f) is the tier holding f, or -1;
// tiers is how many there are. Stable.
func (pp *Placer) Keep(tier func(f int32) int, tiers int) {
	var most int32
	for _, f := range pp.ranking {
		most = max(most, pp.Freq[f])
	}
	key := func(f int32) int {
		t := tier(f)
		if t < 0 || t >= tiers {
			t = tiers
		}
		return int(most-pp.Freq[f])*(tiers+1) + t
	}
	start := make([]int, int(most+1)*(tiers+1)+1)
	for _, f := range pp.ranking {
		start[key(f)+1]++
	}
	for k := 1; k < len(start); k++ {
		start[k] += start[k-1]
	}
	out := make([]int32, len(pp.ranking))
	for _, f := range pp.ranking {
		k := &start[key(f)]
		out[*k] = f
		*k++
	}
	pp.ranking = out
	for k, f := range out {
		pp.pos[f] = int32(k)
	}
}

// Prefer puts the files first says at the front of the ranking before
// anything is placed: a node of a job of several places the files it
// holds for the job (shim/holders.go) before any other, so that the nodes'
// tiers hold every file once before any twice. Those its own ranks read
// within the horizon come first, in ranking order, then those it holds
// for the other nodes only (by file): without them the node would drop,
// once its own ranks are done with them, copies the others still ask for.
func (pp *Placer) Prefer(first func(f int32) bool) {
	is := make([]bool, len(pp.pos)) // first, asked once a file
	for f := range is {
		is[f] = first(int32(f))
	}
	out := make([]int32, 0, len(pp.ranking))
	for _, f := range pp.ranking {
		if is[f] {
			out = append(out, f)
		}
	}
	for f, k := range pp.pos {
		if k < 0 && is[f] {
			out = append(out, int32(f))
		}
	}
	for _, f := range pp.ranking {
		if !is[f] {
			out = append(out, f)
		}
	}
	pp.ranking = out
	for k, f := range out {
		pp.pos[f] = int32(k)
	}
}

// byFrequency sorts files, met in order of first access, most often read
// first and stably (a counting sort: the counts are small), in place.
func byFrequency(met []int32, freq []int32) []int32 {
	var most int32
	for _, f := range met {
		most = max(most, freq[f])
	}
	start := make([]int, most+2) // start[most-c]: where count c begins
	for _, f := range met {
		start[most-freq[f]+1]++
	}
	for c := 1; c < len(start); c++ {
		start[c] += start[c-1]
	}
	out := make([]int32, len(met))
	for _, f := range met {
		k := &start[most-freq[f]]
		out[*k] = f
		*k++
	}
	return out
}

// Staged is the share of the files read that the placement keeps in no
// tier, which are staged for each read; 1 until every file read is
// placed (the share is not known yet: staging may need all of it).
func (pp *Placer) Staged() float64 {
	if len(pp.ranking) == 0 || pp.next < len(pp.ranking) {
		return 1
	}
	kept := 0
	for _, n := range pp.Files {
		kept += n
	}
	return float64(len(pp.ranking)-kept) / float64(len(pp.ranking))
}

// Advance places the files of the ranking whose sizes are known, up to
// the first one not stat'ed yet, and reports how many it placed.
func (pp *Placer) Advance(sizes []int64) int {
	from := pp.next
	for ; pp.next < len(pp.ranking); pp.next++ {
		i := int(pp.ranking[pp.next])
		if sizes[i] == UnknownSize {
			break
		}
		if sizes[i] < 0 {
			continue
		}
		for t := range pp.capacities {
			if pp.Bytes[t]+sizes[i] <= pp.capacities[t] {
				pp.Tier[i] = int8(t)
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
