package test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/augur-hpc/augur/shim"
	"github.com/augur-hpc/augur/tiering"
)

// badInput is one broken configuration. setup changes the case and
// returns the message the shim must print once on stderr ("" for none)
// and what `augur check` must print ("" to skip it; it then must fail).
type badInput struct {
	name   string
	nobody bool // run the programs as nobody
	setup  func(t *testing.T, c *Case) (msg, check string)
}

// writeConfig writes a TOML file into the case and points AUGUR_CONFIG
// at it.
func writeConfig(t *testing.T, c *Case, name, body string) string {
	p := filepath.Join(c.Dir, name)
	must(t, os.WriteFile(p, []byte(body), 0o644))
	c.Set("AUGUR_CONFIG=" + p)
	return p
}

var badInputs = []badInput{
	{name: "invalid-toml", setup: func(t *testing.T, c *Case) (string, string) {
		p := writeConfig(t, c, "bad.toml", "policy = \"static\"\n[dataset]\nroots = [\"/x\"\n")
		return p + ":3: ", p + ":3: "
	}},
	{name: "unknown-key", setup: func(t *testing.T, c *Case) (string, string) {
		p := writeConfig(t, c, "unknown.toml", "policy = \"static\"\n[dataset]\nroots = []\nroot = \"/x\"\n")
		return p + `:4: unknown key "dataset.root"`, p + `:4: unknown key "dataset.root"`
	}},
	{name: "capacity-negative", setup: func(t *testing.T, c *Case) (string, string) {
		p := writeConfig(t, c, "neg.toml", "[[tier]]\npath = \"/dev/shm/x\"\n\ncapacity = \"-1\"\n")
		return p + `:4: capacity: "-1" is not a size`, p + `:4: capacity: "-1" is not a size`
	}},
	{name: "capacity-unit", setup: func(t *testing.T, c *Case) (string, string) {
		p := writeConfig(t, c, "xb.toml", "[[tier]]\npath = \"/dev/shm/x\"\ncapacity = \"10 XB\"\n")
		return p + `:3: capacity: "10 XB" has an unknown unit "XB"`, p + `:3: capacity: "10 XB" has an unknown unit`
	}},
	{name: "env-size-negative", setup: func(t *testing.T, c *Case) (string, string) {
		c.Set("AUGUR_TIERS=" + c.RAM + ":-1")
		m := fmt.Sprintf(`AUGUR_TIERS: tier %s: "-1" is not a size`, c.RAM)
		return m, m
	}},
	{name: "env-size-unit", setup: func(t *testing.T, c *Case) (string, string) {
		c.Set("AUGUR_TIERS=" + c.RAM + ":10 XB")
		m := fmt.Sprintf(`AUGUR_TIERS: tier %s: "10 XB" has an unknown unit "XB"`, c.RAM)
		return m, m
	}},
	{name: "tier-under-a-file", setup: func(t *testing.T, c *Case) (string, string) {
		f := filepath.Join(c.Dir, "afile")
		must(t, os.WriteFile(f, nil, 0o644))
		c.Set("AUGUR_TIERS=" + f + "/tier:1GiB," + c.Disk + ":1GiB")
		m := fmt.Sprintf("AUGUR_TIERS: tier %s/tier: parent %s is not a directory; tier not used", f, f)
		return m, m
	}},
	{name: "read-only-tier-dir", nobody: true, setup: func(t *testing.T, c *Case) (string, string) {
		ro := filepath.Join(c.Dir, "ro")
		must(t, os.Mkdir(ro, 0o555))
		must(t, os.Chmod(ro, 0o555))
		c.Set("AUGUR_TIERS=" + ro + "/tier:1GiB")
		return fmt.Sprintf("AUGUR_TIERS: tier %s/tier: mkdir %s/tier: permission denied; tier not used", ro, ro), ""
	}},
	{name: "relative-tier", setup: func(t *testing.T, c *Case) (string, string) {
		c.Set("AUGUR_TIERS=garbage")
		m := `AUGUR_TIERS: tier "garbage" is not an absolute path; tier not used`
		return m, m
	}},
	{name: "relative-tier-toml", setup: func(t *testing.T, c *Case) (string, string) {
		c.Set("AUGUR_TIERS=")
		p := writeConfig(t, c, "rel.toml", "[[tier]]\npath = \"cache\"\ncapacity = \"1G\"\n")
		m := p + `:2: tier "cache" is not an absolute path; tier not used`
		return m, m
	}},
	{name: "tier-parent-missing", setup: func(t *testing.T, c *Case) (string, string) {
		c.Set("AUGUR_TIERS=" + c.Dir + "/nonexistent/x:1GiB")
		m := fmt.Sprintf("AUGUR_TIERS: tier %[1]s/nonexistent/x: parent directory %[1]s/nonexistent does not exist (augur creates only the tier's own directory); tier not used", c.Dir)
		return m, m
	}},
	{name: "tier-twice", setup: func(t *testing.T, c *Case) (string, string) {
		c.Set("AUGUR_TIERS=" + c.RAM + ":1GiB," + c.RAM + "/:1GiB")
		m := fmt.Sprintf("AUGUR_TIERS: tier %s is listed twice; tier not used", c.RAM)
		return m, m
	}},
	{name: "tier-in-tier", setup: func(t *testing.T, c *Case) (string, string) {
		c.Set("AUGUR_TIERS=" + c.RAM + ":1GiB," + c.RAM + "/inner:1GiB")
		m := fmt.Sprintf("AUGUR_TIERS: tier %[1]s/inner is inside tier %[1]s; tier not used", c.RAM)
		return m, m
	}},
	{name: "tier-in-dataset", setup: func(t *testing.T, c *Case) (string, string) {
		c.Set("AUGUR_TIERS=" + c.Dataset + "/cache:1GiB," + c.Disk + ":1GiB")
		m := fmt.Sprintf("AUGUR_TIERS: tier %[1]s/cache is inside dataset root %[1]s; tier not used", c.Dataset)
		return m, m
	}},
	{name: "dataset-in-tier", setup: func(t *testing.T, c *Case) (string, string) {
		c.Set("AUGUR_TIERS=" + c.Dir + ":1GiB," + c.Disk + ":1GiB")
		m := fmt.Sprintf("AUGUR_TIERS: dataset root %s is inside tier %s; tier not used", c.Dataset, c.Dir)
		return m, m
	}},
	{name: "tier-read-only", setup: func(t *testing.T, c *Case) (string, string) {
		ro := tmpfs(t, c, "ro", "size=1m,mode=0700,ro")
		c.Set("AUGUR_TIERS=" + ro + "/tier:1GiB," + c.Disk + ":1GiB")
		m := fmt.Sprintf("AUGUR_TIERS: tier %s/tier: on a read-only filesystem; tier not used", ro)
		return m, m
	}},
	{name: "tier-too-large", setup: func(t *testing.T, c *Case) (string, string) {
		small := tmpfs(t, c, "small", "size=1m,mode=0700")
		c.Set("AUGUR_TIERS=" + small + "/tier:1GiB")
		m := fmt.Sprintf("AUGUR_TIERS: warning: tier %s/tier: capacity 1.0 GiB is more than its filesystem holds (1.0 MiB); it fills up first", small)
		return m, m
	}},
	{name: "missing-dataset-root", setup: func(t *testing.T, c *Case) (string, string) {
		gone := filepath.Join(c.Dir, "nosuch")
		c.Set("AUGUR_DATASET=" + gone + ":" + c.Dataset)
		return fmt.Sprintf("dataset root %s: no such file or directory; nothing under it is accelerated", gone),
			fmt.Sprintf("dataset root %s: stat %s: no such file or directory", gone, gone)
	}},
}

