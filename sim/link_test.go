package sim

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// naiveFit is fit by its definition: the earliest time at or after t at
// which none of the bookings overlaps [t, t+d).
func naiveFit(busy []span, t, d float64) float64 {
	for moved := true; moved; {
		moved = false
		for _, b := range busy {
			if b.from < t+d && t < b.to {
				t, moved = b.to, true
			}
		}
	}
	return t
}

// TestLinkFit: a link books each transfer in the first gap long enough,
// keeps its bookings in order and apart, joins those back to back, and
// forgets only those done, tidied as netXfer tidies it (done ones kept
// until it is full). Times at random, and in 256ths of a second, whose
// sums are exact: transfers then fill gaps exactly, so that a booking
// joins the one before it, the one after it, or both.
func TestLinkFit(t *testing.T) {
	for _, grain := range []float64{0, 1.0 / 256} {
		testLinkFit(t, grain)
	}
}

func testLinkFit(t *testing.T, grain float64) {
	rng := rand.New(rand.NewPCG(1, 2))
	at := func(x float64) float64 {
		if grain == 0 {
			return x
		}
		return math.Round(x/grain) * grain
	}
	var l link
	var live []span // every booking not done, kept naively
	now, compacted, joined := 0.0, 0, 0
	for range 20000 {
		now += at(rng.Float64() * 0.5)
		head := l.head
		l.tidy(now)
		if l.head < head {
			compacted++
		}
		kept := live[:0]
		for _, b := range live {
			if b.to > now {
				kept = append(kept, b)
			}
		}
		live = kept
		// Busy four fifths of the time, booked up to 5 s ahead.
		start, d := now+at(rng.Float64()*5), at(0.02+rng.Float64()*0.36)
		if k := l.head + rng.IntN(len(l.busy)-l.head+1); grain > 0 && k+1 < len(l.busy) && l.busy[k].to >= now {
			// A gap's exact length, from its start.
			start, d = l.busy[k].to, l.busy[k+1].from-l.busy[k].to
		}
		s, i := l.fit(start, d, -1)
		if want := naiveFit(live, start, d); s != want {
			t.Fatalf("fit(%v, %v) = %v, want %v", start, d, s, want)
		}
		// Gone on from there for a time at or after that fit's, as
		// netXfer's other link moves it: the same as a fit from scratch.
		later := s + rng.Float64()*2
		ls, li := l.fit(later, d, i)
		if ws, wi := l.fit(later, d, -1); ls != ws || li != wi {
			t.Fatalf("fit(%v, %v) from %d = %v at %d, from scratch %v at %d", later, d, i, ls, li, ws, wi)
		}
		if want := naiveFit(live, later, d); ls != want {
			t.Fatalf("fit(%v, %v) from %d = %v, want %v", later, d, i, ls, want)
		}
		l.book(i, s, d)
		live = append(live, span{s, s + d})
		got := l.busy[l.head:]
		if want, have := union(live, now), union(got, now); !slices.Equal(have, want) {
			t.Fatalf("link busy %v from %v, want %v", have, now, want)
		}
		if len(l.busy) > 2*len(live)+64 {
			t.Fatalf("%d bookings kept for %d not done: the done ones are not dropped", len(l.busy), len(live))
		}
		for k := 1; k < len(got); k++ {
			if got[k].from < got[k-1].to {
				t.Fatalf("bookings out of order or overlapping: %v then %v", got[k-1], got[k])
			}
			if got[k].from == got[k-1].to {
				t.Fatalf("bookings back to back not joined: %v then %v", got[k-1], got[k])
			}
		}
		joined += len(live) - len(union(got, now))
	}
	if compacted == 0 {
		t.Error("the done bookings were never cut away")
	}
	if joined == 0 {
		t.Errorf("grain %v: no bookings back to back were ever made: the joins went untested", grain)
	}
}

// union is the time spans cover from now on, as spans in order, none
// touching another.
func union(spans []span, now float64) []span {
	s := slices.Clone(spans)
	slices.SortFunc(s, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	var u []span
	for _, b := range s {
		b.from = max(b.from, now)
		switch {
		case b.to <= b.from:
		case len(u) > 0 && b.from <= u[len(u)-1].to:
			u[len(u)-1].to = max(u[len(u)-1].to, b.to)
		default:
			u = append(u, b)
		}
	}
	return u
}

// TestThreadFreeFirst: a tier's thread free first, the first of those
// free as early, and when a copy may begin on it.
func TestThreadFreeFirst(t *testing.T) {
	ns := nodeState{free: []float64{5, 3, inf, 3, 0, 7}}
	for _, c := range []struct {
		span  [2]int
		after float64
		k     int
		s     float64
	}{
		{[2]int{0, 4}, 0, 1, 3},   // the first of two at 3
		{[2]int{0, 4}, 4, 1, 4},   // not before after
		{[2]int{2, 3}, 1, 2, inf}, // every thread held
		{[2]int{2, 6}, 1, 4, 1},   // one free at 0
		{[2]int{5, 6}, 0, 5, 7},
	} {
		if k, s := ns.thread(c.span, c.after); k != c.k || s != c.s {
			t.Errorf("thread(%v, %v) = %d, %v; want %d, %v", c.span, c.after, k, s, c.k, c.s)
		}
	}
}
