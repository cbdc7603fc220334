package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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
	job := c.job()

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

// libaugur.so copied somewhere without libaugur-go.so beside it: a
// process that would have to lead says once that it cannot load the
// control plane and runs unaccelerated, with the right bytes; under
// augur run, whose processes take the published configuration, the copy
// alone is enough and serves from the tier.
func TestPreloadWithoutGoHalf(t *testing.T) {
	c := NewCase(t)
	f := c.RandomFiles("d", 1, 30_000)[0]
	want, err := os.ReadFile(f)
	must(t, err)
	c.Warm()
	lone := filepath.Join(c.Dir, "lib", "libaugur.so")
	must(t, os.MkdirAll(filepath.Dir(lone), 0o755))
	b, err := os.ReadFile(Lib)
	must(t, err)
	must(t, os.WriteFile(lone, b, 0o755))

	cmd := exec.Command("cat", f)
	cmd.Env = append(append(os.Environ(), c.Env...), "LD_PRELOAD="+lone)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || string(out) != string(want) {
		t.Fatalf("cat with a lone libaugur.so: %v, %d bytes (want %d)\n%s", err, len(out), len(want), stderr.String())
	}
	if n := strings.Count(stderr.String(), "cannot load the control plane"); n != 1 || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("want one message naming the missing control plane, got:\n%s", stderr.String())
	}

	out2, stderr2 := c.AugurRun("--lib", lone, "--", "cat", f)
	if out2 != string(want) || stderr2 != "" {
		t.Fatalf("augur run --lib with a lone libaugur.so: %d bytes (want %d), stderr %q", len(out2), len(want), stderr2)
	}
	if st := jobStats(t, c, c.job()); len(st.Tiers) == 0 || st.Tiers[0].Hits != 1 {
		t.Errorf("under augur run the lone preload did not serve from the tier: %+v", st.Tiers)
	}
}
