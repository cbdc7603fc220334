package sim

import (
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/augur-hpc/augur/peers"
	"github.com/augur-hpc/augur/seed"
	"github.com/augur-hpc/augur/shim"
)

// job is what every policy's run shares: every rank's reads over the whole
// run, each node's in a numbering of its own (so that a node's state
// scales with what it reads, not with the dataset), and the clairvoyant
// placements.
type job struct {
	cfg  *Config
	ds   *files
	w, k int // world size; reads per rank per epoch (DistributedSampler's num_samples)
	// reads is every rank's every read: at (e*k+p)*w + rank, the file
	// (its node's local number) that rank reads at position p of epoch e,
	// and its size beside it. Laid out by position, not by node: DDP keeps
	// the ranks in step, so the job's reads at any time lie together (a
	// few hundred kilobytes of a large job), where a node's own reads, one
	// node's after another's, would be a miss of the cache and of the TLB
	// each.
	reads []slot
	nodes []*nodeOrder
	// holder is, by dataset index, the node that reads the file first in
	// the job's first epoch (shim.Holders); nil unless a policy with
	// peers is run.
	holder []int16
	// holdPos is where in its rank's order of the first epoch the holder
	// reads each file.
	holdPos []int32
	// owner is, by dataset index, the node that owns the file under
	// hvac (peers.Owner of its path); nil unless hvac is run.
	owner []int16
	stage int64 // the staging budget shim's placement kept out of the first tier
	// spare holds the slabs of policies that finished, for the next ones
	// (a slab of a large job is gigabytes: reused, its pages are not
	// faulted in and zeroed by the kernel again).
	spare struct {
		sync.Mutex
		fs [][]file
	}
}

// spareFiles is a slab of n files, a finished policy's if one is spare.
func (j *job) spareFiles(n int) []file {
	j.spare.Lock()
	defer j.spare.Unlock()
	return takeSpare(&j.spare.fs, n)
}

// takeSpare removes from spare a slab that holds n elements and returns
// it cut to n (its contents as the last policy left them), or a new one.
func takeSpare[T any](spare *[][]T, n int) []T {
	for k, s := range *spare {
		if cap(s) >= n {
			*spare = append((*spare)[:k], (*spare)[k+1:]...)
			return s[:n]
		}
	}
	return slab[T](n)
}

// release gives a finished policy's slabs back to the job.
func (j *job) release(r *runner) {
	j.spare.Lock()
	defer j.spare.Unlock()
	if r.fs != nil {
		j.spare.fs = append(j.spare.fs, r.fs)
	}
	r.fs = nil
}

// nodeOrder is one node's files in the order its ranks first read them
// (its own numbering: local → dataset index; job.reads gives each read's
// local number) and what the engine asks of them.
type nodeOrder struct {
	files []int32
	// size, held and owner are each local file's size, holder
	// (shim.Holders; nil without one) and owner, by local number: what the engine asks of every
	// read and copy, kept where the node's other state is.
	size  []int32
	held  []int16
	owner []int16 // hvac: each local file's owner
	// tier is shim's placement of each local file (-1: staged when read)
	// alone and, with holders, in a job with peers; nil when not run.
	tier, tierPeers []int8
}

// slots is how many reads each node makes over the run.
func (j *job) slots() int { return len(j.reads) / j.cfg.Nodes }

// nodeRead is node i's read at its slot s (epoch, position, the node's
// rank: the order of layout's reads). Asked at every step of the
// prefetcher's walk: a node of one rank, Lassen's, divides by nothing.
func (j *job) nodeRead(i, s int) slot {
	R := j.cfg.RanksPerNode
	if R == 1 {
		return j.reads[s*j.w+i]
	}
	return j.reads[s/R*j.w+i*R+s%R]
}

// rankReads is rank's reads of epoch e: its read at position p is at
// p·w (j.w).
func (j *job) rankReads(e, rank int) []slot { return j.reads[e*j.k*j.w+rank:] }

// slot is one read of a rank: the file's local number and its size (a
// read asks the size, which by local number would be asked at random).
type slot struct{ f, size int32 }

// localOrder is one rank's order in one epoch over its node's local
// numbering, as shim's placer reads it (Len and At; Pos is never asked),
// in the node's reads (layout's).
type localOrder struct {
	reads      []int32
	base, step int
	k          int
}

var _ seed.Order = localOrder{}

func (o localOrder) Len() int        { return o.k }
func (o localOrder) At(p int) int    { return int(o.reads[o.base+p*o.step]) }
func (o localOrder) Pos(idx int) int { return -1 }

