package dlbench

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/augur-hpc/augur/bench/pfsemu"
	"github.com/augur-hpc/augur/shim"
	"github.com/pelletier/go-toml/v2"
)

// A job file, in the manner of fio's: [global] holds the job keys every job
// starts from, [dataset] and [pfs] are shared by all jobs, and each [[job]]
// overrides [global] keys for one run. Jobs run in file order.
//
//	[global]
//	epochs = 3
//	ranks = 2
//	workers = 2
//	batch = 16
//	compute = "20ms"
//
//	[dataset]
//	generate = "/tmp/dl"        # or: path = "/existing/dataset"
//	layout = "imagefolder"
//	count = 2000
//	size = "128KiB"
//	size_stddev = "32KiB"
//
//	[pfs]
//	enable = true               # mount the dataset through pfsemu
//	bandwidth = "150MiB/s"
//	direct_io = true
//
//	[[job]]
//	name = "plain"
//
//	[[job]]
//	name = "no-io"
//	no_io = true
type File struct {
	Dataset DatasetSpec
	PFS     PFSSpec
	Jobs    []JobSpec
}

// JobSpec holds the keys of [global] and [[job]].
type JobSpec struct {
	Name        string   `toml:"name"`
	Epochs      int      `toml:"epochs"`
	Seed        int64    `toml:"seed"`
	Sampler     string   `toml:"sampler"`
	Ranks       int      `toml:"ranks"`
	Workers     int      `toml:"workers"`
	Batch       int      `toml:"batch"`
	Prefetch    int      `toml:"prefetch"`
	Compute     string   `toml:"compute"`      // per batch: "20ms"
	ComputeRate string   `toml:"compute_rate"` // "500MB/s"
	Startup     string   `toml:"startup"`      // before the first read: "1s"
	ReadMode    string   `toml:"read_mode"`
	Order       string   `toml:"order"` // samples, groups, shards
	Group       int      `toml:"group"`
	Verify      bool     `toml:"verify"`
	NoIO        bool     `toml:"no_io"`
	NoSync      bool     `toml:"no_sync"`
	Preload     string   `toml:"preload"`
	Env         []string `toml:"env"`
}

// DatasetSpec is the [dataset] section.
type DatasetSpec struct {
	Path       string `toml:"path"`     // an existing dataset
	Generate   string `toml:"generate"` // generate one here
	Layout     string `toml:"layout"`
	Count      int    `toml:"count"`
	Size       string `toml:"size"` // mean sample size; the record size of records
	SizeStddev string `toml:"size_stddev"`
	Classes    int    `toml:"classes"`
	Files      int    `toml:"files"`
	Header     string `toml:"header"` // records: bytes before the first record of each file
	Seed       uint64 `toml:"seed"`
}

// PFSSpec is the [pfs] section: mount the dataset through the emulated
// PFS (needs root and /dev/fuse), or read the counters of one mounted
// elsewhere from its stats file.
type PFSSpec struct {
	Enable       bool   `toml:"enable"`
	Mount        string `toml:"mount"` // default: a temporary directory
	OpenLatency  string `toml:"open_latency"`
	ReadLatency  string `toml:"read_latency"`
	MetaLatency  string `toml:"meta_latency"`
	Bandwidth    string `toml:"bandwidth"`
	DirectIO     bool   `toml:"direct_io"`
	CacheTimeout string `toml:"cache_timeout"`
	StatsFile    string `toml:"stats_file"` // of an external `augur pfsemu`
}

// defaultJobSpec is what [global] starts from.
func defaultJobSpec() JobSpec {
	w := DefaultWorkload()
	return JobSpec{Name: "job", Epochs: w.Epochs, Seed: w.Seed, Sampler: w.Sampler, Ranks: w.Ranks,
		Workers: w.Workers, Batch: w.Batch, Prefetch: w.Prefetch, Compute: "0s", ReadMode: w.ReadMode}
}

func defaultDatasetSpec() DatasetSpec {
	return DatasetSpec{Layout: LayoutImageFolder, Count: 1000, Size: "128KiB", Classes: 10, Files: 4, Seed: 1}
}

