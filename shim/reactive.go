package shim

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/augur-hpc/augur/fetchpool"
	"github.com/augur-hpc/augur/tiering"
	"github.com/puzpuzpuz/xsync/v3"
	"golang.org/x/sys/unix"
)

// reactive is MONARCH's policy: the first read of a file that has no
// copy is served from the original, and the file is copied in the
// background to the fastest tier with room. Nothing is evicted: every
// file is read every epoch, so churning costs more than it saves.
//
// The shared filesystem must serve each file once. Where its client
// keeps a page cache, the copy, made as soon as the open is seen, reads
// what the reader's reads put there (MONARCH's way); where it keeps none,
// a copy made beside the reader would read the file a second time. So a
// file of at most WaitMax bytes is copied before its first reader reads
// it: the reader's open asks for the copy (EvRequest) and waits, and the
// leader makes it at once (onRequest), reading the file once for both.
// The first copies asked for also tell which client it is (learnClient):
// where it keeps a page cache, the wait saves the shared filesystem
// nothing, and readers ask only for files larger than the client's
// read-ahead window (wait_min). A file within it the client fetches in
// one request, as fast as the copy would, and the wait would cost the
// reader the leader's hand-offs (0.15-0.3 ms a file here: R1's 128 KiB
// files took 1.06x without augur's time when their readers waited, 1.00x
// when they did not). A larger file the client fetches in windows one
// after another, the copy in parallel parts (R1 with 256 KiB files:
// 0.94x when readers waited, 1.03x when they did not).
// A file larger than WaitMax is read from the original while the queue
// copies it: a reader that reads a small part of it must not wait for
// all of it. In a job of several nodes, a reader waits only for the
// files its own node owns; another node's come through their owner,
// behind the queue.
type reactive struct {
	l        *Leader
	pool     *fetchpool.Pool
	known    *xsync.MapOf[string, struct{}] // files fetched or found placed
	stat     chan string                    // files to stat and fetch, in order of first open
	mu       sync.Mutex                     // guards files
	files    []int64                        // copies published per tier
	waits    copyWaits                      // for the copies other nodes asked for
	tees     chan tee                       // readers' tees to publish, in order (onTeed)
	refill   chan struct{}                  // a tee took a file of the pool (keepPool)
	adopting sync.WaitGroup                 // the adopter of tees
	warn     sync.Once
	full     sync.Once    // stopWaiting's message
	cache    atomic.Int32 // whether the shared filesystem's client caches: clientUnknown until learnClient says
	teeSize  atomic.Int64 // the last tee's file size: the pool's files are made for it (keepPool)
	// held are files opened from their originals while their root was
	// not judged (sources.go): copied once it is worth copies, dropped
	// if it is passed through.
	heldMu sync.Mutex
	held   []string
}

// maxHeld bounds the files held for a root's judgment: past it they are
// copied as ever.
const maxHeld = 1 << 16

// What learnClient found of the shared filesystem's client; the values
// of the segment's client_cache.
const (
	clientUnknown int32 = iota
	clientCaches
	clientUncached
)

func newReactive(l *Leader) *reactive {
	tiers, _, used := l.poolTiers()
	r := reactiveWith(l)
	r.pool = l.newPool(tiers, used, r.done)
	return r
}

// reactiveWith makes the policy's state; the caller sets its pool.
func reactiveWith(l *Leader) *reactive {
	files := make([]int64, len(l.tiers))
	for i, t := range l.tiers {
		files[i] = t.usage.Files
	}
	r := &reactive{l: l, known: xsync.NewMapOf[string, struct{}](), files: files,
		stat: make(chan string, backlog), tees: make(chan tee, backlog),
		refill: make(chan struct{}, 1)}
	l.workers.Add(1)
	go r.statter()
	return r
}

// onOpen handles one open event: a file read from its original is
// fetched, once.
func (r *reactive) onOpen(ev Event) {
	if ev.Tier >= 0 || ev.Truncated || r.l.sources.passes(ev.Path) {
		return
	}
	if ev.Tee { // its reader makes the copy (onTeed), or says it did not (onUnteed)
		r.known.Store(ev.Path, struct{}{})
		return
	}
	if _, seen := r.known.LoadOrStore(ev.Path, struct{}{}); seen {
		return
	}
	r.queue(ev.Path)
}

// hold keeps path until its root is judged, if there is room.
func (r *reactive) hold(path string) bool {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	if len(r.held) >= maxHeld {
		return false
	}
	r.held = append(r.held, path)
	return true
}

