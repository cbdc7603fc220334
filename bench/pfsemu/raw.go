package pfsemu

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// rawFS sits between the kernel and go-fuse's node bridge and counts and
// delays the metadata requests. Counting here, at the protocol level,
// rather than in the loopback nodes matters: the bridge calls node
// methods for its own purposes too (a SETATTR ends in a Getattr, a lookup
// of "." calls Getattr), and those calls never reached "the PFS".
//
// Data requests (OPEN, READ, WRITE, RELEASE, ...) are counted by node and
// file in node.go, where the file's path is known; each of them is called
// exactly once per request by the bridge.
type rawFS struct {
	fuse.RawFileSystem
	s *Server
}

func (r *rawFS) meta() { delay(r.s.opts.MetaLatency) }

func (r *rawFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	r.s.c.lookups.Add(1)
	r.meta()
	return r.RawFileSystem.Lookup(cancel, h, name, out)
}

func (r *rawFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	r.s.c.getattrs.Add(1)
	r.meta()
	return r.RawFileSystem.GetAttr(cancel, in, out)
}

func (r *rawFS) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	r.s.c.getattrs.Add(1)
	r.meta()
	return r.RawFileSystem.Statx(cancel, in, out)
}

// Read refuses a read through O_DIRECT under RefuseRead. The flags are
// the descriptor's at the read, which only READ carries (fcntl F_SETFL
// sends no request); it is counted as a READ, as a failed one is.
func (r *rawFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	if in.Flags&syscall.O_DIRECT != 0 && r.s.opts.RefuseDirect == RefuseRead {
		r.s.c.reads.Add(1)
		return nil, fuse.EINVAL
	}
	return r.RawFileSystem.Read(cancel, in, buf)
}

func (r *rawFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	r.s.c.opendirs.Add(1)
	r.meta()
	return r.RawFileSystem.OpenDir(cancel, in, out)
}

func (r *rawFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	r.s.c.readdirs.Add(1)
	r.meta()
	return r.RawFileSystem.ReadDir(cancel, in, out)
}

// ReadDirPlus is off (MountOptions.DisableReadDirPlus) so that every
// attribute the kernel wants costs a LOOKUP, as on a PFS without
// statahead; it is counted like READDIR should a kernel send it anyway.
func (r *rawFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	r.s.c.readdirs.Add(1)
	r.meta()
	return r.RawFileSystem.ReadDirPlus(cancel, in, out)
}

func (r *rawFS) ReleaseDir(in *fuse.ReleaseIn) {
	r.s.c.releasedirs.Add(1)
	r.RawFileSystem.ReleaseDir(in)
}

func (r *rawFS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	r.s.c.statfs.Add(1)
	r.meta()
	return r.RawFileSystem.StatFs(cancel, h, out)
}

func (r *rawFS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	r.s.c.readlinks.Add(1)
	r.meta()
	return r.RawFileSystem.Readlink(cancel, h)
}

func (r *rawFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	r.s.c.accesses.Add(1)
	r.meta()
	return r.RawFileSystem.Access(cancel, in)
}

func (r *rawFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	r.s.c.xattrs.Add(1)
	r.meta()
	return r.RawFileSystem.GetXAttr(cancel, h, attr, dest)
}

func (r *rawFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	r.s.c.xattrs.Add(1)
	r.meta()
	return r.RawFileSystem.ListXAttr(cancel, h, dest)
}

func (r *rawFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	r.s.c.setattrs.Add(1)
	return r.RawFileSystem.SetAttr(cancel, in, out)
}

func (r *rawFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	r.s.c.namespaceOps.Add(1)
	return r.RawFileSystem.Mknod(cancel, in, name, out)
}

func (r *rawFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	r.s.c.namespaceOps.Add(1)
	return r.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (r *rawFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	r.s.c.namespaceOps.Add(1)
	return r.RawFileSystem.Unlink(cancel, h, name)
}

func (r *rawFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	r.s.c.namespaceOps.Add(1)
	return r.RawFileSystem.Rmdir(cancel, h, name)
}

func (r *rawFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	r.s.c.namespaceOps.Add(1)
	return r.RawFileSystem.Rename(cancel, in, oldName, newName)
}

func (r *rawFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	r.s.c.namespaceOps.Add(1)
	return r.RawFileSystem.Link(cancel, in, name, out)
}

func (r *rawFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	r.s.c.namespaceOps.Add(1)
	return r.RawFileSystem.Symlink(cancel, h, target, name, out)
}

func (r *rawFS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	r.s.c.namespaceOps.Add(1)
	return r.RawFileSystem.SetXAttr(cancel, in, attr, data)
}

func (r *rawFS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	r.s.c.namespaceOps.Add(1)
	return r.RawFileSystem.RemoveXAttr(cancel, h, attr)
}

func (r *rawFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	r.s.c.fsyncs.Add(1)
	return r.RawFileSystem.FsyncDir(cancel, in)
}
