package sim

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/augur-hpc/augur/placement"
	"github.com/pelletier/go-toml/v2"
)

// Config is one simulated job: the cluster, the dataset, the training
// loop and the policies to compare. Sizes are bytes, rates bytes per
// second, times seconds. Defaults (Lassen) are NoPFS's parameters of its
// section 6.
type Config struct {
	Nodes        int
	RanksPerNode int
	Epochs       int
	Seed         int64
	Dataset      Dataset
	Loop         Loop
	Tiers        []Tier // each node's, fastest first
	Prefetch     Prefetch
	Reactive     Reactive
	PFS          PFS
	Net          Net
	Policies     []string
}

// Dataset is a synthetic dataset of Count files whose sizes are drawn
// from a log-normal distribution of mean Mean and deviation Sigma, or the
// files of an existing directory as an ImageFolder lists them (Dir).
type Dataset struct {
	Count       int
	Mean, Sigma float64
	Dir         string
}

// Loop is each rank's training loop: a DataLoader of Workers processes,
// each reading a whole batch (Batch files, one after the other) and
// preprocessing it at PreprocessRate, at most Prefetch batches per worker
// in flight; the rank computes on each batch for Compute plus its bytes at
// ComputeRate, then waits for every rank of the job (DDP's all-reduce).
type Loop struct {
	Batch, Workers, Prefetch int
	Compute                  float64
	ComputeRate              float64 // 0: none
	PreprocessRate           float64 // 0: none
}

// Tier is one storage class of a node.
type Tier struct {
	Capacity  int64
	Bandwidth float64 // one reader's
	Latency   float64 // per file read
	Threads   int     // copies into it at once
}

// Prefetch is augur's copy pool: the staging budget (0: an eighth of
// the first tier, as augur's default), files prefetched ahead of each
// rank, and copies in flight per node.
type Prefetch struct {
	Stage     int64
	Lookahead int
	Pending   int
}

// Reactive is augur's reactive policy's rule (wait_max, shim's
// Config.WaitMax): the first reader of a file of at most WaitMax bytes
// asks its node's leader for a copy and waits for it, then reads the
// copy; a larger file is read from the original while the queue copies
// it. 0: no reader waits (MONARCH's own behaviour: the reader reads the
// original while the file is copied).
type Reactive struct {
	WaitMax int64
}

// PFS is the shared filesystem: an aggregate read throughput that
// depends on the number of readers with a read in flight (NoPFS's t(γ),
// interpolated, the last point held beyond), a latency per file (lookup
// and open) and per request of RequestSize bytes. ClientCache says a copy
// made while a reader reads the file rides the pages the reader brought
// in (a client page cache): the PFS serves the file once. EndRequest says
// the readers read a file until a read returns 0, which a client without
// a page cache sends to the PFS as one request more (see endRequest).
type PFS struct {
	Curve       []CurvePoint
	Latency     float64
	ReadLatency float64
	RequestSize int64
	ClientCache bool
	EndRequest  bool
}

// CurvePoint is t(γ): Rate bytes/s in all with Readers readers.
type CurvePoint struct {
	Readers int
	Rate    float64
}

// Net is each node's link to the others, both ways.
type Net struct {
	Bandwidth float64
	Latency   float64
}

// Policies the simulator knows, in the order tables list them.
var Policies = []string{"pfs", "perfect", "staging", "reactive", "hvac", "clairvoyant", "clairvoyant+peers"}

const (
	kB = 1e3
	mB = 1e6
	gB = 1e9
)

// Lassen is NoPFS's cluster (its section 6): 4 nodes of one worker,
// ImageNet-1k, batch 32, compute 64 MB/s, preprocessing 200 MB/s, a 5 GB
// staging buffer in 120 GB of RAM and 900 GB of SSD with 8, 4 and 2
// prefetch threads at 111, 85 and 4 GB/s, 24 GB/s between nodes, and
// GPFS at t(1..8) = 330, 730, 1540, 2870 MB/s. The staging buffer is the
// RAM tier's staging budget in augur, so RAM's copies get the staging
// buffer's 8 threads and its bandwidth.
func Lassen() *Config {
	return &Config{
		Nodes: 4, RanksPerNode: 1, Epochs: 3, Seed: 42,
		Dataset: Dataset{Count: 1281167, Mean: 0.1077 * mB, Sigma: 0.1 * mB},
		Loop:    Loop{Batch: 32, Workers: 4, Prefetch: 2, ComputeRate: 64 * mB, PreprocessRate: 200 * mB},
		Tiers: []Tier{
			{Capacity: 120 * gB, Bandwidth: 111 * gB, Threads: 8},
			{Capacity: 900 * gB, Bandwidth: 4 * gB, Threads: 2},
		},
		Prefetch: Prefetch{Stage: 5 * gB, Lookahead: 1024, Pending: 256},
		Reactive: Reactive{WaitMax: placement.DefaultWaitMax},
		PFS: PFS{Curve: []CurvePoint{{1, 330 * mB}, {2, 730 * mB}, {4, 1540 * mB}, {8, 2870 * mB}},
			RequestSize: 1 << 20},
		Net:      Net{Bandwidth: 24000 * mB},
		Policies: Policies,
	}
}

