package test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/augur-hpc/augur/bench/pfsemu"
)

// teeReaders is the script that reads files in the ways a first read's
// tee must follow or give up on (test/python/tee_readers.py).
var teeReaders = pyScript("tee_readers.py")

// A first read's tee (preload/tee.c) makes the copy from the reader's
// own bytes where it can follow them, and gives up where it cannot, for
// CPython's and numpy's readers, over the emulated PFS without a client
// page cache: whatever the reader does, it consumes the original's bytes,
// and every copy in the tier is the file's bytes, or there is none. A
// tee that followed its reader costs the shared filesystem nothing: the
// emulator's counters show the bytes the same reader read without augur.
// One that gave up leaves the copy to the leader, behind the reader.
func TestTeeFollowsItsReaderOrGivesUp(t *testing.T) {
	needPython(t, "numpy")
	c := NewCase(t)
	srv := reactiveOverPFS(t, c, true)
	ra := mountReadAhead(t, c)
	for _, tc := range []struct {
		kind string
		// teed: every file but the first (whose open asks for its
		// copy and learns the client) tees to its end; else, for
		// those, none does (-1: either, as threads race).
		teed int
	}{
		{"chunks", 1}, {"readinto", 1}, {"dup", 1}, {"numpy", 1},
		{"threads", -1}, {"seekend", 0}, {"sendfile", 0}, {"fork", 0},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			files := c.RandomFiles(tc.kind, 5, int(ra)-1000)
			var onMount []string
			for _, f := range files {
				onMount = append(onMount, onPFS(c, f))
			}
			want := mustPlain(t, c.RunPlain(time.Minute, Python, append([]string{teeReaders, tc.kind}, onMount...)...)).Stdout
			job := "tee-" + randHex(4)
			c.Set("AUGUR_JOB=" + job)
			dropCaches(t)
			before := srv.Stats().ReadBytes
			got, _ := c.AugurRun(append([]string{"--", Python, teeReaders, tc.kind}, onMount...)...)
			served := srv.Stats().ReadBytes - before
			if got != want {
				t.Fatalf("read\n%s\nwant\n%s", got, want)
			}
			st := jobStats(t, c, job)
			t.Logf("asked %d, teed %d, abandoned %d, copies %d; the shared filesystem served %d bytes",
				st.Requested, st.Teed, st.Untee, st.Copies, served)
			n := uint64(len(files) - 1)
			switch {
			case st.Requested != 1 || st.Teed+st.Untee != n:
				t.Errorf("%d opens asked for a copy, %d tees ended, %d abandoned: want 1, and %d tees", st.Requested, st.Teed, st.Untee, n)
			case tc.teed == 1 && st.Teed != n, tc.teed == 0 && st.Untee != n:
				t.Errorf("%d tees ended, %d abandoned: want every tee %s", st.Teed, st.Untee, map[int]string{0: "abandoned", 1: "ended"}[tc.teed])
			}
			if tc.teed == 1 && served != int64(len(files))*(ra-1000) {
				t.Errorf("the shared filesystem served %d bytes for %d files of %d", served, len(files), ra-1000)
			}
			for _, f := range files {
				sameFile(t, c.CopyOf(c.RAM, onPFS(c, f)), f)
			}
		})
	}
}

// A tee begins in a file of the leader's pool, its pages allocated
// beforehand (shim's keepPool), once a tee has told the pool the size to
// make them for: the readers after it take one each, and every copy is
// still the file's bytes, each served once by the shared filesystem.
func TestTeeBeginsInThePoolsFiles(t *testing.T) {
	c := NewCase(t)
	srv := reactiveOverPFS(t, c, true)
	ra := mountReadAhead(t, c)
	files := c.RandomFiles("pool", 8, int(ra)-1000)
	var onMount []string
	for _, f := range files {
		onMount = append(onMount, onPFS(c, f))
	}
	job := "pool-" + randHex(4)
	c.Set("AUGUR_JOB=" + job)
	script := pyScript("pool_readers.py")
	teeDir := fmt.Sprintf("/dev/shm/augur.%d.%s/tee", os.Geteuid(), job)
	want := mustPlain(t, c.RunPlain(time.Minute, Python, append([]string{script, "-"}, files...)...)).Stdout
	dropCaches(t)
	before := srv.Stats().ReadBytes
	got, stderr := c.AugurRun(append([]string{"--", Python, script, teeDir}, onMount...)...)
	served := srv.Stats().ReadBytes - before
	if got != want {
		t.Fatalf("read\n%s\nwant\n%s\nstderr: %s", got, want, stderr)
	}
	st := jobStats(t, c, job)
	t.Logf("asked %d, teed %d, in pool files %d, copies %d; the shared filesystem served %d bytes",
		st.Requested, st.Teed, st.TeePooled, st.Copies, served)
	if st.Requested != 1 || st.Teed != uint64(len(files)-1) || st.TeePooled != uint64(len(files)-2) {
		t.Errorf("%d opens asked, %d tees, %d in pool files: want 1, %d, %d", st.Requested, st.Teed, st.TeePooled, len(files)-1, len(files)-2)
	}
	if served != int64(len(files))*(ra-1000) {
		t.Errorf("the shared filesystem served %d bytes for %d files of %d", served, len(files), ra-1000)
	}
	for _, f := range files {
		sameFile(t, c.CopyOf(c.RAM, onPFS(c, f)), f)
	}
}

