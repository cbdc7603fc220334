package pfsemu

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Options configure one emulated PFS mount.
//
// The zero value of every knob means "off": no latency, unlimited
// bandwidth, no faults, kernel caching as a normal network filesystem.
// An Options with only Source and Mount set is therefore a plain counting
// passthrough, which is what most tests want. DefaultOptions returns the
// contended-Lustre defaults that `augur pfsemu` uses.
type Options struct {
	// Source is the directory whose contents the mount shows. Required.
	Source string
	// Mount is the (existing, empty) directory to mount on. Required.
	// It must not be inside Source and Source must not be inside it.
	Mount string

	// OpenLatency is added to every OPEN and CREATE request.
	OpenLatency time.Duration
	// ReadLatency is added to every READ request, before the bandwidth wait.
	ReadLatency time.Duration
	// MetaLatency is added to every metadata request: LOOKUP, GETATTR,
	// STATX, OPENDIR, READDIR, STATFS, READLINK, ACCESS, GETXATTR and
	// LISTXATTR.
	MetaLatency time.Duration

	// Bandwidth is the aggregate read bandwidth in bytes per second, shared
	// by every file and every client of the mount. 0 means unlimited.
	Bandwidth float64
	// BandwidthCurve, when not empty, replaces Bandwidth: the aggregate
	// bandwidth is interpolated from it by the number of concurrent readers
	// (see CurvePoint). Points must have strictly increasing Readers.
	BandwidthCurve []CurvePoint

	// DirectIO turns the kernel page cache off for files of the mount
	// (FOPEN_DIRECT_IO), so every read(2) reaches the emulator. Without it
	// files are opened with FOPEN_KEEP_CACHE: cached data survives close and
	// reopen and is dropped when the file's mtime or size changes, like a
	// Lustre client holding a read lock.
	DirectIO bool
	// CacheTimeout is how long the kernel may cache entries, attributes and
	// negative lookups. nil means the default: 1s, or 0 when DirectIO is set
	// (then every path walk and stat reaches the emulator).
	CacheTimeout *time.Duration

	// FailRate is the fraction of READ requests answered with EIO instead
	// of data, in [0, 1]. Which reads fail is a pure function of FaultSeed
	// and the read's sequence number, so a run with the same seed and the
	// same order of reads fails the same reads.
	FailRate float64
	// FaultSeed seeds the fault choice.
	FaultSeed uint64
	// StallEvery and Stall: every StallEvery-th READ request sleeps Stall
	// before it is served, like a server stuck in a lock or a failover.
	// Both or neither must be set.
	StallEvery int64
	Stall      time.Duration
	// RefuseDirect makes the emulator a filesystem without O_DIRECT, as
	// some network filesystems and older kernels' tmpfs and FUSE are:
	// RefuseOpen answers an OPEN with O_DIRECT with EINVAL; RefuseRead
	// accepts it and answers each READ of a descriptor that still has
	// O_DIRECT with EINVAL (a filesystem whose alignment a reader misses).
	RefuseDirect Refusal

	// StatsFile, when set, receives the counters as JSON (see Stats) every
	// StatsInterval and once more at Unmount. It is replaced atomically:
	// written to a temporary file in the same directory, then renamed. It
	// must not be inside Source or Mount.
	StatsFile string
	// StatsInterval defaults to 1s.
	StatsInterval time.Duration
	// PerFile adds per-file counters (Stats.Files). They cost a map entry
	// per file opened, so leave them off for datasets with millions of
	// files.
	PerFile bool

	// Logf receives the emulator's few messages (a cleared stale mount, a
	// lazy unmount). nil writes them to standard error.
	Logf func(format string, args ...any)
	// Debug logs every FUSE request (go-fuse's debug output) through Logf.
	Debug bool
}

// Refusal is where a filesystem without O_DIRECT refuses it.
type Refusal string

// The places RefuseDirect can name; "" accepts O_DIRECT.
const (
	RefuseOpen Refusal = "open"
	RefuseRead Refusal = "read"
)

// CurvePoint is one point of an aggregate bandwidth curve, in the manner
// of NoPFS's t(γ): with Readers concurrent readers the PFS delivers
// Bandwidth bytes per second in total. Between points the bandwidth is
// interpolated linearly; below the first point the first bandwidth holds,
// above the last point the last one.
type CurvePoint struct {
	Readers   int
	Bandwidth float64 // bytes per second, > 0
}

