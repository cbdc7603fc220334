package sim

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// The queue gives events in the order of their times, then of their
// scheduling, whichever runs or heap they wait in: as a sort would,
// while events are taken and scheduled in turn.
func TestQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q queue
	var want []event
	var seq uint64
	now, free := 0.0, 0.0
	schedule := func() {
		seq++
		e := event{t: now + rng.Float64()*0.01, key: seq << kindBits}
		if rng.IntN(3) == 0 { // due when a read of the pipe is done
			free = max(free, now) + rng.Float64()*0.002
			e.t = free + rng.Float64()*0.003
		}
		if rng.IntN(10) == 0 {
			e.t = now // a tie with the clock
		}
		q.push(e)
		want = append(want, e)
	}
	for range 100 {
		schedule()
	}
	var got []event
	for len(got) < 20000 {
		e, ok := q.pop()
		if !ok {
			t.Fatal("the queue ran dry")
		}
		got = append(got, e)
		now = e.t
		for range rng.IntN(3) {
			schedule()
		}
		schedule()
	}
	inSortOrder(t, &q, got, want)
}

// A long queue: events scheduled nearly in order, one for each one
// taken, behind two thousand, and others anywhere, so that a
// lane moves its events down (compaction) and the heap takes some; the
// order is a sort's.
func TestQueueOrderLong(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var q queue
	var want, got []event
	var seq uint64
	now, last := 0.0, 0.0
	heap, moved := false, false
	schedule := func(t float64) {
		seq++
		e := event{t: t, key: seq << kindBits}
		var heads [lanes]int
		for k := range q.lanes {
			heads[k] = q.lanes[k].head
		}
		q.push(e)
		for k := range q.lanes {
			moved = moved || q.lanes[k].head < heads[k]
		}
		heap = heap || len(q.h) > 0
		want = append(want, e)
	}
	inOrder := func() {
		last += rng.Float64() * 0.001
		schedule(last + rng.Float64()*0.003)
	}
	take := func() {
		e, ok := q.pop()
		if !ok {
			t.Fatal("the queue ran dry")
		}
		got = append(got, e)
		now = e.t
	}
	for range 2000 {
		inOrder()
	}
	for range 20000 {
		inOrder()
		for range rng.IntN(3) {
			schedule(now + rng.Float64()*0.1)
			take()
		}
		take()
	}
	if !heap || !moved {
		t.Fatalf("heap used %v, a lane compacted %v: the test asks too little", heap, moved)
	}
	inSortOrder(t, &q, got, want)
}

// inSortOrder takes the rest of q's events after got and checks that
// all of them came in the order a sort of want (every event scheduled)
// gives.
func inSortOrder(t *testing.T, q *queue, got, want []event) {
	t.Helper()
	for {
		e, ok := q.pop()
		if !ok {
			break
		}
		got = append(got, e)
	}
	sort.Slice(want, func(i, j int) bool { return want[i].before(&want[j]) })
	if len(got) != len(want) {
		t.Fatalf("%d events out, %d in", len(got), len(want))
	}
	for i := range want {
		if got[i].key != want[i].key {
			t.Fatalf("event %d: key %d at %.6f, want key %d at %.6f", i, got[i].key, got[i].t, want[i].key, want[i].t)
		}
	}
}
