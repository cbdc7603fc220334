package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/augur-hpc/augur/bench/pfsemu"
	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

// firstReaders is the script that reads each file once as one kind of
// reader does (test/python/first_readers.py).
var firstReaders = pyScript("first_readers.py")

// Under the reactive policy the shared filesystem serves each byte of
// the first epoch once, whether its client keeps a page cache or not
// (pfsemu --direct-io), for every kind of reader: the emulator's own
// counters, not augur's, say how many bytes it served, against what the
// same reader made it serve without augur. With wait_max = 0 (the old
// behaviour: read the original while the leader copies it) the same
// counters show the second read, so the test can tell.
func TestReactiveFirstEpochReadsEachByteOnce(t *testing.T) {
	needPython(t, "PIL", "numpy")
	for _, direct := range []bool{true, false} {
		name := "page-cache"
		if direct {
			name = "direct-io"
		}
		t.Run(name, func(t *testing.T) {
			c := NewCase(t)
			kinds := map[string][]string{}
			for i, kind := range []string{"read", "pread", "mmap", "again"} {
				kinds[kind] = c.RandomFiles(kind, 6, 150_000+i*100_000)
			}
			mustPlain(t, c.RunPlain(time.Minute, Python, pyScript("gen_media.py"), "img", filepath.Join(c.Dataset, "pil"), "4", "png"))
			kinds["pil"], _ = filepath.Glob(filepath.Join(c.Dataset, "pil", "*.png"))
			srv := reactiveOverPFS(t, c, direct)
			for _, kind := range []string{"read", "pread", "mmap", "pil"} {
				plain, augur := firstEpoch(t, c, srv, kind, kinds[kind])
				t.Logf("%s: shared filesystem served %d bytes with augur, %d without", kind, augur, plain)
				if plain == 0 || float64(augur) > 1.05*float64(plain) {
					t.Errorf("%s: %d bytes from the shared filesystem with augur, %d without: want at most 1.05x", kind, augur, plain)
				}
				for _, f := range kinds[kind] {
					if _, err := os.Stat(c.CopyOf(c.RAM, onPFS(c, f))); err != nil {
						t.Errorf("%s: no copy of %s after the epoch: %v", kind, f, err)
					}
				}
			}
			// The control: readers that read the original while the
			// copy is made, as before.
			c.Set("AUGUR_WAIT_MAX=0")
			plain, augur := firstEpoch(t, c, srv, "pread", kinds["again"])
			t.Logf("wait_max 0: %d bytes with augur, %d without", augur, plain)
			if direct && float64(augur) < 1.9*float64(plain) {
				t.Errorf("wait_max 0 without a page cache: %d bytes with augur, %d without; the copy should have read them again", augur, plain)
			}
		})
	}
}

// The first copy a reader waits for tells the leader the shared
// filesystem's client. Where it keeps a page cache, readers then ask for,
// and wait for, copies only of files larger than its read-ahead window
// (the copy reads those in parallel parts; the open's stat is answered
// from the client's attribute cache); a file within it the client reads
// in one request, and the leader copies it from the pages its reader
// left (no tee: the copy's work is off the reader's way). Where it keeps
// none, no reader waits, and every one tees. Either way each byte is
// served once and every file is copied, exactly.
func TestReactiveWaitsOnlyWhereTheCopyIsFaster(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(map[bool]string{true: "direct-io", false: "page-cache"}[direct], func(t *testing.T) {
			c := NewCase(t)
			srv := reactiveOverPFS(t, c, direct)
			ra := mountReadAhead(t, c)
			// The large files first: the first copy asked for learns the client.
			files := append(c.RandomFiles("large", 6, int(3*ra)), c.RandomFiles("small", 6, int(ra/2))...)
			job := "waits-" + randHex(4)
			c.Set("AUGUR_JOB=" + job)
			plain, augur := firstEpoch(t, c, srv, "read", files)
			st := jobStats(t, c, job)
			t.Logf("read-ahead %d; %d bytes with augur, %d without; asked for a copy %d, teed %d, copies %d, client cache %q, wait_min %d",
				ra, augur, plain, st.Requested, st.Teed, st.Copies, st.ClientCache, st.WaitMin)
			if augur != plain {
				t.Errorf("the shared filesystem served %d bytes with augur, %d without", augur, plain)
			}
			want, asked, min, teed := "yes", uint64(6), uint64(ra), uint64(0)
			if direct {
				want, asked, min, teed = "no", 1, 0, uint64(len(files))-1
			}
			if st.ClientCache != want || st.Requested != asked || st.Teed != teed || st.WaitMin != min || st.Copies != uint64(len(files)) {
				t.Errorf("client cache %q, %d opens asked for a copy, %d teed, wait_min %d, %d copies; want %q, %d, %d, %d, %d",
					st.ClientCache, st.Requested, st.Teed, st.WaitMin, st.Copies, want, asked, teed, min, len(files))
			}
			for _, f := range files {
				sameFile(t, c.CopyOf(c.RAM, onPFS(c, f)), f)
			}
		})
	}
}

