package shim

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
path = "/dev/shm/x"
capacity = "1GiB"
threads = 2

[[tier]]
path = "/scratch/y"
capacity = "10G"
fsync = true

[log]
level = "info"
`), 0o644)
	t.Setenv("AUGUR_CONFIG", cfg)
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Seed != 7 || len(c.Roots) != 2 || len(c.Tiers) != 2 || c.Tiers[0].Capacity != 1<<30 ||
		c.Tiers[0].Threads != 2 || c.Tiers[1].Threads != 16 || !c.Tiers[1].Fsync || c.LogLevel != "info" {
		t.Fatalf("from file: %+v", c)
	}
	t.Setenv("AUGUR_SEED", "42")
	t.Setenv("AUGUR_DATASET", "/pfs/imagenet:/pfs/other")
	t.Setenv("AUGUR_TIERS", "/dev/shm/augur:8GiB,/local/ssd/augur:200GiB")
	t.Setenv("AUGUR_LOG", "debug:/tmp/augur.log")
	c, err = Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Seed != 42 || c.Roots[0] != "/pfs/imagenet" || c.Roots[1] != "/pfs/other" ||
		c.Tiers[1].Path != "/local/ssd/augur" || c.Tiers[1].Capacity != 200<<30 ||
		c.LogLevel != "debug" || c.LogFile != "/tmp/augur.log" {
		t.Fatalf("with env: %+v", c)
	}
}

func TestLoadDefaults(t *testing.T) {
	clearEnv(t)
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Policy != "static" || len(c.Roots) != 0 || len(c.Tiers) == 0 {
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
		"AUGUR_POLICY": "magic", "AUGUR_LOG": "chatty", "AUGUR_SAMPLER": "shuffled", "AUGUR_LAYOUT": "tree"} {
		t.Run(k, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(k, v)
			if _, err := Load(); err == nil || !strings.HasPrefix(err.Error(), k+": ") {
				t.Fatalf("error %v, want one naming %s", err, k)
			}
		})
	}
	clearEnv(t)
	t.Setenv("AUGUR_DATASET", "/pfs/ds")
	t.Setenv("AUGUR_TIERS", "/pfs/ds/cache:1G")
	if _, err := Load(); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Fatalf("tier inside dataset: %v", err)
	}
}
