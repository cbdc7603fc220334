package tiering

import (
	"errors"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// entry is something that is not a directory, met by walk below a tier.
// dirfd is the checked directory holding it, valid only during the call.
type entry struct {
	dirfd int
	name  string
	rel   string // its path relative to the tier (files/pfs@/a.jpg)
	st    unix.Stat_t
}

// walk visits everything below rel, a directory of the tier, depth
// first: each non-directory through file, and, when dirDone is set, each
// directory after its contents (its entry's dirfd is its parent's, to
// remove it). Every directory is opened from its checked parent with
// O_NOFOLLOW and checked before it is entered; one that fails (another
// user's, a symlink swapped in meanwhile) is reported to onErr and left
// alone, and so is everything below it.
func (tr *Tree) walk(rel string, file, dirDone func(*entry), onErr func(error)) {
	fd, err := tr.dir(rel, false)
	if err != nil {
		if !errors.Is(err, unix.ENOENT) {
			onErr(err)
		}
		return
	}
	tr.walkFD(fd, rel, file, dirDone, onErr)
}

// enterHook, when set (by tests), runs before walk enters a directory:
// it can swap the directory for a symlink at the worst moment.
var enterHook func(rel string)

// walkFD walks the checked directory fd (at rel) and closes it.
func (tr *Tree) walkFD(fd int, rel string, file, dirDone func(*entry), onErr func(error)) {
	d := os.NewFile(uintptr(fd), tr.Path+"/"+rel)
	defer d.Close()
	names, err := d.Readdirnames(-1) // names only: every stat below is fstatat
	if err != nil {
		onErr(err)
	}
	for _, name := range names {
		e := entry{dirfd: fd, name: name, rel: path.Join(rel, name)}
		if err := unix.Fstatat(fd, name, &e.st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if !errors.Is(err, unix.ENOENT) { // removed meanwhile: nothing to visit
				onErr(&os.PathError{Op: "stat", Path: tr.Path + "/" + e.rel, Err: err})
			}
			continue
		}
		if e.st.Mode&unix.S_IFMT != unix.S_IFDIR {
			file(&e)
			continue
		}
		if enterHook != nil {
			enterHook(e.rel)
		}
		sub, _, err := openDirAt(fd, name, tr.Path+"/"+e.rel)
		if err != nil {
			onErr(err)
			continue
		}
		tr.walkFD(sub, e.rel, file, dirDone, onErr)
		if dirDone != nil {
			dirDone(&e)
		}
	}
}

// Clear removes every copy, blocks file and temporary file of the tier. The caller
// must hold its Lock.
func (tr *Tree) Clear() error {
	var first error
	onErr := func(err error) {
		if first == nil {
			first = err
		}
	}
	remove := func(flags int) func(*entry) {
		return func(e *entry) {
			if err := unix.Unlinkat(e.dirfd, e.name, flags); err != nil && !errors.Is(err, unix.ENOENT) {
				onErr(&os.PathError{Op: "remove", Path: tr.Path + "/" + e.rel, Err: err})
			}
		}
	}
	for _, d := range []string{filesDir, blocksDir, tmpDir, TrashDir} {
		tr.walk(d, remove(0), remove(unix.AT_REMOVEDIR), onErr)
	}
	return first
}
