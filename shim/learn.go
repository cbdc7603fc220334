package shim

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/augur-hpc/augur/seed"
)

// Learning the job. Every open of a dataset file belongs to a stream: the
// processes that read as one rank. A stream follows one cursor per
// dataset; an open no cursor of its explains is kept, by every directory
// it could be the dataset of (seed.Catalog.Candidates), and once enough
// are kept they go to seed.Infer, on a goroutine of its own (inferrer):
// the directory, seed, epoch, world size and rank that explain them make
// a new cursor, which the stream follows from then on.

// streamID names a stream: the global rank its launcher named (RANK,
// SLURM_PROCID, ..., or LOCAL_RANK on the configured node), else the
// process its readers were forked from (torch.multiprocessing.spawn sets
// no variable; DataLoader workers are forked from their rank's process).
type streamID struct{ rank, origin int }

func (id streamID) String() string {
	if id.rank >= 0 {
		return fmt.Sprintf("rank %d", id.rank)
	}
	return fmt.Sprintf("process %d", id.origin)
}

// stream is what the leader knows of one stream.
type stream struct {
	id   streamID
	by   map[string]*track // by dataset directory
	kept int               // opens no cursor explained, over its life
	last *cursor           // the cursor its last open moved
}

// track is one stream's learning of one dataset directory.
type track struct {
	cur     *cursor   // the cursor it follows; nil while none
	seen    []int     // dataset indices it opened that no cursor explained
	asking  bool      // an inference is under way
	misses  int       // opens in a row its cursor did not expect
	retryAt time.Time // no inference before: the last found nothing
	failed  bool      // the last inference found nothing
	why     string    // why it follows none, when it does not
	acc     hits      // of its recent opens in the cursor's dataset
	window  int       // how far out of order its readers opened: kept when it learns again
	// For augur stat: opens its cursors expected; opens before the
	// first lock, and the time from the stream's first open to it;
	// opens no cursor expected after it.
	opens, before, after uint64
	first                time.Time     // its first open
	lockedIn             time.Duration // from first to the lock; 0: never locked
}

const (
	maxSeen    = 512 // indices kept per stream and candidate directory
	lostAfter  = 32  // opens in a row off its cursor's order: the stream left it
	maxStreams = 4096
)

// eventStream is the stream an event's process reads for.
func eventStream(l *Leader, ev Event) streamID {
	a := l.cfg.Access
	switch {
	case ev.Rank >= 0:
		return streamID{rank: ev.Rank}
	case ev.Local >= 0:
		return streamID{rank: a.NodeRank*a.RanksPerNode + ev.Local}
	}
	return streamID{rank: -1, origin: ev.Origin}
}

// compareStreams orders streams by rank, then by process.
func compareStreams(a, b streamID) int {
	return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.origin, b.origin))
}

// stream returns the stream of an event's process, new on first sight.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) stream(ev Event) *stream {
	id := eventStream(c.l, ev)
	if st, ok := c.streams[id]; ok {
		return st
	}
	if len(c.streams) >= maxStreams { // processes that come and go: forget the idle ones
		for k, st := range c.streams {
			if !st.following() {
				delete(c.streams, k)
			}
		}
	}
	st := &stream{id: id, by: map[string]*track{}}
	c.streams[id] = st
	c.streamsChanged = true
	return st
}

// track returns st's track of dataset directory dir, new on first use.
func (st *stream) track(dir string) *track {
	tr, ok := st.by[dir]
	if !ok {
		tr = &track{first: time.Now()}
		st.by[dir] = tr
	}
	return tr
}

func (st *stream) following() bool {
	for _, tr := range st.by {
		if tr.cur != nil {
			return true
		}
	}
	return false
}

// lock makes tr follow cur from now.
func (tr *track) lock(cur *cursor) {
	tr.cur, tr.why, tr.misses = cur, "", 0
	cur.window = max(cur.window, tr.window)
	if tr.lockedIn == 0 {
		tr.lockedIn = max(time.Since(tr.first), time.Nanosecond)
	}
}

// unexpected counts an open of dir's dataset no cursor expected.
func (tr *track) unexpected() {
	if tr.lockedIn == 0 {
		tr.before++
	} else {
		tr.after++
	}
}

// hit counts an open tr's cursor expected.
func (tr *track) hit() {
	tr.misses = 0
	tr.opens++
	tr.acc.add(true)
}

