// The leader: one per job and node, elected by a lock; it opens the
// tiers, runs the policy the configuration names and consumes the event
// ring (revalidate.go compares served copies with their sources).

package shim

import (
	"errors"
	"hash/maphash"
	"io/fs"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/augur-hpc/augur/fetchpool"
	"github.com/augur-hpc/augur/peers"
	"github.com/augur-hpc/augur/tiering"
	"github.com/puzpuzpuz/xsync/v3"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// Leader runs the control plane of one job on one node.
type Leader struct {
	cfg   *Config
	seg   *Segment
	log   zerolog.Logger
	lock  *os.File
	tiers []tierState
	open  []*tiering.Tree // per tier, nil where it is not in use; set before any goroutine starts
	ring  ringReader
	// checked is when (ns since born) each served copy's source was last
	// compared with it, or the copy made, by a hash of the path: a job
	// may read millions of files, and a collision only skips one
	// comparison. recheck hands the comparisons to the revalidators.
	checked  *xsync.MapOf[uint64, int64]
	bornMono int64      // born on CLOCK_MONOTONIC, for the data plane's marks of copies compared (markChecked)
	marks    sync.Mutex // one markChecked at a time
	seed     maphash.Seed
	born     time.Time
	recheck  chan Event
	dropped  chan dropped   // stale copies the revalidators or the tidier removed, for the policies
	tidyQ    chan tidyWork  // changes of the namespace, for the tidier
	released chan trashed   // bytes the tidier removed from the trash, for the policies
	workers  sync.WaitGroup // the revalidators, the tidier and the reactive policy's statter
	react    *reactive      // the reactive policy, or the clairvoyant one's when it could not plan
	clair    *clairvoyant   // nil unless the policy is clairvoyant and planned
	plans    chan planned   // the clairvoyant plan in the making, until run adopts it
	early    []Event        // opens and closes seen while planning, for the plan
	peers    *peering       // nil: a job of one node, or this node could not join the others
	// big is the leader's half of large files tiered in blocks, once a
	// policy that copies has started (nil: none, or static).
	big atomic.Pointer[blocks]
	// inside predicts samples inside large files (clairvoyant policy;
	// nil otherwise).
	inside *inside
	// sources says which roots are worth no copy (nil: a leader that
	// writes no tier).
	sources *sources
	// rows are augur stat's stream rows by who made them ("files": the
	// clairvoyant policy's cursors, "inside": inside's).
	rowsMu sync.Mutex
	rows   map[string][]StreamStats
	// fullOnce says once that the identity table refused a copy
	// (refused).
	fullOnce sync.Once
	// uncached names the files augur could not cache (notCached).
	uncachedMu sync.Mutex
	uncached   []Uncached
	stop       chan struct{}
	done       chan struct{}
	closed     sync.Once
}

// tierState is the leader's view of one tier.
type tierState struct {
	tiering.Tier
	tree  *tiering.Tree // nil: the tier is not in use (it could not be opened, or is not the user's)
	lock  *tiering.Lock // nil: another process writes this tier
	usage tiering.Usage
}

// pollInterval is how often the leader reads the ring when it is idle;
// reapInterval how often it releases the writers of processes that died.
const (
	pollInterval = 5 * time.Millisecond
	reapInterval = 100 * time.Millisecond
)

// Lead makes this process the job's leader if no live process is:
// it validates the tiers, marks the segment ready for the data plane and
// starts consuming the event ring. It returns nil, nil when another
// process leads.
func Lead(cfg *Config, seg *Segment, log zerolog.Logger) (*Leader, error) {
	lock, err := jobLock(seg.Job)
	if lock == nil || err != nil {
		return nil, err
	}
	seg.unpublishConfig()
	l := &Leader{cfg: cfg, seg: seg, log: log, lock: lock, ring: ringReader{seg: seg},
		checked: xsync.NewMapOf[uint64, int64](), seed: maphash.MakeSeed(), born: time.Now(), bornMono: monotonic(),
		recheck: make(chan Event, backlog), dropped: make(chan dropped, backlog),
		tidyQ: make(chan tidyWork, backlog), released: make(chan trashed, MaxTiers),
		stop: make(chan struct{}), done: make(chan struct{})}
	l.publishIdentity()
	l.checkRoots()
	l.openTiers()
	seg.publishConfig(cfg.RootForms(), l.ServedTiers(), cfg.Revalidate == 0) // the tiers are validated: copies may be served
	if cfg.Peers.Enabled() {
		l.peers = startPeering(l)
	}
	if cfg.Policy != "static" && cfg.PassThrough == "auto" {
		l.sources = newSources(l, l.fastestWritten())
	}
	switch cfg.Policy {
	case "reactive":
		l.startReactive()
	case "clairvoyant":
		l.plans = l.planInBackground()
		if cfg.BlockAbove > 0 && l.writesATier() {
			l.inside = newInside(l)
		}
	}
	wait := int64(0)
	if l.react != nil && cfg.Policy == "reactive" && l.writesATier() {
		wait = cfg.WaitMax // with no tier to copy into, nobody should wait for a copy
	}
	setU64(&seg.s.leader.wait_max, uint64(wait))
	// A leader learns the shared filesystem's client afresh (learnClient):
	// one that took over an existing job must not keep the last one's
	// wait_min, under which small files never ask, and so never teach it.
	setU64(&seg.s.leader.wait_min, 0)
	setU64(&seg.s.leader.client_cache, 0)
	if wait > 0 && l.peers == nil {
		// On several nodes a node keeps the files it owns (HVAC), which
		// a reader's tee of any file it reads would not respect.
		l.react.startTees()
	}
	copying := uint64(0)
	if cfg.Policy != "static" && l.writesATier() {
		copying = 1 // readers' descriptors of originals keep their paths (struct augur_leader)
	}
	setU64(&seg.s.leader.copying, copying)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&seg.s.leader.ready)), 1)
	pruneJobs(seg.Job) // here, not later: a short command may end before a goroutine ran
	for i := 0; i < revalidators; i++ {
		l.workers.Add(1)
		go l.revalidator()
	}
	l.workers.Add(1)
	go l.tidier()
	go l.run()
	return l, nil
}

