package shim

import (
	"context"
	"sync"

	"github.com/augur-hpc/augur/fetchpool"
)

// copyWaits lets goroutines wait for the copy of a path to end: the
// owner of a file under the reactive policy waits for the copy another
// node asked for (reactive.fetchOwned), and the copy pool's done
// callback ends the wait. A wait is added before the copy is asked for,
// so that a copy that ends at once still ends it. The zero value is
// ready for use.
type copyWaits struct {
	mu sync.Mutex
	m  map[string]*copyWait // guarded by mu
}

// copyWait is the wait for one path's copy, shared by all who wait for
// it.
type copyWait struct {
	n    int           // goroutines waiting; guarded by copyWaits.mu
	done chan struct{} // closed when the copy ended
	ok   bool          // it was published; written before done is closed
}

// add joins the wait for path's copy.
func (w *copyWaits) add(path string) *copyWait {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]*copyWait{}
	}
	c := w.m[path]
	if c == nil {
		c = &copyWait{done: make(chan struct{})}
		w.m[path] = c
	}
	c.n++
	return c
}

// leave gives up c, the wait for path's copy; the last to leave drops it.
func (w *copyWaits) leave(path string, c *copyWait) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c.n--; c.n == 0 && w.m[path] == c {
		delete(w.m, path)
	}
}

// wait waits for c, the wait for path's copy, to end within ctx, and
// reports whether the copy was published.
func (w *copyWaits) wait(ctx context.Context, path string, c *copyWait) bool {
	select {
	case <-c.done:
		return c.ok
	case <-ctx.Done():
		w.leave(path, c)
		return false
	}
}

// settle ends the wait for the copy res reports, unless the copy goes on
// in another tier (another Result follows).
func (w *copyWaits) settle(res fetchpool.Result) {
	if res.Again {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.m[res.Path]; c != nil {
		c.ok = res.Err == nil
		close(c.done)
		delete(w.m, res.Path)
	}
}
