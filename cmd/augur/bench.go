package main

import (
	"os"

	"github.com/augur-hpc/augur/bench/dlbench"
)

// cmdBench runs the deep-learning I/O benchmark (see docs/bench.md).
func cmdBench(args []string) int {
	return dlbench.Command(args, os.Stdout, os.Stderr)
}
