package shim

import (
	"math/bits"
	"time"
)

// The fill: a large file the readers have read half of is copied whole,
// block by block, whenever no stream's copies wait. MONARCH fetches the
// whole file a partial read asked for; a large file's readers may want
// only a part of it (one dataset of an HDF5 file, a few samples to
// evaluate), so the fill waits until they have read half. A training job
// reads every sample each epoch: the rest of the file is read in this
// epoch anyway, and read now, beside the readers, it keeps the shared
// filesystem busy where the readers alone cannot. Seen on make bench's
// L3 (groups of contiguous samples in 8 files, two readers): at the end
// of the first epoch only the readers' own streams were in flight, and
// the shared filesystem delivered 100-170 MiB/s of its 200.
const (
	// fillEvery is how often the files are looked at: a look counts the
	// pages of every block of every large file.
	fillEvery = 100 * time.Millisecond
	// fillActive is how recently the readers must have read a file for
	// it to be filled: a file the job has moved on from is left as it is.
	fillActive = time.Second
)

// fillFiles queues, when no stream's copies are waiting, the next absent
// blocks of the large files the readers read now and have read half of,
// up to one copy per copier.
//
// Preconditions: m.mu is held.
func (m *blocks) fillFiles() {
	now := time.Now()
	if now.Sub(m.looked) < fillEvery {
		return
	}
	m.looked = now
	for _, f := range m.files {
		present, total := m.presentPages(f)
		if read := present - f.copiedPages; read > f.read {
			f.read, f.readAt = read, now
		}
		if present == total || 2*present < total || now.Sub(f.readAt) > fillActive {
			continue
		}
		for b := int64(0); b < f.nblocks && m.queued[copyFill] < blockWorkers && len(m.ahead) == 0; b++ {
			if m.queue(f, b, m.absent(f, b), copyFill) == queueFull {
				return
			}
		}
	}
}

// presentPages counts the pages of f the tiers hold, and all its pages.
//
// Preconditions: m.mu is held.
func (m *blocks) presentPages(f *bigFile) (present, total int64) {
	for b := int64(0); b < f.nblocks; b++ {
		all := pagesOf(f.st.Size, b)
		present += int64(bits.OnesCount64(all &^ m.absent(f, b)))
		total += int64(bits.OnesCount64(all))
	}
	return present, total
}