// Defaults used by DefaultOptions and the `augur pfsemu` flags: a busy
// Lustre as one job sees it.
const (
	DefaultOpenLatency  = 2 * time.Millisecond
	DefaultReadLatency  = 500 * time.Microsecond
	DefaultMetaLatency  = 1 * time.Millisecond
	DefaultBandwidth    = 200 << 20 // bytes per second
	DefaultCacheTimeout = time.Second
	DefaultFaultSeed    = 1
)

// DefaultOptions returns Options with the contended-Lustre defaults that
// `augur pfsemu` uses when no flag overrides them.
func DefaultOptions(source, mount string) Options {
	return Options{
		Source:      source,
		Mount:       mount,
		OpenLatency: DefaultOpenLatency,
		ReadLatency: DefaultReadLatency,
		MetaLatency: DefaultMetaLatency,
		Bandwidth:   DefaultBandwidth,
		FaultSeed:   DefaultFaultSeed,
	}
}

// cacheTimeout returns the entry/attribute timeout the mount will use.
func (o *Options) cacheTimeout() time.Duration {
	if o.CacheTimeout != nil {
		return *o.CacheTimeout
	}
	if o.DirectIO {
		return 0
	}
	return DefaultCacheTimeout
}

// validate checks o, makes its paths absolute and resolves their
// symbolic links. It reads the filesystem only to resolve links.
func (o *Options) validate() error {
	if o.Source == "" {
		return errors.New("no source directory given")
	}
	if o.Mount == "" {
		return errors.New("no mount point given")
	}
	o.Source, o.Mount = resolvePath(o.Source), resolvePath(o.Mount)
	if within(o.Mount, o.Source) || within(o.Source, o.Mount) {
		return fmt.Errorf("mount point %s and source %s must not contain each other", o.Mount, o.Source)
	}
	if o.StatsFile != "" {
		o.StatsFile = resolvePath(o.StatsFile)
		if err := o.outside("stats file", o.StatsFile); err != nil {
			return err
		}
	}
	for name, d := range map[string]time.Duration{
		"open latency": o.OpenLatency, "read latency": o.ReadLatency,
		"metadata latency": o.MetaLatency, "stall": o.Stall, "stats interval": o.StatsInterval,
	} {
		if d < 0 {
			return fmt.Errorf("%s %v is negative", name, d)
		}
	}
	if o.CacheTimeout != nil && *o.CacheTimeout < 0 {
		return fmt.Errorf("cache timeout %v is negative", *o.CacheTimeout)
	}
	if o.Bandwidth < 0 || math.IsNaN(o.Bandwidth) || math.IsInf(o.Bandwidth, 0) {
		return fmt.Errorf("bandwidth %v is not a rate", o.Bandwidth)
	}
	if err := checkCurve(o.BandwidthCurve); err != nil {
		return err
	}
	if !(o.FailRate >= 0 && o.FailRate <= 1) {
		return fmt.Errorf("fail rate %v is not in [0, 1]", o.FailRate)
	}
	if o.StallEvery < 0 {
		return fmt.Errorf("stall-every %d is negative", o.StallEvery)
	}
	if (o.StallEvery > 0) != (o.Stall > 0) {
		return errors.New("a stall needs both a period (stall-every) and a duration (stall)")
	}
	switch o.RefuseDirect {
	case "", RefuseOpen, RefuseRead:
	default:
		return fmt.Errorf("refuse-direct %q: want %q or %q", o.RefuseDirect, RefuseOpen, RefuseRead)
	}
	if o.StatsInterval == 0 {
		o.StatsInterval = time.Second
	}
	return nil
}

// outside checks that a file the emulator writes is not inside the
// source or the mount, where it would show up in the mount (or, inside
// the mount, deadlock the emulator writing to itself).
func (o *Options) outside(what, p string) error {
	if within(p, o.Mount) || within(p, o.Source) {
		return fmt.Errorf("%s %s must not be inside the source or the mount: it would show up in the mount", what, p)
	}
	return nil
}

