package tiering

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Go's preemption signal can interrupt a system call on a slow
// filesystem (FUSE mounts return EINTR); these helpers retry, so that an
// interrupted stat is never mistaken for a missing or changed source.

// Stat is stat(2) of path, retried on EINTR: the stat a caller of
// PublishFrom takes of the source.
func Stat(path string, st *unix.Stat_t) error {
	for {
		err := unix.Stat(path, st)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

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
