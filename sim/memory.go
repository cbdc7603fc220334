package sim

import (
	"fmt"
	"math"
	"runtime"
	"slices"
)

// fitsMemory refuses, before it takes any of it, a run of cfg on n files
// whose least memory (memoryFloor) is more than avail (0: not known, not
// checked): the kernel would kill it at its peak, minutes in, without a
// word.
func fitsMemory(cfg *Config, n int, avail int64) error {
	need := memoryFloor(cfg, n)
	if avail <= 0 || need <= float64(avail) {
		return nil
	}
	return fmt.Errorf("%d nodes x %d epochs of %d files need at least %.1f GB of memory, %.1f GB is available: simulate fewer epochs or nodes",
		cfg.Nodes, cfg.Epochs, n, need/1e9, float64(avail)/1e9)
}

// memoryFloor is the least memory a run of cfg on n files holds at its
// peak (docs/sim.md, Memory): every read of the run (8 bytes each; an
// epoch is n reads at least, the ranks' shares padded), each node's list of
// the distinct files it reads (4 bytes each, 2 more for their holders and
// 2 for their owners where a policy asks, 1 per placement) and the file
// state of the policies that run at once (12 bytes a distinct file each,
// one policy per core). A node reads a share 1/nodes of each epoch's
// files, drawn anew each epoch: the files it reads at least once are
// n·nodes·(1-(1-1/nodes)^epochs) over the nodes. The setup's scratch,
// gone before the policies run, and Go's heap come on top: the peak is
// 4.70 GB at 1024 x 90 (floor 4.68 GB), the setup's 3.0 GB at 4 x 90
// (floor 1.1 GB: a node's reads numbered at once are its 29 million).
func memoryFloor(cfg *Config, n int) float64 {
	nodes, epochs := float64(cfg.Nodes), float64(cfg.Epochs)
	reads := epochs * float64(n)
	distinct := float64(n) * nodes * (1 - math.Pow(1-1/nodes, epochs))
	// Each node's lists, as newJob makes them: dataset indices, holders
	// (with peers or hvac), owners (hvac), a placement per clairvoyant
	// policy.
	has := func(p string) bool { return slices.Contains(cfg.Policies, p) }
	perFile := 4.0
	if has("clairvoyant+peers") || has("hvac") {
		perFile += 2
	}
	if has("hvac") {
		perFile += 2
	}
	if has("clairvoyant") {
		perFile++
	}
	if has("clairvoyant+peers") {
		perFile++
	}
	slabs := 0
	for _, p := range cfg.Policies {
		if !direct(p) {
			slabs++
		}
	}
	perFile += 12 * float64(min(slabs, runtime.GOMAXPROCS(0)))
	return reads*8 + distinct*perFile
}
