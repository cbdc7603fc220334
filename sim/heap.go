package sim

// event is something that happens at t to an actor: a worker, a rank or
// a node's copy pool (kind says which; a and b name it).
type event struct {
	t float64
	// key is the number of its scheduling (ties in order of scheduling:
	// runs are repeatable) above its kind, in the lowest kindBits bits:
	// an event is 24 bytes, and the heap moves fewer.
	key  uint64
	a, b int32
}

const kindBits = 3

// Every kind fits in kindBits (else this constant overflows).
const _ uint = 1<<kindBits - 1 - evPool

func (e *event) kind() uint8 { return uint8(e.key & (1<<kindBits - 1)) }

func (e *event) before(o *event) bool {
	return e.t < o.t || (e.t == o.t && e.key < o.key)
}

// queue holds the events to come, taken in order of time (then of
// scheduling). Most events come nearly in order: those due when a read of
// the PFS is done follow the pipe's reservations, which are made in time
// order, give or take a file's preprocessing; the ranks' steps, pushed at
// a barrier, follow each other by their compute times. Such an event
// joins one of a few sorted lanes near its end (within shift events of
// it), in place; only the rest go into a heap. Taking the next event
// looks at each lane's first and the heap's: a heap of every event to
// come, or of the near future, was where the time of a large job went
// (a pop and a push there cost 50 ns, most of it branches mispredicted).
// The order of events is exactly a heap's.
type queue struct {
	h     events
	lanes [lanes]lane
}

const (
	lanes = 4 // sorted lanes
	shift = 8 // how far back from a lane's end an event may join it
)

// lane is events in order, the first at head.
type lane struct {
	ev   []event
	head int
}

// push schedules e.
func (q *queue) push(e event) {
	for k := range q.lanes {
		if q.lanes[k].join(e) {
			return
		}
	}
	q.h.push(e)
}

// join puts e in its place in r if that is within shift of r's end.
func (r *lane) join(e event) bool {
	n := len(r.ev)
	if k := n - shift - 1; k >= r.head && e.before(&r.ev[k]) {
		return false
	}
	i := n
	for i > r.head && e.before(&r.ev[i-1]) {
		i--
	}
	if r.head > 1024 && r.head > n/2 {
		m := copy(r.ev, r.ev[r.head:])
		r.ev, i, n, r.head = r.ev[:m], i-r.head, m, 0
	}
	r.ev = append(r.ev, e)
	if i < n {
		copy(r.ev[i+1:], r.ev[i:n])
		r.ev[i] = e
	}
	return true
}

// pop takes the next event; ok false when there is none.
func (q *queue) pop() (event, bool) {
	var next *event
	if len(q.h) > 0 {
		next = &q.h[0]
	}
	from := -1 // the lane next is the first of, -1 the heap
	for k := range q.lanes {
		r := &q.lanes[k]
		if r.head < len(r.ev) && (next == nil || r.ev[r.head].before(next)) {
			next, from = &r.ev[r.head], k
		}
	}
	switch {
	case next == nil:
		return event{}, false
	case from < 0:
		return q.h.pop(), true
	}
	r := &q.lanes[from]
	e := r.ev[r.head]
	if r.head++; r.head == len(r.ev) {
		r.ev, r.head = r.ev[:0], 0
	}
	return e, true
}

// events is a 4-ary min-heap by time: half the levels of a binary one,
// and a node's children side by side (96 bytes), so a pop visits fewer
// lines of the cache.
type events []event

const arity = 4

func (h *events) push(e event) {
	*h = append(*h, e)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / arity
		if !e.before(&s[p]) {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = e
}

// pop takes the least event: the hole it leaves goes down the least
// children to a leaf, where the last event fills it and rises to its
// place (it rarely rises far: it was at the bottom).
func (h *events) pop() event {
	s := *h
	top := s[0]
	last := s[len(s)-1]
	s = s[:len(s)-1]
	*h = s
	if len(s) == 0 {
		return top
	}
	i := 0
	for {
		c := arity*i + 1
		if c >= len(s) {
			break
		}
		least := c
		for k := c + 1; k < min(c+arity, len(s)); k++ {
			if s[k].before(&s[least]) {
				least = k
			}
		}
		s[i] = s[least]
		i = least
	}
	for i > 0 {
		p := (i - 1) / arity
		if !last.before(&s[p]) {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = last
	return top
}
