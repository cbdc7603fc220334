package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augur-hpc/augur/bench/pfsemu"
)

// TestSourcesPassThroughWhatIsFast runs a reactive job that reads a
// dataset six times over: from a tmpfs, as fast as the RAM tier, it is
// passed through (augur stat says so, and no copy is made: the first
// reads wait for no copy while the root is judged); from the emulated
// PFS (2 ms an open), hundreds of times the tier's time, it is copied.
// Every byte is the file's.
func TestSourcesPassThroughWhatIsFast(t *testing.T) {
	for _, tc := range []struct {
		name string
		pfs  bool
	}{{"tmpfs", false}, {"emulated-pfs", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCase(t)
			c.Set("AUGUR_POLICY=reactive")
			c.Set("AUGUR_PASSTHROUGH=auto")
			c.Set("AUGUR_TIERS=" + c.RAM + ":1GiB")
			root := c.Dataset
			if !tc.pfs {
				shm, err := os.MkdirTemp("/dev/shm", "augur-test-source-")
				must(t, err)
				t.Cleanup(func() { os.RemoveAll(shm) })
				root = shm
				c.Set("AUGUR_DATASET=" + root)
			}
			var files []string
			var want strings.Builder
			for _, b := range c.RandomFiles("cls", 300, 4096) {
				data, err := os.ReadFile(b)
				must(t, err)
				rel, _ := filepath.Rel(c.Dataset, b)
				p := filepath.Join(root, rel)
				if !tc.pfs {
					must(t, os.MkdirAll(filepath.Dir(p), 0o755))
					must(t, os.WriteFile(p, data, 0o644))
				}
				files = append(files, p)
				want.Write(data)
			}
			if tc.pfs {
				mountPFSWith(t, c, func(*pfsemu.Options) {}) // 2 ms an open, 1 ms a lookup
				c.Set("AUGUR_DATASET=" + filepath.Join(c.Dir, "pfs"))
				for i, p := range files {
					rel, _ := filepath.Rel(c.Dataset, p)
					files[i] = filepath.Join(c.Dir, "pfs", rel)
				}
			}
			script := `for e in 1 2 3 4 5 6; do cat "$@" || exit 1; sleep 0.2; done`
			stdout, stderr := c.AugurRun(statsAfter(c, append([]string{"sh", "-c", script, "sh"}, files...))...)
			if stdout != strings.Repeat(want.String(), 6) {
				t.Fatalf("cat under augur: %d bytes, want %d\n%s", len(stdout), 6*want.Len(), stderr)
			}
			st := statsOfRun(t, c)
			if len(st.Sources) != 1 {
				t.Fatalf("augur stat's sources %+v; want the root\n%s", st.Sources, stderr)
			}
			s := st.Sources[0]
			t.Logf("%s: %+v; copies %d", tc.name, s, st.Copies)
			switch {
			case !tc.pfs && (!s.Passed || st.Copies != 0):
				t.Errorf("a tmpfs dataset: passed through %v (%.2fx the tier), %d copies; want passed through and none", s.Passed, s.Ratio, st.Copies)
			case tc.pfs && (s.Passed || st.Copies != uint64(len(files))):
				t.Errorf("the emulated PFS: passed through %v (%.2fx the tier), %d copies; want copied, %d", s.Passed, s.Ratio, st.Copies, len(files))
			}
		})
	}
}
