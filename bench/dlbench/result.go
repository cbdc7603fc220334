package dlbench

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/augur-hpc/augur/bench/pfsemu"
)

// Result is one job's measurements. Times are seconds, sizes bytes.
type Result struct {
	Name     string   `json:"name"`
	Workload Workload `json:"workload"`
	Dataset  string   `json:"dataset"`
	Root     string   `json:"read_root"` // where the readers read it
	Preload  string   `json:"preload,omitempty"`
	Epochs   []Epoch  `json:"epochs"`
	// Seconds is the reader process's wall time from start to exit,
	// less the time Exec.BetweenEpochs took (the harness's page-cache
	// drops: 0.6 s each on a machine holding a million files in tmpfs);
	// Overhead is Seconds minus the epochs (start-up, a preload's
	// initialisation, exit).
	Seconds  float64 `json:"seconds"`
	Overhead float64 `json:"overhead_seconds"`
	// Stderr is what the readers printed on standard error.
	Stderr string `json:"stderr,omitempty"`
}

// Epoch is what one epoch measured.
type Epoch struct {
	Epoch         int     `json:"epoch"` // from 1
	Samples       int64   `json:"samples"`
	Bytes         int64   `json:"bytes"`
	Seconds       float64 `json:"seconds"` // wall time, first fork to last rank done
	SamplesPerSec float64 `json:"samples_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"` // 10^6 bytes per second
	// Stall is the mean over ranks of the time the compute loop waited
	// for its next batch; StallMax the largest; Sync the mean time ranks
	// waited for each other at the step barrier.
	Stall    float64 `json:"stall_seconds"`
	StallMax float64 `json:"stall_max_seconds"`
	Sync     float64 `json:"sync_seconds"`
	Errors   int64   `json:"errors"`
	// Corrupt counts the samples read whole whose bytes were not the
	// dataset's (Workload.Verify); the reader names the first few on
	// stderr.
	Corrupt int64 `json:"corrupt,omitempty"`
	// Latency of one sample read (open to close of a whole file, the read
	// calls of a record), in microseconds. Empty with no I/O.
	Latency *Latency `json:"latency_us,omitempty"`
	// PFS is what the emulated PFS served during the epoch (nil when not
	// reading through one). The first epoch also holds what happened
	// before it in the process (a preload's start-up checks).
	PFS *pfsemu.Stats `json:"pfs,omitempty"`
}

// Latency holds percentiles of sample read latencies in microseconds.
type Latency struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// Percentiles summarises latencies given in nanoseconds. Percentiles are
// nearest-rank: the smallest value with at least q of the values at or
// below it. It returns nil for no values.
func Percentiles(ns []uint64) *Latency {
	if len(ns) == 0 {
		return nil
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	rank := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return float64(s[max(i, 0)]) / 1e3
	}
	var sum float64
	for _, v := range s {
		sum += float64(v)
	}
	return &Latency{N: len(s), Mean: sum / float64(len(s)) / 1e3, P50: rank(0.50), P95: rank(0.95),
		P99: rank(0.99), P999: rank(0.999), Max: float64(s[len(s)-1]) / 1e3}
}

// readLatencies reads a latency file of the reader: little-endian uint64
// nanoseconds.
func readLatencies(name string) ([]uint64, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	if len(data)%8 != 0 {
		return nil, fmt.Errorf("%s: %d bytes is not a whole number of latencies", name, len(data))
	}
	out := make([]uint64, len(data)/8)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(data[8*i:])
	}
	return out, nil
}

// TotalSeconds is the sum of the epochs' wall times.
func (r *Result) TotalSeconds() float64 {
	var t float64
	for _, e := range r.Epochs {
		t += e.Seconds
	}
	return t
}

// subStats returns a - b for every counter (peak readers and uptime are
// a's).
func subStats(a, b pfsemu.Stats) pfsemu.Stats {
	return pfsemu.Stats{
		Lookups: a.Lookups - b.Lookups, Getattrs: a.Getattrs - b.Getattrs, Opendirs: a.Opendirs - b.Opendirs,
		Readdirs: a.Readdirs - b.Readdirs, Statfs: a.Statfs - b.Statfs, Readlinks: a.Readlinks - b.Readlinks,
		Accesses: a.Accesses - b.Accesses, Xattrs: a.Xattrs - b.Xattrs,
		Opens: a.Opens - b.Opens, Creates: a.Creates - b.Creates, Reads: a.Reads - b.Reads,
		ReadBytes: a.ReadBytes - b.ReadBytes, Releases: a.Releases - b.Releases,
		Writes: a.Writes - b.Writes, WriteBytes: a.WriteBytes - b.WriteBytes, Setattrs: a.Setattrs - b.Setattrs,
		NamespaceOps: a.NamespaceOps - b.NamespaceOps, Flushes: a.Flushes - b.Flushes, Fsyncs: a.Fsyncs - b.Fsyncs,
		Releasedirs: a.Releasedirs - b.Releasedirs, ReadFaults: a.ReadFaults - b.ReadFaults, Stalls: a.Stalls - b.Stalls,
		PeakReaders: a.PeakReaders, ThrottledSeconds: a.ThrottledSeconds - b.ThrottledSeconds,
		UptimeSeconds: a.UptimeSeconds,
	}
}

// SubStats is subStats for callers outside the package (the make bench
// driver accounts for augur warm's PFS traffic with it).
func SubStats(a, b pfsemu.Stats) pfsemu.Stats { return subStats(a, b) }

// MetaOps is the number of metadata requests in s.
func MetaOps(s *pfsemu.Stats) int64 {
	return s.Lookups + s.Getattrs + s.Opendirs + s.Readdirs + s.Statfs + s.Readlinks + s.Accesses + s.Xattrs
}