// A leader that takes over a job (the same AUGUR_JOB, run again) learns
// the client afresh rather than keep the last leader's window: under it
// files within the read-ahead never ask, so nothing would teach the new
// leader the client, and their readers would tee where the leader copies
// them from the pages they left. The second run's files are all small.
func TestReactiveLeaderOfAJobRunAgainLearnsTheClient(t *testing.T) {
	c := NewCase(t)
	srv := reactiveOverPFS(t, c, false)
	ra := mountReadAhead(t, c)
	job := "again-" + randHex(4)
	c.Set("AUGUR_JOB=" + job)
	firstEpoch(t, c, srv, "read", c.RandomFiles("large", 2, int(3*ra)))
	if st := jobStats(t, c, job); st.ClientCache != "yes" || st.WaitMin != uint64(ra) {
		t.Fatalf("first run: client cache %q, wait_min %d; want yes, %d", st.ClientCache, st.WaitMin, ra)
	}
	small := c.RandomFiles("small", 4, int(ra/2))
	plain, augur := firstEpoch(t, c, srv, "read", small)
	st := jobStats(t, c, job)
	t.Logf("second run: %d bytes with augur, %d without; asked %d, teed %d, copies %d, client cache %q",
		augur, plain, st.Requested, st.Teed, st.Copies, st.ClientCache)
	if st.Teed != 0 || st.ClientCache != "yes" || st.WaitMin != uint64(ra) || augur != plain {
		t.Errorf("second run: %d tees, client cache %q, wait_min %d, %d bytes served (%d without): want no tee, yes, %d, the same bytes",
			st.Teed, st.ClientCache, st.WaitMin, augur, plain, ra)
	}
	for _, f := range small {
		sameFile(t, c.CopyOf(c.RAM, onPFS(c, f)), f)
	}
}

// mountReadAhead is the read-ahead window of c's emulated PFS mount.
func mountReadAhead(t *testing.T, c *Case) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(c.Dir, "pfs"), &st); err != nil {
		t.Fatal(err)
	}
	ra := tiering.ReadAhead(st.Dev)
	if ra <= 0 {
		t.Fatalf("the kernel tells no read-ahead for the FUSE mount in %s", c.Dir)
	}
	return ra
}

// firstEpoch reads files (under c.Dataset) through the mount as kind
// does, without augur and then in an `augur run` job of its own, checks
// that both consumed the originals' bytes, and returns the bytes the
// shared filesystem served each time.
func firstEpoch(t *testing.T, c *Case, srv *pfsemu.Server, kind string, files []string) (plain, augur int64) {
	t.Helper()
	var onMount []string
	for _, f := range files {
		onMount = append(onMount, onPFS(c, f))
	}
	want := mustPlain(t, c.RunPlain(time.Minute, Python, append([]string{firstReaders, kind}, files...)...)).Stdout
	served := func(run func() string) int64 {
		dropCaches(t)
		before := srv.Stats().ReadBytes
		if got := run(); got != want {
			t.Fatalf("%s: read\n%s\nwant\n%s", kind, got, want)
		}
		return srv.Stats().ReadBytes - before
	}
	plain = served(func() string {
		return mustPlain(t, c.RunPlain(time.Minute, Python, append([]string{firstReaders, kind}, onMount...)...)).Stdout
	})
	augur = served(func() string {
		out, _ := c.AugurRun(append([]string{"--", Python, firstReaders, kind}, onMount...)...)
		return out
	})
	return plain, augur
}

