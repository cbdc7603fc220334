// Package fetchpool copies dataset files into tiers in the background,
// off the read path.
//
// Fetch places a file at once — the fastest tier with room, counting the
// bytes already reserved by queued copies, so a tier's capacity is never
// exceeded — and queues it. All tiers share one queue, served in the
// order of the requests: the shared filesystem's bandwidth goes to the
// copies asked for first, which a clairvoyant caller asks for in the
// order they will be read. (A queue per tier would copy a far-future
// file for the disk tier at the same pace as the next one for the RAM
// tier, and halve the pace of the files needed now.) Each tier still
// has its own number of copy threads: at most that many copies write
// into it at once. A tier that reports
// ENOSPC is marked full and one that fails otherwise is marked failed;
// the file is then placed on the next tier, or dropped if none has room.
// A file is queued at most once at a time.
//
// A copy someone waits for (FetchNow: a peer asked this node for a file
// it should hold) does not wait behind the queue: it begins at once, on a
// goroutine of its own, within the same accounts (capacity, the file
// pending once, the guard, done), beside the tier's copy threads. Those
// may all be waiting on other nodes, which may be waiting on this one.
//
// A copy's bytes come from the shared filesystem, or from a Source
// when one is set and can fill it (another node's copy, package peers):
// the copy is then published by the same protocol
// (tiering.Tree.PublishFrom), checked against the source's size and
// mtime, and whatever goes wrong with it, the pool copies the file from
// the shared filesystem instead, within the same job.
package fetchpool

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

// ErrHeld: the file may be changing (a process of the job has it open
// for writing, or changed it while it was copied); no copy was kept.
var ErrHeld = errors.New("file being written; not copied")

// A Guard says when a file may be copied: the shim's says no while a
// process of the job may write the file.
type Guard interface {
	// Begin reports whether path may be copied now, with a token for
	// Commit.
	Begin(path string) (token uint64, ok bool)
	// Commit puts a copy of path made since Begin gave token in place
	// (tiering.Commit): it calls rename unless the file may have changed
	// since, and takes the copy back with remove if the file changed
	// while it was renamed. src is the source's stat the copy was made
	// from. It returns rename's error, or ErrHeld if the copy is not in
	// place.
	Commit(path string, token uint64, src *unix.Stat_t, rename func() error, remove func()) error
}

// A Source fills copies from somewhere other than the shared filesystem:
// the leader of a job of several nodes fills them from the other nodes'
// tiers. Its methods are called from the pool's workers, concurrently.
type Source interface {
	// Fill writes the bytes of path into dst, an empty temporary file of
	// the tier, from its start, and returns how many it wrote. It is
	// asked for every copy the guard allows, and declines at once one it
	// should not take from elsewhere (no peer holds it, or the shared
	// filesystem is expected to deliver it first). st is path's stat,
	// taken as the copy began: the bytes must be of that version of the
	// file (a peer serves only a copy of its size and mtime); st must not
	// be changed. ok false (declined, or failed midway): dst is discarded
	// and the file copied from the shared filesystem. Fill must not close
	// dst.
	Fill(path string, st *unix.Stat_t, dst *os.File) (n int64, ok bool)
	// BeginPFS is told that a copy of size bytes from the shared
	// filesystem begins, and returns what to tell the bytes copied when
	// it ends: a model choosing between the sources needs the
	// filesystem's throughput and the bytes in flight there
	// (peers.Model.Begin and Transfer.Done).
	BeginPFS(size int64) (done func(n int64))
}

// A Statter is a Source with its own stat of the files it fills, which
// the pool then takes instead of tiering.Stat's; an error of it is a
// decline (the file is copied from the shared filesystem). The peers
// stat a source without following a symlink below its root, and ask
// another node only for a file that is the dataset's own.
type Statter interface {
	Stat(path string, st *unix.Stat_t) error
}

// Result reports one finished copy.
type Result struct {
	Path     string
	Tier     int   // where it was published, if Err is nil
	Bytes    int64 // bytes copied
	Err      error
	TierDown bool // Err took Tier out of service (full or failing) until RetryDown
	Again    bool // TierDown, and the file was queued for a later tier: another Result follows
	Peer     bool // the bytes published came from the Source, not the shared filesystem
}

