package shim

/*
#include "../preload/segment.h"
*/
import "C"

import (
	"time"
	"unsafe"
)

// Event kinds, as the data plane writes them.
const (
	EvOpen       = C.AUGUR_EV_OPEN
	EvClose      = C.AUGUR_EV_CLOSE
	EvInvalidate = C.AUGUR_EV_INVALIDATE
	EvRequest    = C.AUGUR_EV_REQUEST
	EvTeed       = C.AUGUR_EV_TEED
	EvUnteed     = C.AUGUR_EV_UNTEED
	EvStale      = C.AUGUR_EV_STALE
	EvStream     = C.AUGUR_EV_STREAM
	EvRead       = C.AUGUR_EV_READ
)

// The opens whose events the leader asks for (struct augur_leader.want_opens).
const (
	wantServed   = C.AUGUR_WANT_SERVED   // served from a tier
	wantDue      = C.AUGUR_WANT_DUE      // served from a tier, its copy due to be compared
	wantOriginal = C.AUGUR_WANT_ORIGINAL // of the original
)

// Event is one access reported by the data plane.
type Event struct {
	Kind      int
	Tier      int // -1: served from the original; Read: the read's length
	PID       int
	Rank      int // global rank its environment names, -1: none
	Local     int // node-local rank its environment names, -1: none
	Origin    int // the process of the job it was forked from, itself if exec'd
	FD        int
	Bytes     uint64 // Close: bytes read through the descriptor; Teed: the tee's number; Read: the read's offset (Tier: its length)
	Path      string // absolute source path ("" for Close)
	Truncated bool   // Path was cut: the file is not known
	Tee       bool   // Open: the reader tees the file (a Teed or Unteed event follows)
	Tree      bool   // Invalidate: Path is a directory renamed or removed; its copies went to the trash
}

// stuckAfter is how long a claimed but unfinished slot is waited for
// before it is skipped: its producer was killed mid-write.
const stuckAfter = 200 * time.Millisecond

// ringReader consumes the ring. Only the leader has one.
type ringReader struct {
	seg        *Segment
	stuckSince time.Time
}

// poll hands up to max complete events to fn, in order, and returns how
// many it consumed. It looks at head, the word every producer claims a
// slot with, only when the next slot is not complete: a look at every
// event cost each producer the word's line from the leader's core.
func (rr *ringReader) poll(max int, fn func(Event)) int {
	r := &rr.seg.s.ring
	n := 0
	for n < max {
		tail := u64(&r.tail)
		ev := &r.slots[tail&(C.AUGUR_RING_SLOTS-1)]
		complete := u64(&ev.seq) == tail+1
		if !complete && u64(&r.head) == tail {
			break // nothing claimed
		}
		if !complete {
			if rr.stuckSince.IsZero() {
				rr.stuckSince = time.Now()
			}
			if time.Since(rr.stuckSince) < stuckAfter {
				break
			}
			addU64(&rr.seg.s.leader.lost, 1)
		} else {
			fn(decode(ev))
			n++
		}
		rr.stuckSince = time.Time{}
		setU64(&r.tail, tail+1)
	}
	addU64(&rr.seg.s.leader.events, uint64(n))
	return n
}

func decode(ev *C.struct_augur_event) Event {
	return Event{
		Kind:      int(ev.kind),
		Tier:      int(ev.tier),
		PID:       int(ev.pid),
		Rank:      int(ev.rank),
		Local:     int(ev.local),
		Origin:    int(ev.origin),
		FD:        int(ev.fd),
		Bytes:     uint64(ev.bytes),
		Path:      C.GoStringN((*C.char)(unsafe.Pointer(&ev.path[0])), C.int(ev.pathlen)),
		Truncated: ev.flags&C.AUGUR_EVF_TRUNCATED != 0,
		Tee:       ev.flags&C.AUGUR_EVF_TEE != 0,
		Tree:      ev.flags&C.AUGUR_EVF_TREE != 0,
	}
}
