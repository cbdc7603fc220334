package tiering

import (
	"errors"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Usage is what a tier holds.
type Usage struct {
	Bytes int64
	Files int64
}

// Report is the outcome of Validate.
type Report struct {
	Usage
	Stale  int64   // copies removed: source gone or changed, or not a copy of ours
	Errors []error // sources that could not be checked (their copies stay), untrusted directories
}

// statWorkers bounds the concurrent source stats of Validate: each is a
// metadata round trip to the shared filesystem.
const statWorkers = 8

// Validate removes every copy in the tier whose source is gone or
// changed, clears temporary files left by a crashed writer, and reports
// what is left. The caller must hold the tier's Lock.
func (tr *Tree) Validate() Report {
	var rep Report
	remove := func(e *entry) { unix.Unlinkat(e.dirfd, e.name, 0) }
	tr.walk(tmpDir, remove, func(e *entry) { unix.Unlinkat(e.dirfd, e.name, unix.AT_REMOVEDIR) },
		func(err error) { rep.Errors = append(rep.Errors, err) })
	tr.EmptyTrash(nil)
	c := tr.Check()
	c.Errors = append(rep.Errors, c.Errors...)
	return c
}

// Check is Validate without touching the temporary files, for a process
// that does not hold the tier's Lock: a job starting while another job
// writes the tier must still never serve a copy whose source changed since
// that job validated it. Removing a stale copy is safe from any process
// (the data plane does it on every write-open); the writer's copies in
// progress are left alone. Anything under files/ that is not a regular
// file of this user's is no copy of augur's and is removed (a symlink
// only as a link, never its target).
func (tr *Tree) Check() Report {
	type item struct {
		source string
		st     unix.Stat_t
	}
	work := make(chan item)
	var mu sync.Mutex // guards rep
	var rep Report
	onErr := func(err error) {
		mu.Lock()
		rep.Errors = append(rep.Errors, err)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := 0; i < statWorkers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				keep, err := tr.checkCopy(it.source, &it.st)
				mu.Lock()
				switch {
				case err != nil:
					rep.Errors = append(rep.Errors, err)
					fallthrough
				case keep:
					rep.Bytes += it.st.Size
					rep.Files++
				default:
					rep.Stale++
				}
				mu.Unlock()
			}
		}()
	}
	tr.walk(filesDir, func(e *entry) {
		src, ok := sourceOf(e.rel)
		if !ok || Untrusted(tr.Path+"/"+e.rel, &e.st, unix.S_IFREG) != nil {
			if unix.Unlinkat(e.dirfd, e.name, 0) == nil {
				mu.Lock()
				rep.Stale++
				mu.Unlock()
			}
			return
		}
		if tr.Present != nil {
			tr.Present(src)
		}
		work <- item{src, e.st}
	}, nil, onErr)
	close(work)
	wg.Wait()
	return rep
}

// checkCopy decides whether the copy of source (whose stat is cst) stays.
// A copy is removed only when its source is known to be gone or
// different; any other failure keeps it and is reported.
func (tr *Tree) checkCopy(source string, cst *unix.Stat_t) (bool, error) {
	var sst unix.Stat_t
	err := Stat(source, &sst)
	if err != nil && !gone(err) {
		return true, err
	}
	if err == nil && sst.Mode&unix.S_IFMT == unix.S_IFREG && tr.stands(source, cst, &sst) &&
		(tr.Kept == nil || tr.Kept(source, &sst)) {
		return true, nil
	}
	if rerr := tr.Remove(source); rerr != nil && !errors.Is(rerr, unix.ENOENT) {
		return true, rerr
	}
	return false, nil
}

// Remove drops the copy of source, if the tier holds one.
func (tr *Tree) Remove(source string) error {
	dir, leaf, err := copyRel(source)
	if err != nil {
		return err
	}
	fd, err := tr.dir(dir, false)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Unlinkat(fd, leaf, 0); err != nil {
		return &os.PathError{Op: "remove", Path: tr.Path + "/" + dir + "/" + leaf, Err: err}
	}
	return nil
}

// TrashDirXattr names the extended attribute on a subtree in the trash
// that holds the source directory whose copies it held.
const TrashDirXattr = "user.augur.dir"

