package tiering

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Errors of Publish and PublishFrom.
var (
	// ErrNotRegular: the source is not a regular file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrChanged: the source changed while it was being copied; nothing
	// was published.
	ErrChanged = errors.New("source changed during copy")
	// ErrIncomplete: the copy did not get as many bytes as the source
	// has, though the source kept its size and mtime (a fill that
	// stopped short or wrote more, or a source that read short); nothing
	// was published.
	ErrIncomplete = errors.New("copy is not the source's length")
)

// TierError is a failure of the tier itself — full (ENOSPC), failing
// (EIO), removed — as opposed to a failure of the source. The caller
// stops using a failing tier and places the file elsewhere.
type TierError struct{ Err error }

func (e *TierError) Error() string { return "tier: " + e.Err.Error() }
func (e *TierError) Unwrap() error { return e.Err }

// copyBuf is the unit of Publish's copy loop.
const copyBuf = 1 << 20

// copyBufs keeps the copy loops' buffers: a fresh megabyte per file,
// zeroed by the runtime, cost the copier a fifth of its CPU time. Each is
// aligned to directAlign, as O_DIRECT reads need (Source.Direct).
var copyBufs = sync.Pool{New: func() any {
	b := make([]byte, copyBuf+directAlign)
	off := directAlign - int(uintptr(unsafe.Pointer(&b[0]))%directAlign)
	return (*[copyBuf]byte)(b[off%directAlign:])
}}

// directAlign is the alignment of O_DIRECT reads' buffers, offsets and
// lengths: the page size, which every filesystem accepts.
const directAlign = 4096

// Publish copies source into the tier under the atomic publish protocol
// and returns the bytes copied: a temporary file in tmp/, created
// exclusively, filled, checked against the source, given the source's
// permission bits and times, then renamed into files/. On any error
// nothing is published and the temporary file is removed. The caller must
// hold the tier's Lock.
func (tr *Tree) Publish(source string) (int64, error) {
	src, err := OpenSource(source)
	if err != nil {
		return 0, err
	}
	defer src.File.Close()
	return tr.PublishSource(source, src)
}

// A Source is a file to copy, opened (OpenSource) by whoever decides to
// copy it, so that the copy makes no request of the shared filesystem
// beyond the reader's own: open, fstat, reads and the fstat that checks
// the source did not change. A client without caching sends each of
// them to the servers.
type Source struct {
	File   *os.File
	Stat   unix.Stat_t // through File, when it was opened
	Link   bool        // the path ends in a symlink (LinkXattr)
	Direct bool        // File reads bypass the client's page cache (O_DIRECT)
	// Parallel: a reader waits for this copy, which reads its parts at
	// once (copyParallel) rather than one request after another.
	Parallel bool
	// Commit, if set, puts the finished copy in place (see Commit).
	Commit Commit
	// Placed, if set, is called as soon as the copy is in place, before
	// the source is checked again: a reader waiting for this copy reads
	// it meanwhile. A copy the check then finds changed is removed; the
	// writer that changed the file during the copy raced that reader as
	// it would have raced a read of the original.
	Placed func()
}

// A Commit puts a finished copy in place: it calls rename, which moves
// the copy there, or refuses to (its error is then returned and nothing
// is published), and may take the copy back with remove after the
// rename. src is the stat of the source the copy was made from. The
// caller of a publish uses it to bracket the rename with a check that the
// source did not change meanwhile, and to record the copy's identity
// (fetchpool.Guard). Without one the copy is renamed into place.
type Commit func(src *unix.Stat_t, rename func() error, remove func()) error

// OpenSource opens path for a copy. It opens without following a final
// symlink first, and learns that way whether the path is one without a
// separate lstat.
func OpenSource(path string) (*Source, error) { return openSource(path, 0) }