// A file rewritten while its first reader tees it (the writer inside the
// job: its open moves the file's change generation) is never published
// from the tee, which holds half the old bytes and half the new: the
// reader reads what it would without augur, and the tier holds the new
// bytes or nothing.
func TestTeeOfAFileChangedMeanwhileIsNotPublished(t *testing.T) {
	c := NewCase(t)
	reactiveOverPFS(t, c, true)
	ra := mountReadAhead(t, c)
	files := c.RandomFiles("change", 4, int(ra)-1000)
	onMount, want := readersSee(t, c, files, func(b []byte) []byte {
		h := len(b) / 2
		return append(b[:h:h], invert(b)[h:]...)
	})
	job := "tee-change-" + randHex(4)
	c.Set("AUGUR_JOB=" + job)
	got, _ := c.AugurRun(append([]string{"--", Python, teeReaders, "change"}, onMount...)...)
	if got != want {
		t.Fatalf("read\n%s\nwant\n%s", got, want)
	}
	st := jobStats(t, c, job)
	t.Logf("teed %d, abandoned %d, copies %d, held %d", st.Teed, st.Untee, st.Copies, st.CopiesHeld)
	if st.Teed == 0 {
		t.Errorf("no tee ended: the test tested nothing")
	}
	for _, f := range files {
		if _, err := os.Stat(c.CopyOf(c.RAM, onPFS(c, f))); err == nil {
			sameFile(t, c.CopyOf(c.RAM, onPFS(c, f)), f)
		}
	}
}

// readersSee is what tee_readers.py prints for files, read through the
// emulator's mount (onMount), when each file but the first (the script's
// probe, read as it is) reads as seen makes of its bytes.
func readersSee(t *testing.T, c *Case, files []string, seen func([]byte) []byte) (onMount []string, want string) {
	t.Helper()
	for i, f := range files {
		onMount = append(onMount, onPFS(c, f))
		b, err := os.ReadFile(f)
		must(t, err)
		if i > 0 {
			b = seen(b)
		}
		want += fmt.Sprintf("%s %x\n", filepath.Base(f), sha256.Sum256(b))
	}
	return onMount, want
}

func invert(b []byte) []byte {
	out := make([]byte, len(b))
	for i, x := range b {
		out[i] = 255 - x
	}
	return out
}

// sameFile fails the test unless the copy holds exactly the original's
// bytes.
func sameFile(t *testing.T, copy, orig string) {
	t.Helper()
	c, err := os.ReadFile(copy)
	if err != nil {
		t.Errorf("no copy of %s: %v", orig, err)
		return
	}
	o, err := os.ReadFile(orig)
	must(t, err)
	if !bytes.Equal(c, o) {
		t.Errorf("the copy of %s (%d bytes) is not its bytes (%d)", orig, len(c), len(o))
	}
}

// A reader killed in the middle of its tee (it exits without closing)
// leaves no trace the job trips on: the leader frees the file's slot and
// removes the tee file within its reap interval, and the next reader of
// the file tees it afresh and makes the copy.
func TestTeeOfAReaderThatDiedIsReaped(t *testing.T) {
	c := NewCase(t)
	reactiveOverPFS(t, c, true)
	ra := mountReadAhead(t, c)
	files := c.RandomFiles("died", 2, int(ra)-1000)
	probe, f := onPFS(c, files[0]), onPFS(c, files[1])
	job := "tee-died-" + randHex(4)
	c.Set("AUGUR_JOB=" + job)
	script := `
import glob, hashlib, os, subprocess, sys, time
open(sys.argv[1], "rb").read()  # the first open asks for its copy: the client is learnt
subprocess.run([sys.executable, "-c", "import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.read(fd, 1000); os._exit(0)", sys.argv[2]], check=True)
tees = sys.argv[3] + "/*"
deadline = time.time() + 10
while glob.glob(tees) and time.time() < deadline:
    time.sleep(0.05)
print("left", len(glob.glob(tees)))
print(hashlib.sha256(open(sys.argv[2], "rb").read()).hexdigest())
`
	out, _ := c.AugurRun("--", Python, "-c", script, probe, f, filepath.Join("/dev/shm", fmt.Sprintf("augur.%d.%s", os.Geteuid(), job), "tee"))
	b, err := os.ReadFile(files[1])
	must(t, err)
	if want := fmt.Sprintf("left 0\n%x\n", sha256.Sum256(b)); out != want {
		t.Fatalf("printed\n%s\nwant\n%s", out, want)
	}
	st := jobStats(t, c, job)
	t.Logf("teed %d, abandoned %d, copies %d", st.Teed, st.Untee, st.Copies)
	if st.Teed != 1 {
		t.Errorf("%d tees ended: want the second reader's", st.Teed)
	}
	sameFile(t, c.CopyOf(c.RAM, f), files[1])
}

