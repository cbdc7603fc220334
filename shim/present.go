// Presence: the filter that tells the data plane which tiers may hold a
// file's copy, so that an open tries no tier that does not (struct
// augur_present). The leader keeps a tier's filter only while it holds
// the tier's lock, the tier's only writer: it marks every copy it finds
// there at start and every copy it publishes, before the rename.

package shim

/*
#include "../preload/segment.h"
*/
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// markPresent sets tier t's bit of path's bucket: from now on an open of
// path tries tier t. Bits are never cleared; one set for a copy that went
// costs an open the attempt it made before there was a filter.
func (s *Segment) markPresent(t int, path string) {
	key := C.uint64_t(pathKey(path))
	w := (*uint32)(unsafe.Pointer(&s.s.present.words[C.augur_present_word(key)]))
	atomic.OrUint32(w, 1<<(uint32(C.augur_present_shift(key))+uint32(t)))
}

// keepPresence says whether tier t's filter is kept, and so trusted to
// say where no copy is. Set it only once every copy of the tier is
// marked, and while this leader holds the tier's lock.
func (s *Segment) keepPresence(t int, kept bool) {
	p := (*uint32)(unsafe.Pointer(&s.s.present.kept))
	if kept {
		atomic.OrUint32(p, 1<<uint(t))
	} else {
		atomic.AndUint32(p, ^uint32(1<<uint(t)))
	}
}
