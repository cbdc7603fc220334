package main

import (
	"os"

	"github.com/augur-hpc/augur/bench/pfsemu"
)

// cmdPfsemu runs the emulated parallel filesystem (see docs/pfsemu.md).
func cmdPfsemu(args []string) int {
	return pfsemu.Command(args, os.Stdout, os.Stderr)
}
