package sim

import (
	"time"
)

// Result is a simulation's outcome: every policy's epochs.
type Result struct {
	Nodes        int            `json:"nodes"`
	RanksPerNode int            `json:"ranks_per_node"`
	Files        int            `json:"files"`
	Bytes        int64          `json:"dataset_bytes"`
	Stage        int64          `json:"stage_bytes"`
	Policies     []PolicyResult `json:"policies"`
	Seconds      float64        `json:"simulation_seconds"` // how long simulating took
}

// PolicyResult is one policy's epochs.
type PolicyResult struct {
	Policy string       `json:"policy"`
	Epochs []EpochStats `json:"epochs"`
}

// Total is the sum of the epochs' times.
func (p *PolicyResult) Total() float64 {
	var s float64
	for _, e := range p.Epochs {
		s += e.Seconds
	}
	return s
}

// Stall is the sum of the epochs' stalls.
func (p *PolicyResult) Stall() float64 {
	var s float64
	for _, e := range p.Epochs {
		s += e.Stall
	}
	return s
}

// Run simulates cfg under each of its policies (two at a time on two
// cores: each policy's run is one goroutine, its events in one heap).
func Run(cfg *Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t0 := time.Now()
	ds, err := makeFiles(cfg.Dataset, cfg.Seed)
	if err != nil {
		return nil, err
	}
	j, err := newJob(cfg, ds)
	if err != nil {
		return nil, err
	}
	res := &Result{Nodes: cfg.Nodes, RanksPerNode: cfg.RanksPerNode, Files: len(ds.sizes), Bytes: ds.bytes,
		Stage: j.stage, Policies: make([]PolicyResult, len(cfg.Policies))}
	parallel(len(cfg.Policies), func(k int, _ []int32) {
		p := cfg.Policies[k]
		res.Policies[k] = PolicyResult{Policy: p, Epochs: newRunner(j, p).run()}
	}, false, 0)
	res.Seconds = time.Since(t0).Seconds()
	return res, nil
}

// Policy is the result of policy p, nil if it was not run.
func (r *Result) Policy(p string) *PolicyResult {
	for k := range r.Policies {
		if r.Policies[k].Policy == p {
			return &r.Policies[k]
		}
	}
	return nil
}