// OpenSourceUncached is OpenSource with the client's page cache bypassed
// (O_DIRECT) where the filesystem allows it. For a copy a reader waits
// for: the bytes go to the tier, a second copy of them in the client's
// cache is memory the job needs, and a FUSE client's readahead put
// 0.1 ms per file on the reader's wait (make bench's R1, page cache:
// epoch 1 1.05x no augur, 1.01x uncached). A filesystem that refuses
// O_DIRECT is read through its cache.
func OpenSourceUncached(path string) (*Source, error) {
	s, err := openUncached(path)
	if s != nil {
		s.Parallel = true
	}
	return s, err
}

func openUncached(path string) (*Source, error) {
	if noDirect.Load() {
		return OpenSource(path)
	}
	s, err := openSource(path, unix.O_DIRECT)
	if errors.Is(err, unix.EINVAL) {
		noDirect.Store(true) // one filesystem of the job refused: ask no more
		return OpenSource(path)
	}
	if s != nil {
		s.Direct = true
	}
	return s, err
}

// noDirect is set once a filesystem refused O_DIRECT.
var noDirect atomic.Bool

func openSource(path string, flags int) (*Source, error) {
	s := &Source{}
	fd, err := openRead(path, unix.O_NOFOLLOW|flags)
	if errors.Is(err, unix.ELOOP) {
		s.Link = true
		fd, err = openRead(path, flags)
	}
	if err != nil {
		return nil, err
	}
	s.File = os.NewFile(uintptr(fd), path)
	if err := Fstat(fd, &s.Stat); err != nil {
		s.File.Close()
		return nil, err
	}
	return s, nil
}

// PublishSource is Publish of a source the caller opened; it does not
// close it. It reads with pread, so the descriptor's offset is not its
// concern, and exactly the size src.Stat gives: the fstat after the copy
// proves the file has that size still, and a read to EOF would cost a
// client without caching one more request.
func (tr *Tree) PublishSource(source string, src *Source) (int64, error) {
	dir, leaf, err := copyRel(source)
	if err != nil {
		return 0, err
	}
	copyIn := func(dst *os.File) (int64, error) {
		if src.Parallel {
			return copyParallel(dst, src.File, src.Stat.Size, src.Direct)
		}
		return copyLoop(dst, src.File, 0, src.Stat.Size, src.Direct)
	}
	// The bytes are the descriptor's file's, whatever is renamed over
	// source meanwhile: its stat is the one to compare.
	fd := int(src.File.Fd())
	restat := func(after *unix.Stat_t) error { return Fstat(fd, after) }
	link := func() bool { return src.Link }
	if src.Placed == nil {
		return tr.publish(source, dir, leaf, &src.Stat, link, copyIn, restat, src.Commit)
	}
	n, err := tr.publish(source, dir, leaf, &src.Stat, link, copyIn, nil, src.Commit)
	if err != nil {
		return 0, err
	}
	src.Placed()
	if err := sameSource(restat, &src.Stat, n); err != nil {
		tr.Remove(source)
		return 0, err
	}
	return n, nil
}

