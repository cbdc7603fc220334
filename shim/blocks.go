package shim

import (
	"math"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/augur-hpc/augur/fetchpool"
	"github.com/augur-hpc/augur/tiering"
	"github.com/puzpuzpuz/xsync/v3"
	"golang.org/x/sys/unix"
)

// Large files, tiered in blocks: the leader's half (the data plane's is
// preload/blocks.c). A dataset file of more than the threshold is never
// copied whole. The first open of it from its original enters it in the
// segment's block table, with an empty blocks file in each tier this
// leader writes; its pages become present as readers read them (a read of
// the original writes the pages it covers whole into a block reserved for
// it, from the budget the leader sets aside), and as the leader copies
// blocks ahead of a descriptor that reads in order (a stream). The blocks
// count against the tiers' capacity as the pool's copies do; nothing is
// evicted (the reactive policy's rule), so a file larger than the tiers
// keeps the blocks read first. In a job of several nodes a block to copy
// is asked of its owner first (blockpeers.go).
type blocks struct {
	l         *Leader
	pool      *fetchpool.Pool
	threshold int64
	seen      *xsync.MapOf[string, struct{}] // paths looked at since their last change
	look      chan string                    // opened paths to stat, in order
	ahead     chan blockCopy                 // blocks to copy ahead of streams
	fills     chan struct{}                  // a token per block being copied for a peer (FillBlock)
	bufs      sync.Pool                      // *[blockSize]byte, for those copies

	mu    sync.Mutex
	files map[uint64]*bigFile // by key; guarded by mu
	slots map[int]*bigFile    // by slot; guarded by mu
	gone  []goneSlot          // freed, released after a grace; guarded by mu
	free  []span              // words to take; guarded by mu
	next  uint32              // words never taken begin here; guarded by mu
	held  []int64             // blocks taken from the pool per tier; guarded by mu
	reads map[seqID]*seqRead  // descriptors reading in order; guarded by mu
	full  []bool              // tiers said full; guarded by mu
	// queued counts the blocks queued or being copied, by why; guarded
	// by mu.
	queued [copyWhys]int
	looked time.Time // when fill last looked at the files; guarded by mu
}

// bigFile is an entered large file.
type bigFile struct {
	path     string
	key      uint64
	slot     int
	st       unix.Stat_t
	nblocks  int64
	copying  map[int64]bool // blocks being copied ahead
	src      *os.File       // opened for copies ahead, once
	dst      []*os.File     // its blocks files, per tier, once
	copyTime time.Duration  // the last block copy's duration
	// copiedPages counts the pages the leader copied into the tiers or
	// kept from an earlier job; read, the pages this job's readers had
	// put there at fill's last look,
	// and readAt when that count last grew (blockfill.go).
	copiedPages, read int64
	readAt            time.Time
	// peerIno is the inode peers.StatSource found the source to be, as
	// entered (a peer is asked for its blocks naming it); 0 until looked
	// at, peerNone if it is not the dataset's own file or changed.
	peerIno uint64
}

// goneSlot is a slot and its words freed at when: a reader that looked
// at them before may still be writing a bit, for a moment.
type goneSlot struct {
	slot  int
	words span
	when  time.Time
}

type span struct{ at, n uint32 }

// seqID names a descriptor reading in order.
type seqID struct {
	key     uint64
	pid, fd int
}

// seqRead is what the leader knows of one: where it reached, when, and
// how fast it reads.
type seqRead struct {
	pos  uint64
	when time.Time
	rate float64 // bytes per second
}

// blockCopy is a block to copy ahead of a stream into tier: the pages of
// it from the first of pages to the last (absent when it was queued). A
// copy for a peer (forPeer: this node owns the block) is read from the
// shared filesystem; any other is asked of the block's owner first.
type blockCopy struct {
	f       *bigFile
	b       int64
	tier    int
	seq     uint32
	pages   uint64
	forPeer bool
	why     copyWhy
}

// copyWhy is why a block is copied.
type copyWhy int

const (
	copyAhead     copyWhy = iota // ahead of a stream
	copyFill                     // to fill a file read half (blockfill.go)
	copyPredicted                // ahead of a rank's predicted samples (inside.go)
	copyWhys
)

