package tiering

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Trust. A tier holds the bytes a job is served as its dataset, so
// nothing in it may come from anyone but the user who runs the job. Tiers
// live in shared places (/dev/shm, $TMPDIR) where any user can create a
// name first, so a tier is used only if its directory, files/ and tmp/
// are directories this user owns, that no one else may write, and that
// are not symbolic links. A Tree enters the tier through a descriptor
// opened with O_NOFOLLOW and checked; a directory below is reached from
// it by a resolution that follows no symlink and stays beneath it
// (openat2, or openat and O_NOFOLLOW one component at a time), and is
// checked itself before anything is created, renamed or removed in it,
// so a component swapped for a symlink, even in the middle of a walk,
// cannot lead a write or a removal out of the tier. The directories augur
// creates are 0700: nobody else can even look into a tier.

// UnsafeError is a path augur does not trust: what it is, whose, and
// its mode.
type UnsafeError struct {
	Path string
	Why  string
}

func (e *UnsafeError) Error() string { return e.Path + " " + e.Why }

// Tree is an open tier. Its methods reach every path below the tier from
// the descriptor Open checked; the descriptor is checked again before
// each use, since a host program that closes descriptors it does not own
// could make its number name another directory. A Tree is safe for
// concurrent use; Close it when done.
type Tree struct {
	Tier
	// Kept, if set, is told of each copy Check (and Validate) would
	// keep, with its source's stat, from several goroutines at once, and
	// says whether to keep it: the leader records the identity of every
	// copy it may serve, and drops one it cannot record.
	Kept func(source string, src *unix.Stat_t) bool
	// Present, if set, is told of every copy the tier holds or is about
	// to hold: each one Check finds (kept or not), and each one published,
	// before it is renamed into place; from several goroutines at once.
	// The leader keeps from it the filter that spares an open the tiers
	// without its file's copy (shim/present.go).
	Present  func(source string)
	fd       int
	dev, ino uint64
	uid      uint32 // the tier's owner: this user, when Open checked it
	tmp      heldDir
}

// heldDir is a directory of the tier a Tree keeps open (tmp/, where every
// copy is made: resolving it for each copy cost three system calls of
// some thirty). Before each use its descriptor is checked to name it
// still, as the tier's own is.
type heldDir struct {
	fd       int
	dev, ino uint64
}

// Open creates the tier's directory if it is missing (only its last
// component: a missing parent is a configuration error), then files/ and
// tmp/, and checks that all three are the user's own and private.
func Open(t Tier) (*Tree, error) {
	if err := mkdirLast(t.Path); err != nil {
		return nil, fmt.Errorf("tier %s: %w", t.Path, err)
	}
	fd, st, err := openDirAt(unix.AT_FDCWD, t.Path, t.Path)
	if err != nil {
		return nil, fmt.Errorf("tier %s: %w", t.Path, err)
	}
	tr := &Tree{Tier: t, fd: fd, dev: st.Dev, ino: st.Ino, uid: st.Uid, tmp: heldDir{fd: -1}}
	if readOnly(t.Path) {
		tr.Close()
		return nil, fmt.Errorf("tier %s: on a read-only filesystem", t.Path)
	}
	for _, d := range []string{filesDir, tmpDir} {
		sub, err := tr.dir(d, true)
		if err != nil {
			tr.Close()
			return nil, fmt.Errorf("tier %s: %w", t.Path, err)
		}
		if d != tmpDir {
			unix.Close(sub)
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstat(sub, &st); err != nil {
			unix.Close(sub)
			tr.Close()
			return nil, fmt.Errorf("tier %s: %w", t.Path, err)
		}
		tr.tmp = heldDir{fd: sub, dev: st.Dev, ino: st.Ino}
	}
	return tr, nil
}

// Inspect says what Open would refuse about the tier, without creating or
// changing anything (for augur check and the configuration's checks):
// a tier directory, files/ or tmp/ that is not the user's own and
// private, a missing or unusable parent, a read-only filesystem.
func Inspect(t Tier) error {
	var st unix.Stat_t
	err := unix.Lstat(t.Path, &st)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return inspectParent(t.Path)
	}
	if err != nil {
		return fmt.Errorf("tier %s: %w", t.Path, err)
	}
	if err := Untrusted(t.Path, &st, unix.S_IFDIR); err != nil {
		return fmt.Errorf("tier %s: %w", t.Path, err)
	}
	for _, d := range []string{filesDir, tmpDir} {
		p := t.Path + "/" + d
		if unix.Lstat(p, &st) == nil {
			if err := Untrusted(p, &st, unix.S_IFDIR); err != nil {
				return fmt.Errorf("tier %s: %w", t.Path, err)
			}
		}
	}
	if readOnly(t.Path) {
		return fmt.Errorf("tier %s: on a read-only filesystem", t.Path)
	}
	return nil
}

