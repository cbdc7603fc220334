package test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Observer counts the opens the kernel performs on files under some
// directories, with inotify: an account of what really happened that does
// not depend on anything the shim says about itself. Events are queued by
// the kernel at the moment of the open, so once the observed program has
// exited, Stop sees all of them.
type Observer struct {
	t     *testing.T
	fd    int
	mu    sync.Mutex
	dirs  map[int32]string // watch descriptor → directory
	opens map[string]int   // path → IN_OPEN count
	reads map[string]int   // path → IN_ACCESS count (ObserveAccess only)
	seq   []string         // files opened, in the order the kernel saw it
}

// Observe watches every directory under each root (which must exist;
// directories created later are not watched).
func Observe(t *testing.T, roots ...string) *Observer {
	return observe(t, unix.IN_OPEN, roots)
}

// ObserveAccess also counts reads (IN_ACCESS).
func ObserveAccess(t *testing.T, roots ...string) *Observer {
	return observe(t, unix.IN_OPEN|unix.IN_ACCESS, roots)
}

func observe(t *testing.T, mask uint32, roots []string) *Observer {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	must(t, err)
	o := &Observer{t: t, fd: fd, dirs: map[int32]string{}, opens: map[string]int{},
		reads: map[string]int{}}
	for _, r := range roots {
		filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				wd, err := unix.InotifyAddWatch(fd, p, mask)
				must(t, err)
				o.dirs[int32(wd)] = p
			}
			return nil
		})
	}
	return o
}

// Stop drains the queued events and closes the observer.
func (o *Observer) Stop() {
	o.drain()
	unix.Close(o.fd)
}

func (o *Observer) drain() {
	buf := make([]byte, 1<<16)
	for {
		n, err := unix.Read(o.fd, buf)
		if errors.Is(err, unix.EAGAIN) || n <= 0 {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			for len(name) > 0 && name[len(name)-1] == 0 {
				name = name[:len(name)-1]
			}
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				o.t.Fatal("inotify queue overflowed: observation incomplete")
			}
			if dir, ok := o.dirs[ev.Wd]; ok && len(name) > 0 && ev.Mask&unix.IN_ISDIR == 0 {
				p := filepath.Join(dir, string(name))
				o.mu.Lock()
				if ev.Mask&unix.IN_OPEN != 0 {
					o.opens[p]++
					o.seq = append(o.seq, p)
				}
				if ev.Mask&unix.IN_ACCESS != 0 {
					o.reads[p]++
				}
				o.mu.Unlock()
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

// Opens returns how many times path was opened (call after Stop).
func (o *Observer) Opens(path string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.opens[path]
}

// Accesses returns how many reads of path were seen (ObserveAccess; call
// after Stop). Successive identical events may be merged by the kernel,
// so this is "at least one" evidence, not an exact count.
func (o *Observer) Accesses(path string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reads[path]
}

// Sequence returns the files opened, in order (call after Stop).
func (o *Observer) Sequence() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.seq...)
}
