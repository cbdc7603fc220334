package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/augur-hpc/augur/shim"
)

func cmdCheck(args []string) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	var jf jobFlags
	jf.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	jf.export()
	cfg, err := shim.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	status := 0
	src := "built-in defaults and environment"
	if cfg.File != "" {
		src = cfg.File
	}
	fmt.Printf("configuration from %s\n", src)
	fmt.Printf("policy %s, seed %d\n", cfg.Policy, cfg.Seed)
	if len(cfg.Roots) == 0 {
		fmt.Println("dataset: none (nothing will be accelerated)")
	}
	for _, r := range cfg.Roots {
		info, err := os.Stat(r)
		switch {
		case err != nil:
			fmt.Fprintf(os.Stderr, "dataset root %s: %v\n", r, err)
			status = 1
		case !info.IsDir():
			fmt.Fprintf(os.Stderr, "dataset root %s: not a directory\n", r)
			status = 1
		default:
			fmt.Printf("dataset root %s\n", r)
		}
	}
	for i, t := range cfg.Tiers {
		fmt.Printf("tier %d: %s, %s, %d copy threads\n", i, t.Path, shim.FormatSize(t.Capacity), t.Threads)
	}
	// Every problem fails the check, warnings too: a capacity the tier's
	// filesystem cannot hold is a mistake, even if a job works around it.
	for _, p := range cfg.Problems {
		fmt.Fprintln(os.Stderr, p)
		status = 1
	}
	if len(cfg.Tiers) == 0 {
		fmt.Fprintln(os.Stderr, "no tier can be used: nothing will be accelerated")
		status = 1
	}
	if status == 0 {
		fmt.Println("ok")
	}
	return status
}
