package sim

import (
	"runtime"
	"strings"
	"testing"
)

// TestMemoryFloorIsTheJobsArrays: memoryFloor is what a run's largest
// arrays take, counted on a job built: every read, each node's lists and
// the file state of the policies running at once, within 2% (it counts
// the expected number of distinct files, not the drawn one: 0.1-0.5%
// more here; the run's peak is a fifth above its arrays).
func TestMemoryFloorIsTheJobsArrays(t *testing.T) {
	for _, policies := range [][]string{Policies, {"pfs"}, {"hvac"}, {"clairvoyant+peers", "staging"}} {
		c := small()
		c.Nodes, c.RanksPerNode, c.Epochs, c.Policies = 6, 1, 5, policies
		j := buildJob(t, c)
		lists, distinct := 0, 0
		for _, no := range j.nodes {
			distinct += len(no.files)
			lists += 4*len(no.files) + 2*len(no.held) + 2*len(no.owner) + len(no.tier) + len(no.tierPeers)
		}
		slabs := 0
		for _, p := range policies {
			if p != "pfs" && p != "perfect" {
				slabs++
			}
		}
		arrays := float64(8*len(j.reads) + lists + 12*min(slabs, runtime.GOMAXPROCS(0))*distinct)
		if floor := memoryFloor(c, len(j.ds.sizes)); floor > arrays*1.02 || floor < arrays*0.98 {
			t.Errorf("%v: floor %.0f bytes, the job's arrays %.0f", policies, floor, arrays)
		}
	}
}

// TestRunRefusesWhatCannotFit: a run whose floor is more than the memory
// available is refused before it allocates any of it, with the figures;
// one that fits, or where the memory is not known, is not.
func TestRunRefusesWhatCannotFit(t *testing.T) {
	c := Lassen()
	c.Nodes, c.Epochs = 1024, 1000
	need := memoryFloor(c, c.Dataset.Count)
	if err := fitsMemory(c, c.Dataset.Count, int64(need)-1); err == nil || !strings.Contains(err.Error(), "1024 nodes x 1000 epochs") {
		t.Errorf("a GB short: %v", err)
	}
	if err := fitsMemory(c, c.Dataset.Count, int64(need)+1); err != nil {
		t.Errorf("room for it: %v", err)
	}
	if err := fitsMemory(c, c.Dataset.Count, 0); err != nil {
		t.Errorf("memory not known: %v", err)
	}
	// Some ten terabytes: more than any machine this runs on.
	c.Nodes, c.Epochs = 4, 1_000_000
	if _, err := Run(c); err == nil || !strings.Contains(err.Error(), "memory") {
		t.Errorf("4 nodes x a million epochs: %v", err)
	}
}
