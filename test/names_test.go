package test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augur-hpc/augur/shim"
	"github.com/augur-hpc/augur/tiering"
)

// nameCases are the ways a job changes what a path names, or writes a
// file through another name, after the path's copies were served
// (test/python/names.py makes each); check lists the paths, relative to
// the root, whose reads must then be what the kernel says they hold.
var nameCases = []struct {
	name  string
	check []string
}{
	{"unlinkat-dirfd", []string{"d/f.bin"}},
	{"unlinkat-raw-dirfd", []string{"d/f.bin"}},
	{"unlinkat-dirfd-above", []string{"d/f.bin"}},
	{"rmtree", []string{"d/f.bin", "d/g.bin"}},
	{"rename-dir", []string{"d/f.bin", "d2/f.bin"}},
	{"rename-root", []string{"d/f.bin", "d/g.bin", "e/h.bin"}},
	{"mv-dir", []string{"d/f.bin", "d2/f.bin"}},
	{"rename-dirfd", []string{"d/f.bin", "d/g.bin"}},
	{"replace-dirfd", []string{"d/f.bin"}},
	{"renameat2-exchange", []string{"d/f.bin", "d/g.bin"}},
	{"renameat2-exchange-dirs", []string{"d/f.bin", "d/g.bin", "e/h.bin", "e/f.bin", "d/h.bin"}},
	{"renameat2-noreplace", []string{"d/f.bin", "d/n.bin"}},
	{"symlink-over", []string{"d/f.bin"}},
	{"link-write", []string{"d/f.bin"}},
	{"linkat-dirfd-write", []string{"d/f.bin"}},
	{"alias-write", []string{"d/f.bin"}},
	{"alias-truncate", []string{"d/f.bin"}},
	{"alias-unlink", []string{"d/f.bin"}},
	{"alias-rename-dir", []string{"d/f.bin", "d2/f.bin"}},
	{"remove", []string{"d/f.bin"}},
	{"rmdir", []string{"d/f.bin", "d/g.bin"}},
	{"mmap-alias-write", []string{"d/f.bin"}},
	{"bind-write", []string{"d/f.bin"}},
}

// TestCopyBelongsToFile makes each change of nameCases inside a job of
// each policy, with a copy of every dataset file in both tiers, and
// requires every path checked to read what the kernel says it holds: a
// copy belongs to a file, not to a name.
func TestCopyBelongsToFile(t *testing.T) {
	for _, policy := range []string{"static", "reactive", "clairvoyant"} {
		for _, nc := range nameCases {
			t.Run(policy+"/"+nc.name, func(t *testing.T) {
				c := nameCase(t, policy)
				for _, rel := range []string{"d/f.bin", "d/g.bin", "e/h.bin"} {
					c.Write(rel, randomBytes(5000))
				}
				copyEverywhere(c)
				out := filepath.Join(c.Dir, "out")
				must(t, os.Mkdir(out, 0o755))
				args := append([]string{namesScript(t), c.Dataset, out, nc.name}, nc.check...)
				cmd := append([]string{Python}, args...)
				if nc.name == "bind-write" {
					bind := filepath.Join(c.Dir, "bind")
					must(t, os.Mkdir(bind, 0o755))
					c.Set("BIND=" + bind)
					sh := fmt.Sprintf("mount --bind %s %s && exec %s %s", filepath.Join(c.Dataset, "d"), bind, Python, strings.Join(args, " "))
					cmd = []string{"unshare", "-m", "--propagation", "private", "sh", "-c", sh}
				}
				stdout, stderr := c.AugurRun(statsAfter(c, cmd)...)
				// The reads before the change were served from a tier:
				// otherwise the case proves nothing.
				if st := statsOfRun(t, c); st.Tiers[0].Hits+st.Tiers[1].Hits == 0 {
					t.Fatalf("no open was served from a tier\nstderr:\n%s", stderr)
				}
				got := strings.Fields(stdout)
				if len(got) != len(nc.check) {
					t.Fatalf("names.py printed %q, want %d lines\nstderr:\n%s", stdout, len(nc.check), stderr)
				}
				for i, rel := range nc.check {
					if want := kernelDigest(t, filepath.Join(c.Dataset, rel)); got[i] != want {
						t.Errorf("%s: read %s, the kernel says it holds %s", rel, got[i], want)
					}
				}
			})
		}
	}
}

// nameCase is a case of the policy, whose dataset (no images) the
// clairvoyant policy lists flat.
func nameCase(t *testing.T, policy string) *Case {
	c := NewCase(t)
	c.Set("AUGUR_POLICY=" + policy)
	c.Set("AUGUR_LAYOUT=flat")
	return c
}

// statsAfter is augur run's arguments for argv followed, in the job, by
// augur stat of it into a file statsOfRun reads: after the job its state
// may be gone (a leader keeps the latest four ended jobs'), while it runs
// it is not.
func statsAfter(c *Case, argv []string) []string {
	c.Set("STATS=" + filepath.Join(c.Dir, "stats.json"))
	c.Set("AUGUR=" + Augur)
	return append([]string{"--", "sh", "-c", `"$@" && exec "$AUGUR" stat --json --job "$AUGUR_JOB" >"$STATS"`, "sh"}, argv...)
}

