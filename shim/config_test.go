package shim

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augur-hpc/augur/placement"
	"golang.org/x/sys/unix"
)

// clearEnv unsets every AUGUR_ variable for the test.
func clearEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AUGUR_") {
			k := kv[:strings.IndexByte(kv, '=')]
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

func TestParseSize(t *testing.T) {
	good := map[string]int64{"0": 0, "512": 512, "4K": 4096, "8GiB": 8 << 30, "1.5M": 3 << 19,
		"200GB": 200e9, " 2 MiB ": 2 << 20, "1t": 1 << 40}
	for s, want := range good {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "-1", "10 XB", "GiB", "1..2G", "abc"} {
		if _, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) accepted", s)
		}
	}
}

func TestLoadEnvOverridesFile(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "augur.toml")
	os.WriteFile(cfg, []byte(`
policy = "static"
seed = 7

[dataset]
roots = ["/data/a", "/data/b"]

[[tier]]
path = "`+dir+`/x"
capacity = "1KiB"
threads = 2

[[tier]]
path = "`+dir+`/y"
capacity = "10K"
fsync = true

[log]
level = "info"

[reactive]
wait_max = "1MiB"
`), 0o644)
	t.Setenv("AUGUR_CONFIG", cfg)
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Seed != 7 || len(c.Roots) != 2 || len(c.Tiers) != 2 || c.Tiers[0].Capacity != 1<<10 ||
		c.Tiers[0].Threads != 2 || c.Tiers[1].Threads != 16 || !c.Tiers[1].Fsync || c.LogLevel != "info" ||
		c.WaitMax != 1<<20 {
		t.Fatalf("from file: %+v", c)
	}
	t.Setenv("AUGUR_SEED", "42")
	t.Setenv("AUGUR_DATASET", "/pfs/imagenet:/pfs/other")
	t.Setenv("AUGUR_TIERS", dir+"/ram:8KiB,"+dir+"/ssd:200KiB")
	t.Setenv("AUGUR_LOG", "debug:/tmp/augur.log")
	t.Setenv("AUGUR_WAIT_MAX", "0")
	c, err = Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Seed != 42 || c.Roots[0] != "/pfs/imagenet" || c.Roots[1] != "/pfs/other" ||
		c.Tiers[1].Path != dir+"/ssd" || c.Tiers[1].Capacity != 200<<10 ||
		c.LogLevel != "debug" || c.LogFile != "/tmp/augur.log" || c.WaitMax != 0 {
		t.Fatalf("with env: %+v", c)
	}
}

func TestLoadDefaults(t *testing.T) {
	clearEnv(t)
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Policy != "static" || len(c.Roots) != 0 || len(c.Tiers) == 0 || c.WaitMax != placement.DefaultWaitMax {
		t.Fatalf("defaults: %+v", c)
	}
	for _, tier := range c.Tiers {
		if tier.Capacity <= 0 || !filepath.IsAbs(tier.Path) {
			t.Errorf("default tier %+v", tier)
		}
	}
}

func TestConfigErrorsNameTheLine(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"syntax", "policy = \n", ":1: "},
		{"unknown key", "[dataset]\nroots = []\nfoo = 1\n", `:3: unknown key "dataset.foo"`},
		{"bad size", "[[tier]]\npath = \"/a\"\ncapacity = \"1G\"\n[[tier]]\npath = \"/b\"\ncapacity = \"10 XB\"\n",
			`:6: capacity: "10 XB" has an unknown unit "XB"`},
		{"negative size", "[[tier]]\npath = \"/a\"\ncapacity = \"-1\"\n", `:3: capacity: "-1" is not a size`},
		{"bad policy", "seed = 1\npolicy = \"fast\"\n", `:2: unknown policy "fast"`},
		{"no capacity", "[[tier]]\npath = \"/a\"\n", `:1: tier /a has no capacity`},
		{"bad level", "[log]\nlevel = \"loud\"\n", `:2: unknown log level "loud"`},
		{"bad sampler", "[sampler]\nepochs = 3\nkind = \"distibuted\"\n", `:3: unknown sampler "distibuted"`},
		{"bad layout", "[dataset]\nlayout = \"folders\"\n", `:2: unknown layout "folders"`},
		{"bad wait_max", "[reactive]\nwait_max = \"8 XB\"\n", `:2: wait_max: "8 XB" has an unknown unit`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			p := filepath.Join(t.TempDir(), "c.toml")
			os.WriteFile(p, []byte(tc.src), 0o644)
			t.Setenv("AUGUR_CONFIG", p)
			_, err := Load()
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), p+tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, p+tc.want)
			}
		})
	}
}

func TestEnvErrors(t *testing.T) {
	for k, v := range map[string]string{"AUGUR_TIERS": "/a:lots", "AUGUR_SEED": "x",
		"AUGUR_POLICY": "magic", "AUGUR_LOG": "chatty", "AUGUR_SAMPLER": "shuffled", "AUGUR_LAYOUT": "tree",
		"AUGUR_WAIT_MAX": "big"} {
		t.Run(k, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(k, v)
			if _, err := Load(); err == nil || !strings.HasPrefix(err.Error(), k+": ") {
				t.Fatalf("error %v, want one naming %s", err, k)
			}
		})
	}
}

