package main

import (
	"os"
	"time"

	"github.com/augur-hpc/augur/progress"
)

// startProgress reports a long phase of a command on stderr (stdout is
// the command's result): one redrawn line on a terminal, a line every
// 5 s otherwise, nothing with --quiet. AUGUR_PROGRESS_INTERVAL (a Go
// duration such as 100us) sets the interval, for tests.
func startProgress(label string, quiet bool, opt progress.Options) *progress.Reporter {
	def := progress.For(os.Stderr)
	opt.Terminal, opt.Interval, opt.Quiet = def.Terminal, def.Interval, quiet
	if d, err := time.ParseDuration(os.Getenv("AUGUR_PROGRESS_INTERVAL")); err == nil && d > 0 {
		opt.Interval = d
	}
	return progress.Start(os.Stderr, label, opt)
}
