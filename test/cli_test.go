package test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// augurOut runs augur with the case's environment and returns its stdout,
// its stderr and its exit status.
func (c *Case) augurOut(env []string, args ...string) (string, string, int) {
	c.T.Helper()
	cmd := exec.Command(Augur, args...)
	cmd.Env = append(append(os.Environ(), c.Env...), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		c.T.Fatalf("augur %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// Warming 300 files takes well over 100 µs on any machine (each copy is
// several system calls), so a line is due: the final one at least.
const progressEnv = "AUGUR_PROGRESS_INTERVAL=100us"

// Not on a terminal, augur warm prints plain progress lines on stderr and
// ends with the final figures; stdout is the summary alone.
func TestWarmProgressLines(t *testing.T) {
	c := NewCase(t)
	c.RandomFiles("cls", 300, 4096)
	stdout, stderr, status := c.augurOut([]string{progressEnv}, "warm")
	if status != 0 {
		t.Fatalf("augur warm exited %d\n%s%s", status, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	for _, l := range lines {
		if !strings.HasPrefix(l, "warm: ") || strings.ContainsAny(l, "\r\x1b") {
			t.Errorf("stderr line %q is no plain progress line", l)
		}
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "warm: 300/300 files, 1.2/1.2 MiB, ") {
		t.Errorf("last progress line %q, want the final figures", last)
	}
	if strings.Contains(stdout, "warm: ") || !strings.Contains(stdout, "copied 300 files") {
		t.Errorf("stdout is not the summary alone:\n%s", stdout)
	}
}

func TestWarmQuiet(t *testing.T) {
	c := NewCase(t)
	c.RandomFiles("cls", 300, 4096)
	stdout, stderr, status := c.augurOut([]string{progressEnv}, "warm", "--quiet")
	if status != 0 || stderr != "" || !strings.Contains(stdout, "copied 300 files") {
		t.Fatalf("augur warm --quiet exited %d, stderr %q, stdout\n%s", status, stderr, stdout)
	}
}

// On a terminal (script(1) gives augur a pty), progress is one line
// redrawn in place and ended by a newline.
func TestWarmProgressOnTerminal(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Fatal("script(1), from util-linux's bsdutils, runs augur on a terminal: install it")
	}
	c := NewCase(t)
	c.RandomFiles("cls", 300, 4096)
	cmd := exec.Command(script, "-qec", Augur+" warm", "/dev/null")
	cmd.Env = append(append(os.Environ(), c.Env...), progressEnv)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("script -c 'augur warm': %v\n%q", err, out)
	}
	// The pty turns "\n" into "\r\n".
	progress, summary, ok := strings.Cut(string(out), "\x1b[K\r\n")
	if !ok || !strings.HasPrefix(progress, "\rwarm: ") || strings.Contains(progress, "\n") {
		t.Fatalf("no single redrawn line before the summary: %q", out)
	}
	redraws := strings.Split(progress, "\x1b[K")
	if last := redraws[len(redraws)-1]; !strings.HasPrefix(last, "\rwarm: 300/300 files, ") {
		t.Errorf("final figures %q", last)
	}
	if !strings.Contains(summary, "copied 300 files") || strings.Contains(summary, "warm: ") {
		t.Errorf("summary %q", summary)
	}
}

// augur run reports a command it cannot run as a shell does: status 127
// when there is no such command, 126 when it cannot be executed, and one
// line on stderr. The last two fail only at exec, after the job is led.
func TestRunCommandThatCannotRun(t *testing.T) {
	c := NewCase(t)
	dir := t.TempDir()
	noInterp := filepath.Join(dir, "no-interpreter.sh")
	must(t, os.WriteFile(noInterp, []byte("#!/nonexistent/interpreter\n"), 0o755))
	junk := filepath.Join(dir, "junk")
	must(t, os.WriteFile(junk, []byte{0, 1, 2, 3}, 0o755))
	for _, tc := range []struct {
		cmd    string
		status int
		why    string
	}{
		{"/nonexistent/cmd", 127, "command not found"},
		{"augur-no-such-command", 127, "command not found"},
		{"/etc/passwd", 126, "permission denied"},
		{"/tmp", 126, "is a directory"},
		{noInterp, 127, "cannot execute: required file not found (its #! interpreter?)"},
		{junk, 126, "exec format error"},
	} {
		stdout, stderr, status := c.augurOut(nil, "run", "--", tc.cmd, "arg")
		want := "augur: run: " + tc.cmd + ": " + tc.why + "\n"
		if status != tc.status || stderr != want || stdout != "" {
			t.Errorf("augur run -- %s: exit %d, stderr %q, stdout %q; want exit %d, stderr %q",
				tc.cmd, status, stderr, stdout, tc.status, want)
		}
	}
}

// augur plan reports its two phases, listing and stat'ing, each ending
// with its final figures: reading a directory of 300 entries, or stat'ing
// 300 files, takes longer than 1 µs.
func TestPlanProgressLines(t *testing.T) {
	c := NewCase(t)
	for i := range 300 {
		c.Write(fmt.Sprintf("cls/%03d.jpg", i), []byte("jpeg"))
	}
	stdout, stderr, status := c.augurOut([]string{"AUGUR_PROGRESS_INTERVAL=1us"}, "plan", "--seed", "3")
	if status != 0 || !strings.HasPrefix(stdout, "dataset "+c.Dataset+": 300 files") {
		t.Fatalf("augur plan exited %d\n%s%s", status, stdout, stderr)
	}
	var listing, stating []string
	for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "plan: listing the dataset: "):
			listing = append(listing, l)
		case strings.HasPrefix(l, "plan: stat'ing the files: "):
			stating = append(stating, l)
		default:
			t.Errorf("stderr line %q is no progress line", l)
		}
	}
	// 301: the root's entry cls/ and cls/'s 300 files, every directory being walked.
	if len(listing) == 0 || !strings.HasPrefix(listing[len(listing)-1], "plan: listing the dataset: 301 entries, ") {
		t.Errorf("listing ends with %q, want 301 entries", listing)
	}
	if len(stating) == 0 || !strings.HasPrefix(stating[len(stating)-1], "plan: stat'ing the files: 300/300 files, ") {
		t.Errorf("stat'ing ends with %q, want 300/300 files", stating)
	}
	if stdout, stderr, _ := c.augurOut([]string{"AUGUR_PROGRESS_INTERVAL=1us"}, "plan", "--quiet"); stderr != "" || stdout == "" {
		t.Errorf("augur plan --quiet printed %q on stderr", stderr)
	}
}

// --peers and --rendezvous stand for AUGUR_PEERS and AUGUR_RENDEZVOUS: a
// membership they leave incomplete (no secret for listed peers, no job id
// for a rendezvous) is named by augur check, and augur run runs the
// command all the same, the node alone.
func TestPeerFlags(t *testing.T) {
	c := NewCase(t)
	c.Set("AUGUR_NODES=2")
	c.Set("AUGUR_NODE_RANK=0")
	c.Set("AUGUR_JOB=") // no job id the nodes share
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--peers", "127.0.0.1:7001,127.0.0.2:7001"}, "a listed set of peers needs a secret"},
		{[]string{"--rendezvous", filepath.Join(c.Dir, "rv")}, "AUGUR_RENDEZVOUS) needs a job id"},
	} {
		out, err := c.Augur(append([]string{"check"}, tc.flags...)...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("augur check %v: %v, output:\n%s\nwant a failure saying %q", tc.flags, err, out, tc.want)
		}
		c.AugurRun(append(tc.flags, "--", "true")...) // fails the test unless the command runs
	}
}
