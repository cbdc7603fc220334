package shim

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/augur-hpc/augur/seed"
	"github.com/augur-hpc/augur/tiering"
	"github.com/rs/zerolog"
)

// A clairvoyant leader told of a rank's first reads of samples inside
// record files learns the layout and the sampler, and copies the blocks
// of the samples the rank reads next, in its order, with the source's
// bytes.
func TestInsideLearnsAndPrefetches(t *testing.T) {
	const files, per, size, header = 4, 40, 256 << 10, 100
	root := t.TempDir()
	dir := filepath.Join(root, "h5")
	must(t, os.MkdirAll(dir, 0o755))
	var paths []string
	data := map[string][]byte{}
	for f := 0; f < files; f++ {
		p := filepath.Join(dir, fmt.Sprintf("part-%d.rec", f))
		b := make([]byte, header+per*size)
		rand.Read(b)
		must(t, os.WriteFile(p, b, 0o644))
		paths, data[p] = append(paths, p), b
	}
	must(t, os.WriteFile(filepath.Join(dir, "README"), []byte("not a record file"), 0o644))
	tier := tiering.Tier{Path: t.TempDir(), Capacity: 1 << 30, Threads: 1}
	seg := testSegment(t, "unit-inside")
	cfg := &Config{Roots: []string{root}, Policy: "clairvoyant", Tiers: []tiering.Tier{tier}, BlockAbove: 8 << 20, Seed: 7}
	cfg.Access.WorldSize, cfg.Access.RanksPerNode = 1, 1
	l, err := Lead(cfg, seg, zerolog.Nop())
	if err != nil || l == nil {
		t.Fatalf("Lead: %v", err)
	}
	t.Cleanup(l.Close)
	s, err := seed.New(seed.Spec{Sampler: seed.KindDistributed, Len: files * per, Seed: 7, Replicas: 1, Rank: 0})
	must(t, err)
	order := s.Epoch(0)
	where := func(i int) (string, int64) { return paths[i/per], header + int64(i%per)*size }
	for _, i := range order[:24] {
		p, off := where(i)
		l.handle(Event{Kind: EvRead, PID: 100, Rank: 0, Local: -1, Origin: 100, FD: 3, Path: p, Bytes: uint64(off), Tier: size})
	}
	// The next samples' blocks are copied: wait for those of sample 60.
	p, off := where(order[60])
	var m *blocks
	waitFor(t, "sample 60's blocks", func() int {
		if m = l.big.Load(); m == nil {
			return -1 // the plan is not adopted yet
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		f := m.files[pathKey(p)]
		if f == nil {
			return -1
		}
		for b := off >> blockShift; b <= (off+size-1)>>blockShift; b++ {
			if m.absent(f, b) != 0 {
				return -1
			}
		}
		return 1
	})
	bp, _ := tiering.BlockPath(tier.Path, p)
	got, err := os.ReadFile(bp)
	must(t, err)
	if !bytes.Equal(got[off:off+size], data[p][off:off+size]) {
		t.Error("a prefetched sample's bytes differ from the source's")
	}
	if n := u64(&seg.s.leader.big_predicted); n == 0 {
		t.Error("no block counted as copied ahead of the predicted samples")
	}
	rows := seg.streams()
	if len(rows) == 0 || rows[len(rows)-1].Samples == "" || rows[len(rows)-1].Seed != 7 {
		t.Errorf("augur stat's rows %+v; want the rank's, seed 7, with the layout", rows)
	}
}
