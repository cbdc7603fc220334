package shim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/augur-hpc/augur/peers"
	"github.com/augur-hpc/augur/seed"
	"github.com/augur-hpc/augur/tiering"
	"github.com/pelletier/go-toml/v2"
	"golang.org/x/sys/unix"
)

// Config is everything a process of a job needs to know. Load builds it
// from the built-in defaults, the TOML file named by AUGUR_CONFIG, and
// the AUGUR_* environment variables, in that order of precedence (the
// environment wins).
type Config struct {
	Roots    []string       // dataset roots, absolute and clean
	Tiers    []tiering.Tier // fastest first
	Policy   string         // static, reactive or clairvoyant
	Seed     int64
	LogLevel string
	LogFile  string
	File     string // the config file read, if any
	// Revalidate is how often, at most, the leader compares a served
	// copy with its source during a job (0: at every open).
	Revalidate time.Duration
	// WaitMax is the largest file whose first reader waits for its copy
	// under the reactive policy (0: none waits; see reactive).
	WaitMax int64
	Access  Access
	// Peers is the job's membership across nodes (package peers); a job
	// of one node has none.
	Peers peers.Config
	// Problems are what is wrong with the configuration that augur works
	// around: tiers it does not use, and warnings. Each is said once by
	// whoever loads the configuration (the preload, augur run, augur
	// check, which fails on any).
	Problems []Problem
	specs    []tierSpec // the tiers as configured, until check
}

// Problem is one thing wrong with the configuration.
type Problem struct {
	Where   string // file:line, the variable, or "" (a built-in default)
	Msg     string
	Warning bool // the tier is used all the same
}

func (p Problem) String() string {
	if p.Where == "" {
		return p.Msg
	}
	return p.Where + ": " + p.Msg
}

// tierSpec is a tier as configured, with where it was.
type tierSpec struct {
	tiering.Tier
	where string
}

// Access is how the training job reads the dataset: what the clairvoyant
// policy reproduces (see package seed).
type Access struct {
	Sampler      string // distributed, random, sequential, numpy, numpy-legacy, file:<path>
	Layout       string // imagefolder, flat, list:<file>
	Epochs       int    // 0: unknown; placement then looks DefaultHorizon epochs ahead
	BatchSize    int
	DropLast     bool
	Shuffle      bool
	WorldSize    int    // ranks in the job
	RanksPerNode int    // ranks on each node
	NodeRank     int    // this node's index: its ranks are NodeRank*RanksPerNode + local rank
	Torch        string // PyTorch version the job runs ("" = before 2.6)
	Lookahead    int    // files prefetched ahead of each rank
	Stage        int64  // bytes of the RAM tier for staged files (read once, then dropped)
}

// DefaultWaitMax is the reactive policy's wait_max: the largest file whose
// first reader waits for the copy instead of reading the original beside
// it. Waiting costs a reader that reads all of a file nothing (the copy
// is the read it would make), and one that reads a small part of it the
// rest of the file: up to 8 MiB, some 40 ms at 200 MB/s.
const DefaultWaitMax = 8 << 20

// DefaultHorizon is how many epochs placement considers when the job's
// epoch count is not configured.
const DefaultHorizon = 10

// Policies the control plane knows.
var Policies = []string{"static", "reactive", "clairvoyant"}