// Validate says what in c cannot be simulated.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Nodes < 1 || c.Nodes > math.MaxInt16 {
		bad("nodes must be 1 to %d, not %d", math.MaxInt16, c.Nodes)
	}
	if c.RanksPerNode < 1 {
		bad("ranks per node must be at least 1")
	}
	if c.Epochs < 1 {
		bad("epochs must be at least 1")
	}
	if c.Dataset.Dir == "" && (c.Dataset.Count < 1 || c.Dataset.Mean <= 0 || c.Dataset.Sigma < 0) {
		bad("the dataset needs a count and a positive mean size (or a directory)")
	}
	if c.Loop.Batch < 1 || c.Loop.Workers < 1 || c.Loop.Prefetch < 1 {
		bad("batch, workers and prefetch must be at least 1")
	}
	if len(c.Tiers) == 0 {
		bad("a node needs at least one tier")
	}
	for i, t := range c.Tiers {
		if t.Capacity < 0 || t.Bandwidth <= 0 || t.Threads < 1 {
			bad("tier %d: capacity, bandwidth and threads must be positive", i+1)
		}
	}
	if len(c.PFS.Curve) == 0 {
		bad("the PFS needs a throughput")
	}
	for i, p := range c.PFS.Curve {
		if p.Readers < 1 || p.Rate <= 0 || (i > 0 && p.Readers <= c.PFS.Curve[i-1].Readers) {
			bad("PFS throughput: readers must increase from 1 and rates be positive")
			break
		}
	}
	if c.Net.Bandwidth <= 0 {
		bad("the network needs a bandwidth")
	}
	if c.Prefetch.Lookahead < 1 || c.Prefetch.Pending < 1 {
		bad("lookahead and pending must be at least 1")
	}
	if c.Reactive.WaitMax < 0 {
		bad("wait_max must not be negative")
	}
	for _, p := range c.Policies {
		if !known(p) {
			bad("no policy %q (policies: %s)", p, strings.Join(Policies, ", "))
		}
	}
	return errors.Join(errs...)
}

func known(p string) bool {
	for _, q := range Policies {
		if p == q {
			return true
		}
	}
	return false
}

// fileConfig is the TOML schema: sizes and rates as "120GB", "330MB/s",
// times as "15ms". Unknown keys are errors.
type fileConfig struct {
	Nodes        *int     `toml:"nodes"`
	RanksPerNode *int     `toml:"ranks_per_node"`
	Epochs       *int     `toml:"epochs"`
	Seed         *int64   `toml:"seed"`
	Policies     []string `toml:"policies"`
	Dataset      struct {
		Count *int   `toml:"count"`
		Size  string `toml:"size"`
		Sigma string `toml:"sigma"`
		Dir   string `toml:"dir"`
	} `toml:"dataset"`
	Loop struct {
		Batch          *int   `toml:"batch"`
		Workers        *int   `toml:"workers"`
		Prefetch       *int   `toml:"prefetch"`
		Compute        string `toml:"compute"`
		ComputeRate    string `toml:"compute_rate"`
		PreprocessRate string `toml:"preprocess_rate"`
	} `toml:"loop"`
	Tier []struct {
		Capacity  string `toml:"capacity"`
		Bandwidth string `toml:"bandwidth"`
		Latency   string `toml:"latency"`
		Threads   int    `toml:"threads"`
	} `toml:"tier"`
	Prefetch struct {
		Stage     string `toml:"stage"`
		Lookahead *int   `toml:"lookahead"`
		Pending   *int   `toml:"pending"`
	} `toml:"prefetch"`
	Reactive struct {
		WaitMax string `toml:"wait_max"`
	} `toml:"reactive"`
	PFS struct {
		Throughput  []string `toml:"throughput"`
		Latency     string   `toml:"latency"`
		ReadLatency string   `toml:"read_latency"`
		RequestSize string   `toml:"request_size"`
		ClientCache *bool    `toml:"client_cache"`
		EndRequest  *bool    `toml:"end_request"`
	} `toml:"pfs"`
	Net struct {
		Bandwidth string `toml:"bandwidth"`
		Latency   string `toml:"latency"`
	} `toml:"net"`
}

