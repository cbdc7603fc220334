package test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PidObserver records which process opened which file, in order, with
// fanotify (root only): inotify cannot tell DataLoader workers apart. It
// reads the events as they come: fanotify merges an open into one of the
// same file by the same process still queued.
type PidObserver struct {
	t     *testing.T
	fd    int
	opens map[int32][]string // pid → files opened, in order
	stop  chan struct{}
	done  chan struct{}
}

// ObservePids watches opens of files in every directory under root.
func ObservePids(t *testing.T, root string) *PidObserver {
	t.Helper()
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK, unix.O_RDONLY)
	if err != nil {
		t.Fatalf("fanotify_init (needs root): %v", err)
	}
	o := &PidObserver{t: t, fd: fd, opens: map[int32][]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			must(t, unix.FanotifyMark(fd, unix.FAN_MARK_ADD, unix.FAN_OPEN|unix.FAN_EVENT_ON_CHILD, unix.AT_FDCWD, p))
		}
		return nil
	})
	go func() {
		defer close(o.done)
		for {
			o.drain()
			select {
			case <-o.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return o
}

// Stop reads the events still queued and closes the observer.
func (o *PidObserver) Stop() {
	close(o.stop)
	<-o.done
	o.drain()
	unix.Close(o.fd)
}

// drain reads the events queued now.
func (o *PidObserver) drain() {
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
}

// OpensBy counts the opens made by processes other than those excluded.
func (o *PidObserver) OpensBy(exclude ...int) int {
	n := 0
	for pid, files := range o.opens {
		if !slices.Contains(exclude, int(pid)) {
			n += len(files)
		}
	}
	return n
}
