// Command augur runs training jobs under augur's I/O accelerator and
// inspects and manages its node-local tiers.
//
//	augur run [flags] -- CMD ARGS...   run CMD with the shim preloaded
//	augur warm                          copy the dataset into the tiers
//	augur stat [--json] [--watch]       counters of the running or last job
//	augur check [--config F]            validate the configuration
//	augur clean [--jobs]                remove tier copies and ended jobs' state
//	augur pfsemu --source D --mount M   emulate a parallel filesystem
//	augur sim [--nodes N] ...           simulate the job's I/O at scale
package main

import (
	"fmt"
	"os"
)

// commands maps a subcommand to its implementation, which returns the
// process exit status.
var commands = map[string]func(args []string) int{
	"run":    cmdRun,
	"warm":   cmdWarm,
	"stat":   cmdStat,
	"check":  cmdCheck,
	"clean":  cmdClean,
	"pfsemu": cmdPfsemu,
	"plan":   cmdPlan,
	"bench":  cmdBench,
	"sim":    cmdSim,
}

const usage = `usage: augur <command> [flags]

commands:
  run [--dataset D]... [--tier DIR:SIZE]... [--seed S] [--policy P] [--config F] -- CMD ARGS...
        run CMD with the shim preloaded; exits with CMD's status (as a shell: 127 when CMD is not found, 126 when it cannot run)
  warm  [--quiet]      copy dataset files into the tiers (fastest first, within capacity)
  stat  [--json] [--watch] [--job ID]   show the counters of the running or last job
  check [--config F]   validate the configuration
  clean [--jobs]       remove all tier copies and the state of ended jobs in /dev/shm
        (--jobs: only the jobs' state)
  plan  [--order [--rank R] [--epoch E]] [--json] [--quiet]   what the clairvoyant policy will
        place and prefetch; --order prints a rank's predicted access sequence
  pfsemu --source DIR --mount MNT [...]   emulate a shared parallel filesystem (FUSE)
  bench [flags] [JOB.toml]   deep-learning I/O benchmark (ranks x forked C readers; see docs/bench.md)
  sim   [--config F] [--nodes N] [--epochs E] [--policy P]... [--json F] [--png F]
        simulate the job's I/O time under each policy, 4 to 1024 nodes (see docs/sim.md)

warm and plan show their progress on stderr unless --quiet. Configuration comes
from AUGUR_CONFIG (a TOML file) and the AUGUR_* variables; see docs/configuration.md.
`

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		fmt.Fprint(os.Stderr, usage)
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "augur: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	os.Exit(cmd(os.Args[2:]))
}

// fail prints one error line and returns the exit status for it.
func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "augur: "+format+"\n", args...)
	return 1
}
