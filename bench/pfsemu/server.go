package pfsemu

import (
	"bufio"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// ErrMounted is returned by Mount when the mount point already has a
// live filesystem mounted on it.
var ErrMounted = errors.New("already mounted")

// Server is one mounted emulator. Its methods are safe for concurrent use.
type Server struct {
	opts   Options
	c      counters
	link   *link
	faults faults
	logf   func(format string, args ...any)

	fuse *fuse.Server
	done chan struct{} // closed when the kernel connection ends

	stopStats chan struct{} // closed by Unmount to stop the stats writer
	statsDone chan struct{} // closed when the stats writer has returned

	unmountOnce sync.Once
	unmountErr  error
}

// Mount mounts an emulator of opts.Source on opts.Mount and returns once
// the kernel can use it. A stale mount left on opts.Mount by an emulator
// that was killed (its mount point answers ENOTCONN, "transport endpoint
// is not connected") is detached first, with one message to opts.Logf.
// The caller must call Unmount.
//
// Mounting needs root (or a working fusermount); the mount is then usable
// by the user who mounted it.
func Mount(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	enoughProcs()
	s := &Server{
		opts: opts,
		link: newLink(&opts),
		faults: faults{
			failRate: opts.FailRate, seed: opts.FaultSeed,
			stallEvery: opts.StallEvery, stall: opts.Stall,
		},
		logf:      opts.Logf,
		done:      make(chan struct{}),
		stopStats: make(chan struct{}),
		statsDone: make(chan struct{}),
	}
	if s.logf == nil {
		s.logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "pfsemu: "+format+"\n", args...)
		}
	}
	if opts.PerFile {
		s.c.files = map[string]*fileCounters{}
	}

	if st, err := os.Stat(opts.Source); err != nil {
		return nil, fmt.Errorf("source: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("source %s is not a directory", opts.Source)
	}
	if opts.StatsFile != "" {
		if st, err := os.Stat(filepath.Dir(opts.StatsFile)); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("stats file %s: its directory does not exist", opts.StatsFile)
		}
	}
	if err := clearStale(opts.Mount, s.logf); err != nil {
		return nil, err
	}
	if st, err := os.Stat(opts.Mount); err != nil {
		return nil, fmt.Errorf("mount point: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("mount point %s is not a directory", opts.Mount)
	}
	if fstype, ok := mountedOn(opts.Mount); ok {
		return nil, fmt.Errorf("%s: %w (type %s); unmount it first", opts.Mount, ErrMounted, fstype)
	}

	lb, err := fs.NewLoopbackRoot(opts.Source)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	root := &node{LoopbackNode: lb.(*fs.LoopbackNode), s: s}

	timeout := opts.cacheTimeout()
	fsOpts := &fs.Options{
		EntryTimeout: &timeout,
		AttrTimeout:  &timeout,
		MountOptions: fuse.MountOptions{
			FsName:             opts.Source,
			Name:               "pfsemu",
			DirectMount:        true,
			DisableReadDirPlus: true,
			// Never let the kernel read the backing files itself.
			DisabledCapabilities: fuse.CAP_PASSTHROUGH,
			// Allow MAP_SHARED mappings of direct-I/O files (numpy's
			// memmap uses them); without it mmap fails with ENODEV.
			ExtraCapabilities: fuse.CAP_DIRECT_IO_ALLOW_MMAP,
			Debug:             opts.Debug,
			Logger:            log.New(logWriter(s.logf), "", 0),
		},
	}
	if timeout > 0 {
		fsOpts.NegativeTimeout = &timeout
	}
	raw := &rawFS{RawFileSystem: fs.NewNodeFS(root, fsOpts), s: s}
	s.fuse, err = fuse.NewServer(raw, opts.Mount, &fsOpts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", opts.Mount, err)
	}
	s.c.start = time.Now()
	go s.fuse.Serve()
	if err := s.fuse.WaitMount(); err != nil {
		s.fuse.Unmount()
		return nil, fmt.Errorf("mount %s: %w", opts.Mount, err)
	}
	go func() {
		s.fuse.Wait()
		close(s.done)
	}()
	go s.writeStatsLoop()
	return s, nil
}

// Stats returns the counters now.
func (s *Server) Stats() Stats {
	return s.c.snapshot(s.link.peakReaders())
}

// Done is closed when the mount has gone away: after Unmount, or when
// someone else unmounted it.
func (s *Server) Done() <-chan struct{} { return s.done }

