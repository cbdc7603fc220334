package tiering

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// Usage is what a tier holds.
type Usage struct {
	Bytes int64
	Files int64
}

// Report is the outcome of Validate.
type Report struct {
	Usage
	Stale  int64   // copies removed: source gone or changed
	Errors []error // sources that could not be checked; their copies stay
}

// statWorkers bounds the concurrent source stats of Validate: each is a
// metadata round trip to the shared filesystem.
const statWorkers = 8

// Validate removes every copy in tier whose source is gone or changed,
// clears temporary files left by a crashed writer, and reports what is
// left. The caller must hold the tier's Lock.
func Validate(t Tier) Report {
	os.RemoveAll(filepath.Join(t.Path, tmpDir))
	os.MkdirAll(filepath.Join(t.Path, tmpDir), 0o755)
	return Check(t)
}

// Check is Validate without touching the temporary files, for a process
// that does not hold the tier's Lock: a job starting while another job
// writes the tier must still never serve a copy whose source changed since
// that job validated it. Removing a stale copy is safe from any process
// (the data plane does it on every write-open); the writer's copies in
// progress are left alone.
func Check(t Tier) Report {
	type item struct {
		copy string
		st   unix.Stat_t
	}
	work := make(chan item)
	var mu sync.Mutex // guards rep
	var rep Report
	var wg sync.WaitGroup
	for i := 0; i < statWorkers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				keep, err := checkCopy(t.Path, it.copy, &it.st)
				mu.Lock()
				switch {
				case err != nil:
					rep.Errors = append(rep.Errors, err)
					fallthrough
				case keep:
					rep.Bytes += it.st.Size
					rep.Files++
				default:
					rep.Stale++
				}
				mu.Unlock()
			}
		}()
	}
	filepath.WalkDir(filepath.Join(t.Path, filesDir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil {
			work <- item{p, st}
		}
		return nil
	})
	close(work)
	wg.Wait()
	return rep
}

// checkCopy decides whether one copy stays. A copy is removed only when
// its source is known to be gone or different; any other failure keeps
// it and is reported.
func checkCopy(tier, copy string, cst *unix.Stat_t) (bool, error) {
	src, ok := SourcePath(tier, copy)
	if !ok {
		return false, os.Remove(copy)
	}
	var sst unix.Stat_t
	err := stat(src, &sst)
	if err != nil && !gone(err) {
		return true, err
	}
	if err == nil && fresh(cst, &sst) && sst.Mode&unix.S_IFMT == unix.S_IFREG {
		return true, nil
	}
	if rerr := os.Remove(copy); rerr != nil && !os.IsNotExist(rerr) {
		return true, rerr
	}
	return false, nil
}

// UsageOf counts the copies in tier without checking them.
func UsageOf(t Tier) Usage {
	var u Usage
	filepath.WalkDir(filepath.Join(t.Path, filesDir), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				u.Bytes += info.Size()
				u.Files++
			}
		}
		return nil
	})
	return u
}

// Lookup returns the index of the fastest tier holding a fresh copy of
// source, or -1.
func Lookup(tiers []Tier, source string, src *unix.Stat_t) int {
	for i, t := range tiers {
		p, err := CopyPath(t.Path, source)
		if err != nil {
			return -1
		}
		var cst unix.Stat_t
		if unix.Stat(p, &cst) == nil && fresh(&cst, src) {
			return i
		}
	}
	return -1
}

// LookupPath returns the index of the fastest tier holding a copy of
// source, without comparing it with the source (for copies Validate has
// just checked), or -1.
func LookupPath(tiers []Tier, source string) int {
	for i, t := range tiers {
		p, err := CopyPath(t.Path, source)
		if err != nil {
			return -1
		}
		var cst unix.Stat_t
		if unix.Stat(p, &cst) == nil && cst.Mode&unix.S_IFMT == unix.S_IFREG {
			return i
		}
	}
	return -1
}
