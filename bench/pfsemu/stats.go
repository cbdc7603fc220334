package pfsemu

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Stats is a snapshot of what the emulator has served since it mounted.
// Every counter is a number of FUSE requests the kernel sent and the
// emulator answered (successfully or with an error), so it is what the
// PFS would have seen: requests the kernel answered from its own caches
// never appear. The JSON field names are the ones written to the stats
// file.
type Stats struct {
	// Metadata requests. Each one waited MetaLatency.
	Lookups   int64 `json:"lookups"`   // LOOKUP: one path component resolved (open, stat, path walk)
	Getattrs  int64 `json:"getattrs"`  // GETATTR and STATX: attributes of a known inode (stat, fstat)
	Opendirs  int64 `json:"opendirs"`  // OPENDIR
	Readdirs  int64 `json:"readdirs"`  // READDIR: one batch of directory entries; a listing needs one more to see the end
	Statfs    int64 `json:"statfs"`    // STATFS
	Readlinks int64 `json:"readlinks"` // READLINK
	Accesses  int64 `json:"accesses"`  // ACCESS (access(2), faccessat(2))
	Xattrs    int64 `json:"xattrs"`    // GETXATTR and LISTXATTR

	// Data requests.
	Opens     int64 `json:"opens"`      // OPEN, each waited OpenLatency
	Creates   int64 `json:"creates"`    // CREATE and TMPFILE, each waited OpenLatency
	Reads     int64 `json:"reads"`      // READ requests, including those failed by fault injection
	ReadBytes int64 `json:"read_bytes"` // bytes returned by READ
	Releases  int64 `json:"releases"`   // RELEASE: the last close of an open file (sent after close(2) returns)

	// Requests that change the source, passed through without delay.
	Writes       int64 `json:"writes"`        // WRITE requests
	WriteBytes   int64 `json:"write_bytes"`   // bytes written
	Setattrs     int64 `json:"setattrs"`      // SETATTR: truncate, chmod, utimes
	NamespaceOps int64 `json:"namespace_ops"` // MKDIR MKNOD UNLINK RMDIR RENAME LINK SYMLINK SETXATTR REMOVEXATTR

	// Other requests, not delayed.
	Flushes     int64 `json:"flushes"`     // FLUSH: one per close(2) of a descriptor
	Fsyncs      int64 `json:"fsyncs"`      // FSYNC and FSYNCDIR
	Releasedirs int64 `json:"releasedirs"` // RELEASEDIR

	// Injected trouble.
	ReadFaults int64 `json:"read_faults"` // READs answered with EIO by FailRate
	Stalls     int64 `json:"stalls"`      // READs delayed by Stall

	// Bandwidth model.
	PeakReaders      int     `json:"peak_readers"`      // most client threads with a READ in flight at once
	ThrottledSeconds float64 `json:"throttled_seconds"` // total time READs waited for the bandwidth limit, summed over requests

	UptimeSeconds float64 `json:"uptime_seconds"`

	// Files holds per-file counters keyed by path relative to the source,
	// when Options.PerFile is set.
	Files map[string]FileStats `json:"files,omitempty"`
}

// FileStats are the per-file counters of Stats.Files.
type FileStats struct {
	Opens     int64 `json:"opens"`
	Reads     int64 `json:"reads"`
	ReadBytes int64 `json:"read_bytes"`
}

// counters is the live, concurrently updated form of Stats.
type counters struct {
	start time.Time
	end   atomic.Int64 // UnixNano when the mount went away; 0 while it serves

	lookups, getattrs, opendirs, readdirs, statfs, readlinks, accesses, xattrs atomic.Int64
	opens, creates, reads, readBytes, releases                                 atomic.Int64
	writes, writeBytes, setattrs, namespaceOps                                 atomic.Int64
	flushes, fsyncs, releasedirs                                               atomic.Int64
	readFaults, stalls                                                         atomic.Int64
	throttled                                                                  atomic.Int64 // nanoseconds

	// mu guards files. The fileCounters it points to are updated
	// atomically without it.
	mu    sync.Mutex
	files map[string]*fileCounters // nil unless Options.PerFile
}

type fileCounters struct {
	opens, reads, readBytes atomic.Int64
}

// file returns the counters of path, creating them, or nil when per-file
// counting is off.
func (c *counters) file(path string) *fileCounters {
	if c.files == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fc := c.files[path]
	if fc == nil {
		fc = &fileCounters{}
		c.files[path] = fc
	}
	return fc
}

func (c *counters) snapshot(peakReaders int) Stats {
	s := Stats{
		Lookups: c.lookups.Load(), Getattrs: c.getattrs.Load(), Opendirs: c.opendirs.Load(),
		Readdirs: c.readdirs.Load(), Statfs: c.statfs.Load(), Readlinks: c.readlinks.Load(),
		Accesses: c.accesses.Load(), Xattrs: c.xattrs.Load(),
		Opens: c.opens.Load(), Creates: c.creates.Load(), Reads: c.reads.Load(),
		ReadBytes: c.readBytes.Load(), Releases: c.releases.Load(),
		Writes: c.writes.Load(), WriteBytes: c.writeBytes.Load(), Setattrs: c.setattrs.Load(),
		NamespaceOps: c.namespaceOps.Load(),
		Flushes:      c.flushes.Load(), Fsyncs: c.fsyncs.Load(), Releasedirs: c.releasedirs.Load(),
		ReadFaults: c.readFaults.Load(), Stalls: c.stalls.Load(),
		PeakReaders:      peakReaders,
		ThrottledSeconds: time.Duration(c.throttled.Load()).Seconds(),
		UptimeSeconds:    time.Since(c.start).Seconds(),
	}
	if end := c.end.Load(); end != 0 {
		s.UptimeSeconds = time.Unix(0, end).Sub(c.start).Seconds()
	}
	if c.files != nil {
		c.mu.Lock()
		s.Files = make(map[string]FileStats, len(c.files))
		for p, fc := range c.files {
			s.Files[p] = FileStats{Opens: fc.opens.Load(), Reads: fc.reads.Load(), ReadBytes: fc.readBytes.Load()}
		}
		c.mu.Unlock()
	}
	return s
}

// writeStatsFile replaces path with s as indented JSON, atomically: a
// reader sees the old file or the new one, never a part.
func writeStatsFile(path string, s Stats) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	return writeFileAtomic(path, data)
}

func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