// ParseFile reads a job file.
func ParseFile(name string) (*File, error) {
	src, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	f, err := parse(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

func parse(src []byte) (*File, error) {
	var raw struct {
		Global  map[string]any   `toml:"global"`
		Dataset map[string]any   `toml:"dataset"`
		PFS     map[string]any   `toml:"pfs"`
		Job     []map[string]any `toml:"job"`
	}
	dec := toml.NewDecoder(bytes.NewReader(src)).DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, tomlErr(err)
	}
	f := &File{Dataset: defaultDatasetSpec()}
	if err := redecode(raw.Dataset, &f.Dataset, "[dataset]"); err != nil {
		return nil, err
	}
	if err := redecode(raw.PFS, &f.PFS, "[pfs]"); err != nil {
		return nil, err
	}
	global := defaultJobSpec()
	if err := redecode(raw.Global, &global, "[global]"); err != nil {
		return nil, err
	}
	if len(raw.Job) == 0 {
		f.Jobs = []JobSpec{global}
	}
	for i, j := range raw.Job {
		js := global
		js.Env = append([]string(nil), global.Env...)
		if j["name"] == nil {
			js.Name = fmt.Sprintf("job%d", i+1)
		}
		if err := redecode(j, &js, fmt.Sprintf("[[job]] %d", i+1)); err != nil {
			return nil, err
		}
		f.Jobs = append(f.Jobs, js)
	}
	return f, nil
}

// redecode decodes a generic table into v strictly, on top of v's values.
func redecode(m map[string]any, v any, where string) error {
	if len(m) == 0 {
		return nil
	}
	data, err := toml.Marshal(maps.Clone(m))
	if err != nil {
		return fmt.Errorf("%s: %v", where, err)
	}
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", where, tomlErr(err))
	}
	return nil
}

func tomlErr(err error) error {
	var se *toml.StrictMissingError
	if errors.As(err, &se) && len(se.Errors) > 0 {
		return fmt.Errorf("unknown key %q", strings.Join(se.Errors[0].Key(), "."))
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		return fmt.Errorf("line %d: %s", row, de.Error())
	}
	return err
}

// Workload turns a job's keys into a Workload.
func (j *JobSpec) Workload() (Workload, error) {
	w := Workload{Epochs: j.Epochs, Seed: j.Seed, Sampler: j.Sampler, Ranks: j.Ranks, Workers: j.Workers,
		Batch: j.Batch, Prefetch: j.Prefetch, ReadMode: j.ReadMode, Order: j.Order, Group: j.Group, Verify: j.Verify,
		NoIO: j.NoIO, NoSync: j.NoSync}
	var err error
	if j.Compute != "" {
		if w.Compute, err = time.ParseDuration(j.Compute); err != nil {
			return w, fmt.Errorf("job %s: compute: %v", j.Name, err)
		}
	}
	if j.ComputeRate != "" {
		if w.ComputeRate, err = pfsemu.ParseRate(j.ComputeRate); err != nil {
			return w, fmt.Errorf("job %s: compute_rate: %v", j.Name, err)
		}
	}
	if j.Startup != "" {
		if w.Startup, err = time.ParseDuration(j.Startup); err != nil {
			return w, fmt.Errorf("job %s: startup: %v", j.Name, err)
		}
	}
	if err := w.Validate(); err != nil {
		return w, fmt.Errorf("job %s: %v", j.Name, err)
	}
	for _, e := range j.Env {
		if !strings.Contains(e, "=") {
			return w, fmt.Errorf("job %s: env %q: want KEY=VALUE", j.Name, e)
		}
	}
	return w, nil
}

// GenSpec turns [dataset] into a GenSpec.
func (d *DatasetSpec) GenSpec() (GenSpec, error) {
	g := GenSpec{Layout: d.Layout, Count: d.Count, Classes: d.Classes, Files: d.Files, Seed: d.Seed}
	var err error
	if g.Size, err = shim.ParseSize(d.Size); err != nil {
		return g, fmt.Errorf("dataset size: %v", err)
	}
	if d.SizeStddev != "" {
		if g.SizeStddev, err = shim.ParseSize(d.SizeStddev); err != nil {
			return g, fmt.Errorf("dataset size_stddev: %v", err)
		}
	}
	if d.Header != "" {
		if g.Header, err = shim.ParseSize(d.Header); err != nil {
			return g, fmt.Errorf("dataset header: %v", err)
		}
	}
	return g, g.normalize()
}

// Open generates the dataset or scans the existing one.
func (d *DatasetSpec) Open() (*Dataset, error) {
	g, err := d.GenSpec()
	if err != nil {
		return nil, err
	}
	switch {
	case d.Path != "" && d.Generate != "":
		return nil, errors.New("dataset: give path (an existing dataset) or generate (a directory to fill), not both")
	case d.Path != "":
		return Scan(d.Path, g)
	case d.Generate != "":
		return Generate(d.Generate, g)
	}
	return nil, errors.New("dataset: no path (an existing dataset) and no generate (a directory to fill)")
}