// statsOfRun reads what statsAfter wrote.
func statsOfRun(t *testing.T, c *Case) shim.Stats {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, "stats.json"))
	must(t, err)
	var st shim.Stats
	must(t, json.Unmarshal(b, &st))
	return st
}

// copyEverywhere puts a copy of every dataset file in both tiers.
func copyEverywhere(c *Case) {
	c.T.Helper()
	c.Warm()
	tr, err := tiering.Open(tiering.Tier{Path: c.Disk})
	must(c.T, err)
	defer tr.Close()
	must(c.T, filepath.WalkDir(c.Dataset, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		_, err = tr.Publish(p)
		return err
	}))
	for _, tier := range []string{c.RAM, c.Disk} {
		if _, err := os.Stat(c.CopyOf(tier, filepath.Join(c.Dataset, "d", "f.bin"))); err != nil {
			c.T.Fatalf("no copy in %s: %v", tier, err)
		}
	}
}

// kernelDigest is what names.py prints for path, read here without the
// shim.
func kernelDigest(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "ENOENT"
	case err != nil && strings.Contains(err.Error(), "is a directory"):
		return "EISDIR"
	case err != nil:
		t.Fatal(err)
	}
	return sha256Hex(b)
}

// namesScript is test/python/names.py's absolute path.
func namesScript(t *testing.T) string {
	abs, err := filepath.Abs("python/names.py")
	must(t, err)
	return abs
}

// toolChanges are programs that change a dataset inside a job: each
// shell command runs under augur run after every file was read from the
// tiers (ROOT is the dataset root, NEW a directory beside it holding d/
// with new contents, NEW.tar the same as an archive).
var toolChanges = []struct {
	name, sh string
	check    []string
}{
	{"find-delete", `find "$ROOT/d" -name '*.bin' -delete`, []string{"d/f.bin", "d/g.bin"}},
	{"rm-r", `rm -r "$ROOT/d"`, []string{"d/f.bin", "d/g.bin"}},
	{"mv", `mv "$ROOT/d" "$ROOT/d2"`, []string{"d/f.bin", "d2/f.bin"}},
	{"tar-x-over", `tar -xf "$NEW.tar" -C "$ROOT"`, []string{"d/f.bin", "d/g.bin"}},
	{"rsync", `rsync -a "$NEW/" "$ROOT/"`, []string{"d/f.bin", "d/g.bin"}},
	{"rsync-inplace", `rsync -a --inplace "$NEW/" "$ROOT/"`, []string{"d/f.bin", "d/g.bin"}},
}

// TestToolsChangeTheDataset runs coreutils, findutils, tar and rsync
// over a dataset whose files the job has read from the tiers, under each
// policy, and requires the job's next reads to be of what the kernel says
// each path holds.
func TestToolsChangeTheDataset(t *testing.T) {
	for _, name := range []string{"find", "rm", "mv", "tar", "rsync"} {
		needProgram(t, name)
	}
	for _, policy := range []string{"static", "reactive", "clairvoyant"} {
		for _, tc := range toolChanges {
			t.Run(policy+"/"+tc.name, func(t *testing.T) {
				c := nameCase(t, policy)
				for _, rel := range []string{"d/f.bin", "d/g.bin", "e/h.bin"} {
					c.Write(rel, randomBytes(5000))
				}
				copyEverywhere(c)
				newDir := filepath.Join(c.Dir, "new")
				for _, rel := range []string{"d/f.bin", "d/g.bin"} {
					p := filepath.Join(newDir, rel)
					must(t, os.MkdirAll(filepath.Dir(p), 0o755))
					must(t, os.WriteFile(p, randomBytes(6000), 0o644))
				}
				if out, err := exec.Command("tar", "-cf", newDir+".tar", "-C", newDir, "d").CombinedOutput(); err != nil {
					t.Fatalf("tar: %v\n%s", err, out)
				}
				c.Set("ROOT=" + c.Dataset)
				c.Set("NEW=" + newDir)
				var paths []string
				for _, rel := range tc.check {
					paths = append(paths, filepath.Join(c.Dataset, rel))
				}
				c.Set("READ=" + readScript)
				sh := fmt.Sprintf(`cat "$ROOT"/d/* "$ROOT"/e/* >/dev/null && %s && exec %s -c "$READ" %s`,
					tc.sh, Python, strings.Join(paths, " "))
				stdout, stderr := c.AugurRun(statsAfter(c, []string{"sh", "-c", sh})...)
				if st := statsOfRun(t, c); st.Tiers[0].Hits+st.Tiers[1].Hits == 0 {
					t.Fatalf("no open was served from a tier\nstderr:\n%s", stderr)
				}
				got := strings.Fields(stdout)
				if len(got) != len(paths) {
					t.Fatalf("printed %q, want %d lines\nstderr:\n%s", stdout, len(paths), stderr)
				}
				for i, p := range paths {
					if want := kernelDigest(t, p); got[i] != want {
						t.Errorf("%s: read %s, the kernel says it holds %s", p, got[i], want)
					}
				}
			})
		}
	}
}
