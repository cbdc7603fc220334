package peers

import (
	"math"
	"sync"
	"testing"
	"time"
)

// testModel is a model of a job of nodes nodes on a clock the test moves.
func testModel(nodes int, cfg ModelConfig) (*Model, *time.Time) {
	m := NewModel(nodes, cfg)
	clock := time.Unix(1000, 0)
	m.now = func() time.Time { return clock }
	return m, &clock
}

// transfer measures one transfer of n bytes from s taking d.
func transfer(m *Model, clock *time.Time, s Source, n int64, d time.Duration) {
	t := m.Begin(s, n)
	*clock = clock.Add(d)
	t.Done(n)
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

func TestChooseFromPriorsThenMeasurements(t *testing.T) {
	m, clock := testModel(2, ModelConfig{PFSPrior: 100e6, PeerPrior: 1e9, Weight: 1})
	both := []Source{PFS, 1}
	if got := m.Choose(1e6, both); got != 1 {
		t.Errorf("before measuring: %v; want the peer (higher prior)", got)
	}
	transfer(m, clock, 1, 10e6, time.Second) // the peer delivers 10 MB/s
	if got := m.Choose(1e6, both); got != PFS {
		t.Errorf("after measuring the peer at 10 MB/s: %v; want pfs", got)
	}
	st := m.Snapshot()
	if len(st) != 3 || st[0].Source != "pfs" || st[0].Rate != 100e6 || st[0].Samples != 0 ||
		st[2].Source != "node 1" || !near(st[2].Rate, 10e6) || st[2].Prior != 1e9 || st[2].Samples != 1 {
		t.Errorf("snapshot %+v", st)
	}
}

func TestChooseCountsQueuedBytes(t *testing.T) {
	m, _ := testModel(2, ModelConfig{PFSPrior: 100e6, PeerPrior: 1e9})
	both := []Source{PFS, 1}
	big := m.Begin(1, 3e9) // 3 s of the peer's time ahead of anything new
	if got := m.Choose(10e6, both); got != PFS {
		t.Errorf("with 3 GB queued at the peer: %v; want pfs (0.1 s against 3.01 s)", got)
	}
	if st := m.Snapshot()[2]; st.Queued != 3e9 || st.InFlight != 1 {
		t.Errorf("snapshot %+v", st)
	}
	big.Done(0)
	if got := m.Choose(10e6, both); got != 1 {
		t.Errorf("with the queue drained: %v; want the peer", got)
	}
	if st := m.Snapshot()[2]; st.Queued != 0 || st.InFlight != 0 {
		t.Errorf("snapshot %+v", st)
	}
}

// The shared filesystem is chosen only when it is expected to deliver
// in less than 1/PFSWeight of a peer's time.
func TestChooseWeighsTheSharedFilesystem(t *testing.T) {
	m, _ := testModel(2, ModelConfig{PFSPrior: 150e6, PeerPrior: 100e6})
	both := []Source{PFS, 1}
	if got := m.Choose(1e6, both); got != 1 {
		t.Errorf("pfs 1.5 x as fast: %v; want the peer (weight 2)", got)
	}
	m, _ = testModel(2, ModelConfig{PFSPrior: 250e6, PeerPrior: 100e6})
	if got := m.Choose(1e6, both); got != PFS {
		t.Errorf("pfs 2.5 x as fast: %v; want pfs", got)
	}
	m, _ = testModel(2, ModelConfig{PFSPrior: 150e6, PeerPrior: 100e6, PFSWeight: 1})
	if got := m.Choose(1e6, both); got != PFS {
		t.Errorf("pfs 1.5 x as fast, weight 1: %v; want pfs", got)
	}
	if st := m.Snapshot(); st[0].Weight != 1 || st[1].Weight != 1 {
		t.Errorf("snapshot %+v", st)
	}
}

func TestChooseTies(t *testing.T) {
	m, _ := testModel(3, ModelConfig{PFSPrior: 1e9, PeerPrior: 1e9})
	cases := []struct {
		candidates []Source
		want       Source
	}{
		{[]Source{PFS, 1}, 1},
		{[]Source{1, PFS}, 1},
		{[]Source{2, 1}, 2},
		{[]Source{PFS}, PFS},
		{nil, PFS},
	}
	for _, c := range cases {
		if got := m.Choose(1e6, c.candidates); got != c.want {
			t.Errorf("Choose(%v) = %v; want %v", c.candidates, got, c.want)
		}
	}
}

// TestThroughputIsTheSources: four transfers sharing a source for a
// second, 25 MB each, measure the source at 100 MB/s, not 25.
func TestThroughputIsTheSources(t *testing.T) {
	m, clock := testModel(1, ModelConfig{PFSPrior: 1, Weight: 1})
	var ts []*Transfer
	for range 4 {
		ts = append(ts, m.Begin(PFS, 25e6))
	}
	*clock = clock.Add(time.Second)
	for _, tr := range ts {
		tr.Done(25e6)
		if r := m.Snapshot()[0].Rate; !near(r, 100e6) {
			t.Errorf("rate %g; want 100e6", r)
		}
	}
	transfer(m, clock, PFS, 50e6, time.Second) // then alone
	if r := m.Snapshot()[0].Rate; !near(r, 50e6) {
		t.Errorf("alone: rate %g; want 50e6", r)
	}
}

func TestMovingAverage(t *testing.T) {
	m, clock := testModel(1, ModelConfig{PFSPrior: 100e6, Weight: 0.5})
	transfer(m, clock, PFS, 20e6, time.Second)
	transfer(m, clock, PFS, 60e6, time.Second)
	// 0.5*60 + 0.5*(0.5*20 + 0.5*100)
	if r := m.Snapshot()[0].Rate; !near(r, 60e6) {
		t.Errorf("rate %g; want 60e6", r)
	}
}

func TestNothingDeliveredIsNoSample(t *testing.T) {
	m, clock := testModel(2, ModelConfig{PeerPrior: 1e9})
	transfer(m, clock, 1, 0, 10*time.Second) // timed out, or not held
	if st := m.Snapshot()[2]; st.Samples != 0 || st.Rate != 1e9 || st.Queued != 0 {
		t.Errorf("snapshot %+v", st)
	}
}

// TestIdleSourceForgets: a source measured slow fades back to its prior
// while idle, so that it is tried again; while busy it does not.
func TestIdleSourceForgets(t *testing.T) {
	const prior = 1e9
	m, clock := testModel(2, ModelConfig{PeerPrior: prior, Weight: 1, Forget: 10 * time.Second})
	transfer(m, clock, 1, 1e6, time.Second)
	rate := func() float64 { return m.Snapshot()[2].Rate }
	if !near(rate(), 1e6) {
		t.Fatalf("rate %g", rate())
	}
	*clock = clock.Add(10 * time.Second)
	want := prior + (1e6-prior)*math.Exp(-1)
	if !near(rate(), want) {
		t.Errorf("after one time constant: %g; want %g", rate(), want)
	}
	busy := m.Begin(1, 1)
	*clock = clock.Add(time.Hour)
	if !near(rate(), want) {
		t.Errorf("while busy: %g; want %g", rate(), want)
	}
	busy.Done(0)
	*clock = clock.Add(time.Hour)
	if r := rate(); math.Abs(r-prior) > 1e-6*prior {
		t.Errorf("after an idle hour: %g; want about %g", r, prior)
	}
}

func TestModelRefusesStrangeSources(t *testing.T) {
	m := NewModel(2, ModelConfig{})
	for _, s := range []Source{-2, 2} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%v accepted", s)
				}
			}()
			m.Begin(s, 1)
		}()
	}
}

func TestModelConcurrently(t *testing.T) {
	m := NewModel(4, ModelConfig{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				s := m.Choose(int64(i), []Source{PFS, Source(g % 4)})
				m.Begin(s, int64(i)).Done(int64(i))
				m.Snapshot()
			}
		})
	}
	wg.Wait()
	for _, st := range m.Snapshot() {
		if st.Queued != 0 || st.InFlight != 0 {
			t.Errorf("%+v", st)
		}
	}
}
