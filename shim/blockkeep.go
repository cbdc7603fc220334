package shim

import (
	"math/bits"
	"os"
	"sync/atomic"
	"time"

	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

// Blocks kept from one job to the next. The leader saves each large
// file's page map on its blocks files (tiering.SaveBlocks) every
// saveEvery and when it closes; the next job's leader enters every blocks
// file that still stands for its source with the pages its map claims
// (tiering.KeptBlocks), reserving their blocks in the tier, so that its
// readers read them from the first read on. A job ended by a kill loses
// the pages read since the last save, no more: they are read again.

// saveEvery is how often the page maps are saved while the job runs.
const saveEvery = 10 * time.Second

// restore enters the blocks files the tiers kept from earlier jobs and
// removes the others.
func (m *blocks) restore() {
	for t, ts := range m.l.tiers {
		if ts.lock == nil || ts.tree == nil {
			continue
		}
		rep := ts.tree.KeptBlocks(blockShift, pageShift, func(source string, src *unix.Stat_t, words []uint64) bool {
			return m.restoreFile(t, source, src, words)
		})
		for _, err := range rep.Errors {
			m.l.log.Warn().Msgf("tier %s: blocks kept from an earlier job: %v", ts.Path, err)
		}
		if rep.Files > 0 || rep.Stale > 0 {
			m.l.log.Info().Msgf("tier %s: %d large files' blocks kept from an earlier job (%s), %d removed",
				ts.Path, rep.Files, FormatSize(rep.Bytes), rep.Stale)
		}
	}
}

// restoreFile enters source, whose stat is src, with the pages words
// claims in tier t, as far as the tier has room for their blocks, and
// reports whether it did.
func (m *blocks) restoreFile(t int, source string, src *unix.Stat_t, words []uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.budgets() // after the kept blocks have taken their room
	m.enterLocked(source, src)
	f := m.files[pathKey(source)]
	if f == nil || !sameVersion(&f.st, src) || m.l.seg.blockTiers(f.slot)>>t&1 == 0 {
		return false
	}
	for b, w := range words {
		w &= pagesOf(f.st.Size, int64(b))
		if w == 0 {
			continue
		}
		if !m.pool.Take(t, blockSize) {
			break // the pages after are not claimed: read again
		}
		m.held[t]++
		rw, bit := m.l.seg.reserveWord(f.slot, t, int64(b))
		atomic.OrUint64(rw, bit)
		added := w &^ atomic.OrUint64(m.l.seg.pageWord(f.slot, t, int64(b)), w)
		f.copiedPages += int64(bits.OnesCount64(added)) // not this job's readers' (fillFiles)
	}
	return true
}

// save records every large file's page map on its blocks files. The
// maps are taken under m.mu, and written (an fsync first on a tier that
// fsyncs) outside it, through descriptors of their own: pages are only
// added to a blocks file while its entry lives, so a map taken before a
// later one claims fewer pages, and a blocks file removed meanwhile (a
// change of its source) takes the map with it.
func (m *blocks) save() {
	m.mu.Lock()
	var maps []pageMap
	for _, f := range m.files {
		for t := range m.l.tiers {
			if pm, ok := m.pageMap(f, t); ok {
				maps = append(maps, pm)
			}
		}
	}
	m.mu.Unlock()
	for _, pm := range maps {
		if err := m.l.tiers[pm.tier].tree.SaveBlocks(pm.dst, pm.words, blockShift, pageShift); err != nil {
			m.l.log.Info().Msgf("%s: its blocks' map in tier %s: %v; the next job reads them again",
				pm.path, m.l.tiers[pm.tier].Path, err)
		}
		pm.dst.Close()
	}
}

// pageMap is a large file's page map in one tier, to save on its blocks
// file there (dst, a descriptor of save's own).
type pageMap struct {
	path  string
	tier  int
	dst   *os.File
	words []uint64
}

// pageMap takes f's page map in tier t, if it has pages there.
//
// Preconditions: m.mu is held.
func (m *blocks) pageMap(f *bigFile, t int) (pageMap, bool) {
	seg := m.l.seg
	if seg.blockTiers(f.slot)>>t&1 == 0 || seg.blockKey(f.slot) != f.key || seg.blockSeq(f.slot)&1 == 1 {
		return pageMap{}, false
	}
	words, any := make([]uint64, f.nblocks), false
	for b := range words {
		w := atomic.LoadUint64(seg.pageWord(f.slot, t, int64(b)))
		if w != 0 && w == pagesOf(f.st.Size, int64(b)) {
			w = tiering.PageWord
		}
		words[b], any = w, any || w != 0
	}
	if !any {
		return pageMap{}, false
	}
	d, err := m.blocksFileLocked(f, t)
	if err != nil {
		return pageMap{}, false
	}
	fd, err := unix.FcntlInt(d.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return pageMap{}, false
	}
	return pageMap{path: f.path, tier: t, dst: os.NewFile(uintptr(fd), d.Name()), words: words}, true
}
