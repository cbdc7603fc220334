package shim

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/augur-hpc/augur/seed"
	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

// Samples inside large files: the clairvoyant policy's prediction of the
// ranges each rank reads next (issue 45). A dataset of a few large files
// (HDF5, fixed records) gives its sampler indices that stand for ranges
// of them, and one open per worker and file says nothing of the order.
// So the data plane reports every read of a large file (AUGUR_EV_READ,
// while want_reads says so), and the leader learns, per directory of the
// files read, the map from sample index to range (seed.RecordLayouts:
// the record size, the header, the files in sorted order) together with
// the DistributedSampler that read them (seed.Infer over the indices the
// reads were). From then on each rank's cursor follows its reads, and
// the blocks of the samples it reads next are copied ahead of it in its
// order, epoch 1 included.
type inside struct {
	l     *Leader
	hints []seed.Hints
	learn chan insideReq

	mu        sync.Mutex
	dirs      map[string]*insideDir // by directory of the files read; guarded by mu
	published time.Time             // augur stat's rows were last written; guarded by mu
}

// insideDir is what is known of one directory of large files.
type insideDir struct {
	dir     string
	listed  bool // files, stats and index are known
	files   []string
	stats   []unix.Stat_t
	index   map[string]int // path to its place in files
	layout  *seed.Records  // nil while not learned
	reads   map[streamID][]insideRead
	cursors map[streamID]*sampleCursor
	asking  bool
	retryAt time.Time // after a failure: no inference before
	askedAt int       // the reads kept at the last inference: the next waits for more
	why     string    // why no layout is known, when none is
}

// insideRead is one read of a large file, by process pid.
type insideRead struct {
	pid       int
	path      string
	off, size int64
}

// sampleCursor is one rank's place in its predicted order of samples.
type sampleCursor struct {
	found   seed.Found
	sampler seed.Sampler
	epoch   int
	order   []int // the rank's indices in epoch
	at      []int32
	pos     int // the next position its reads are expected at
	// aEpoch, aPos is the prefetch pointer: the first position whose
	// samples' blocks are not all present or being copied.
	aEpoch, aPos int
	ahead        []int  // the rank's indices in aEpoch, when it is past epoch
	reads        uint64 // its reads of samples the cursor expected
	misses       int    // reads in a row it did not expect
}

// insideReq is a directory's reads handed to the learner.
type insideReq struct {
	d      *insideDir
	files  []string
	sizes  []int64
	layout *seed.Records // known already: only the samplers are learned
	reads  map[streamID][]seed.SampleRead
}

const (
	// insideKept bounds the reads kept per stream while learning.
	insideKept = 512
	// insideInFlight bounds the blocks copied ahead of the cursors at
	// once: enough to keep the copiers busy, few enough that a stream's
	// read-ahead is not queued behind them.
	insideInFlight = blockWorkers + 2
	// insideMore is how many more reads a new inference waits for.
	insideMore = 8
	// insideInOrder is how many samples in a row a reader must read
	// before it is taken to read in order.
	insideInOrder = 4 * seed.MinSeen
	// insideBroad is how many layouts, the likeliest, the broadest hint
	// (every epoch of two seeds) is tried with: the count of records is
	// likely the files' whole room or a few more than the highest read.
	insideBroad = 16
	// insideLost is how many reads in a row a cursor may not expect
	// before its stream is taken to have left it, and is learned anew.
	insideLost = 32
	// insideWindow is how far behind a cursor a read may be and still be
	// its rank's: DataLoader workers read several batches at once.
	insideWindow = 256
)

func newInside(l *Leader) *inside {
	seeds := []int64{l.cfg.Seed}
	if l.cfg.Seed != 0 {
		seeds = append(seeds, 0)
	}
	torch := torchVersion(l.cfg.Access.Torch)
	// The configured sampler at the first epochs first, with the
	// configured world size, then with any: few candidates need far
	// fewer samples to tell apart than two thousand (16 of a dataset of
	// 32 groups single out one of two candidates of a known world size,
	// and no number of them one of 2,000 of any), then every epoch of the
	// configured seed and of 0 (a resumed job). A wrong world size only
	// explains nothing.
	first := seed.Hints{Seeds: []int64{l.cfg.Seed}, EpochFrom: 0, EpochTo: 1, Replicas: l.cfg.Access.WorldSize, Rank: -1, Torch: torch}
	anyWorld := first
	anyWorld.Replicas = 0
	in := &inside{l: l, learn: make(chan insideReq, 16), dirs: map[string]*insideDir{},
		hints: []seed.Hints{first, anyWorld, {Seeds: seeds, Rank: -1, Torch: torch}}}
	setU64(&l.seg.s.leader.want_reads, 1)
	l.workers.Add(1)
	go in.learner()
	return in
}

