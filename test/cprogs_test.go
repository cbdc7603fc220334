package test

// Helpers shared by the POSIX, error, fork, staleness and bad-input tests:
// building the small C programs of test/c, hashing what they print, and
// bringing a job's leader up before a measured run.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/augur-hpc/augur/shim"
)

// compileTestC builds test/c/<name>.c into dir with every warning an error
// and returns the executable. Extra arguments go to gcc after the source
// (flags, libraries).
func compileTestC(t *testing.T, dir, name string, extra ...string) string {
	t.Helper()
	src := filepath.Join(repoRoot, "test", "c", name+".c")
	out := filepath.Join(dir, name)
	args := append([]string{"-Wall", "-Wextra", "-Werror", "-o", out, src}, extra...)
	if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, b)
	}
	return out
}

// fnv64Hex is the FNV-1a 64 hash the C programs print, as 16 hex digits.
func fnv64Hex(b []byte) string {
	h := uint64(1469598103934665603)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return fmt.Sprintf("%016x", h)
}

// primeJob brings the case's job to the state a long-running job is in:
// a preloaded `sleep` (run as nobody when asNobody is set) leads the job until the
// segment says the tiers are validated, and then exits. The flag stays set
// in the segment, so every later process of the job is served from the
// tiers from its first open, which is what the Observer assertions need.
func primeJob(c *Case, asNobody ...bool) {
	c.T.Helper()
	holdJob(c, asNobody...)()
}

// holdJob is primeJob that leaves the leader running (it returns once the
// process leads and the segment is ready); call stop to end it.
func holdJob(c *Case, asNobody ...bool) (stop func()) {
	c.T.Helper()
	argv := []string{"sleep", "60"}
	stat := func(job string) (shim.Stats, error) {
		seg, err := shim.OpenSegment(shim.SegmentPath(job))
		if err != nil {
			return shim.Stats{}, err
		}
		defer seg.Close()
		return seg.Stats(), nil
	}
	if len(asNobody) > 0 && asNobody[0] {
		// nobody's job state is nobody's own: ask as nobody.
		argv = nobody.argv(true, argv...)
		stat = func(job string) (shim.Stats, error) {
			a := nobody.argv(false, Augur, "stat", "--json", "--job", job)
			out, err := exec.Command(a[0], a[1:]...).Output()
			var st shim.Stats
			if err == nil {
				err = json.Unmarshal(out, &st)
			}
			return st, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), c.Env...)
	if argv[0] == "sleep" {
		cmd.Env = append(cmd.Env, "LD_PRELOAD="+Lib)
	}
	cmd.Dir = c.Dir
	var errb strings.Builder
	cmd.Stderr = &errb
	must(c.T, cmd.Start())
	stop = func() { cancel(); cmd.Wait() }
	job := c.job()
	deadline := time.Now().Add(20 * time.Second)
	var segErr error
	for time.Now().Before(deadline) {
		var st shim.Stats
		if st, segErr = stat(job); segErr == nil && st.Ready && st.LeaderPID == cmd.Process.Pid {
			return stop
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	c.T.Fatalf("job %s: %v did not lead the job with validated tiers within 20s (segment: %v; a library and test built from different preload/segment.h?)\nstderr:\n%s",
		job, argv, segErr, errb.String())
	return nil
}

// account is a user the tests run programs as.
type account struct {
	uid, gid int
	name     string
}

// nobody is the unprivileged identity of the permission tests.
var nobody = account{65534, 65534, "nobody"}

// argv is a command line that runs args as a, with the shim preloaded
// when preload is set. setpriv itself never carries the shim: a root
// process attaching to the job would create its state as root, and the
// user could not use it.
func (a account) argv(preload bool, args ...string) []string {
	cmd := []string{"setpriv", fmt.Sprintf("--reuid=%d", a.uid), fmt.Sprintf("--regid=%d", a.gid),
		"--clear-groups", "env"}
	if preload {
		cmd = append(cmd, "LD_PRELOAD="+Lib)
	}
	return append(cmd, args...)
}

// nobodyTiers gives the case new tiers of nobody's own (a RAM one, which
// it returns, and a disk one): nobody's jobs trust no other user's tiers.
func nobodyTiers(t *testing.T, c *Case) string {
	t.Helper()
	ram, err := os.MkdirTemp("/dev/shm", "augur-test-nobody-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(ram) })
	disk := filepath.Join(c.Dir, "nobody-disk")
	must(t, os.Mkdir(disk, 0o700))
	for _, d := range []string{ram, disk} {
		must(t, os.Chown(d, nobody.uid, nobody.gid))
	}
	c.Set("AUGUR_TIERS=" + ram + ":1GiB," + disk + ":1GiB")
	return ram
}

// warmAsNobody runs `augur warm` as nobody with the case's environment.
// Files nobody may not read are errors of warm's, not of the test's.
func warmAsNobody(t *testing.T, c *Case) {
	t.Helper()
	a := nobody.argv(false, Augur, "warm")
	cmd := exec.Command(a[0], a[1:]...)
	cmd.Env = append(os.Environ(), c.Env...)
	if out, err := cmd.CombinedOutput(); !strings.Contains(string(out), "files already warm") {
		t.Fatalf("augur warm as nobody: %v\n%s", err, out)
	}
}

// openUp makes the case's directories (and the parents t.TempDir made
// private) traversable by everyone, for runs as nobody.
func openUp(t *testing.T, c *Case) {
	t.Helper()
	for _, d := range []string{filepath.Dir(c.Dir), c.Dir, c.Dataset, c.RAM} {
		must(t, os.Chmod(d, 0o755))
	}
}

// augurLines are the lines of a program's stderr that the shim wrote.
func augurLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "augur:") {
			out = append(out, l)
		}
	}
	return out
}
