// The dataset's files stat'ed, many at a time: each stat is a metadata
// round trip to the shared filesystem, which serves many at once.

package placement

import (
	"sync"

	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

// statters is how many stats Sizes has in flight: each is a metadata
// round trip to the shared filesystem, which serves many at once.
const statters = 64

// UnknownSize marks a file not stat'ed yet; -1 is one that cannot be.
const UnknownSize = -2

// Sizes stats every file of the dataset (in parallel: each is a metadata
// round trip to the shared filesystem). A file that cannot be stat'ed
// gets size -1 and is never placed. stated, when not nil, is told of each
// file stat'ed (n is 1), from the stat workers.
func (p *Prediction) Sizes(stated func(n int)) []int64 {
	all := make([]int32, p.Len())
	for i := range all {
		all[i] = int32(i)
	}
	sizes := make([]int64, len(all))
	Measure(p.Path, all, nil, func(i int, size int64) {
		sizes[i] = size
		if stated != nil {
			stated(1)
		}
	})
	return sizes
}

// Measure stats the files path(i) of idx, statters at a time and roughly
// in that order, and hands each size (-1: cannot be stat'ed) to got, from
// the stat workers. It returns when all are done, or soon after quit
// closes.
func Measure(path func(int) string, idx []int32, quit <-chan struct{}, got func(i int, size int64)) {
	work := make(chan int, statters)
	var wg sync.WaitGroup
	for w := 0; w < statters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				var st unix.Stat_t
				size := int64(-1)
				if tiering.Stat(path(i), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
					size = st.Size
				}
				got(i, size)
			}
		}()
	}
	defer wg.Wait()
	defer close(work)
	for _, i := range idx {
		select {
		case work <- int(i):
		case <-quit:
			return
		}
	}
}