const (
	// budgetBlocks is how many blocks per tier readers may reserve
	// before the leader sets more aside, a quarter of the tier at most
	// (budgetOf): a budget of the whole of a small tier left the copies
	// ahead of streams no room.
	budgetBlocks = 16
	// goneGrace is how long a freed slot's words rest before another
	// file takes them.
	goneGrace = 10 * time.Second
	// aheadMin and aheadMax bound the blocks a stream is copied ahead
	// of: a few keep the shared filesystem busy while a reader reads
	// what came; 64 MiB at most.
	aheadMin = 3
	aheadMax = 16
	// blockParts is how many reads a block's copy from the shared
	// filesystem makes at once (readParts).
	blockParts = 4
	// blockWorkers copy blocks ahead at once: requests in flight to the
	// shared filesystem, whose bandwidth one request does not fill.
	blockWorkers = 4
)

// newBlocks starts the leader's half of large files, counting their
// blocks in pool's tiers. A threshold of 0 turns it off.
func newBlocks(l *Leader, pool *fetchpool.Pool, threshold int64) *blocks {
	m := &blocks{l: l, pool: pool, threshold: threshold, seen: xsync.NewMapOf[string, struct{}](),
		look: make(chan string, backlog), ahead: make(chan blockCopy, backlog), fills: make(chan struct{}, blockWorkers),
		files: map[uint64]*bigFile{}, slots: map[int]*bigFile{}, held: make([]int64, len(l.tiers)), full: make([]bool, len(l.tiers)),
		reads: map[seqID]*seqRead{}}
	l.seg.setThreshold(threshold)
	m.restore()
	l.workers.Add(2 + blockWorkers)
	go m.looker()
	go m.keeper()
	for i := 0; i < blockWorkers; i++ {
		go m.copier()
	}
	return m
}

// opened is told of an open from its original of a dataset file the plan
// knows is large (follow.go; the reactive policy enters its own): a large
// file not entered yet is looked at (looker), once until it changes.
func (m *blocks) opened(path string) {
	if _, seen := m.seen.LoadOrStore(path, struct{}{}); seen {
		return
	}
	select {
	case m.look <- path:
	default:
		m.seen.Delete(path)
	}
}

// large says whether a file of size bytes is tiered in blocks.
func (m *blocks) large(size int64) bool { return m != nil && size > m.threshold }

// looker stats the files opened (a metadata request the event loop must
// not wait for) and enters the large ones.
func (m *blocks) looker() {
	defer m.l.workers.Done()
	for {
		select {
		case <-m.l.stop:
			return
		case p := <-m.look:
			var st unix.Stat_t
			if tiering.Stat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && m.large(st.Size) {
				m.enter(p, &st)
			}
		}
	}
}