// Options turns [pfs] into pfsemu options for source mounted on mount.
func (p *PFSSpec) Options(source, mount string) (pfsemu.Options, error) {
	o := pfsemu.DefaultOptions(source, mount)
	o.DirectIO = p.DirectIO
	for _, d := range []struct {
		s   string
		dst *time.Duration
		key string
	}{{p.OpenLatency, &o.OpenLatency, "open_latency"}, {p.ReadLatency, &o.ReadLatency, "read_latency"},
		{p.MetaLatency, &o.MetaLatency, "meta_latency"}} {
		if d.s == "" {
			continue
		}
		v, err := time.ParseDuration(d.s)
		if err != nil {
			return o, fmt.Errorf("pfs %s: %v", d.key, err)
		}
		*d.dst = v
	}
	if p.CacheTimeout != "" {
		v, err := time.ParseDuration(p.CacheTimeout)
		if err != nil {
			return o, fmt.Errorf("pfs cache_timeout: %v", err)
		}
		o.CacheTimeout = &v
	}
	if p.Bandwidth != "" {
		v, err := pfsemu.ParseRate(p.Bandwidth)
		if err != nil {
			return o, fmt.Errorf("pfs bandwidth: %v", err)
		}
		o.Bandwidth = v
	}
	return o, nil
}

