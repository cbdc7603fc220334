// Package progress shows how far a long command has got: files and bytes
// done, the rate, and the time left once the totals are known.
//
// The workers of the command feed a Reporter from any goroutine (Add, and
// Expect while the totals are still being found: atomics, no lock); the
// Reporter draws on its own goroutine every Interval. On a terminal it
// redraws one line in place, as fio and rsync do; elsewhere (a log, a
// pipe) it prints a plain line each time. A run shorter than one interval
// prints nothing at all; a longer one ends, at Stop, with a line of the
// final figures.
//
//	r := progress.Start(os.Stderr, "warm", progress.For(os.Stderr))
//	go walk(func(size int64) { r.Expect(1, size) }) // then r.TotalKnown()
//	... r.Add(1, n) from each copy ...
//	r.Stop()
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Options say how a Reporter draws.
type Options struct {
	Terminal bool          // redraw one line in place; else print a line each Interval
	Interval time.Duration // between draws; must be positive unless Quiet
	Quiet    bool          // draw nothing (the counts are still taken)
	Bytes    bool          // the work is measured in bytes too: show them, and the rate in bytes
	Unit     string        // what is counted; "files" when empty
}

// For returns the options for drawing on f: a redraw every quarter of a
// second on a terminal, a line every 5 s otherwise.
func For(f *os.File) Options {
	if IsTerminal(f) {
		return Options{Terminal: true, Interval: 250 * time.Millisecond}
	}
	return Options{Interval: 5 * time.Second}
}

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// A Reporter counts work done and draws it. Its methods but Stop may be
// called from any goroutine.
type Reporter struct {
	files, bytes           atomic.Int64 // done
	totalFiles, totalBytes atomic.Int64 // expected so far
	known                  atomic.Bool  // the totals are final

	w     io.Writer
	label string
	opt   Options
	now   func() time.Time // time.Now; a test's clock
	start time.Time
	stop  chan struct{} // closed by Stop
	done  chan struct{} // closed when the drawing goroutine has returned
}

// Start returns a Reporter drawing on w, each line starting with label,
// and starts its clock. The caller must Stop it.
func Start(w io.Writer, label string, opt Options) *Reporter {
	r := newReporter(w, label, opt, time.Now)
	if !opt.Quiet {
		go r.run()
	}
	return r
}

func newReporter(w io.Writer, label string, opt Options, now func() time.Time) *Reporter {
	if opt.Unit == "" {
		opt.Unit = "files"
	}
	return &Reporter{w: w, label: label, opt: opt, now: now, start: now(),
		stop: make(chan struct{}), done: make(chan struct{})}
}

// Add counts files and bytes done.
func (r *Reporter) Add(files, bytes int64) {
	r.files.Add(files)
	r.bytes.Add(bytes)
}

// Expect adds files and bytes to the totals. A time left is shown only
// once TotalKnown has been called.
func (r *Reporter) Expect(files, bytes int64) {
	r.totalFiles.Add(files)
	r.totalBytes.Add(bytes)
}

// TotalKnown says that everything has been Expected.
func (r *Reporter) TotalKnown() { r.known.Store(true) }

// Stop stops drawing and, if the run lasted an interval or more, draws
// the final figures and ends the line. It must be called once.
func (r *Reporter) Stop() {
	if r.opt.Quiet {
		return
	}
	close(r.stop)
	<-r.done
	if r.now().Sub(r.start) >= r.opt.Interval {
		r.draw(true)
	}
}

func (r *Reporter) run() {
	defer close(r.done)
	t := time.NewTicker(r.opt.Interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.draw(false)
		}
	}
}

// draw writes the current line; last ends a terminal's line.
func (r *Reporter) draw(last bool) {
	line := r.line(r.now())
	switch {
	case !r.opt.Terminal:
		fmt.Fprintln(r.w, line)
	case last:
		fmt.Fprintf(r.w, "\r%s\x1b[K\n", line) // ESC[K erases what a longer line left
	default:
		fmt.Fprintf(r.w, "\r%s\x1b[K", line)
	}
}

// line is what is drawn at now, for example
//
//	warm: 12345/20000 files, 1.3/2.1 GiB, 210.3 MiB/s, 6s, 4s left
func (r *Reporter) line(now time.Time) string {
	// known before the totals, done before the totals: whatever was
	// Expected before it was Added or declared complete is then seen.
	known := r.known.Load()
	files, bytes := r.files.Load(), r.bytes.Load()
	totalFiles, totalBytes := r.totalFiles.Load(), r.totalBytes.Load()
	elapsed := now.Sub(r.start)

	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d", r.label, files)
	if known {
		fmt.Fprintf(&b, "/%d", totalFiles)
	}
	fmt.Fprintf(&b, " %s", r.opt.Unit)
	if r.opt.Bytes {
		if known {
			fmt.Fprintf(&b, ", %s", formatSizes(bytes, totalBytes))
		} else {
			fmt.Fprintf(&b, ", %s", formatSize(float64(bytes)))
		}
	}
	if s := elapsed.Seconds(); s > 0 {
		if r.opt.Bytes {
			fmt.Fprintf(&b, ", %s/s", formatSize(float64(bytes)/s))
		} else {
			fmt.Fprintf(&b, ", %.0f %s/s", float64(files)/s, r.opt.Unit)
		}
	}
	fmt.Fprintf(&b, ", %s", elapsed.Round(time.Second))
	if known {
		left, ok := timeLeft(elapsed, files, totalFiles)
		if r.opt.Bytes {
			bl, bok := timeLeft(elapsed, bytes, totalBytes)
			left, ok = max(left, bl), ok && bok
		}
		if ok && left > 0 {
			fmt.Fprintf(&b, ", %s left", left.Round(time.Second))
		}
	}
	return b.String()
}

// timeLeft is the time the rest of total needs at the average rate so
// far; false when nothing is done yet to tell the rate.
func timeLeft(elapsed time.Duration, done, total int64) (time.Duration, bool) {
	switch {
	case done >= total:
		return 0, true
	case done <= 0:
		return 0, false
	}
	return time.Duration(float64(elapsed) * float64(total-done) / float64(done)), true
}

var units = []string{"B", "KiB", "MiB", "GiB", "TiB"}

// scale picks the binary unit of n, as augur's other output prints sizes.
func scale(n float64) (div float64, unit string) {
	div, u := 1.0, 0
	for n >= 1024*div && u < len(units)-1 {
		div *= 1024
		u++
	}
	return div, units[u]
}

func formatSize(n float64) string {
	div, unit := scale(n)
	if unit == "B" {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n/div, unit)
}

// formatSizes prints "done/total unit" in the unit of total.
func formatSizes(done, total int64) string {
	div, unit := scale(float64(total))
	if unit == "B" {
		return fmt.Sprintf("%d/%d B", done, total)
	}
	return fmt.Sprintf("%.1f/%.1f %s", float64(done)/div, float64(total)/div, unit)
}