// judged is told that root was judged (sources.go): its held files are
// fetched, or dropped when it is passed through (known no more: copied on
// their next open if it is copied again).
func (r *reactive) judged(root string, pass bool) {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	kept := r.held[:0]
	for _, p := range r.held {
		switch {
		case !strings.HasPrefix(p, root+"/"):
			kept = append(kept, p)
		case pass:
			r.known.Delete(p)
		default:
			r.queue(p)
		}
	}
	r.held = kept
}

// queue hands a file marked known to the statter, which fetches it.
func (r *reactive) queue(path string) {
	select {
	case r.stat <- path:
	default: // the statter is behind by a full queue: its next open asks again
		r.known.Delete(path)
	}
}

// statter stats and fetches the files onOpen queued. A stat is a metadata
// request to the shared filesystem, which the leader's run goroutine must
// not wait for (see revalidators); one statter, so that the files are
// fetched, and placed, in the order they were first opened.
func (r *reactive) statter() {
	defer r.l.workers.Done()
	for {
		select {
		case <-r.l.stop:
			return
		case p := <-r.stat:
			r.fetch(p)
		}
	}
}

// drain fetches the files still queued for the statter, once it has
// stopped (Leader.Close), after the readers' tees are published.
func (r *reactive) drain() {
	r.drainTees()
	for {
		select {
		case p := <-r.stat:
			r.fetch(p)
		default:
			return
		}
	}
}

// fetch queues the copy of a file some process opened from its original.
func (r *reactive) fetch(path string) {
	var st unix.Stat_t
	if err := tiering.Stat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return
	}
	if m := r.l.big.Load(); m.large(st.Size) {
		m.enter(path, &st) // tiered in blocks as it is read (blocks.go): its pages are kept as it is read, judged or not
		return
	}
	if r.l.sources.undecided(path) && r.hold(path) {
		return
	}
	if tiering.Lookup(r.l.open, path, &st) >= 0 {
		return // placed already (opened before the tiers were ready)
	}
	if r.l.largerThanTiers(st.Size) {
		r.l.notCached(path, FormatSize(st.Size)+", larger than every tier")
		return
	}
	// A file too large to wait for is read from the original meanwhile:
	// its next openers should not wait for its copy either.
	if r.pool.Fetch(path, st.Size) && !r.tooLarge(st.Size) {
		r.l.seg.markCopying(path)
	}
}

// tooLarge says whether a reader should read a file of size bytes from
// the original rather than wait for its copy.
func (r *reactive) tooLarge(size int64) bool {
	max := r.l.cfg.WaitMax
	return max > 0 && size > max
}

// onRequest answers a reader that found no copy and waits for one
// (EvRequest). It stats and copies the file from the shared filesystem
// (copyNow), so the caller must not be the event loop (Leader.loop).
func (r *reactive) onRequest(ev Event) {
	if r.l.sources.passes(ev.Path) { // worth no copy: the reader reads the original at once
		r.l.seg.clearCopying(ev.Path)
		return
	}
	if r.l.sources.undecided(ev.Path) {
		// Its root is judged within a few probes (the first, if it is
		// slow): the reader reads the original meanwhile.
		r.l.seg.clearCopying(ev.Path)
		if _, seen := r.known.LoadOrStore(ev.Path, struct{}{}); !seen {
			r.queue(ev.Path) // the statter holds it, or enters a large file
		}
		return
	}
	if _, seen := r.known.LoadOrStore(ev.Path, struct{}{}); seen {
		// Queued, being copied, or copied and gone since: the pending
		// table says which to a reader that looks, so this one reads
		// the original rather than wait behind the queue.
		r.l.seg.clearCopying(ev.Path)
		return
	}
	if r.l.peers != nil {
		if owner, _ := r.l.owner(ev.Path); owner != r.l.peers.cfg.Node {
			// Another node owns the file (HVAC) and makes the copy this
			// one gets, behind the queue: the reader reads the original
			// meanwhile rather than wait on the owner's read of the
			// shared filesystem and the link (measured in make bench's
			// S4: the first epoch 3.5x no augur's when readers waited).
			r.l.seg.clearCopying(ev.Path)
			r.queue(ev.Path)
			return
		}
	}
	r.copyNow(ev.Path)
}

// requestWait bounds how long a requested copy waits for a turn of the
// pool: as long as the reader waits (REQUEST_WAIT_NS in preload/waits.c).
const requestWait = 30 * time.Second

