package sim

// event is something that happens at t to an actor: a worker, a rank or
// a node's copy pool (kind says which; a and b name it).
type event struct {
	t     float64
	seq   uint64 // ties in order of scheduling: runs are repeatable
	kind  uint8
	a, b  int32
	c     int32   // evCopy, evWait: the thread
	since float64 // evWait: when the wait began
}

// events is a binary min-heap by time. One heap for the whole job: its
// size is the number of actors (workers, ranks, copies in flight), never
// the number of files.
type events []event

func (h events) less(i, j int) bool {
	return h[i].t < h[j].t || (h[i].t == h[j].t && h[i].seq < h[j].seq)
}

func (h *events) push(e event) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *events) pop() event {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s.less(l, m) {
			m = l
		}
		if r < len(s) && s.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
