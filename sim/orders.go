package sim

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/augur-hpc/augur/peers"
	"github.com/augur-hpc/augur/placement"
	"github.com/augur-hpc/augur/seed"
)

// job is what every policy's run shares: every rank's reads over the whole
// run, each node's in a numbering of its own (so that a node's state
// scales with what it reads, not with the dataset), and the clairvoyant
// placements.
type job struct {
	cfg  *Config
	ds   *files
	w, k int // world size; reads per rank per epoch (DistributedSampler's num_samples)
	// perNode is how many reads each node makes over the run (asked at
	// every look of each prefetcher: a division).
	perNode int
	// bytes is what each rank's batch of each epoch reads, at
	// (e·batches + b)·w + rank (every rank's batch b side by side, as DDP
	// steps them): every policy's compute time of a step, summed once.
	bytes   []int64
	batches int
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
	// the job's first epoch (placement.Holders); nil unless a policy with
	// peers is run.
	holder []int16
	// holdPos is where in its rank's order of the first epoch the holder
	// reads each file.
	holdPos []int32
	// owner is, by dataset index, the node that owns the file under
	// hvac (peers.Owner of its path); nil unless hvac is run.
	owner []int16
	stage int64 // the staging budget the placement kept out of the first tier
	// mem holds the job's large arrays (j.reads, the nodes' lists, the
	// policies' file state) until the run is done.
	mem pages
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
	return takeSpare(&j.mem, &j.spare.fs, n)
}

// takeSpare removes from spare a slab that holds n elements and returns
// it cut to n (its contents as the last policy left them), or a new one
// of p's.
func takeSpare[T any](p *pages, spare *[][]T, n int) []T {
	for k, s := range *spare {
		if cap(s) >= n {
			*spare = append((*spare)[:k], (*spare)[k+1:]...)
			return s[:n]
		}
	}
	return slab[T](p, n)
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
	// held and owner are each local file's holder (placement.Holders; nil
	// without one) and owner (hvac), by local number. (Its size is in
	// each read of job.reads, and each policy's file state.)
	held, owner []int16
	// tier is the leader's placement of each local file (-1: staged when read)
	// alone and, with holders, in a job with peers; nil when not run.
	tier, tierPeers []int8
}

// batchBytes is the bytes rank's batch b of epoch e reads.
func (j *job) batchBytes(e, b, rank int) int64 { return j.bytes[(e*j.batches+b)*j.w+rank] }