// copyNow makes the copy a reader waits for, at once and beside the
// queue, and answers the reader: COPYING until the copy is published or
// abandoned (done clears it), or at once no (the reader reads the
// original). A file too large to wait for is queued as one opened from
// the original.
func (r *reactive) copyNow(path string) {
	probe := r.cache.Load() == clientUnknown
	src, err := openWaited(path, probe)
	if err != nil || src.Stat.Mode&unix.S_IFMT != unix.S_IFREG {
		if src != nil {
			src.File.Close()
		}
		r.known.Delete(path) // the reader's open says what is wrong; a later one asks again
		r.l.seg.clearCopying(path)
		return
	}
	size, large := src.Stat.Size, r.tooLarge(src.Stat.Size)
	if m := r.l.big.Load(); m.large(size) {
		src.File.Close()
		r.l.seg.clearCopying(path)
		m.enter(path, &src.Stat) // tiered in blocks as it is read (blocks.go)
		return
	}
	if r.l.largerThanTiers(size) {
		src.File.Close()
		r.l.seg.clearCopying(path)
		r.l.notCached(path, FormatSize(size)+", larger than every tier")
		return
	}
	if large || tiering.Lookup(r.l.open, path, &src.Stat) >= 0 {
		src.File.Close()
		r.l.seg.clearCopying(path) // read from the original, or there already
		if large {
			r.pool.Fetch(path, size)
		}
		return
	}
	if !r.fits(size) {
		src.File.Close()
		r.l.seg.clearCopying(path)
		r.stopWaiting()
		return
	}
	r.l.seg.markCopying(path) // before the copy can end, which clears it
	// The reader opens the copy once it is in place, while the source is
	// stat'ed again: that request is not in the reader's way.
	// It is as fresh as a copy can be: the reader's open must not send
	// a revalidator to the shared filesystem.
	src.Placed = func() {
		r.l.copied(path)
		if probe {
			// Before the reader wakes: its next open is to follow
			// what the first copy found (it asked again when it ran
			// first, in a loaded fresh-ci).
			r.learnClient(src)
		}
		r.l.seg.clearCopying(path)
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestWait)
	defer cancel()
	if !r.pool.FetchOpened(ctx, path, src) {
		// No tier has room (nothing is evicted: later opens of the file
		// are answered no at once), or the pool is closing.
		r.l.seg.clearCopying(path)
	}
}

// openWaited opens the source of a copy a reader waits for. Once the
// client is known to keep no page cache it is read uncached (O_DIRECT,
// tiering.OpenSourceUncached); until it is known, through the cache, so
// that learnClient can see whether the bytes stayed there.
func openWaited(path string, probe bool) (*tiering.Source, error) {
	if !probe {
		return tiering.OpenSourceUncached(path)
	}
	src, err := tiering.OpenSource(path)
	if src != nil {
		src.Parallel = true
	}
	return src, err
}

// learnClient records, from src's bytes just copied through the client's
// cache, whether the shared filesystem's client keeps a page cache, and
// which first opens wait for their copy from then on; the others read
// the original, and their copy costs the shared filesystem nothing: made
// from the pages they left where the client caches (the queue's, at
// once: off the reader's way, where a tee would have the reader write
// every byte into memory once more, 1.02-1.04x no augur's time against
// 0.98-1.02x in make bench's R1 with a page cache), their tee
// (preload/tee.c) where it does not. A wait costs the reader the leader's
// hand-offs (0.15-0.3 ms a file here: make bench's R1, 128 KiB files,
// 1.04-1.06x no augur's time when readers waited), and wins only where
// the copy, read in parallel parts, beats the client's own requests one
// after another: a file larger than the client's read-ahead (R1 with 256
// KiB files and a page cache: 0.94x). So readers wait only for such files
// (wait_min), and only where the client caches: an open must stat the
// file to know its size, which a client that caches attributes answers
// from memory and one that caches nothing (pfsemu --direct-io) with a
// request to the servers, a millisecond per file there. Elsewhere no
// reader waits (wait_max 0), but in a job of several nodes, whose readers
// do not tee (a node keeps the files it owns): there, without a client
// cache, every first open of a file its node owns still waits, as the
// copy behind it would read the file again. An empty file tells nothing;
// a later copy asks.
func (r *reactive) learnClient(src *tiering.Source) {
	if src.Stat.Size == 0 {
		return
	}
	found := clientUncached
	if tiering.Resident(src.File, src.Stat.Size) {
		found = clientCaches
	}
	if !r.cache.CompareAndSwap(clientUnknown, found) {
		return
	}
	setU64(&r.l.seg.s.leader.client_cache, uint64(found))
	ra, max := readAhead(src.Stat.Dev), r.l.cfg.WaitMax
	tees := u64(&r.l.seg.s.leader.tee_max) > 0
	switch {
	case found == clientCaches:
		setU64(&r.l.seg.s.leader.tee_max, 0) // the copies come from the pages readers leave
		if ra > 0 && (max <= 0 || ra < max) {
			setU64(&r.l.seg.s.leader.wait_min, uint64(ra))
			r.l.log.Info().Int64("read_ahead", ra).Msg("the shared filesystem's client keeps a page cache: a first open of a file its read-ahead fetches in one request reads the original, and its copy is made from the pages it left; a larger file's first open waits for its copy, read in parallel parts (each file is read once)")
			break
		}
		setU64(&r.l.seg.s.leader.wait_max, 0)
		r.l.log.Info().Msg("the shared filesystem's client keeps a page cache: first opens read the original, and each copy is made from the pages they left (each file is read once)")
	case tees:
		setU64(&r.l.seg.s.leader.wait_max, 0)
		r.l.log.Info().Msg("the shared filesystem's client keeps no page cache: first opens read the original, and each copy is the reader's bytes (each file is read once)")
	}
	// Else (no cache, no tees: a job of several nodes) every first open
	// of a file its node owns waits for its copy.
}

