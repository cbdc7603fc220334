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
// scheduling). Most events of a job that reads the PFS are due when a
// read of the PFS is done, and those times only grow (the pipe is
// reserved in time order): such an event goes into a FIFO behind a lower
// bound of its time that only grows too, and enters the heap only when
// that bound is reached. The heap then holds the events of the near
// future only (a few hundred rather than one per worker and copy), which
// is where the time of a large job went. The order of events is exactly
// the heap's alone.
type queue struct {
	h    events
	fifo []later
	head int
}

// later is an event held back until the clock reaches lb (lb <= e.t).
type later struct {
	lb float64
	e  event
}

// push schedules e, knowing that it is not due before lb (lb <= e.t).
func (q *queue) push(e event, lb float64) {
	if n := len(q.fifo); n > q.head && lb < q.fifo[n-1].lb {
		q.h.push(e)
		return
	}
	if q.head > 1024 && q.head > len(q.fifo)/2 {
		q.fifo = q.fifo[:copy(q.fifo, q.fifo[q.head:])]
		q.head = 0
	}
	q.fifo = append(q.fifo, later{lb, e})
}

// pop takes the next event; ok false when there is none.
func (q *queue) pop() (event, bool) {
	for q.head < len(q.fifo) && (len(q.h) == 0 || q.fifo[q.head].lb <= q.h[0].t) {
		x := &q.fifo[q.head]
		q.head++
		// Due before the heap's first and before any other held back
		// one may be (those behind it were scheduled later): next.
		if (len(q.h) == 0 || x.e.before(&q.h[0])) && (q.head == len(q.fifo) || x.e.t <= q.fifo[q.head].lb) {
			return x.e, true
		}
		q.h.push(x.e)
	}
	if len(q.h) == 0 {
		return event{}, false
	}
	return q.h.pop(), true
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