// resolvePath makes p absolute and resolves the symbolic links in it as
// far as they exist, so that containment checks cannot be fooled by a
// link. Where the path cannot be resolved (it does not exist yet, or is a
// stale mount point) it stays absolute and clean.
func resolvePath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	if r, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(r, filepath.Base(abs))
	}
	return abs
}

// within reports whether path p is dir or inside it. Both must be clean
// and absolute.
func within(p, dir string) bool {
	if p == dir {
		return true
	}
	if dir == "/" {
		return true
	}
	return strings.HasPrefix(p, dir+"/")
}

func checkCurve(c []CurvePoint) error {
	for i, p := range c {
		if p.Readers < 1 {
			return fmt.Errorf("bandwidth curve: reader count %d must be at least 1", p.Readers)
		}
		if !(p.Bandwidth > 0) || math.IsInf(p.Bandwidth, 0) {
			return fmt.Errorf("bandwidth curve: bandwidth at %d readers must be positive", p.Readers)
		}
		if i > 0 && p.Readers <= c[i-1].Readers {
			return fmt.Errorf("bandwidth curve: reader counts must increase (%d after %d)", p.Readers, c[i-1].Readers)
		}
	}
	return nil
}

// curveAt interpolates the curve at the given number of readers. The curve
// must be valid and not empty.
func curveAt(c []CurvePoint, readers int) float64 {
	i := sort.Search(len(c), func(i int) bool { return c[i].Readers >= readers })
	switch {
	case i == len(c):
		return c[len(c)-1].Bandwidth
	case c[i].Readers == readers || i == 0:
		return c[i].Bandwidth
	}
	lo, hi := c[i-1], c[i]
	f := float64(readers-lo.Readers) / float64(hi.Readers-lo.Readers)
	return lo.Bandwidth + f*(hi.Bandwidth-lo.Bandwidth)
}

// ParseRate parses a byte rate such as "200MiB/s", "1GiB/s", "500MB/s",
// "1.5GB/s" or "4096" (bytes per second). The "/s" is optional. Binary
// units (KiB MiB GiB TiB) are powers of 1024, decimal ones (kB MB GB TB)
// powers of 1000; units are case-insensitive and always mean bytes. "0",
// "off" and "unlimited" return 0, meaning no limit.
func ParseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "off", "unlimited", "none":
		return 0, nil
	}
	t = strings.TrimSuffix(t, "/s")
	i := strings.IndexFunc(t, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("bad rate %q: want a number of bytes per second like 200MiB/s, 1GiB/s or 500MB/s", s)
	}
	mult, ok := units[strings.ToLower(unit)]
	if !ok {
		return 0, fmt.Errorf("bad rate %q: unknown unit %q (use B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)", s, unit)
	}
	r := v * mult
	if math.IsInf(r, 0) {
		return 0, fmt.Errorf("bad rate %q: too large", s)
	}
	return r, nil
}

var units = map[string]float64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// ParseCurve parses a bandwidth curve such as
// "1:200MiB/s,2:300MiB/s,8:400MiB/s": comma-separated points of
// readers:rate with strictly increasing reader counts.
func ParseCurve(s string) ([]CurvePoint, error) {
	var c []CurvePoint
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		rs, bs, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("bad curve point %q: want readers:rate like 2:300MiB/s", part)
		}
		n, err := strconv.Atoi(strings.TrimSpace(rs))
		if err != nil {
			return nil, fmt.Errorf("bad curve point %q: reader count %q is not an integer", part, rs)
		}
		b, err := ParseRate(bs)
		if err != nil {
			return nil, fmt.Errorf("bad curve point %q: %v", part, err)
		}
		c = append(c, CurvePoint{Readers: n, Bandwidth: b})
	}
	if err := checkCurve(c); err != nil {
		return nil, err
	}
	return c, nil
}

// FormatRate formats bytes per second the way ParseRate reads them.
func FormatRate(r float64) string {
	if r == 0 {
		return "unlimited"
	}
	for _, u := range []struct {
		name string
		v    float64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if r >= u.v {
			return strconv.FormatFloat(r/u.v, 'g', -1, 64) + u.name + "/s"
		}
	}
	return strconv.FormatFloat(r, 'g', -1, 64) + "B/s"
}