// onRead is told of a read of a large file (EvRead).
//
// Preconditions: called from the run goroutine.
func (in *inside) onRead(ev Event) {
	if ev.Truncated || ev.Tier <= 0 {
		return
	}
	rd := insideRead{pid: ev.PID, path: ev.Path, off: int64(ev.Bytes), size: int64(ev.Tier)}
	id := eventStream(in.l, ev)
	in.mu.Lock()
	defer in.mu.Unlock()
	d := in.dir(filepath.Dir(ev.Path))
	if cur := d.cursors[id]; cur != nil {
		f, known := d.index[rd.path]
		i, ok := d.layout.Index(f, rd.off, rd.size)
		switch {
		case !known:
			return
		case !ok: // not a sample's read (a header's)
			return
		case cur.advance(i):
			cur.misses = 0
			return
		case cur.misses < insideLost:
			cur.misses++
			return
		}
		in.lost(d, id)
	}
	if len(d.reads[id]) < insideKept {
		d.reads[id] = append(d.reads[id], rd)
	}
	in.ask(d)
}

// dir is the directory's entry, listed in the background on first sight.
//
// Preconditions: in.mu is held.
func (in *inside) dir(dir string) *insideDir {
	d := in.dirs[dir]
	if d == nil {
		d = &insideDir{dir: dir, reads: map[streamID][]insideRead{}, cursors: map[streamID]*sampleCursor{}}
		in.dirs[dir] = d
		go in.list(d)
	}
	return d
}

// list finds the files of d that may hold its samples: the regular files
// beside those read with the same extension, in sorted order (a
// ConcatDataset of a sorted glob), with their stats.
func (in *inside) list(d *insideDir) {
	ents, err := os.ReadDir(d.dir)
	in.mu.Lock()
	var ext string
	for _, rds := range d.reads {
		for _, r := range rds {
			ext = filepath.Ext(r.path)
		}
	}
	in.mu.Unlock()
	var files []string
	var stats []unix.Stat_t
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ext) {
			continue
		}
		p := filepath.Join(d.dir, e.Name())
		var st unix.Stat_t
		if tiering.Stat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			files, stats = append(files, p), append(stats, st)
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	d.files, d.stats, d.listed = files, stats, true
	d.index = make(map[string]int, len(files))
	for i, p := range files {
		d.index[p] = i
	}
	if err != nil {
		d.why = fmt.Sprintf("listing %s: %v", d.dir, err)
	}
	in.ask(d)
}

// ask hands d's reads to the learner when there are enough to learn from.
//
// Preconditions: in.mu is held.
func (in *inside) ask(d *insideDir) {
	kept := 0
	for _, rds := range d.reads {
		kept += len(rds)
	}
	if !d.listed || d.asking || time.Now().Before(d.retryAt) || len(d.files) == 0 || kept < d.askedAt+insideMore {
		return
	}
	req := insideReq{d: d, files: d.files, layout: d.layout, reads: map[streamID][]seed.SampleRead{}}
	for _, st := range d.stats {
		req.sizes = append(req.sizes, st.Size)
	}
	enough := false
	for id, rds := range d.reads {
		var srs []seed.SampleRead
		for _, r := range rds {
			if f, ok := d.index[r.path]; ok {
				srs = append(srs, seed.SampleRead{Reader: r.pid, File: f, Off: r.off, Size: r.size})
			}
		}
		req.reads[id] = srs
		enough = enough || len(srs) >= seed.MinSeen
	}
	if !enough {
		return
	}
	select {
	case in.learn <- req:
		d.asking, d.askedAt = true, kept
	default:
	}
}

// learner learns layouts and samplers off the run goroutine.
func (in *inside) learner() {
	defer in.l.workers.Done()
	for {
		select {
		case <-in.l.stop:
			return
		case req := <-in.learn:
			t0 := time.Now()
			layout, found, tooFew, why := in.infer(req)
			took := time.Since(t0)
			in.l.log.Debug().Msgf("samples inside files: %s: inference over %d streams' reads in %v: %d found, more wanted %v, %s",
				req.d.dir, len(req.reads), took, len(found), tooFew, why)
			in.learned(req, layout, found, tooFew, why, took)
		}
	}
}

