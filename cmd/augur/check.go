package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/augur-hpc/augur/shim"
	"github.com/augur-hpc/augur/tiering"
)

func cmdCheck(args []string) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	var jf jobFlags
	jf.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := jf.load()
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
		tree, err := tiering.Open(t)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			status = 1
			continue
		}
		tree.Close()
	}
	if status == 0 {
		fmt.Println("ok")
	}
	return status
}