// PublishFrom publishes a copy of source whose bytes fill writes instead
// of reading them from source (a peer's copy of it), under the protocol
// of Publish, and returns the bytes published. st is source's stat,
// which the caller took before the bytes were asked for; it is only
// read. fill writes into dst, an empty temporary file of the tier, from
// its start, and returns how many bytes it wrote; it must not close dst.
// An error of fill is returned as it is, after the temporary file is
// removed: a failure of the tier that fill meets is the caller's to wrap
// in a TierError.
//
// The copy is published only if it holds exactly st's size in bytes and
// a stat of source after fill still reports st's size and mtime: that
// request to the shared filesystem is what keeps a copy from elsewhere
// from outliving a change of the source. commit, if not nil, puts the
// copy in place (Commit). The caller must hold the tier's Lock.
func (tr *Tree) PublishFrom(source string, st *unix.Stat_t, fill func(dst *os.File) (int64, error), commit Commit) (int64, error) {
	dir, leaf, err := copyRel(source)
	if err != nil {
		return 0, err
	}
	restat := func(after *unix.Stat_t) error { return Stat(source, after) }
	link := func() bool {
		var st unix.Stat_t
		return unix.Lstat(source, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
	}
	return tr.publish(source, dir, leaf, st, link, fill, restat, commit)
}

// PublishRead publishes a copy of source from bytes a reader of source
// read (a first read's tee: fill writes them), under the protocol of
// Publish, and returns the bytes published. st is the source's stat as
// the reader's descriptor gave it, link whether its path ends in a
// symlink. It asks the shared filesystem nothing: the reader's open was
// the one request a read without augur makes, and a stat more of each
// file would load the metadata servers; a change of the source after
// that open is found as any change after a copy is (the revalidation of
// served copies). The copy is published only if it holds st's size in
// bytes. The caller must hold the tier's Lock.
func (tr *Tree) PublishRead(source string, st *unix.Stat_t, link bool, fill func(dst *os.File) (int64, error), commit Commit) (int64, error) {
	dir, leaf, err := copyRel(source)
	if err != nil {
		return 0, err
	}
	return tr.publish(source, dir, leaf, st, func() bool { return link }, fill, nil, commit)
}

// PublishFile publishes as source's copy the file name in the directory
// dirfd, open as f, whose first st.Size bytes are source's as st
// describes it (a reader's tee: PublishRead's terms): it is cut to that
// size and moved into the tier, where both are on one filesystem, without
// a byte copied (the tee of a RAM tier's copy is the copy); otherwise it
// is copied (PublishRead). Either way the name is gone from dirfd. The
// caller must hold the tier's Lock.
func (tr *Tree) PublishFile(source string, st *unix.Stat_t, link bool, dirfd int, name string, f *os.File, commit Commit) (int64, error) {
	dir, leaf, err := copyRel(source)
	if err != nil {
		unix.Unlinkat(dirfd, name, 0)
		return 0, err
	}
	tmpfd, done, err := tr.openTmp()
	if err != nil {
		unix.Unlinkat(dirfd, name, 0)
		return 0, &TierError{err}
	}
	defer done()
	tmp := tempName()
	if err := unix.Renameat2(dirfd, name, tmpfd, tmp, unix.RENAME_NOREPLACE); err != nil {
		unix.Unlinkat(dirfd, name, 0)
		if !errors.Is(err, unix.EXDEV) {
			return 0, &TierError{err}
		}
		return tr.PublishRead(source, st, link, func(dst *os.File) (int64, error) {
			return io.Copy(dst, io.NewSectionReader(f, 0, st.Size))
		}, commit)
	}
	fd := int(f.Fd())
	err = unix.Ftruncate(fd, st.Size)
	if err == nil {
		err = finish(tmpfd, tmp, fd, link, st, tr.Fsync)
	}
	if err != nil {
		unix.Unlinkat(tmpfd, tmp, 0)
		return 0, &TierError{err}
	}
	rename := func() error { return tr.rename(tmpfd, tmp, source, dir, leaf) }
	if commit == nil {
		err = rename()
	} else {
		err = commit(st, rename, func() { tr.Remove(source) })
	}
	if err != nil {
		unix.Unlinkat(tmpfd, tmp, 0) // ENOENT if commit renamed it and took it back
		return 0, err
	}
	return st.Size, nil
}

// publish is the protocol shared by Publish and PublishFrom: source's
// copy goes to files/dir/leaf, st is source's stat when the copy began,
// link says whether source ends in a symlink, fill writes the bytes and
// restat takes source's stat once they are written (nil: the caller
// checks the source after the copy is placed), and commit, if not nil,
// puts the copy in place.
func (tr *Tree) publish(source, dir, leaf string, st *unix.Stat_t, link func() bool, fill func(*os.File) (int64, error), restat func(*unix.Stat_t) error, commit Commit) (int64, error) {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, ErrNotRegular
	}
	tmpfd, done, err := tr.openTmp()
	if err != nil {
		return 0, &TierError{err}
	}
	defer done()
	tmp, err := createTemp(tmpfd, tr.Path+"/"+tmpDir)
	if err != nil {
		return 0, &TierError{err}
	}
	n, err := fillTemp(tmpfd, tmp, fill, link, st, tr.Fsync)
	if err == nil && restat != nil {
		err = sameSource(restat, st, n)
	}
	if err == nil && n != st.Size {
		err = ErrIncomplete
	}
	if err == nil {
		rename := func() error { return tr.rename(tmpfd, tmp.Name(), source, dir, leaf) }
		if commit == nil {
			err = rename()
		} else {
			err = commit(st, rename, func() { tr.Remove(source) })
		}
	}
	if err != nil {
		unix.Unlinkat(tmpfd, filepath.Base(tmp.Name()), 0) // ENOENT if commit renamed it and took it back
		return 0, err
	}
	return n, nil
}

