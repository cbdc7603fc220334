// The configuration file (AUGUR_CONFIG): its TOML schema, read into a
// Config, with each error given by file and line.

package shim

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/augur-hpc/augur/peers"
	"github.com/augur-hpc/augur/tiering"
	"github.com/pelletier/go-toml/v2"
)

// fileConfig is the TOML schema. Unknown keys are errors.
type fileConfig struct {
	Policy     string `toml:"policy"`
	Seed       *int64 `toml:"seed"`
	Revalidate string `toml:"revalidate"`
	// PassThrough: "auto" or "off" (Config.PassThrough).
	PassThrough string `toml:"passthrough"`
	Reactive    struct {
		WaitMax string `toml:"wait_max"`
	} `toml:"reactive"`
	Blocks struct {
		Above string `toml:"above"`
	} `toml:"blocks"`
	Dataset struct {
		Roots  []string `toml:"roots"`
		Layout string   `toml:"layout"`
	} `toml:"dataset"`
	Sampler struct {
		Kind         string `toml:"kind"`
		Epochs       int    `toml:"epochs"`
		BatchSize    int    `toml:"batch_size"`
		DropLast     *bool  `toml:"drop_last"`
		Shuffle      *bool  `toml:"shuffle"`
		WorldSize    int    `toml:"world_size"`
		RanksPerNode int    `toml:"ranks_per_node"`
		NodeRank     int    `toml:"node_rank"`
		Torch        string `toml:"torch_version"`
	} `toml:"sampler"`
	Prefetch struct {
		Lookahead int    `toml:"lookahead"`
		Stage     string `toml:"stage"`
	} `toml:"prefetch"`
	Tier []struct {
		Path     string `toml:"path"`
		Capacity string `toml:"capacity"`
		Threads  int    `toml:"threads"`
		Fsync    *bool  `toml:"fsync"`
	} `toml:"tier"`
	Log struct {
		Level string `toml:"level"`
		File  string `toml:"file"`
	} `toml:"log"`
	Peers peers.Config `toml:"peers"`
}

func (c *Config) readFile(path string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return &ConfigError{File: path, Msg: err.Error()}
	}
	c.File = path
	fc := fileConfig{Peers: c.Peers} // keys the file leaves out keep their defaults
	dec := toml.NewDecoder(bytes.NewReader(src)).DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return tomlError(path, err)
	}
	fail := func(table string, idx int, key, msg string) error {
		return &ConfigError{File: path, Line: locate(src, table, idx, key), Msg: msg}
	}
	if fc.Policy != "" {
		c.Policy = fc.Policy
		if !validPolicy(c.Policy) {
			return fail("", 0, "policy", badPolicy(c.Policy))
		}
	}
	if fc.Seed != nil {
		c.Seed = *fc.Seed
	}
	if fc.Revalidate != "" {
		if c.Revalidate, err = parseDuration(fc.Revalidate); err != nil {
			return fail("", 0, "revalidate", "revalidate: "+err.Error())
		}
	}
	switch fc.PassThrough {
	case "":
	case "auto", "off":
		c.PassThrough = fc.PassThrough
	default:
		return fail("", 0, "passthrough", fmt.Sprintf("passthrough: %q: want auto or off", fc.PassThrough))
	}
	if fc.Reactive.WaitMax != "" {
		if c.WaitMax, err = ParseSize(fc.Reactive.WaitMax); err != nil {
			return fail("reactive", 0, "wait_max", "wait_max: "+err.Error())
		}
	}
	if fc.Blocks.Above != "" {
		if c.BlockAbove, err = ParseSize(fc.Blocks.Above); err != nil {
			return fail("blocks", 0, "above", "above: "+err.Error())
		}
	}
	c.Roots = fc.Dataset.Roots
	if err := c.readAccess(&fc, fail); err != nil {
		return err
	}
	for i, t := range fc.Tier {
		if t.Path == "" {
			return fail("tier", i, "", "tier has no path")
		}
		tier := tiering.Tier{Path: t.Path, Threads: t.Threads}
		where := fmt.Sprintf("%s:%d", path, locate(src, "tier", i, "path"))
		if t.Capacity == "" {
			return fail("tier", i, "", fmt.Sprintf("tier %s has no capacity", t.Path))
		}
		if tier.Capacity, err = ParseSize(t.Capacity); err != nil {
			return fail("tier", i, "capacity", "capacity: "+err.Error())
		}
		if t.Threads < 0 {
			return fail("tier", i, "threads", "threads must be at least 1")
		}
		tier.Fsync = t.Fsync != nil && *t.Fsync
		c.specs = append(c.specs, tierSpec{tier, where})
	}
	if fc.Log.Level != "" {
		c.LogLevel = fc.Log.Level
		if !validLevel(c.LogLevel) {
			return fail("log", 0, "level", badLevel(c.LogLevel))
		}
	}
	c.LogFile = fc.Log.File
	c.Peers = fc.Peers
	return nil
}