// PlanGCPercent is the garbage collector's target, in percent of the
// live heap, while a clairvoyant leader or augur plan runs (Go's
// default is 100).
const PlanGCPercent = 20

// planned is the outcome of planning the clairvoyant policy.
type planned struct {
	c   *clairvoyant
	err error
}

// planInBackground predicts and places off the run goroutine: listing
// and stat'ing a large dataset on a shared filesystem takes long (a
// minute for a million files), and meanwhile the data plane serves the
// copies the tiers already hold and the leader keeps reading the ring.
// Opens before the plan is adopted are not matched with it: each rank's
// cursor finds its place at its first open after.
func (l *Leader) planInBackground() chan planned {
	_, caps, _ := l.poolTiers()
	ch := make(chan planned, 1)
	// The plan is a few large arrays without pointers, rebuilt now and
	// then: collecting more often costs little and keeps the leader's
	// resident memory near what it holds, not twice that.
	debug.SetGCPercent(PlanGCPercent)
	go func() {
		c, err := planClairvoyant(l, caps)
		ch <- planned{c, err}
	}()
	return ch
}

// adopt starts prefetching by plan p, or the reactive policy when the
// accesses could not be predicted.
func (l *Leader) adopt(p planned) {
	if p.err != nil {
		also := ""
		if l.inside != nil {
			also = ", and the order of samples inside large files learned from their reads"
		}
		l.log.Warn().Msgf("clairvoyant policy: %v; using the reactive policy%s", p.err, also)
		setU64(&l.seg.s.leader.fell_back, 1)
		l.startReactive()
	} else {
		// Blocks first: once the plan has its pool, it may queue a
		// copy of any file it sized, and a large file copied whole is
		// never tiered in blocks (1 run in 2 of
		// TestLargeFileEveryReadCall/clairvoyant copied it whole).
		tiers, _, used := l.poolTiers()
		pool := l.newPool(tiers, used, p.c.done)
		l.startBlocks(pool)
		p.c.start(pool)
		l.clair = p.c
		l.peers.setHolder(p.c.holderOf, p.c.awaitHeld)
	}
	for _, ev := range l.early { // the policy starts where the readers are
		l.handle(ev)
	}
	l.early = nil
}

// maxEarly bounds the events kept while planning: the latest ones place
// the cursors.
const maxEarly = 1 << 16

