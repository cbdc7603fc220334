package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/augur-hpc/augur/placement"
	"github.com/augur-hpc/augur/seed"
)

// small is a job where every policy differs: 4 nodes of 2 ranks, tiers
// that hold a third of the dataset per node, a PFS slower than compute.
func small() *Config {
	c := Lassen()
	c.Nodes, c.RanksPerNode, c.Epochs = 4, 2, 3
	c.Dataset = Dataset{Count: 4000, Mean: 100 * kB, Sigma: 50 * kB}
	c.Loop = Loop{Batch: 16, Workers: 2, Prefetch: 2, Compute: 0.01}
	c.Tiers = []Tier{{Capacity: 60 * mB, Bandwidth: 2 * gB, Threads: 8}, {Capacity: 80 * mB, Bandwidth: 1 * gB, Threads: 4}}
	c.Prefetch.Stage = 0
	c.PFS = PFS{Curve: []CurvePoint{{1, 100 * mB}, {8, 200 * mB}}, Latency: 0.002}
	c.Net = Net{Bandwidth: 500 * mB}
	return c
}

// buildJob is c's job as every policy's run shares it.
func buildJob(t *testing.T, c *Config) *job {
	t.Helper()
	ds, err := makeFiles(c.Dataset, c.Seed)
	if err != nil {
		t.Fatal(err)
	}
	j, err := newJob(c, ds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.mem.free)
	return j
}

