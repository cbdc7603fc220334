package tiering

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Errors of Publish.
var (
	// ErrNotRegular: the source is not a regular file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrChanged: the source changed while it was being copied; nothing
	// was published.
	ErrChanged = errors.New("source changed during copy")
)

// TierError is a failure of the tier itself — full (ENOSPC), failing
// (EIO), removed — as opposed to a failure of the source. The caller
// stops using a failing tier and places the file elsewhere.
type TierError struct{ Err error }

func (e *TierError) Error() string { return "tier: " + e.Err.Error() }
func (e *TierError) Unwrap() error { return e.Err }

// copyBuf is the unit of Publish's copy loop.
const copyBuf = 1 << 20

// Publish copies source into tier under the atomic publish protocol and
// returns the bytes copied. On any error nothing is published and the
// temporary file is removed. The caller must hold the tier's Lock.
func Publish(t Tier, source string) (int64, error) {
	dst, err := CopyPath(t.Path, source)
	if err != nil {
		return 0, err
	}
	fd, err := openRead(source)
	if err != nil {
		return 0, err
	}
	src := os.NewFile(uintptr(fd), source)
	defer src.Close()
	var before unix.Stat_t
	if err := unix.Fstat(fd, &before); err != nil {
		return 0, err
	}
	if before.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, ErrNotRegular
	}
	tmp, err := os.CreateTemp(filepath.Join(t.Path, tmpDir), "copy-*")
	if err != nil {
		return 0, &TierError{err}
	}
	n, err := fill(tmp, src, t.Fsync)
	if err == nil {
		err = sameSource(fd, &before, n)
	}
	if err == nil {
		if err = publishTmp(tmp.Name(), dst, &before); err != nil {
			err = &TierError{err}
		}
	}
	if err != nil {
		os.Remove(tmp.Name())
		return 0, err
	}
	return n, nil
}

// fill copies src into tmp, syncs it if asked, and closes tmp. Errors
// writing tmp are the tier's (TierError); errors reading src are not.
func fill(tmp, src *os.File, sync bool) (int64, error) {
	n, err := copyLoop(tmp, src)
	if err == nil && sync {
		if err = tmp.Sync(); err != nil {
			err = &TierError{err}
		}
	}
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = &TierError{cerr}
	}
	return n, err
}

func copyLoop(dst, src *os.File) (int64, error) {
	buf := make([]byte, copyBuf)
	var n int64
	for {
		r, err := src.Read(buf)
		if r > 0 {
			if _, werr := dst.Write(buf[:r]); werr != nil {
				return n, &TierError{werr}
			}
			n += int64(r)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// sameSource checks that the source still has the size and mtime it had
// when the copy began, and that all of it was copied.
func sameSource(fd int, before *unix.Stat_t, n int64) error {
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		return err
	}
	if !fresh(&after, before) || n != before.Size {
		return ErrChanged
	}
	return nil
}

// publishTmp gives the copy its source's mode and times, then renames it
// into place.
func publishTmp(tmp, dst string, src *unix.Stat_t) error {
	if err := os.Chmod(tmp, os.FileMode(src.Mode&0o7777)); err != nil {
		return err
	}
	times := []unix.Timespec{src.Atim, src.Mtim}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, tmp, times, 0); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("publish %s: %w", dst, err)
	}
	return nil
}
