package shim

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

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

func predict(t *testing.T, root string, a Access) *Prediction {
	t.Helper()
	cfg := &Config{Roots: []string{root}, Seed: 3, Access: a}
	p, err := Predict(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// With one rank every file is read every epoch: placement fills the
// first tier in the order of the first epoch, then the second tier.
func TestPlaceFillsInFirstAccessOrder(t *testing.T) {
	root := imageFolder(t, 3, 10, 100)
	a := Access{Sampler: "distributed", Layout: "imagefolder", Shuffle: true, WorldSize: 1, RanksPerNode: 1, Epochs: 2}
	p := predict(t, root, a)
	sizes := p.Sizes()
	pl, stage, horizon := p.PlaceFor(Access{Epochs: 2, Stage: 100}, sizes, []int64{1100, 500})
	if stage != 100 || horizon != 2 {
		t.Fatalf("stage %d horizon %d", stage, horizon)
	}
	order := p.Order(0, 0)
	for pos, idx := range order {
		want := -1
		switch {
		case pos < 10: // 1100 - 100 staging = 10 files of 100 bytes
			want = 0
		case pos < 15:
			want = 1
		}
		if pl.Tier[idx] != want {
			t.Fatalf("file %d (read at %d in epoch 0) in tier %d, want %d", idx, pos, pl.Tier[idx], want)
		}
	}
	if pl.Bytes[0] != 1000 || pl.Files[1] != 5 || pl.Reads != 30 {
		t.Fatalf("placement %+v", pl)
	}
}

// With two ranks on two nodes, node 0 places only what its rank reads,
// and a file it reads in more epochs goes before one it reads in fewer.
func TestPlaceByFrequencyOnANode(t *testing.T) {
	root := imageFolder(t, 2, 10, 100)
	a := Access{Sampler: "distributed", Layout: "imagefolder", Shuffle: true, WorldSize: 2, RanksPerNode: 1,
		NodeRank: 0, Epochs: 4, Stage: 100}
	p := predict(t, root, a)
	if len(p.Ranks) != 1 || p.Ranks[0] != 0 {
		t.Fatalf("node 0 ranks %v", p.Ranks)
	}
	pl, _, _ := p.PlaceFor(a, p.Sizes(), []int64{900, 0}) // 8 files after staging
	freq := map[int]int{}
	for e := 0; e < 4; e++ {
		for _, idx := range p.Order(0, e) {
			freq[idx]++
		}
	}
	minPlaced, maxUnplaced := 1<<30, -1
	for idx := range p.Files {
		switch {
		case freq[idx] == 0 && pl.Tier[idx] >= 0:
			t.Fatalf("file %d is never read on this node but placed", idx)
		case pl.Tier[idx] >= 0:
			minPlaced = min(minPlaced, freq[idx])
		case freq[idx] > 0:
			maxUnplaced = max(maxUnplaced, freq[idx])
		}
	}
	if pl.Files[0] != 8 || maxUnplaced < 0 {
		t.Fatalf("placed %d files, largest unplaced count %d: the case tests nothing", pl.Files[0], maxUnplaced)
	}
	if maxUnplaced > minPlaced {
		t.Fatalf("a file read %d times was left out while one read %d times was placed", maxUnplaced, minPlaced)
	}
}