// miss counts an open of the cursor's dataset it did not expect and
// reports whether the stream has left the cursor's order: many opens in
// a row off it, or a few when most recent ones were.
func (tr *track) miss() bool {
	tr.misses++
	tr.after++
	tr.acc.add(false)
	return tr.misses > max(lostAfter, tr.cur.window) || (tr.misses > 4 && tr.distrusted())
}

// trusted: the stream followed its cursors here closely of late.
func (tr *track) trusted() bool { return tr.acc.n >= lostAfter && tr.acc.rate() >= 0.9 }

// distrusted: most of the stream's recent opens here were off its
// cursors' orders; a cursor that expects its next open does so by chance.
func (tr *track) distrusted() bool { return tr.acc.n >= lostAfter && tr.acc.rate() < 0.5 }

// dataset lists candidate directory dir as the layout would, once; nil
// when it is no dataset.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) dataset(dir string) *seed.Dataset {
	if ds, ok := c.datasets[dir]; ok {
		return ds
	}
	ds, err := c.cat.Dataset(dir)
	if err != nil {
		ds = nil
	}
	c.datasets[dir] = ds
	return ds
}

// learnFrom keeps file f, which no cursor of st explained, for every
// directory it could be the dataset of, up to the nearest one whose
// cursor st follows, and asks for an inference when enough are kept:
// for the nearest directory first (a script that lists root/val reads
// root/val's files in order, and so, by chance, in root's order), and
// for the next one out only while nearer ones found nothing. It reports
// whether st's open of f will not be predicted: nothing explained its
// opens of f's outermost candidate directory (nor, since those are asked
// first, of the nearer ones).
//
// Preconditions: c.mu is held.
func (c *clairvoyant) learnFrom(st *stream, f seed.FileID) (hopeless bool) {
	st.kept++
	cands := c.cat.Candidates(f)
	outer := "" // the last candidate that is a dataset
	for i := len(cands) - 1; i >= 0; i-- {
		if c.dataset(cands[i]) != nil {
			outer = cands[i]
			break
		}
	}
	defer func() {
		tr, ok := st.by[outer]
		hopeless = ok && tr.failed
	}()
	asked, now := false, time.Now()
	for _, dir := range cands {
		ds := c.dataset(dir)
		if ds == nil {
			continue
		}
		tr := st.track(dir)
		if tr.cur != nil {
			return // its cursor missed this one
		}
		tr.unexpected()
		idx, _ := ds.Index(f)
		tr.seen = append(tr.seen, idx)
		if len(tr.seen) > maxSeen {
			tr.seen = slices.Delete(tr.seen, 0, maxSeen/2) // the latest place the stream
		}
		switch n := len(tr.seen); {
		case asked || now.Before(tr.retryAt): // found nothing lately: the next one out
		case tr.asking:
			asked = true
		case n >= seed.MinSeen && n&(n-1) == 0: // at 16, 32, 64, ...
			c.ask(st, tr, ds, dir == outer)
			asked = true
		default:
			asked = true // wait for the nearest
		}
	}
	return
}

// learnReq asks the inferrer to explain what a stream opened of a
// dataset.
type learnReq struct {
	id    streamID
	ds    *seed.Dataset
	seen  []int
	asked time.Time
	hints []seed.Hints // tried in turn
	seeds []int64      // all the seeds tried, for the reason when none explains
	last  bool         // ds is the outermost candidate: if it fails, all did
}

