package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/augur-hpc/augur/peers"
	"github.com/augur-hpc/augur/placement"
	"github.com/augur-hpc/augur/progress"
	"github.com/augur-hpc/augur/shim"
)

// cmdPlan prints, before a job, what the clairvoyant policy will do,
// from the same code the leader runs: placement.Predict and Prediction.Place.
func cmdPlan(args []string) int {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	var jf jobFlags
	jf.register(fs)
	order := fs.Bool("order", false, "print the predicted access sequence, one path per line")
	rank := fs.Int("rank", 0, "global rank for --order")
	epoch := fs.Int("epoch", 0, "epoch for --order (the first is 0, as sampler.set_epoch)")
	asJSON := fs.Bool("json", false, "print the plan as JSON")
	nodes := fs.Int("nodes", 1, "plan a job of this many nodes with peers: each node's holdings and the shared filesystem's bytes with and without peers")
	quiet := fs.Bool("quiet", false, "do not show progress on stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := jf.load()
	if err != nil {
		return fail("%v", err)
	}
	debug.SetGCPercent(shim.PlanGCPercent) // a million files' plan: see there
	if *order {
		// --order answers for any rank, not only this node's.
		cfg.Access.NodeRank, cfg.Access.RanksPerNode = *rank, 1
		if *rank >= cfg.Access.WorldSize || *rank < 0 {
			return fail("plan: rank %d outside world size %d", *rank, cfg.Access.WorldSize)
		}
	}
	prog := startProgress("plan: listing the dataset", *quiet, progress.Options{Unit: "entries"})
	pred, err := placement.Predict(cfg.Roots, cfg.Seed, cfg.Access, counter(prog))
	prog.Stop()
	if err != nil {
		return fail("plan: %v", err)
	}
	if pred.DS == nil { // the leader learns such datasets from the job's opens
		return fail("plan: %s is not one dataset (%v); the clairvoyant policy learns which directories below it the job reads, and in what order, from its opens", pred.Root, pred.Why)
	}
	if *order {
		if *epoch < 0 {
			return fail("plan: epoch must not be negative")
		}
		w := bufioWriter()
		for _, idx := range pred.Order(*rank, *epoch) {
			fmt.Fprintln(w, pred.Path(idx))
		}
		w.Flush()
		return 0
	}
	prog = startProgress("plan: stat'ing the files", *quiet, progress.Options{})
	prog.Expect(int64(pred.Len()), 0)
	prog.TotalKnown()
	sizes := pred.Sizes(counter(prog))
	prog.Stop()
	if *nodes > 1 {
		return printJobPlan(cfg, pred, sizes, *nodes, *asJSON)
	}
	return printPlan(cfg, pred, sizes, *asJSON)
}

// jobPlanReport is what augur plan --nodes prints.
type jobPlanReport struct {
	Files   int                  `json:"files"`
	Bytes   int64                `json:"bytes"`
	Horizon int                  `json:"epochs_considered"`
	Stage   int64                `json:"staging_bytes_per_node"`
	Nodes   []jobPlanNode        `json:"nodes"`
	Epochs  []placement.JobEpoch `json:"epochs"`
	// Model is how each leader will choose between a peer and the shared
	// filesystem for a file (augur stat shows it measured).
	Model peers.ModelConfig `json:"model"`
}

type jobPlanNode struct {
	Node      int        `json:"node"`
	Ranks     []int      `json:"ranks"`
	Holds     int        `json:"files_read_first"`
	HoldBytes int64      `json:"bytes_read_first"`
	Tiers     []planTier `json:"tiers"`
}

// printJobPlan prints how the leaders of a job of nodes nodes place the
// dataset and what each epoch reads from where.
func printJobPlan(cfg *shim.Config, pred *placement.Prediction, sizes []int64, nodes int, asJSON bool) int {
	caps := tierCaps(cfg)
	jp, err := pred.PlaceNodes(cfg.Access, sizes, caps, nodes)
	if err != nil {
		return fail("plan: %v", err)
	}
	rep := jobPlanReport{Files: pred.Len(), Horizon: jp.Horizon, Stage: jp.Stage, Epochs: jp.Epochs,
		Model: peers.ModelConfig{PFSWeight: cfg.Peers.PFSWeight}.WithDefaults()}
	for _, s := range sizes {
		rep.Bytes += max(s, 0)
	}
	for _, np := range jp.Nodes {
		n := jobPlanNode{Node: np.Node, Ranks: np.Ranks, Holds: np.Holds, HoldBytes: np.HoldBytes}
		for i, t := range cfg.Tiers {
			c := caps[i]
			if i == 0 {
				c -= jp.Stage
			}
			n.Tiers = append(n.Tiers, planTier{t.Path, c, np.Files[i], np.Bytes[i]})
		}
		rep.Nodes = append(rep.Nodes, n)
	}
	if asJSON {
		return printJSON(rep)
	}
	fmt.Printf("dataset %s: %d files, %s; %d nodes of %d ranks; placement over %d epochs, the files a node reads first in the job before any other\n",
		pred.Root, rep.Files, shim.FormatSize(rep.Bytes), nodes, cfg.Access.WorldSize/nodes, rep.Horizon)
	for _, n := range rep.Nodes {
		fmt.Printf("node %d (ranks %d-%d): reads %d files (%s) first in the job;", n.Node, n.Ranks[0], n.Ranks[len(n.Ranks)-1],
			n.Holds, shim.FormatSize(n.HoldBytes))
		for _, t := range n.Tiers {
			fmt.Printf("  %s %d files %s of %s", t.Path, t.Files, shim.FormatSize(t.Bytes), shim.FormatSize(t.Capacity))
		}
		fmt.Println()
	}
	fmt.Printf("%-6s %22s %22s %16s\n", "epoch", "pfs without peers", "pfs with peers", "from peers")
	for _, e := range rep.Epochs {
		fmt.Printf("%-6d %22s %22s %16s\n", e.Epoch, shim.FormatSize(e.PFSBytes), shim.FormatSize(e.PFSBytesPeers), shim.FormatSize(e.PeerBytes))
	}
	m := rep.Model
	fmt.Printf("a copy goes to the source expected to deliver it first (augur stat shows the rates measured): before measuring, "+
		"the shared filesystem at %s/s and a peer at %s/s; the filesystem's time x%g (pfs_weight); a transfer weighs %g in the average; "+
		"an idle source's rate fades back to its prior over %v\n",
		shim.FormatSize(int64(m.PFSPrior)), shim.FormatSize(int64(m.PeerPrior)), m.PFSWeight, m.Weight, m.Forget)
	return 0
}

// counter is a hook of placement.Predict and Prediction.Sizes that counts on r.
func counter(r *progress.Reporter) func(n int) {
	return func(n int) { r.Add(int64(n), 0) }
}

// planReport is what augur plan prints.
type planReport struct {
	Files         int         `json:"files"`
	Bytes         int64       `json:"bytes"`
	Ranks         []int       `json:"node_ranks"`
	ReadsPerEpoch int         `json:"node_reads_per_epoch"`
	Horizon       int         `json:"epochs_considered"`
	Tiers         []planTier  `json:"tiers"`
	Stage         int64       `json:"staging_bytes"`
	Epochs        []planEpoch `json:"epochs"`
}

type planTier struct {
	Path     string `json:"path"`
	Capacity int64  `json:"capacity"`
	Files    int    `json:"files"`
	Bytes    int64  `json:"bytes"`
}

type planEpoch struct {
	Epoch    int   `json:"epoch"`
	TierHits int   `json:"expected_tier_hits"`
	PFSReads int   `json:"expected_pfs_reads"`
	PFSBytes int64 `json:"expected_pfs_bytes"`
}

func printPlan(cfg *shim.Config, pred *placement.Prediction, sizes []int64, asJSON bool) int {
	caps := tierCaps(cfg)
	pl, stage, horizon := pred.PlaceFor(cfg.Access, sizes, caps)
	rep := planReport{Files: pred.Len(), Ranks: pred.Ranks, ReadsPerEpoch: pl.Reads,
		Horizon: horizon, Stage: stage}
	for _, s := range sizes {
		rep.Bytes += max(s, 0)
	}
	for i, t := range cfg.Tiers {
		rep.Tiers = append(rep.Tiers, planTier{t.Path, caps[i], pl.Files[i], pl.Bytes[i]})
	}
	// Epoch 1 reads every file from the shared filesystem once (the
	// prefetcher does); later epochs read only the files no tier holds,
	// which the prefetcher stages.
	for e := 0; e < min(horizon, 3); e++ {
		pe := planEpoch{Epoch: e + 1}
		seen := make([]uint64, (pred.Len()+63)/64) // a bit per file: a million files' plan
		for _, r := range pred.Ranks {
			o := pred.Reads(r, e)
			for k := range o.Len() {
				idx := o.At(k)
				if bit := uint64(1) << (idx % 64); (e == 0 || pl.Tier[idx] < 0) && seen[idx/64]&bit == 0 {
					pe.PFSReads++
					pe.PFSBytes += max(sizes[idx], 0)
					seen[idx/64] |= bit
				}
				if e > 0 && pl.Tier[idx] >= 0 {
					pe.TierHits++
				}
			}
		}
		rep.Epochs = append(rep.Epochs, pe)
	}
	if asJSON {
		return printJSON(rep)
	}
	fmt.Printf("dataset %s: %d files, %s; this node's ranks %v read %d files per epoch\n",
		pred.Root, rep.Files, shim.FormatSize(rep.Bytes), rep.Ranks, rep.ReadsPerEpoch)
	fmt.Printf("placement over %d epochs (most read first, then first read):\n", horizon)
	for _, t := range rep.Tiers {
		fmt.Printf("  %-36s %8d files %12s of %s\n", t.Path, t.Files, shim.FormatSize(t.Bytes), shim.FormatSize(t.Capacity))
	}
	fmt.Printf("  staging in the first tier: %s (files read once per epoch, dropped after use)\n", shim.FormatSize(stage))
	for _, e := range rep.Epochs {
		if e.Epoch == 1 {
			fmt.Printf("epoch 1: the prefetcher reads %d files (%s) from the shared filesystem, in access order\n",
				e.PFSReads, shim.FormatSize(e.PFSBytes))
			continue
		}
		fmt.Printf("epoch %d: expected %d opens from tiers; %d files (%s) staged from the shared filesystem\n",
			e.Epoch, e.TierHits, e.PFSReads, shim.FormatSize(e.PFSBytes))
	}
	return 0
}

// tierCaps is the configured tiers' capacities.
func tierCaps(cfg *shim.Config) []int64 {
	caps := make([]int64, len(cfg.Tiers))
	for i, t := range cfg.Tiers {
		caps[i] = t.Capacity
	}
	return caps
}

// printJSON prints a plan as indented JSON.
func printJSON(v any) int {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.Encode(v)
	return 0
}
