package fetchpool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

// A copy someone waits for begins at once, though the tier's only copy
// thread waits on a peer (a Source that does not answer): the peer may be
// waiting on this node. It is not made twice: asked again while it runs,
// or for a file already queued, FetchNow only says a copy is under way.
// Without room, or once the pool is closed, there is none.
func TestFetchNowDoesNotWaitBehindTheQueue(t *testing.T) {
	files, dir := world(t, 3, 1000)
	tr := tier(t, filepath.Join(dir, "ram"), 2500)
	tr.Threads = 1
	stuck, release := make(chan struct{}), make(chan struct{})
	src := &fakeSource{fill: func(path string, _ *unix.Stat_t, _ *os.File) (int64, bool) {
		if path == files[0] {
			close(stuck)
			<-release // a peer that does not answer yet
		}
		return 0, false
	}}
	results := make(chan Result, 4)
	p := New([]*tiering.Tree{tr}, []int64{0}, func(r Result) { results <- r })
	p.Source(src)
	defer p.Close()
	defer close(release) // before Close, which waits for the stuck copy
	ctx := context.Background()
	if !p.Fetch(files[0], 1000) {
		t.Fatal("Fetch refused")
	}
	<-stuck
	if !p.FetchNow(ctx, files[0], 1000) {
		t.Error("FetchNow of a file being copied says no copy is under way")
	}
	if !p.FetchNow(ctx, files[1], 1000) {
		t.Fatal("FetchNow refused")
	}
	select {
	case r := <-results:
		if r.Path != files[1] || r.Err != nil {
			t.Fatalf("result %+v, want %s copied", r, files[1])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the copy waited for the queue's stuck copy thread")
	}
	cp, _ := tiering.CopyPath(tr.Path, files[1])
	if got, _ := os.ReadFile(cp); len(got) != 1000 || got[999] != 1 {
		t.Errorf("the copy holds %d bytes, not the source's", len(got))
	}
	if p.FetchNow(ctx, files[2], 1000) { // 1000 used, 1000 reserved of 2500
		t.Error("FetchNow began a copy the tier has no room for")
	}
	if st := p.Tiers()[0]; st.Used != 1000 || st.Reserved != 1000 || p.Pending() != 1 {
		t.Errorf("accounts %+v, %d pending; want 1000 used, 1000 reserved, 1 pending", st, p.Pending())
	}
}

// Copies that wait for a turn wait within their context.
func TestFetchNowWaitsForATurnWithinItsContext(t *testing.T) {
	files, dir := world(t, 2, 100)
	tr := tier(t, filepath.Join(dir, "ram"), 1<<20)
	tr.Threads = 1 // one turn
	release := make(chan struct{})
	p := New([]*tiering.Tree{tr}, []int64{0}, func(r Result) {
		if r.Path == files[0] {
			<-release // the first copy keeps its turn
		}
	})
	defer p.Close()
	defer close(release)
	if !p.FetchNow(context.Background(), files[0], 100) {
		t.Fatal("FetchNow refused")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if p.FetchNow(ctx, files[1], 100) {
		t.Error("a copy began beyond the turns")
	}
}

// A copy whose tier failed and that was queued for the next tier says so:
// whoever waits for the file waits for the next Result.
func TestResultSaysWhenQueuedAgain(t *testing.T) {
	files, dir := world(t, 1, 100)
	bad := tier(t, filepath.Join(dir, "bad"), 1<<20)
	os.RemoveAll(bad.Path)
	good := tier(t, filepath.Join(dir, "good"), 1<<20)
	results := make(chan Result, 2)
	p := New([]*tiering.Tree{bad, good}, []int64{0, 0}, func(r Result) { results <- r })
	defer p.Close()
	if !p.FetchNow(context.Background(), files[0], 100) {
		t.Fatal("FetchNow refused")
	}
	first, second := <-results, <-results
	if first.Err == nil || !first.TierDown || !first.Again || first.Tier != 0 {
		t.Errorf("first result %+v: want the failed tier's, queued again", first)
	}
	if second.Err != nil || second.Again || second.Tier != 1 {
		t.Errorf("second result %+v: want the copy in the next tier", second)
	}
}

// FetchOpened makes the copy on the caller's goroutine: when it returns,
// the copy is in place and its Result delivered, and the caller's source
// is closed.
func TestFetchOpenedReturnsWithTheCopyPlaced(t *testing.T) {
	files, dir := world(t, 1, 1000)
	tr := tier(t, filepath.Join(dir, "ram"), 1<<20)
	var results []Result // appended on FetchOpened's goroutine: this one
	p := New([]*tiering.Tree{tr}, []int64{0}, func(r Result) { results = append(results, r) })
	defer p.Close()
	src, err := tiering.OpenSource(files[0])
	if err != nil {
		t.Fatal(err)
	}
	placed := false
	src.Placed = func() { placed = true }
	if !p.FetchOpened(context.Background(), files[0], src) {
		t.Fatal("FetchOpened refused")
	}
	if !placed || len(results) != 1 || results[0].Err != nil || results[0].Bytes != 1000 {
		t.Fatalf("returned with placed=%v, results %+v; want the copy placed and one Result", placed, results)
	}
	cp, _ := tiering.CopyPath(tr.Path, files[0])
	if got, _ := os.ReadFile(cp); len(got) != 1000 {
		t.Errorf("the copy holds %d bytes, not 1000", len(got))
	}
	if err := src.File.Close(); err == nil {
		t.Error("the source is still open")
	}
}

// A copy whose bytes the caller has (a reader's tee) is published only if
// the guard gives the token of the moment they were read: with another,
// the file changed since, and publish is not called; with it, publish
// runs within the guard's commit, and the tier's account holds the copy.
func TestFetchFilledOnlyWithTheReadersToken(t *testing.T) {
	files, dir := world(t, 1, 1000)
	for _, token := range []uint64{6, 7} { // fakeGuard.Begin gives 7
		tr := tier(t, filepath.Join(dir, fmt.Sprintf("ram%d", token)), 1<<20)
		var results []Result
		p := New([]*tiering.Tree{tr}, []int64{0}, func(r Result) { results = append(results, r) })
		g := &fakeGuard{begin: true, keep: true}
		p.Guard(g)
		called := false
		publish := func(tier *tiering.Tree, commit tiering.Commit) (int64, error) {
			called = true
			return 1000, commit(&unix.Stat_t{Size: 1000}, func() error { return nil }, func() {})
		}
		if !p.FetchFilled(context.Background(), files[0], 1000, token, publish) {
			t.Fatalf("token %d: FetchFilled refused", token)
		}
		p.Close()
		stale := token != 7
		if len(results) != 1 || called == stale || errors.Is(results[0].Err, ErrHeld) != stale {
			t.Errorf("token %d: publish called %v, results %+v; want it called only with the guard's token 7, else ErrHeld", token, called, results)
		}
		if used := p.Tiers()[0].Used; (used == 1000) == stale {
			t.Errorf("token %d: the tier's account holds %d bytes", token, used)
		}
		if !stale && (len(g.kept) != 1 || g.kept[0] != 7) {
			t.Errorf("the guard committed tokens %v, want [7]", g.kept)
		}
	}
}
