package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/augur-hpc/augur/progress"
	"github.com/augur-hpc/augur/shim"
	"github.com/augur-hpc/augur/tiering"
)

var _ tiering.WarmProgress = (*progress.Reporter)(nil)

func cmdWarm(args []string) int {
	fs := flag.NewFlagSet("warm", flag.ContinueOnError)
	var jf jobFlags
	jf.register(fs)
	quiet := fs.Bool("quiet", false, "do not show progress on stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := jf.load()
	if err != nil {
		return fail("%v", err)
	}
	if len(cfg.Roots) == 0 {
		return fail("warm: no dataset root (set --dataset, AUGUR_DATASET or [dataset] roots)")
	}
	start := time.Now()
	var usage []tiering.Usage
	var trees []*tiering.Tree
	for _, t := range cfg.Tiers {
		tree, err := tiering.Open(t)
		if err != nil {
			fail("warm: %v; tier not used", err)
			continue
		}
		defer tree.Close()
		lock, err := tree.TryLock()
		if err != nil {
			return fail("warm: %v; a running job writes this tier", err)
		}
		defer lock.Unlock()
		rep := tree.Validate()
		if rep.Stale > 0 {
			fmt.Printf("%s: removed %d stale copies\n", t.Path, rep.Stale)
		}
		usage = append(usage, rep.Usage)
		trees = append(trees, tree)
	}
	if len(trees) == 0 {
		return fail("warm: no tier can be used")
	}
	prog := startProgress("warm", *quiet, progress.Options{Bytes: true})
	res := tiering.Warm(trees, usage, cfg.Roots, prog)
	prog.Stop()
	for i, t := range trees {
		fmt.Printf("%s: copied %d files (%s); holds %s of %s\n", t.Path,
			res.Copied[i].Files, shim.FormatSize(res.Copied[i].Bytes),
			shim.FormatSize(usage[i].Bytes+res.Copied[i].Bytes), shim.FormatSize(t.Capacity))
	}
	fmt.Printf("%d files already warm, %d fit no tier, %.1fs\n", res.Present, res.Unfit,
		time.Since(start).Seconds())
	for _, e := range res.Errors {
		fmt.Printf("error: %v\n", e)
	}
	if len(res.Errors) > 0 {
		return 1
	}
	return 0
}
