package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a test's time: it moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fake returns a Reporter on a test clock that draws only when the test
// calls draw: no goroutine, no real time.
func fake(opt Options) (*Reporter, *bytes.Buffer, *clock) {
	var buf bytes.Buffer
	c := &clock{t: time.Unix(1000, 0)}
	r := newReporter(&buf, "warm", opt, c.now)
	close(r.done) // Stop finds the drawing goroutine already gone
	return r, &buf, c
}

func TestLineBeforeAndAfterTotals(t *testing.T) {
	r, _, c := fake(Options{Interval: time.Second, Bytes: true})
	r.Expect(10, 10<<20)
	r.Add(4, 2<<20)
	c.advance(2 * time.Second)
	// The walk goes on: no totals, no time left.
	if got, want := r.line(c.now()), "warm: 4 files, 2.0 MiB, 1.0 MiB/s, 2s"; got != want {
		t.Errorf("before the totals: %q, want %q", got, want)
	}
	r.TotalKnown()
	// 6 of 10 files left at 2 files/s: 3 s; 8 of 10 MiB at 1 MiB/s: 8 s.
	// The slower of the two is the time left.
	if got, want := r.line(c.now()), "warm: 4/10 files, 2.0/10.0 MiB, 1.0 MiB/s, 2s, 8s left"; got != want {
		t.Errorf("with the totals: %q, want %q", got, want)
	}
	r.Add(6, 8<<20)
	c.advance(3 * time.Second)
	if got, want := r.line(c.now()), "warm: 10/10 files, 10.0/10.0 MiB, 2.0 MiB/s, 5s"; got != want {
		t.Errorf("all done: %q, want %q", got, want)
	}
}

func TestNoTimeLeftBeforeAnythingIsDone(t *testing.T) {
	r, _, c := fake(Options{Interval: time.Second, Bytes: true})
	r.Expect(3, 300)
	r.TotalKnown()
	r.Add(3, 0) // files dealt with, but not a byte copied: no byte rate yet
	c.advance(time.Second)
	if got := r.line(c.now()); strings.Contains(got, "left") {
		t.Errorf("%q gives a time left with no byte done", got)
	}
}

func TestCountsOnly(t *testing.T) {
	r, _, c := fake(Options{Interval: time.Second, Unit: "entries"})
	r.Add(3000, 0)
	c.advance(1500 * time.Millisecond)
	if got, want := r.line(c.now()), "warm: 3000 entries, 2000 entries/s, 2s"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	r.Expect(6000, 0)
	r.TotalKnown()
	if got, want := r.line(c.now()), "warm: 3000/6000 entries, 2000 entries/s, 2s, 2s left"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

func TestTerminalRedrawsOneLine(t *testing.T) {
	r, buf, c := fake(Options{Terminal: true, Interval: time.Second})
	r.Expect(2, 0)
	r.TotalKnown()
	c.advance(time.Second)
	r.draw(false)
	r.Add(1, 0)
	r.draw(false)
	r.Add(1, 0)
	r.Stop()
	want := "\rwarm: 0/2 files, 0 files/s, 1s\x1b[K" +
		"\rwarm: 1/2 files, 1 files/s, 1s, 1s left\x1b[K" +
		"\rwarm: 2/2 files, 2 files/s, 1s\x1b[K\n"
	if buf.String() != want {
		t.Errorf("terminal output %q\nwant %q", buf.String(), want)
	}
}

func TestPlainLines(t *testing.T) {
	r, buf, c := fake(Options{Interval: time.Second})
	c.advance(time.Second)
	r.Add(1, 0)
	r.draw(false)
	r.Add(1, 0)
	r.Stop()
	want := "warm: 1 files, 1 files/s, 1s\nwarm: 2 files, 2 files/s, 1s\n"
	if buf.String() != want {
		t.Errorf("output %q\nwant %q", buf.String(), want)
	}
}

// A run shorter than an interval ends without a word.
func TestShortRunIsSilent(t *testing.T) {
	for _, term := range []bool{false, true} {
		r, buf, c := fake(Options{Terminal: term, Interval: time.Second})
		r.Add(5, 0)
		c.advance(time.Second - 1)
		r.Stop()
		if buf.Len() != 0 {
			t.Errorf("terminal %v: a run shorter than the interval printed %q", term, buf.String())
		}
	}
}

func TestQuietPrintsNothing(t *testing.T) {
	var buf bytes.Buffer
	r := Start(&buf, "warm", Options{Interval: time.Nanosecond, Quiet: true})
	r.Add(1, 1)
	time.Sleep(time.Millisecond) // many intervals
	r.Stop()
	if buf.Len() != 0 {
		t.Errorf("quiet printed %q", buf.String())
	}
}

// syncBuffer is a bytes.Buffer the drawing goroutine and the test share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The real goroutine draws a line each interval until Stop, and nothing
// after Stop has returned.
func TestStartDrawsUntilStop(t *testing.T) {
	var buf syncBuffer
	r := Start(&buf, "plan", Options{Interval: time.Millisecond})
	r.Add(7, 0)
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(buf.String(), "\n") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no two lines in 30 s of 1 ms intervals: %q", buf.String())
		}
		time.Sleep(time.Millisecond)
	}
	r.Stop()
	out := buf.String()
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.HasPrefix(l, "plan: 7 files, ") {
			t.Errorf("line %q", l)
		}
	}
	time.Sleep(5 * time.Millisecond)
	if buf.String() != out {
		t.Errorf("drew after Stop: %q", strings.TrimPrefix(buf.String(), out))
	}
}