// A descriptor whose tee holds the whole file answers the read at its end
// itself (augur_fd_at_end): a reader that reads until a read returns 0
// sends a shared filesystem without a client page cache one request
// fewer for each file it tees, by the emulator's own per-file counters,
// and reads every byte.
func TestTeeAnswersTheReadAtTheEnd(t *testing.T) {
	c := NewCase(t)
	srv := mountPFSWith(t, c, func(o *pfsemu.Options) {
		o.OpenLatency, o.ReadLatency, o.MetaLatency, o.Bandwidth = 0, 0, 0, 0
		o.DirectIO, o.PerFile = true, true
	})
	c.Set("AUGUR_DATASET=" + filepath.Join(c.Dir, "pfs"))
	c.Set("AUGUR_POLICY=reactive")
	ra := mountReadAhead(t, c)
	files := c.RandomFiles("end", 5, int(ra)-1000)
	var onMount []string
	for _, f := range files {
		onMount = append(onMount, onPFS(c, f))
	}
	reads := func() map[string]int64 {
		out := map[string]int64{}
		for _, f := range files {
			rel, err := filepath.Rel(c.Dataset, f)
			must(t, err)
			out[f] = srv.Stats().Files[rel].Reads
		}
		return out
	}
	before := reads()
	want := mustPlain(t, c.RunPlain(time.Minute, Python, append([]string{teeReaders, "chunks"}, onMount...)...)).Stdout
	plain := reads()
	job := "tee-end-" + randHex(4)
	c.Set("AUGUR_JOB=" + job)
	dropCaches(t)
	got, _ := c.AugurRun(append([]string{"--", Python, teeReaders, "chunks"}, onMount...)...)
	after := reads()
	if got != want {
		t.Fatalf("read\n%s\nwant\n%s", got, want)
	}
	st := jobStats(t, c, job)
	if st.Teed != uint64(len(files)-1) {
		t.Fatalf("%d tees ended: want %d (every file but the first, which asks for its copy)", st.Teed, len(files)-1)
	}
	for _, f := range files[1:] {
		without, with := plain[f]-before[f], after[f]-plain[f]
		t.Logf("%s: %d read requests without augur, %d with", filepath.Base(f), without, with)
		if with != without-1 {
			t.Errorf("%s: %d read requests with augur, %d without: want one fewer (the read at the end)", filepath.Base(f), with, without)
		}
		sameFile(t, c.CopyOf(c.RAM, onPFS(c, f)), f)
	}
}

// A file that a writer of the job opens after its reader's tee ended is
// read on from the original: the descriptor no longer answers its end
// itself, and the reader sees the bytes appended.
func TestTeeEndIsTheFilesOnceTheJobWritesIt(t *testing.T) {
	c := NewCase(t)
	reactiveOverPFS(t, c, true)
	ra := mountReadAhead(t, c)
	files := c.RandomFiles("grow", 3, int(ra)-1000)
	onMount, want := readersSee(t, c, files, func(b []byte) []byte { return append(b, "more"...) })
	job := "tee-grow-" + randHex(4)
	c.Set("AUGUR_JOB=" + job)
	got, _ := c.AugurRun(append([]string{"--", Python, teeReaders, "grow"}, onMount...)...)
	if got != want {
		t.Fatalf("read\n%s\nwant\n%s", got, want)
	}
	if st := jobStats(t, c, job); st.Teed != uint64(len(files)-1) {
		t.Errorf("%d tees ended: want %d, each before its file grew (else the test tested nothing)", st.Teed, len(files)-1)
	}
}

// A reader that reads its file again after its tee ended reads the file
// as it is now: the descriptor answers the end itself only until it reads
// elsewhere. Here the file grows outside the job (written at its source,
// where augur sees no write open) between the two readings, and the
// second one reads the bytes appended. Copies are compared with their
// source at every open (AUGUR_REVALIDATE=0), so that a descriptor that
// moves to the tee's copy, published meanwhile, finds it stale and stays
// on the original: that move is the leader's timing, not the test's.
func TestTeeEndIsForgottenOnceTheReaderReadsElsewhere(t *testing.T) {
	c := NewCase(t)
	reactiveOverPFS(t, c, true)
	c.Set("AUGUR_REVALIDATE=0")
	ra := mountReadAhead(t, c)
	files := c.RandomFiles("regrow", 3, int(ra)-1000)
	onMount, want := readersSee(t, c, files, func(b []byte) []byte { return append(b, "more"...) })
	job := "tee-regrow-" + randHex(4)
	c.Set("AUGUR_JOB=" + job)
	got, _ := c.AugurRun(append([]string{"--", Python, teeReaders, "regrow:" + filepath.Dir(files[0])}, onMount...)...)
	if got != want {
		t.Fatalf("read\n%s\nwant\n%s", got, want)
	}
	if st := jobStats(t, c, job); st.Teed != uint64(len(files)-1) {
		t.Errorf("%d tees ended: want %d, each before its file grew (else the test tested nothing)", st.Teed, len(files)-1)
	}
}
