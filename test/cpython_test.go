package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/augur-hpc/augur/shim"
)

// cpythonModules are CPython's own tests of files (Debian's
// libpython3.11-testsuite): opening, reading, writing, renaming,
// truncating, mapping, copying, archiving files, in threads and child
// processes; shelves and dbm files replaced in place, mailboxes whose
// directories are removed and made again.
var cpythonModules = []string{"test_fileio", "test_io", "test_os", "test_mmap", "test_shutil",
	"test_tempfile", "test_file", "test_posix", "test_glob", "test_pathlib", "test_zipfile", "test_tarfile",
	"test_shelve", "test_dbm_dumb", "test_mailbox"}

// TestCPythonFileTests runs CPython's file tests with their temporary
// directory, where they write and read every file, inside a dataset root:
// without augur, and under augur run with each policy. Each run must pass
// as the one without augur does, and the runs under augur must have been
// served by it: the reactive policy copies what the tests read and serves
// the copies. The four run side by side.
func TestCPythonFileTests(t *testing.T) {
	for _, policy := range []string{"none", "static", "reactive", "clairvoyant"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			c := NewCase(t)
			// A few images, so that the clairvoyant policy has a dataset
			// to plan (listed flat); the tests' files are not in it.
			c.RandomFiles("train/cls", 4, 1000)
			tmp := filepath.Join(c.Dataset, "tmp")
			must(t, os.Mkdir(tmp, 0o755))
			args := append([]string{Python, "-m", "test"}, cpythonModules...)
			if policy != "none" {
				args = append([]string{Augur, "run", "--policy", policy, "--"}, args...)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, args[0], args[1:]...)
			cmd.Env = append(append(os.Environ(), c.Env...), "TMPDIR="+tmp, "AUGUR_LAYOUT=flat")
			cmd.Dir = tmp
			cmd.WaitDelay = 10 * time.Second
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "Tests result: SUCCESS") {
				t.Fatalf("%s: %v\n%s", policy, err, tail(string(out), 150))
			}
			if policy == "none" {
				return
			}
			seg, err := shim.OpenSegment(shim.SegmentPath(c.job()))
			must(t, err)
			defer seg.Close()
			st := seg.Stats()
			t.Logf("%s: %d dataset opens, %d from tiers, %d copies, %d write opens, %d opens of files being written, %d copies not made for them",
				policy, st.Opens, st.Opens-st.Misses, st.Copies, st.WriteOpens, st.HeldOpens, st.CopiesHeld)
			if st.Opens == 0 || st.WriteOpens == 0 {
				t.Errorf("augur saw %d opens and %d write opens of dataset files: the tests did not run in the dataset", st.Opens, st.WriteOpens)
			}
			if policy != "static" && (st.Copies == 0 || st.Opens == st.Misses) {
				t.Errorf("%s: %d copies made, %d of %d opens served from tiers: augur served nothing", policy, st.Copies, st.Opens-st.Misses, st.Opens)
			}
		})
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[%d lines]", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