// fileConfig is the TOML schema. Unknown keys are errors.
type fileConfig struct {
	Policy     string `toml:"policy"`
	Seed       *int64 `toml:"seed"`
	Revalidate string `toml:"revalidate"`
	Reactive   struct {
		WaitMax string `toml:"wait_max"`
	} `toml:"reactive"`
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

// ConfigError is an error in a configuration file, at a line.
type ConfigError struct {
	File string
	Line int
	Msg  string
}

func (e *ConfigError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Load reads the configuration of this process.
func Load() (*Config, error) {
	c := &Config{Policy: "static", LogLevel: "warn", Revalidate: 30 * time.Second, WaitMax: DefaultWaitMax,
		Access: Access{Sampler: "distributed", Layout: "imagefolder", Shuffle: true,
			WorldSize: 1, RanksPerNode: 1, Lookahead: 1024}, Peers: peers.Defaults()}
	if path := os.Getenv("AUGUR_CONFIG"); path != "" {
		if err := c.readFile(path); err != nil {
			return nil, err
		}
	}
	if err := c.applyEnv(); err != nil {
		return nil, err
	}
	if len(c.specs) == 0 {
		for _, t := range DefaultTiers() {
			c.specs = append(c.specs, tierSpec{Tier: t})
		}
	}
	return c, c.check()
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
	if fc.Reactive.WaitMax != "" {
		if c.WaitMax, err = ParseSize(fc.Reactive.WaitMax); err != nil {
			return fail("reactive", 0, "wait_max", "wait_max: "+err.Error())
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

func (c *Config) applyEnv() error {
	if v := os.Getenv("AUGUR_DATASET"); v != "" {
		c.Roots = strings.Split(v, ":")
	}
	if v := os.Getenv("AUGUR_TIERS"); v != "" {
		tiers, err := ParseTiers(v)
		if err != nil {
			return fmt.Errorf("AUGUR_TIERS: %w", err)
		}
		c.specs = nil
		for _, t := range tiers {
			c.specs = append(c.specs, tierSpec{t, "AUGUR_TIERS"})
		}
	}
	if v := os.Getenv("AUGUR_POLICY"); v != "" {
		if !validPolicy(v) {
			return fmt.Errorf("AUGUR_POLICY: %s", badPolicy(v))
		}
		c.Policy = v
	}
	if v := os.Getenv("AUGUR_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 0, 64)
		if err != nil {
			return fmt.Errorf("AUGUR_SEED: %q is not an integer", v)
		}
		c.Seed = s
	}
	if err := c.Access.applyEnv(); err != nil {
		return err
	}
	if v := os.Getenv("AUGUR_REVALIDATE"); v != "" {
		d, err := parseDuration(v)
		if err != nil {
			return fmt.Errorf("AUGUR_REVALIDATE: %w", err)
		}
		c.Revalidate = d
	}
	if v := os.Getenv("AUGUR_WAIT_MAX"); v != "" {
		n, err := ParseSize(v)
		if err != nil {
			return fmt.Errorf("AUGUR_WAIT_MAX: %w", err)
		}
		c.WaitMax = n
	}
	if v := os.Getenv("AUGUR_LOG"); v != "" {
		level, file, _ := strings.Cut(v, ":")
		if !validLevel(level) {
			return fmt.Errorf("AUGUR_LOG: %s", badLevel(level))
		}
		c.LogLevel, c.LogFile = level, file
	}
	return c.Peers.FromEnv(peerEnv)
}

// peerEnv is getenv for the job's membership, less an AUGUR_JOB that
// augur made up (the preload or augur run names a job that has no
// name): every node makes up another, and the nodes' one job id is then
// the launcher's (SLURM_JOB_ID, TORCHELASTIC_RUN_ID).
func peerEnv(key string) string {
	v := os.Getenv(key)
	if key == "AUGUR_JOB" && v != "" && v == os.Getenv(JobMadeVar) {
		return ""
	}
	return v
}

// JobMadeVar holds the AUGUR_JOB augur made up, when it did.
const JobMadeVar = "AUGUR_JOB_MADE"

// ParseTiers reads DIR[:SIZE],DIR[:SIZE],... (fastest first). Without a
// size a tier gets half of the free space of its filesystem.
func ParseTiers(s string) ([]tiering.Tier, error) {
	var tiers []tiering.Tier
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		dir, size := item, ""
		if i := strings.LastIndex(item, ":"); i > 0 {
			dir, size = item[:i], item[i+1:]
		}
		t := tiering.Tier{Path: dir}
		if size == "" {
			t.Capacity = freeSpace(dir) / 2
		} else {
			n, err := ParseSize(size)
			if err != nil {
				return nil, fmt.Errorf("tier %s: %w", dir, err)
			}
			t.Capacity = n
		}
		tiers = append(tiers, t)
	}
	if len(tiers) == 0 {
		return nil, errors.New("no tier given (format: DIR:SIZE,DIR:SIZE)")
	}
	return tiers, nil
}

// DefaultTiers is the built-in hierarchy: a RAM tier under /dev/shm
// holding at most a quarter of the memory available now, and a disk tier
// under the temporary directory holding at most half of its free space.
func DefaultTiers() []tiering.Tier {
	uid := os.Getuid()
	var tiers []tiering.Tier
	if info, err := os.Stat("/dev/shm"); err == nil && info.IsDir() {
		tiers = append(tiers, tiering.Tier{
			Path:     fmt.Sprintf("/dev/shm/augur-%d", uid),
			Capacity: MemAvailable() / 4,
		})
	}
	tmp := filepath.Join(os.TempDir(), fmt.Sprintf("augur-%d", uid))
	tiers = append(tiers, tiering.Tier{Path: tmp, Capacity: freeSpace(os.TempDir()) / 2})
	return tiers
}

// check normalises the dataset roots and keeps the tiers that can work;
// the others become Problems.
func (c *Config) check() error {
	for i, r := range c.Roots {
		abs, err := filepath.Abs(r)
		if err != nil || r == "" {
			return fmt.Errorf("dataset root %q is not a path", r)
		}
		c.Roots[i] = abs
	}
	for _, s := range c.specs {
		if msg := c.tierProblem(&s.Tier); msg != "" {
			c.Problems = append(c.Problems, Problem{s.where, msg + "; tier not used", false})
			continue
		}
		if msg := capacityProblem(s.Tier); msg != "" {
			c.Problems = append(c.Problems, Problem{s.where, msg, true})
		}
		if s.Threads == 0 {
			s.Threads = 16
		}
		c.Tiers = append(c.Tiers, s.Tier)
	}
	c.specs = nil
	if c.Peers.Enabled() {
		if err := c.Peers.Validate(); err != nil {
			c.Problems = append(c.Problems, Problem{"peers", strings.ReplaceAll(err.Error(), "\n", "; ") + "; this node fetches nothing from other nodes and serves them nothing", false})
			c.Peers = peers.Defaults()
		}
	}
	return nil
}

// tierProblem says why t cannot be used beside the tiers kept so far and
// the dataset roots, or "". It cleans t's path.
func (c *Config) tierProblem(t *tiering.Tier) string {
	if !filepath.IsAbs(t.Path) {
		return fmt.Sprintf("tier %q is not an absolute path", t.Path)
	}
	t.Path = filepath.Clean(t.Path)
	for _, k := range c.Tiers {
		switch {
		case k.Path == t.Path || sameFile(k.Path, t.Path):
			return fmt.Sprintf("tier %s is listed twice", t.Path)
		case within(t.Path, k.Path):
			return fmt.Sprintf("tier %s is inside tier %s", t.Path, k.Path)
		case within(k.Path, t.Path):
			return fmt.Sprintf("tier %s contains tier %s", t.Path, k.Path)
		}
	}
	for _, r := range c.RootForms() {
		switch {
		case within(t.Path, r):
			return fmt.Sprintf("tier %s is inside dataset root %s", t.Path, r)
		case within(r, t.Path):
			return fmt.Sprintf("dataset root %s is inside tier %s", r, t.Path)
		}
	}
	if len(c.Tiers) == MaxTiers {
		return fmt.Sprintf("tier %s is one too many: at most %d tiers are supported", t.Path, MaxTiers)
	}
	if err := tiering.Inspect(*t); err != nil {
		return err.Error()
	}
	return ""
}

// sameFile says whether a and b exist and are one directory.
func sameFile(a, b string) bool {
	var sa, sb unix.Stat_t
	return unix.Stat(a, &sa) == nil && unix.Stat(b, &sb) == nil && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// capacityProblem warns of a capacity larger than the tier's filesystem.
func capacityProblem(t tiering.Tier) string {
	dir := t.Path
	var fs unix.Statfs_t
	if unix.Statfs(dir, &fs) != nil {
		if dir = filepath.Dir(dir); unix.Statfs(dir, &fs) != nil {
			return ""
		}
	}
	if size := int64(fs.Blocks) * fs.Bsize; t.Capacity > size {
		return fmt.Sprintf("warning: tier %s: capacity %s is more than its filesystem holds (%s); it fills up first",
			t.Path, FormatSize(t.Capacity), FormatSize(size))
	}
	return ""
}

// within says whether p is dir or inside it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration (examples: 30s, 5m, 0s)", s)
	}
	return d, nil
}

func validPolicy(p string) bool {
	for _, q := range Policies {
		if p == q {
			return true
		}
	}
	return false
}

func badPolicy(p string) string {
	return fmt.Sprintf("unknown policy %q (known: %s)", p, strings.Join(Policies, ", "))
}

var levels = []string{"debug", "info", "warn", "error", "off"}

func validLevel(l string) bool {
	for _, x := range levels {
		if l == x {
			return true
		}
	}
	return false
}

func badLevel(l string) string {
	return fmt.Sprintf("unknown log level %q (known: %s)", l, strings.Join(levels, ", "))
}

// MemAvailable is the memory the kernel says is available now
// (/proc/meminfo's MemAvailable), 0 if it does not say.
func MemAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		if n, _ := fmt.Sscanf(sc.Text(), "MemAvailable: %d kB", &kb); n == 1 {
			return kb << 10
		}
	}
	return 0
}

// freeSpace is the space available to us on the filesystem holding dir
// (or its nearest existing parent).
func freeSpace(dir string) int64 {
	for d := dir; ; d = filepath.Dir(d) {
		var fs unix.Statfs_t
		if unix.Statfs(d, &fs) == nil {
			return int64(fs.Bavail) * fs.Bsize
		}
		if d == "/" || d == "." {
			return 0
		}
	}
}

// applyEnv takes the AUGUR_* access variables and the world layout that
// torchrun or SLURM publish (explicit AUGUR_ variables win).
func (a *Access) applyEnv() error {
	strs := map[string]*string{"AUGUR_SAMPLER": &a.Sampler, "AUGUR_LAYOUT": &a.Layout, "AUGUR_TORCH_VERSION": &a.Torch}
	for k, dst := range strs {
		if v := os.Getenv(k); v != "" {
			*dst = v
		}
	}
	if msg := badSampler(a.Sampler); msg != "" {
		return fmt.Errorf("AUGUR_SAMPLER: %s", msg)
	}
	if msg := badLayout(a.Layout); msg != "" {
		return fmt.Errorf("AUGUR_LAYOUT: %s", msg)
	}
	ints := []struct {
		keys []string
		dst  *int
		min  int
	}{
		{[]string{"AUGUR_EPOCHS"}, &a.Epochs, 0},
		{[]string{"AUGUR_BATCH_SIZE"}, &a.BatchSize, 0},
		{[]string{"AUGUR_WORLD_SIZE", "WORLD_SIZE", "SLURM_NTASKS"}, &a.WorldSize, 1},
		{[]string{"AUGUR_RANKS_PER_NODE", "LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"}, &a.RanksPerNode, 1},
		{[]string{"AUGUR_NODE_RANK", "GROUP_RANK", "SLURM_NODEID"}, &a.NodeRank, 0},
		{[]string{"AUGUR_LOOKAHEAD"}, &a.Lookahead, 1},
	}
	for _, i := range ints {
		for _, k := range i.keys {
			v := os.Getenv(k)
			if v == "" {
				continue
			}
			// SLURM writes counts like "4(x2)": the leading number is ours.
			digits := strings.TrimRightFunc(v, func(r rune) bool { return r < '0' || r > '9' })
			if k == "SLURM_NTASKS_PER_NODE" {
				if j := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' }); j > 0 {
					digits = v[:j]
				}
			}
			n, err := strconv.Atoi(digits)
			if err != nil || n < i.min {
				return fmt.Errorf("%s: %q is not an integer of at least %d", k, v, i.min)
			}
			*i.dst = n
			break
		}
	}
	bools := map[string]*bool{"AUGUR_DROP_LAST": &a.DropLast, "AUGUR_SHUFFLE": &a.Shuffle}
	for k, dst := range bools {
		if v := os.Getenv(k); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not a boolean (1, 0, true, false)", k, v)
			}
			*dst = b
		}
	}
	if v := os.Getenv("AUGUR_STAGE"); v != "" {
		n, err := ParseSize(v)
		if err != nil {
			return fmt.Errorf("AUGUR_STAGE: %w", err)
		}
		a.Stage = n
	}
	return nil
}

// badSampler and badLayout name what is wrong with a sampler or layout
// setting ("" when nothing is), so that a typo is reported by augur check
// rather than found when the leader starts.
func badSampler(k string) string {
	switch {
	case k == seed.KindDistributed, k == seed.KindRandom, k == seed.KindSequential,
		k == seed.KindNumpy, k == seed.KindNumpyLegacy,
		strings.HasPrefix(k, seed.KindFilePrefix) && len(k) > len(seed.KindFilePrefix):
		return ""
	}
	return fmt.Sprintf("unknown sampler %q (known: distributed, random, sequential, numpy, numpy-legacy, file:<order file>)", k)
}

func badLayout(l string) string {
	switch {
	case l == seed.LayoutImageFolder, l == "flat", l == seed.LayoutFiles,
		strings.HasPrefix(l, seed.LayoutListPrefix) && len(l) > len(seed.LayoutListPrefix):
		return ""
	}
	return fmt.Sprintf("unknown layout %q (known: imagefolder, flat, list:<file>)", l)
}
