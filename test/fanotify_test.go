package test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PidObserver records which process opened which file, in order, with
// fanotify (root only): inotify cannot tell DataLoader workers apart.
type PidObserver struct {
	t     *testing.T
	fd    int
	opens map[int32][]string // pid → files opened, in order
}

// ObservePids watches opens of files in every directory under root.
func ObservePids(t *testing.T, root string) *PidObserver {
	t.Helper()
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK, unix.O_RDONLY)
	if err != nil {
		t.Fatalf("fanotify_init (needs root): %v", err)
	}
	o := &PidObserver{t: t, fd: fd, opens: map[int32][]string{}}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			must(t, unix.FanotifyMark(fd, unix.FAN_MARK_ADD, unix.FAN_OPEN|unix.FAN_EVENT_ON_CHILD, unix.AT_FDCWD, p))
		}
		return nil
	})
	return o
}

// Stop reads the queued events and closes the observer.
func (o *PidObserver) Stop() {
	buf := make([]byte, 1<<16)
	for {
		n, err := unix.Read(o.fd, buf)
		if errors.Is(err, unix.EAGAIN) || n <= 0 {
			break
		}
		for off := 0; off+int(unsafe.Sizeof(unix.FanotifyEventMetadata{})) <= n; {
			ev := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&buf[off]))
			if ev.Fd >= 0 {
				p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", ev.Fd))
				unix.Close(int(ev.Fd))
				if err == nil {
					if info, err := os.Stat(p); err == nil && !info.IsDir() {
						o.opens[ev.Pid] = append(o.opens[ev.Pid], p)
					}
				}
			}
			off += int(ev.Event_len)
		}
	}
	unix.Close(o.fd)
}
