package tiering

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// ProbeFile makes a file of size bytes in the tier's tmp/ and returns its
// path, for a reader's cost of a file the tier serves to be measured
// (ReadTime) beside a source's: a source no slower than the tier is worth
// no copy. The caller removes it (RemoveProbe); validation at the next
// start removes what a crash left in tmp/.
func (tr *Tree) ProbeFile(size int64) (string, error) {
	dirfd, done, err := tr.openTmp()
	if err != nil {
		return "", err
	}
	defer done()
	f, err := createTemp(dirfd, tr.Path+"/"+tmpDir)
	if err != nil {
		return "", err
	}
	_, err = f.Write(make([]byte, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		unix.Unlinkat(dirfd, filepath.Base(f.Name()), 0)
		return "", err
	}
	return f.Name(), nil
}

// RemoveProbe removes a file ProbeFile made.
func (tr *Tree) RemoveProbe(path string) {
	if dirfd, done, err := tr.openTmp(); err == nil {
		unix.Unlinkat(dirfd, filepath.Base(path), 0)
		done()
	}
}

// ReadTime is the median time, of reps tries, that an open of path, a
// read of its first size bytes and a close take.
func ReadTime(path string, size int64, reps int) (time.Duration, error) {
	buf := make([]byte, min(size, 1<<20))
	var times []time.Duration
	for range reps {
		t0 := time.Now()
		f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return 0, err
		}
		for n := int64(0); n < size; {
			k, err := f.Read(buf[:min(int64(len(buf)), size-n)])
			n += int64(k)
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Close()
				return 0, err
			}
		}
		f.Close()
		times = append(times, time.Since(t0))
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}