// checkRoots says once per job, in the leader, that a dataset root is not
// a directory it can read: the job still runs, reading whatever it opens
// from where it is, but nothing under that root is served from a tier.
func (l *Leader) checkRoots() {
	for _, r := range l.cfg.Roots {
		info, err := os.Stat(r)
		var pe *fs.PathError
		switch {
		case errors.As(err, &pe):
			l.log.Warn().Msgf("dataset root %s: %v; nothing under it is accelerated", r, pe.Err)
		case err != nil:
			l.log.Warn().Msgf("dataset root %s: %v; nothing under it is accelerated", r, err)
		case !info.IsDir():
			l.log.Warn().Msgf("dataset root %s: not a directory; nothing under it is accelerated", r)
		}
	}
}

// jobLock takes the job's leader lock, a POSIX record lock on the file
// leader in the job's directory: it is not inherited by forked children
// and vanishes with its holder. It returns nil, nil when another process
// holds it.
func jobLock(job string) (*os.File, error) {
	dir, err := openJobDir(job, false)
	if err != nil {
		return nil, err
	}
	fd, err := openPrivate(dir, JobDir(job), leaderName)
	unix.Close(dir)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), JobDir(job)+"/"+leaderName)
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk); err != nil {
		f.Close()
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return nil, nil
		}
		return nil, err
	}
	return f, nil
}

func (l *Leader) publishIdentity() {
	ld := &l.seg.s.leader
	atomic.StoreInt32((*int32)(unsafe.Pointer(&ld.pid)), int32(os.Getpid()))
	setU64(&ld.started_ns, uint64(time.Now().UnixNano()))
	setU64(&ld.ended_ns, 0)
	setString(&ld.policy[0], len(ld.policy), l.cfg.Policy)
	closes := uint64(0)
	if l.cfg.Policy == "clairvoyant" { // staged files are dropped once read
		closes = 1
	}
	setU64(&ld.want_closes, closes)
	for i, t := range l.cfg.Tiers {
		setString(&ld.tiers[i][0], len(ld.tiers[i]), t.Path)
		setU64(&ld.tier_capacity[i], uint64(t.Capacity))
	}
}

// openTiers opens, locks and validates every tier. A tier another
// process writes is checked (stale copies removed) but not written; a
// tier that cannot be opened, or is not the user's own, is reported and
// not used (the data plane is told of no such tier).
func (l *Leader) openTiers() {
	var stale uint64
	for i, t := range l.cfg.Tiers {
		ts := tierState{Tier: t}
		l.seg.keepPresence(i, false) // until every copy there is marked
		tree, err := tiering.Open(t)
		if err != nil {
			l.log.Warn().Msgf("%v; tier not used", err)
			l.tiers = append(l.tiers, ts)
			continue
		}
		ts.tree = tree
		// Every copy this job may serve has its source's identity in the
		// segment: a change through another name finds it (ident.go).
		tree.Kept = func(source string, st *unix.Stat_t) bool {
			err := l.seg.identInsert(st.Dev, st.Ino, pathKey(source))
			if err != nil {
				l.refused(fetchpool.Result{Path: source, Err: err})
			}
			return err == nil
		}
		lock, err := tree.TryLock()
		switch {
		case err == nil:
			// This leader is the tier's only writer: it keeps the
			// tier's presence filter (present.go).
			ts.lock = lock
			tree.Present = func(source string) { l.seg.markPresent(i, source) }
			rep := tree.Validate()
			l.seg.keepPresence(i, true)
			ts.usage = rep.Usage
			stale += uint64(rep.Stale)
			for _, e := range rep.Errors {
				l.log.Warn().Msgf("tier %s: could not check a copy: %v", t.Path, e)
			}
		default:
			// Another job writes this tier (ErrLocked), or its lock
			// file is not the user's. The data plane still serves its
			// copies (the user's own only), so they are
			// checked against the sources as they are now: the writer
			// validated them when it started, possibly before they
			// changed. A lock held by another user is said at warn
			// level: someone interferes with this user's tier.
			var le *tiering.LockedError
			switch {
			case errors.As(err, &le) && !le.OtherUser():
				l.log.Info().Msgf("%v; serving its copies without writing", err)
			case le != nil:
				l.log.Warn().Msgf("%v; serving its copies without writing", err)
			default:
				l.log.Warn().Msgf("tier %s: %v; serving its copies without writing", t.Path, err)
			}
			rep := tree.Check()
			ts.usage = rep.Usage
			stale += uint64(rep.Stale)
			for _, e := range rep.Errors {
				l.log.Warn().Msgf("tier %s: could not check a copy: %v", t.Path, e)
			}
		}
		l.tiers = append(l.tiers, ts)
	}
	for _, t := range l.tiers {
		l.open = append(l.open, t.tree)
	}
	setU64(&l.seg.s.leader.stale_removed, stale)
	l.publishUsage()
	setU64(&l.seg.s.leader.want_opens, l.wantOpens())
	l.seg.publishCheckedEpoch()
	l.seg.setCheckedTrust(l.cfg.Revalidate)
}

