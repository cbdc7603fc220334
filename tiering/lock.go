package tiering

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrLocked: another live process writes the tier.
var ErrLocked = errors.New("tier is locked by another process")

// Lock is a tier's writer lock: a POSIX record lock on <tier>/lock. Such
// locks belong to the process, are not inherited by forked children and
// vanish when the holder dies, so leadership passes on by itself.
type Lock struct {
	f *os.File
}

// TryLock takes the writer lock of tier without waiting. When another
// process holds it, the error wraps ErrLocked and names that process.
func TryLock(tier string) (*Lock, error) {
	f, err := os.OpenFile(filepath.Join(tier, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
	err = unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk)
	if err == nil {
		return &Lock{f: f}, nil
	}
	defer f.Close()
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
		probe := unix.Flock_t{Type: unix.F_WRLCK}
		if unix.FcntlFlock(f.Fd(), unix.F_GETLK, &probe) == nil && probe.Type != unix.F_UNLCK {
			return nil, fmt.Errorf("%s: %w (pid %d)", tier, ErrLocked, probe.Pid)
		}
		return nil, fmt.Errorf("%s: %w", tier, ErrLocked)
	}
	return nil, err
}

// Unlock releases the lock.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
