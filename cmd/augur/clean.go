package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/augur-hpc/augur/shim"
	"github.com/augur-hpc/augur/tiering"
)

func cmdClean(args []string) int {
	fs := flag.NewFlagSet("clean", flag.ContinueOnError)
	var jf jobFlags
	jf.register(fs)
	jobs := fs.Bool("jobs", false, "also remove the counters of jobs that have ended")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := jf.load()
	if err != nil {
		return fail("%v", err)
	}
	status := 0
	for _, t := range cfg.Tiers {
		if _, err := os.Stat(t.Path); os.IsNotExist(err) {
			continue
		}
		lock, err := tiering.TryLock(t.Path)
		if err != nil {
			status = fail("clean: %v; not cleaned", err)
			continue
		}
		u := tiering.UsageOf(t)
		err = tiering.Clear(t)
		lock.Unlock()
		if err != nil {
			status = fail("clean: %v", err)
			continue
		}
		fmt.Printf("%s: removed %d copies (%s)\n", t.Path, u.Files, shim.FormatSize(u.Bytes))
	}
	if *jobs {
		segs, _ := shim.Segments()
		for _, s := range segs {
			if seg, err := shim.OpenSegment(s); err == nil && seg.Stats().LeaderAlive {
				continue
			}
			os.Remove(s)
			os.Remove(strings.TrimSuffix(s, filepath.Ext(s)) + ".leader")
		}
	}
	return status
}