// queueLen bounds the copies waiting; Fetch refuses beyond it (the file
// is fetched again on a later access).
const queueLen = 1 << 16

// Pool is a set of per-tier copy workers.
type Pool struct {
	done func(Result)

	mu      sync.Mutex
	slots   []slot          // guarded by mu
	pending map[string]bool // queued or being copied; guarded by mu
	closed  bool            // guarded by mu
	watch   func(int)       // told len(pending) whenever it changes; guarded by mu
	guard   Guard           // nil: every file may be copied; set before the first Fetch
	source  Source          // nil: every copy from the shared filesystem; set before the first Fetch

	queue chan job
	now   chan struct{} // one token per copy of FetchNow's running
	stop  chan struct{}
	wg    sync.WaitGroup
}

type slot struct {
	tier     *tiering.Tree // nil: a tier this pool may not write
	capacity int64
	used     int64 // bytes of published copies
	reserved int64 // bytes of queued copies
	full     bool
	failed   bool
	down     time.Time     // when it went full or failed
	writers  chan struct{} // one token per copy thread of the tier
}

type job struct {
	path string
	size int64
	tier int
	src  *tiering.Source // opened by the caller (FetchOpened), or nil
	// after, if not nil, is closed once the Result of the copy that failed
	// and queued this one again is delivered: a Result with Again comes
	// before the one that follows it.
	after  chan struct{}
	filled *filled // the caller has the bytes (FetchFilled), or nil
}

// filled is a copy whose bytes the caller has, read when the guard's
// token was token: publish puts them in a tier (commit brackets the
// rename, see Guard).
type filled struct {
	token   uint64
	publish func(tier *tiering.Tree, commit tiering.Commit) (int64, error)
}

// New starts the workers, as many as all tiers have copy threads. used[i]
// is what tier i already holds; a nil tier is one the pool may not write
// (another process writes it, or it is not in use). done is called from a
// worker after every copy, successful or not; it may call Fetch.
func New(tiers []*tiering.Tree, used []int64, done func(Result)) *Pool {
	p := &Pool{done: done, pending: map[string]bool{}, stop: make(chan struct{}),
		queue: make(chan job, queueLen)}
	workers := 0
	for i, t := range tiers {
		s := slot{tier: t, used: used[i], writers: make(chan struct{})}
		if t != nil {
			s.capacity = t.Capacity
			s.writers = make(chan struct{}, max(t.Threads, 1))
		}
		p.slots = append(p.slots, s)
		for w := 0; w < cap(s.writers); w++ {
			p.wg.Add(1)
			go p.worker()
		}
		workers += cap(s.writers)
	}
	p.now = make(chan struct{}, max(workers, 1))
	return p
}

// Fetch queues path (of size bytes) for the fastest tier with room. It
// reports whether the file was queued: false when it is already pending,
// fits no tier, or the pool is closed.
func (p *Pool) Fetch(path string, size int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.pending[path] {
		return false
	}
	return p.placeLocked(job{path: path, size: size}, 0)
}

// FetchNow begins the copy of path (of size bytes) at once, in the
// fastest tier with room, for a caller that waits for its Result: not
// behind the queue, and beside the tiers' copy threads. At most as many
// such copies run at once as the pool has copy threads; a free turn is
// waited for within ctx. FetchNow reports whether a copy of path is under
// way, begun now or before (perhaps queued): a Result for path is then to
// come, unless the pool is closed first. The caller must not ask for a
// copy the Source may fill from a node that waits on this one.
func (p *Pool) FetchNow(ctx context.Context, path string, size int64) bool {
	return p.fetchNow(ctx, job{path: path, size: size})
}