// tmpfs mounts a tmpfs with options at a new directory of the case.
func tmpfs(t *testing.T, c *Case, name, options string) string {
	t.Helper()
	dir := filepath.Join(c.Dir, name)
	must(t, os.Mkdir(dir, 0o700))
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", options, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// TestBadInput runs a preloaded cat and a preloaded Python reader under
// each broken configuration: each must print the file's bytes and exit 0,
// and the shim must say what is wrong in exactly one line on stderr;
// `augur check` must fail and say the same (file:line: for TOML).
func TestBadInput(t *testing.T) {
	for _, in := range badInputs {
		t.Run(in.name, func(t *testing.T) {
			c := NewCase(t)
			data := randomBytes(40_000)
			f := c.Write("a.bin", data)
			msg, check := in.setup(t, c)
			cat := []string{"cat", f}
			py := []string{Python, "-c", "import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], 'rb').read()).hexdigest())", f}
			run := func(argv []string) Result { return c.Run(time.Minute, argv[0], argv[1:]...) }
			if in.nobody {
				openUp(t, c)
				run = func(argv []string) Result {
					a := nobody.argv(true, argv...)
					return c.RunPlain(time.Minute, a[0], a[1:]...)
				}
			}
			for _, prog := range []struct {
				argv []string
				want string
			}{{cat, string(data)}, {py, fmt.Sprintf("%x\n", sha256.Sum256(data))}} {
				r := run(prog.argv)
				if r.Err != nil || r.Stdout != prog.want {
					t.Errorf("%s: %v, printed %d bytes, want the file's (%d)\nstderr:\n%s",
						prog.argv[0], r.Err, len(r.Stdout), len(prog.want), r.Stderr)
				}
				lines := augurLines(r.Stderr)
				if len(lines) != 1 || !strings.Contains(lines[0], msg) {
					t.Errorf("%s: shim said %q, want exactly one line containing %q", prog.argv[0], lines, msg)
				}
				if other := strings.TrimSpace(strings.Join(nonAugurLines(r.Stderr), "\n")); other != "" {
					t.Errorf("%s: unexpected stderr: %q", prog.argv[0], other)
				}
			}
			if check == "" {
				return
			}
			out, err := c.Augur("check")
			if err == nil || !strings.Contains(out, check) {
				t.Errorf("augur check: %v, output:\n%s\nwant a failure saying %q", err, out, check)
			}
		})
	}
}

func nonAugurLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(l, "augur:") {
			out = append(out, l)
		}
	}
	return out
}

