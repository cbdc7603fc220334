package sim

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// The queue gives events in the order of their times, then of their
// scheduling, whatever lower bounds they are held back behind: as a
// sort would, while events are taken and scheduled in turn.
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
		q.push(e, min(e.t, free))
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