// inspectParent says why the missing tier dir could not be created.
func inspectParent(dir string) error {
	parent := filepath.Dir(dir)
	var st unix.Stat_t
	switch err := unix.Stat(parent, &st); {
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("tier %s: %w", dir, errNoParent(parent))
	case err != nil:
		return fmt.Errorf("tier %s: %s: %w", dir, parent, err)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("tier %s: parent %s is not a directory", dir, parent)
	case readOnly(parent):
		return fmt.Errorf("tier %s: on a read-only filesystem", dir)
	}
	if err := unix.Faccessat(unix.AT_FDCWD, parent, unix.W_OK|unix.X_OK, unix.AT_EACCESS); err != nil {
		return fmt.Errorf("tier %s: mkdir %s: %w", dir, dir, err)
	}
	return nil
}

func readOnly(dir string) bool {
	var fs unix.Statfs_t
	return unix.Statfs(dir, &fs) == nil && fs.Flags&unix.ST_RDONLY != 0
}

// Usable says whether the tier can take copies now: its directory,
// tmp/ and files/ open and pass the checks, and a file can be created in
// tmp/. A copy that failed in the tier asks this before the tier is
// taken out of service: a source removed mid-copy is no fault of the
// tier's.
func (tr *Tree) Usable() error {
	files, err := tr.dir(filesDir, false)
	if err != nil {
		return err
	}
	unix.Close(files)
	tmp, done, err := tr.openTmp()
	if err != nil {
		return err
	}
	defer done()
	f, err := createTemp(tmp, tr.Path+"/"+tmpDir)
	if err != nil {
		return err
	}
	unix.Unlinkat(tmp, filepath.Base(f.Name()), 0)
	return f.Close()
}

// Close releases the tier's descriptors.
func (tr *Tree) Close() error {
	if tr == nil || tr.fd < 0 {
		return nil
	}
	if tr.tmp.fd >= 0 && tr.tmp.names(tr.uid) { // else the number is the program's now
		unix.Close(tr.tmp.fd)
	}
	tr.tmp.fd = -1
	err := unix.Close(tr.fd)
	tr.fd = -1
	return err
}

// openTmp returns a descriptor of tmp/ and what to call when done with
// it: the one the Tree keeps, if it still names tmp/ as Open found it,
// else one opened now (tmp/ removed and made again, or the kept number
// closed by the program and reused).
func (tr *Tree) openTmp() (int, func(), error) {
	if tr.tmp.fd >= 0 && tr.tmp.names(tr.uid) {
		return tr.tmp.fd, func() {}, nil
	}
	fd, err := tr.dir(tmpDir, false)
	if err != nil {
		return -1, nil, err
	}
	return fd, func() { unix.Close(fd) }, nil
}

// names says whether d's descriptor still names the directory it was
// opened on, still linked in its parent and private to owner.
func (d *heldDir) names(owner uint32) bool {
	var st unix.Stat_t
	return unix.Fstat(d.fd, &st) == nil && st.Dev == d.dev && st.Ino == d.ino && st.Nlink > 0 &&
		untrusted("", &st, unix.S_IFDIR, owner) == nil
}