// TestTierProblems holds every bad tier configuration and its exact
// message: the tier is not used (or, for a capacity beyond its
// filesystem, used with a warning), the rest of the configuration is.
// "{D}" in a case stands for its scratch directory, "{M}" for a 1 MiB
// tmpfs mounted there, "{R}" for the same read-only.
func TestTierProblems(t *testing.T) {
	cases := []struct {
		name  string
		env   map[string]string
		toml  string // written to {D}/augur.toml, which AUGUR_CONFIG names
		setup func(t *testing.T, d string)
		want  []string // the problems, in order
		tiers []string // the tiers used
	}{
		{name: "relative", env: map[string]string{"AUGUR_TIERS": "garbage"},
			want: []string{`AUGUR_TIERS: tier "garbage" is not an absolute path; tier not used`}},
		{name: "relative-toml", toml: "[[tier]]\npath = \"cache\"\ncapacity = \"1G\"\n",
			want: []string{`{D}/augur.toml:2: tier "cache" is not an absolute path; tier not used`}},
		{name: "parent-missing", env: map[string]string{"AUGUR_TIERS": "{D}/nonexistent/x:1KiB"},
			want: []string{"AUGUR_TIERS: tier {D}/nonexistent/x: parent directory {D}/nonexistent does not exist (augur creates only the tier's own directory); tier not used"}},
		{name: "parent-a-file", env: map[string]string{"AUGUR_TIERS": "{D}/file/x:1KiB"},
			setup: func(t *testing.T, d string) { must(t, os.WriteFile(d+"/file", nil, 0o600)) },
			want:  []string{"AUGUR_TIERS: tier {D}/file/x: parent {D}/file is not a directory; tier not used"}},
		{name: "twice", env: map[string]string{"AUGUR_TIERS": "{D}/a:1KiB,{D}/./a/:1KiB"},
			want: []string{"AUGUR_TIERS: tier {D}/a is listed twice; tier not used"}, tiers: []string{"{D}/a"}},
		{name: "twice-through-a-symlink", env: map[string]string{"AUGUR_TIERS": "{D}/a:1KiB,{D}/link:1KiB"},
			setup: func(t *testing.T, d string) {
				must(t, os.Mkdir(d+"/a", 0o700))
				must(t, os.Symlink(d+"/a", d+"/link"))
			},
			want: []string{"AUGUR_TIERS: tier {D}/link is listed twice; tier not used"}, tiers: []string{"{D}/a"}},
		{name: "twice-toml", toml: "[[tier]]\npath = \"{D}/a\"\ncapacity = \"1K\"\n\n[[tier]]\ncapacity = \"1K\"\npath = \"{D}/a\"\n",
			want: []string{"{D}/augur.toml:7: tier {D}/a is listed twice; tier not used"}, tiers: []string{"{D}/a"}},
		{name: "nested", env: map[string]string{"AUGUR_TIERS": "{D}/a:1KiB,{D}/a/b:1KiB"},
			want: []string{"AUGUR_TIERS: tier {D}/a/b is inside tier {D}/a; tier not used"}, tiers: []string{"{D}/a"}},
		{name: "nesting", env: map[string]string{"AUGUR_TIERS": "{D}/a/b:1KiB,{D}/a:1KiB"},
			setup: func(t *testing.T, d string) { must(t, os.Mkdir(d+"/a", 0o700)) },
			want:  []string{"AUGUR_TIERS: tier {D}/a contains tier {D}/a/b; tier not used"}, tiers: []string{"{D}/a/b"}},
		{name: "inside-dataset", env: map[string]string{"AUGUR_DATASET": "{D}/ds", "AUGUR_TIERS": "{D}/ds/cache:1KiB,{D}/t:1KiB"},
			setup: func(t *testing.T, d string) { must(t, os.Mkdir(d+"/ds", 0o700)) },
			want:  []string{"AUGUR_TIERS: tier {D}/ds/cache is inside dataset root {D}/ds; tier not used"}, tiers: []string{"{D}/t"}},
		{name: "contains-dataset", env: map[string]string{"AUGUR_DATASET": "{D}/t/ds", "AUGUR_TIERS": "{D}/t:1KiB"},
			want: []string{"AUGUR_TIERS: dataset root {D}/t/ds is inside tier {D}/t; tier not used"}},
		{name: "read-only", env: map[string]string{"AUGUR_TIERS": "{R}/t:1KiB,{R}:1KiB,{D}/t:1KiB"},
			want: []string{"AUGUR_TIERS: tier {R}/t: on a read-only filesystem; tier not used",
				"AUGUR_TIERS: tier {R}: on a read-only filesystem; tier not used"}, tiers: []string{"{D}/t"}},
		{name: "too-large", env: map[string]string{"AUGUR_TIERS": "{M}/t:1GiB"},
			want:  []string{"AUGUR_TIERS: warning: tier {M}/t: capacity 1.0 GiB is more than its filesystem holds (1.0 MiB); it fills up first"},
			tiers: []string{"{M}/t"}},
		{name: "five", env: map[string]string{"AUGUR_TIERS": "{D}/1:1K,{D}/2:1K,{D}/3:1K,{D}/4:1K,{D}/5:1K"},
			want:  []string{"AUGUR_TIERS: tier {D}/5 is one too many: at most 4 tiers are supported; tier not used"},
			tiers: []string{"{D}/1", "{D}/2", "{D}/3", "{D}/4"}},
		{name: "writable-by-others", env: map[string]string{"AUGUR_TIERS": "{D}/w:1K"},
			setup: func(t *testing.T, d string) { must(t, os.Mkdir(d+"/w", 0o700)); must(t, os.Chmod(d+"/w", 0o777)) },
			want:  []string{"AUGUR_TIERS: tier {D}/w: {D}/w is writable by group or others (owner uid 0 (root), mode 0777); tier not used"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			d := t.TempDir()
			m, r := filepath.Join(d, "m"), filepath.Join(d, "r")
			for i, dir := range []string{m, r} {
				must(t, os.Mkdir(dir, 0o700))
				must(t, unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0700"))
				t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
				if i == 1 {
					must(t, unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""))
				}
			}
			expand := strings.NewReplacer("{D}", d, "{M}", m, "{R}", r).Replace
			if tc.setup != nil {
				tc.setup(t, d)
			}
			for k, v := range tc.env {
				t.Setenv(k, expand(v))
			}
			if tc.toml != "" {
				must(t, os.WriteFile(d+"/augur.toml", []byte(expand(tc.toml)), 0o600))
				t.Setenv("AUGUR_CONFIG", d+"/augur.toml")
			}
			before := listTree(t, d)
			c, err := Load()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range c.Problems {
				got = append(got, p.String())
			}
			for i := range tc.want {
				tc.want[i] = expand(tc.want[i])
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			var used []string
			for _, tier := range c.Tiers {
				used = append(used, tier.Path)
			}
			for i := range tc.tiers {
				tc.tiers[i] = expand(tc.tiers[i])
			}
			if strings.Join(used, ",") != strings.Join(tc.tiers, ",") {
				t.Errorf("tiers used %v, want %v", used, tc.tiers)
			}
			if after := listTree(t, d); after != before {
				t.Errorf("loading the configuration changed the filesystem:\n%s\nthen\n%s", before, after)
			}
		})
	}
}

// listTree names everything under dir.
func listTree(t *testing.T, dir string) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		b.WriteString(p + "\n")
		return nil
	})
	return b.String()
}

