package shim

import (
	"time"

	"golang.org/x/sys/unix"
)

// insidePublish is how often augur stat's rows of the cursors are
// written.
const insidePublish = 500 * time.Millisecond

// The prefetch of samples inside files: each cursor's next samples'
// blocks are copied in the order its rank reads them, a few at a time
// (insideInFlight), from where its reads are to the end of the next
// epoch. A block is copied whole (its pages no tier holds): a rank reads
// every sample of an epoch, and the block's other samples with it.

// pumpAll copies ahead of every cursor.
func (in *inside) pumpAll() {
	m := in.l.big.Load()
	if m == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if time.Since(in.published) > insidePublish {
		in.publish() // the cursors' epochs and reads, for augur stat
	}
	for _, d := range in.dirs {
		if d.layout == nil {
			continue
		}
		for _, cur := range d.cursors {
			if !in.pump(m, d, cur) {
				return
			}
		}
	}
}

// pump queues the blocks of cur's next samples, and reports whether the
// copiers can take more.
//
// Preconditions: in.mu is held.
func (in *inside) pump(m *blocks, d *insideDir, cur *sampleCursor) bool {
	if cur.aEpoch < cur.epoch || cur.aEpoch == cur.epoch && cur.aPos < cur.pos {
		cur.aEpoch, cur.aPos, cur.ahead = cur.epoch, cur.pos, nil
	}
	for {
		order := cur.order
		if cur.aEpoch > cur.epoch {
			if cur.ahead == nil {
				cur.ahead = cur.sampler.Epoch(cur.aEpoch)
			}
			order = cur.ahead
		}
		if cur.aPos >= len(order) {
			if cur.aEpoch > cur.epoch {
				return true // a whole epoch ahead: enough
			}
			cur.aEpoch, cur.aPos, cur.ahead = cur.aEpoch+1, 0, nil
			continue
		}
		f, off, n := d.layout.Range(order[cur.aPos])
		switch m.prefetch(d.files[f], &d.stats[f], off, n) {
		case queueBusy:
			return false
		case queueFull:
			return true // no room: the next cursor may find some where it reads
		}
		cur.aPos++
	}
}

// prefetch queues the copy of the blocks of [off, off+n) of path (whose
// stat is st) that the tiers hold in part or not at all, entering the file
// if it is not. It says queueBusy when enough copies are under way
// (insideInFlight) or the queue is full, queueFull when no tier has room,
// and queueDone when every block is present, being copied or queued.
func (m *blocks) prefetch(path string, st *unix.Stat_t, off, n int64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.files[pathKey(path)]
	if f == nil && m.l.sources.passes(path) {
		return queueDone // worth no copy (sources.go)
	}
	if f == nil {
		if !m.enterLocked(path, st) {
			return queueFull // the table has no room (said once), or a key it keeps
		}
		m.budgets()
		f = m.files[pathKey(path)]
	}
	if !sameVersion(&f.st, st) {
		return queueDone // another version of the file: its reads enter it anew
	}
	for b := off >> blockShift; b <= (off+n-1)>>blockShift && b < f.nblocks; b++ {
		pages := m.absent(f, b)
		if pages == 0 || f.copying[b] {
			continue
		}
		if m.queued[copyPredicted] >= insideInFlight {
			return queueBusy
		}
		if r := m.queue(f, b, pages, copyPredicted); r == queueBusy || r == queueFull {
			return r
		}
	}
	return queueDone
}