// mkdirLast creates dir (mode 0700) unless it exists; its parent must.
func mkdirLast(dir string) error {
	err := unix.Mkdir(dir, 0o700)
	if err == nil || errors.Is(err, unix.EEXIST) {
		return nil
	}
	parent := filepath.Dir(dir)
	switch {
	case errors.Is(err, unix.ENOENT):
		return errNoParent(parent)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("parent %s is not a directory", parent)
	case errors.Is(err, unix.EROFS):
		return errors.New("on a read-only filesystem")
	}
	return fmt.Errorf("mkdir %s: %w", dir, err)
}

func errNoParent(parent string) error {
	return fmt.Errorf("parent directory %s does not exist (augur creates only the tier's own directory)", parent)
}

// root returns the tier's descriptor after checking that it still names
// the directory Open checked.
func (tr *Tree) root() (int, error) {
	if tr == nil {
		return -1, errors.New("tier not in use")
	}
	var st unix.Stat_t
	if tr.fd < 0 || unix.Fstat(tr.fd, &st) != nil || st.Dev != tr.dev || st.Ino != tr.ino {
		return -1, fmt.Errorf("tier %s: its descriptor was closed or reused by the program", tr.Path)
	}
	return tr.fd, nil
}

// dir opens rel, a slash-separated directory path below the tier, and
// checks the directory it reaches; with create, missing components are
// made (0700). The caller closes the descriptor.
//
// It resolves rel in one openat2 that follows no symlink and cannot leave
// the tier (RESOLVE_NO_SYMLINKS, RESOLVE_BENEATH), and checks only the
// directory reached: that is where the caller creates, renames or
// removes, through this descriptor, whatever the path to it becomes
// meanwhile. Resolving each component with its own openat and fstat cost
// the leader 43% of its processor in a job reading 12,800 small files a
// second (each publish and each removal of a staged copy walks some six
// components of the source's path). Where openat2 fails (a missing
// component, a symlink, a kernel before 5.6 or a seccomp filter without
// it), stepwise resolves rel one component at a time and says which one
// is wrong.
func (tr *Tree) dir(rel string, create bool) (int, error) {
	root, err := tr.root()
	if err != nil {
		return -1, err
	}
	if noOpenat2.Load() {
		return tr.stepwise(root, rel, create)
	}
	fd, err := unix.Openat2(root, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		noOpenat2.Store(true)
	}
	if err != nil {
		return tr.stepwise(root, rel, create)
	}
	path := tr.Path + "/" + rel
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if err := untrusted(path, &st, unix.S_IFDIR, tr.uid); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// noOpenat2 is set once openat2 was refused (ENOSYS, or EPERM from a
// seccomp filter): dir then goes stepwise.
var noOpenat2 atomic.Bool

// stepwise is dir one component at a time, each opened with O_NOFOLLOW
// from its checked parent (root, the tier's descriptor, first) and checked
// in turn.
func (tr *Tree) stepwise(root int, rel string, create bool) (int, error) {
	cur := root
	path := tr.Path
	for _, name := range strings.Split(rel, "/") {
		path += "/" + name
		if create {
			if err := unix.Mkdirat(cur, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
				closeSub(tr, cur)
				return -1, &os.PathError{Op: "mkdir", Path: path, Err: err}
			}
		}
		fd, _, err := openDirAt(cur, name, path)
		closeSub(tr, cur)
		if err != nil {
			return -1, err
		}
		cur = fd
	}
	return cur, nil
}

// closeSub closes a descriptor dir opened, never the tier's own.
func closeSub(tr *Tree, fd int) {
	if fd != tr.fd {
		unix.Close(fd)
	}
}

// openDirAt opens name (relative to dirfd) as a directory without
// following a symlink, and checks it; path names it in messages.
func openDirAt(dirfd int, name, path string) (int, *unix.Stat_t, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		var st unix.Stat_t
		if (errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)) &&
			unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			return -1, nil, Untrusted(path, &st, unix.S_IFDIR)
		}
		return -1, nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if err := Untrusted(path, &st, unix.S_IFDIR); err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	return fd, &st, nil
}