// TestMissingTierCreated points the shim at tier directories that do not
// exist yet (their parents do): the first preloaded process creates them,
// says nothing, and is served from them once they hold copies.
func TestMissingTierCreated(t *testing.T) {
	c := NewCase(t)
	data := randomBytes(40_000)
	f := c.Write("a.bin", data)
	ram := filepath.Join(c.RAM, "notyet")
	disk := filepath.Join(c.Dir, "disk-later")
	c.Set("AUGUR_TIERS=" + ram + ":1GiB," + disk + ":1GiB")
	r := c.Run(time.Minute, "cat", f)
	if r.Err != nil || r.Stdout != string(data) || r.Stderr != "" {
		t.Fatalf("cat: %v, %d bytes, stderr %q", r.Err, len(r.Stdout), r.Stderr)
	}
	for _, tier := range []string{ram, disk} {
		for _, sub := range []string{"files", "tmp", "lock"} {
			if _, err := os.Stat(filepath.Join(tier, sub)); err != nil {
				t.Errorf("tier %s not created: %v", tier, err)
			}
		}
	}
	c.Warm()
	c.Set("AUGUR_JOB=" + c.job() + "-2")
	t.Cleanup(func() {
		removeJobState(c.job())
	})
	obs := Observe(t, c.Dataset, ram)
	r = c.MustRun(time.Minute, "cat", f)
	obs.Stop()
	if r.Stdout != string(data) {
		t.Fatalf("cat printed %d bytes, want %d", len(r.Stdout), len(data))
	}
	cp, err := tiering.CopyPath(ram, f)
	must(t, err)
	if obs.Opens(f) != 0 || obs.Opens(cp) == 0 {
		t.Errorf("not served from the created tier: original opened %d times, copy %d", obs.Opens(f), obs.Opens(cp))
	}
}

// TestDisable: AUGUR_DISABLE=1 is pure pass-through — with a warmed tier
// and a ready job, the original is what the kernel opens, nothing is
// printed and the process does not even attach to the job.
func TestDisable(t *testing.T) {
	c := NewCase(t)
	data := randomBytes(40_000)
	f := c.Write("a.bin", data)
	c.Warm()
	primeJob(c)
	seg, err := shim.OpenSegment(shim.SegmentPath(c.job()))
	must(t, err)
	before := seg.Stats()
	c.Set("AUGUR_DISABLE=1")
	obs := Observe(t, c.Dataset, c.RAM)
	r := c.Run(time.Minute, "cat", f)
	py := c.Run(time.Minute, Python, "-c", "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())", f)
	obs.Stop()
	for _, res := range []Result{r, py} {
		if res.Err != nil || res.Stdout != string(data) || res.Stderr != "" {
			t.Errorf("%v, %d bytes (want %d), stderr %q", res.Err, len(res.Stdout), len(data), res.Stderr)
		}
	}
	if obs.Opens(f) == 0 { // inotify merges the two programs' identical events
		t.Errorf("original never opened")
	}
	if n := obs.Opens(c.CopyOf(c.RAM, f)); n != 0 {
		t.Errorf("RAM copy opened %d times under AUGUR_DISABLE=1", n)
	}
	after := seg.Stats()
	if after.Processes != before.Processes || after.Opens != before.Opens {
		t.Errorf("disabled processes touched the job: processes %d→%d, opens %d→%d",
			before.Processes, after.Processes, before.Opens, after.Opens)
	}
	// The control: without AUGUR_DISABLE the same program is served from
	// the tier, so the test above could fail.
	c.Set("AUGUR_DISABLE=0")
	obs = Observe(t, c.Dataset, c.RAM)
	c.MustRun(time.Minute, "cat", f)
	obs.Stop()
	if obs.Opens(f) != 0 || obs.Opens(c.CopyOf(c.RAM, f)) == 0 {
		t.Errorf("control: AUGUR_DISABLE=0 was not served from the RAM copy")
	}
}