// FetchOpened copies a source the caller opened (a reader waits for its
// copy) at once, in the fastest tier with room, and returns when the copy
// is settled (its Result delivered). The copy reads src, with no request
// of its own to the shared filesystem to open and stat it again, and
// runs on the caller's goroutine: handing it to another cost the reader
// 40 us. A free turn is waited for within ctx, as by FetchNow.
// FetchOpened reports whether it made the copy (false: already pending,
// no tier with room, or the pool is closed; no Result then). It closes
// src.
func (p *Pool) FetchOpened(ctx context.Context, path string, src *tiering.Source) bool {
	return p.copyHere(ctx, job{path: path, size: src.Stat.Size, src: src})
}

// FetchFilled publishes a copy of path, of size bytes, that the caller
// has (a reader's tee), at once, in the fastest tier with room, on the
// caller's goroutine, and returns when its Result is delivered. publish
// puts the bytes in the tier it is given (tiering.Tree.PublishFile),
// calling commit to rename them into place; token is the guard's Begin of
// the moment the bytes were read (the reader's open): the copy is
// published only if it did not move (Guard.Commit). A tier that fails it
// does not pass it to the next: the caller's bytes are not kept.
// FetchFilled reports whether it made the copy (false: already pending,
// no tier with room, or the pool is closed; no Result then, and publish
// is not called).
func (p *Pool) FetchFilled(ctx context.Context, path string, size int64, token uint64, publish func(tier *tiering.Tree, commit tiering.Commit) (int64, error)) bool {
	return p.copyHere(ctx, job{path: path, size: size, filled: &filled{token: token, publish: publish}})
}

// copyHere makes j's copy at once on the caller's goroutine, once
// admitted (admitNow), and reports whether it was.
func (p *Pool) copyHere(ctx context.Context, j job) bool {
	if !p.admitNow(ctx, &j) {
		return false
	}
	defer p.wg.Done()
	p.copy(j)
	<-p.now
	return true
}

func (p *Pool) fetchNow(ctx context.Context, j job) bool {
	if !p.admitNow(ctx, &j) {
		return p.isPending(j.path)
	}
	go func() {
		defer p.wg.Done()
		p.copy(j)
		<-p.now
	}()
	return true
}