// OpenDir opens name (relative to dirfd; path names it in messages) as a
// directory, without following a symlink, and checks that it is the
// user's and that no one else may write it (Untrusted). The caller
// closes the descriptor.
func OpenDir(dirfd int, name, path string) (int, error) {
	fd, _, err := openDirAt(dirfd, name, path)
	return fd, err
}

// UntrustedAbove says why a directory above path lets someone but this
// user and root change what path leads to, as the data plane asks of a
// tier's (intercept.c, sealed): each must be a directory, not a symbolic
// link, root's or the user's, and sticky if others may write it (/tmp,
// /dev/shm). It returns nil when none does. Only root or the user can
// change such a directory's owner or mode, so what it says holds until
// one of them does.
func UntrustedAbove(path string) error {
	you := uint32(os.Geteuid())
	for dir := filepath.Dir(filepath.Clean(path)); ; dir = filepath.Dir(dir) {
		var st unix.Stat_t
		if err := unix.Lstat(dir, &st); err != nil {
			return &os.PathError{Op: "lstat", Path: dir, Err: err}
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return untrusted(dir, &st, unix.S_IFDIR, you)
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return &UnsafeError{Path: dir, Why: "is not a directory"}
		case st.Uid != 0 && st.Uid != you:
			return &UnsafeError{Path: dir, Why: fmt.Sprintf("is owned by uid %d%s, neither you (uid %d%s) nor root: its owner could replace what lies below it",
				st.Uid, userName(st.Uid), you, userName(you))}
		case st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0:
			return &UnsafeError{Path: dir, Why: fmt.Sprintf("is writable by group or others and not sticky (mode %04o): they could replace what lies below it",
				st.Mode&0o7777)}
		}
		if dir == "/" {
			return nil
		}
	}
}

// Untrusted says why path, whose lstat or fstat is st, is not something
// augur may trust as a kind (unix.S_IFDIR, unix.S_IFREG) of its own:
// a symlink, another kind, another user's, or writable by group or
// others. It returns nil for a trusted path.
func Untrusted(path string, st *unix.Stat_t, kind uint32) error {
	return untrusted(path, st, kind, uint32(os.Geteuid()))
}

// untrusted is Untrusted for user you. A Tree passes the tier's owner,
// whom Open found to be this user: a system call fewer for each
// directory a copy is published or removed in.
func untrusted(path string, st *unix.Stat_t, kind, you uint32) error {
	// who looks the owner's name up: only for a message.
	who := func() string {
		return fmt.Sprintf("owner uid %d%s, mode %04o", st.Uid, userName(st.Uid), st.Mode&0o7777)
	}
	var why string
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		target, _ := os.Readlink(path)
		why = fmt.Sprintf("is a symbolic link to %s (%s)", target, who())
	case st.Mode&unix.S_IFMT != kind:
		why = fmt.Sprintf("is not a %s (%s)", kindName(kind), who())
	case st.Uid != you:
		why = fmt.Sprintf("is owned by uid %d%s, not by you (uid %d%s); mode %04o",
			st.Uid, userName(st.Uid), you, userName(you), st.Mode&0o7777)
	case st.Mode&0o022 != 0:
		why = fmt.Sprintf("is writable by group or others (%s)", who())
	default:
		return nil
	}
	return &UnsafeError{Path: path, Why: why}
}

func kindName(kind uint32) string {
	if kind == unix.S_IFDIR {
		return "directory"
	}
	return "regular file"
}

// userName is " (name)" for a uid with a name, else "".
func userName(uid uint32) string {
	if u, err := user.LookupId(fmt.Sprint(uid)); err == nil {
		return " (" + u.Username + ")"
	}
	return ""
}
