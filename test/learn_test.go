package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/augur-hpc/augur/bench/dlbench"
	"github.com/augur-hpc/augur/shim"
)

// The clairvoyant policy learns what the job reads from its opens: real
// PyTorch jobs (test/python/learn_job.py: ImageFolder, a DataLoader with
// workers, DistributedSampler), told nothing but the dataset, the tiers,
// the policy and, where the script's is not 0, the seed. Each node is one
// `augur run` job whose RAM tier holds a quarter of the dataset. Asserted:
// every sample's bytes; what augur stat says each stream reads; at least
// 99% of each stream's opens after it locked on expected; and, seen from
// outside (fanotify, opens of the originals by any process but the
// leader), at least 90% of the sample opens served from the tier.

const learnJob = "python/learn_job.py"

// learnNode is one node of a set-up: its environment and the command the
// node's `augur run` runs (several ranks: a shell starts them).
type learnNode struct {
	env  []string
	cmd  []string
	want []shim.StreamStats // Stream, Dataset, Sampler, Shuffle, Seed, WorldSize, Rank, Epoch (at the end) checked
}

// job is one rank's learn_job.py command line. Each step computes 40 ms
// (a GPU's time on the batch, while the DataLoader and augur read ahead):
// a job that does nothing but read is as fast as its reads, with or
// without a prefetcher. Shorter steps test the host's two cores, not the
// policy: the ranks, their loaders and the leader share them, and at 10
// ms what the tier served moved with the host's load (85.6% in CI, 86.7%
// and 87.7% in fresh-ci on 2026-11-28's slow host, 95.6-97.1% alone); at
// 20 ms 88% on that day; at 40 ms 96.7% beside a process busy on a core.
func job(root, layout string, epochs int, opts ...string) []string {
	return jobStep(root, layout, epochs, 40, opts...)
}

// jobStep is job with a step of ms milliseconds.
func jobStep(root, layout string, epochs, ms int, opts ...string) []string {
	abs, _ := filepath.Abs(learnJob)
	return append([]string{Python, abs, root, layout, fmt.Sprint(epochs), "--compute-ms", fmt.Sprint(ms)}, opts...)
}

// ranksOnNode runs the ranks' commands (each with its variables) side by side.
func ranksOnNode(cmds ...[]string) []string {
	var parts []string
	for _, c := range cmds {
		parts = append(parts, strings.Join(c, " ")+" &")
	}
	return []string{"sh", "-c", strings.Join(parts, " ") + " wait"}
}

// node1of2 is node 1 of two with two ranks each (global ranks 2 and 3),
// each rank started with the launcher's variables vars gives.
func node1of2(root string, vars func(local, global int) []string) []learnNode {
	var cmds [][]string
	var want []shim.StreamStats
	for local := 0; local < 2; local++ {
		g := 2 + local
		cmd := append([]string{"env"}, vars(local, g)...)
		cmds = append(cmds, append(cmd, job(root, "plain", 3, "--seed", fmt.Sprint(learnSeed))...))
		want = append(want, shim.StreamStats{Stream: fmt.Sprintf("rank %d", g), Sampler: "DistributedSampler",
			Shuffle: true, Seed: learnSeed, WorldSize: 4, Rank: g, Epoch: 2})
	}
	return []learnNode{{cmd: ranksOnNode(cmds...), want: want}}
}

// learnSeed is the scripts' DistributedSampler seed where it is not 0.
const learnSeed = 7