// ReadFile applies the TOML file name over c.
func (c *Config) ReadFile(name string) error {
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	var f fileConfig
	d := toml.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := c.apply(&f); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (c *Config) apply(f *fileConfig) error {
	setInt(&c.Nodes, f.Nodes)
	setInt(&c.RanksPerNode, f.RanksPerNode)
	setInt(&c.Epochs, f.Epochs)
	if f.Seed != nil {
		c.Seed = *f.Seed
	}
	if f.Policies != nil {
		c.Policies = f.Policies
	}
	setInt(&c.Dataset.Count, f.Dataset.Count)
	if f.Dataset.Dir != "" {
		c.Dataset.Dir = f.Dataset.Dir
	}
	setInt(&c.Loop.Batch, f.Loop.Batch)
	setInt(&c.Loop.Workers, f.Loop.Workers)
	setInt(&c.Loop.Prefetch, f.Loop.Prefetch)
	setInt(&c.Prefetch.Lookahead, f.Prefetch.Lookahead)
	setInt(&c.Prefetch.Pending, f.Prefetch.Pending)
	if f.PFS.ClientCache != nil {
		c.PFS.ClientCache = *f.PFS.ClientCache
	}
	if f.PFS.EndRequest != nil {
		c.PFS.EndRequest = *f.PFS.EndRequest
	}
	var errs []error
	num := func(dst *float64, s string, parse func(string) (float64, error)) {
		if s == "" {
			return
		}
		v, err := parse(s)
		if err != nil {
			errs = append(errs, err)
			return
		}
		*dst = v
	}
	num(&c.Dataset.Mean, f.Dataset.Size, ParseSize)
	num(&c.Dataset.Sigma, f.Dataset.Sigma, ParseSize)
	num(&c.Loop.Compute, f.Loop.Compute, parseSeconds)
	num(&c.Loop.ComputeRate, f.Loop.ComputeRate, ParseRate)
	num(&c.Loop.PreprocessRate, f.Loop.PreprocessRate, ParseRate)
	num(&c.PFS.Latency, f.PFS.Latency, parseSeconds)
	num(&c.PFS.ReadLatency, f.PFS.ReadLatency, parseSeconds)
	num(&c.Net.Bandwidth, f.Net.Bandwidth, ParseRate)
	num(&c.Net.Latency, f.Net.Latency, parseSeconds)
	stage, req, wait := float64(c.Prefetch.Stage), float64(c.PFS.RequestSize), float64(c.Reactive.WaitMax)
	num(&stage, f.Prefetch.Stage, ParseSize)
	num(&req, f.PFS.RequestSize, ParseSize)
	num(&wait, f.Reactive.WaitMax, ParseSize)
	c.Prefetch.Stage, c.PFS.RequestSize, c.Reactive.WaitMax = int64(stage), int64(req), int64(wait)
	if f.PFS.Throughput != nil {
		curve, err := ParseCurve(strings.Join(f.PFS.Throughput, ","))
		if err != nil {
			errs = append(errs, err)
		}
		c.PFS.Curve = curve
	}
	if f.Tier != nil {
		c.Tiers = nil
		for _, t := range f.Tier {
			tier := Tier{Threads: t.Threads}
			capacity := 0.0
			num(&capacity, t.Capacity, ParseSize)
			num(&tier.Bandwidth, t.Bandwidth, ParseRate)
			num(&tier.Latency, t.Latency, parseSeconds)
			tier.Capacity = int64(capacity)
			c.Tiers = append(c.Tiers, tier)
		}
	}
	return errors.Join(errs...)
}

func setInt(dst *int, v *int) {
	if v != nil {
		*dst = *v
	}
}

// units are the size suffixes ParseSize knows, longest first.
var units = []struct {
	suffix string
	mult   float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", kB}, {"MB", mB}, {"GB", gB}, {"TB", 1e12}, {"B", 1},
}

// ParseSize reads a size like 0.1077MB, 5GiB or 4096 (bytes).
func ParseSize(s string) (float64, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("size %q: want a number and a unit like 120GB or 0.1MB", s)
	}
	return v * mult, nil
}

// ParseRate reads a rate like 330MB/s or 150MiB/s.
func ParseRate(s string) (float64, error) {
	t, ok := strings.CutSuffix(strings.TrimSpace(s), "/s")
	if !ok {
		return 0, fmt.Errorf("rate %q: want a size per second like 330MB/s", s)
	}
	return ParseSize(t)
}

// ParseCurve reads t(γ) as readers:rate pairs, "1:330MB/s,2:730MB/s", or
// one rate for any number of readers.
func ParseCurve(s string) ([]CurvePoint, error) {
	var out []CurvePoint
	for _, part := range strings.Split(s, ",") {
		readers, rate, ok := strings.Cut(part, ":")
		if !ok {
			readers, rate = "1", part
		}
		n, err := strconv.Atoi(strings.TrimSpace(readers))
		if err != nil {
			return nil, fmt.Errorf("PFS throughput %q: want readers:rate", part)
		}
		r, err := ParseRate(rate)
		if err != nil {
			return nil, err
		}
		out = append(out, CurvePoint{n, r})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Readers < out[j].Readers })
	return out, nil
}

// parseSeconds reads a duration like 15ms.
func parseSeconds(s string) (float64, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < 0 {
		return 0, fmt.Errorf("duration %q: want one like 15ms", s)
	}
	return d.Seconds(), nil
}
