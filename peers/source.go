package peers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

// A copy is served, or made on demand, only for a source that is one of
// the dataset's files and no other's: reached from its root without a
// symbolic link, a regular file with no name but this one (st_nlink 1).
// Otherwise whoever can write into a dataset could have any file of the
// job's user sent between nodes: a symlink cls/x -> ~/.ssh/id_ed25519,
// or a hard link to it, is read as a sample by the job's own readers,
// and a copy of it would cross the network. A dataset whose files are
// reached through symlinks below its root, or are hard links, still has
// them cached in each node's tiers; each node reads them from the shared
// filesystem itself, and the server says so once (refusedLinked).
//
// Who checks. The check is one path resolution and a stat on the shared
// filesystem (O_PATH: no open of the file itself), which the asker makes
// anyway before it asks (StatSource stands in for its stat of the
// source): it asks only for a source that passed, and names the inode it
// found. The server then sends a copy made from that inode of the
// dataset's filesystem (the identity the publish recorded on the copy,
// tiering.IdentXattr, against the device of the root) without asking
// the shared filesystem anything; the asker is one of the job's nodes,
// whose proof it checked. Any other copy (a tier without user xattrs, a
// request naming no inode, a copy to make on demand) the server checks
// itself, once per copy: a copy that passed is marked (vouch) and served
// again on its mark. The mark holds the identity the check found, and
// counts only while it is the one the copy was made from: a copy made
// later, from whatever the path then led to, is a new file without it.
// A copy of a file that was the dataset's own when checked stays the
// dataset's bytes whatever the path becomes, and is served only while
// its size and mtime are those asked.

// StatSource stats path, a file below one of roots, as the server of a
// peer will have it: reached from its root without following a symbolic
// link, a regular file with one name; else ErrLinked (or the error of
// the path's resolution). The caller asks a peer for the file only if
// it returns nil.
func StatSource(roots []string, path string, st *unix.Stat_t) error {
	p := filepath.Clean(path)
	for _, root := range roots {
		if root = filepath.Clean(root); within(root, p) {
			return statSource(root, strings.TrimPrefix(strings.TrimPrefix(p, root), "/"), st)
		}
	}
	return fmt.Errorf("%s is below no dataset root", path)
}

// statSource stats the source rel below root (a clean relative path),
// resolving it without following any symbolic link and without leaving
// root, and checks that it is a regular file with one name.
func statSource(root, rel string, st *unix.Stat_t) error {
	fd, err := openBeneath(root, rel)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := tiering.Fstat(fd, st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 {
		return ErrLinked
	}
	return nil
}

// noOpenat2 is set once openat2 was refused (ENOSYS, or EPERM from a
// seccomp filter): openBeneath then walks.
var noOpenat2 atomic.Bool

// openBeneath opens rel below root as O_PATH without following a
// symlink on the way, in one openat2 where the kernel has it (5.6),
// else one component at a time. A symlink as the last component is
// opened itself (its type tells); on the way, or an escape from root,
// is ErrLinked.
func openBeneath(root, rel string) (int, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(rfd)
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV):
			return -1, ErrLinked
		case !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM):
			return -1, err
		}
		noOpenat2.Store(true)
	}
	return walkBeneath(rfd, rel)
}

// walkBeneath is openBeneath without openat2: each component opened
// O_PATH|O_NOFOLLOW from its parent, each directory on the way checked
// to be one.
func walkBeneath(rfd int, rel string) (int, error) {
	parts := strings.Split(rel, "/")
	cur := rfd
	for i, name := range parts {
		fd, err := unix.Openat(cur, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if cur != rfd {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		if i == len(parts)-1 {
			return fd, nil
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(fd)
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return -1, ErrLinked
			}
			return -1, unix.ENOTDIR
		}
		cur = fd
	}
	return -1, unix.ENOENT // rel was empty
}

// ownXattr marks a copy whose source was found to be the dataset's own
// file (statSource), with the identity found (as tiering.IdentXattr).
const ownXattr = "user.augur.own"

// vouched says whether the copy f carries the mark of a check of its
// source, for the source it was made from.
func vouched(f *os.File) bool {
	var own [17]byte // one more: a longer value is no identity
	n, err := unix.Fgetxattr(int(f.Fd()), ownXattr, own[:])
	if err != nil || n != 16 {
		return false
	}
	id, err := tiering.FileIdent(int(f.Fd()))
	return err == nil && binary.LittleEndian.Uint64(own[:8]) == id.Dev && binary.LittleEndian.Uint64(own[8:16]) == id.Ino
}

// vouch marks the copy f as made from the dataset's own file st (a copy
// that may not take the mark is checked at every request).
func vouch(f *os.File, st *unix.Stat_t) {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], st.Dev)
	binary.LittleEndian.PutUint64(b[8:], st.Ino)
	unix.Fsetxattr(int(f.Fd()), ownXattr, b[:], 0)
}

// copiedFrom says whether the copy f was made from the file st describes,
// by the identity the publish recorded on it (tiering.IdentXattr). A copy
// made from what a symlink swapped in for the source led to has the
// target's. A tier without user xattrs records none: the copy is taken
// as it is, its size and mtime checked.
func copiedFrom(f *os.File, st *unix.Stat_t) bool {
	id, err := tiering.FileIdent(int(f.Fd()))
	if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) {
		return true
	}
	return err == nil && id.Dev == st.Dev && id.Ino == st.Ino
}
