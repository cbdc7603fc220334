package pfsemu

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCountsExact runs a known sequence of system calls against a
// direct-I/O mount with zero cache timeouts, where every call reaches the
// emulator, and checks every counter.
func TestCountsExact(t *testing.T) {
	tc := newTestCase(t, Options{DirectIO: true, PerFile: true}, map[string]int{"d/f": 10000, "g": 300000})
	buf := make([]byte, 4096)

	fd := openR(t, tc.path("d/f")) // LOOKUP d, LOOKUP f, OPEN
	if n, err := unix.Read(fd, buf); n != 4096 || err != nil {
		t.Fatalf("read = %d, %v", n, err) // READ 4096
	}
	if n, err := unix.Pread(fd, buf, 8000); n != 2000 || err != nil {
		t.Fatalf("pread = %d, %v", n, err) // READ 2000, the rest of the file
	}
	if n, err := unix.Pread(fd, buf, 20000); n != 0 || err != nil {
		t.Fatalf("pread past EOF = %d, %v", n, err) // READ 0: direct I/O asks even past EOF
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Size != 10000 {
		t.Fatalf("fstat: size %d, %v", st.Size, err) // GETATTR
	}
	closeFd(t, fd) // FLUSH, then RELEASE after close returns

	if err := unix.Stat(tc.path("d/f"), &st); err != nil {
		t.Fatal(err) // LOOKUP d, LOOKUP f, GETATTR (the lookup's attributes expire at once)
	}
	if err := unix.Stat(tc.path("nope"), &st); err != unix.ENOENT {
		t.Fatalf("stat of a missing file: %v", err) // LOOKUP nope
	}

	dfd := openR(t, tc.mnt) // OPENDIR; the root itself is never looked up
	dbuf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(dfd, dbuf) // READDIR with the entries, READDIR at the end
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	closeFd(t, dfd) // RELEASEDIR

	fd = openR(t, tc.path("g")) // LOOKUP g, OPEN
	// 64 KiB reads, each below the kernel's request size, so one READ
	// each: 5 with data (4*65536 + 37856) and one that finds the end.
	if got := readAll(t, fd, 64<<10); !bytes.Equal(got, content("g", 300000)) {
		t.Fatalf("read %d bytes of g, not its content", len(got))
	}
	closeFd(t, fd)

	var sfs unix.Statfs_t
	if err := unix.Statfs(tc.mnt, &sfs); err != nil {
		t.Fatal(err) // STATFS
	}

	eventually(t, "two RELEASEs and a RELEASEDIR", func() bool {
		s := tc.srv.Stats()
		return s.Releases == 2 && s.Releasedirs == 1
	})
	got := tc.srv.Stats()
	want := Stats{
		Lookups: 6, Getattrs: 2, Opendirs: 1, Readdirs: 2, Statfs: 1,
		Opens: 2, Reads: 9, ReadBytes: 4096 + 2000 + 300000, Releases: 2,
		Flushes: 2, Releasedirs: 1, PeakReaders: 1,
		Files: map[string]FileStats{
			"d/f": {Opens: 1, Reads: 3, ReadBytes: 6096},
			"g":   {Opens: 1, Reads: 6, ReadBytes: 300000},
		},
	}
	got.UptimeSeconds = 0
	if !statsEqual(got, want) {
		t.Errorf("stats after the known sequence:\n got %+v\nwant %+v", got, want)
	}
}

func statsEqual(a, b Stats) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// TestKernelCacheByDefault: without --direct-io the kernel keeps file
// data across close and reopen, as a Lustre client does, so a second pass
// over a file sends OPENs but no READs.
func TestKernelCacheByDefault(t *testing.T) {
	tc := newTestCase(t, Options{}, map[string]int{"f": 10000})
	pass := func() {
		fd := openR(t, tc.path("f"))
		if got := readAll(t, fd, 64<<10); !bytes.Equal(got, content("f", 10000)) {
			t.Fatalf("read %d bytes, not the file", len(got))
		}
		closeFd(t, fd)
	}
	pass()
	first := tc.srv.Stats()
	if first.ReadBytes != 10000 || first.Reads < 1 || first.Reads > 3 {
		t.Fatalf("first pass: %d READs, %d bytes; want the file read once", first.Reads, first.ReadBytes)
	}
	pass()
	second := tc.srv.Stats()
	if second.Opens != 2 || second.Reads != first.Reads || second.ReadBytes != first.ReadBytes {
		t.Errorf("second pass: opens %d, reads %d→%d, bytes %d→%d; want 2 opens and no new READs",
			second.Opens, first.Reads, second.Reads, first.ReadBytes, second.ReadBytes)
	}
}

// TestSourceChanges: a change made in the source directly shows through a
// direct-I/O mount at once, and through a cached mount once the cache
// timeout has passed (the kernel drops cached data when it sees the new
// mtime).
func TestSourceChanges(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts Options
		wait time.Duration
	}{
		{"direct-io", Options{DirectIO: true}, 0},
		{"cached", Options{CacheTimeout: ptr(100 * time.Millisecond)}, 300 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCase(t, tt.opts, map[string]int{"f": 5000})
			read := func() []byte {
				fd := openR(t, tc.path("f"))
				defer closeFd(t, fd)
				return readAll(t, fd, 64<<10)
			}
			read()
			changed := bytes.Repeat([]byte{'x'}, 5000)
			p := filepath.Join(tc.src, "f")
			writeFile(t, p, changed)
			later := time.Now().Add(10 * time.Second)
			if err := os.Chtimes(p, later, later); err != nil {
				t.Fatal(err)
			}
			time.Sleep(tt.wait)
			if got := read(); !bytes.Equal(got, changed) {
				t.Errorf("after changing the source, the mount still shows the old data (%q...)", got[:8])
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestWritesPassThrough: writes, creates and unlinks through the mount
// reach the source and are counted.
func TestWritesPassThrough(t *testing.T) {
	tc := newTestCase(t, Options{DirectIO: true}, map[string]int{"f": 1000})
	fd, err := unix.Open(tc.path("f"), unix.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := unix.Pwrite(fd, []byte("hello"), 10); n != 5 || err != nil {
		t.Fatalf("pwrite = %d, %v", n, err)
	}
	closeFd(t, fd)
	want := content("f", 1000)
	copy(want[10:], "hello")
	if got, _ := os.ReadFile(filepath.Join(tc.src, "f")); !bytes.Equal(got, want) {
		t.Errorf("the write did not reach the source")
	}

	fd, err = unix.Open(tc.path("new"), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := unix.Write(fd, []byte("abc")); n != 3 || err != nil {
		t.Fatalf("write = %d, %v", n, err)
	}
	closeFd(t, fd)
	if got, _ := os.ReadFile(filepath.Join(tc.src, "new")); string(got) != "abc" {
		t.Errorf("created file in source holds %q", got)
	}
	if err := unix.Unlink(tc.path("new")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tc.src, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unlink did not reach the source: %v", err)
	}
	s := tc.srv.Stats()
	if s.Writes != 2 || s.WriteBytes != 8 || s.Creates != 1 || s.Opens != 1 || s.NamespaceOps != 1 {
		t.Errorf("writes %d, write_bytes %d, creates %d, opens %d, namespace_ops %d; want 2, 8, 1, 1, 1",
			s.Writes, s.WriteBytes, s.Creates, s.Opens, s.NamespaceOps)
	}
}

// TestNothingExtraVisible: the mount shows exactly the source, also after
// a file is unlinked while open (where libfuse would leave .fuse_hidden
// files), and the stats file never appears in it.
func TestNothingExtraVisible(t *testing.T) {
	statsFile := filepath.Join(t.TempDir(), "stats.json")
	tc := newTestCase(t, Options{StatsFile: statsFile, StatsInterval: 20 * time.Millisecond},
		map[string]int{"a": 10, "d/b": 20, "d/e/c": 30, ".hidden": 5})
	if err := os.Symlink("d/b", filepath.Join(tc.src, "link")); err != nil {
		t.Fatal(err)
	}

	fd, err := unix.Open(tc.path("d/victim"), unix.O_RDWR|unix.O_CREAT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(fd, []byte("still open")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Unlink(tc.path("d/victim")); err != nil {
		t.Fatal(err)
	}
	if n, err := unix.Pread(fd, make([]byte, 10), 0); n != 10 || err != nil {
		t.Errorf("reading an unlinked open file: %d, %v", n, err)
	}
	eventually(t, "the stats file", func() bool { _, err := os.Stat(statsFile); return err == nil })

	inMount, inSource := listTree(t, tc.mnt), listTree(t, tc.src)
	closeFd(t, fd)
	if !slices.Equal(inMount, inSource) {
		t.Errorf("mount shows %v\nsource has %v", inMount, inSource)
	}
	for _, p := range append(inMount, inSource...) {
		if strings.Contains(p, ".fuse_hidden") || strings.Contains(p, "stats") {
			t.Errorf("unexpected entry %q", p)
		}
	}
	if target, err := os.Readlink(tc.path("link")); err != nil || target != "d/b" {
		t.Errorf("symlink through the mount: %q, %v", target, err)
	}
}

// TestLatency: each request waits at least its configured latency.
// Lower bounds only: a timer never fires early, a slow machine only adds.
func TestLatency(t *testing.T) {
	const open, read, meta = 60 * time.Millisecond, 40 * time.Millisecond, 25 * time.Millisecond
	tc := newTestCase(t, Options{DirectIO: true, OpenLatency: open, ReadLatency: read, MetaLatency: meta},
		map[string]int{"d/f": 1000})
	took := func(f func()) time.Duration {
		start := time.Now()
		f()
		return time.Since(start)
	}
	var fd int
	if d := took(func() { fd = openR(t, tc.path("d/f")) }); d < 2*meta+open {
		t.Errorf("open took %v; two lookups and an open need at least %v", d, 2*meta+open)
	}
	if d := took(func() { unix.Pread(fd, make([]byte, 100), 0) }); d < read {
		t.Errorf("pread took %v, want at least %v", d, read)
	}
	var st unix.Stat_t
	if d := took(func() { unix.Fstat(fd, &st) }); d < meta {
		t.Errorf("fstat took %v, want at least %v", d, meta)
	}
	closeFd(t, fd)
	if d := took(func() { unix.Stat(tc.path("d/f"), &st) }); d < 3*meta {
		t.Errorf("stat took %v; two lookups and a getattr need at least %v", d, 3*meta)
	}
}

// TestBandwidthShared: one bucket for all files and readers. At 50 MiB/s,
// 20 MiB take at least 0.4 s, read by one reader or by four at once.
func TestBandwidthShared(t *testing.T) {
	const rate, total = 50 << 20, 20 << 20
	const minTime = 350 * time.Millisecond // 0.4 s less a margin for rounding
	files := map[string]int{"big": total}
	for i := range 4 {
		files[string(rune('a'+i))] = total / 4
	}
	tc := newTestCase(t, Options{DirectIO: true, Bandwidth: rate}, files)

	start := time.Now()
	fd := openR(t, tc.path("big"))
	if n := len(readAll(t, fd, 1<<20)); n != total {
		t.Fatalf("read %d bytes", n)
	}
	closeFd(t, fd)
	if d := time.Since(start); d < minTime {
		t.Errorf("one reader read 20 MiB at 50 MiB/s in %v, want at least %v", d, minTime)
	}

	before := tc.srv.Stats()
	start = time.Now()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			fd := openR(t, tc.path(string(rune('a'+i))))
			defer closeFd(t, fd)
			if n := len(readAll(t, fd, 1<<20)); n != total/4 {
				t.Errorf("reader %d read %d bytes", i, n)
			}
		})
	}
	wg.Wait()
	if d := time.Since(start); d < minTime {
		t.Errorf("four readers read 4×5 MiB at 50 MiB/s aggregate in %v, want at least %v", d, minTime)
	}
	after := tc.srv.Stats()
	if got := after.ReadBytes - before.ReadBytes; got != total {
		t.Errorf("read_bytes grew by %d, want %d", got, total)
	}
	if after.PeakReaders < 2 || after.PeakReaders > 4 {
		t.Errorf("peak_readers %d, want 2..4 with four concurrent readers", after.PeakReaders)
	}
	if after.ThrottledSeconds <= 0 {
		t.Errorf("throttled_seconds %v, want > 0", after.ThrottledSeconds)
	}
}

// TestBandwidthCurve: the rate follows the number of concurrent readers.
func TestBandwidthCurve(t *testing.T) {
	t.Run("one reader gets the one-reader rate", func(t *testing.T) {
		// 2 MiB at 10 MiB/s: 0.2 s; at the four-reader rate it would be 0.05 s.
		curve := []CurvePoint{{1, 10 << 20}, {4, 40 << 20}}
		tc := newTestCase(t, Options{DirectIO: true, BandwidthCurve: curve}, map[string]int{"f": 2 << 20})
		start := time.Now()
		fd := openR(t, tc.path("f"))
		readAll(t, fd, 1<<20)
		closeFd(t, fd)
		if d := time.Since(start); d < 150*time.Millisecond {
			t.Errorf("2 MiB at 10 MiB/s took %v, want at least 150ms", d)
		}
	})
	t.Run("contention lowers the aggregate", func(t *testing.T) {
		// Four readers of 1 MiB: 0.4 s at the four-reader 10 MiB/s, 0.1 s
		// at the one-reader 40 MiB/s.
		curve := []CurvePoint{{1, 40 << 20}, {4, 10 << 20}}
		files := map[string]int{"a": 1 << 20, "b": 1 << 20, "c": 1 << 20, "d": 1 << 20}
		tc := newTestCase(t, Options{DirectIO: true, BandwidthCurve: curve}, files)
		var fds []int
		for p := range files {
			fds = append(fds, openR(t, tc.path(p)))
		}
		start := time.Now()
		var wg sync.WaitGroup
		for _, fd := range fds {
			wg.Go(func() { readAll(t, fd, 128<<10) })
		}
		wg.Wait()
		d := time.Since(start)
		for _, fd := range fds {
			closeFd(t, fd)
		}
		if d < 200*time.Millisecond {
			t.Errorf("4 readers × 1 MiB took %v, want at least 200ms", d)
		}
		if p := tc.srv.Stats().PeakReaders; p < 2 {
			t.Errorf("peak_readers %d, want at least 2", p)
		}
	})
}

// TestFaults: the failed reads are exactly those the seed picks, about
// the configured fraction of them, and stalls come every Nth read.
func TestFaults(t *testing.T) {
	const n, rate, seed = 2000, 0.1, 7
	tc := newTestCase(t, Options{DirectIO: true, FailRate: rate, FaultSeed: seed}, map[string]int{"f": 4096})
	fd := openR(t, tc.path("f"))
	defer closeFd(t, fd)
	f := faults{failRate: rate, seed: seed}
	buf := make([]byte, 512)
	failed := 0
	for i := 1; i <= n; i++ {
		_, err := unix.Pread(fd, buf, 0)
		if err != nil && err != unix.EIO {
			t.Fatalf("read %d: %v", i, err)
		}
		if (err == unix.EIO) != f.fail(int64(i)) {
			t.Fatalf("read %d: error %v, but the seed says fail=%v", i, err, f.fail(int64(i)))
		}
		if err != nil {
			failed++
		}
	}
	s := tc.srv.Stats()
	if int64(failed) != s.ReadFaults || s.Reads != n {
		t.Errorf("saw %d EIOs in %d reads; stats say %d faults in %d reads", failed, n, s.ReadFaults, s.Reads)
	}
	if failed < 140 || failed > 260 { // 200 expected, σ ≈ 13
		t.Errorf("%d of %d reads failed at rate %v (seed %d)", failed, n, rate, seed)
	}
}

func TestStalls(t *testing.T) {
	const every, stall = 10, 30 * time.Millisecond
	tc := newTestCase(t, Options{DirectIO: true, StallEvery: every, Stall: stall}, map[string]int{"f": 4096})
	fd := openR(t, tc.path("f"))
	defer closeFd(t, fd)
	start := time.Now()
	for range 40 {
		if _, err := unix.Pread(fd, make([]byte, 100), 0); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 4*stall {
		t.Errorf("40 reads with a %v stall every %d took %v", stall, every, d)
	}
	if s := tc.srv.Stats(); s.Stalls != 4 {
		t.Errorf("stalls = %d, want 4", s.Stalls)
	}
}

// TestStatsFile: the file is valid JSON with the documented names,
// rewritten while running, final at unmount, and leaves no temp files.
func TestStatsFile(t *testing.T) {
	dir := t.TempDir()
	statsFile := filepath.Join(dir, "stats.json")
	tc := newTestCase(t, Options{DirectIO: true, StatsFile: statsFile, StatsInterval: 20 * time.Millisecond, PerFile: true},
		map[string]int{"f": 3000})
	fd := openR(t, tc.path("f"))
	readAll(t, fd, 64<<10)
	closeFd(t, fd)

	var m map[string]any
	eventually(t, "a stats file with the reads", func() bool {
		data, err := os.ReadFile(statsFile)
		if err != nil {
			return false
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("stats file is not JSON: %v\n%s", err, data)
		}
		return m["read_bytes"] == 3000.0
	})
	for _, k := range []string{"lookups", "getattrs", "opens", "reads", "read_bytes", "readdirs",
		"releases", "statfs", "writes", "write_bytes", "read_faults", "stalls", "peak_readers",
		"throttled_seconds", "uptime_seconds", "files"} {
		if _, ok := m[k]; !ok {
			t.Errorf("stats file lacks %q", k)
		}
	}

	eventually(t, "the RELEASE", func() bool { return tc.srv.Stats().Releases == 1 })
	if err := tc.srv.Unmount(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(statsFile)
	if err != nil {
		t.Fatal(err)
	}
	var final Stats
	if err := json.Unmarshal(data, &final); err != nil {
		t.Fatal(err)
	}
	live := tc.srv.Stats()
	final.UptimeSeconds, live.UptimeSeconds = 0, 0
	if !statsEqual(final, live) {
		t.Errorf("final stats file %+v\ndiffers from Stats() %+v", final, live)
	}
	if final.Files["f"].ReadBytes != 3000 {
		t.Errorf("per-file stats: %+v", final.Files)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("stats directory holds %d entries, want just the stats file", len(entries))
	}
}

// TestMountRefusals: configurations that would deadlock, leak into the
// mount or stack mounts are refused.
func TestMountRefusals(t *testing.T) {
	requireFUSE(t)
	src, mnt := t.TempDir(), t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(src, link); err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]Options{
		"mount inside source":      {Source: src, Mount: filepath.Join(src, "m")},
		"source inside mount":      {Source: filepath.Join(mnt, "s"), Mount: mnt},
		"stats file inside mount":  {Source: src, Mount: mnt, StatsFile: filepath.Join(mnt, "s.json")},
		"stats file inside source": {Source: src, Mount: mnt, StatsFile: filepath.Join(src, "s.json")},
		"missing source":           {Source: filepath.Join(src, "nope"), Mount: mnt},
		"fail rate above 1":        {Source: src, Mount: mnt, FailRate: 1.5},
		"stall without period":     {Source: src, Mount: mnt, Stall: time.Second},
		"decreasing curve readers": {Source: src, Mount: mnt, BandwidthCurve: []CurvePoint{{4, 1}, {2, 1}}},
		"stats directory missing":  {Source: src, Mount: mnt, StatsFile: filepath.Join(t.TempDir(), "no", "s.json")},
		"stats file via a link":    {Source: src, Mount: mnt, StatsFile: filepath.Join(link, "s.json")},
	} {
		if s, err := Mount(o); err == nil {
			s.Unmount()
			t.Errorf("%s: Mount succeeded", name)
		}
	}

	tc := newTestCase(t, Options{}, nil)
	s, err := Mount(Options{Source: tc.src, Mount: tc.mnt})
	if err == nil {
		s.Unmount()
	}
	if !errors.Is(err, ErrMounted) {
		t.Errorf("second Mount on a live mount point: %v, want ErrMounted", err)
	}
}

// TestMmap: shared and private read-only mappings work in both modes
// (numpy's memmap maps MAP_SHARED, which direct-I/O files refuse unless the
// mount allows it), and their page faults are counted as READs.
//
// The mapped pages are touched only inside a write(2) to a scratch file,
// never by Go code: a goroutine page-faulting on this process's own mount
// cannot be preempted, so a garbage collection starting meanwhile would
// stop the goroutines that serve the fault, and the process would hang.
func TestMmap(t *testing.T) {
	for _, dio := range []bool{false, true} {
		for _, flags := range []int{unix.MAP_SHARED, unix.MAP_PRIVATE} {
			tc := newTestCase(t, Options{DirectIO: dio}, map[string]int{"f": 100000})
			fd := openR(t, tc.path("f"))
			m, err := unix.Mmap(fd, 0, 100000, unix.PROT_READ, flags)
			closeFd(t, fd)
			if err != nil {
				t.Errorf("direct-io %v, flags %#x: mmap: %v", dio, flags, err)
				continue
			}
			scratch := filepath.Join(t.TempDir(), "copy")
			out, err := unix.Open(scratch, unix.O_WRONLY|unix.O_CREAT, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			n, err := unix.Write(out, m) // the kernel faults the pages in
			unix.Close(out)
			unix.Munmap(m)
			if got, _ := os.ReadFile(scratch); n != 100000 || err != nil || !bytes.Equal(got, content("f", 100000)) {
				t.Errorf("direct-io %v, flags %#x: copying the mapping: %d, %v; content equal: %v",
					dio, flags, n, err, bytes.Equal(got, content("f", 100000)))
			}
			if s := tc.srv.Stats(); s.Reads == 0 || s.ReadBytes < 100000 {
				t.Errorf("direct-io %v, flags %#x: %d READs, %d bytes for a mapped 100000-byte file", dio, flags, s.Reads, s.ReadBytes)
			}
		}
	}
}

// TestUnmountBusy: unmounting while a file is open detaches the mount
// lazily: it leaves the namespace at once, the open file keeps working,
// and the server ends when the file is closed.
func TestUnmountBusy(t *testing.T) {
	tc := newTestCase(t, Options{DirectIO: true}, map[string]int{"f": 1000})
	fd := openR(t, tc.path("f"))
	if err := tc.srv.Unmount(); err != nil {
		t.Fatalf("Unmount of a busy mount: %v", err)
	}
	if n := tc.logs.count("busy"); n != 1 {
		t.Errorf("%d messages about the busy mount, want 1; logs:\n%s", n, tc.logs)
	}
	if fstype, ok := mountedOn(tc.mnt); ok {
		t.Errorf("%s still mounted (%s) after a lazy unmount", tc.mnt, fstype)
	}
	if n, err := unix.Pread(fd, make([]byte, 1000), 0); n != 1000 || err != nil {
		t.Errorf("reading the open file after the lazy unmount: %d, %v", n, err)
	}
	closeFd(t, fd)
	select {
	case <-tc.srv.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("server still running 5s after the last file of a detached mount was closed")
	}
}
