package shim

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/augur-hpc/augur/fetchpool"
	"github.com/augur-hpc/augur/placement"
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
		Access: placement.Access{Sampler: "distributed", Layout: "imagefolder", Shuffle: true, Epochs: 1,
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
			rankOf[c.pred.Path(idx)] = local
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

// gatedJob is a clairvoyant job of one rank over root whose copies each
// wait, in their done callback, until the test lets one through.
type gatedJob struct {
	l    *Leader
	c    *clairvoyant
	seg  *Segment
	pool *fetchpool.Pool
	gate chan struct{}
	done sync.WaitGroup // one per file of the dataset
}

func newGatedJob(t *testing.T, name, root string, files int, a placement.Access) *gatedJob {
	t.Helper()
	a.Sampler, a.Layout, a.Shuffle, a.Epochs, a.WorldSize, a.RanksPerNode, a.Lookahead =
		"distributed", "imagefolder", true, 1, 1, 1, 1024
	g := &gatedJob{seg: testSegment(t, name), gate: make(chan struct{})}
	cfg := &Config{Roots: []string{root}, Policy: "static", Seed: 5, Revalidate: time.Minute,
		Tiers: []tiering.Tier{{Path: t.TempDir(), Capacity: 1 << 20, Threads: 1}}, Access: a}
	var err error
	if g.l, err = Lead(cfg, g.seg, zerolog.Nop()); err != nil || g.l == nil {
		t.Fatalf("Lead: %v", err)
	}
	t.Cleanup(g.l.Close)
	_, caps, _ := g.l.poolTiers()
	if g.c, err = planClairvoyant(g.l, caps); err != nil {
		t.Fatal(err)
	}
	g.done.Add(files)
	tiers, _, used := g.l.poolTiers()
	g.pool = g.l.newPool(tiers, used, func(res fetchpool.Result) {
		<-g.gate
		g.c.done(res)
		g.done.Done()
	})
	g.c.start(g.pool)
	t.Cleanup(g.c.close)
	t.Cleanup(func() { close(g.gate) }) // first: no copy may stay held when the pool closes
	return g
}

// let lets one copy through.
func (g *gatedJob) let() { g.gate <- struct{}{} }

// Opens the prediction does not explain are copied as the reactive
// policy copies them, through the same pool as the prefetches; augur
// stat's copies in flight must stay the pool's count through both. (The
// reactive policy once counted up when it queued and down when a copy
// ended, the clairvoyant one not at all, so that every prefetch taken
// over by the reactive side took the count below zero: "in flight
// 18446744073709551608".)
func TestInFlightWithUnpredictedCopies(t *testing.T) {
	root := imageFolder(t, 2, 20, 100)
	other := imageFolder(t, 1, 10, 100) // files no cursor predicts
	g := newGatedJob(t, "unit-inflight", root, 50, placement.Access{BatchSize: 4})
	inflight := func() uint64 { return u64(&g.seg.s.leader.inflight) }
	// One copy waits in its done callback (no longer pending), 39 wait
	// for the copy thread.
	waitCond(t, func() bool { return g.pool.Pending() == 39 && inflight() == 39 }, func() string {
		return fmt.Sprintf("pending %d, in flight %d", g.pool.Pending(), inflight())
	})
	for i := 0; i < 10; i++ {
		g.c.onOpen(Event{Kind: EvOpen, Tier: -1, Rank: 0, Path: fmt.Sprintf("%s/c0/%03d.jpg", other, i)})
	}
	waitCond(t, func() bool { return g.pool.Pending() == 49 && inflight() == 49 }, func() string {
		return fmt.Sprintf("after 10 unpredicted opens: pending %d, in flight %d", g.pool.Pending(), inflight())
	})
	for i := 0; i < 50; i++ {
		g.let()
		// Only copies end now, so the count only falls: read between
		// two looks at the pool's, it lies between them.
		before := g.pool.Pending()
		n := inflight()
		if after := g.pool.Pending(); n > uint64(before) || n < uint64(after) {
			t.Fatalf("after %d copies: %d in flight, the pool had %d then %d pending", i+1, n, before, after)
		}
	}
	g.done.Wait()
	if n := inflight(); n != 0 {
		t.Errorf("%d copies in flight once all are done, want 0", n)
	}
	if n := u64(&g.seg.s.leader.copies); n != 50 {
		t.Errorf("%d copies counted, want 50", n)
	}
}

// A staged file that shrank between its stat and its copy is released by
// what its copy holds: released by its stat's size, the tier's bytes used
// fell below zero and augur stat showed 16 EiB used.
func TestStagedAccountsFollowTheCopy(t *testing.T) {
	root := imageFolder(t, 1, 4, 100)
	g := newGatedJob(t, "unit-staged", root, 4, placement.Access{BatchSize: 1, Stage: 1 << 20}) // all staged
	waitCond(t, func() bool { return g.pool.Pending() == 3 }, func() string { return fmt.Sprint(g.pool.Pending(), " pending") })
	for i := range g.c.pred.Len() { // the three not copied yet shrink; one of them may be copying
		must(t, os.Truncate(g.c.pred.Path(i), 50))
	}
	for i := 0; i < 4; i++ {
		g.let()
	}
	g.done.Wait()
	for fd := range g.c.pred.Len() {
		f := g.c.pred.Path(fd)
		g.c.onOpen(Event{Kind: EvOpen, Tier: 0, PID: 1, FD: fd, Rank: 0, Path: f})
		g.c.onClose(Event{Kind: EvClose, PID: 1, FD: fd})
	}
	g.c.mu.Lock()
	staged, bytes := len(g.c.staged), g.c.stagedBytes
	g.c.mu.Unlock()
	if u := g.pool.Tiers()[0].Used; u != 0 || staged != 0 || bytes != 0 {
		t.Errorf("after every staged file was read: tier holds %d bytes, %d files (%d bytes) staged; want none", u, staged, bytes)
	}
	if u := u64(&g.seg.s.leader.tier_used[0]); u != 0 {
		t.Errorf("augur stat shows %d bytes used", u)
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

// The staging budget grows to what a cursor's readers hold in flight of
// the files the placement stages (its window, once they were seen apart,
// times the share of files no tier keeps), at least doubling and at most
// half the first tier, and the placement keeps to the rest of the tier.
// A budget the configuration sets is kept.
func TestStagingGrowsWithTheReadersSpread(t *testing.T) {
	root := imageFolder(t, 2, 300, 100) // 600 files of 100 bytes
	for _, configured := range []int64{0, 2000} {
		seg := testSegment(t, fmt.Sprintf("unit-stage-%d", configured))
		cfg := &Config{Roots: []string{root}, Policy: "static", Seed: 5, Revalidate: time.Minute,
			Tiers: []tiering.Tier{{Path: t.TempDir(), Capacity: 16000, Threads: 1}},
			Access: placement.Access{Sampler: "distributed", Layout: "imagefolder", Shuffle: true, Epochs: 1,
				BatchSize: 4, WorldSize: 1, RanksPerNode: 1, Lookahead: 1024, Stage: configured}}
		l, err := Lead(cfg, seg, zerolog.Nop())
		if err != nil || l == nil {
			t.Fatalf("Lead: %v", err)
		}
		t.Cleanup(l.Close)
		_, caps, _ := l.poolTiers()
		c, err := planClairvoyant(l, caps)
		if err != nil {
			t.Fatal(err)
		}
		for i := range c.cat.NumFiles() {
			c.measured(i, 100)
		}
		check := func(when string, stage int64) {
			t.Helper()
			placed := 0
			for _, tier := range c.place.Tier {
				if tier == 0 {
					placed++
				}
			}
			if c.stage != stage || c.caps[0] != 16000-stage || placed != int(16000-stage)/100 {
				t.Errorf("configured %d, %s: staging %d, tier left %d, %d files placed; want staging %d and the rest placed",
					configured, when, c.stage, c.caps[0], placed, stage)
			}
			if got := int64(u64(&seg.s.leader.stage_budget)); got != stage {
				t.Errorf("configured %d, %s: augur stat shows a staging budget of %d, want %d", configured, when, got, stage)
			}
		}
		c.mu.Lock()
		c.growStage()
		check("readers not seen apart", 2000)
		// 10,000 bytes in flight, of which the share no tier keeps (460
		// of the 600 files while 140 are placed) is staged.
		c.cursors[0].window = 100
		c.growStage()
		want := int64(100 * 100 * 460 / 600)
		if configured > 0 {
			want = configured
		}
		check("readers 100 files apart", want)
		c.cursors[0].window = 40 * minWindow
		c.growStage()
		if configured == 0 {
			want = 8000 // half the tier
		}
		check("readers further apart", want)
		c.mu.Unlock()
	}
}

// imageFolder makes classes x per files of size bytes with image names.
func imageFolder(t *testing.T, classes, per, size int) string {
	t.Helper()
	root := t.TempDir()
	for c := 0; c < classes; c++ {
		for i := 0; i < per; i++ {
			p := filepath.Join(root, fmt.Sprintf("c%d", c), fmt.Sprintf("%03d.jpg", i))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}