// enter makes large file path's entry, with its blocks files.
func (m *blocks) enter(path string, st *unix.Stat_t) {
	if m.l.sources.passes(path) {
		return // worth no copy (sources.go): its readers read the original
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.enterLocked(path, st) {
		m.budgets() // its first reads find room
	}
}

// enterLocked is enter but for the readers' budgets; it reports whether
// it entered the file.
//
// Preconditions: m.mu is held.
func (m *blocks) enterLocked(path string, st *unix.Stat_t) bool {
	key := pathKey(path)
	if key <= bfileGone {
		return false // a key the table keeps for itself
	}
	if _, ok := m.files[key]; ok {
		return false
	}
	n := (st.Size + blockSize - 1) / blockSize
	var tiers uint32
	for i, t := range m.l.tiers {
		if t.lock == nil || t.tree == nil {
			continue
		}
		if _, err := t.tree.Blocks(path, st); err != nil {
			m.l.log.Warn().Msgf("tier %s: %v; %s is not tiered there", t.Path, err, path)
			continue
		}
		tiers |= 1 << i
	}
	words, ok := m.takeWords(entryWords(int(n), len(m.l.tiers)))
	at, free := m.l.seg.blockFind(key, m.reusable)
	if tiers == 0 || !ok || at >= 0 || free < 0 || m.l.seg.identInsert(st.Dev, st.Ino, key) != nil {
		if ok {
			m.free = append(m.free, span{words, uint32(entryWords(int(n), len(m.l.tiers)))})
		}
		m.l.notCached(path, "the block table has no room for it: it is read from its source")
		return false
	}
	f := &bigFile{path: path, key: key, slot: free, st: *st, nblocks: n, copying: map[int64]bool{},
		dst: make([]*os.File, len(m.l.tiers))}
	m.l.seg.blockMake(free, bentry{key: key, size: uint64(st.Size), dev: st.Dev, ino: st.Ino,
		nblocks: uint32(n), words: words, ntiers: uint32(len(m.l.tiers)), tiers: tiers})
	m.files[key], m.slots[free] = f, f
	addU64(&m.l.seg.s.leader.big_files, 1)
	m.l.log.Info().Msgf("%s (%s) is tiered in blocks of %s", path, FormatSize(st.Size), FormatSize(blockSize))
	return true
}

// reusable says whether freed slot i has rested long enough.
//
// Preconditions: m.mu is held.
func (m *blocks) reusable(i int) bool {
	for _, g := range m.gone {
		if g.slot == i {
			return false
		}
	}
	return true
}

// takeWords takes n words: the first free span large enough, or new ones.
//
// Preconditions: m.mu is held.
func (m *blocks) takeWords(n int) (uint32, bool) {
	for i, s := range m.free {
		if int(s.n) >= n {
			m.free[i] = span{s.at + uint32(n), s.n - uint32(n)}
			return s.at, true
		}
	}
	if int64(m.next)+int64(n) > bwords {
		return 0, false
	}
	at := m.next
	m.next += uint32(n)
	return at, true
}

// forget drops a file whose entry the data plane freed (a change of it:
// its blocks files are gone too), or frees it here (tree: its directory
// was renamed or removed, and its blocks files went to the trash).
//
// Preconditions: m.mu is held.
func (m *blocks) forget(f *bigFile, free bool) {
	if free && m.l.seg.blockKey(f.slot) == f.key {
		m.l.seg.blockGone(f.slot)
	}
	delete(m.files, f.key)
	delete(m.slots, f.slot)
	m.seen.Delete(f.path)
	fslot := m.l.seg.bslot(f.slot)
	m.gone = append(m.gone, goneSlot{f.slot, span{uint32(fslot.words), uint32(entryWords(int(f.nblocks), int(fslot.ntiers)))}, time.Now()})
	if f.src != nil {
		f.src.Close()
	}
	for _, d := range f.dst {
		if d != nil {
			d.Close()
		}
	}
}

// changed is told of a change of path (EvInvalidate), or of a directory
// (tree) renamed or removed.
//
// Preconditions: called from the run goroutine.
func (m *blocks) changed(path string, tree bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !tree {
		m.seen.Delete(path)
		if f := m.files[pathKey(path)]; f != nil {
			m.forget(f, true)
		}
		return
	}
	for _, f := range m.files {
		if len(f.path) > len(path) && f.path[:len(path)] == path && f.path[len(path)] == '/' {
			m.forget(f, true)
		}
	}
	m.seen.Range(func(p string, _ struct{}) bool {
		if len(p) > len(path) && p[:len(path)] == path && p[len(path)] == '/' {
			m.seen.Delete(p)
		}
		return true
	})
}

// dropStale frees the files whose keys fall in the hold slots marked
// stale (a change through another name; tidy.go) and removes their
// blocks files.
func (m *blocks) dropStale(slots map[uint64]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.files {
		if !slots[f.key&holdMask] {
			continue
		}
		m.forget(f, true)
		for _, t := range m.l.tiers {
			if t.tree != nil {
				t.tree.RemoveBlocks(f.path)
			}
		}
	}
}

// stream is told where a descriptor reading in order has reached
// (EvStream), and copies the blocks ahead of it that its rate needs:
// those it will read while a block is copied, twice over, and one more.
//
// Preconditions: called from the run goroutine.
func (m *blocks) stream(ev Event) {
	key := pathKey(ev.Path)
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.files[key]
	if f == nil {
		return
	}
	id, now := seqID{key, ev.PID, ev.FD}, time.Now()
	s := m.reads[id]
	if s == nil {
		s = &seqRead{pos: ev.Bytes, when: now}
		m.reads[id] = s
		addU64(&m.l.seg.s.leader.big_streams, 1)
	} else if ev.Bytes > s.pos && now.After(s.when) {
		r := float64(ev.Bytes-s.pos) / now.Sub(s.when).Seconds()
		if s.rate == 0 {
			s.rate = r
		} else {
			s.rate = 0.7*s.rate + 0.3*r
		}
		s.pos, s.when = ev.Bytes, now
	}
	lead := 2 * f.copyTime
	if lead < 20*time.Millisecond {
		lead = 20 * time.Millisecond
	}
	n := 1 + int64(math.Ceil(s.rate*lead.Seconds()/float64(blockSize)))
	if n > aheadMax {
		n = aheadMax
	}
	if n < aheadMin {
		n = aheadMin
	}
	// From the page the reader has reached: the rest of its block comes
	// in one request, where its own reads would make several.
	pos := int64(ev.Bytes)
	first := pos >> blockShift
	for b := first; b < first+n && b < f.nblocks; b++ {
		pages := m.absent(f, b)
		if b == first {
			pages &^= 1<<uint(pos>>pageShift&63) - 1 // the pages behind the reader
		}
		if m.queue(f, b, pages, copyAhead) == queueFull {
			return
		}
	}
}

// What queue did with a block.
const (
	queueDone = iota // queued
	queueSkip        // nothing to copy, or already being copied
	queueBusy        // the queue is full
	queueFull        // no tier has room for it
)

// queue reserves block b of f and queues the copy of its pages absent
// when the copy starts, for why.
//
// Preconditions: m.mu is held.
func (m *blocks) queue(f *bigFile, b int64, pages uint64, why copyWhy) int {
	if f.copying[b] || pages == 0 {
		return queueSkip
	}
	t := m.reserve(f, b)
	if t < 0 {
		m.l.notCached(f.path, "cached in part: the tiers have no room for more of its blocks (blocks are not evicted)")
		return queueFull
	}
	f.copying[b] = true
	w, bit := m.l.seg.copyingWord(f.slot, b)
	atomic.OrUint64(w, bit) // a reader that reaches it waits for the copy
	select {
	case m.ahead <- blockCopy{f: f, b: b, tier: t, seq: m.l.seg.blockSeq(f.slot), pages: pages, why: why}:
		m.queued[why]++
		return queueDone
	default:
		delete(f.copying, b)
		m.l.seg.copied(f.slot, b)
		return queueBusy
	}
}

// absent are the pages of block b of f no tier holds.
//
// Preconditions: m.mu is held.
func (m *blocks) absent(f *bigFile, b int64) uint64 {
	var have uint64
	for t := range m.l.tiers {
		have |= atomic.LoadUint64(m.l.seg.pageWord(f.slot, t, b))
	}
	return pagesOf(f.st.Size, b) &^ have
}

// pagesOf is the page bits of block b of a file of size bytes.
func pagesOf(size, b int64) uint64 {
	end := size - b*blockSize
	if end >= blockSize {
		return ^uint64(0)
	}
	n := (end + pageSize - 1) / pageSize
	return 1<<uint(n) - 1
}

// reserve is the tier block b of f is reserved in, reserving it in the
// fastest tier with room if it is in none; -1 if none has room.
//
// Preconditions: m.mu is held.
func (m *blocks) reserve(f *bigFile, b int64) int {
	tiers := m.l.seg.blockTiers(f.slot)
	for t := range m.l.tiers {
		if w, bit := m.l.seg.reserveWord(f.slot, t, b); tiers>>t&1 == 1 && atomic.LoadUint64(w)&bit != 0 {
			return t
		}
	}
	for t := range m.l.tiers {
		if tiers>>t&1 == 0 || !m.pool.Take(t, blockSize) {
			continue
		}
		m.held[t]++
		if w, bit := m.l.seg.reserveWord(f.slot, t, b); atomic.OrUint64(w, bit)&bit != 0 {
			m.pool.Release(t, blockSize) // a reader reserved it meanwhile
			m.held[t]--
		}
		return t
	}
	return -1
}

// copier copies blocks ahead of streams: the source's block into the
// tier's blocks file, then its pages marked present, unless the file
// changed meanwhile (seq moved).
func (m *blocks) copier() {
	defer m.l.workers.Done()
	buf := make([]byte, blockSize)
	for {
		select {
		case <-m.l.stop:
			return
		case c := <-m.ahead:
			m.copyBlock(c, buf)
		}
	}
}

func (m *blocks) copyBlock(c blockCopy, buf []byte) {
	defer func() {
		m.mu.Lock()
		delete(c.f.copying, c.b)
		if !c.forPeer {
			m.queued[c.why]--
		}
		m.mu.Unlock()
		m.l.seg.copied(c.f.slot, c.b) // its readers read it from the tier now, or the original
	}()
	seg, f := m.l.seg, c.f
	dst, err := m.blocksFile(f, c.tier)
	if err != nil {
		return
	}
	begin := time.Now()
	// Readers wait for a block being copied, so the pages of c.pages
	// absent now stay absent but for this copy: those are copied, a run
	// of them at a time (the pages present between runs are not read
	// again).
	m.mu.Lock()
	need := c.pages & m.absent(f, c.b)
	m.mu.Unlock()
	var got uint64
	var n int64
	for need != 0 {
		lo := bits.TrailingZeros64(need)
		hi := lo + bits.TrailingZeros64(^(need >> uint(lo)))
		run := pageRun(lo, hi)
		need &^= run
		off := c.b*blockSize + int64(lo)*pageSize
		k := min(int64(hi-lo)*pageSize, f.st.Size-off)
		if !m.fromPeer(c, off, buf[:k]) && !m.fromSource(f, off, buf[:k]) {
			break
		}
		if _, err := dst.WriteAt(buf[:k], off); err != nil {
			break
		}
		got, n = got|run, n+k
	}
	if got == 0 || seg.blockSeq(f.slot) != c.seq || seg.blockKey(f.slot) != f.key {
		return
	}
	w := seg.pageWord(f.slot, c.tier, c.b)
	added := got &^ atomic.OrUint64(w, got)
	if seg.blockSeq(f.slot) != c.seq {
		atomic.AndUint64(w, ^got) // the file changed meanwhile: its old bytes go
		return
	}
	m.mu.Lock()
	f.copyTime = time.Since(begin)
	f.copiedPages += int64(bits.OnesCount64(added))
	m.mu.Unlock()
	switch {
	case c.forPeer:
	case c.why == copyFill:
		addU64(&seg.s.leader.big_filled, 1)
		addU64(&seg.s.leader.big_filled_bytes, uint64(n))
	case c.why == copyPredicted:
		addU64(&seg.s.leader.big_predicted, 1)
		addU64(&seg.s.leader.big_predicted_bytes, uint64(n))
	default:
		addU64(&seg.s.leader.big_ahead, 1)
		addU64(&seg.s.leader.big_ahead_bytes, uint64(n))
	}
}

// pageRun is the bits of pages [lo, hi) of a block.
func pageRun(lo, hi int) uint64 {
	run := ^uint64(0) << uint(lo)
	if hi < 64 {
		run &= 1<<uint(hi) - 1
	}
	return run
}

// fromSource reads buf from f's source at off, whole, and reports whether
// it did. In a job of several nodes the read is timed for the model that
// chooses between the shared filesystem and the peers.
func (m *blocks) fromSource(f *bigFile, off int64, buf []byte) bool {
	src, err := m.source(f)
	if err != nil {
		return false
	}
	done := func(int64) {}
	if p := m.l.peers; p != nil {
		done = p.BeginPFS(int64(len(buf)))
	}
	if !readParts(src, buf, off) {
		done(0)
		return false
	}
	done(int64(len(buf)))
	return true
}

// readParts reads buf from src at off, whole, in up to blockParts reads
// of whole pages in flight together, and reports whether it did. One
// read of a block is one request after another on a client without a
// page cache (FUSE with direct I/O cuts it into 128 KiB requests and
// sends them in turn: 4 MiB in 50 ms on the emulated PFS at 200 MiB/s,
// against 22 ms in four parts), and at the end of a stream's first epoch
// one or two blocks are all that is in flight.
func readParts(src *os.File, buf []byte, off int64) bool {
	per := (int64(len(buf))/blockParts + pageSize - 1) / pageSize * pageSize
	var wg sync.WaitGroup
	var failed atomic.Bool
	for at := int64(0); at < int64(len(buf)); at += per {
		part := buf[at:min(at+per, int64(len(buf)))]
		wg.Go(func() {
			if got, _ := src.ReadAt(part, off+at); got != len(part) {
				failed.Store(true)
			}
		})
	}
	wg.Wait()
	return !failed.Load()
}

// source is f's source, opened once.
func (m *blocks) source(f *bigFile) (*os.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f.src == nil {
		src, err := tiering.OpenSource(f.path)
		if err != nil {
			return nil, err
		}
		f.src = src.File
	}
	return f.src, nil
}

// blocksFile is tier's blocks file of f, opened once.
func (m *blocks) blocksFile(f *bigFile, tier int) (*os.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.blocksFileLocked(f, tier)
}

// blocksFileLocked is blocksFile with m.mu held.
//
// Preconditions: m.mu is held.
func (m *blocks) blocksFileLocked(f *bigFile, tier int) (*os.File, error) {
	if f.dst[tier] == nil {
		d, err := m.l.tiers[tier].tree.OpenBlocks(f.path)
		if err != nil {
			return nil, err
		}
		f.dst[tier] = d
	}
	return f.dst[tier], nil
}

// keeper keeps the readers' budgets topped up and the tiers' accounts
// right, and releases freed slots once they have rested.
func (m *blocks) keeper() {
	defer m.l.workers.Done()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	saved := time.Now()
	for {
		select {
		case <-m.l.stop:
			return
		case <-tick.C:
			m.keep()
			if in := m.l.inside; in != nil {
				in.pumpAll() // copies ended: room for the next
			}
		}
		if time.Since(saved) >= saveEvery {
			m.save()
			saved = time.Now()
		}
	}
}

// keep tops each tier's budget up (budgets), and releases freed slots
// past their grace.
func (m *blocks) keep() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.budgets()
	m.fillFiles()
	now := time.Now()
	kept := m.gone[:0]
	for _, g := range m.gone {
		if now.Sub(g.when) < goneGrace {
			kept = append(kept, g)
			continue
		}
		m.free = append(m.free, g.words)
	}
	m.gone = kept
}

