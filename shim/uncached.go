package shim

import "encoding/json"

// Uncached is a file augur could not cache, and why.
type Uncached struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

// maxUncached is how many such files augur stat names: enough to show
// what is wrong, few enough that a dataset of them fills no log.
const maxUncached = 16

// notCached names path once, with why augur cannot cache it (or part
// of it), at info in the leader's log and in augur stat, for the first
// maxUncached files.
func (l *Leader) notCached(path, why string) {
	l.uncachedMu.Lock()
	defer l.uncachedMu.Unlock()
	if len(l.uncached) >= maxUncached {
		return
	}
	for _, u := range l.uncached {
		if u.Path == path {
			return
		}
	}
	l.uncached = append(l.uncached, Uncached{path, why})
	l.log.Info().Msgf("%s is not cached: %s", path, why)
	for rows := l.uncached; ; rows = rows[:len(rows)-1] {
		b, _ := json.Marshal(rows)
		s := &l.seg.s.leader
		if publishJSON(&s.uncached_gen, &s.uncached_len, s.uncached[:], b) || len(rows) == 0 {
			return
		}
	}
}

// largerThanTiers says whether a whole file of size bytes is larger than
// every tier in use, of which there is one at least (a tier of no set
// capacity holds any).
func (l *Leader) largerThanTiers(size int64) bool {
	used := false
	for _, t := range l.tiers {
		if t.tree == nil {
			continue
		}
		if t.Capacity <= 0 || size <= t.Capacity {
			return false
		}
		used = true
	}
	return used
}
