package pfsemu

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCommandBadFlags: each bad command line gives exit 2 and one line
// on stderr naming the problem.
func TestCommandBadFlags(t *testing.T) {
	src, mnt := t.TempDir(), t.TempDir()
	base := []string{"--source", src, "--mount", mnt}
	for _, tt := range []struct {
		args []string
		want string // in the error line
	}{
		{[]string{"--mount", mnt}, "--source"},
		{append(base, "--bandwidth", "fast"), "bandwidth"},
		{append(base, "--bandwidth", "200Mbit/s"), "unknown unit"},
		{append(base, "--bandwidth-curve", "1:200MiB/s,1:300MiB/s"), "increase"},
		{append(base, "--bandwidth-curve", "2-300MiB/s"), "readers:rate"},
		{append(base, "--bandwidth", "1GiB/s", "--bandwidth-curve", "1:1GiB/s"), "not both"},
		{append(base, "--fail-rate", "2"), "fail rate"},
		{append(base, "--stall", "1s"), "--stall-every"},
		{append(base, "--open-latency", "soon"), "open-latency"},
		{append(base, "--stats-file", filepath.Join(src, "s.json")), "stats file"},
		{append(base, "--ready-file", filepath.Join(mnt, "ready")), "ready-file"},
		{append(base, "--no-such-flag"), "no-such-flag"},
		{append(base, "extra"), "unexpected argument"},
	} {
		var stdout, stderr bytes.Buffer
		code := Command(tt.args, &stdout, &stderr)
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if code != ExitUsage || len(lines) != 1 || !strings.Contains(lines[0], tt.want) || stdout.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit 2 and one line about %q",
				tt.args, code, stderr.String(), stdout.String(), tt.want)
		}
	}

	var stdout, stderr bytes.Buffer
	if code := Command([]string{"-h"}, &stdout, &stderr); code != ExitOK || !strings.Contains(stdout.String(), "--source") && !strings.Contains(stdout.String(), "-source") {
		t.Errorf("-h: exit %d, stdout %q", code, stdout.String())
	}
}

// emulator is `augur pfsemu` running in a child process (this test
// binary, see TestMain).
type emulator struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	exited         chan struct{}
}

