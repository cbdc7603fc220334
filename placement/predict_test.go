package placement

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
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
	p, err := Predict([]string{root}, 3, a, nil)
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
	var stated atomic.Int64
	sizes := p.Sizes(func(n int) { stated.Add(int64(n)) })
	if stated.Load() != int64(p.Len()) {
		t.Errorf("Sizes told of %d files stat'ed, want %d", stated.Load(), p.Len())
	}
	pl, stage, horizon := p.PlaceFor(Access{Epochs: 2, Stage: 100}, sizes, []int64{1100, 500})
	if stage != 100 || horizon != 2 {
		t.Fatalf("stage %d horizon %d", stage, horizon)
	}
	order := p.Order(0, 0)
	for pos, idx := range order {
		want := int8(-1)
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
	pl, _, _ := p.PlaceFor(a, p.Sizes(nil), []int64{900, 0}) // 8 files after staging
	freq := map[int]int{}
	for e := 0; e < 4; e++ {
		for _, idx := range p.Order(0, e) {
			freq[idx]++
		}
	}
	minPlaced, maxUnplaced := 1<<30, -1
	for idx := range p.Len() {
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

// Placing as sizes arrive, in any order, ends where placing with every
// size known does, and nothing is placed before every file ranked ahead
// of it has its size.
func TestPlacerSettlesAsSizesArrive(t *testing.T) {
	root := imageFolder(t, 4, 50, 100)
	a := Access{Sampler: "distributed", Layout: "imagefolder", Shuffle: true, WorldSize: 2, RanksPerNode: 2, Epochs: 3}
	p := predict(t, root, a)
	sizes := p.Sizes(nil)
	for i := range sizes {
		sizes[i] = int64(50 + i%7*20) // files of several sizes, so where the tiers end matters
	}
	sizes[17] = -1 // cannot be stat'ed: never placed
	caps := []int64{4000, 6000}
	want := p.Place(3, sizes, caps)
	pp := p.placer(3, caps)
	known := make([]int64, len(sizes))
	for i := range known {
		known[i] = UnknownSize
	}
	for n, i := range rand.New(rand.NewSource(1)).Perm(len(sizes)) {
		known[i] = sizes[i]
		pp.Advance(known)
		for k, j := range pp.ranking {
			if k < pp.next && known[j] == UnknownSize {
				t.Fatalf("after %d sizes: file %d placed before its size is known", n+1, j)
			}
		}
	}
	if pp.next != len(pp.ranking) {
		t.Fatalf("%d of %d files placed with every size known", pp.next, len(pp.ranking))
	}
	if !slices.Equal(pp.Tier, want.Tier) || !slices.Equal(pp.Bytes, want.Bytes) || !slices.Equal(pp.Files, want.Files) {
		t.Fatalf("placing as sizes arrive gave %v %v, with all known %v %v", pp.Bytes, pp.Files, want.Bytes, want.Files)
	}
	if want.Tier[17] != -1 || want.Files[0] == 0 || want.Files[1] == 0 || want.Files[0]+want.Files[1] == len(sizes)-1 {
		t.Fatalf("placement %v %v: the case should fill both tiers and leave files out", want.Files, want.Tier[17])
	}
}

// A node places the files it holds for the job first, even those its own
// ranks will not read again within the horizon (the other nodes will
// ask for them), and only then its own other reads.
func TestPreferKeepsWhatTheNodeHoldsForOthers(t *testing.T) {
	pp := NewPlacer(6, []int64{40}, 1, func(int) []ReadSeq {
		return []ReadSeq{{Order: listOrder{4, 0, 5}}} // this node reads 4, 0, 5
	})
	held := map[int32]bool{0: true, 2: true, 3: true} // it holds 2 and 3 for the others only
	pp.Prefer(func(f int32) bool { return held[f] })
	if want := []int32{0, 2, 3, 4, 5}; !slices.Equal(pp.ranking, want) {
		t.Fatalf("ranking %v; want %v: held files first, those read here before those held for others", pp.ranking, want)
	}
	pp.Advance([]int64{10, 10, 10, 10, 10, 10})
	for f, want := range []int8{0, -1, 0, 0, 0, -1} {
		if pp.Tier[f] != want {
			t.Errorf("file %d in tier %d; want %d (placement %v)", f, pp.Tier[f], want, pp.Tier)
		}
	}
}

// A plan made again keeps, among files read equally often, the copies
// the tiers hold: the fastest tier's first, then the next's, then the
// rest in order of first access; a file read more often still goes
// first. Placing then leaves the held files where they are.
func TestKeepRanksHeldCopiesFirstAmongEquals(t *testing.T) {
	pp := NewPlacer(7, []int64{30, 20}, 2, func(e int) []ReadSeq {
		if e == 0 {
			return []ReadSeq{{Order: listOrder{0, 1, 2, 3, 4, 5, 6}}}
		}
		return []ReadSeq{{Order: listOrder{6}}} // 6 is read twice
	})
	where := map[int32]int{4: 0, 5: 0, 2: 1, 3: 1} // the copies an earlier plan made
	pp.Keep(func(f int32) int {
		if t, ok := where[f]; ok {
			return t
		}
		return -1
	}, 2)
	if want := []int32{6, 4, 5, 2, 3, 0, 1}; !slices.Equal(pp.ranking, want) {
		t.Fatalf("ranking %v; want %v", pp.ranking, want)
	}
	for k, f := range pp.ranking {
		if pp.pos[f] != int32(k) {
			t.Fatalf("pos[%d] = %d; want %d", f, pp.pos[f], k)
		}
	}
	pp.Advance([]int64{10, 10, 10, 10, 10, 10, 10})
	for f, want := range []int8{-1, -1, 1, 1, 0, 0, 0} {
		if pp.Tier[f] != want {
			t.Errorf("file %d in tier %d; want %d (placement %v)", f, pp.Tier[f], want, pp.Tier)
		}
	}
}

// listOrder is an order given as its list of indices.
type listOrder []int

func (o listOrder) Len() int        { return len(o) }
func (o listOrder) At(pos int) int  { return o[pos] }
func (o listOrder) Pos(idx int) int { return slices.Index(o, idx) }

// A job of three nodes with two ranks each: each file is read first by
// one node in the first epoch, which holds it before anything else. With
// a third of the dataset per node the nodes hold every file exactly
// once, and later epochs read nothing from the shared filesystem with
// peers; without them, the two thirds each node does not hold.
func TestPlaceNodesHoldsEveryFileOnce(t *testing.T) {
	root := imageFolder(t, 4, 30, 100) // 120 files
	a := Access{Sampler: "distributed", Layout: "imagefolder", Shuffle: true, WorldSize: 6, RanksPerNode: 2, Epochs: 3, Stage: 1}
	p := predict(t, root, a)
	sizes := p.Sizes(nil)
	jp, err := p.PlaceNodes(a, sizes, []int64{4000 + 1}, 3) // 40 files each, after the staging byte
	if err != nil {
		t.Fatal(err)
	}
	holders := make([]int, p.Len())
	for _, np := range jp.Nodes {
		if np.Holds != 40 || np.Files[0] != 40 {
			t.Errorf("node %d reads %d files first, holds %d; want 40 and 40", np.Node, np.Holds, np.Files[0])
		}
		for idx, tier := range np.Tier {
			if tier >= 0 {
				holders[idx]++
			}
		}
	}
	for idx, n := range holders {
		if n != 1 {
			t.Errorf("file %d held by %d nodes; want 1", idx, n)
		}
	}
	// Each file is read once in epoch 1 (120 files, 20 per rank): by
	// the node that holds it.
	for _, np := range jp.Nodes {
		for _, r := range np.Ranks {
			for _, idx := range p.Order(r, 0) {
				if np.Tier[idx] < 0 {
					t.Errorf("node %d's rank %d reads file %d first and does not hold it", np.Node, r, idx)
				}
			}
		}
	}
	if len(jp.Epochs) != 3 {
		t.Fatalf("%d epochs", len(jp.Epochs))
	}
	e1, e2 := jp.Epochs[0], jp.Epochs[1]
	if e1.PFSBytes != 12000 || e1.PFSBytesPeers != 12000 || e1.PeerBytes != 0 {
		t.Errorf("epoch 1 %+v; want the dataset once from the shared filesystem either way", e1)
	}
	if e2.PFSBytesPeers != 0 || e2.PeerBytes == 0 || e2.PFSBytes != e2.PeerBytes {
		t.Errorf("epoch 2 %+v; want nothing from the shared filesystem with peers, what each node does not hold from them", e2)
	}
	if _, err := p.PlaceNodes(a, sizes, []int64{4000}, 4); err == nil {
		t.Error("6 ranks on 4 nodes: no error")
	}
}
