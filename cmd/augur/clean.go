package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/augur-hpc/augur/shim"
	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

func cmdClean(args []string) int {
	fs := flag.NewFlagSet("clean", flag.ContinueOnError)
	var jf jobFlags
	jf.register(fs)
	jobsOnly := fs.Bool("jobs", false, "remove only the state of ended jobs, not the tier copies")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	status := 0
	if !*jobsOnly {
		cfg, err := jf.load()
		if err != nil {
			return fail("%v", err)
		}
		status = cleanTiers(cfg.Tiers)
		for _, p := range cfg.Problems {
			if !p.Warning {
				status = 1 // a tier not used is a tier not cleaned
			}
		}
	}
	n := cleanJobs()
	fmt.Printf("removed the state of %d ended jobs from %s\n", n, shim.SegmentDir)
	return status
}

// cleanTiers removes every copy from the tiers; a tier that is not the
// user's own, or that a running job writes, is left alone.
func cleanTiers(tiers []tiering.Tier) int {
	status := 0
	for _, t := range tiers {
		if _, err := os.Lstat(t.Path); os.IsNotExist(err) {
			continue
		}
		tree, err := tiering.Open(t)
		if err != nil {
			status = fail("clean: %v; not cleaned", err)
			continue
		}
		lock, err := tree.TryLock()
		if err != nil {
			tree.Close()
			status = fail("clean: %v; not cleaned", err)
			continue
		}
		u, bu := tree.Usage(), tree.BlocksUsage()
		err = tree.Clear()
		lock.Unlock()
		tree.Close()
		if err != nil {
			status = fail("clean: %v", err)
			continue
		}
		fmt.Printf("%s: removed %d copies (%s) and the blocks of %d large files (%s)\n",
			t.Path, u.Files, shim.FormatSize(u.Bytes), bu.Files, shim.FormatSize(bu.Bytes))
	}
	return status
}

// cleanJobs removes the state of this user's ended jobs, and the files an
// older augur kept there (/dev/shm/augur-<job>.seg and .leader), and
// returns how many jobs' state it removed.
func cleanJobs() int {
	n := 0
	for _, job := range shim.Jobs() {
		if !shim.JobAlive(job) && shim.RemoveJob(job) == nil {
			n++
		}
	}
	for _, pattern := range []string{"augur-*.seg", "augur-*.leader"} {
		old, _ := filepath.Glob(filepath.Join(shim.SegmentDir, pattern))
		for _, p := range old {
			var st unix.Stat_t
			if unix.Lstat(p, &st) == nil && tiering.Untrusted(p, &st, unix.S_IFREG) == nil {
				os.Remove(p)
			}
		}
	}
	return n
}
