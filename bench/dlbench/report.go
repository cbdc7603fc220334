package dlbench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// WriteTable prints r as fio prints a job: a header line, one row per
// epoch, and the PFS counters when there are some.
func WriteTable(w io.Writer, r *Result) {
	fmt.Fprintf(w, "%s: %s\n", r.Name, r.Workload.Describe())
	fmt.Fprintf(w, "  dataset %s, read from %s", r.Dataset, r.Root)
	if r.Preload != "" {
		fmt.Fprintf(w, ", preload %s", r.Preload)
	}
	fmt.Fprintln(w)
	pfs := len(r.Epochs) > 0 && r.Epochs[0].PFS != nil
	fmt.Fprintf(w, "  %5s %8s %9s %8s  %8s %8s %8s %8s  %8s %7s", "epoch", "time(s)", "samples/s", "MB/s",
		"p50(us)", "p95", "p99", "p99.9", "stall(s)", "errors")
	if r.Workload.Verify {
		fmt.Fprintf(w, " %7s", "wrong")
	}
	if pfs {
		fmt.Fprintf(w, "  %8s %8s %8s %8s", "pfs-open", "pfs-read", "pfs-MB", "pfs-meta")
	}
	fmt.Fprintln(w)
	for _, e := range r.Epochs {
		fmt.Fprintf(w, "  %5d %8.3f %9.0f %8.1f  ", e.Epoch, e.Seconds, e.SamplesPerSec, e.MBPerSec)
		if l := e.Latency; l != nil {
			fmt.Fprintf(w, "%8.0f %8.0f %8.0f %8.0f", l.P50, l.P95, l.P99, l.P999)
		} else {
			fmt.Fprintf(w, "%8s %8s %8s %8s", "-", "-", "-", "-")
		}
		fmt.Fprintf(w, "  %8.3f %7d", e.Stall, e.Errors)
		if r.Workload.Verify {
			fmt.Fprintf(w, " %7d", e.Corrupt)
		}
		if p := e.PFS; p != nil {
			fmt.Fprintf(w, "  %8d %8d %8.1f %8d", p.Opens, p.Reads, float64(p.ReadBytes)/1e6, MetaOps(p))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  total %.3fs in epochs, %.3fs process wall time (%.3fs start-up and exit)\n",
		r.TotalSeconds(), r.Seconds, r.Overhead)
	if s := strings.TrimSpace(r.Stderr); s != "" {
		fmt.Fprintf(w, "  reader stderr:%s\n", indentTail(s))
	}
}

// ProgressLine draws a one-line live progress display on a terminal:
// job, epoch, samples, throughput and an ETA. It draws nothing when its
// writer is not a terminal.
type ProgressLine struct {
	mu   sync.Mutex
	w    io.Writer
	on   bool
	last time.Time
	wide int
}

// NewProgressLine returns a progress line on f, active when f is a
// terminal.
func NewProgressLine(f *os.File) *ProgressLine {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return &ProgressLine{w: f, on: err == nil}
}

// Active says whether the line draws anything.
func (p *ProgressLine) Active() bool { return p != nil && p.on }

// Func returns a Progress callback for the job name.
func (p *ProgressLine) Func(name string) func(Progress) {
	if !p.Active() {
		return nil
	}
	return func(pr Progress) {
		rate := 0.0
		if pr.Elapsed > 0 {
			rate = float64(pr.Done) / pr.Elapsed.Seconds()
		}
		eta := "?"
		if rate > 0 {
			left := float64(pr.Total-pr.Done) / rate
			if pr.Last != nil {
				left += float64(pr.Epochs-pr.Epoch) * pr.Last.Seconds
			} else {
				left += float64(pr.Epochs-pr.Epoch) * float64(pr.Total) / rate
			}
			eta = (time.Duration(left*10) * time.Second / 10).String()
		}
		p.Printf("%s: epoch %d/%d  %d/%d samples  %.0f samples/s  ETA %s", name, pr.Epoch, pr.Epochs,
			pr.Done, pr.Total, rate, eta)
	}
}

// Printf replaces the line (at most 10 times a second).
func (p *ProgressLine) Printf(format string, args ...any) {
	if !p.Active() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	s := fmt.Sprintf(format, args...)
	fmt.Fprintf(p.w, "\r%-*s", p.wide, s)
	p.wide = len(s)
}

// Clear erases the line.
func (p *ProgressLine) Clear() {
	if !p.Active() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wide > 0 {
		fmt.Fprintf(p.w, "\r%*s\r", p.wide, "")
		p.wide = 0
	}
	p.last = time.Time{}
}
