package sim

import "slices"

// link is one direction of a node's network link: the transfers booked
// on it, as intervals of time in order, none overlapping. A transfer
// takes the first gap at or after the time it may begin that is long
// enough on both links it crosses, so transfers may be booked ahead of
// the simulation's clock (a thread's copies from peers one after the
// other, see prefetch) without holding back one booked later for an
// earlier time: the link serves each transfer whole, in the gaps the
// others leave.
type link struct {
	// busy[head:] are the bookings not yet done, and some done (see
	// tidy). A node's link into it holds a hundred of them at scale (its
	// prefetcher books its copies a thousand reads ahead), so drop moves
	// head, and cuts the done ones away only once they are half.
	busy []span
	head int
	end  float64 // when the last booking ends
}

type span struct{ from, to float64 }

// drop forgets the bookings of l done by now (no booking begins before
// the clock).
func (l *link) drop(now float64) {
	for l.head < len(l.busy) && l.busy[l.head].to <= now {
		l.head++
	}
	if l.head > 32 && l.head > len(l.busy)/2 {
		l.busy = l.busy[:copy(l.busy, l.busy[l.head:])]
		l.head = 0
	}
}

// tidy drops l's bookings done by now when the next would grow it. fit
// passes over done ones (they end before any time it is asked for), so
// a transfer reads only the bookings near the end, a line of the cache
// or two, not also the first (at 1024 x 30, c+p 10.2-11.1 s against
// 10.4-11.4 s, hvac 7.7-8.9 s against 8.1-9.8 s).
func (l *link) tidy(now float64) {
	if len(l.busy) == cap(l.busy) {
		l.drop(now)
	}
}

// fit is the earliest time at or after t at which l is free for d, and
// where a booking then goes among l's. from is where a fit of the same
// transfer put it whose time was at or before t (-1: none; the links do
// not change in between): the search goes on from there rather than
// again.
func (l *link) fit(t, d float64, from int) (float64, int) {
	if t >= l.end {
		return t, len(l.busy)
	}
	// The first booking that ends after t (their ends are in order),
	// looked for from the last: a transfer is booked near the end, behind
	// the few that hold the link up (a hundred are booked at scale).
	i := from
	if i < 0 {
		i = len(l.busy)
		for i > l.head && l.busy[i-1].to > t {
			i--
		}
	}
	for ; i < len(l.busy); i++ {
		if l.busy[i].to <= t {
			continue
		}
		if l.busy[i].from >= t+d {
			return t, i
		}
		t = l.busy[i].to
	}
	return t, i
}

// book books [t, t+d) on l at i, where fit found room. A booking that
// begins where the one before it ends, or ends where the next begins,
// joins it: a node's link in is booked by its prefetcher's threads back
// to back, a train of a thousand at scale, which fit would otherwise
// cross booking by booking (clairvoyant+peers at 1024 x 10: 24 steps a
// transfer). For a transfer of any length the gaps are the same.
func (l *link) book(i int, t, d float64) {
	to := t + d
	if i == len(l.busy) {
		// After every booking, as most are: the last ends at end, so
		// the join is known without reading it (a miss).
		if i > l.head && t == l.end {
			l.busy[i-1].to = to
		} else {
			l.busy = append(l.busy, span{t, to})
		}
		l.end = to
		return
	}
	// Among the bookings: end stays.
	after := i > l.head && l.busy[i-1].to == t
	before := l.busy[i].from == to
	switch {
	case after && before:
		l.busy[i-1].to = l.busy[i].to
		l.busy = slices.Delete(l.busy, i, i+1)
	case after:
		l.busy[i-1].to = to
	case before:
		l.busy[i].from = t
	default:
		l.busy = slices.Insert(l.busy, i, span{t, to})
	}
}

// newLinks makes n links whose first few bookings lie side by side in
// memory (a node's link is asked for at random, a copy at a time).
func newLinks(n int) []link {
	const room = 4
	l := make([]link, n)
	spans := make([]span, n*room)
	for k := range l {
		l[k].busy = spans[k*room : k*room : (k+1)*room]
	}
	return l
}