// tempName is a fresh name for a copy in the making in tmp/.
func tempName() string {
	var b [8]byte
	rand.Read(b[:])
	return "copy-" + hex.EncodeToString(b[:])
}

// createTemp creates a new file in the directory dirfd (named dir),
// exclusively and without following a symlink.
func createTemp(dirfd int, dir string) (*os.File, error) {
	for {
		name := tempName()
		fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "create", Path: dir + "/" + name, Err: err}
		}
		return os.NewFile(uintptr(fd), dir+"/"+name), nil
	}
}

// fillTemp fills tmp (in the directory tmpfd) by fill, checks that it
// holds the bytes fill reports, gives it the source's permission bits,
// times and identity, syncs it if asked, and closes it. fill's errors are
// returned as they are; errors finishing tmp are the tier's (TierError).
func fillTemp(tmpfd int, tmp *os.File, fill func(*os.File) (int64, error), link func() bool, st *unix.Stat_t, sync bool) (int64, error) {
	n, err := fill(tmp)
	if err == nil {
		err = holds(tmp, n)
	}
	if err == nil {
		if err = finish(tmpfd, filepath.Base(tmp.Name()), int(tmp.Fd()), link(), st, sync); err != nil {
			err = &TierError{err}
		}
	}
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = &TierError{cerr}
	}
	return n, err
}

// holds checks that tmp is n bytes long: a fill of PublishFrom that
// reports more than it wrote, or wrote past what it reports, would
// otherwise publish a copy of the wrong length under a count that looks
// right.
func holds(tmp *os.File, n int64) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(tmp.Fd()), &st); err != nil {
		return &TierError{err}
	}
	if st.Size != n {
		return ErrIncomplete
	}
	return nil
}

// copyStreams is how many reads a copy that a reader waits for keeps in
// flight at once (copyParallel).
const copyStreams = 4

// copyPart is the least a part of a parallel copy holds: a FUSE
// client's default request (max_read); a file of one request is read in
// one.
const copyPart = 128 << 10

// copyParallel copies size bytes of src into dst as copyLoop does, in up
// to copyStreams parts read at once. A reader reads a file's requests
// one after the other, so the shared filesystem's latency per request,
// more than its bandwidth, bounds the time it waits for a copy: with the
// parts' requests in flight together (as a client's readahead keeps
// buffered reads), the copy takes about one request's latency (make
// bench's S3 and R1 with direct I/O). Each part is a whole number of
// directAlign blocks but the last.
func copyParallel(dst, src *os.File, size int64, direct bool) (int64, error) {
	parts := min(copyStreams, (size+copyPart-1)/copyPart)
	if parts <= 1 {
		return copyLoop(dst, src, 0, size, direct)
	}
	per := ((size+parts-1)/parts + directAlign - 1) / directAlign * directAlign
	counts, errs := make([]int64, parts), make([]error, parts)
	var wg sync.WaitGroup
	for i := range parts {
		wg.Go(func() {
			off := int64(i) * per
			counts[i], errs[i] = copyLoop(dst, src, off, min(off+per, size), direct)
		})
	}
	wg.Wait()
	var n int64
	for i := range parts {
		if errs[i] != nil {
			return n, errs[i]
		}
		n += counts[i]
	}
	return n, nil
}