func run(t *testing.T, c *Config) *Result {
	t.Helper()
	res, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestPerfectIsTheBound(t *testing.T) {
	res := run(t, small())
	perfect := res.Policy("perfect")
	for _, p := range res.Policies {
		for e, ep := range p.Epochs {
			if ep.Seconds < perfect.Epochs[e].Seconds-1e-9 {
				t.Errorf("%s epoch %d: %.3fs, faster than perfect's %.3fs", p.Policy, e+1, ep.Seconds, perfect.Epochs[e].Seconds)
			}
		}
	}
}

// One reader, one file at a time, no compute: an epoch is the dataset's
// bytes at the PFS's rate plus its latency per file.
func TestPFSIsItsAnalyticTime(t *testing.T) {
	c := Lassen()
	c.Nodes, c.Epochs, c.Policies = 1, 2, []string{"pfs"}
	c.Dataset = Dataset{Count: 500, Mean: 1 * mB}
	c.Loop = Loop{Batch: 1, Workers: 1, Prefetch: 1}
	c.PFS = PFS{Curve: []CurvePoint{{1, 250 * mB}}, Latency: 0.001}
	res := run(t, c)
	want := 500 * (1*mB/(250*mB) + 0.001)
	for _, ep := range res.Policies[0].Epochs {
		if math.Abs(ep.Seconds-want) > 1e-6 {
			t.Errorf("epoch %d: %.6fs, want %.6fs", ep.Epoch, ep.Seconds, want)
		}
		if ep.PFSBytes != res.Bytes {
			t.Errorf("epoch %d read %d bytes of the PFS, want the dataset's %d", ep.Epoch, ep.PFSBytes, res.Bytes)
		}
	}
}

// With peers and room for the dataset in all, the job reads the PFS
// little more than once; alone, each node reads what it reads anew.
func TestPeersReadThePFSAboutOnce(t *testing.T) {
	c := small()
	c.Tiers[0].Capacity = 200 * mB // the nodes hold the dataset twice over in all
	c.Loop.Compute = 0.1           // and the PFS keeps up with the job: no reader overtakes its prefetcher
	c.Policies = []string{"clairvoyant", "clairvoyant+peers"}
	res := run(t, c)
	pfs := func(p string) float64 {
		var b int64
		for _, e := range res.Policy(p).Epochs {
			b += e.PFSBytes
		}
		return float64(b) / float64(res.Bytes)
	}
	alone, peers := pfs("clairvoyant"), pfs("clairvoyant+peers")
	if peers < 1 || peers > 1.25 {
		t.Errorf("with peers the PFS served %.2fx the dataset over 3 epochs, want about 1", peers)
	}
	if alone < 1.5*peers {
		t.Errorf("alone %.2fx the dataset, with peers %.2fx: peers should save", alone, peers)
	}
}

// The placement the simulator runs is the leader's: the same as augur plan
// --nodes computes for a walked directory (Prediction.PlaceNodes), and
// for a node alone the same as placement.PlaceNode places it by itself (the
// two placements share one count of the node's reads). And every read's
// size is its file's. Of 3 nodes, and of 40, which newJob lays out in
// groups of several.
func TestPlacementIsTheLeaders(t *testing.T) {
	for _, nodes := range []int{3, 40} {
		t.Run(fmt.Sprint(nodes), func(t *testing.T) { testPlacementIsTheLeaders(t, nodes) })
	}
}

func testPlacementIsTheLeaders(t *testing.T, nodes int) {
	root := t.TempDir()
	for i := range 300 {
		p := filepath.Join(root, fmt.Sprintf("c%d", i%5), fmt.Sprintf("%04d.jpg", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, make([]byte, 1000+(i*7919)%5000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := small()
	c.Dataset = Dataset{Dir: root}
	c.Nodes, c.RanksPerNode, c.Epochs, c.Seed = nodes, 2, 4, 7
	c.Tiers[0].Capacity, c.Tiers[1].Capacity = 120_000, 90_000
	c.Prefetch.Stage = 15_000 // the eighth augur plan assumes (the leader grows it as it sees the loaders)
	c.Policies = []string{"clairvoyant", "clairvoyant+peers"}
	j := buildJob(t, c)
	a := placement.Access{Sampler: "distributed", Layout: "imagefolder", Shuffle: true, WorldSize: 2 * nodes, RanksPerNode: 2, Epochs: 4, Stage: 15_000}
	p, err := placement.Predict([]string{root}, 7, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	jp, err := p.PlaceNodes(a, p.Sizes(nil), []int64{120_000, 90_000}, nodes)
	if err != nil {
		t.Fatal(err)
	}
	placed := 0
	for n, np := range jp.Nodes {
		got := make([]int8, p.Len())
		for i := range got {
			got[i] = -1
		}
		for f, g := range j.nodes[n].files {
			got[g] = j.nodes[n].tierPeers[f]
		}
		for i, want := range np.Tier {
			if got[i] != want {
				t.Fatalf("node %d file %d: sim places it in tier %d, augur plan in %d", n, i, got[i], want)
			}
			if want >= 0 {
				placed++
			}
		}
	}
	if placed == 0 || placed == nodes*p.Len() {
		t.Fatalf("%d placements: the test needs tiers that hold some files, not all", placed)
	}
	for n, no := range j.nodes {
		sizes := make([]int64, len(no.files))
		for f, g := range no.files {
			sizes[f] = int64(j.ds.sizes[g])
		}
		R := c.RanksPerNode
		local := make([]int32, j.slots()) // the node's reads, its slots in order
		bytes := map[[3]int]int64{}       // by epoch, batch, rank
		for k := range local {
			rd := j.nodeRead(n, k)
			if want := int32(sizes[rd.f]); rd.size != want {
				t.Fatalf("node %d read %d: file %d of %d bytes, laid out with %d", n, k, rd.f, want, rd.size)
			}
			local[k] = rd.f
			p := k / R // epoch·k + position
			bytes[[3]int{p / j.k, p % j.k / c.Loop.Batch, n*R + k%R}] += sizes[rd.f]
		}
		for ebr, want := range bytes {
			if got := j.batchBytes(ebr[0], ebr[1], ebr[2]); got != want {
				t.Fatalf("epoch %d batch %d rank %d: %d bytes, its reads' sizes add up to %d", ebr[0], ebr[1], ebr[2], got, want)
			}
		}
		reads := func(e int) []seed.Order {
			var os []seed.Order
			for r := range R {
				os = append(os, localOrder{local, e*j.k*R + r, R, j.k})
			}
			return os
		}
		alone, _ := placement.PlaceNode(len(no.files), a, []int64{120_000, 90_000}, sizes, reads, nil)
		if !slices.Equal(alone[0].Tier, no.tier) {
			t.Fatalf("node %d: the placement alone differs from placement.PlaceNode's by itself", n)
		}
	}
}

func TestConfigFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "job.toml")
	os.WriteFile(f, []byte(`nodes = 16
policies = ["pfs", "clairvoyant"]
[dataset]
count = 1000
size = "2MB"
[[tier]]
capacity = "1GB"
bandwidth = "10GB/s"
threads = 4
[pfs]
throughput = ["1:100MB/s", "4:300MB/s"]
latency = "1ms"
[reactive]
wait_max = "1MiB"
`), 0o644)
	c := Lassen()
	if err := c.ReadFile(f); err != nil {
		t.Fatal(err)
	}
	if c.Nodes != 16 || c.Dataset.Count != 1000 || c.Dataset.Mean != 2*mB || len(c.Tiers) != 1 ||
		c.Tiers[0].Capacity != gB || len(c.PFS.Curve) != 2 || c.PFS.Curve[1].Rate != 300*mB || c.PFS.Latency != 0.001 ||
		c.Reactive.WaitMax != 1<<20 {
		t.Fatalf("read %+v", c)
	}
	os.WriteFile(f, []byte("nodes = 2\nbogus = 1\n"), 0o644)
	if err := Lassen().ReadFile(f); err == nil {
		t.Fatal("an unknown key was accepted")
	}
}

// bench.json's S1-S3 once with the PFS client's page cache and once with
// direct I/O (or, before it had both, without the field: the page
// cache): each is simulated with its own client. The file's pfs section
// then says so in words where it had a bool.
func TestValidatePicksScenarioByDirectIO(t *testing.T) {
	doc := `{"workload":{"epochs":3,"seed":1,"ranks":2,"workers":2,"batch":16,"prefetch":2,"compute_ns":15000000},
	"pfs":{"bandwidth":"200MB/s","open_latency":"2ms","read_latency":"0.5ms","meta_latency":"1ms","direct_io":"both: each scenario's direct_io"},
	"first_epoch":{"anything":1},
	"scenarios":[%s]}`
	sc := func(direct string) string {
		return `{"name":"S1","samples":10,"ram_tier_bytes":1000000,"disk_tier_bytes":0,` + direct +
			`"runs":[{"config":"pfs","result":{"epochs":[{"seconds":1,"bytes":1000}]}}]}`
	}
	for _, c := range []struct {
		scenarios string
		want      map[string]bool // name: the client's page cache
	}{
		{sc(""), map[string]bool{"S1": true}},
		{sc(`"direct_io":false,`) + "," + sc(`"direct_io":true,`), map[string]bool{"S1": true, "S1 direct-io": false}},
	} {
		var b benchJSON
		if err := json.Unmarshal([]byte(fmt.Sprintf(doc, c.scenarios)), &b); err != nil {
			t.Fatal(err)
		}
		scs, err := b.scenarios()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, s := range scs {
			got[s.name] = s.cfg.PFS.ClientCache
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("scenarios %v, want %v", got, c.want)
		}
	}
}

// augur's reactive policy (wait_max): the first reader of a file asks for
// its copy and reads it, so the PFS serves each byte once in the first
// epoch, with or without a client page cache; wait_max 0 (MONARCH's own
// way) reads a file twice without one, and so does a file larger than
// wait_max. Once the tiers are full the readers stop asking: the first
// epoch still reads the dataset once, and every later one reads once what
// no tier holds.
func TestReactiveReadsEachByteOnce(t *testing.T) {
	pfsBytes := func(c *Config) []int64 {
		res := run(t, c)
		var out []int64
		for _, e := range res.Policy("reactive").Epochs {
			out = append(out, e.PFSBytes)
		}
		return out
	}
	base := func() *Config {
		c := small()
		c.Nodes, c.Policies = 1, []string{"reactive"}
		c.Tiers[0].Capacity, c.Tiers[1].Capacity = 200*mB, 200*mB // room for the dataset
		return c
	}
	ds := datasetBytes(t, base())
	for _, cache := range []bool{false, true} {
		c := base()
		c.PFS.ClientCache = cache
		if got := pfsBytes(c); got[0] != ds || got[1] != 0 || got[2] != 0 {
			t.Errorf("client cache %v: PFS bytes by epoch %v, want the dataset's %d once", cache, got, ds)
		}
	}
	c := base()
	c.Reactive.WaitMax = 0
	if got := pfsBytes(c); got[0] != 2*ds || got[1] != 0 {
		t.Errorf("wait_max 0 without a client cache: PFS bytes by epoch %v, want the dataset's %d twice, then none", got, ds)
	}
	c = base()
	c.Dataset.Sigma = 0 // every file 100 kB
	c.Reactive.WaitMax = 50 * kB
	if got := pfsBytes(c); got[0] != 2*datasetBytes(t, c) {
		t.Errorf("files larger than wait_max: PFS bytes by epoch %v, want the dataset twice", got)
	}
	c = base()
	c.Tiers[0].Capacity, c.Tiers[1].Capacity = 60*mB, 80*mB // a third of the dataset
	got := pfsBytes(c)
	// Once the readers stop asking, the queue still copies a file that
	// fits what room is left (MONARCH's way: read twice), less than a
	// file per tier.
	if got[0] < ds || got[0] > ds+ds/100 {
		t.Errorf("tiers full: epoch 1 read %d bytes of the PFS, want the dataset's %d once", got[0], ds)
	}
	if got[1] <= 0 || got[1] > ds-130*mB || got[2] != got[1] {
		t.Errorf("tiers full: later epochs read %v of the PFS, want what the tiers (140 MB) do not hold, once (dataset %d)", got[1:], ds)
	}
}

// With a client page cache, augur's reactive reader of a file the client
// reads in one request reads the original, as without augur (its copy is
// its own bytes), and the reader of a larger file waits for the copy and
// reads that; without one, no reader waits: the first epoch's tier reads
// say which.
func TestReactiveWaitsAboveTheClientsRequest(t *testing.T) {
	for _, tc := range []struct {
		req   int64 // files of 100 kB
		cache bool
	}{{128 << 10, true}, {32 << 10, true}, {32 << 10, false}} {
		c := small()
		c.Nodes, c.Policies = 1, []string{"pfs", "reactive"}
		c.Tiers[0].Capacity, c.Tiers[1].Capacity = 200*mB, 200*mB
		c.Dataset.Sigma = 0
		c.PFS.ClientCache, c.PFS.RequestSize = tc.cache, tc.req
		req := tc.req
		res := run(t, c)
		pfs, react := res.Policy("pfs").Epochs[0], res.Policy("reactive").Epochs[0]
		fromTiers := react.TierBytes[0] + react.TierBytes[1]
		switch {
		case (req > 100*kB || !tc.cache) && (fromTiers != 0 || react.Seconds != pfs.Seconds):
			t.Errorf("files within the request or no client cache: epoch 1 read %d bytes of tiers in %.3f s, want none in pfs's %.3f s", fromTiers, react.Seconds, pfs.Seconds)
		case req < 100*kB && tc.cache && fromTiers != datasetBytes(t, c):
			t.Errorf("files larger than the request: epoch 1 read %d bytes of tiers, want the dataset's %d", fromTiers, datasetBytes(t, c))
		}
		if react.PFSBytes != datasetBytes(t, c) {
			t.Errorf("request %d: epoch 1 read %d bytes of the PFS, want the dataset's %d once", req, react.PFSBytes, datasetBytes(t, c))
		}
	}
}

// datasetBytes is the size of c's dataset.
func datasetBytes(t *testing.T, c *Config) int64 {
	t.Helper()
	d := *c
	d.Policies = []string{"perfect"}
	return run(t, &d).Bytes
}

// A copy a reader waits for is read in up to 4 parts at once (tiering's
// copyParallel), so the reader waits for one part's requests, not the
// file's: one reader, files of 4 requests (a client page cache: larger
// than its read-ahead, they are waited for), an epoch is the files' open
// latency, one request's latency, the bytes through the PFS, the copy's
// write and the reader's read of it.
func TestReactiveCopyInParts(t *testing.T) {
	c := Lassen()
	c.Nodes, c.Epochs, c.Policies = 1, 1, []string{"reactive"}
	c.Dataset = Dataset{Count: 200, Mean: 512 << 10}
	c.Loop = Loop{Batch: 1, Workers: 1, Prefetch: 1}
	c.Tiers = []Tier{{Capacity: 1 << 30, Bandwidth: 1 * gB, Threads: 1}}
	c.PFS = PFS{Curve: []CurvePoint{{1, 250 * mB}}, Latency: 0.002, ReadLatency: 0.001, RequestSize: 128 << 10, ClientCache: true}
	size := float64(512 << 10)
	want := 200 * (0.002 + 0.001 + size/(250*mB) + 2*size/gB)
	if got := run(t, c).Policies[0].Epochs[0].Seconds; math.Abs(got-want) > 1e-6 {
		t.Errorf("epoch 1: %.6fs, want %.6fs", got, want)
	}
	for _, w := range []struct {
		size float64
		n    int
	}{{1, 1}, {128 << 10, 1}, {128<<10 + 1, 2}, {400 << 10, 4}, {64 << 20, 4}} {
		if n := copyParts(w.size); n != w.n {
			t.Errorf("a copy of %.0f bytes in %d parts, want %d", w.size, n, w.n)
		}
	}
}

// A PFS as fast as the first tier (a page cache that holds the dataset)
// is passed through, as augur does (shim/sources.go): every policy reads
// it as pfs does, copying nothing; a slow one is copied.
func TestPolicyPassesAFastSourceThrough(t *testing.T) {
	c := small()
	c.Nodes = 1
	c.PFS = PFS{Curve: []CurvePoint{{1, 2 * gB}}, Latency: 10e-6}
	c.Tiers[0].Latency = 8e-6
	res := run(t, c)
	pfs := res.Policy("pfs")
	for _, pol := range []string{"reactive", "clairvoyant", "staging"} {
		p := res.Policy(pol)
		for e, ep := range p.Epochs {
			if ep.Seconds != pfs.Epochs[e].Seconds || ep.PFSBytes != pfs.Epochs[e].PFSBytes {
				t.Errorf("%s epoch %d on a fast source: %.4fs, %d PFS bytes; want pfs's %.4fs, %d", pol, e+1,
					ep.Seconds, ep.PFSBytes, pfs.Epochs[e].Seconds, pfs.Epochs[e].PFSBytes)
			}
		}
	}
	c.PFS.Latency = 0.002 // slow again
	if p := run(t, c).Policy("reactive"); p.Epochs[1].PFSBytes >= p.Epochs[0].PFSBytes {
		t.Errorf("reactive on a slow PFS: epoch 2 read %d bytes of it, epoch 1 %d; want its copies read", p.Epochs[1].PFSBytes, p.Epochs[0].PFSBytes)
	}
}