// wantOpens is which opens' events the leader reads (struct
// augur_leader.want_opens): under the clairvoyant policy, which follows
// every open, all; else those served from a tier it writes whose copies
// revalidation is due to compare with their sources (markChecked), and
// under the reactive policy those of originals too. The data plane sends
// no other: each event cost the reader its slot in the ring, and the
// leader, on the other core, its decoding.
func (l *Leader) wantOpens() uint64 {
	switch {
	case l.cfg.Policy == "clairvoyant":
		return wantServed | wantOriginal
	case !l.writesATier():
		return 0
	case l.cfg.Policy == "reactive":
		return wantDue | wantOriginal
	}
	return wantDue
}

// ServedTiers are the tier paths the data plane serves copies from, in
// configuration order (events name tiers by index): "" for a tier not in
// use.
func (l *Leader) ServedTiers() []string {
	paths := make([]string, len(l.tiers))
	for i, t := range l.tiers {
		if t.tree != nil {
			paths[i] = t.Path
		}
	}
	return paths
}

func (l *Leader) publishUsage() {
	ld := &l.seg.s.leader
	for i, t := range l.tiers {
		setU64(&ld.tier_used[i], uint64(t.usage.Bytes))
		setU64(&ld.tier_files[i], uint64(t.usage.Files))
	}
}

// run consumes the event ring until Close.
func (l *Leader) run() { l.loop(time.Now().Add(reapInterval)) }

// loop is run's body; reap is when it next releases the writers of dead
// processes. Between polls it sleeps on the ring's bell (struct
// augur_ring), at most pollInterval: a reader that asked for a copy
// (EvRequest) waits for it and rings the bell, and the copy must begin
// at once; other events wait for the next poll.
//
// The goroutine the bell woke makes the copy itself, and a new goroutine
// goes on with the loop. Go would otherwise start the copy on another
// thread, tens of microseconds later, the reader waiting: a goroutine
// woken by this one waits for a thread while this one sleeps in the
// futex (measured: 70 us per request, on two cores, when a doorbell
// goroutine woke the loop, then again when the loop started the copy).
func (l *Leader) loop(reap time.Time) {
	bell := (*uint32)(unsafe.Pointer(&l.seg.s.ring.bell))
	for {
		// Read before the poll: a bell rung after it ends the sleep.
		rang := atomic.LoadUint32(bell)
		var asks []Event
		recount := false
		n := l.ring.poll(pollBatch, func(ev Event) {
			switch {
			case ev.Kind == EvRequest:
				asks = append(asks, ev)
			case l.handle(ev):
				recount = true
			}
		})
		if recount {
			l.recount()
		}
		if len(asks) > 0 {
			go l.loop(reap)
			l.answer(asks)
			return
		}
		if !l.serveChannels() {
			close(l.done)
			return
		}
		l.seg.publishCheckedEpoch()
		if now := time.Now(); now.After(reap) {
			l.seg.releaseDead()
			if l.react != nil {
				l.seg.reapTees()
			}
			reap = now.Add(reapInterval)
		}
		if n < pollBatch { // a full batch: more events wait
			futexWait(bell, rang, pollInterval)
		}
	}
}

// answer answers the requests for copies one poll found, each on a
// goroutine of its own, the last on this one (see loop).
func (l *Leader) answer(asks []Event) {
	last := len(asks) - 1
	for _, ev := range asks[:last] {
		go l.request(ev)
	}
	l.request(asks[last])
}

// ringBell wakes run as a reader's request does.
func (l *Leader) ringBell() {
	bell := (*uint32)(unsafe.Pointer(&l.seg.s.ring.bell))
	atomic.AddUint32(bell, 1)
	futexWake(bell)
}

// pollBatch is how many events run handles before it looks at its
// channels.
const pollBatch = 1024