// readAccess takes the [sampler], [prefetch] and dataset layout keys.
func (c *Config) readAccess(fc *fileConfig, fail func(string, int, string, string) error) error {
	a, fs := &c.Access, &fc.Sampler
	if fc.Dataset.Layout != "" {
		a.Layout = fc.Dataset.Layout
	}
	if fs.Kind != "" {
		a.Sampler = fs.Kind
	}
	if fs.DropLast != nil {
		a.DropLast = *fs.DropLast
	}
	if fs.Shuffle != nil {
		a.Shuffle = *fs.Shuffle
	}
	a.Torch = fs.Torch
	if msg := badSampler(a.Sampler); msg != "" {
		return fail("sampler", 0, "kind", msg)
	}
	if msg := badLayout(a.Layout); msg != "" {
		return fail("dataset", 0, "layout", msg)
	}
	ints := []struct {
		key string
		v   int
		dst *int
		min int
	}{
		{"epochs", fs.Epochs, &a.Epochs, 0}, {"batch_size", fs.BatchSize, &a.BatchSize, 0},
		{"world_size", fs.WorldSize, &a.WorldSize, 1}, {"ranks_per_node", fs.RanksPerNode, &a.RanksPerNode, 1},
		{"node_rank", fs.NodeRank, &a.NodeRank, 0},
	}
	for _, i := range ints {
		if i.v < 0 || (i.v != 0 && i.v < i.min) {
			return fail("sampler", 0, i.key, fmt.Sprintf("%s must be at least %d", i.key, i.min))
		}
		if i.v != 0 || i.key == "node_rank" {
			*i.dst = i.v
		}
	}
	if fc.Prefetch.Lookahead < 0 {
		return fail("prefetch", 0, "lookahead", "lookahead must not be negative")
	}
	if fc.Prefetch.Lookahead > 0 {
		a.Lookahead = fc.Prefetch.Lookahead
	}
	if fc.Prefetch.Stage != "" {
		n, err := ParseSize(fc.Prefetch.Stage)
		if err != nil {
			return fail("prefetch", 0, "stage", "stage: "+err.Error())
		}
		a.Stage = n
	}
	return nil
}

// tomlError turns a go-toml error into file:line: message.
func tomlError(path string, err error) error {
	var se *toml.StrictMissingError
	if errors.As(err, &se) && len(se.Errors) > 0 {
		row, _ := se.Errors[0].Position()
		key := strings.Join(se.Errors[0].Key(), ".")
		return &ConfigError{File: path, Line: row, Msg: fmt.Sprintf("unknown key %q", key)}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		return &ConfigError{File: path, Line: row, Msg: de.Error()}
	}
	return &ConfigError{File: path, Msg: err.Error()}
}

// locate finds the line of key in the idx-th occurrence of table (""
// for the top level, "tier" for the idx-th [[tier]]), or of the table
// header itself when key is "".
func locate(src []byte, table string, idx int, key string) int {
	cur, n := "", 0
	seen := map[string]int{}
	for i, line := range strings.Split(string(src), "\n") {
		l, _, _ := strings.Cut(line, "#")
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") {
			cur = strings.Trim(l, "[] ")
			n = seen[cur]
			seen[cur]++
			if key == "" && cur == table && n == idx {
				return i + 1
			}
			continue
		}
		if k, _, ok := strings.Cut(l, "="); ok && key != "" && cur == table && n == idx &&
			strings.TrimSpace(k) == key {
			return i + 1
		}
	}
	return 0
}
