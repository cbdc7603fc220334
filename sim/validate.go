package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Validation: make bench's scenarios, simulated with the parameters that
// bench ran them with, beside what it measured (bench.json, read at run
// time; only the fields used are parsed, so the file may gain others).

// Parameters of make bench that bench.json does not record
// (bench/compare/scenario.go and nodes.go): sizes drawn with a standard
// deviation of a quarter of the mean; S4's loop, one rank of 2 workers,
// batches of 16, 20 ms of compute per batch.
const (
	benchSigma   = 0.25
	s4Workers    = 2
	s4Batch      = 16
	s4Compute    = 0.020
	benchRequest = 128 << 10 // FUSE's largest read
)

// benchTier is a tier of this machine: tmpfs or a local disk through
// its page cache, as one reader sees it, with an open's cost.
var benchTier = Tier{Bandwidth: 2 * gB, Latency: 50e-6, Threads: 16}

// The configurations make bench measures and the policies that model
// them. noio and augur-warm have none (the compute loop alone; a copy
// made before the job).
var benchPolicies = map[string]string{
	"pfs": "pfs", "local": "perfect", "augur-reactive": "reactive", "augur-clairvoyant": "clairvoyant",
	"reactive+peers": "hvac", "clairvoyant": "clairvoyant", "clairvoyant+peers": "clairvoyant+peers",
}

type benchJSON struct {
	Workload struct {
		Epochs    int    `json:"epochs"`
		Seed      int64  `json:"seed"`
		Ranks     int    `json:"ranks"`
		Workers   int    `json:"workers"`
		Batch     int    `json:"batch"`
		Prefetch  int    `json:"prefetch"`
		ComputeNS int64  `json:"compute_ns"`
		ReadMode  string `json:"read_mode"` // "whole" (read until a read returns 0), "pread", ...
	} `json:"workload"`
	PFS struct {
		Bandwidth   string `json:"bandwidth"`
		OpenLatency string `json:"open_latency"`
		ReadLatency string `json:"read_latency"`
		MetaLatency string `json:"meta_latency"`
		// DirectIO is true when every scenario ran with direct I/O; a
		// file whose scenarios say each their own has a note here instead.
		DirectIO any `json:"direct_io"`
	} `json:"pfs"`
	Scenarios []struct {
		Name     string `json:"name"`
		DirectIO *bool  `json:"direct_io"` // absent: the PFS client's page cache (bench.json before it had both)
		About    string `json:"about"`
		Dataset  string `json:"dataset"`
		Samples  int    `json:"samples"`
		RAMTier  int64  `json:"ram_tier_bytes"`
		DiskTier int64  `json:"disk_tier_bytes"`
		Runs     []struct {
			Config string `json:"config"`
			Error  string `json:"error"`
			Result *struct {
				Epochs []struct {
					Seconds float64 `json:"seconds"`
					Stall   float64 `json:"stall_seconds"`
					Bytes   int64   `json:"bytes"`
					PFS     *struct {
						ReadBytes int64 `json:"read_bytes"`
					} `json:"pfs"`
				} `json:"epochs"`
			} `json:"result"`
			// The staging budget the run's leader grew to (shim's
			// growStage), where augur ran it.
			Stat *struct {
				StageBudget int64 `json:"stage_budget"`
			} `json:"augur_stat"`
		} `json:"runs"`
	} `json:"scenarios"`
	Nodes *struct {
		Nodes     int     `json:"nodes"`
		Dataset   string  `json:"dataset"`
		Bytes     int64   `json:"dataset_bytes"`
		TierBytes int64   `json:"tier_bytes_per_node"`
		LinkRate  float64 `json:"link_bytes_per_second"`
		PFSRate   float64 `json:"pfs_bytes_per_second"`
		Runs      []struct {
			Config string `json:"config"`
			Error  string `json:"error"`
			Epochs []struct {
				Seconds  float64 `json:"seconds"`
				Stall    float64 `json:"stall_seconds"`
				PFSBytes int64   `json:"pfs_bytes"`
			} `json:"epochs"`
		} `json:"runs"`
	} `json:"nodes"`
}

// measured is one configuration's epochs as make bench measured them.
type measured struct {
	config string
	epochs []measuredEpoch
}

type measuredEpoch struct {
	seconds, stall float64
	pfsBytes       int64
}

// scenario is one of make bench's, as a simulation and its measurements.
type scenario struct {
	name, about string
	cfg         *Config
	runs        []measured
}