func startEmulator(t *testing.T, readyFile string, args ...string) *emulator {
	t.Helper()
	e := &emulator{exited: make(chan struct{})}
	e.cmd = exec.Command(os.Args[0], append(args, "--ready-file", readyFile)...)
	e.cmd.Env = append(os.Environ(), "PFSEMU_TEST_COMMAND=1")
	e.cmd.Stdout, e.cmd.Stderr = &e.stdout, &e.stderr
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { e.cmd.Wait(); close(e.exited) }()
	t.Cleanup(func() {
		e.cmd.Process.Kill()
		<-e.exited
	})
	deadline := time.After(10 * time.Second)
	for {
		if _, err := os.Stat(readyFile); err == nil {
			return e
		}
		select {
		case <-e.exited:
			t.Fatalf("emulator exited before it was ready: %v\nstdout: %s\nstderr: %s", e.cmd.ProcessState, &e.stdout, &e.stderr)
		case <-deadline:
			t.Fatalf("emulator not ready after 10s\nstdout: %s\nstderr: %s", &e.stdout, &e.stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (e *emulator) wait(t *testing.T) {
	t.Helper()
	select {
	case <-e.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("emulator still running 10s after it was told to stop\nstdout: %s\nstderr: %s", &e.stdout, &e.stderr)
	}
}

// detachAtCleanup makes sure no test leaves a mount behind, whatever
// happens to the emulator.
func detachAtCleanup(t *testing.T, mnt string) {
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
}

// TestCommandSignals: SIGTERM and SIGINT unmount cleanly, exit 0, leave
// the final stats and remove the ready file.
func TestCommandSignals(t *testing.T) {
	requireFUSE(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			src, mnt, dir := t.TempDir(), t.TempDir(), t.TempDir()
			detachAtCleanup(t, mnt)
			writeFile(t, filepath.Join(src, "a"), content("a", 1000))
			ready, statsFile := filepath.Join(dir, "ready"), filepath.Join(dir, "stats.json")
			e := startEmulator(t, ready, "--source", src, "--mount", mnt, "--direct-io",
				"--stats-file", statsFile, "--open-latency", "1ms")

			var r struct {
				Pid   int    `json:"pid"`
				Mount string `json:"mount"`
			}
			data, _ := os.ReadFile(ready)
			if err := json.Unmarshal(data, &r); err != nil || r.Pid != e.cmd.Process.Pid || r.Mount != mnt {
				t.Errorf("ready file %q (%v); want pid %d, mount %s", data, err, e.cmd.Process.Pid, mnt)
			}
			if _, ok := mountedOn(mnt); !ok {
				t.Fatalf("%s is not a mount point while the emulator is ready", mnt)
			}
			fd := openR(t, filepath.Join(mnt, "a"))
			if got := readAll(t, fd, 4096); !bytes.Equal(got, content("a", 1000)) {
				t.Errorf("read %d bytes through the emulator, not the file", len(got))
			}
			closeFd(t, fd)

			e.cmd.Process.Signal(sig)
			e.wait(t)
			if code := e.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("exit code %d after %v\nstdout: %s\nstderr: %s", code, sig, &e.stdout, &e.stderr)
			}
			if fstype, ok := mountedOn(mnt); ok {
				t.Errorf("%s is still mounted (%s) after %v", mnt, fstype, sig)
			}
			if entries, err := os.ReadDir(mnt); err != nil || len(entries) != 0 {
				t.Errorf("mount point after exit: %d entries, %v", len(entries), err)
			}
			if _, err := os.Stat(ready); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("ready file left behind: %v", err)
			}
			var st Stats
			data, _ = os.ReadFile(statsFile)
			if err := json.Unmarshal(data, &st); err != nil || st.Opens != 1 || st.ReadBytes != 1000 {
				t.Errorf("final stats file %s (%v): want 1 open and 1000 bytes", data, err)
			}
		})
	}
}

// TestCommandExternalUnmount: when someone else unmounts the mount point
// the emulator notices, writes its stats and exits 0.
func TestCommandExternalUnmount(t *testing.T) {
	requireFUSE(t)
	src, mnt, dir := t.TempDir(), t.TempDir(), t.TempDir()
	detachAtCleanup(t, mnt)
	e := startEmulator(t, filepath.Join(dir, "ready"), "--source", src, "--mount", mnt)
	if err := unix.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	e.wait(t)
	if code := e.cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(e.stdout.String(), "unmounted from outside") {
		t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, &e.stdout, &e.stderr)
	}
}

// TestStaleMountCleared: an emulator killed with SIGKILL leaves a dead
// mount (ENOTCONN); the next Mount detaches it with one message and
// serves.
func TestStaleMountCleared(t *testing.T) {
	requireFUSE(t)
	src, mnt, dir := t.TempDir(), t.TempDir(), t.TempDir()
	detachAtCleanup(t, mnt)
	writeFile(t, filepath.Join(src, "a"), content("a", 100))
	e := startEmulator(t, filepath.Join(dir, "ready"), "--source", src, "--mount", mnt)
	e.cmd.Process.Signal(syscall.SIGKILL)
	e.wait(t)

	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != unix.ENOTCONN {
		t.Fatalf("stat of the killed emulator's mount point: %v, want ENOTCONN (a stale mount)", err)
	}
	logs := &logBuffer{}
	srv, err := Mount(Options{Source: src, Mount: mnt, Logf: logs.logf})
	if err != nil {
		t.Fatalf("Mount over a stale mount: %v", err)
	}
	defer srv.Unmount()
	if n := logs.count("stale"); n != 1 {
		t.Errorf("%d messages about the stale mount, want 1; logs:\n%s", n, logs)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "a")); err != nil || !bytes.Equal(got, content("a", 100)) {
		t.Errorf("reading through the new mount: %v", err)
	}
}
