package shim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/augur-hpc/augur/fetchpool"
	"github.com/augur-hpc/augur/peers"
	"github.com/augur-hpc/augur/tiering"
	"github.com/rs/zerolog"
)

const testSecret = "test-secret-0123456789"

// Under the reactive policy, the owner of a file asked for a copy it has
// none of copies the file from the shared filesystem and serves it (HVAC):
// once, however many ask at once. It does not for a file another node
// owns, nor for a version of the file that is not the one on the shared
// filesystem.
func TestReactiveOwnerFetchesOnDemand(t *testing.T) {
	root, tier := t.TempDir(), tiering.Tier{Path: t.TempDir(), Capacity: 1 << 20, Threads: 1}
	mine := ownedFiles(t, root, 0, 2)
	theirs := ownedFiles(t, root, 1, 1)
	seg := testSegment(t, "unit-on-demand")
	cfg := &Config{Roots: []string{root}, Policy: "reactive", Revalidate: time.Minute, Tiers: []tiering.Tier{tier},
		Peers: peers.Config{Node: 0, Nodes: 2, Job: "unit", Listen: "127.0.0.1:0", Secret: testSecret,
			Peers: []string{"127.0.0.1:1", "127.0.0.1:2"}}}
	l, err := Lead(cfg, seg, zerolog.Nop())
	if err != nil || l == nil || l.peers == nil {
		t.Fatalf("Lead: %v", err)
	}
	var closed sync.Once
	defer closed.Do(l.Close)
	cl, err := peers.NewClient(peers.ClientConfig{Secret: testSecret, Job: "unit", Node: 1}, []string{l.peers.addr, ""})
	must(t, err)
	defer cl.Close()

	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := fetchFrom(t, cl, mine[0], 0); err != nil || !sameAs(got, mine[0]) {
				t.Errorf("a file this node owns: %v (%d bytes)", err, len(got))
			}
		}()
	}
	wg.Wait()
	if _, err := fetchFrom(t, cl, mine[1], time.Second); !errors.Is(err, peers.ErrNotHeld) {
		t.Errorf("a file of another mtime: %v; want not held", err)
	}
	if _, err := fetchFrom(t, cl, theirs[0], 0); !errors.Is(err, peers.ErrNotHeld) {
		t.Errorf("a file another node owns: %v; want not held", err)
	}
	for _, f := range []string{mine[1], theirs[0]} {
		if tiering.LookupPath(l.open, f) >= 0 {
			t.Errorf("%s was copied", f)
		}
	}
	closed.Do(l.Close)
	// Each request that found no copy waited for the one copy; one that
	// came after it was published found it.
	st := seg.Stats()
	if st.Copies != 1 || st.Peers == nil || st.Peers.Fetched < 1 || st.Peers.Fetched > 3 || st.PeerFilesOut != 3 {
		t.Errorf("%d copies, %d files served, peers %+v; want 1 copy served 3 times, 1 to 3 of them on demand",
			st.Copies, st.PeerFilesOut, st.Peers)
	}
	// The file of another mtime is refused by the check of its source,
	// before any copy is asked for.
	if st.Peers != nil && (st.Peers.NotServed["missing"] != 1 || st.Peers.NotServed["stale"] != 1) {
		t.Errorf("refused %v; want 1 missing and 1 stale", st.Peers.NotServed)
	}
}

// ownedFiles writes n files under root that node owns of two.
func ownedFiles(t *testing.T, root string, node, n int) []string {
	t.Helper()
	var files []string
	for i := 0; len(files) < n; i++ {
		p := filepath.Join(root, fmt.Sprintf("n%d-%03d.bin", node, i))
		if peers.Owner(p, 2) == node {
			must(t, os.WriteFile(p, bytes.Repeat([]byte(p), 100), 0o644))
			files = append(files, p)
		}
	}
	return files
}

// fetchFrom asks node 0 for path's copy as node 1 does, its mtime moved
// by skew, and returns the bytes received.
func fetchFrom(t *testing.T, cl *peers.Client, path string, skew time.Duration) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	dst, err := os.CreateTemp(t.TempDir(), "fetched")
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	if _, err := cl.Fetch(context.Background(), 0, path, fi.Size(), fi.ModTime().Add(skew).UnixNano(), 0, dst); err != nil {
		return nil, err
	}
	return os.ReadFile(dst.Name())
}

func sameAs(b []byte, path string) bool {
	want, err := os.ReadFile(path)
	return err == nil && bytes.Equal(b, want)
}

// A wait for a copy ends when the copy does, for everyone waiting, with
// whether it was published, even if the copy ended before the wait
// began; not when the copy goes on in another tier; and within its
// context.
func TestCopyWaits(t *testing.T) {
	var w copyWaits
	ctx := context.Background()
	a1, a2 := w.add("a"), w.add("a")
	w.settle(fetchpool.Result{Path: "a"})
	if !w.wait(ctx, "a", a1) || !w.wait(ctx, "a", a2) {
		t.Error("a published copy's waiters were told it failed")
	}

	b := w.add("b")
	w.settle(fetchpool.Result{Path: "b", Err: errors.New("tier down"), TierDown: true, Again: true})
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if w.wait(short, "b", b) {
		t.Error("a copy queued again ended the wait")
	}
	b = w.add("b")
	go w.settle(fetchpool.Result{Path: "b", Err: errors.New("no such file")})
	if w.wait(ctx, "b", b) {
		t.Error("a failed copy was said published")
	}

	c := w.add("c")
	w.leave("c", c)
	w.mu.Lock()
	n := len(w.m)
	w.mu.Unlock()
	if n != 0 {
		t.Errorf("%d waits left after all ended or left", n)
	}
}

// A copy waits for its holder without counting the time before this
// node's ranks begin to read (the job's nodes start seconds apart), and
// for at most readyWait after: a holder never ready is given up on.
func TestAwaitCountsFromTheRanksStart(t *testing.T) {
	p := &peering{ctx: context.Background()}
	for _, c := range []struct {
		name  string
		begin time.Duration // when the ranks begin
		ready time.Duration // when the holder should have the file (0: never)
		want  bool
	}{
		{"ready long after the wait began, soon after the ranks did", readyWait + time.Second, readyWait + 1500*time.Millisecond, true},
		{"never ready once the ranks began", 0, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			ready := func() (bool, bool) {
				since := time.Since(start)
				return c.ready > 0 && since >= c.ready, since >= c.begin
			}
			got := p.await(ready)
			took := time.Since(start)
			if got != c.want {
				t.Fatalf("await after %v: %v, want %v", took, got, c.want)
			}
			if !got && took < readyWait {
				t.Fatalf("gave up after %v, before readyWait (%v)", took, readyWait)
			}
		})
	}
}