// The rule of wait_max and of large files, with readers that os.pread
// 4 KiB of a file: one of 4 MiB (under the default 8 MiB) waits for the
// whole copy and is served from it (the first open asks: it learns the
// client); one of 24 MiB is tiered in blocks, never copied whole. Once
// the leader has entered it, a read of its original brings the 64 KiB
// page it falls in into the tier, and the next read is served from there:
// the shared filesystem serves the small file once and the large file's
// page at most once more than its first 4 KiB, no more.
func TestReactiveLargeFileReadPartly(t *testing.T) {
	c := NewCase(t)
	small := c.RandomFiles("small", 1, 4<<20)[0]
	large := c.RandomFiles("large", 1, 24<<20)[0]
	srv := reactiveOverPFS(t, c, true)
	const part = "part:10485:4096"
	job := "part-" + randHex(4)
	c.Set("AUGUR_JOB=" + job)
	c.Set("AUGUR_BIN=" + Augur)
	want := mustPlain(t, c.RunPlain(time.Minute, Python, firstReaders, part, small, large)).Stdout
	wantLarge := mustPlain(t, c.RunPlain(time.Minute, Python, firstReaders, part, large)).Stdout
	// The leader enters the large file after its first open: wait (a
	// minute at most) until augur stat counts it, then read it twice.
	const script = `py=$1 readers=$2 part=$3 small=$4 large=$5
"$py" "$readers" "$part" "$small" "$large" || exit 1
for i in $(seq 1200); do
    "$AUGUR_BIN" stat --json --job "$AUGUR_JOB" | grep -q '"large_files": *1' && break
    sleep 0.05
done
"$py" "$readers" "$part" "$large" && "$py" "$readers" "$part" "$large"`
	got, _ := c.AugurRun("--", "sh", "-c", script, "sh", Python, firstReaders, part, onPFS(c, small), onPFS(c, large))
	if got != want+wantLarge+wantLarge {
		t.Fatalf("read %q, want %q", got, want+wantLarge+wantLarge)
	}
	st := jobStats(t, c, job)
	t.Logf("opens %d, asked for a copy %d, copies %d, large files %d, pages read in %d, from blocks %d B, shared filesystem %d B",
		st.Opens, st.Requested, st.Copies, st.BigFiles, st.BigTeed, st.Tiers[0].BlockBytes, srv.Stats().ReadBytes)
	if st.Requested != 1 || st.Copies != 1 || st.Teed+st.Untee != 0 {
		t.Errorf("asked %d, copies %d, tees %d: want the small file's ask and copy, no tee", st.Requested, st.Copies, st.Teed+st.Untee)
	}
	if st.BigFiles != 1 || st.BigTeed != 1 || st.Tiers[0].BlockBytes < 4096 {
		t.Errorf("large files %d, pages read in %d, served from blocks %d B: want 1, its one page, the last read", st.BigFiles, st.BigTeed, st.Tiers[0].BlockBytes)
	}
	if _, err := os.Stat(c.CopyOf(c.RAM, onPFS(c, large))); err == nil {
		t.Error("the large file was copied whole")
	}
	if got, most := srv.Stats().ReadBytes, int64(4<<20+4096+64<<10); got < 4<<20+4096 || got > most {
		t.Errorf("the shared filesystem served %d bytes, want %d at most: the small file once, the large file's page once more", got, most)
	}
}

// reactiveOverPFS serves c's dataset through the emulator, without
// delays (only its counters matter), with or without a client page
// cache, as the dataset of a job under the reactive policy.
func reactiveOverPFS(t *testing.T, c *Case, direct bool) *pfsemu.Server {
	t.Helper()
	srv := mountPFSWith(t, c, func(o *pfsemu.Options) {
		o.OpenLatency, o.ReadLatency, o.MetaLatency, o.Bandwidth = 0, 0, 0, 0
		o.DirectIO = direct
	})
	c.Set("AUGUR_DATASET=" + filepath.Join(c.Dir, "pfs"))
	c.Set("AUGUR_POLICY=reactive")
	return srv
}

// onPFS is a dataset file's path through the emulator's mount.
func onPFS(c *Case, path string) string {
	return strings.Replace(path, c.Dataset, filepath.Join(c.Dir, "pfs"), 1)
}