// serveChannels takes what the leader's other goroutines handed run:
// the clairvoyant plan, stale copies dropped. It reports false once the
// leader is closing.
func (l *Leader) serveChannels() bool {
	for {
		select {
		case <-l.stop:
			return false
		case p := <-l.plans:
			l.plans = nil
			l.adopt(p)
		case d := <-l.dropped:
			l.forget(d)
		case t := <-l.released:
			l.release(t)
		default:
			return true
		}
	}
}

// recount reads the tiers' usage again, after copies were dropped.
func (l *Leader) recount() {
	for i, t := range l.tiers {
		if t.tree != nil {
			l.tiers[i].usage = t.tree.Usage()
		}
	}
	l.publishUsage()
}

// request answers a reader's request for a copy (EvRequest): the
// reactive policy makes it at once, on the caller's goroutine; anything
// else says no, and the reader reads the original.
func (l *Leader) request(ev Event) {
	select {
	case <-l.stop:
		l.seg.clearCopying(ev.Path)
		return
	default:
	}
	if l.react == nil || ev.Truncated {
		l.seg.clearCopying(ev.Path)
		return
	}
	l.react.onRequest(ev)
}

// handle acts on one event; it reports whether tier usage must be
// recounted.
func (l *Leader) handle(ev Event) bool {
	switch {
	case ev.Kind == EvRequest: // a reader waits for the answer
		l.request(ev)
	case ev.Kind == EvTeed && l.react != nil:
		l.react.onTeed(ev)
	case ev.Kind == EvUnteed && l.react != nil:
		l.react.onUnteed(ev)
	case ev.Kind == EvInvalidate && ev.Tree:
		l.changed(tidyWork{tree: ev.Path})
		if m := l.big.Load(); m != nil {
			m.changed(ev.Path, true)
		}
		return true
	case ev.Kind == EvStream:
		if m := l.big.Load(); m != nil {
			m.stream(ev)
		}
	case ev.Kind == EvRead:
		if l.inside != nil {
			l.inside.onRead(ev)
			l.inside.pumpAll()
		}
	case ev.Kind == EvStale:
		if f, ok := parseStale(ev); ok {
			l.changed(tidyWork{stale: f})
		}
	case ev.Kind == EvInvalidate: // fetch the new content on its next read
		if m := l.big.Load(); m != nil {
			m.changed(ev.Path, false)
		}
		switch {
		case l.clair != nil:
			l.clair.invalidated(ev.Path)
		case l.react != nil:
			l.react.known.Delete(ev.Path)
		}
		return true
	case l.plans != nil && (ev.Kind == EvOpen || ev.Kind == EvClose):
		if len(l.early) == maxEarly {
			l.early = append(l.early[:0], l.early[maxEarly/2:]...)
		}
		l.early = append(l.early, ev)
		if ev.Kind == EvOpen && ev.Tier >= 0 {
			l.queueRevalidate(ev)
		}
	case ev.Kind == EvOpen:
		if ev.Tier >= 0 {
			l.queueRevalidate(ev)
		} else if !ev.Truncated {
			l.sources.opened(ev.Path)
		}
		if l.clair != nil {
			l.clair.onOpen(ev)
		}
		if l.react != nil {
			l.react.onOpen(ev)
		}
	case ev.Kind == EvClose && l.clair != nil:
		l.clair.onClose(ev)
	}
	return false
}

// fastestWritten is the fastest tier this leader writes, or nil.
func (l *Leader) fastestWritten() *tiering.Tree {
	for _, t := range l.tiers {
		if t.lock != nil && t.tree != nil {
			return t.tree
		}
	}
	return nil
}

// writesATier says whether this leader may copy into any tier.
func (l *Leader) writesATier() bool {
	for _, t := range l.tiers {
		if t.lock != nil && t.tree != nil {
			return true
		}
	}
	return false
}

// poolTiers are the tiers a fetch pool may write (nil where another
// process writes the tier or it is not in use), their capacities (0
// there) and bytes used.
func (l *Leader) poolTiers() ([]*tiering.Tree, []int64, []int64) {
	trees := make([]*tiering.Tree, len(l.tiers))
	caps := make([]int64, len(l.tiers))
	used := make([]int64, len(l.tiers))
	for i, t := range l.tiers {
		if t.lock != nil {
			trees[i], caps[i] = t.tree, t.Capacity
		}
		used[i] = t.usage.Bytes
	}
	return trees, caps, used
}

