package pfsemu

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMain doubles as the emulator command: with PFSEMU_TEST_COMMAND set
// the test binary runs Command on its arguments, so tests can signal and
// kill a real emulator process.
//
// Otherwise it guards against a hazard of serving FUSE and using the mount
// in one process: when the process exits, the kernel closes its files one
// by one after its threads are gone, and a file still open in its own
// mount (leaked by a failed test) sends a FLUSH that nobody will ever
// answer, leaving an unkillable process. Closing the process's /dev/fuse
// descriptors first aborts its connections, so that every pending and
// future request fails with ENOTCONN instead. That is done after the
// tests, on SIGINT/SIGTERM/SIGHUP, and shortly before -test.timeout fires.
// Nothing helps against SIGKILL.
func TestMain(m *testing.M) {
	if os.Getenv("PFSEMU_TEST_COMMAND") != "" {
		os.Exit(Command(os.Args[1:], os.Stdout, os.Stderr))
	}
	flag.Parse()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig := <-sigs
		abortOwnFUSE()
		signal.Reset(sig)
		syscall.Kill(os.Getpid(), sig.(syscall.Signal))
	}()
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, ok := f.Value.(flag.Getter).Get().(time.Duration); ok && d > 10*time.Second {
			time.AfterFunc(d-5*time.Second, func() {
				fmt.Fprintln(os.Stderr, "pfsemu tests: about to time out; aborting this process's FUSE connections")
				abortOwnFUSE()
			})
		}
	}
	code := m.Run()
	abortOwnFUSE()
	os.Exit(code)
}

// liveMounts are the mount points of this process's test emulators that
// have not been unmounted yet; abortOwnFUSE detaches them so that no dead
// mount is left behind.
var liveMounts sync.Map // mount point → struct{}

// abortOwnFUSE detaches the live test mounts and closes every /dev/fuse
// descriptor of this process, which aborts the FUSE connections it serves.
func abortOwnFUSE() {
	liveMounts.Range(func(mnt, _ any) bool {
		unix.Unmount(mnt.(string), unix.MNT_DETACH)
		return true
	})
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, _ := os.Readlink("/proc/self/fd/" + e.Name()); target == "/dev/fuse" {
			unix.Close(fd)
		}
	}
}

// testCase is one mounted emulator over a source directory with files.
type testCase struct {
	t        *testing.T
	src, mnt string
	srv      *Server
	logs     *logBuffer
}

// newTestCase creates the files (path → size, parents made as needed)
// under a fresh source, mounts opts on a fresh mount point and unmounts at
// cleanup. opts.Source, Mount and Logf are filled in.
func newTestCase(t *testing.T, opts Options, files map[string]int) *testCase {
	t.Helper()
	requireFUSE(t)
	tc := &testCase{t: t, src: t.TempDir(), mnt: t.TempDir(), logs: &logBuffer{}}
	for p, size := range files {
		writeFile(t, filepath.Join(tc.src, p), content(p, size))
	}
	opts.Source, opts.Mount, opts.Logf = tc.src, tc.mnt, tc.logs.logf
	srv, err := Mount(opts)
	if err != nil {
		t.Fatalf("Mount: %v", err)
	}
	tc.srv = srv
	liveMounts.Store(srv.opts.Mount, struct{}{})
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("Unmount: %v", err)
		}
		liveMounts.Delete(srv.opts.Mount)
	})
	return tc
}

// requireFUSE fails (never skips) when FUSE mounts cannot work here.
func requireFUSE(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("these tests mount FUSE filesystems directly and must run as root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Fatalf("FUSE is unavailable: %v (load the fuse module / run test/deps.sh)", err)
	}
}

func (tc *testCase) path(p string) string { return filepath.Join(tc.mnt, p) }

// content is the deterministic content of a test file.
func content(name string, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i*7 + len(name))
	}
	return b
}

func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// openR opens p read-only with a raw system call.
func openR(t *testing.T, p string) int {
	t.Helper()
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", p, err)
	}
	return fd
}

// readAll reads fd to its end with read(2) calls of bufSize bytes.
func readAll(t *testing.T, fd, bufSize int) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, bufSize)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if n == 0 {
			return out
		}
		out = append(out, buf[:n]...)
	}
}

func closeFd(t *testing.T, fd int) {
	t.Helper()
	if err := unix.Close(fd); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// eventually polls cond for up to 5s; RELEASE, for one, reaches the
// server after close(2) has returned.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// listTree returns the relative paths under root, sorted, with a trailing
// slash on directories.
func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return out
}

type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.buf, format+"\n", args...)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) count(sub string) int { return strings.Count(l.String(), sub) }
