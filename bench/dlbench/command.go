package dlbench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/augur-hpc/augur/bench/pfsemu"
)

// Command is `augur bench`: args are the arguments after the subcommand.
// It returns the exit status: 0, 1 when a job failed, 2 for bad usage.
func Command(args []string, stdout, stderr io.Writer) int {
	errorf := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "augur bench: "+format+"\n", a...)
		return 1
	}
	fs := flag.NewFlagSet("augur bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	apply := Flags(fs)
	jsonOut := fs.String("json", "", "write the results as JSON to this file (- for standard output, then no table)")
	reader := fs.String("reader", "", "the dlreader binary (default: beside augur, or built from bench/c/dlreader)")
	drop := fs.Bool("drop-caches", false, "drop the page cache before every job (root)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: augur bench [flags] [JOB.toml]\n\n"+
			"A deep-learning I/O benchmark in fio's manner: R ranks x W forked reader\n"+
			"processes read a dataset in PyTorch DistributedSampler order through libc,\n"+
			"batch by batch, while a compute loop waits for them. See docs/bench.md.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(stderr, "augur bench: one job file at most (got %q)\n", fs.Args())
		return 2
	}
	file := DefaultFile()
	if fs.NArg() == 1 {
		var err error
		if file, err = ParseFile(fs.Arg(0)); err != nil {
			fmt.Fprintf(stderr, "augur bench: %v\n", err)
			return 2
		}
	}
	if err := apply(file); err != nil {
		fmt.Fprintf(stderr, "augur bench: %v\n", err)
		return 2
	}
	works := make([]Workload, len(file.Jobs))
	for i := range file.Jobs {
		w, err := file.Jobs[i].Workload()
		if err != nil {
			fmt.Fprintf(stderr, "augur bench: %v\n", err)
			return 2
		}
		works[i] = w
	}
	bin, err := FindReader(*reader)
	if err != nil {
		return errorf("%v", err)
	}
	ds, err := file.Dataset.Open()
	if err != nil {
		return errorf("%v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	x := Exec{Reader: bin}
	switch {
	case file.PFS.Enable && file.PFS.StatsFile != "":
		return errorf("pfs: enable (mount one here) and stats_file (one mounted elsewhere) exclude each other")
	case file.PFS.Enable:
		mnt := file.PFS.Mount
		if mnt == "" {
			d, err := os.MkdirTemp("", "augur-bench-pfs-")
			if err != nil {
				return errorf("%v", err)
			}
			defer os.Remove(d)
			mnt = d
		}
		opts, err := file.PFS.Options(ds.Root, mnt)
		if err != nil {
			return errorf("%v", err)
		}
		opts.Logf = func(format string, a ...any) { fmt.Fprintf(stderr, "pfsemu: "+format+"\n", a...) }
		srv, err := pfsemu.Mount(opts)
		if err != nil {
			return errorf("pfs: %v (the emulated PFS needs root and /dev/fuse)", err)
		}
		defer srv.Unmount()
		x.Root = mnt
		x.Counters = func() (pfsemu.Stats, error) { return srv.Stats(), nil }
	case file.PFS.StatsFile != "":
		x.Counters = StatsFileCounters(file.PFS.StatsFile, 3*time.Second)
	}

	prog := NewProgressLine(os.Stderr)
	var results []*Result
	status := 0
	for i, js := range file.Jobs {
		if *drop {
			if err := DropCaches(); err != nil {
				return errorf("%v", err)
			}
		}
		xj := x
		xj.Preload, xj.Env = js.Preload, js.Env
		xj.Progress = prog.Func(js.Name)
		res, err := Run(ctx, js.Name, ds, works[i], xj)
		prog.Clear()
		if err != nil {
			errorf("job %s: %v", js.Name, err)
			status = 1
			if res == nil || ctx.Err() != nil {
				break
			}
		}
		results = append(results, res)
		if *jsonOut != "-" {
			WriteTable(stdout, res)
			fmt.Fprintln(stdout)
		}
	}
	if *jsonOut != "" {
		data, _ := json.MarshalIndent(map[string]any{"dataset": ds.Describe(), "jobs": results}, "", "  ")
		data = append(data, '\n')
		if *jsonOut == "-" {
			stdout.Write(data)
		} else if err := os.WriteFile(*jsonOut, data, 0o644); err != nil {
			return errorf("%v", err)
		}
	}
	return status
}

// DropCaches writes back dirty pages and drops the kernel's page, dentry
// and inode caches, so the next run starts cold. It needs root.
func DropCaches() error {
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200); err != nil {
		return fmt.Errorf("dropping the page cache (needs root): %w", err)
	}
	return nil
}