// EmptyTrash removes what the tier's trash holds (TrashDir), telling
// forget the source and the recorded identity of each copy it removes
// (source "" where the subtree does not say what it held), and returns
// what it removed. Whoever may remove copies may call it.
func (tr *Tree) EmptyTrash(forget func(source string, id Ident)) Usage {
	var u Usage
	origin := map[string]string{} // trash/<name>: the source directory it held
	tr.walk(TrashDir, func(e *entry) {
		if e.st.Mode&unix.S_IFMT == unix.S_IFREG && forget != nil {
			if id, ok := CopyIdent(tr.Path + "/" + e.rel); ok {
				forget(tr.trashSource(e.rel, origin), id)
			}
		}
		if unix.Unlinkat(e.dirfd, e.name, 0) == nil && e.st.Mode&unix.S_IFMT == unix.S_IFREG {
			u.Bytes += e.st.Size
			u.Files++
		}
	}, func(e *entry) { unix.Unlinkat(e.dirfd, e.name, unix.AT_REMOVEDIR) }, func(error) {})
	return u
}

// trashSource is the source of the copy at rel (trash/<name>/a@/b) from
// the directory trash/<name> held (its TrashDirXattr), or "".
func (tr *Tree) trashSource(rel string, origin map[string]string) string {
	parts := strings.SplitN(rel, "/", 3)
	if len(parts) < 3 {
		return ""
	}
	top := parts[0] + "/" + parts[1]
	dir, ok := origin[top]
	if !ok {
		b := make([]byte, 4096)
		if n, err := unix.Lgetxattr(tr.Path+"/"+top, TrashDirXattr, b); err == nil {
			dir = string(b[:n])
		}
		origin[top] = dir
	}
	if dir == "" {
		return ""
	}
	comps := strings.Split(strings.Trim(dir, "/"), "/")
	for i := range comps {
		comps[i] += dirMark
	}
	src, ok := sourceOf(filesDir + "/" + strings.Join(comps, "/") + "/" + parts[2])
	if !ok {
		return ""
	}
	return src
}

// Sources tells fn the source and size of every copy in the tier,
// without checking them.
func (tr *Tree) Sources(fn func(source string, size int64)) {
	tr.walk(filesDir, func(e *entry) {
		if src, ok := sourceOf(e.rel); ok && e.st.Mode&unix.S_IFMT == unix.S_IFREG {
			fn(src, e.st.Size)
		}
	}, nil, func(error) {})
}

// Usage counts the copies in the tier without checking them.
func (tr *Tree) Usage() Usage {
	var u Usage
	tr.walk(filesDir, func(e *entry) {
		if e.st.Mode&unix.S_IFMT == unix.S_IFREG {
			u.Bytes += e.st.Size
			u.Files++
		}
	}, nil, func(error) {})
	return u
}

// Lookup returns the index of the fastest tier holding a fresh copy of
// source, or -1. A nil tree is a tier not in use.
func Lookup(trees []*Tree, source string, src *unix.Stat_t) int {
	for i, tr := range trees {
		var cst unix.Stat_t
		if tr != nil && tr.statCopy(source, &cst) && tr.stands(source, &cst, src) {
			return i
		}
	}
	return -1
}

// LookupPath returns the index of the fastest tier holding a copy of
// source, without comparing it with the source (for copies Validate has
// just checked), or -1. A nil tree is a tier not in use.
func LookupPath(trees []*Tree, source string) int {
	for i, tr := range trees {
		var cst unix.Stat_t
		if tr != nil && tr.statCopy(source, &cst) {
			return i
		}
	}
	return -1
}

// stands says whether tr's copy of source, whose stat is cst, stands for
// the source src describes (Stands, with the identity the copy records).
func (tr *Tree) stands(source string, cst, src *unix.Stat_t) bool {
	p, err := CopyPath(tr.Path, source)
	if err != nil {
		return false
	}
	id, known := CopyIdent(p)
	return Stands(id, known, cst, src)
}

// statCopy stats the copy of source by its path, as the data plane opens
// it, and reports whether it is one the data plane would serve: a regular
// file of this user's that no one else may write. (A read only: a path
// swapped meanwhile can make it answer wrongly, never write elsewhere.)
func (tr *Tree) statCopy(source string, st *unix.Stat_t) bool {
	p, err := CopyPath(tr.Path, source)
	return err == nil && unix.Stat(p, st) == nil && untrusted(p, st, unix.S_IFREG, tr.uid) == nil
}