func TestClairvoyantLearnsTheJob(t *testing.T) {
	// Small files, many: the staging budget (an eighth of a quarter of the
	// dataset) must hold more files than the readers have in flight.
	const classes, per, size = 8, 300, 1000
	const seed = learnSeed
	train := func(world, rank, epoch int) shim.StreamStats {
		return shim.StreamStats{Dataset: "", Sampler: "DistributedSampler", Shuffle: true, Seed: seed,
			WorldSize: world, Rank: rank, Epoch: epoch}
	}
	for _, tc := range []struct {
		name      string
		imagenet  bool
		per, size int // files per class and their size, when not per and size
		nodes     func(root string) []learnNode
	}{
		{name: "env-rank-one-per-node", nodes: func(root string) []learnNode {
			var nodes []learnNode
			for r := 0; r < 2; r++ {
				w := train(2, r, 2)
				w.Stream = fmt.Sprintf("rank %d", r)
				nodes = append(nodes, learnNode{env: []string{fmt.Sprintf("RANK=%d", r), "WORLD_SIZE=2"},
					cmd: job(root, "plain", 3, "--seed", fmt.Sprint(seed)), want: []shim.StreamStats{w}})
			}
			return nodes
		}},
		{name: "resumed-at-epoch-5", nodes: func(root string) []learnNode {
			w := train(1, 0, 7)
			return []learnNode{{cmd: job(root, "plain", 3, "--seed", fmt.Sprint(seed), "--start-epoch", "5"),
				want: []shim.StreamStats{w}}}
		}},
		{name: "imagenet-train-and-val", imagenet: true, nodes: func(root string) []learnNode {
			// The script's seed is DistributedSampler's default, 0: augur is told none.
			tr := shim.StreamStats{Dataset: "train", Sampler: "DistributedSampler", Shuffle: true, Seed: 0, WorldSize: 1, Epoch: 1}
			val := shim.StreamStats{Dataset: "val", Sampler: "DistributedSampler", WorldSize: 1}
			return []learnNode{{cmd: job(root, "imagenet", 2), want: []shim.StreamStats{tr, val}}}
		}},
		{name: "spawn-ranks-in-code", nodes: func(root string) []learnNode {
			// Each epoch's workers are new processes (spawn) whose torch
			// imports take the host's cores while the last epoch's copies
			// are made. At 40 ms a step, beside a process busy on a core,
			// 1.4-7.7% of the sample opens read the originals (four runs;
			// 10% fails); at 80 ms, 1.0-1.2% (two).
			cmd := jobStep(root, "plain", 3, 80, "--seed", fmt.Sprint(seed), "--spawn", "2")
			return []learnNode{{cmd: cmd, want: []shim.StreamStats{train(2, 0, 2), train(2, 1, 2)}}}
		}},
		{name: "batch-256-workers-8", per: 5000, size: 500, nodes: func(root string) []learnNode {
			// Each epoch starts with 16 batches asked at once (4,096
			// samples): 40,000 files, so that a quarter of them in the
			// tier is more than the loader holds in flight, as a RAM tier
			// is on a real node. Three quarters of each epoch are staged:
			// a copy made and dropped for every such read. 80 ms per batch
			// is 3,200 samples/s, for which the leader takes a third of a
			// core here (97.6-97.8% served beside two busy processes). At
			// 40 ms (6,400 samples/s, the leader half a core or more) it
			// served 95-97% here, but 86.7% in CI on 2026-11-28: the
			// host's two cores, not the policy, were tested.
			w := train(1, 0, 2)
			return []learnNode{{cmd: jobStep(root, "plain", 3, 80, "--seed", fmt.Sprint(seed), "--batch", "256", "--workers", "8"),
				want: []shim.StreamStats{w}}}
		}},
		{name: "torchrun-variables", nodes: func(root string) []learnNode {
			return node1of2(root, func(local, g int) []string {
				return []string{fmt.Sprintf("RANK=%d", g), fmt.Sprintf("LOCAL_RANK=%d", local), "WORLD_SIZE=4",
					"LOCAL_WORLD_SIZE=2", "GROUP_RANK=1", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500"}
			})
		}},
		{name: "slurm-variables", nodes: func(root string) []learnNode {
			return node1of2(root, func(local, g int) []string {
				return []string{fmt.Sprintf("SLURM_PROCID=%d", g), fmt.Sprintf("SLURM_LOCALID=%d", local),
					"SLURM_NTASKS=4", "SLURM_NODEID=1", "SLURM_JOB_NUM_NODES=2"}
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCase(t)
			want := map[string]bool{}
			var total int64
			dirs := []string{""}
			if tc.imagenet {
				dirs = []string{"train", "val"}
			}
			per, size := per, size
			if tc.per > 0 {
				per, size = tc.per, tc.size
			}
			for _, d := range dirs {
				n := per
				if d == "val" {
					n = per / 2
				}
				for k := 0; k < classes; k++ {
					for _, f := range c.RandomFiles(filepath.Join(d, fmt.Sprintf("n%08d", k)), n, size) {
						p := strings.TrimSuffix(f, filepath.Ext(f)) + ".JPEG"
						must(t, os.Rename(f, p))
						want[sha256Of(t, []string{p})[p]] = true
						total += int64(size)
					}
				}
			}
			nodes := tc.nodes(c.Dataset)
			obs := ObservePids(t, c.Dataset)
			var wg sync.WaitGroup
			outs := make([]string, len(nodes))
			jobs := make([]string, len(nodes))
			for i, n := range nodes {
				nc := *c
				nc.Env = append([]string{}, c.Env...)
				jobs[i] = "learn-" + randHex(4)
				nc.Set("AUGUR_JOB=" + jobs[i])
				nc.Set("AUGUR_POLICY=clairvoyant")
				nc.Set(fmt.Sprintf("AUGUR_TIERS=%s:%d", c.RAM+fmt.Sprint(i), total/4))
				nc.Env = append(nc.Env, n.env...)
				t.Cleanup(func() { os.RemoveAll(c.RAM + fmt.Sprint(i)) })
				args := n.cmd
				if !tc.imagenet {
					args = append([]string{"--seed", fmt.Sprint(seed), "--"}, args...)
				} else {
					args = append([]string{"--"}, args...)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					outs[i], _ = nc.AugurRun(args...)
				}()
			}
			wg.Wait()
			obs.Stop()

			var leaders []int
			samples := 0
			for i, n := range nodes {
				for _, l := range strings.Split(strings.TrimSpace(outs[i]), "\n") {
					_, digest, _ := strings.Cut(l, " ")
					if !want[digest] {
						t.Fatalf("node %d: a sample's bytes match no file: %q", i, l)
					}
					samples++
				}
				st := jobStats(t, c, jobs[i])
				leaders = append(leaders, st.LeaderPID)
				t.Logf("node %d: opens %d, from tiers %d; predicted: in time %d, late %d, missed %d; unpredicted %d; copies %d; ring dropped %d",
					i, st.Opens, st.Opens-st.Misses, st.PredHits, st.PredLate, st.PredMisses, st.Unpredicted, st.Copies, st.RingDropped)
				checkStreams(t, i, st.Streams, n.want)
			}
			fromOriginals := obs.OpensBy(leaders...)
			t.Logf("%d sample opens, %d of the originals (by the job's processes)", samples, fromOriginals)
			if float64(fromOriginals) > 0.1*float64(samples) {
				t.Errorf("%d of %d sample opens read the originals: under 90%% served from the tier", fromOriginals, samples)
			}
		})
	}
}

// checkStreams compares augur stat's streams of a node with what the
// node's ranks read (a rank's processes may be streams of their own:
// DataLoader workers started by spawn), and checks that 99% of each one's
// opens after it locked on were expected.
func checkStreams(t *testing.T, node int, got, want []shim.StreamStats) {
	t.Helper()
	matches := func(g, w shim.StreamStats) bool {
		return (w.Stream == "" || g.Stream == w.Stream) && g.Dataset == w.Dataset && g.Rank == w.Rank
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g shim.StreamStats) bool { return matches(g, w) }) {
			t.Errorf("node %d: no stream reads %q as rank %d: %+v", node, w.Dataset, w.Rank, got)
		}
	}
	for _, g := range got {
		i := slices.IndexFunc(want, func(w shim.StreamStats) bool { return matches(g, w) })
		if i < 0 {
			t.Errorf("node %d: augur stat shows a stream no rank is: %+v", node, g)
			continue
		}
		w := want[i]
		if g.Sampler != w.Sampler || g.Shuffle != w.Shuffle || g.WorldSize != w.WorldSize ||
			(w.Shuffle && (g.Seed != w.Seed || g.Epoch != w.Epoch)) {
			t.Errorf("node %d: stream %+v, want %+v", node, g, w)
		}
		if after := float64(g.Opens) / float64(g.Opens+g.AfterLock); after < 0.99 {
			t.Errorf("node %d: %s: %.1f%% of the opens after the lock expected (%d of %d)",
				node, g.Stream, 100*after, g.Opens, g.Opens+g.AfterLock)
		}
		t.Logf("node %d: %s %s: %d opens before the lock (%.2f s), %d expected after, %d not",
			node, g.Stream, g.Dataset, g.BeforeLock, g.LockSeconds, g.Opens, g.AfterLock)
	}
}

// augur bench's C loaders (the exact DistributedSampler order, 2 ranks,
// batches handed to forked workers in turn, each reading its batch in
// order): every stream is learned, as its rank, and at least 99% of its
// opens after the lock are expected. The compute time per batch grows
// with the batch, so that every set-up reads at about the same rate.
// From batch 256 with 4 workers on, a rank's epoch of 4,000 samples is
// read nearly all at once.
func TestClairvoyantFollowsAnyLoader(t *testing.T) {
	c := NewCase(t)
	reader, err := dlbench.BuildReader("../bench/c/dlreader", filepath.Join(t.TempDir(), "dlreader"))
	if err != nil {
		t.Fatalf("building dlreader: %v", err)
	}
	ds := filepath.Join(t.TempDir(), "ds")
	// The dataset exists before each job's leader lists it: one epoch
	// without augur generates it, and every job below reuses it.
	if out, err := c.Augur("bench", "-reader", reader, "-generate", ds, "-count", "8000", "-size", "4KiB",
		"-classes", "20", "-epochs", "1", "-seed", "42", "-no-sync"); err != nil {
		t.Fatalf("augur bench (generating the dataset): %v\n%s", err, out)
	}
	for _, tc := range []struct{ batch, workers int }{{16, 0}, {32, 1}, {64, 2}, {256, 4}, {512, 8}, {1024, 16}} {
		t.Run(fmt.Sprintf("batch-%d-workers-%d", tc.batch, tc.workers), func(t *testing.T) {
			job := "loader-" + randHex(4)
			tier := c.RAM + "-loader"
			t.Cleanup(func() { os.RemoveAll(tier) })
			compute := fmt.Sprintf("%dus", tc.batch*100)
			// Under augur run, whose leader reads every event of the job
			// before it ends: a leader in a reader's process dies with it,
			// and what augur stat shows then is as far as it had got.
			cmd := exec.Command(Augur, "run", "--", Augur, "bench", "-reader", reader, "-generate", ds, "-count", "8000", "-size", "4KiB",
				"-classes", "20", "-compute", compute, "-batch", fmt.Sprint(tc.batch), "-workers", fmt.Sprint(tc.workers),
				"-ranks", "2", "-epochs", "3", "-seed", "42", "-no-sync", "-preload", Lib)
			cmd.Env = append(append(os.Environ(), c.Env...), "AUGUR_POLICY=clairvoyant", "AUGUR_DATASET="+ds,
				"AUGUR_TIERS="+tier+":8MiB", "AUGUR_SEED=42", "AUGUR_JOB="+job)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("augur bench: %v\n%s", err, out)
			}
			st := jobStats(t, c, job)
			t.Logf("opens %d, from tiers %d; ring dropped %d", st.Opens, st.Opens-st.Misses, st.RingDropped)
			var want []shim.StreamStats
			for r := 0; r < 2; r++ {
				want = append(want, shim.StreamStats{Stream: fmt.Sprintf("rank %d", r), Sampler: "DistributedSampler",
					Shuffle: true, Seed: 42, WorldSize: 2, Rank: r, Epoch: 2})
			}
			checkStreams(t, 0, st.Streams, want)
		})
	}
}