// newJob draws every epoch's DistributedSampler permutation (package
// seed, bit-exact with PyTorch), lays out each node's reads, and places
// the files with shim's planner for the clairvoyant policies asked for.
func newJob(cfg *Config, ds *files) (*job, error) {
	n := len(ds.sizes)
	j := &job{cfg: cfg, ds: ds, w: cfg.Nodes * cfg.RanksPerNode}
	samplers := make([]*seed.DistributedSampler, j.w)
	for r := range samplers {
		s, err := seed.New(seed.Spec{Sampler: seed.KindDistributed, Len: n, Seed: cfg.Seed, Replicas: j.w, Rank: r})
		if err != nil {
			return nil, fmt.Errorf("sampler: %w", err)
		}
		samplers[r] = s.(*seed.DistributedSampler)
	}
	// An epoch's permutation is every rank's (each views its part); one
	// is drawn per epoch as the reads are gathered, the first kept for
	// the holders.
	first := samplers[0].Perm(0)
	j.k = samplers[0].View(first).Len()
	orders := func(e int) []seed.Order {
		perm := first
		if e > 0 {
			perm = samplers[0].Perm(e)
		}
		os := make([]seed.Order, j.w)
		for r := range os {
			os[r] = samplers[r].View(perm)
		}
		return os
	}
	want := map[string]bool{}
	for _, p := range cfg.Policies {
		want[p] = true
	}
	// The holders and the owners, one core's work, while the reads are
	// gathered on all.
	var side sync.WaitGroup
	side.Add(1)
	go func() {
		defer side.Done()
		if want["clairvoyant+peers"] || want["hvac"] {
			j.holder, j.holdPos = shim.Holders(j.w, cfg.Nodes, n, func(r int) seed.Order { return samplers[r].View(first) })
		}
		if want["hvac"] {
			j.owner = make([]int16, n)
			for g := range j.owner {
				j.owner[g] = int16(peers.Owner(ds.path(g), cfg.Nodes))
			}
		}
	}()
	caps := make([]int64, len(cfg.Tiers))
	for t, tier := range cfg.Tiers {
		caps[t] = tier.Capacity
	}
	a := shim.Access{Epochs: cfg.Epochs, Stage: grownStage(cfg, ds, caps)}
	j.nodes = make([]*nodeOrder, cfg.Nodes)
	reads := j.gather(orders)
	side.Wait()
	meta := j.meta()
	// Each core's scratch: the files' meta to number with, the sizes it
	// hands the placer.
	type scratch struct {
		meta  []fileMeta
		sizes []int64
	}
	var mu sync.Mutex
	parallelWith(cfg.Nodes, func() *scratch { return &scratch{meta: slices.Clone(meta)} }, func(i int, sc *scratch) {
		no := j.layout(reads[i], sc.meta)
		reads := func(e int) []seed.Order {
			var os []seed.Order
			for r := range cfg.RanksPerNode {
				os = append(os, localOrder{reads[i], e*j.k*cfg.RanksPerNode + r, cfg.RanksPerNode, j.k})
			}
			return os
		}
		// One placement for the node alone, one for the node among
		// holders, of one count of its reads.
		var holds []func(f int32) bool
		if want["clairvoyant"] {
			holds = append(holds, nil)
		}
		if want["clairvoyant+peers"] {
			holds = append(holds, func(f int32) bool { return int(no.held[f]) == i })
		}
		var stage int64
		if len(holds) > 0 {
			sc.sizes = sc.sizes[:0]
			for _, s := range no.size {
				sc.sizes = append(sc.sizes, int64(s))
			}
			var pls []shim.Placement
			pls, stage = shim.PlaceNode(len(no.files), a, caps, sc.sizes, reads, holds...)
			if want["clairvoyant"] {
				no.tier, pls = pls[0].Tier, pls[1:]
			}
			if want["clairvoyant+peers"] {
				no.tierPeers = pls[0].Tier
			}
		}
		mu.Lock()
		j.nodes[i], j.stage = no, max(j.stage, stage)
		mu.Unlock()
	})
	j.reads = j.interleave(reads)
	if j.stage == 0 {
		j.stage = cfg.Prefetch.Stage
		if j.stage == 0 {
			j.stage = caps[0] / 8
		}
	}
	return j, nil
}

// fileMeta is what a node's file state copies of a dataset file, in one
// place, and (layout's scratch) its local number on the node being laid
// out: the nodes' files are dataset files at random, so a file costs one
// miss of the cache, not one per array.
type fileMeta struct {
	local         int32 // -1: none yet
	size          int32
	holder, owner int16
}

// meta is every dataset file's fileMeta.
func (j *job) meta() []fileMeta {
	m := make([]fileMeta, len(j.ds.sizes))
	for g, size := range j.ds.sizes {
		m[g] = fileMeta{local: -1, size: size}
		if j.holder != nil {
			m[g].holder = j.holder[g]
		}
		if j.owner != nil {
			m[g].owner = j.owner[g]
		}
	}
	return m
}