// copyLoop copies the bytes [off, end) of src into dst at the same
// offsets, and returns how many it copied. It stops short at EOF: the
// caller compares the count with the source's size. With direct, src was
// opened O_DIRECT and off is a multiple of directAlign: each read asks
// for a multiple of directAlign bytes (the last one returns short, at
// EOF, in the same request), and a filesystem that refuses such a read
// gets the rest through its cache (O_DIRECT cleared on the descriptor,
// no new open).
func copyLoop(dst, src *os.File, off, end int64, direct bool) (int64, error) {
	b := copyBufs.Get().(*[copyBuf]byte)
	defer copyBufs.Put(b)
	n := off
	for n < end {
		want := min(int64(copyBuf), end-n)
		if direct {
			want = min(int64(copyBuf), (want+directAlign-1)/directAlign*directAlign)
		}
		r, err := src.ReadAt(b[:want], n)
		if direct && r == 0 && errors.Is(err, unix.EINVAL) {
			direct = false
			if err := clearDirect(src); err != nil {
				return n - off, err
			}
			continue
		}
		if r > 0 {
			r = min(r, int(end-n)) // a file grown since its stat: restat says so
			if _, werr := dst.WriteAt(b[:r], n); werr != nil {
				return n - off, &TierError{werr}
			}
			n += int64(r)
		}
		if err == io.EOF {
			return n - off, nil
		}
		if err != nil {
			return n - off, err
		}
		if direct && int64(r) < want && n < end {
			return n - off, nil // short: EOF
		}
	}
	return n - off, nil
}

// clearDirect turns O_DIRECT off on f's open file.
func clearDirect(f *os.File) error {
	fd := int(f.Fd())
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_DIRECT)
	}
	return err
}

