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
package fetchpool

import (
	"errors"
	"sync"
	"time"

	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

// Result reports one finished copy.
type Result struct {
	Path  string
	Tier  int   // where it was published, if Err is nil
	Bytes int64 // bytes copied
	Err   error
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

	queue chan job
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
	writers  chan struct{} // one token per copy thread of the tier
}

type job struct {
	path string
	size int64
	tier int
}

// New starts the workers, as many as all tiers have copy threads. used[i]
// is what tier i already holds; a nil tier is one the pool may not write
// (another process writes it, or it is not in use). done is called from a
// worker after every copy, successful or not; it may call Fetch.
func New(tiers []*tiering.Tree, used []int64, done func(Result)) *Pool {
	p := &Pool{done: done, pending: map[string]bool{}, stop: make(chan struct{}),
		queue: make(chan job, queueLen)}
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
	}
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

// FetchTo queues path for one tier, if it has room: the clairvoyant
// policy decides placement itself. A tier failure still moves the file to
// the next tier.
func (p *Pool) FetchTo(path string, size int64, tier int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.pending[path] || tier < 0 || tier >= len(p.slots) {
		return false
	}
	s := &p.slots[tier]
	if s.full || s.failed || s.used+s.reserved+size > s.capacity {
		return false
	}
	return p.placeLocked(job{path: path, size: size}, tier)
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
	for i := from; i < len(p.slots); i++ {
		s := &p.slots[i]
		if s.full || s.failed || s.used+s.reserved+j.size > s.capacity {
			continue
		}
		j.tier = i
		select {
		case p.queue <- j:
			s.reserved += j.size
			p.pending[j.path] = true
			p.changedLocked()
			return true
		default:
			return false
		}
	}
	return false
}

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
			p.copy(j)
			<-writers
		}
	}
}

// copy publishes one file and settles the accounts.
func (p *Pool) copy(j job) {
	i := j.tier
	n, err := p.slots[i].tier.Publish(j.path)
	p.mu.Lock()
	s := &p.slots[i]
	s.reserved -= j.size
	var te *tiering.TierError
	delete(p.pending, j.path)
	switch {
	case err == nil:
		s.used += n
	case errors.As(err, &te):
		if errors.Is(err, unix.ENOSPC) {
			s.full = true
		} else {
			s.failed = true
		}
		if !p.closed {
			p.placeLocked(j, i+1)
		}
	}
	// Any other error is the source's: the caller may try again later.
	p.changedLocked()
	p.mu.Unlock()
	if p.done != nil {
		p.done(Result{Path: j.path, Tier: i, Bytes: n, Err: err})
	}
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