// grownStage is the staging budget the leader settles on (shim's
// growStage, docs/architecture.md "Staging"): the configured one, else an
// eighth of the first tier grown, when that is less than what the node's
// loaders hold in flight of the files no tier keeps (ranks x workers x
// prefetch x batch files, at the dataset's mean size, times the share of
// the dataset the tiers less that eighth cannot hold), to that, at least
// doubled, at most half the first tier. The leader grows it as it sees
// the loaders' spread, in the first batches; the simulation places with
// the grown budget from the start. (The share is the whole dataset's: a
// node of several reads only part of it, and the leader counts the
// share of what its node reads.)
func grownStage(cfg *Config, ds *files, caps []int64) int64 {
	if cfg.Prefetch.Stage > 0 || len(caps) == 0 || len(ds.sizes) == 0 {
		return cfg.Prefetch.Stage
	}
	first := caps[0]
	stage := first / 8
	l := cfg.Loop
	room := -stage
	for _, c := range caps {
		room += c
	}
	staged := min(1, max(0, 1-float64(room)/float64(ds.bytes)))
	need := int64(float64(int64(cfg.RanksPerNode*l.Workers*l.Prefetch*l.Batch)*(ds.bytes/int64(len(ds.sizes)))) * staged)
	if need <= stage {
		return stage
	}
	return min(max(need, 2*stage), first/2)
}

// gather writes down every node's reads of the run, as dataset indices,
// by slot (epoch, then position, then the node's rank; one node's reads
// together, as layout and the placer read them): each epoch's orders
// (orders(e), every rank's, one permutation kept at a time per core) are
// read position by position, every rank at each, which is
// how DistributedSampler's orders lie in the permutation (rank after rank
// at each position), so the permutation is read in order.
func (j *job) gather(orders func(e int) []seed.Order) [][]int32 {
	R := j.cfg.RanksPerNode
	reads := make([][]int32, j.cfg.Nodes)
	m := j.cfg.Epochs * j.k * R
	all := make([]int32, j.cfg.Nodes*m)
	for i := range reads {
		reads[i] = all[i*m : (i+1)*m : (i+1)*m]
	}
	parallel(j.cfg.Epochs, func(e int) {
		os := orders(e)
		for p := range j.k {
			for r, o := range os {
				reads[r/R][(e*j.k+p)*R+r%R] = int32(o.At(p))
			}
		}
	})
	return reads
}

// layout numbers a node's files in the order its ranks first read them
// (slot by slot: positions in step, every rank's at each, epoch after
// epoch: the order shim's placer meets them in), rewrites its reads,
// gather's, in that numbering, and copies each file's size, holder and
// owner from meta (every dataset file's, each local -1, left so).
func (j *job) layout(reads []int32, meta []fileMeta) *nodeOrder {
	// Numbered first, in a loop that holds little: the next reads' misses
	// of meta are under way while one waits. Each file's meta after,
	// lookups that do not wait on each other (1024 x 90: numbering and
	// placing in 3.8-4.3 s against 4.2-4.6 s, numbering and copying in
	// one loop).
	files := make([]int32, 0, min(len(reads), len(j.ds.sizes)))
	for k, g := range reads {
		l := meta[g].local
		if l < 0 {
			l = int32(len(files))
			meta[g].local = l
			files = append(files, g)
		}
		reads[k] = l
	}
	no := &nodeOrder{files: files, size: make([]int32, len(files))}
	if j.holder != nil {
		no.held = make([]int16, len(files))
	}
	if j.owner != nil {
		no.owner = make([]int16, len(files))
	}
	for f, g := range files {
		fm := &meta[g]
		fm.local = -1
		no.size[f] = fm.size
		if no.held != nil {
			no.held[f] = fm.holder
		}
		if no.owner != nil {
			no.owner[f] = fm.owner
		}
	}
	return no
}

// interleave lays the nodes' reads (layout's, one node's together) out
// as job.reads, by position: a transpose, tile by tile, a tile a run of
// positions of a few nodes. Each node's run of positions reads a run of
// its sizes (its files are numbered as first read), in order, and each
// position's row of the tile is a line of the slab, written whole. (Tiles
// of 64 positions of 64 nodes read a node's sizes a few lines at a time,
// a miss each: 1024 x 90's interleave in 1.9-2.4 s, against 1.1-1.9 s.)
func (j *job) interleave(local [][]int32) []slot {
	const positions, nodes = 1024, 8
	R, w := j.cfg.RanksPerNode, j.w
	n := j.cfg.Epochs * j.k // positions
	out := make([]slot, n*w)
	parallel((n+positions-1)/positions, func(b int) {
		p0, p1 := b*positions, min((b+1)*positions, n)
		for i0 := 0; i0 < len(j.nodes); i0 += nodes {
			tile := j.nodes[i0:min(i0+nodes, len(j.nodes))]
			for p := p0; p < p1; p++ {
				row := out[p*w+i0*R : p*w+(i0+len(tile))*R]
				for di, no := range tile {
					for l, f := range local[i0+di][p*R : (p+1)*R] {
						row[di*R+l] = slot{f, no.size[f]}
					}
				}
			}
		}
	})
	return out
}

// parallel runs do(0..n-1) on as many goroutines as Go runs at once.
func parallel(n int, do func(i int)) {
	parallelWith(n, func() struct{} { return struct{}{} }, func(i int, _ struct{}) { do(i) })
}

// parallelWith is parallel with scratch: each goroutine's, made by
// scratch, passed to each of its calls of do.
func parallelWith[S any](n int, scratch func() S, do func(i int, s S)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := scratch()
			for i := range next {
				do(i, s)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