// ask hands st's kept indices of dir to the inferrer. What is known is
// tried first, where fewer candidates need fewer opens to tell them
// apart (16 opens of 60 files cannot single out one of 2,000 candidate
// permutations, but can one of two): the configuration's sampler near
// its epoch, and for a stream that followed a cursor before, near the
// epoch it was at (a restart, a new epoch). Then every epoch of the
// configured seed and 0.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) ask(st *stream, tr *track, ds *seed.Dataset, last bool) {
	torch := torchVersion(c.l.cfg.Access.Torch)
	seeds := []int64{c.l.cfg.Seed}
	if c.l.cfg.Seed != 0 {
		seeds = append(seeds, 0)
	}
	var hints []seed.Hints
	for _, cur := range c.cursors {
		switch {
		case cur.ds != ds || cur.sampler == nil || cur.key.replicas == 0:
		case cur.provisional:
			// Not its world size: any rank's reads fit a world of one.
			hints = append(hints, seed.Hints{Seeds: []int64{cur.key.seed}, Rank: -1,
				EpochFrom: cur.epoch, EpochTo: cur.epoch + 1, Torch: torch})
		case cur.learned:
			hints = append(hints, seed.Hints{Seeds: []int64{cur.found.Seed}, EpochFrom: max(cur.epoch-2, 0),
				EpochTo: cur.epoch + 3, Rank: -1, Torch: torch})
		}
	}
	hints = append(hints, seed.Hints{Seeds: seeds, Rank: -1, Torch: torch})
	req := learnReq{id: st.id, ds: ds, seen: slices.Clone(tr.seen), asked: time.Now(), hints: hints, seeds: seeds, last: last}
	select {
	case c.learn <- req:
		tr.asking = true
	default: // the inferrer is behind: ask again with more
	}
}

func torchVersion(s string) seed.TorchVersion {
	v, _ := seed.ParseTorchVersion(s)
	return v
}

// inferrer answers the learning requests, one at a time, and publishes
// the stream table when it changed, until close.
func (c *clairvoyant) inferrer() {
	tick := time.NewTicker(publishEvery)
	defer tick.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-tick.C:
			c.mu.Lock()
			if c.streamsChanged {
				c.publishStreams()
			}
			c.mu.Unlock()
		case req := <-c.learn:
			t0 := time.Now()
			var f seed.Found
			var err error
			for _, h := range req.hints {
				if f, err = seed.Infer(req.ds.Len(), req.seen, h); err == nil {
					break
				}
			}
			c.l.log.Debug().Msgf("inference for %s over %d opens of %s: %v in %v, asked %v ago", req.id, len(req.seen), dirName(req.ds.Dir), err, time.Since(t0), time.Since(req.asked))
			c.learned(req, f, err, time.Since(t0))
		}
	}
}

// publishEvery is how often augur stat's stream table is refreshed.
const publishEvery = 100 * time.Millisecond

// learned applies an inference that took took: the stream follows the
// cursor it found, or is told why none (once in the log, for each
// directory, when nothing explains its opens).
func (c *clairvoyant) learned(req learnReq, f seed.Found, err error, took time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.streams[req.id]
	if !ok {
		return
	}
	dir := req.ds.Dir
	tr := st.track(dir)
	tr.asking = false
	if tr.cur != nil {
		return
	}
	if err != nil {
		if errors.Is(err, seed.ErrNoCandidate) {
			// Searching again costs as much: not before ten times as long.
			tr.retryAt = time.Now().Add(max(time.Second, 10*took))
			tr.failed = true
			tr.why = c.whyUnexplained(req, err)
			c.streamsChanged = true
			if req.last {
				c.unexplained = true
				c.dropUnfollowed()
			}
			if req.last && !c.warned[dir] {
				c.warned[dir] = true
				c.l.log.Warn().Msgf("%s: %s", st.id, tr.why)
			}
		}
		return
	}
	cur := c.addCursor(req.ds, f, true)
	if cur == nil {
		return
	}
	tr.lock(cur)
	tr.acc, tr.failed = hits{}, false
	// What the inference explained counts as followed: the cursor is
	// trusted at once, so that readers further apart than those opens
	// showed widen its window rather than lose it (a loader of many
	// workers with large batches reads all over its epoch at once). The
	// inference's bound on a wrong answer is stronger evidence than a
	// run of expected opens: it counts as lostAfter of them however few
	// opens it saw.
	for range lostAfter {
		tr.acc.add(true)
	}
	c.catchUp(cur, tr.seen)
	for _, other := range st.by { // the other candidates were not it
		other.seen = nil
	}
	c.l.log.Info().Msgf("%s reads %s", st.id, cur.describe())
	c.dropUnfollowed()
	c.publishStreams()
	c.pumpAll()
}