// Validate simulates the scenarios of the bench.json at path, prints the
// simulated beside the measured figures for every configuration and
// epoch, and ends with one line: the largest deviation. With png, it
// draws the simulated scenarios there.
func Validate(w io.Writer, path, png string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var b benchJSON
	if err := json.Unmarshal(data, &b); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	scs, err := b.scenarios()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	worst := deviation{}
	same := 0
	var panels []Panel
	for _, sc := range scs {
		extra, err := calibrate(sc)
		if err != nil {
			return err
		}
		sc.cfg.PFS.Latency += extra
		res, err := Run(sc.cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		panels = append(panels, Panel{Title: sc.name + ": " + sc.about, Result: res})
		d, ok := compare(w, sc, res, extra)
		if ok {
			same++
		}
		if d.abs() > worst.abs() {
			worst = d
		}
	}
	if png != "" {
		if err := Plot(png, panels); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nlargest deviation: %+.0f%% (%s %s epoch %d: measured %.2fs, simulated %.2fs); ranking the same in %d of %d scenarios; pfs rows are the calibration\n",
		worst.rel*100, worst.scenario, worst.config, worst.epoch, worst.measured, worst.simulated, same, len(scs))
	return nil
}

type deviation struct {
	scenario, config    string
	epoch               int
	measured, simulated float64
	rel                 float64
}

func (d deviation) abs() float64 { return math.Abs(d.rel) }

var samplesRe = regexp.MustCompile(`(\d+) samples`)

// scenarios turns bench.json into simulations of S1-S3 and S4.
func (b *benchJSON) scenarios() ([]*scenario, error) {
	bw, err := ParseRate(b.PFS.Bandwidth)
	if err != nil {
		return nil, err
	}
	lat := 0.0
	for _, s := range []string{b.PFS.OpenLatency, b.PFS.MetaLatency} {
		v, err := parseSeconds(s)
		if err != nil {
			return nil, err
		}
		lat += v
	}
	readLat, err := parseSeconds(b.PFS.ReadLatency)
	if err != nil {
		return nil, err
	}
	base := func(nodes, ranks, count int, bytes int64, dataset string) *Config {
		c := Lassen()
		c.Nodes, c.RanksPerNode, c.Epochs, c.Seed = nodes, ranks, b.Workload.Epochs, b.Workload.Seed
		mean := float64(bytes) / float64(count)
		c.Dataset = Dataset{Count: count, Mean: mean, Sigma: mean * benchSigma}
		if dir, _, _ := strings.Cut(dataset, ","); dir != "" && dirHolds(dir, count) {
			c.Dataset.Dir = dir // the very files, when the bench's dataset is still there
		}
		c.Loop = Loop{Batch: b.Workload.Batch, Workers: b.Workload.Workers, Prefetch: b.Workload.Prefetch,
			Compute: float64(b.Workload.ComputeNS) / 1e9}
		c.PFS = PFS{Curve: []CurvePoint{{1, bw}}, Latency: lat, ReadLatency: readLat, RequestSize: benchRequest,
			ClientCache: b.PFS.DirectIO != true, EndRequest: b.Workload.ReadMode == "whole"}
		c.Prefetch = Prefetch{Lookahead: 1024, Pending: 256}
		c.Net = Net{Bandwidth: 1e12}
		return c
	}
	var out []*scenario
	for _, s := range b.Scenarios {
		var bytes int64
		// make bench runs S1-S3 with the PFS client's page cache (dropped
		// between epochs) and again with direct I/O; each is simulated
		// with its own client, the direct-I/O runs named so.
		direct := b.PFS.DirectIO == true
		if s.DirectIO != nil {
			direct = *s.DirectIO
		}
		name := s.Name
		if direct && s.DirectIO != nil {
			name += " direct-io"
		}
		sc := &scenario{name: name, about: s.About}
		var stage int64
		for _, r := range s.Runs {
			if _, ok := benchPolicies[r.Config]; !ok || r.Error != "" || r.Result == nil {
				continue
			}
			if r.Stat != nil {
				stage = max(stage, r.Stat.StageBudget)
			}
			m := measured{config: r.Config}
			for _, e := range r.Result.Epochs {
				me := measuredEpoch{seconds: e.Seconds, stall: e.Stall}
				if e.PFS != nil {
					me.pfsBytes = e.PFS.ReadBytes
				}
				m.epochs = append(m.epochs, me)
				bytes = max(bytes, e.Bytes)
			}
			sc.runs = append(sc.runs, m)
		}
		if bytes == 0 || s.Samples == 0 {
			continue
		}
		sc.cfg = base(1, b.Workload.Ranks, s.Samples, bytes, s.Dataset)
		sc.cfg.PFS.ClientCache = !direct
		ram, disk := benchTier, benchTier
		ram.Capacity, disk.Capacity = s.RAMTier, s.DiskTier
		sc.cfg.Tiers = []Tier{ram, disk}
		sc.cfg.Policies = policiesOf(sc.runs)
		// The leader grows its staging budget to the readers' spread as it
		// sees it (their windows, wider than prefetch x batch where
		// workers open out of order); the simulation places with the
		// budget the measured leader settled on, else with its own
		// estimate (grownStage).
		sc.cfg.Prefetch.Stage = stage
		out = append(out, sc)
	}
	if n := b.Nodes; n != nil {
		m := samplesRe.FindStringSubmatch(n.Dataset)
		if m == nil {
			return nil, fmt.Errorf("S4: no sample count in %q", n.Dataset)
		}
		count, _ := strconv.Atoi(m[1])
		sc := &scenario{name: "S4", about: fmt.Sprintf("%d nodes with peers", n.Nodes)}
		for _, r := range n.Runs {
			if _, ok := benchPolicies[r.Config]; !ok || r.Error != "" {
				continue
			}
			mr := measured{config: r.Config}
			for _, e := range r.Epochs {
				mr.epochs = append(mr.epochs, measuredEpoch{seconds: e.Seconds, stall: e.Stall, pfsBytes: e.PFSBytes})
			}
			sc.runs = append(sc.runs, mr)
		}
		sc.cfg = base(n.Nodes, 1, count, n.Bytes, n.Dataset)
		sc.cfg.Loop.Workers, sc.cfg.Loop.Batch, sc.cfg.Loop.Compute = s4Workers, s4Batch, s4Compute
		sc.cfg.PFS.Curve = []CurvePoint{{1, n.PFSRate}}
		sc.cfg.PFS.ClientCache = false // S4's PFS uses direct I/O: the nodes share no page cache
		tier := benchTier
		tier.Capacity = n.TierBytes
		sc.cfg.Tiers = []Tier{tier}
		sc.cfg.Net = Net{Bandwidth: n.LinkRate}
		sc.cfg.Policies = policiesOf(sc.runs)
		if len(sc.runs) > 0 {
			sc.cfg.Epochs = len(sc.runs[0].epochs)
		}
		out = append(out, sc)
	}
	return out, nil
}

// dirHolds says whether dir is an ImageFolder of count files.
func dirHolds(dir string, count int) bool {
	f, err := listFiles(dir)
	return err == nil && len(f.sizes) == count
}

func policiesOf(runs []measured) []string {
	var ps []string
	for _, r := range runs {
		if p := benchPolicies[r.config]; !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	return ps
}

// calibrate finds the PFS's cost per file on this machine beyond its
// configured latencies (FUSE's round trips, the emulator and the readers
// sharing two cores): the one number that makes the simulated pfs
// configuration take the measured time. Every other configuration of the
// scenario is then predicted with it.
func calibrate(sc *scenario) (float64, error) {
	var want float64
	for _, r := range sc.runs {
		if r.config == "pfs" {
			for _, e := range r.epochs {
				want += e.seconds
			}
		}
	}
	if want == 0 {
		return 0, nil
	}
	cfg := *sc.cfg
	cfg.Policies = []string{"pfs"}
	lo, hi := 0.0, 0.05
	for range 30 {
		mid := (lo + hi) / 2
		c := cfg
		c.PFS.Latency += mid
		res, err := Run(&c)
		if err != nil {
			return 0, err
		}
		if res.Policies[0].Total() < want {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2, nil
}

// compare prints sc's measured and simulated epochs and says how far
// apart they are at worst (the pfs configuration, the calibration, aside)
// and whether the policies rank alike by total time.
func compare(w io.Writer, sc *scenario, res *Result, extra float64) (deviation, bool) {
	fmt.Fprintf(w, "\n%s: %s — %d files, %.1f MB, %d node(s); PFS cost per file calibrated on pfs: %.2f ms beyond its configured latencies\n",
		sc.name, sc.about, res.Files, float64(res.Bytes)/1e6, res.Nodes, extra*1e3)
	fmt.Fprintf(w, "| config | policy | epoch | measured (s) | simulated (s) | deviation | stall measured | stall simulated | PFS MB measured | PFS MB simulated |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|\n")
	worst := deviation{}
	var mTotal, sTotal []float64
	var names []string
	for _, m := range sc.runs {
		pr := res.Policy(benchPolicies[m.config])
		var mt float64
		for e, me := range m.epochs {
			if e >= len(pr.Epochs) {
				break
			}
			se := pr.Epochs[e]
			rel := se.Seconds/me.seconds - 1
			fmt.Fprintf(w, "| %s | %s | %d | %.2f | %.2f | %+.0f%% | %.2f | %.2f | %.1f | %.1f |\n", m.config, pr.Policy, e+1,
				me.seconds, se.Seconds, rel*100, me.stall, se.Stall, float64(me.pfsBytes)/1e6, float64(se.PFSBytes)/1e6)
			if d := (deviation{sc.name, m.config, e + 1, me.seconds, se.Seconds, rel}); m.config != "pfs" && d.abs() > worst.abs() {
				worst = d
			}
			mt += me.seconds
		}
		names = append(names, m.config)
		mTotal = append(mTotal, mt)
		sTotal = append(sTotal, pr.Total())
	}
	mr, sr := rank(names, mTotal), rank(names, sTotal)
	same := slices.Equal(mr, sr)
	verdict := "the same"
	if !same {
		verdict = "different"
	}
	fmt.Fprintf(w, "ranking by total time, measured: %s; simulated: %s (%s)\n", strings.Join(mr, " < "), strings.Join(sr, " < "), verdict)
	return worst, same
}

// rank orders names by their totals, fastest first; totals within 3% of
// each other count as a tie and keep the measured order, as a difference
// that small is within make bench's run-to-run noise.
func rank(names []string, totals []float64) []string {
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if math.Abs(totals[a]-totals[b]) <= 0.03*max(totals[a], totals[b]) {
			return 0
		}
		if totals[a] < totals[b] {
			return -1
		}
		return 1
	})
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = names[i]
	}
	return out
}
