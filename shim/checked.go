// Copies compared lately: a mark per file in the segment that spares the
// ring the events of opens whose copies revalidation would not compare
// yet (struct augur_segment.checked).

package shim

/*
#include "../preload/segment.h"
*/
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// markChecked says to the data plane that path's copy was compared with
// its source (or made) in this epoch: its opens send no event in this
// epoch and the next (Leader.tickChecked).
func (s *Segment) markChecked(path string) {
	key := C.uint64_t(pathKey(path))
	slot := (*uint64)(unsafe.Pointer(&s.s.checked[key&(C.AUGUR_CHECKED_SLOTS-1)]))
	atomic.StoreUint64(slot, uint64(C.augur_checked_mark(key, C.uint64_t(u64(&s.s.leader.checked_epoch)))))
}

// nextCheckedEpoch moves the epoch of the marks: each is trusted for this
// epoch and the next.
func (s *Segment) nextCheckedEpoch() { addU64(&s.s.leader.checked_epoch, 1) }
