package shim

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/augur-hpc/augur/fetchpool"
	"github.com/augur-hpc/augur/tiering"
	"github.com/rs/zerolog"
)

// With more files ahead than copies may be pending, every rank's
// prefetch keeps the same lead: a copy that ends makes room for the file
// of the rank least ahead. (Taking the ranks in a fixed order gave every
// freed slot to the first rank: the second's next files waited until the
// first had reached its lookahead.) One copy thread serves the queue in
// order, so the order of the copies is the order of the requests.
func TestPrefetchKeepsRanksInStep(t *testing.T) {
	const per = 300 // files per class; two classes, two ranks: 300 files per rank
	root := imageFolder(t, 2, per, 100)
	tierDir := t.TempDir()
	seg := testSegment(t, "unit-clairvoyant")
	cfg := &Config{Roots: []string{root}, Policy: "static", Seed: 5, Revalidate: time.Minute,
		Tiers: []tiering.Tier{{Path: tierDir, Capacity: 1 << 20, Threads: 1}},
		Access: Access{Sampler: "distributed", Layout: "imagefolder", Shuffle: true, Epochs: 1,
			BatchSize: 4, WorldSize: 2, RanksPerNode: 2, Lookahead: 1024}}
	l, err := Lead(cfg, seg, zerolog.Nop())
	if err != nil || l == nil {
		t.Fatalf("Lead: %v", err)
	}
	defer l.Close()
	_, caps, _ := l.poolTiers()
	c, err := planClairvoyant(l, caps)
	if err != nil {
		t.Fatal(err)
	}
	rankOf := map[string]int{}
	for local, r := range c.pred.Ranks {
		for _, idx := range c.pred.Order(r, 0) {
			rankOf[c.pred.Files[idx]] = local
		}
	}
	var mu sync.Mutex
	var copied []string
	tiers, _, used := l.poolTiers()
	c.start(fetchpool.New(tiers, used, func(res fetchpool.Result) {
		if res.Err != nil {
			t.Errorf("copy %s: %v", res.Path, res.Err)
		}
		mu.Lock()
		copied = append(copied, res.Path)
		mu.Unlock()
		c.done(res)
	}))
	defer c.close()
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		n := len(copied)
		mu.Unlock()
		if n == 2*per {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d files copied after a minute", n, 2*per)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var count [2]int
	for i, p := range copied {
		count[rankOf[p]]++
		if d := count[0] - count[1]; d < -1 || d > 1 {
			t.Fatalf("after %d copies rank 0 has %d and rank 1 %d: one rank is ahead", i+1, count[0], count[1])
		}
	}
}

// A clairvoyant job that falls back to the reactive policy with copies
// queued goes on with the same pool; augur stat's copies in flight must
// stay the pool's count through it. (The reactive policy counted up when
// it queued and down when a copy ended, the clairvoyant one not at all,
// so every copy the clairvoyant policy had queued took the count below
// zero: "in flight 18446744073709551608".)
func TestInFlightThroughFallBack(t *testing.T) {
	root := imageFolder(t, 2, 20, 100)
	seg := testSegment(t, "unit-inflight")
	cfg := &Config{Roots: []string{root}, Policy: "static", Seed: 5, Revalidate: time.Minute,
		Tiers: []tiering.Tier{{Path: t.TempDir(), Capacity: 1 << 20, Threads: 1}},
		Access: Access{Sampler: "distributed", Layout: "imagefolder", Shuffle: true, Epochs: 1,
			BatchSize: 4, WorldSize: 1, RanksPerNode: 1, Lookahead: 1024}}
	l, err := Lead(cfg, seg, zerolog.Nop())
	if err != nil || l == nil {
		t.Fatalf("Lead: %v", err)
	}
	defer l.Close()
	_, caps, _ := l.poolTiers()
	c, err := planClairvoyant(l, caps)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var finished sync.WaitGroup
	tiers, _, used := l.poolTiers()
	pool := l.newPool(tiers, used, func(res fetchpool.Result) {
		<-release
		c.done(res)
		finished.Done()
	})
	finished.Add(40)
	c.start(pool)
	defer c.close()
	var once sync.Once
	defer once.Do(func() { close(release) }) // before close: a failure must not leave copies blocked
	inflight := func() uint64 { return u64(&seg.s.leader.inflight) }
	// One copy waits in its done callback (no longer pending), 39 wait
	// for the copy thread.
	waitCond(t, func() bool { return pool.Pending() == 39 && inflight() == 39 }, func() string {
		return fmt.Sprintf("pending %d, in flight %d", pool.Pending(), inflight())
	})

	for i := 0; i < fallbackAt; i++ { // opens of files the prediction does not know
		c.onOpen(Event{Kind: EvOpen, Tier: -1, Rank: 0, Path: root + "/elsewhere"})
	}
	if l.react == nil {
		t.Fatal("no fall-back to the reactive policy")
	}
	for i := 0; i < 40; i++ {
		release <- struct{}{}
		// Only copies end now, so the count only falls: read between
		// two looks at the pool's, it lies between them.
		before := pool.Pending()
		n := inflight()
		if after := pool.Pending(); n > uint64(before) || n < uint64(after) {
			t.Fatalf("after %d copies: %d in flight, the pool had %d then %d pending", i+1, n, before, after)
		}
	}
	finished.Wait()
	if n := inflight(); n != 0 {
		t.Errorf("%d copies in flight once all are done, want 0", n)
	}
}

func waitCond(t *testing.T, cond func() bool, state func() string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within 30s: %s", state())
		}
	}
}