// budgets tops each tier's budget up to budgetBlocks as the pool has
// room while there are large files (none, and the room is the whole
// files' again), and gives the pool back the blocks no reservation or
// budget holds any more (freed files).
//
// Preconditions: m.mu is held.
func (m *blocks) budgets() {
	for t, ts := range m.l.tiers {
		if ts.lock == nil || ts.tree == nil {
			continue
		}
		if len(m.files) == 0 {
			// No reader reserves a block of no file: the budget is
			// all the pool's to take back.
			atomic.StoreInt64(m.l.seg.budget(t), 0) // released below: held, not reserved
		}
		budget := atomic.LoadInt64(m.l.seg.budget(t))
		reserved := m.reservedIn(t)
		if extra := m.held[t] - reserved - budget; extra > 0 {
			m.pool.Release(t, extra*blockSize)
			m.held[t] -= extra
		}
		for ; len(m.files) > 0 && budget < budgetOf(ts.Capacity) && m.pool.Take(t, blockSize); budget++ {
			m.held[t]++
			atomic.AddInt64(m.l.seg.budget(t), 1)
		}
		if budget == 0 && len(m.files) > 0 && !m.full[t] {
			m.full[t] = true
			m.l.log.Info().Msgf("tier %s is full: large files' blocks not in it yet are read from their sources", ts.Path)
		}
		setU64(&m.l.seg.s.leader.big_blocks[t], uint64(reserved))
	}
	if m.allFull() {
		for _, f := range m.files {
			m.l.notCached(f.path, "cached in part: the tiers are full (blocks are not evicted); its other blocks are read from its source")
		}
	}
}

// budgetOf is the readers' budget in a tier of capacity bytes.
func budgetOf(capacity int64) int64 {
	return max(1, min(budgetBlocks, capacity/4/blockSize))
}

// allFull says whether every tier in use was found full.
//
// Preconditions: m.mu is held.
func (m *blocks) allFull() bool {
	for t, ts := range m.l.tiers {
		if ts.lock != nil && ts.tree != nil && !m.full[t] {
			return false
		}
	}
	return true
}

// reservedIn counts the blocks reserved in tier t.
//
// Preconditions: m.mu is held.
func (m *blocks) reservedIn(t int) int64 {
	var n int64
	for _, f := range m.files {
		for w := int64(0); w < (f.nblocks+63)/64; w++ {
			word, _ := m.l.seg.reserveWord(f.slot, t, w*64)
			n += int64(bits.OnesCount64(atomic.LoadUint64(word)))
		}
	}
	return n
}
