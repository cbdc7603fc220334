package tiering

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrLocked: another live process writes the tier.
var ErrLocked = errors.New("tier is locked by another process")

// LockedError is ErrLocked with the holder, when the kernel names it.
type LockedError struct {
	Tier string
	Pid  int // 0: unknown
	Uid  int // the holder's user, -1: unknown
}

func (e *LockedError) Error() string {
	switch {
	case e.Pid == 0:
		return fmt.Sprintf("%s: %v", e.Tier, ErrLocked)
	case e.OtherUser():
		return fmt.Sprintf("%s: %v (pid %d of another user, uid %d%s)", e.Tier, ErrLocked, e.Pid, e.Uid, userName(uint32(e.Uid)))
	}
	return fmt.Sprintf("%s: %v (pid %d)", e.Tier, ErrLocked, e.Pid)
}

func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// OtherUser says whether another user holds the lock.
func (e *LockedError) OtherUser() bool { return e.Uid >= 0 && e.Uid != os.Geteuid() }

// Lock is a tier's writer lock: a POSIX record lock on <tier>/lock. Such
// locks belong to the process, are not inherited by forked children and
// vanish when the holder dies, so leadership passes on by itself.
type Lock struct {
	f *os.File
}

// TryLock takes the writer lock of the tier without waiting. When another
// process holds it, the error wraps ErrLocked and names that process.
func (tr *Tree) TryLock() (*Lock, error) {
	root, err := tr.root()
	if err != nil {
		return nil, err
	}
	path := tr.Path + "/" + lockName
	fd, err := unix.Openat(root, lockName, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if err := Untrusted(path, &st, unix.S_IFREG); err != nil {
		f.Close()
		return nil, err
	}
	if st.Mode&0o077 != 0 { // an older augur made it 0644: nobody else may open it, so none can hold it
		unix.Fchmod(fd, 0o600)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
	err = unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &lk)
	if err == nil {
		return &Lock{f: f}, nil
	}
	defer f.Close()
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
		le := &LockedError{Tier: tr.Path, Uid: -1}
		probe := unix.Flock_t{Type: unix.F_WRLCK}
		if unix.FcntlFlock(uintptr(fd), unix.F_GETLK, &probe) == nil && probe.Type != unix.F_UNLCK {
			le.Pid = int(probe.Pid)
			var ps unix.Stat_t
			if unix.Stat(fmt.Sprintf("/proc/%d", probe.Pid), &ps) == nil {
				le.Uid = int(ps.Uid)
			}
		}
		return nil, le
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
