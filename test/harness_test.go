// Package test holds augur's integration tests: real programs (CPython,
// numpy, PIL, PyTorch, fio, coreutils, small C programs) run with
// build/libaugur.so preloaded. Which file the kernel really opened is
// observed from outside the shim with inotify, and every byte read is
// compared with the original. The tests need `make build` and the Debian
// packages test/deps.sh installs; `make integration` does both.
package test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/augur-hpc/augur/tiering"
)

// Python is Debian's interpreter, which has torch, numpy and PIL.
const Python = "/usr/bin/python3"

var repoRoot = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}()

// Lib and Augur are the built artefacts under test: copies of build/'s,
// which TestMain makes where every user can read them, since some tests
// run programs as another user and a fresh clone may sit in a directory
// only its owner can enter (/root, or mktemp's 0700).
var Lib, Augur string

func TestMain(m *testing.M) {
	dir, err := publicBuild()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%v: run `make build` (or `make integration`)\n", err)
		os.Exit(1)
	}
	Lib, Augur = filepath.Join(dir, "libaugur.so"), filepath.Join(dir, "augur")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// publicBuild copies build/'s libraries and command into a new directory
// that every user can read, and returns it.
func publicBuild() (string, error) {
	dir, err := os.MkdirTemp("", "augur-test-build-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	for _, name := range []string{"libaugur.so", "libaugur-go.so", "augur"} {
		data, err := os.ReadFile(filepath.Join(repoRoot, "build", name))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), data, 0o755)
		}
		if err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// removeJobState removes the state of job in /dev/shm, whichever user ran
// it.
func removeJobState(job string) {
	dirs, _ := filepath.Glob("/dev/shm/augur.*." + job)
	for _, d := range dirs {
		os.RemoveAll(d)
	}
}

// Case is one test's world: a dataset root, a RAM tier under /dev/shm
// and a disk tier, and the environment that points the shim at them.
type Case struct {
	T       *testing.T
	Dir     string // scratch directory
	Dataset string // the dataset root
	RAM     string // tier 0
	Disk    string // tier 1
	Env     []string
}

// NewCase makes an empty dataset and two empty tiers.
func NewCase(t *testing.T) *Case {
	t.Helper()
	dir := t.TempDir()
	ram, err := os.MkdirTemp("/dev/shm", "augur-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ram) })
	c := &Case{T: t, Dir: dir, Dataset: filepath.Join(dir, "dataset"), RAM: ram,
		Disk: filepath.Join(dir, "disk")}
	must(t, os.MkdirAll(c.Dataset, 0o755))
	job := "test-" + randHex(6)
	t.Cleanup(func() { removeJobState(job) })
	c.Env = []string{
		"AUGUR_DATASET=" + c.Dataset,
		"AUGUR_TIERS=" + c.RAM + ":1GiB," + c.Disk + ":1GiB",
		"AUGUR_JOB=" + job,
		"AUGUR_LOG=warn",
		// The cases' datasets are on a local disk or an emulated
		// shared filesystem as fast as their tiers: copied all the
		// same, as the tests of copies need (sources_test.go tests the
		// default).
		"AUGUR_PASSTHROUGH=off",
	}
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// job is the case's job id (AUGUR_JOB).
func (c *Case) job() string {
	for _, e := range c.Env {
		if v, ok := strings.CutPrefix(e, "AUGUR_JOB="); ok {
			return v
		}
	}
	c.T.Fatal("the case names no job")
	return ""
}

// Write creates a dataset file (rel to the root) and returns its path.
func (c *Case) Write(rel string, data []byte) string {
	c.T.Helper()
	p := filepath.Join(c.Dataset, rel)
	must(c.T, os.MkdirAll(filepath.Dir(p), 0o755))
	must(c.T, os.WriteFile(p, data, 0o644))
	return p
}

// RandomFiles creates n files of size random bytes under dir (rel to the
// root) and returns their paths.
func (c *Case) RandomFiles(dir string, n, size int) []string {
	var paths []string
	for i := 0; i < n; i++ {
		b := make([]byte, size)
		rand.Read(b)
		paths = append(paths, c.Write(filepath.Join(dir, fmt.Sprintf("f%03d.bin", i)), b))
	}
	return paths
}

// Set replaces or adds an environment variable of the case.
func (c *Case) Set(kv string) {
	key := kv[:strings.IndexByte(kv, '=')+1]
	for i, e := range c.Env {
		if strings.HasPrefix(e, key) {
			c.Env[i] = kv
			return
		}
	}
	c.Env = append(c.Env, kv)
}

// Warm copies the dataset into the tiers with `augur warm`.
func (c *Case) Warm() {
	c.T.Helper()
	out, err := c.Augur("warm")
	if err != nil {
		c.T.Fatalf("augur warm: %v\n%s", err, out)
	}
}

// Augur runs the augur command with the case's environment.
func (c *Case) Augur(args ...string) (string, error) {
	cmd := exec.Command(Augur, args...)
	cmd.Env = append(os.Environ(), c.Env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// AugurRun runs `augur run ARGS` with the case's environment and returns
// what it printed on stdout and stderr; it fails the test if the command
// fails, or runs for five minutes (a hang).
func (c *Case) AugurRun(args ...string) (string, string) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Augur, append([]string{"run"}, args...)...)
	cmd.WaitDelay = 10 * time.Second // a child left holding stdout must not hang the test
	cmd.Env = append(os.Environ(), c.Env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.T.Fatalf("augur run %v: %v\n%s", args, err, stderr.String())
	}
	return string(out), stderr.String()
}

// tierUsage is what the tier at dir holds.
func tierUsage(t *testing.T, dir string) tiering.Usage {
	t.Helper()
	tr, err := tiering.Open(tiering.Tier{Path: dir})
	must(t, err)
	defer tr.Close()
	return tr.Usage()
}

// CopyOf is the path of the copy of a dataset file in tier (c.RAM or
// c.Disk).
func (c *Case) CopyOf(tier, path string) string {
	p, err := tiering.CopyPath(tier, path)
	must(c.T, err)
	return p
}

// Result is what a program run printed.
type Result struct {
	Stdout, Stderr string
	Err            error
}

// Run runs a program with the shim preloaded and the case's environment,
// killing it after timeout (a hang is a failure, never a wait forever).
func (c *Case) Run(timeout time.Duration, name string, args ...string) Result {
	return c.run(timeout, true, name, args...)
}

// RunPlain runs the same program without the shim, for comparisons.
func (c *Case) RunPlain(timeout time.Duration, name string, args ...string) Result {
	return c.run(timeout, false, name, args...)
}

func (c *Case) run(timeout time.Duration, preload bool, name string, args ...string) Result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), c.Env...)
	if preload {
		cmd.Env = append(cmd.Env, "LD_PRELOAD="+Lib)
	}
	cmd.Dir = c.Dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v (hang): %w", timeout, err)
	}
	return Result{out.String(), errb.String(), err}
}

// MustRun is Run that fails the test on a non-zero exit.
func (c *Case) MustRun(timeout time.Duration, name string, args ...string) Result {
	c.T.Helper()
	r := c.Run(timeout, name, args...)
	if r.Err != nil {
		c.T.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", name, args, r.Err, r.Stdout, r.Stderr)
	}
	return r
}