// Unmount unmounts the emulator and writes the stats file a last time.
// If the mount is busy (a process holds a file or its working directory
// in it) it is detached lazily instead: it leaves the namespace at once
// and the kernel keeps serving the open files until they are closed;
// that is logged, and the last stats file does not include those reads.
// Calling Unmount again returns the first result.
func (s *Server) Unmount() error {
	s.unmountOnce.Do(func() {
		s.unmountErr = s.unmount()
		s.c.end.Store(time.Now().UnixNano())
		close(s.stopStats)
		<-s.statsDone
	})
	return s.unmountErr
}

func (s *Server) unmount() error {
	select {
	case <-s.done:
		return nil // already unmounted from outside
	default:
	}
	mnt := s.opts.Mount
	var err error
	for delay := 5 * time.Millisecond; delay < 200*time.Millisecond; delay *= 2 {
		// A file closed just now may still be on its way to RELEASE.
		if err = unix.Unmount(mnt, 0); err != unix.EBUSY {
			break
		}
		time.Sleep(delay)
	}
	switch err {
	case nil:
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			s.logf("unmounted %s, but the FUSE connection has not ended after 10s", mnt)
		}
		return nil
	case unix.EBUSY:
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: busy, and lazy unmount failed: %w", mnt, err)
		}
		s.logf("%s is busy (a process has a file or directory open in it); detached it lazily, it goes away when the last one is closed", mnt)
		return nil
	case unix.EPERM:
		// Mounted through fusermount, not as root: unmount the same way.
		if err := s.fuse.Unmount(); err != nil {
			return fmt.Errorf("unmount %s: %w", mnt, err)
		}
		return nil
	default:
		return fmt.Errorf("unmount %s: %w", mnt, err)
	}
}

// writeStatsLoop writes the stats file every StatsInterval until Unmount,
// then once more.
func (s *Server) writeStatsLoop() {
	defer close(s.statsDone)
	if s.opts.StatsFile == "" {
		<-s.stopStats
		return
	}
	t := time.NewTicker(s.opts.StatsInterval)
	defer t.Stop()
	failed := false
	write := func() {
		err := writeStatsFile(s.opts.StatsFile, s.Stats())
		if err != nil && !failed {
			s.logf("cannot write stats file: %v", err) // once, not every second
		}
		failed = err != nil
	}
	write()
	for {
		select {
		case <-t.C:
			write()
		case <-s.stopStats:
			write()
			return
		}
	}
}

// clearStale detaches a dead FUSE mount from mnt. When a FUSE server dies
// without unmounting, its mount stays and every access to the mount point
// fails with ENOTCONN until someone unmounts it.
func clearStale(mnt string, logf func(string, ...any)) error {
	for i := 0; i < 8; i++ { // stale mounts can be stacked
		var st unix.Stat_t
		if err := unix.Stat(mnt, &st); err != unix.ENOTCONN {
			return nil
		}
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("%s: stale mount (transport endpoint is not connected) that cannot be unmounted: %w", mnt, err)
		}
		logf("cleared a stale mount on %s left by an emulator that died without unmounting", mnt)
	}
	return fmt.Errorf("%s: still a stale mount after clearing 8", mnt)
}

// mountedOn reports whether dir is a mount point, and of what type,
// according to /proc/self/mountinfo.
func mountedOn(dir string) (fstype string, ok bool) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", false
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || unescapeMountinfo(fields[4]) != real {
			continue
		}
		fstype = "?"
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) {
				fstype = fields[i+1]
			}
		}
		ok = true // keep going: the last entry is the one on top
	}
	return fstype, ok
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of
// /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// logWriter adapts Logf to the io.Writer a log.Logger needs.
type logWriter func(format string, args ...any)

func (w logWriter) Write(p []byte) (int, error) {
	w("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// enoughProcs raises GOMAXPROCS to 4 per CPU. A request asleep in its
// latency (delay) and a reader of /dev/fuse each hold their P while in
// the system call, until the runtime's monitor takes it back (20 us to
// 10 ms later), and with one P per CPU the goroutines woken meanwhile
// waited for it: in make bench's S4 (4 nodes' prefetchers, two CPUs)
// clairvoyant's first epoch took 3.1 s with 2 Ps and 2.5 s with 8.
func enoughProcs() {
	if want := 4 * runtime.NumCPU(); runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
}
