package pfsemu

import (
	"math"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{
		"200MiB/s": 200 << 20, "1GiB/s": 1 << 30, "500MB/s": 500e6, "1.5GB/s": 1.5e9,
		"4096": 4096, "64KiB": 64 << 10, "10 mib/s": 10 << 20, "2TB/s": 2e12, "7B/s": 7,
		"0": 0, "unlimited": 0, "off": 0,
	} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "fast", "-5MiB/s", "5Mbit/s", "MiB/s", "1e400GB/s", "1.2.3MB"} {
		if got, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %v, want an error", in, got)
		}
	}
	for _, r := range []float64{200 << 20, 1 << 30, 1234, 1.5 * (1 << 20)} {
		if got, err := ParseRate(FormatRate(r)); err != nil || math.Abs(got-r) > r*1e-6 {
			t.Errorf("ParseRate(FormatRate(%v)) = %v, %v", r, got, err)
		}
	}
}

func TestParseCurve(t *testing.T) {
	c, err := ParseCurve("1:200MiB/s, 2:300MiB/s,8:400MiB/s")
	want := []CurvePoint{{1, 200 << 20}, {2, 300 << 20}, {8, 400 << 20}}
	if err != nil || len(c) != len(want) {
		t.Fatalf("ParseCurve = %v, %v", c, err)
	}
	for i := range want {
		if c[i] != want[i] {
			t.Errorf("point %d = %v, want %v", i, c[i], want[i])
		}
	}
	for _, in := range []string{"", "1:0", "0:1MiB/s", "2:1MiB/s,1:2MiB/s", "1:1MiB/s,1:2MiB/s", "a:1MiB/s", "1=1MiB/s"} {
		if c, err := ParseCurve(in); err == nil {
			t.Errorf("ParseCurve(%q) = %v, want an error", in, c)
		}
	}
}

func TestCurveInterpolation(t *testing.T) {
	c := []CurvePoint{{1, 200}, {2, 300}, {8, 400}}
	for readers, want := range map[int]float64{
		0: 200, 1: 200, 2: 300, 5: 350, 8: 400, 100: 400,
	} {
		if got := curveAt(c, readers); math.Abs(got-want) > 1e-9 {
			t.Errorf("curveAt(%d) = %v, want %v", readers, got, want)
		}
	}
	if got := curveAt([]CurvePoint{{4, 10}}, 1); got != 10 {
		t.Errorf("one-point curve at 1 reader = %v, want 10", got)
	}
}

// TestLinkArithmetic: reservations add up to bytes/rate however they are
// split, and an idle link saves no credit.
func TestLinkArithmetic(t *testing.T) {
	l := newLink(&Options{Bandwidth: 1 << 20})
	var last time.Duration
	for range 10 {
		last = l.reserve(100<<10, 1)
	}
	// 1000 KiB at 1 MiB/s: the tenth reservation ends about 0.977 s out.
	if want := 1000 * time.Second / 1024; last < want-10*time.Millisecond || last > want {
		t.Errorf("tenth reservation waits %v, want about %v", last, want)
	}
	if d := newLink(&Options{}).reserve(1<<30, 1); d != 0 {
		t.Errorf("unlimited link waits %v", d)
	}

	curved := newLink(&Options{BandwidthCurve: []CurvePoint{{1, 1 << 20}, {2, 2 << 20}}})
	if d := curved.reserve(1<<20, 2); d < 490*time.Millisecond || d > 500*time.Millisecond {
		t.Errorf("1 MiB at the two-reader rate of 2 MiB/s waits %v, want 0.5 s", d)
	}

	if n := curved.begin(7); n != 1 {
		t.Errorf("first reader: %d", n)
	}
	curved.begin(7)
	if n := curved.begin(8); n != 2 {
		t.Errorf("second pid: %d readers, want 2", n)
	}
	curved.end(7)
	curved.end(7)
	if n := curved.begin(9); n != 2 {
		t.Errorf("after pid 7 finished: %d readers, want 2", n)
	}
	if p := curved.peakReaders(); p != 2 {
		t.Errorf("peak %d, want 2", p)
	}
}

// TestFaultChoice: the choice is a pure function of seed and sequence
// number and hits about the configured fraction.
func TestFaultChoice(t *testing.T) {
	for _, rate := range []float64{0, 0.001, 0.05, 0.5, 1} {
		for _, seed := range []uint64{1, 2, 12345} {
			f, g := faults{failRate: rate, seed: seed}, faults{failRate: rate, seed: seed}
			const n = 100000
			hits := 0
			for i := int64(1); i <= n; i++ {
				if f.fail(i) != g.fail(i) {
					t.Fatalf("rate %v seed %d: read %d decided differently", rate, seed, i)
				}
				if f.fail(i) {
					hits++
				}
			}
			want := rate * n
			if sd := math.Sqrt(n * rate * (1 - rate)); math.Abs(float64(hits)-want) > 6*sd+0.5 {
				t.Errorf("rate %v seed %d: %d of %d reads fail, want about %v", rate, seed, hits, n, want)
			}
		}
	}
	a, b := faults{failRate: 0.5, seed: 1}, faults{failRate: 0.5, seed: 2}
	same := 0
	for i := int64(1); i <= 1000; i++ {
		if a.fail(i) == b.fail(i) {
			same++
		}
	}
	if same > 600 {
		t.Errorf("seeds 1 and 2 agree on %d of 1000 reads: the seed hardly matters", same)
	}
	s := faults{stallEvery: 3, stall: time.Second}
	for i, want := range []time.Duration{0, 0, time.Second, 0, 0, time.Second} {
		if got := s.stallFor(int64(i + 1)); got != want {
			t.Errorf("stallFor(%d) = %v, want %v", i+1, got, want)
		}
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	if got := unescapeMountinfo(`/mnt/a\040b\134c`); got != `/mnt/a b\c` {
		t.Errorf("got %q", got)
	}
}
