// The clairvoyant policy: its state, made from the configuration's
// prediction (planClairvoyant), started and closed. The rest of it is
// one file a part: cursor.go (the cursors), follow.go (opens matched
// with them), plan.go (placement and the staging budget), pump.go
// (prefetching in order), copies.go (each file's copy), staging.go
// (copies for one read), learn.go (streams and inference) and holders.go
// (who holds a file in a job of several nodes).

package shim

import (
	"sync"
	"time"

	"github.com/augur-hpc/augur/fetchpool"
	"github.com/augur-hpc/augur/placement"
	"github.com/augur-hpc/augur/seed"
)

// clairvoyant is NoPFS's policy, with the access order learned from the
// job rather than told. The seed fixes every rank's order; the leader
// places the files this node reads most often in its fastest tiers and
// prefetches in exactly the order of access, ahead of each rank's cursor:
// files assigned to a tier stay, others are staged in tier 0 within a
// byte budget and dropped once read.
//
// A cursor is one rank's place in one dataset's order. The configuration
// gives the first ones (the dataset root as the layout lists it, the
// configured sampler, this node's ranks), so prefetching starts before
// the first read. Each process's opens (a stream: the global rank its
// launcher named, else the process its readers were forked from) then
// follow a cursor that matches them, or, when none does, are kept and
// handed to seed.Infer, which finds the dataset directory (learn.go),
// seed, epoch, world size and rank that explain them: a new cursor. A
// stream whose opens stop matching its cursor (a restart, an evaluation
// pass, another epoch) is learned again. What no cursor predicts is
// copied on first read, as the reactive policy does.
type clairvoyant struct {
	l       *Leader
	pred    *placement.Prediction // the configuration's; pred.Cat is the root's walk
	cat     *seed.Catalog
	pool    *fetchpool.Pool
	react   *reactive // what no cursor predicts; shares the pool
	caps    []int64   // the tiers' capacities, less the staging budget
	horizon int       // epochs placement looks ahead
	epochs  int       // 0: unbounded
	quit    chan struct{}
	learn   chan learnReq // to the inference worker

	mu    sync.Mutex // guards everything below
	stage int64      // staging budget in tier 0 (grows with the loaders' spread: growStage)
	sizes []int64    // per catalog file; UnknownSize until stat'ed
	// unsized are the files opened from their originals before their
	// sizes were measured: the large ones among them are entered in the
	// block table once they are (measured).
	unsized     map[seed.FileID]bool
	where       []int8   // per file: tier holding a copy, -1 none (set by setWhere)
	tierFiles   []uint64 // per tier: files where says it holds
	seen        []int32  // per file: 1 + the last epoch a cursor matched it in, 0 never
	pending     map[seed.FileID]bool
	staged      map[seed.FileID]stagedFor // staged copies (read once, then dropped)
	stagedBytes int64                     // staged and being staged
	reclaimed   time.Time                 // the last search for staged copies no read will come for
	orphans     []seed.FileID             // copies the placement may not keep where they are
	opens       map[[2]int]seed.FileID
	sized       uint64                   // files stat'ed
	sizedBytes  int64                    // their bytes
	datasets    map[string]*seed.Dataset // candidates listed so far; nil: not a dataset
	cursors     []*cursor
	streams     map[streamID]*stream
	place       *placement.Placer // over the cursors' reads, by catalog file; rebuilt when they change
	measuring   bool
	acc         hits            // of all opens of dataset files
	warned      map[string]bool // directories whose streams nothing explained, said once
	unexplained bool            // a stream's opens were explained by no seed tried
	hold        []holdAt        // per file, in a job of several nodes: who reads it first (holders.go); nil: not known
	holdBy      []holding       // the samplers and epochs hold was found from; holdAt.by indexes it
	// streamsChanged: augur stat's stream table is out of date.
	streamsChanged bool
}

const (
	maxPending = 256 // copies queued at once
	minWindow  = 64  // the window of a cursor whose readers were not seen yet
)

// planClairvoyant walks the dataset and prepares the cursors the
// configuration describes; start then stats the files, places them in
// tiers of capacities caps as their sizes arrive, and prefetches what is
// placed. It touches nothing of l but its configuration and segment, so
// it may run beside l's run goroutine.
func planClairvoyant(l *Leader, caps []int64) (*clairvoyant, error) {
	pred, err := placement.Predict(l.cfg.Roots, l.cfg.Seed, l.cfg.Access, nil)
	if err != nil {
		return nil, err
	}
	a := l.cfg.Access
	stage, horizon := placement.Params(a, caps)
	n := pred.Cat.NumFiles()
	c := &clairvoyant{l: l, pred: pred, cat: pred.Cat, stage: stage, caps: caps, horizon: horizon,
		epochs: a.Epochs, quit: make(chan struct{}), learn: make(chan learnReq, 64),
		sizes: make([]int64, n), where: make([]int8, n), tierFiles: make([]uint64, len(l.tiers)), seen: make([]int32, n),
		pending: map[seed.FileID]bool{}, unsized: map[seed.FileID]bool{}, staged: map[seed.FileID]stagedFor{}, opens: map[[2]int]seed.FileID{},
		datasets: map[string]*seed.Dataset{}, streams: map[streamID]*stream{}, warned: map[string]bool{}}
	for i := range c.sizes {
		c.sizes[i], c.where[i] = placement.UnknownSize, -1
	}
	if pred.DS != nil {
		c.datasets[""] = pred.DS
		if a.Sampler == seed.KindDistributed {
			for _, r := range pred.Ranks {
				if cur := c.addCursor(pred.DS, seed.Found{Seed: l.cfg.Seed, Shuffle: a.Shuffle,
					Replicas: a.WorldSize, Rank: r}, false); cur != nil {
					cur.provisional = true
				}
			}
		} else {
			for _, r := range pred.Ranks { // told samplers that cannot be learned
				c.cursors = append(c.cursors, c.toldCursor(r))
			}
		}
	}
	setU64(&l.seg.s.leader.predicted, uint64(n))
	setU64(&l.seg.s.leader.stage_budget, uint64(stage))
	return c, nil
}

// start prefetches through pool, whose copies must end in c.done.
func (c *clairvoyant) start(pool *fetchpool.Pool) {
	c.mu.Lock()
	c.pool = pool
	c.react = reactiveWith(c.l)
	c.react.pool = pool
	c.startMeasuring()
	c.mu.Unlock()
	go c.inferrer()
}

func (c *clairvoyant) close() {
	c.mu.Lock()
	c.publishStreams()
	c.mu.Unlock()
	close(c.quit)
	c.pool.Close()
}
