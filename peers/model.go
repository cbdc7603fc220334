package peers

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Source is where a file's bytes can come from: the shared filesystem,
// or a peer by its node index.
type Source int

// PFS is the shared filesystem as a source.
const PFS Source = -1

func (s Source) String() string {
	if s == PFS {
		return "pfs"
	}
	return fmt.Sprintf("node %d", int(s))
}

// ModelConfig holds the performance model's parameters. Zero fields take
// the defaults.
type ModelConfig struct {
	// Priors are the throughputs (bytes/s) assumed before any transfer
	// is measured. A peer's is high on purpose: a peer is tried, hence
	// measured, before the shared filesystem is preferred to it, which
	// is what relieves the filesystem (NoPFS prefers a peer on a tie).
	PFSPrior  float64 `json:"pfs_prior_bytes_per_s"`  // default 200 MB/s
	PeerPrior float64 `json:"peer_prior_bytes_per_s"` // default 1 GB/s
	// Weight is a new sample's weight in the moving average (default
	// 0.2: the last ten or so transfers count).
	Weight float64 `json:"sample_weight"`
	// PFSWeight multiplies the shared filesystem's expected delivery
	// time (default 2): the filesystem is every node's and every job's,
	// what one node takes from it the others wait for, so a peer that
	// holds the file is asked unless the filesystem is expected to
	// deliver it in less than half the time.
	PFSWeight float64 `json:"pfs_weight"`
	// Forget is the time constant with which an idle source's measured
	// throughput fades back to its prior (default 30 s): a source judged
	// slow once would otherwise never be chosen, hence measured, again.
	Forget time.Duration `json:"forget_ns"`
}

// WithDefaults is c with every parameter left zero set to its default:
// what a Model made with c uses.
func (c ModelConfig) WithDefaults() ModelConfig {
	c.defaults()
	return c
}

func (c *ModelConfig) defaults() {
	if c.PFSPrior <= 0 {
		c.PFSPrior = 200e6
	}
	if c.PeerPrior <= 0 {
		c.PeerPrior = 1e9
	}
	if c.Weight <= 0 || c.Weight > 1 {
		c.Weight = 0.2
	}
	if c.PFSWeight < 1 {
		c.PFSWeight = 2
	}
	if c.Forget <= 0 {
		c.Forget = 30 * time.Second
	}
}

// Model is NoPFS's performance model with measured rather than
// configured bandwidths: for each source, the throughput it delivers
// (a moving average over completed transfers) and the bytes in
// transfers begun and not done. A file goes to the source expected to
// deliver it first, (queued + size) / throughput.
//
// Throughput is the source's, not one transfer's: a transfer that
// shared the source with three others on average took four times as
// long as alone, so its sample is its bytes over its time times the
// number of transfers the source was busy with meanwhile (the integral
// of transfers in flight over its time). The queue drains at the
// source's pace. A Model is safe for concurrent use.
type Model struct {
	cfg ModelConfig
	now func() time.Time // the clock; tests move it

	mu   sync.Mutex
	srcs []source // index Source+1; guarded by mu
}

type source struct {
	prior    float64
	rate     float64   // moving average of bytes/s, from prior
	samples  int64     // taken so far
	last     time.Time // when the source last went idle, for forgetting
	queued   int64     // bytes of transfers begun and not done
	inflight int       // transfers begun and not done
	area     float64   // integral of inflight over time, in seconds, up to areaAt
	areaAt   time.Time
}

// advance brings the integral of transfers in flight up to now.
func (s *source) advance(now time.Time) {
	s.area += float64(s.inflight) * now.Sub(s.areaAt).Seconds()
	s.areaAt = now
}

// NewModel returns a model of the shared filesystem and the peers of a
// job of nodes nodes.
func NewModel(nodes int, cfg ModelConfig) *Model {
	cfg.defaults()
	m := &Model{cfg: cfg, now: time.Now}
	m.srcs = make([]source, nodes+1)
	for i := range m.srcs {
		p := cfg.PeerPrior
		if Source(i-1) == PFS {
			p = cfg.PFSPrior
		}
		m.srcs[i] = source{prior: p, rate: p}
	}
	return m
}

// src is s's state. A source outside the job is a caller's bug.
//
// Preconditions: m.mu is held.
func (m *Model) src(s Source) *source {
	if int(s)+1 < 0 || int(s)+1 >= len(m.srcs) {
		panic(fmt.Sprintf("peers: %v is no source of a job of %d nodes", s, len(m.srcs)-1))
	}
	return &m.srcs[s+1]
}