// A staged file that shrank between its stat and its copy is released by
// what its copy holds: released by its stat's size, the tier's bytes used
// fell below zero and augur stat showed 16 EiB used.
func TestStagedAccountsFollowTheCopy(t *testing.T) {
	root := imageFolder(t, 1, 4, 100)
	seg := testSegment(t, "unit-staged")
	cfg := &Config{Roots: []string{root}, Policy: "static", Seed: 5, Revalidate: time.Minute,
		Tiers: []tiering.Tier{{Path: t.TempDir(), Capacity: 1 << 20, Threads: 1}},
		Access: Access{Sampler: "distributed", Layout: "imagefolder", Shuffle: true, Epochs: 1,
			BatchSize: 1, WorldSize: 1, RanksPerNode: 1, Lookahead: 1024, Stage: 1 << 20}} // all staged
	l, err := Lead(cfg, seg, zerolog.Nop())
	if err != nil || l == nil {
		t.Fatalf("Lead: %v", err)
	}
	defer l.Close()
	_, caps, _ := l.poolTiers()
	c, err := planClairvoyant(l, caps)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var finished sync.WaitGroup
	finished.Add(4)
	tiers, _, used := l.poolTiers()
	pool := l.newPool(tiers, used, func(res fetchpool.Result) {
		<-release
		c.done(res)
		finished.Done()
	})
	c.start(pool)
	defer c.close()
	var once sync.Once
	defer once.Do(func() { close(release) })
	waitCond(t, func() bool { return pool.Pending() == 3 }, func() string { return fmt.Sprint(pool.Pending(), " pending") })
	for _, f := range c.pred.Files { // the three not copied yet shrink; one of them may be copying
		must(t, os.Truncate(f, 50))
	}
	for i := 0; i < 4; i++ {
		release <- struct{}{}
	}
	finished.Wait()
	for fd, f := range c.pred.Files {
		c.onOpen(Event{Kind: EvOpen, Tier: 0, PID: 1, FD: fd, Rank: 0, Path: f})
		c.onClose(Event{Kind: EvClose, PID: 1, FD: fd})
	}
	c.mu.Lock()
	staged, bytes := len(c.staged), c.stagedBytes
	c.mu.Unlock()
	if u := pool.Tiers()[0].Used; u != 0 || staged != 0 || bytes != 0 {
		t.Errorf("after every staged file was read: tier holds %d bytes, %d files (%d bytes) staged; want none", u, staged, bytes)
	}
	if u := u64(&seg.s.leader.tier_used[0]); u != 0 {
		t.Errorf("augur stat shows %d bytes used", u)
	}
}
