package pfsemu

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a loopback inode whose opens are delayed, counted and handed a
// counting file. Everything else (lookup, readdir, symlinks, xattrs,
// renames...) is go-fuse's loopback, unchanged; the metadata requests are
// counted one level up, in rawFS.
type node struct {
	*fs.LoopbackNode
	s *Server
}

var (
	_ = (fs.NodeWrapChilder)((*node)(nil))
	_ = (fs.NodeOpener)((*node)(nil))
	_ = (fs.NodeCreater)((*node)(nil))
	_ = (fs.NodeTmpfiler)((*node)(nil))
)

// WrapChild makes every inode the loopback creates below n a node too.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	lb, ok := ops.(*fs.LoopbackNode)
	if !ok {
		panic("pfsemu: go-fuse loopback created an unexpected node type")
	}
	return &node{LoopbackNode: lb, s: n.s}
}

// Open implements the OPEN request.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	n.s.c.opens.Add(1)
	fc := n.s.c.file(n.Path(nil))
	if fc != nil {
		fc.opens.Add(1)
	}
	delay(n.s.opts.OpenLatency)
	if flags&syscall.O_DIRECT != 0 && n.s.opts.RefuseDirect == RefuseOpen {
		return nil, 0, syscall.EINVAL
	}
	// O_DIRECT is the client's, about its own cache: the emulator reads
	// its source through the host's page cache whatever the client asks,
	// as a PFS server does not read its disks uncached because a client
	// did (and a short read at EOF, once a client has cleared O_DIRECT,
	// would fail on a source opened with it).
	fh, fl, e := n.LoopbackNode.Open(ctx, flags&^syscall.O_DIRECT)
	if e != 0 {
		return nil, 0, e
	}
	return n.s.wrap(fh, fc), fl | n.s.openFlags(), 0
}

// Create implements the CREATE request.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.s.c.creates.Add(1)
	delay(n.s.opts.OpenLatency)
	ch, fh, fl, e := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if e != 0 {
		return nil, nil, 0, e
	}
	return ch, n.s.wrap(fh, n.s.c.file(ch.Path(nil))), fl | n.s.openFlags(), 0
}

// Tmpfile implements the TMPFILE request (open(2) with O_TMPFILE).
func (n *node) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.s.c.creates.Add(1)
	delay(n.s.opts.OpenLatency)
	ch, fh, fl, e := n.LoopbackNode.Tmpfile(ctx, flags, mode, out)
	if e != 0 {
		return nil, nil, 0, e
	}
	return ch, n.s.wrap(fh, nil), fl | n.s.openFlags(), 0
}

func (s *Server) openFlags() uint32 {
	if s.opts.DirectIO {
		return fuse.FOPEN_DIRECT_IO
	}
	return fuse.FOPEN_KEEP_CACHE
}

// loopbackFile is what go-fuse's loopback hands out for an open file.
type loopbackFile interface {
	fs.FileReader
	fs.FileWriter
	fs.FileWritever
	fs.FileReleaser
	fs.FileFlusher
	fs.FileFsyncer
	fs.FileGetattrer
	fs.FileSetattrer
	fs.FileStatxer
	fs.FileLseeker
	fs.FileAllocater
	fs.FileGetlker
	fs.FileSetlker
	fs.FileSetlkwer
	fs.FileIoctler
}

var _ = (loopbackFile)((*fs.LoopbackFile)(nil))

// file wraps a loopback file handle. It forwards each method by hand
// rather than embedding the handle, on purpose: it must NOT implement
// fs.FilePassthroughFder, or the kernel would be handed the backing file
// (FUSE passthrough) and serve reads without ever asking the emulator.
// For the same reason it is not a *fs.LoopbackFile, which makes the
// loopback's server-side copy_file_range decline, so the kernel copies
// with READs that are counted.
type file struct {
	lf loopbackFile
	s  *Server
	fc *fileCounters // nil unless per-file counting is on
}

var _ = (loopbackFile)((*file)(nil))

func (s *Server) wrap(fh fs.FileHandle, fc *fileCounters) fs.FileHandle {
	lf, ok := fh.(loopbackFile)
	if !ok {
		// A broken assumption about go-fuse, not a caller error.
		panic("pfsemu: go-fuse loopback returned an unexpected file handle type")
	}
	return &file{lf: lf, s: s, fc: fc}
}

// Read implements the READ request: latency, then injected trouble, then
// the data, then the wait for the shared bandwidth.
func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	s := f.s
	seq := s.c.reads.Add(1)
	if f.fc != nil {
		f.fc.reads.Add(1)
	}
	var pid uint32
	if fc, ok := ctx.(*fuse.Context); ok {
		pid = fc.Caller.Pid
	}
	readers := s.link.begin(pid)
	defer s.link.end(pid)

	delay(s.opts.ReadLatency)
	if d := s.faults.stallFor(seq); d > 0 {
		s.c.stalls.Add(1)
		delay(d)
	}
	if s.faults.fail(seq) {
		s.c.readFaults.Add(1)
		return nil, syscall.EIO
	}

	// The loopback answers with a lazy descriptor read; do it now, so that
	// the byte count is what was really read and the bandwidth wait is
	// charged for it.
	res, e := f.lf.Read(ctx, buf, off)
	if e != 0 {
		return nil, e
	}
	data, st := res.Bytes(buf)
	res.Done()
	if !st.Ok() {
		return nil, syscall.Errno(st)
	}
	if wait := s.link.reserve(len(data), readers); wait > 0 {
		s.c.throttled.Add(int64(wait))
		delay(wait)
	}
	s.c.readBytes.Add(int64(len(data)))
	if f.fc != nil {
		f.fc.readBytes.Add(int64(len(data)))
	}
	return fuse.ReadResultData(data), 0
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	f.s.c.writes.Add(1)
	n, e := f.lf.Write(ctx, data, off)
	f.s.c.writeBytes.Add(int64(n))
	return n, e
}

func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	f.s.c.writes.Add(1)
	n, e := f.lf.Writev(ctx, data, off)
	f.s.c.writeBytes.Add(int64(n))
	return n, e
}

func (f *file) Release(ctx context.Context) syscall.Errno {
	f.s.c.releases.Add(1)
	return f.lf.Release(ctx)
}

func (f *file) Flush(ctx context.Context) syscall.Errno {
	f.s.c.flushes.Add(1)
	return f.lf.Flush(ctx)
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	f.s.c.fsyncs.Add(1)
	return f.lf.Fsync(ctx, flags)
}

// The rest reach the file only through requests already counted in rawFS
// (GETATTR, STATX, SETATTR) or are not counted.

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Getattr(ctx, out)
}

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Setattr(ctx, in, out)
}

func (f *file) Statx(ctx context.Context, flags, mask uint32, out *fuse.StatxOut) syscall.Errno {
	return f.lf.Statx(ctx, flags, mask, out)
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.lf.Lseek(ctx, off, whence)
}

func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return f.lf.Allocate(ctx, off, size, mode)
}

func (f *file) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	return f.lf.Getlk(ctx, owner, lk, flags, out)
}

func (f *file) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.lf.Setlk(ctx, owner, lk, flags)
}

func (f *file) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.lf.Setlkw(ctx, owner, lk, flags)
}

func (f *file) Ioctl(ctx context.Context, cmd uint32, arg uint64, input, output []byte) (int32, syscall.Errno) {
	return f.lf.Ioctl(ctx, cmd, arg, input, output)
}
