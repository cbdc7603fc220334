package shim

import (
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