// infer tries the layouts the reads fit, likeliest first, and keeps the
// first under which a DistributedSampler explains some stream's reads;
// tooFew says that more reads may tell what these could not.
func (in *inside) infer(req insideReq) (layout *seed.Records, found map[streamID]seed.Found, tooFew bool, why string) {
	layouts := []*seed.Records{req.layout}
	if req.layout == nil {
		var all []seed.SampleRead
		for _, srs := range req.reads {
			all = append(all, srs...)
		}
		var err error
		if layouts, err = seed.RecordLayouts(req.files, req.sizes, all); err != nil {
			return nil, nil, errors.Is(err, seed.ErrNoStride) || errors.Is(err, seed.ErrUnsettled), err.Error()
		}
		if len(layouts) == 0 {
			return nil, nil, false, "the reads fall on no layout of fixed records"
		}
	}
	if grouped := slices.DeleteFunc(slices.Clone(layouts), func(l *seed.Records) bool { return l.Group == 1 }); len(grouped) > 0 {
		// Groups in the reads: a layout without them would take a few
		// groups in a row for a reader in order (and a reader in order
		// whose workers read a batch each reads groups of a batch: the
		// same prediction).
		layouts = grouped
	}
	// The narrow hints over every layout before the broad one over the
	// likeliest: thousands of candidates for each of hundreds of counts
	// would take the learner seconds. A reader in order explains a set of
	// indices of a layout too large (or too small) as well as any: it is
	// taken only when no layout has a shuffled sampler that does.
	var inOrder *seed.Records
	var inOrderFound map[streamID]seed.Found
	untried := false
	for k, h := range in.hints {
		for j, lay := range layouts {
			if k == len(in.hints)-1 && j >= insideBroad {
				untried = true // a shuffled sampler may explain the reads under one of these
				break
			}
			got, few, w := in.samplers(lay, req.reads, h)
			tooFew = tooFew || few
			if w != "" {
				why = w
			}
			switch {
			case shuffled(got):
				return lay, got, false, ""
			case len(got) > 0 && inOrder == nil:
				inOrder, inOrderFound = lay, got
			}
		}
	}
	switch {
	case inOrder != nil && !untried:
		return inOrder, inOrderFound, false, ""
	case inOrder != nil:
		return nil, nil, true, describeRecords(inOrder) + ": read in order, or shuffled under a count not tried yet"
	}
	return nil, nil, tooFew, why
}

// shuffled says whether a sampler found is a shuffled one.
func shuffled(found map[streamID]seed.Found) bool {
	for _, f := range found {
		if f.Shuffle {
			return true
		}
	}
	return false
}

// samplers are the DistributedSamplers hint h finds for the streams'
// reads under layout lay; few says that more reads might find one.
func (in *inside) samplers(lay *seed.Records, reads map[streamID][]seed.SampleRead, h seed.Hints) (found map[streamID]seed.Found, few bool, why string) {
	found = map[streamID]seed.Found{}
	for id, srs := range reads {
		var seen []int
		for _, r := range srs {
			if i, ok := lay.Index(r.File, r.Off, r.Size); ok {
				seen = append(seen, i)
			}
		}
		f, err := seed.Infer(lay.Len(), seen, h)
		switch {
		case err == nil && !f.Shuffle && distinct(seen) < insideInOrder:
			// A few runs of samples in a row: a reader in order, or
			// shuffled groups of contiguous samples.
			few, why = true, describeRecords(lay)+": too few samples yet to tell order from groups"
		case err == nil:
			found[id] = f
		default:
			why = fmt.Sprintf("%s: %v", describeRecords(lay), err)
			few = few || errors.Is(err, seed.ErrTooFew) || errors.Is(err, seed.ErrAmbiguous) || errors.Is(err, seed.ErrInconclusive)
		}
	}
	return found, few, why
}

// learned records what infer found.
func (in *inside) learned(req insideReq, layout *seed.Records, found map[streamID]seed.Found, tooFew bool, why string, took time.Duration) {
	in.mu.Lock()
	defer in.mu.Unlock()
	d := req.d
	d.asking = false
	if layout == nil {
		// The learner takes at most a fifth of a processor: the next
		// inference waits four times what this one took, and a second
		// when more reads would not tell more.
		d.why, d.retryAt = why, time.Now().Add(4*took)
		if !tooFew {
			d.retryAt = time.Now().Add(max(time.Second, 4*took))
		}
		return
	}
	if d.layout == nil {
		d.layout, d.why = layout, ""
		in.l.log.Info().Msgf("samples inside files: %s", describeRecords(layout))
	}
	for id, f := range found {
		s, err := seed.New(seed.Spec{Sampler: seed.KindDistributed, Len: layout.Len(), Seed: f.Seed,
			Replicas: f.Replicas, Rank: f.Rank, NoShuffle: !f.Shuffle, DropLast: in.l.cfg.Access.DropLast,
			Torch: in.l.cfg.Access.Torch})
		if err != nil {
			continue
		}
		cur := &sampleCursor{found: f, sampler: s}
		cur.setEpoch(f.Epoch, layout.Len())
		cur.pos, cur.aEpoch, cur.aPos = f.Last+1, f.Epoch, f.First
		d.cursors[id] = cur
		delete(d.reads, id)
		in.l.log.Info().Msgf("samples inside files: %s reads %s as rank %d of %d (%s, epoch %d)",
			id, d.dir, f.Rank, f.Replicas, shuffleName(f), f.Epoch)
	}
	in.publish()
}