// readAhead is tiering.ReadAhead; tests set it.
var readAhead = tiering.ReadAhead

// fits says whether some tier has room for a copy of size bytes now.
func (r *reactive) fits(size int64) bool {
	for i := range r.pool.Tiers() {
		if r.pool.Fits(i, size) {
			return true
		}
	}
	return false
}

// stopWaiting tells readers to stop asking for copies (wait_max 0): no
// tier had room for the last one asked, nothing is evicted under this
// policy, and each request would cost the shared filesystem an open and
// the reader a wait, for nothing (measured in make bench's S3, where the
// dataset is twice the tiers: the first epoch 1.2x no augur's).
func (r *reactive) stopWaiting() {
	setU64(&r.l.seg.s.leader.wait_max, 0)
	setU64(&r.l.seg.s.leader.tee_max, 0)
	r.full.Do(func() {
		r.l.log.Info().Msg("the tiers are full: first opens read the original from now on, without waiting for a copy")
	})
}

// fetchOwned makes this node's copy of a file another node asked for and
// found none of here, if this node owns the file (HVAC: the owner reads
// the shared filesystem once, the others ask the owner), and waits for
// it within ctx. It reports whether the copy is published. The copy
// comes from the shared filesystem (Fill asks no one for a file this node
// owns), so it begins at once instead of behind the queue's copies,
// which may be waiting on the asker.
func (r *reactive) fetchOwned(ctx context.Context, path string, size, mtime int64) bool {
	if owner, _ := r.l.owner(path); owner != r.l.peers.cfg.Node {
		return false
	}
	var st unix.Stat_t
	if tiering.Stat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != size || st.Mtim.Nano() != mtime {
		return false // not the file the asker has: it reads it itself
	}
	if tiering.Lookup(r.l.open, path, &st) >= 0 {
		return true // published since the server looked
	}
	w := r.waits.add(path)
	r.l.seg.markCopying(path) // before the copy can end, which clears it
	if !r.pool.FetchNow(ctx, path, size) {
		r.l.seg.clearCopying(path)
		r.waits.leave(path, w)
		return false
	}
	return r.waits.wait(ctx, path, w)
}

// done settles one finished copy; it runs on the pool's goroutine that
// made it.
func (r *reactive) done(res fetchpool.Result) {
	ld := &r.l.seg.s.leader
	defer r.l.seg.clearCopying(res.Path) // after publish_gen moves: waiters then find the copy
	r.waits.settle(res)                  // the other nodes' requests for it
	if res.Err != nil {
		var te *tiering.TierError
		if errors.Is(res.Err, fetchpool.ErrHeld) {
			addU64(&ld.copies_held, 1)
		}
		switch {
		case res.TierDown && errors.As(res.Err, &te):
			r.l.log.Warn().Msgf("tier %s: %v; using the next tier for %v", r.l.cfg.Tiers[res.Tier].Path, te.Err, fetchpool.RetryDown)
		case r.l.refused(res):
			// kept known: a copy of it would be refused again
		default:
			r.known.Delete(res.Path) // the source's trouble: retry on a later access
		}
		return
	}
	r.l.copied(res.Path)
	addU64(&ld.copies, 1)
	addU64(&ld.copy_bytes, uint64(res.Bytes))
	r.mu.Lock()
	r.files[res.Tier]++
	files := r.files[res.Tier]
	r.mu.Unlock()
	used := r.pool.Tiers()[res.Tier].Used
	setU64(&ld.tier_used[res.Tier], uint64(used))
	setU64(&ld.tier_files[res.Tier], uint64(files))
	// Open descriptors of the original look for the new copy.
	addU64(&ld.publish_gen, 1)
}

func (r *reactive) close() { r.pool.Close() }