// finish gives the copy its source's mode, times and identity, through
// its descriptor. A copy keeps the source's permission bits, so fstat of
// it reports them, except set-id bits and write permission for group and
// others: a copy is never anyone else's to change (the data plane serves
// none that is).
func finish(tmpfd int, name string, fd int, link bool, src *unix.Stat_t, sync bool) error {
	if err := unix.Fchmod(fd, src.Mode&0o755); err != nil {
		return err
	}
	setSourceIdent(fd, src)
	if link {
		unix.Fsetxattr(fd, LinkXattr, []byte{1}, 0)
	}
	times := []unix.Timespec{src.Atim, src.Mtim}
	if err := unix.UtimesNanoAt(tmpfd, name, times, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if sync {
		return unix.Fsync(fd)
	}
	return nil
}

// sameSource checks that the source, as restat sees it now, is still the
// file it was when the copy began (before: sameFile), and that all of it
// was copied.
func sameSource(restat func(*unix.Stat_t) error, before *unix.Stat_t, n int64) error {
	var after unix.Stat_t
	if err := restat(&after); err != nil {
		return err
	}
	if !sameFile(&after, before) {
		return ErrChanged
	}
	if n != before.Size {
		return ErrIncomplete
	}
	return nil
}

// rename moves the finished copy of source from tmp/ to its place,
// creating the directories it needs (0700), each opened from its checked
// parent. Present is told first: an open that finds the copy must find
// its mark.
func (tr *Tree) rename(tmpfd int, tmp, source, dir, leaf string) error {
	dst, err := tr.dir(dir, true)
	if err != nil {
		return &TierError{err}
	}
	defer unix.Close(dst)
	if tr.Present != nil {
		tr.Present(source)
	}
	if err := unix.Renameat(tmpfd, filepath.Base(tmp), dst, leaf); err != nil {
		return &TierError{fmt.Errorf("publish %s/%s/%s: %w", tr.Path, dir, leaf, err)}
	}
	return nil
}

// IdentXattr names the extended attribute holding the identity of a
// copy's source (Ident, in little-endian words), which the data plane's
// fstat reports for a descriptor served from the copy (preload/stat.c)
// and which decides whether the copy still stands for its source.
const IdentXattr = "user.augur.src"

// Ident is what a copy records of the source it was made from: device,
// inode, size, mtime and ctime (preload/internal.h, struct
// augur_src_ident). A copy made before the ctime was recorded holds Dev
// and Ino alone (Full false).
type Ident struct {
	Dev, Ino, Size uint64
	Mtime, Ctime   unix.Timespec
	Full           bool
}

// identSize is the attribute's length when it holds every field.
const identSize = 56

// IdentOf is the identity of the file st describes.
func IdentOf(st *unix.Stat_t) Ident {
	return Ident{Dev: st.Dev, Ino: st.Ino, Size: uint64(st.Size), Mtime: st.Mtim, Ctime: st.Ctim, Full: true}
}

func (id Ident) bytes() []byte {
	b := make([]byte, identSize)
	le := binary.LittleEndian
	le.PutUint64(b[0:], id.Dev)
	le.PutUint64(b[8:], id.Ino)
	le.PutUint64(b[16:], id.Size)
	le.PutUint64(b[24:], uint64(id.Mtime.Sec))
	le.PutUint64(b[32:], uint64(id.Mtime.Nsec))
	le.PutUint64(b[40:], uint64(id.Ctime.Sec))
	le.PutUint64(b[48:], uint64(id.Ctime.Nsec))
	return b
}

// parseIdent reads the attribute's value b.
func parseIdent(b []byte) (Ident, bool) {
	le := binary.LittleEndian
	switch len(b) {
	case 16:
		return Ident{Dev: le.Uint64(b[0:]), Ino: le.Uint64(b[8:])}, true
	case identSize:
		return Ident{Dev: le.Uint64(b[0:]), Ino: le.Uint64(b[8:]), Size: le.Uint64(b[16:]),
			Mtime: unix.Timespec{Sec: int64(le.Uint64(b[24:])), Nsec: int64(le.Uint64(b[32:]))},
			Ctime: unix.Timespec{Sec: int64(le.Uint64(b[40:])), Nsec: int64(le.Uint64(b[48:]))},
			Full:  true}, true
	}
	return Ident{}, false
}

// CopyIdent reads the identity recorded on the copy at path; false when
// it holds none (a tier filesystem without user xattrs, or no copy).
func CopyIdent(path string) (Ident, bool) {
	var b [identSize]byte
	n, err := unix.Lgetxattr(path, IdentXattr, b[:])
	if err != nil {
		return Ident{}, false
	}
	return parseIdent(b[:n])
}

// FileIdent reads the identity recorded on the copy open as fd: the
// error is the xattr call's (unix.ENODATA: the copy records none), or
// unix.ERANGE for a value that is no identity.
func FileIdent(fd int) (Ident, error) {
	var b [identSize + 1]byte // one more: a longer value is no identity
	n, err := unix.Fgetxattr(fd, IdentXattr, b[:])
	if err != nil {
		return Ident{}, err
	}
	id, ok := parseIdent(b[:n])
	if !ok {
		return Ident{}, unix.ERANGE
	}
	return id, nil
}

// Stands says whether a copy recording id, whose own stat is cst, stands
// for the source src is now: the same size and mtime (which the copy
// carries too), and, where the copy records them, the same device, inode
// and ctime. A file replaced by another of the same size and mtime (a
// rename over it, an rsync that keeps times) has another inode; one
// written in place and given its old mtime back (touch -r) a newer ctime.
func Stands(id Ident, known bool, cst, src *unix.Stat_t) bool {
	if cst.Size != src.Size || cst.Mtim != src.Mtim {
		return false
	}
	if !known {
		return true
	}
	return id.Dev == src.Dev && id.Ino == src.Ino && (!id.Full || id.Ctime == src.Ctim)
}

// setSourceIdent records the source's identity on the copy. A filesystem
// without user xattrs refuses; its copies then report their own identity.
func setSourceIdent(fd int, src *unix.Stat_t) {
	unix.Fsetxattr(fd, IdentXattr, IdentOf(src).bytes(), 0)
}

// LinkXattr marks a copy whose source path ends in a symlink: an open
// with O_NOFOLLOW must then fail as on the original, and the data plane
// sends it there.
const LinkXattr = "user.augur.link"