// shuffleName says how a sampler found orders its indices.
func shuffleName(f seed.Found) string {
	if !f.Shuffle {
		return "in order"
	}
	return fmt.Sprintf("shuffled, seed %d", f.Seed)
}

// distinct counts the different indices of seen.
func distinct(seen []int) int {
	m := map[int]bool{}
	for _, i := range seen {
		m[i] = true
	}
	return len(m)
}

// describeRecords says what a layout is, for the log and augur stat.
func describeRecords(r *seed.Records) string {
	dir := filepath.Dir(r.Files[0])
	unit := ""
	if n := len(r.Segs[0]); n > 1 {
		unit = fmt.Sprintf(" (in %d runs between metadata)", n)
	}
	if r.Group > 1 {
		unit += fmt.Sprintf(", a sample %d records in a row", r.Group)
	}
	return fmt.Sprintf("%s: %d samples, records of %s past %d bytes in %d files%s", dir, r.Len(),
		FormatSize(r.Stride), r.Header(), len(r.Files), unit)
}

// setEpoch points cur's order at epoch e of a dataset of n samples.
func (cur *sampleCursor) setEpoch(e, n int) {
	cur.epoch, cur.order = e, cur.sampler.Epoch(e)
	if len(cur.at) != n {
		cur.at = make([]int32, n)
	}
	for i := range cur.at {
		cur.at[i] = -1
	}
	for p, i := range cur.order {
		if cur.at[i] < 0 {
			cur.at[i] = int32(p)
		}
	}
}

// lost drops the cursor of stream id, which its reads left: it is
// learned anew, and so is the layout once no cursor follows it.
//
// Preconditions: in.mu is held.
func (in *inside) lost(d *insideDir, id streamID) {
	in.l.log.Info().Msgf("samples inside files: %s left its predicted order in %s; learning it again", id, d.dir)
	delete(d.cursors, id)
	if len(d.cursors) == 0 {
		d.layout, d.askedAt = nil, 0
	}
	in.publish()
}

// advance moves cur past sample i, if its rank reads i now (in this
// epoch, within insideWindow of where it is, or early in the next), and
// reports whether it does.
func (cur *sampleCursor) advance(i int) bool {
	p := int(cur.at[i])
	if p > cur.pos+insideWindow {
		return false
	}
	if p < 0 || p < cur.pos-insideWindow {
		if cur.pos < len(cur.order)-insideWindow {
			return false
		}
		q := slices.Index(cur.sampler.Epoch(cur.epoch+1), i)
		if q < 0 || q > insideWindow {
			return false
		}
		cur.setEpoch(cur.epoch+1, len(cur.at))
		cur.pos, p = 0, q
	}
	cur.pos = max(cur.pos, p+1)
	cur.reads++
	return true
}

// publish writes augur stat's rows of the cursors and the directories
// still learning.
//
// Preconditions: in.mu is held.
func (in *inside) publish() {
	in.published = time.Now()
	var rows []StreamStats
	for _, dir := range slices.Sorted(maps.Keys(in.dirs)) {
		d := in.dirs[dir]
		samples := d.why
		if d.layout != nil {
			samples = describeRecords(d.layout)
		}
		for _, id := range slices.SortedFunc(maps.Keys(d.cursors), compareStreams) {
			cur := d.cursors[id]
			rows = append(rows, StreamStats{Stream: id.String(), Dataset: dir, Sampler: "DistributedSampler",
				Shuffle: cur.found.Shuffle, Seed: cur.found.Seed, WorldSize: cur.found.Replicas, Rank: cur.found.Rank,
				Epoch: cur.epoch, Opens: cur.reads, Samples: samples})
		}
		if len(d.cursors) == 0 {
			rows = append(rows, StreamStats{Dataset: dir, Why: "samples inside files: learning", Samples: samples})
		}
	}
	in.l.publishRows("inside", rows)
}
