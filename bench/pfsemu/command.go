package pfsemu

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Exit codes of Command.
const (
	ExitOK      = 0
	ExitFailure = 1 // the mount failed or did not unmount
	ExitUsage   = 2 // bad flags
)

// Command runs the emulator as a command line program, the body of
// `augur pfsemu`. args are the arguments after the subcommand name. It
// mounts, serves until SIGINT, SIGTERM or SIGHUP (or until someone else
// unmounts the mount point), unmounts, writes the stats file a last time and
// returns an exit code: 0 on a clean run, 1 when mounting or unmounting
// failed, 2 for bad flags (with one line saying which).
func Command(args []string, stdout, stderr io.Writer) int {
	errorf := func(format string, a ...any) {
		fmt.Fprintf(stderr, "augur pfsemu: "+format+"\n", a...)
	}
	opts, readyFile, err := parseFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	if err != nil {
		errorf("%v", err)
		return ExitUsage
	}
	opts.Logf = func(format string, a ...any) { errorf(format, a...) }

	// Catch the signals before mounting, so that one arriving while the
	// mount comes up still unmounts.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	if readyFile != "" {
		os.Remove(readyFile) // a reader waiting for it must not see last run's
	}
	srv, err := Mount(opts)
	if err != nil {
		errorf("%v", err)
		return ExitFailure
	}
	fmt.Fprintf(stdout, "augur pfsemu: serving %s on %s (%s)\n", srv.opts.Source, srv.opts.Mount, describe(&srv.opts))
	if readyFile != "" {
		ready, _ := json.Marshal(map[string]any{
			"pid": os.Getpid(), "source": srv.opts.Source, "mount": srv.opts.Mount, "stats_file": srv.opts.StatsFile,
		})
		if err := writeFileAtomic(readyFile, append(ready, '\n')); err != nil {
			errorf("ready file: %v", err)
			srv.Unmount()
			return ExitFailure
		}
		defer os.Remove(readyFile)
	}

	select {
	case sig := <-sigs:
		fmt.Fprintf(stdout, "augur pfsemu: %v, unmounting %s\n", sig, srv.opts.Mount)
	case <-srv.Done():
		fmt.Fprintf(stdout, "augur pfsemu: %s was unmounted from outside\n", srv.opts.Mount)
	}
	if err := srv.Unmount(); err != nil {
		errorf("%v", err)
		return ExitFailure
	}
	st := srv.Stats()
	fmt.Fprintf(stdout, "augur pfsemu: served %d lookups, %d getattrs, %d opens, %d reads, %d bytes in %.1fs\n",
		st.Lookups, st.Getattrs, st.Opens, st.Reads, st.ReadBytes, st.UptimeSeconds)
	return ExitOK
}