// admitNow takes a turn for a copy that begins at once and reserves its
// tier; on success the caller runs j and then gives back the turn (<-p.now)
// and calls p.wg.Done. On failure it closes j's source.
func (p *Pool) admitNow(ctx context.Context, j *job) bool {
	p.mu.Lock()
	pending, closed := p.pending[j.path], p.closed
	p.mu.Unlock()
	if pending || closed {
		j.closeSource()
		return false
	}
	select {
	case p.now <- struct{}{}:
	case <-ctx.Done():
		j.closeSource()
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	j.tier = p.tierLocked(j.size, 0)
	if p.closed || p.pending[j.path] || j.tier < 0 { // it may have changed while this waited
		<-p.now
		j.closeSource()
		return false
	}
	p.reserveLocked(*j)
	p.wg.Add(1) // under mu, the pool not closed: before Close waits
	return true
}

// isPending says whether a copy of path is queued or under way.
func (p *Pool) isPending(path string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending[path]
}

// closeSource closes the source the job's caller opened, if any.
func (j *job) closeSource() {
	if j.src != nil {
		j.src.File.Close()
	}
}

// FetchTo queues path for one tier, if it has room: the clairvoyant
// policy decides placement itself. A tier failure still moves the file to
// the next tier.
func (p *Pool) FetchTo(path string, size int64, tier int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.pending[path] || tier < 0 || tier >= len(p.slots) {
		return false
	}
	if !p.slots[tier].usableLocked(size) {
		return false
	}
	return p.placeLocked(job{path: path, size: size}, tier)
}

// Fits reports whether a copy of size bytes would be accepted in tier
// now.
func (p *Pool) Fits(tier int, size int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed && tier >= 0 && tier < len(p.slots) && p.slots[tier].usableLocked(size)
}

// Take counts bytes of tier's capacity as used, for copies the caller
// makes itself (a large file's blocks), if they fit; Release gives them
// back.
func (p *Pool) Take(tier int, bytes int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || tier < 0 || tier >= len(p.slots) || !p.slots[tier].usableLocked(bytes) {
		return false
	}
	p.slots[tier].used += bytes
	return true
}

// Release gives back bytes of a tier whose copy the caller removed (a
// staged file dropped after use).
func (p *Pool) Release(tier int, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slots[tier].used -= bytes
}

// placeLocked queues j on the first usable tier at or after from.
//
// Preconditions: p.mu is held.
func (p *Pool) placeLocked(j job, from int) bool {
	if j.tier = p.tierLocked(j.size, from); j.tier < 0 {
		return false
	}
	select {
	case p.queue <- j:
		p.reserveLocked(j)
		return true
	default:
		return false
	}
}

// tierLocked is the first usable tier for size bytes at or after from,
// or -1.
//
// Preconditions: p.mu is held.
func (p *Pool) tierLocked(size int64, from int) int {
	for i := from; i < len(p.slots); i++ {
		if p.slots[i].usableLocked(size) {
			return i
		}
	}
	return -1
}

// reserveLocked accounts for j, queued or begun, until its copy ends.
//
// Preconditions: p.mu is held.
func (p *Pool) reserveLocked(j job) {
	p.slots[j.tier].reserved += j.size
	p.pending[j.path] = true
	p.changedLocked()
}

// Guard has every copy asked of g first and checked with it after; call
// it before the first Fetch.
func (p *Pool) Guard(g Guard) { p.guard = g }

// Source has every copy filled by s if it can, from the shared
// filesystem otherwise; call it before the first Fetch. The guard
// applies to a copy from s as to any. Each copy then costs a stat of the
// file more, whoever fills it: the stat Fill is given, which the peer
// must match.
func (p *Pool) Source(s Source) { p.source = s }

// Watch has f told the number of files queued or being copied now and
// whenever it changes, under the pool's lock: f must not call the pool.
func (p *Pool) Watch(f func(pending int)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watch = f
	p.changedLocked()
}

// changedLocked tells the watcher the number pending.
//
// Preconditions: p.mu is held.
func (p *Pool) changedLocked() {
	if p.watch != nil {
		p.watch(len(p.pending))
	}
}

func (p *Pool) worker() {
	defer p.wg.Done()
	for {
		select {
		case <-p.stop:
			return
		case j := <-p.queue:
			writers := p.slots[j.tier].writers
			select {
			case <-p.stop:
				return
			case writers <- struct{}{}:
			}
			if j.after != nil {
				<-j.after
			}
			p.copy(j)
			<-writers
		}
	}
}

// copy publishes one file and settles the accounts.
func (p *Pool) copy(j job) {
	i := j.tier
	tier := p.slots[i].tier
	n, peer, err := p.publish(tier, j)
	var te *tiering.TierError
	full := errors.Is(err, unix.ENOSPC)
	down := full || errors.As(err, &te) && tier.Usable() != nil
	again := false
	p.mu.Lock()
	s := &p.slots[i]
	s.reserved -= j.size
	delete(p.pending, j.path)
	switch {
	case err == nil:
		s.used += n
	case down:
		s.full, s.failed, s.down = full, !full, time.Now()
		next := j
		next.after = make(chan struct{})
		if again = !p.closed && j.filled == nil && p.placeLocked(next, i+1); again {
			defer close(next.after)
		}
	}
	// Any other error is the file's: the caller may try again later.
	p.changedLocked()
	p.mu.Unlock()
	if !again {
		j.closeSource()
	}
	if p.done != nil {
		p.done(Result{Path: j.path, Tier: i, Bytes: n, Err: err, TierDown: down, Again: again, Peer: peer})
	}
}

// RetryDown is how long a tier that went full or failed is left alone
// before copies are tried there again: space may have been freed, a
// failing disk may have been replaced or remounted.
var RetryDown = 10 * time.Second

// usableLocked says whether slot s may take a copy of size bytes, giving
// a tier that went down another chance after RetryDown.
//
// Preconditions: p.mu is held.
func (s *slot) usableLocked(size int64) bool {
	if (s.full || s.failed) && time.Since(s.down) >= RetryDown {
		s.full, s.failed = false, false
	}
	return !s.full && !s.failed && s.used+s.reserved+size <= s.capacity
}

// publish copies j's file into tier, within what the guard allows, and
// says whether the bytes came from the Source.
func (p *Pool) publish(tier *tiering.Tree, j job) (int64, bool, error) {
	if j.filled != nil {
		n, err := p.publishFilled(tier, j.path, j.filled)
		return n, false, err
	}
	if p.guard == nil {
		return p.copyIn(tier, j, nil)
	}
	token, ok := p.guard.Begin(j.path)
	if !ok {
		return 0, false, ErrHeld
	}
	return p.copyIn(tier, j, func(src *unix.Stat_t, rename func() error, remove func()) error {
		return p.guard.Commit(j.path, token, src, rename, remove)
	})
}

// publishFilled publishes the bytes f has of path in tier, if the guard
// still gives the token it gave when they were read.
func (p *Pool) publishFilled(tier *tiering.Tree, path string, f *filled) (int64, error) {
	var commit tiering.Commit
	if p.guard != nil {
		if token, ok := p.guard.Begin(path); !ok || token != f.token {
			return 0, ErrHeld
		}
		commit = func(src *unix.Stat_t, rename func() error, remove func()) error {
			return p.guard.Commit(path, f.token, src, rename, remove)
		}
	}
	return f.publish(tier, commit)
}

// copyIn publishes j's file in tier from the Source if it fills it, else
// from the shared filesystem; commit (nil: none) puts the copy in place.
func (p *Pool) copyIn(tier *tiering.Tree, j job, commit tiering.Commit) (int64, bool, error) {
	if p.source == nil {
		n, err := publishFS(tier, j, commit)
		return n, false, err
	}
	switch n, err := p.fill(tier, j.path, commit); {
	case err == nil:
		return n, true, nil
	case errors.Is(err, ErrHeld):
		return 0, false, err // the file changed: a copy from elsewhere is as stale
	}
	done := p.source.BeginPFS(j.size)
	n, err := publishFS(tier, j, commit)
	done(n)
	return n, false, err
}

// publishFS publishes j's file in tier from the shared filesystem,
// through the source its caller opened if there is one.
func publishFS(tier *tiering.Tree, j job, commit tiering.Commit) (int64, error) {
	src := j.src
	if src == nil {
		var err error
		if src, err = tiering.OpenSource(j.path); err != nil {
			return 0, err
		}
		defer src.File.Close()
	}
	src.Commit = commit
	return tier.PublishSource(j.path, src)
}

// errDeclined: the Source did not fill the copy.
var errDeclined = errors.New("not filled by the source")

// fill publishes path in tier with the bytes of the Source. The caller
// copies from the shared filesystem after any error but the guard's
// ErrHeld: whatever it was (the source's stat failed, the Source declined
// or failed, its bytes were refused, the tier failed), that copy meets it
// again if it is the file's or the tier's, and reports it then.
func (p *Pool) fill(tier *tiering.Tree, path string, commit tiering.Commit) (int64, error) {
	stat := tiering.Stat
	if s, ok := p.source.(Statter); ok {
		stat = s.Stat
	}
	var st unix.Stat_t
	if err := stat(path, &st); err != nil {
		return 0, err
	}
	n, err := tier.PublishFrom(path, &st, func(dst *os.File) (int64, error) {
		n, ok := p.source.Fill(path, &st, dst)
		if !ok {
			return n, errDeclined
		}
		return n, nil
	}, commit)
	return n, err
}

// Pending is the number of files queued or being copied.
func (p *Pool) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending)
}

// TierState is one tier's accounts.
type TierState struct {
	Used, Reserved int64
	Full, Failed   bool
}

// Tiers returns the accounts of every tier.
func (p *Pool) Tiers() []TierState {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ts []TierState
	for _, s := range p.slots {
		ts = append(ts, TierState{s.used, s.reserved, s.full, s.failed})
	}
	return ts
}

// Drain waits until no copy is queued or in progress, or timeout.
func (p *Pool) Drain(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for p.Pending() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// Close stops the workers after the copies in progress; queued copies are
// abandoned (a later leader fetches them again).
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	close(p.stop)
	p.wg.Wait()
}