// catchUp moves a cursor just learned past the indices its stream read
// (those the inference saw and those read while it ran), and marks them
// read, so that prefetching starts where the stream is.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) catchUp(cur *cursor, read []int) {
	for _, idx := range read {
		if p := cur.order(cur.epoch).Pos(idx); p >= 0 {
			cur.pos = max(cur.pos, p+1)
		} else if p := cur.order(cur.epoch + 1).Pos(idx); p >= 0 && p <= cur.window {
			cur.epoch, cur.pos = cur.epoch+1, p+1
		} else {
			continue
		}
		c.seen[cur.ds.File(idx)] = int32(cur.epoch + 1)
	}
	cur.aEpoch, cur.aPos = cur.epoch, max(cur.pos-cur.window, 0)
}

// whyUnexplained says why a stream's opens of a directory follow no cursor.
func (c *clairvoyant) whyUnexplained(req learnReq, err error) string {
	seeds := make([]string, len(req.seeds))
	for i, s := range req.seeds {
		seeds[i] = fmt.Sprint(s)
	}
	what := fmt.Sprintf("no DistributedSampler with seed %s at epochs 0-%d (shuffled or not, any world size)",
		strings.Join(seeds, " or "), seed.DefaultEpochs-1)
	if !errors.Is(err, seed.ErrNoCandidate) || err.Error() != seed.ErrNoCandidate.Error() {
		what = err.Error()
	}
	where := dirName(req.ds.Dir)
	if req.last {
		where += " or any directory below it"
	}
	return fmt.Sprintf("%s explains its %d opens of %s; what it opens there is copied on first read (is the script's seed %d?)",
		what, len(req.seen), where, c.l.cfg.Seed)
}

func dirName(dir string) string {
	if dir == "" {
		return "the dataset root"
	}
	return dir
}

// describe says what a cursor follows, for the log and augur stat.
func (cur *cursor) describe() string {
	dir := dirName(cur.ds.Dir)
	order := "in order"
	if cur.key.shuffle {
		order = fmt.Sprintf("shuffled with seed %d", cur.key.seed)
	}
	if cur.sampler != nil && cur.key.replicas == 0 {
		return fmt.Sprintf("%s as configured, at epoch %d", dir, cur.epoch)
	}
	return fmt.Sprintf("%s by a DistributedSampler %s, world size %d, rank %d, at epoch %d",
		dir, order, cur.key.replicas, cur.key.rank, cur.epoch)
}

// hits remembers whether each of the last 256 opens was expected.
type hits struct {
	bits [4]uint64
	n    int
}

func (h *hits) add(ok bool) {
	i := h.n % 256
	if ok {
		h.bits[i/64] |= 1 << (i % 64)
	} else {
		h.bits[i/64] &^= 1 << (i % 64)
	}
	h.n++
}

// rate is the share of the remembered opens that were expected.
func (h *hits) rate() float64 {
	if h.n == 0 {
		return 0
	}
	good := 0
	for _, b := range h.bits { // bits not written yet are 0
		good += bits.OnesCount64(b)
	}
	return float64(good) / float64(min(h.n, 256))
}

// publishStreams writes augur stat's stream table: one row per stream and
// dataset directory it follows or failed to, and one for a stream still
// learning.
//
// Preconditions: c.mu is held.
func (c *clairvoyant) publishStreams() {
	c.streamsChanged = false
	ids := slices.SortedFunc(maps.Keys(c.streams), compareStreams)
	var rows []StreamStats
	for _, id := range ids {
		st := c.streams[id]
		n := len(rows)
		for _, dir := range slices.Sorted(maps.Keys(st.by)) {
			tr := st.by[dir]
			if tr.cur == nil && tr.why == "" {
				continue
			}
			row := StreamStats{Stream: id.String(), Dataset: dir, Accuracy: tr.acc.rate(), Opens: tr.opens, Why: tr.why,
				BeforeLock: tr.before, AfterLock: tr.after, LockSeconds: tr.lockedIn.Seconds()}
			if cur := tr.cur; cur != nil {
				row.Sampler, row.Epoch = "DistributedSampler", cur.epoch
				row.Shuffle, row.Seed, row.WorldSize, row.Rank = cur.key.shuffle, cur.key.seed, cur.key.replicas, cur.key.rank
				if cur.key.replicas == 0 {
					row.Sampler = "configured"
				}
			}
			rows = append(rows, row)
		}
		if len(rows) == n {
			rows = append(rows, StreamStats{Stream: id.String(),
				Why: fmt.Sprintf("learning: %d opens no cursor explains yet", st.kept)})
		}
	}
	c.l.publishRows("files", rows)
}
