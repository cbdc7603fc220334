package tiering

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Go's preemption signal can interrupt a system call on a slow
// filesystem (FUSE mounts return EINTR); these helpers retry, so that an
// interrupted stat is never mistaken for a missing or changed source.

// Stat is stat(2) of path, retried on EINTR, without the access time
// (statx): the stat a caller of PublishFrom takes of the source.
func Stat(path string, st *unix.Stat_t) error {
	return statx(unix.AT_FDCWD, path, 0, st)
}

// Fstat is Stat of an open file.
func Fstat(fd int, st *unix.Stat_t) error {
	return statx(fd, "", unix.AT_EMPTY_PATH, st)
}

// statx fills st with every basic field of stat(2) but the access time,
// which it leaves as the client caches it. A FUSE client's read marks
// the file's cached atime stale, so a full stat of a file augur has just
// copied sends the shared filesystem a GETATTR (a round trip per copy,
// 1 ms on the emulator; 1448 in make bench's S3 epoch 1 with direct I/O)
// that the client's attribute cache answers for every other field, as
// fresh as that cache allows either way. A kernel without statx, or a
// filesystem that leaves out a field the copy's checks compare, gets
// the plain stat.
func statx(dirfd int, path string, flags int, st *unix.Stat_t) error {
	const want = unix.STATX_BASIC_STATS &^ unix.STATX_ATIME
	var x unix.Statx_t
	for {
		err := unix.Statx(dirfd, path, flags|unix.AT_STATX_SYNC_AS_STAT, want, &x)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOSYS) || err == nil && x.Mask&checked != checked:
			return plainStat(dirfd, path, flags, st)
		case err != nil:
			return err
		}
		fromStatx(st, &x)
		return nil
	}
}

// checked are the fields a copy's checks compare (fresh, and the type).
const checked = unix.STATX_TYPE | unix.STATX_SIZE | unix.STATX_MTIME | unix.STATX_INO

// plainStat is stat(2) or fstat(2), retried on EINTR.
func plainStat(fd int, path string, flags int, st *unix.Stat_t) error {
	for {
		var err error
		if flags&unix.AT_EMPTY_PATH != 0 {
			err = unix.Fstat(fd, st)
		} else {
			err = unix.Stat(path, st)
		}
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// fromStatx converts x to a Stat_t; set absorbs the field types that
// differ between architectures.
func fromStatx(st *unix.Stat_t, x *unix.Statx_t) {
	*st = unix.Stat_t{}
	st.Dev = unix.Mkdev(x.Dev_major, x.Dev_minor)
	st.Rdev = unix.Mkdev(x.Rdev_major, x.Rdev_minor)
	set(&st.Ino, x.Ino)
	set(&st.Nlink, x.Nlink)
	set(&st.Mode, x.Mode)
	set(&st.Uid, x.Uid)
	set(&st.Gid, x.Gid)
	set(&st.Size, x.Size)
	set(&st.Blksize, x.Blksize)
	set(&st.Blocks, x.Blocks)
	st.Atim = timespec(x.Atime)
	st.Mtim = timespec(x.Mtime)
	st.Ctim = timespec(x.Ctime)
}

func timespec(t unix.StatxTimestamp) unix.Timespec {
	return unix.Timespec{Sec: t.Sec, Nsec: int64(t.Nsec)}
}

type integer interface {
	~uint16 | ~uint32 | ~uint64 | ~int32 | ~int64
}

func set[T, U integer](dst *T, v U) { *dst = T(v) }

func openRead(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|flags, 0)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// gone says whether err means the source no longer exists as such, as
// opposed to a transient failure (EIO, a dead mount) that must not cost
// us a good copy.
func gone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)
}
