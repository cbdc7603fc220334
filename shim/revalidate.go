// Revalidation: the copies the data plane serves compared with their
// sources beside the run goroutine, and dropped (the policy told) when
// a source changed behind augur's back.

package shim

import (
	"errors"
	"hash/maphash"
	"time"

	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

// Revalidation: the data plane serves copies without touching the shared
// filesystem; the leader compares each served copy with its source, at
// most once per Config.Revalidate, to catch a source rewritten behind
// augur's back (not through the shim). A reader that already has the copy
// open keeps reading the old content whole; the next open reads the new
// one from the original. The comparison is a metadata request to the
// shared filesystem (a millisecond or more), so it runs beside the run
// goroutine, which must keep up with the ring: a run loop that waited for
// one stat per served open fell behind a job reading two thousand files a
// second, and the prefetcher behind it.
const (
	revalidators = 8    // comparisons in flight
	backlog      = 4096 // comparisons (or reactive stats) waiting
)

// queueRevalidate hands the copy behind a tier-served open to the
// revalidators, if it is due. When all are busy and the queue is full,
// the file is asked for again at its next open. A copy compared lately
// is marked so (markChecked) again: the open that sent this event found
// no mark, another file's having taken the slot.
//
// Preconditions: called from the run goroutine.
func (l *Leader) queueRevalidate(ev Event) {
	if ev.Truncated || ev.Tier >= len(l.tiers) || l.tiers[ev.Tier].lock == nil {
		return
	}
	key, now := maphash.String(l.seed, ev.Path), int64(time.Since(l.born))
	if last, ok := l.checked.Load(key); ok && time.Duration(now-last) < l.cfg.Revalidate {
		l.markChecked(ev.Path, last)
		return
	}
	select {
	case l.recheck <- ev:
		l.checked.Store(key, now)
		l.markChecked(ev.Path, now)
	default:
	}
}

// copied records that a copy of path was just published: the publish
// compared it with its source, so the first open of a file prefetched in
// this job does not ask the shared filesystem again.
func (l *Leader) copied(path string) {
	now := int64(time.Since(l.born))
	l.checked.Store(maphash.String(l.seed, path), now)
	l.markChecked(path, now)
}

// markChecked marks path's copy compared at since (ns since born) for the
// data plane (Segment.markChecked): its opens send no event until the
// comparison is due again. With revalidate 0 every open is due.
func (l *Leader) markChecked(path string, since int64) {
	if l.cfg.Revalidate <= 0 {
		return
	}
	l.marks.Lock()
	l.seg.markChecked(path, l.bornMono+since)
	l.marks.Unlock()
}

func (l *Leader) revalidator() {
	defer l.workers.Done()
	for {
		select {
		case <-l.stop:
			return
		case ev := <-l.recheck:
			l.revalidate(ev)
		}
	}
}

// revalidate drops the copy behind a tier-served open if its source
// changed.
func (l *Leader) revalidate(ev Event) {
	tree := l.tiers[ev.Tier].tree
	cp, err := tiering.CopyPath(tree.Path, ev.Path)
	if err != nil {
		return
	}
	var src, cst unix.Stat_t
	if unix.Stat(cp, &cst) != nil {
		return
	}
	err = statSource(ev.Path, &src)
	id, known := tiering.CopyIdent(cp)
	if err == nil && tiering.Stands(id, known, &cst, &src) {
		return
	}
	if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
		return // cannot tell; keep the copy
	}
	if l.removeCopy(tree, ev.Path, true) != nil {
		return
	}
	l.log.Info().Msgf("%s changed; its copy was dropped", ev.Path)
	addU64(&l.seg.s.leader.stale_removed, 1)
	select {
	case l.dropped <- dropped{ev.Path, ev.Tier, cst.Size}:
	case <-l.stop:
	}
}

// statSource is how a revalidator stats a source; a test makes it slow.
var statSource = tiering.Stat

// dropped is a stale copy a revalidator removed.
type dropped struct {
	path  string
	tier  int
	bytes int64
}

// forget tells the policy that d's copy is gone, so that it fetches the
// new content again.
//
// Preconditions: called from the run goroutine.
func (l *Leader) forget(d dropped) {
	switch {
	case l.clair != nil:
		l.clair.forget(d)
	case l.react != nil:
		l.react.pool.Release(d.tier, d.bytes)
		l.react.known.Delete(d.path)
	}
}