// The job's membership comes from [peers] and the launcher's variables
// (the environment wins); a bad one is a problem that turns peers off,
// not an error; a job id augur made up is not the nodes' shared one.
func TestPeersConfig(t *testing.T) {
	clearEnv(t)
	for _, k := range []string{"GROUP_RANK", "SLURM_NODEID", "SLURM_JOB_NUM_NODES", "SLURM_NNODES", "WORLD_SIZE",
		"LOCAL_WORLD_SIZE", "SLURM_JOB_ID", "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "augur.toml")
	must(t, os.WriteFile(cfg, []byte(`[peers]
nodes = 3
node = 1
peers = ["127.0.0.1:7001", "127.0.0.2:7001", "127.0.0.3:7001"]
secret = "0123456789abcdef0123"
job = "j1"
`), 0o600))
	t.Setenv("AUGUR_CONFIG", cfg)
	t.Setenv("AUGUR_TIERS", dir+"/ram:1MiB")
	t.Setenv("AUGUR_NODE_RANK", "2")
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Peers; !p.Enabled() || p.Node != 2 || p.Nodes != 3 || len(p.Peers) != 3 || len(c.Problems) != 0 {
		t.Errorf("peers %+v, problems %v; want node 2 of 3 (AUGUR_NODE_RANK over the file's 1) and no problem", p, c.Problems)
	}

	t.Setenv("AUGUR_NODE_RANK", "5")
	if c, err = Load(); err != nil {
		t.Fatal(err)
	}
	if len(c.Problems) != 1 || c.Problems[0].Where != "peers" || !strings.Contains(c.Problems[0].Msg, "out of range") || c.Peers.Enabled() {
		t.Errorf("node 5 of 3: problems %v, peers %+v; want one problem naming it and no peers", c.Problems, c.Peers)
	}

	t.Setenv("AUGUR_CONFIG", "")
	t.Setenv("AUGUR_NODE_RANK", "")
	t.Setenv("SLURM_JOB_ID", "77")
	t.Setenv("AUGUR_JOB", "run-abc")
	t.Setenv(JobMadeVar, "run-abc")
	if c, err = Load(); err != nil || c.Peers.Job != "77" {
		t.Errorf("a made-up AUGUR_JOB beside SLURM_JOB_ID: job %q (%v), want 77", c.Peers.Job, err)
	}
	t.Setenv(JobMadeVar, "")
	if c, err = Load(); err != nil || c.Peers.Job != "run-abc" {
		t.Errorf("AUGUR_JOB the user set: job %q (%v), want run-abc", c.Peers.Job, err)
	}
}