// estimate is the throughput s is expected to deliver now: its measured
// rate, faded toward its prior for the time it has been idle.
func (s *source) estimate(now time.Time, forget time.Duration) float64 {
	if s.inflight > 0 || s.samples == 0 {
		return s.rate
	}
	f := math.Exp(-float64(now.Sub(s.last)) / float64(forget))
	return s.prior + (s.rate-s.prior)*f
}

// minRate is the least throughput estimated: a source measured at almost
// nothing is expected slow, not never to deliver.
const minRate = 1024.0

// eta is when a file of size bytes would arrive from s, in seconds.
func (s *source) eta(size int64, now time.Time, forget time.Duration) float64 {
	return float64(s.queued+size) / max(s.estimate(now, forget), minRate)
}

// Choose returns the candidate expected to deliver a file of size bytes
// first, the shared filesystem's time weighted by PFSWeight. On a tie a peer wins over the shared filesystem (as in NoPFS:
// the filesystem is what every node shares), then the earlier
// candidate. The caller lists only sources that may be asked (a peer
// that should hold the file and is up; the shared filesystem always).
func (m *Model) Choose(size int64, candidates []Source) Source {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	best, bestETA := PFS, math.Inf(1)
	for _, c := range candidates {
		eta := m.src(c).eta(size, now, m.cfg.Forget)
		if c == PFS {
			eta *= m.cfg.PFSWeight
		}
		if eta < bestETA || eta == bestETA && best == PFS {
			best, bestETA = c, eta
		}
	}
	return best
}

// Transfer is one file on its way from a source. Done must be called
// exactly once.
type Transfer struct {
	m     *Model
	s     Source
	size  int64
	start time.Time
	area0 float64 // the source's integral at start
}

// Begin records that a transfer of size bytes from s starts now.
func (m *Model) Begin(s Source, size int64) *Transfer {
	m.mu.Lock()
	defer m.mu.Unlock()
	src := m.src(s)
	now := m.now()
	if src.inflight == 0 {
		// Idle until now: make the forgetting so far part of the rate.
		src.rate = src.estimate(now, m.cfg.Forget)
	}
	src.advance(now)
	src.inflight++
	src.queued += size
	return &Transfer{m: m, s: s, size: size, start: now, area0: src.area}
}

// Done records that the transfer ended having delivered n bytes: all of
// them, or fewer if it failed midway, which then counts as slow. A
// transfer that delivered nothing (the peer did not hold the file, was
// unreachable or timed out) says nothing of throughput: the client marks
// such a peer down instead.
func (t *Transfer) Done(n int64) {
	m := t.m
	m.mu.Lock()
	defer m.mu.Unlock()
	src := m.src(t.s)
	now := m.now()
	src.advance(now)
	if d := now.Sub(t.start).Seconds(); n > 0 && d > 0 {
		busy := (src.area - t.area0) / d // transfers in flight on average, this one included
		src.rate = m.cfg.Weight*float64(n)/d*busy + (1-m.cfg.Weight)*src.rate
		src.samples++
	}
	src.inflight--
	src.queued -= t.size
	if src.inflight == 0 {
		src.last = now
	}
}

// SourceState is one source's parameters in the model, as augur stat
// and augur plan show them.
type SourceState struct {
	Source   string  `json:"source"`            // "pfs" or "node i"
	Rate     float64 `json:"bytes_per_s"`       // the throughput Choose expects now
	Weight   float64 `json:"time_weight"`       // Choose multiplies the expected time by this
	Prior    float64 `json:"prior_bytes_per_s"` // assumed before measuring
	Samples  int64   `json:"samples"`           // measurements taken
	Queued   int64   `json:"queued_bytes"`      // in transfers begun and not done
	InFlight int     `json:"in_flight"`
}

// Snapshot returns every source's state: the shared filesystem first,
// then the nodes in order (this node's own entry included, never used).
func (m *Model) Snapshot() []SourceState {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	st := make([]SourceState, len(m.srcs))
	for i := range m.srcs {
		s := &m.srcs[i]
		st[i] = SourceState{Source: Source(i - 1).String(), Rate: s.estimate(now, m.cfg.Forget), Weight: 1, Prior: s.prior,
			Samples: s.samples, Queued: s.queued, InFlight: s.inflight}
		if Source(i-1) == PFS {
			st[i].Weight = m.cfg.PFSWeight
		}
	}
	return st
}