// slots is how many reads each node makes over the run.
func (j *job) slots() int { return j.perNode }

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
// numbering, as the leader's placer reads it (Len and At; Pos is never asked),
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
// the files with the leader's placer for the clairvoyant policies asked for.
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
			j.holder, j.holdPos = placement.Holders(j.w, cfg.Nodes, n, func(r int) seed.Order { return samplers[r].View(first) })
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
	a := placement.Access{Epochs: cfg.Epochs, Stage: grownStage(cfg, ds, caps)}
	j.nodes = make([]*nodeOrder, cfg.Nodes)
	var gathered pages // gather's reads, until the nodes are laid out
	defer gathered.free()
	reads := j.gather(orders, &gathered)
	side.Wait()
	// The nodes in groups of a few: each group laid out, placed and then
	// written into j.reads side by side (see lay), its sizes by local
	// number kept only until then.
	j.reads = slab[slot](&j.mem, cfg.Epochs*j.k*j.w)
	j.batches = (j.k + cfg.Loop.Batch - 1) / cfg.Loop.Batch
	j.bytes = make([]int64, cfg.Epochs*j.batches*j.w)
	group := max(1, min(8, cfg.Nodes/(4*runtime.GOMAXPROCS(0))))
	type scratch struct {
		numbering
		sizes   [][]int32 // the group's nodes' sizes, by local number
		sizes64 []int64   // the placer's
	}
	var mu sync.Mutex
	parallelWith((cfg.Nodes+group-1)/group, func() *scratch {
		return &scratch{sizes: make([][]int32, group), numbering: numbering{lists: newLists(&j.mem)}}
	}, func(gi int, sc *scratch) {
		i0, i1 := gi*group, min((gi+1)*group, cfg.Nodes)
		for i := i0; i < i1; i++ {
			no := j.layout(reads[i], &sc.numbering, &sc.sizes[i-i0])
			stage := j.place(i, no, reads[i], sc.sizes[i-i0], &sc.sizes64, &sc.lists, a, caps, want)
			mu.Lock()
			j.nodes[i], j.stage = no, max(j.stage, stage)
			mu.Unlock()
		}
		j.lay(i0, reads[i0:i1], sc.sizes)
	})
	j.perNode = len(j.reads) / cfg.Nodes
	if j.stage == 0 {
		j.stage = cfg.Prefetch.Stage
		if j.stage == 0 {
			j.stage = caps[0] / 8
		}
	}
	return j, nil
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
func (j *job) gather(orders func(e int) []seed.Order, p *pages) [][]int32 {
	R := j.cfg.RanksPerNode
	reads := make([][]int32, j.cfg.Nodes)
	m := j.cfg.Epochs * j.k * R
	all := slab[int32](p, j.cfg.Nodes*m)
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

// place is the leader's placement of node i's files (no, laid out: its reads
// in its numbering, sizes by local number) for the clairvoyant policies
// asked for: one for the node alone, one for the node among holders, of
// one count of its reads. It returns the staging budget the placer kept.
func (j *job) place(i int, no *nodeOrder, reads []int32, sizes []int32, scratch *[]int64, lists *lists, a placement.Access, caps []int64, want map[string]bool) int64 {
	var holds []func(f int32) bool
	if want["clairvoyant"] {
		holds = append(holds, nil)
	}
	if want["clairvoyant+peers"] {
		holds = append(holds, func(f int32) bool { return int(no.held[f]) == i })
	}
	if len(holds) == 0 {
		return 0
	}
	R := j.cfg.RanksPerNode
	orders := func(e int) []seed.Order {
		var os []seed.Order
		for r := range R {
			os = append(os, localOrder{reads, e*j.k*R + r, R, j.k})
		}
		return os
	}
	s64 := (*scratch)[:0]
	for _, s := range sizes {
		s64 = append(s64, int64(s))
	}
	*scratch = s64
	pls, stage := placement.PlaceNode(len(no.files), a, caps, s64, orders, holds...)
	// Copied into the lists' arena: the placer's arrays are garbage, for
	// the next node's placer.
	if want["clairvoyant"] {
		no.tier, pls = lists.i8.clone(pls[0].Tier), pls[1:]
	}
	if want["clairvoyant+peers"] {
		no.tierPeers = lists.i8.clone(pls[0].Tier)
	}
	return stage
}

// layout numbers a node's files in the order its ranks first read them
// (slot by slot: positions in step, every rank's at each, epoch after
// epoch: the order the leader's placer meets them in), rewrites its reads,
// gather's, in that numbering, and copies each file's holder and owner
// into the node's order and its size into *sizes (by local number, the
// caller's until the node's reads are laid out by position).
//
// By sorting, not by a table of the dataset: the reads sorted by their
// file, stably (a radix sort, in the core's cache), lie together by file,
// each file's first read first, and meet the files in the order of their
// dataset indices, so the sizes, holders and owners are read in order. A
// table of every dataset file's local number, asked once a read at random
// (15 MB at ImageNet-1k, a miss each), took 3.6 s of 1024 x 90's setup.
func (j *job) layout(reads []int32, sc *numbering, sizes *[]int32) *nodeOrder {
	n := len(reads)
	keys := sc.sortByFile(reads, len(j.ds.sizes))
	first := grow(&sc.first, n) // each read's file's first read
	size := grow(&sc.size, n)   // by first read, its file's
	held, owner := grow(&sc.held, n), grow(&sc.owner, n)
	files := 0
	for a := 0; a < n; files++ {
		g, h := int32(keys[a]>>32), int32(keys[a])
		for ; a < n && int32(keys[a]>>32) == g; a++ {
			first[int32(keys[a])] = h
		}
		size[h] = j.ds.sizes[g]
		if j.holder != nil {
			held[h] = j.holder[g]
		}
		if j.owner != nil {
			owner[h] = j.owner[g]
		}
	}
	no := &nodeOrder{files: sc.i32.take(files)[:0]}
	local := grow(sizes, files)
	if j.holder != nil {
		no.held = sc.i16.take(files)
	}
	if j.owner != nil {
		no.owner = sc.i16.take(files)
	}
	// In the order of the reads: a file's first read numbers it, its
	// later ones take the number the first was rewritten to.
	for k, h := range first {
		if int(h) < k {
			reads[k] = reads[h]
			continue
		}
		f := len(no.files)
		no.files = append(no.files, reads[k])
		reads[k] = int32(f)
		local[f] = size[k]
		if no.held != nil {
			no.held[f] = held[k]
		}
		if no.owner != nil {
			no.owner[f] = owner[k]
		}
	}
	return no
}

// numbering is a core's scratch for layout, kept from node to node, and
// the arenas it cuts the nodes' lists from.
type numbering struct {
	keys, tmp   []uint64
	first, size []int32
	held, owner []int16
	lists
}

// lists are the arenas of the nodes' lists (nodeOrder's).
type lists struct {
	i32 arena[int32]
	i16 arena[int16]
	i8  arena[int8]
}

func newLists(p *pages) lists {
	return lists{arena[int32]{p: p}, arena[int16]{p: p}, arena[int8]{p: p}}
}

// grow is *s at length n, made anew only when it is short.
func grow[T any](s *[]T, n int) []T {
	if cap(*s) < n {
		*s = make([]T, n)
	}
	*s = (*s)[:n]
	return *s
}

// sortByFile is a node's reads as keys, each its file (dataset index, of
// files) above its place in the reads, sorted by file, stably: a radix
// sort of 11-bit digits from the lowest (two passes for ImageNet-1k's
// 1.28 million files; 8-bit digits, three passes, took a tenth longer).
func (sc *numbering) sortByFile(reads []int32, files int) []uint64 {
	keys, tmp := grow(&sc.keys, len(reads)), grow(&sc.tmp, len(reads))
	for k, g := range reads {
		keys[k] = uint64(g)<<32 | uint64(k)
	}
	const digit = 11
	for shift := 32; (files-1)>>(shift-32) > 0; shift += digit {
		var at [1 << digit]int
		for _, k := range keys {
			at[k>>shift&(1<<digit-1)]++
		}
		sum := 0
		for d, c := range at {
			at[d], sum = sum, sum+c
		}
		for _, k := range keys {
			d := k >> shift & (1<<digit - 1)
			tmp[at[d]] = k
			at[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys
}

// lay writes nodes i0.. (local, each node's reads in its numbering, as
// layout left them; sizes, by local number) into job.reads, by position:
// a transpose whose every row is the few nodes' reads at one position,
// side by side (a line of j.reads for a group of 8 nodes of one rank),
// written whole; and each batch's bytes. Each node's sizes are read in
// order (its files are numbered as first read).
func (j *job) lay(i0 int, local, sizes [][]int32) {
	R, w, B := j.cfg.RanksPerNode, j.w, j.cfg.Loop.Batch
	for p := range j.cfg.Epochs * j.k {
		row := j.reads[p*w+i0*R : p*w+(i0+len(local))*R]
		e, b := p/j.k, p%j.k/B
		bytes := j.bytes[(e*j.batches+b)*w+i0*R:][:len(row)]
		for di, reads := range local {
			for l, f := range reads[p*R : (p+1)*R] {
				row[di*R+l] = slot{f, sizes[di][f]}
				bytes[di*R+l] += int64(sizes[di][f])
			}
		}
	}
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