// Flags registers the command-line form of every key on fs. The returned
// function applies the flags that were set to f, after fs.Parse: job keys
// to every job, dataset and pfs keys to their sections.
func Flags(fs *flag.FlagSet) func(f *File) error {
	type set struct {
		name, value string
	}
	var seen []set
	type apply func(f *File, v string) error
	defs := map[string]apply{}
	str := func(name, usage string, a apply) {
		defs[name] = a
		fs.Func(name, usage, func(v string) error { seen = append(seen, set{name, v}); return nil })
	}
	boolean := func(name, usage string, a apply) {
		defs[name] = a
		fs.BoolFunc(name, usage, func(v string) error { seen = append(seen, set{name, v}); return nil })
	}
	jobs := func(fn func(j *JobSpec, v string) error) apply {
		return func(f *File, v string) error {
			for i := range f.Jobs {
				if err := fn(&f.Jobs[i], v); err != nil {
					return err
				}
			}
			return nil
		}
	}
	atoi := func(dst func(j *JobSpec) *int) apply {
		return jobs(func(j *JobSpec, v string) error {
			n, err := strconv.Atoi(v)
			*dst(j) = n
			return err
		})
	}
	boolv := func(v string) bool { b, _ := strconv.ParseBool(v); return b }

	str("name", "job name (with one job)", jobs(func(j *JobSpec, v string) error { j.Name = v; return nil }))
	str("epochs", "epochs (default 3)", atoi(func(j *JobSpec) *int { return &j.Epochs }))
	str("seed", "shuffle seed (default 42)", jobs(func(j *JobSpec, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		j.Seed = n
		return err
	}))
	str("sampler", "access order: distributed (torch DistributedSampler, default), random, sequential, numpy", jobs(func(j *JobSpec, v string) error { j.Sampler = v; return nil }))
	str("ranks", "ranks R (default 1)", atoi(func(j *JobSpec) *int { return &j.Ranks }))
	str("workers", "reader worker processes per rank W (default 2; 0: the rank reads)", atoi(func(j *JobSpec) *int { return &j.Workers }))
	str("batch", "batch size (default 32)", atoi(func(j *JobSpec) *int { return &j.Batch }))
	str("prefetch", "batches in flight per worker (default 2)", atoi(func(j *JobSpec) *int { return &j.Prefetch }))
	str("compute", "compute time per batch, like 20ms", jobs(func(j *JobSpec, v string) error { j.Compute = v; return nil }))
	str("startup", "time before the first read, doing no I/O (imports, model set-up), like 1s", jobs(func(j *JobSpec, v string) error { j.Startup = v; return nil }))
	str("compute-rate", "compute throughput, like 500MB/s (adds batch bytes / rate per batch)", jobs(func(j *JobSpec, v string) error { j.ComputeRate = v; return nil }))
	str("read-mode", "whole, pread, mmap, head or stream (default whole)", jobs(func(j *JobSpec, v string) error { j.ReadMode = v; return nil }))
	str("order", "samples inside files: samples (the sampler's order, default), groups (shuffled groups of contiguous samples) or shards (shuffled files read through by one worker each)", jobs(func(j *JobSpec, v string) error { j.Order = v; return nil }))
	str("group", "samples per group of --order groups (default 16)", atoi(func(j *JobSpec) *int { return &j.Group }))
	boolean("verify", "check every sample's bytes against the dataset's CRC-32C", jobs(func(j *JobSpec, v string) error { j.Verify = boolv(v); return nil }))
	boolean("no-io", "the compute loop alone", jobs(func(j *JobSpec, v string) error { j.NoIO = boolv(v); return nil }))
	boolean("no-sync", "ranks do not meet after every step", jobs(func(j *JobSpec, v string) error { j.NoSync = boolv(v); return nil }))
	str("preload", "run the readers with this library in LD_PRELOAD", jobs(func(j *JobSpec, v string) error { j.Preload = v; return nil }))
	str("env", "KEY=VALUE for the readers (repeatable)", jobs(func(j *JobSpec, v string) error { j.Env = append(j.Env, v); return nil }))

	str("dataset", "an existing dataset directory", func(f *File, v string) error { f.Dataset.Path = v; return nil })
	str("generate", "generate the dataset in this directory (reused when it matches)", func(f *File, v string) error { f.Dataset.Generate = v; return nil })
	str("layout", "imagefolder (default), flat, records or tar", func(f *File, v string) error { f.Dataset.Layout = v; return nil })
	str("count", "samples to generate (default 1000)", func(f *File, v string) error {
		n, err := strconv.Atoi(v)
		f.Dataset.Count = n
		return err
	})
	str("size", "mean sample size, the record size of records (default 128KiB)", func(f *File, v string) error { f.Dataset.Size = v; return nil })
	str("size-stddev", "standard deviation of sample sizes (normal distribution)", func(f *File, v string) error { f.Dataset.SizeStddev = v; return nil })
	str("classes", "class directories of an imagefolder (default 10)", func(f *File, v string) error {
		n, err := strconv.Atoi(v)
		f.Dataset.Classes = n
		return err
	})
	str("header", "records: bytes before the first record of each file, like 2148", func(f *File, v string) error { f.Dataset.Header = v; return nil })
	str("files", "files of a records or tar dataset (default 4)", func(f *File, v string) error {
		n, err := strconv.Atoi(v)
		f.Dataset.Files = n
		return err
	})

	boolean("pfs", "read the dataset through an emulated PFS (pfsemu; root and /dev/fuse)", func(f *File, v string) error { f.PFS.Enable = boolv(v); return nil })
	str("pfs-mount", "mount point of the emulated PFS (default: a temporary directory)", func(f *File, v string) error { f.PFS.Mount = v; return nil })
	str("open-latency", "emulated PFS: latency per open (default 2ms)", func(f *File, v string) error { f.PFS.OpenLatency = v; return nil })
	str("read-latency", "emulated PFS: latency per read request (default 500us)", func(f *File, v string) error { f.PFS.ReadLatency = v; return nil })
	str("meta-latency", "emulated PFS: latency per metadata request (default 1ms)", func(f *File, v string) error { f.PFS.MetaLatency = v; return nil })
	str("bandwidth", "emulated PFS: aggregate bandwidth (default 200MiB/s)", func(f *File, v string) error { f.PFS.Bandwidth = v; return nil })
	boolean("direct-io", "emulated PFS: no kernel page cache, every read reaches it", func(f *File, v string) error { f.PFS.DirectIO = boolv(v); return nil })
	str("cache-timeout", "emulated PFS: entry and attribute cache timeout", func(f *File, v string) error { f.PFS.CacheTimeout = v; return nil })
	str("pfs-stats", "stats file of an `augur pfsemu` serving the dataset: per-epoch PFS counters from it", func(f *File, v string) error { f.PFS.StatsFile = v; return nil })

	return func(f *File) error {
		for _, s := range seen {
			if err := defs[s.name](f, s.value); err != nil {
				return fmt.Errorf("--%s %s: %v", s.name, s.value, err)
			}
		}
		return nil
	}
}

// DefaultFile is the job file used when none is given: one job with
// the defaults and a dataset to be named by flags.
func DefaultFile() *File {
	return &File{Dataset: defaultDatasetSpec(), Jobs: []JobSpec{defaultJobSpec()}}
}
