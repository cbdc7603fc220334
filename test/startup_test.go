package test

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// threadsOf is the thread count a process printed with
// `grep Threads /proc/self/status`.
func threadsOf(t *testing.T, out string) int {
	t.Helper()
	m := regexp.MustCompile(`Threads:\s+(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no thread count in %q", out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// A process that starts while its job's leader lives takes the published
// configuration from the segment and runs the data plane alone: no Go
// runtime, so a single-threaded program stays single-threaded, and its
// dataset reads are still served from the tiers. A process that finds no
// live leader loads the Go half, reads the configuration itself and
// leads.
func TestJobProcessesRunWithoutGo(t *testing.T) {
	c := NewCase(t)
	f := c.RandomFiles("d", 1, 50_000)[0]
	want, err := os.ReadFile(f)
	must(t, err)
	c.Warm()
	job := jobOfCase(c)

	out, _ := c.AugurRun("--", "cat", f)
	if out != string(want) {
		t.Fatalf("cat under augur run: %d bytes, want %d", len(out), len(want))
	}
	st := jobStats(t, c, job)
	if st.Opens != 1 || len(st.Tiers) == 0 || st.Tiers[0].Hits != 1 {
		t.Errorf("the read under augur run was not served from the RAM tier: %+v", st)
	}
	if st.Events != 1 { // the open; the static policy reads no close events
		t.Errorf("%d events for one open and close under the static policy, want 1", st.Events)
	}
	out, _ = c.AugurRun("--", "grep", "Threads", "/proc/self/status")
	if n := threadsOf(t, out); n != 1 {
		t.Errorf("a process under augur run has %d threads, want 1 (no Go runtime)", n)
	}

	r := c.MustRun(30*time.Second, "grep", "Threads", "/proc/self/status")
	if n := threadsOf(t, r.Stdout); n < 2 {
		t.Errorf("the first process of a job has %d threads: it did not start the Go half", n)
	}
}
