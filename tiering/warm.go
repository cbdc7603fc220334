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

// WarmProgress is told how far Warm has got, from Warm's goroutines.
// *progress.Reporter is one.
type WarmProgress interface {
	Expect(files, bytes int64) // the walk found files, with bytes to copy
	Add(files, bytes int64)    // files dealt with (copied, failed, already warm or fitting no tier), bytes copied
	TotalKnown()               // the walk is over: everything has been Expected
}

// noProgress is the WarmProgress of nobody.
type noProgress struct{}

func (noProgress) Expect(int64, int64) {}
func (noProgress) Add(int64, int64)    {}
func (noProgress) TotalKnown()         {}

// Warm copies every file under roots into the tiers, fastest first,
// within each tier's capacity, starting from usage (what Validate found),
// and tells prog (which may be nil) how far it has got.
// The caller must hold the Lock of every tier.
func Warm(trees []*Tree, usage []Usage, roots []string, prog WarmProgress) WarmResult {
	if prog == nil {
		prog = noProgress{}
	}
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
					prog.Add(1, n)
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
			prog.Expect(1, 0)
			prog.Add(1, 0)
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
		if i < 0 {
			prog.Expect(1, 0)
			prog.Add(1, 0)
			return
		}
		prog.Expect(1, size)
		queues[i] <- p
	}, func(err error) {
		mu.Lock()
		res.Errors = append(res.Errors, err)
		mu.Unlock()
	})
	prog.TotalKnown()
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
