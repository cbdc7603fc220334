// Copies compared lately: marks in the segment that spare the ring the
// events of opens whose copies revalidation would not compare yet (struct
// augur_checked).

package shim

/*
#include "../preload/segment.h"
*/
import "C"

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// checkedEpoch is the unit of the marks' ages.
const checkedEpoch = time.Duration(C.AUGUR_CHECKED_EPOCH_NS)

// monotonic is CLOCK_MONOTONIC, the clock every process of the node
// shares, in ns.
func monotonic() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// setCheckedTrust says how many epochs a mark is trusted: those of the
// interval less one (a poll is late by at most 5 ms), none under 200 ms.
func (s *Segment) setCheckedTrust(revalidate time.Duration) {
	trust := int64(revalidate/checkedEpoch) - 1
	setU64(&s.s.leader.checked_trust, uint64(max(trust, 0)))
}

// publishCheckedEpoch says which epoch it is now.
func (s *Segment) publishCheckedEpoch() {
	setU64(&s.s.leader.checked_epoch, uint64(monotonic()/int64(checkedEpoch)))
}

// markChecked says to the data plane that path's copy was compared with
// its source at mono (CLOCK_MONOTONIC, ns): its opens send no event for
// checked_trust epochs after.
//
// Preconditions: no other markChecked runs (Leader.marks).
func (s *Segment) markChecked(path string, mono int64) {
	key := pathKey(path)
	c := &s.s.checked[key&(C.AUGUR_CHECKED_SLOTS-1)]
	seq := (*uint64)(unsafe.Pointer(&c.seq))
	n := atomic.LoadUint64(seq) | 1 // odd: being written
	atomic.StoreUint64(seq, n)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&c.key)), key)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&c.epoch)), uint64(mono/int64(checkedEpoch)))
	atomic.StoreUint64(seq, n+1)
}
