package tiering

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

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

// copyBufs keeps the copy loops' buffers: a fresh megabyte per file,
// zeroed by the runtime, cost the copier a fifth of its CPU time.
var copyBufs = sync.Pool{New: func() any { return new([copyBuf]byte) }}

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
		if err = publishTmp(t.Path, tmp.Name(), dst, source, &before); err != nil {
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
	b := copyBufs.Get().(*[copyBuf]byte)
	defer copyBufs.Put(b)
	buf := b[:]
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

// publishTmp gives the copy its source's access and times, then renames it
// into place.
func publishTmp(tier, tmp, dst, source string, src *unix.Stat_t) error {
	if err := applyAccess(tmp, src, false); err != nil {
		return err
	}
	setSourceIdent(tmp, src)
	markLink(tmp, source)
	times := []unix.Timespec{src.Atim, src.Mtim}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, tmp, times, 0); err != nil {
		return err
	}
	if err := mkdirs(tier, dst); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("publish %s: %w", dst, err)
	}
	return nil
}

// IdentXattr names the extended attribute holding the device and inode
// of a copy's source (two little-endian uint64), which the data plane's
// fstat reports for a descriptor served from the copy (intercept_stat.c).
const IdentXattr = "user.augur.src"

// setSourceIdent records the source's identity on the copy. A filesystem
// without user xattrs refuses; its copies then report their own identity.
func setSourceIdent(tmp string, src *unix.Stat_t) {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], src.Dev)
	binary.LittleEndian.PutUint64(b[8:], src.Ino)
	unix.Setxattr(tmp, IdentXattr, b[:], 0)
}

// LinkXattr marks a copy whose source path ends in a symlink: an open
// with O_NOFOLLOW must then fail as on the original, and the data plane
// sends it there.
const LinkXattr = "user.augur.link"

func markLink(tmp, source string) {
	var st unix.Stat_t
	if unix.Lstat(source, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		unix.Setxattr(tmp, LinkXattr, []byte{1}, 0)
	}
}

// Access. A copy is opened by the data plane in place of its source with
// the caller's own credentials, so the kernel's permission check on the
// copy must never let through a caller the source would refuse: a copy
// of /data/private/x (private/ is 0700) in a directory anyone may search
// served x to anyone. So every directory of a copy path gets the access
// of the source directory it stands for, and the copy that of its source,
// by applyAccess. The tier's writer, who could read the source when it
// copied it, keeps access.

// applyAccess gives path (a copy, or a directory of copies when dir is
// set) the permission bits and group of src, except: no setuid, setgid or
// sticky bit; a directory is always the writer's to search and fill and
// never anyone else's to write (no one but the writer may plant a copy);
// and when the group cannot be src's, the group gets no more than others.
func applyAccess(path string, src *unix.Stat_t, dir bool) error {
	mode := src.Mode & 0o777
	if dir {
		mode = mode&^0o022 | 0o700
	}
	if int(src.Gid) != os.Getegid() {
		if err := unix.Chown(path, -1, int(src.Gid)); err != nil {
			g, o := mode>>3&7, mode&7
			mode = mode&^0o070 | (g&o)<<3
		}
	}
	return os.Chmod(path, os.FileMode(mode))
}

// mkdirs creates the missing directories of dst, a copy path in tier,
// each with the access of the source directory it stands for
// (<tier>/files/a@/b@ stands for /a/b). A directory that exists is left
// as it is.
func mkdirs(tier, dst string) error {
	files := filepath.Join(tier, filesDir)
	rel, err := filepath.Rel(files, filepath.Dir(dst))
	if err != nil || rel == "." {
		return err
	}
	d, src := files, "/"
	for _, part := range strings.Split(rel, "/") {
		d = filepath.Join(d, part)
		src = filepath.Join(src, strings.TrimSuffix(part, dirMark))
		err := os.Mkdir(d, 0o700)
		if os.IsExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := stat(src, &st); err != nil {
			os.Remove(d)
			return err
		}
		if err := applyAccess(d, &st, true); err != nil {
			return err
		}
	}
	return nil
}