// newPool makes the job's copy pool, which copies no file a process of
// the job may be writing (writeGuard). The copies in flight that augur stat
// shows are the pool's own count, so that no policy can make it drift
// (counting up in the reactive policy and down in whichever policy's
// copy ended took it below zero once a clairvoyant job fell back to the
// reactive policy with copies queued).
func (l *Leader) newPool(tiers []*tiering.Tree, used []int64, done func(fetchpool.Result)) *fetchpool.Pool {
	p := fetchpool.New(tiers, used, done)
	p.Guard(writeGuard{l.seg})
	p.Watch(func(n int) { setU64(&l.seg.s.leader.inflight, uint64(n)) })
	if l.peers != nil {
		p.Source(l.peers)
	}
	return p
}

// startReactive starts the reactive policy. In a job of several nodes,
// the owner of a file (owner) holds it: the others ask it for a copy, and
// it makes one on demand.
func (l *Leader) startReactive() {
	l.react = newReactive(l)
	l.sources.whenJudged(l.react.judged)
	l.startBlocks(l.react.pool)
	l.peers.setHolder(l.owner, l.react.fetchOwned)
}

// startBlocks tiers large files in blocks, counted in pool's tiers.
func (l *Leader) startBlocks(pool *fetchpool.Pool) {
	if l.cfg.BlockAbove > 0 && l.writesATier() {
		l.big.Store(newBlocks(l, pool, l.cfg.BlockAbove))
	}
}

// owner is the reactive policy's holder of a file: a hash of its path
// over the nodes (HVAC's partitioning), which every node computes alike.
func (l *Leader) owner(path string) (int, readiness) {
	return peers.Owner(path, l.peers.cfg.Nodes), nil
}

// drainTimeout bounds how long Close waits for queued copies: they make
// the next job start hot, but the command has ended.
const drainTimeout = 30 * time.Second

// Close stops the leader and releases its locks; a second Close does
// nothing. The segment stays, so augur stat can show the job after it
// ended.
func (l *Leader) Close() { l.closed.Do(l.close) }

func (l *Leader) close() {
	setU64(&l.seg.s.leader.wait_max, 0) // nobody left to answer: readers stop asking
	setU64(&l.seg.s.leader.tee_max, 0)  // nor to publish
	setU64(&l.seg.s.leader.copying, 0)
	close(l.stop)
	l.ringBell() // run may be asleep on it
	<-l.done
	l.workers.Wait()
	l.ring.poll(1<<30, func(ev Event) { l.handle(ev) })
	switch {
	case l.react != nil:
		l.react.drain()
		l.react.pool.Drain(drainTimeout)
		l.react.close()
	case l.clair != nil:
		l.clair.react.drain()
		l.clair.pool.Drain(drainTimeout)
		l.clair.close()
	}
	l.peers.close() // after the copies: those in flight may still come from a peer
	l.sources.close()
	if m := l.big.Load(); m != nil {
		m.save() // the next job starts with the blocks this one read
	}
	for i, t := range l.tiers {
		l.seg.keepPresence(i, false) // no one marks the copies another writer makes now
		t.lock.Unlock()
		t.tree.Close()
	}
	setU64(&l.seg.s.leader.ended_ns, uint64(time.Now().UnixNano()))
	l.lock.Close()
}

// publishRows writes augur stat's stream table: rows are by's, beside
// the others'.
func (l *Leader) publishRows(by string, rows []StreamStats) {
	l.rowsMu.Lock()
	defer l.rowsMu.Unlock()
	if l.rows == nil {
		l.rows = map[string][]StreamStats{}
	}
	l.rows[by] = rows
	var all []StreamStats
	for _, k := range slices.Sorted(maps.Keys(l.rows)) {
		all = append(all, l.rows[k]...)
	}
	l.seg.publishStreams(all)
}

// Campaign tries to lead now and then every interval until it does, so
// leadership passes on when a leader dies. It never returns.
func Campaign(cfg *Config, seg *Segment, log zerolog.Logger, interval time.Duration) {
	for {
		l, err := Lead(cfg, seg, log)
		if err != nil {
			log.Warn().Msgf("leader lock: %v", err)
			return
		}
		if l != nil {
			return
		}
		time.Sleep(interval)
	}
}
