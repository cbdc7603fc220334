// The epochs' permutations that the orders of a node's ranks share.

package placement

import (
	"sync"
	"weak"

	"github.com/augur-hpc/augur/seed"
)

// Perms shares each epoch's permutation between the orders that read it:
// every rank of a DistributedSampler draws the same one, so a node's
// ranks (and a training set and another of its size) hold it once. An
// entry lives while an order holds it.
type Perms struct {
	mu sync.Mutex
	m  map[seed.PermKey]weak.Pointer[seed.Perm]
}

// get is s's permutation of epoch e, drawn once however many ask.
func (ps *Perms) get(s *seed.DistributedSampler, e int) *seed.Perm {
	k := s.PermKey(e)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p := ps.m[k].Value(); p != nil {
		return p
	}
	if ps.m == nil || len(ps.m) > 64 {
		ps.sweep()
	}
	p := s.Perm(e)
	ps.m[k] = weak.Make(p)
	return p
}

// sweep forgets the permutations no order holds any more.
//
// Preconditions: ps.mu is held.
func (ps *Perms) sweep() {
	if ps.m == nil {
		ps.m = map[seed.PermKey]weak.Pointer[seed.Perm]{}
	}
	for k, w := range ps.m {
		if w.Value() == nil {
			delete(ps.m, k)
		}
	}
}

// OrderOf is the order s reads in epoch e, over n samples: a
// DistributedSampler's through the shared permutation, another's as the
// list it gives.
func (ps *Perms) OrderOf(s seed.Sampler, e, n int) seed.Order {
	if d, ok := s.(*seed.DistributedSampler); ok {
		return d.View(ps.get(d, e))
	}
	return seed.ListOrder(s.Epoch(e), n)
}
