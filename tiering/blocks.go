package tiering

import (
	"errors"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Large files are tiered in blocks: a tier holds some of a large file's
// blocks in <tier>/blocks/<source with '@' on each directory> (BlockPath),
// a sparse file of the source's size, whose pages the job's segment says
// are present (preload/segment.h, struct augur_blocks). The leader makes
// the file (Blocks); the job's readers write the pages they read into it,
// and the leader the blocks it copies ahead of them.

// blocksDir holds the blocks files of large files.
const blocksDir = "blocks"

// BlockPath is where tier holds the blocks of source.
func BlockPath(tier, source string) (string, error) {
	dir, leaf, err := blockRel(source)
	if err != nil {
		return "", err
	}
	return tier + "/" + dir + "/" + leaf, nil
}

// blockRel is copyRel under blocks/.
func blockRel(source string) (dir, leaf string, err error) {
	dir, leaf, err = copyRel(source)
	return blocksDir + strings.TrimPrefix(dir, filesDir), leaf, err
}

// Blocks makes tier's blocks file of source, empty and of st's size,
// recording st's identity on it (IdentXattr), unless one is there for
// that very file already; it returns whether it made one. The caller must
// hold the tier's Lock.
func (tr *Tree) Blocks(source string, st *unix.Stat_t) (bool, error) {
	dir, leaf, err := blockRel(source)
	if err != nil {
		return false, err
	}
	dfd, err := tr.dir(dir, true)
	if err != nil {
		return false, &TierError{err}
	}
	defer unix.Close(dfd)
	if fd, err := unix.Openat(dfd, leaf, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
		id, ierr := FileIdent(fd)
		var bst unix.Stat_t
		same := ierr == nil && unix.Fstat(fd, &bst) == nil && bst.Size == st.Size &&
			untrusted(tr.Path+"/"+dir+"/"+leaf, &bst, unix.S_IFREG, tr.uid) == nil && id == IdentOf(st)
		unix.Close(fd)
		if same {
			return false, nil
		}
		unix.Unlinkat(dfd, leaf, 0)
	}
	fd, err := unix.Openat(dfd, leaf, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return false, &TierError{err}
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, st.Size); err != nil {
		unix.Unlinkat(dfd, leaf, 0)
		return false, &TierError{err}
	}
	setSourceIdent(fd, st)
	return true, nil
}

// OpenBlocks opens tier's blocks file of source to write pages into.
func (tr *Tree) OpenBlocks(source string) (*os.File, error) {
	dir, leaf, err := blockRel(source)
	if err != nil {
		return nil, err
	}
	dfd, err := tr.dir(dir, false)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, leaf, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: tr.Path + "/" + dir + "/" + leaf, Err: err}
	}
	return os.NewFile(uintptr(fd), tr.Path+"/"+dir+"/"+leaf), nil
}

// RemoveBlocks removes tier's blocks file of source, if it holds one.
func (tr *Tree) RemoveBlocks(source string) error {
	dir, leaf, err := blockRel(source)
	if err != nil {
		return err
	}
	dfd, err := tr.dir(dir, false)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := unix.Unlinkat(dfd, leaf, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// BlocksUsage is what the tier's blocks files take: the bytes of the
// blocks they hold, not their sizes.
func (tr *Tree) BlocksUsage() Usage {
	var u Usage
	tr.walk(blocksDir, func(e *entry) {
		if e.st.Mode&unix.S_IFMT == unix.S_IFREG {
			u.Bytes += e.st.Blocks * 512
			u.Files++
		}
	}, nil, func(error) {})
	return u
}