// parseFlags turns the command line into Options and the ready file.
func parseFlags(args []string, stdout io.Writer) (Options, string, error) {
	fl := flag.NewFlagSet("augur pfsemu", flag.ContinueOnError)
	fl.SetOutput(io.Discard) // errors are reported in one line by Command
	o := DefaultOptions("", "")
	var (
		readyFile    string
		cacheTimeout time.Duration
		bw           = rateFlag(o.Bandwidth)
		curve        curveFlag
	)
	fl.StringVar(&o.Source, "source", "", "directory to serve (required)")
	fl.StringVar(&o.Mount, "mount", "", "existing directory to mount on (required)")
	fl.DurationVar(&o.OpenLatency, "open-latency", o.OpenLatency, "latency of every open and create")
	fl.DurationVar(&o.ReadLatency, "read-latency", o.ReadLatency, "latency of every read request")
	fl.DurationVar(&o.MetaLatency, "meta-latency", o.MetaLatency, "latency of every lookup, getattr, opendir, readdir, statfs, readlink, access, getxattr")
	fl.Var(&bw, "bandwidth", "aggregate read bandwidth shared by all clients, like 200MiB/s, 1GiB/s, 500MB/s; 0 for unlimited")
	fl.Var(&curve, "bandwidth-curve", "aggregate bandwidth by concurrent readers, like 1:200MiB/s,2:300MiB/s,8:400MiB/s (replaces --bandwidth)")
	fl.BoolVar(&o.DirectIO, "direct-io", false, "bypass the kernel page cache (FOPEN_DIRECT_IO): every read reaches the emulator; cache timeout defaults to 0")
	fl.DurationVar(&cacheTimeout, "cache-timeout", DefaultCacheTimeout, "how long the kernel may cache entries, attributes and failed lookups (0 when --direct-io is given and this is not)")
	fl.StringVar(&o.StatsFile, "stats-file", "", "write counters as JSON to this file (outside source and mount), atomically")
	fl.DurationVar(&o.StatsInterval, "stats-interval", time.Second, "how often to rewrite the stats file")
	fl.BoolVar(&o.PerFile, "per-file", false, "add per-file opens, reads and bytes to the stats")
	fl.Float64Var(&o.FailRate, "fail-rate", 0, "fraction of reads that fail with EIO, in [0,1]")
	fl.Uint64Var(&o.FaultSeed, "fault-seed", o.FaultSeed, "seed choosing which reads fail")
	fl.Int64Var(&o.StallEvery, "stall-every", 0, "stall every Nth read (with --stall)")
	fl.DurationVar(&o.Stall, "stall", 0, "how long each stalled read sleeps (with --stall-every)")
	fl.StringVar((*string)(&o.RefuseDirect), "refuse-direct", "", "act as a filesystem without O_DIRECT: fail opens with it (open) or reads through it (read) with EINVAL")
	fl.StringVar(&readyFile, "ready-file", "", "create this file (JSON: pid, source, mount) once the mount is up; removed at exit")
	fl.BoolVar(&o.Debug, "debug", false, "log every FUSE request")
	fl.Usage = func() {} // flag calls it on every error; help is printed below
	usage := func() {
		fmt.Fprintf(stdout, "usage: augur pfsemu --source DIR --mount MNT [flags]\n\n"+
			"Mount DIR on MNT through FUSE as an emulated shared parallel filesystem\n"+
			"that delays and counts every request. Serves until SIGINT, SIGTERM or SIGHUP.\n\n")
		fl.SetOutput(stdout)
		fl.PrintDefaults()
		fl.SetOutput(io.Discard)
	}

	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
		}
		return o, "", err
	}
	if fl.NArg() > 0 {
		return o, "", fmt.Errorf("unexpected argument %q (all options are flags)", fl.Arg(0))
	}
	set := map[string]bool{}
	fl.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.Source == "" || o.Mount == "" {
		return o, "", errors.New("--source DIR and --mount MNT are required")
	}
	o.Bandwidth = float64(bw)
	if set["bandwidth-curve"] {
		if set["bandwidth"] {
			return o, "", errors.New("give --bandwidth or --bandwidth-curve, not both")
		}
		o.BandwidthCurve, o.Bandwidth = curve, 0
	}
	if set["cache-timeout"] {
		o.CacheTimeout = &cacheTimeout
	}
	if set["stall"] != set["stall-every"] {
		return o, "", errors.New("--stall-every N and --stall D go together")
	}
	if o.StatsInterval <= 0 {
		return o, "", errors.New("--stats-interval must be positive")
	}
	v := o // validate cleans paths; report its complaints as usage errors
	if err := v.validate(); err != nil {
		return o, "", err
	}
	if readyFile != "" {
		readyFile = resolvePath(readyFile)
		if err := v.outside("--ready-file", readyFile); err != nil {
			return o, "", err
		}
	}
	return v, readyFile, nil
}

// rateFlag is a flag.Value holding bytes per second.
type rateFlag float64

func (r *rateFlag) String() string { return FormatRate(float64(*r)) }
func (r *rateFlag) Set(s string) error {
	v, err := ParseRate(s)
	*r = rateFlag(v)
	return err
}

// curveFlag is a flag.Value holding a bandwidth curve.
type curveFlag []CurvePoint

func (c *curveFlag) String() string {
	var parts []string
	for _, p := range *c {
		parts = append(parts, fmt.Sprintf("%d:%s", p.Readers, FormatRate(p.Bandwidth)))
	}
	return strings.Join(parts, ",")
}
func (c *curveFlag) Set(s string) error {
	v, err := ParseCurve(s)
	*c = v
	return err
}

// describe summarises the model in one line.
func describe(o *Options) string {
	bw := FormatRate(o.Bandwidth)
	if len(o.BandwidthCurve) > 0 {
		c := curveFlag(o.BandwidthCurve)
		bw = "curve " + c.String()
	}
	cache := "kernel page cache on"
	if o.DirectIO {
		cache = "direct I/O"
	}
	s := fmt.Sprintf("open %v, read %v, meta %v, bandwidth %s, %s, cache timeout %v",
		o.OpenLatency, o.ReadLatency, o.MetaLatency, bw, cache, o.cacheTimeout())
	if o.FailRate > 0 {
		s += fmt.Sprintf(", fail rate %g (seed %d)", o.FailRate, o.FaultSeed)
	}
	if o.StallEvery > 0 {
		s += fmt.Sprintf(", stall %v every %d reads", o.Stall, o.StallEvery)
	}
	if o.RefuseDirect != "" {
		s += fmt.Sprintf(", O_DIRECT refused at %s", o.RefuseDirect)
	}
	return s
}
