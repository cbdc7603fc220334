package tiering

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// WarmResult is what Warm did.
type WarmResult struct {
	Present int64   // files that already had a fresh copy
	Copied  []Usage // per tier, copies made now
	Unfit   int64   // files that fit no tier
	Errors  []error
}

// Warm copies every file under roots into the tiers, fastest first,
// within each tier's capacity, starting from usage (what Validate found).
// The caller must hold the Lock of every tier.
func Warm(trees []*Tree, usage []Usage, roots []string) WarmResult {
	tiers := make([]Tier, len(trees)) // capacities shrink when a tier fills
	for i, tr := range trees {
		tiers[i] = tr.Tier
	}
	res := WarmResult{Copied: make([]Usage, len(tiers))}
	var mu sync.Mutex // guards res and used
	used := make([]int64, len(tiers))
	for i := range tiers {
		used[i] = usage[i].Bytes
	}
	queues := make([]chan string, len(tiers))
	var wg sync.WaitGroup
	for i, tr := range trees {
		queues[i] = make(chan string, 64)
		for w := 0; w < max(tr.Threads, 1); w++ {
			wg.Add(1)
			go func(i int, tr *Tree) {
				defer wg.Done()
				for src := range queues[i] {
					n, err := tr.Publish(src)
					mu.Lock()
					if err != nil {
						res.Errors = append(res.Errors, fmt.Errorf("%s: %w", src, err))
						if errors.Is(err, unix.ENOSPC) {
							tiers[i].Capacity = used[i] // full: place nothing more here
						}
					} else {
						res.Copied[i].Bytes += n
						res.Copied[i].Files++
					}
					mu.Unlock()
				}
			}(i, tr)
		}
	}
	Walk(roots, func(p string, st *unix.Stat_t) {
		size := st.Size
		if Lookup(trees, p, st) >= 0 {
			mu.Lock()
			res.Present++
			mu.Unlock()
			return
		}
		mu.Lock()
		i := firstFit(tiers, used, size)
		if i < 0 {
			res.Unfit++
		} else {
			used[i] += size
		}
		mu.Unlock()
		if i >= 0 {
			queues[i] <- p
		}
	}, func(err error) {
		mu.Lock()
		res.Errors = append(res.Errors, err)
		mu.Unlock()
	})
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	return res
}

// firstFit returns the fastest tier with room for size bytes, or -1.
func firstFit(tiers []Tier, used []int64, size int64) int {
	for i, t := range tiers {
		if used[i]+size <= t.Capacity {
			return i
		}
	}
	return -1
}
