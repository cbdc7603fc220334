package tiering

import (
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// statters is how many entries of a directory Walk stats at once: each
// stat is a round trip to the shared filesystem, which serves many at
// once.
const statters = 64

// Walk calls fn for every regular file under the roots, in sorted order,
// with its stat, following symlinks as torchvision's ImageFolder does; a
// directory reached twice (a symlink loop) is visited once. Unreadable
// entries are passed to onErr and skipped.
func Walk(roots []string, fn func(path string, st *unix.Stat_t), onErr func(error)) {
	seen := map[[2]uint64]bool{}
	for _, r := range roots {
		var st unix.Stat_t
		if err := Stat(r, &st); err != nil {
			onErr(&os.PathError{Op: "stat", Path: r, Err: err})
			continue
		}
		walkDir(r, &st, seen, fn, onErr)
	}
}

func walkDir(dir string, st *unix.Stat_t, seen map[[2]uint64]bool, fn func(string, *unix.Stat_t), onErr func(error)) {
	key := [2]uint64{st.Dev, st.Ino}
	if seen[key] {
		return
	}
	seen[key] = true
	entries, err := os.ReadDir(dir)
	if err != nil {
		onErr(err)
		return
	}
	sts, errs := statAll(dir, entries)
	for i, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch {
		case errs[i] != nil:
			onErr(&os.PathError{Op: "stat", Path: p, Err: errs[i]})
		case sts[i].Mode&unix.S_IFMT == unix.S_IFDIR:
			walkDir(p, &sts[i], seen, fn, onErr)
		case sts[i].Mode&unix.S_IFMT == unix.S_IFREG:
			fn(p, &sts[i])
		}
	}
}

// statAll stats the entries of dir (following symlinks), statters at a
// time.
func statAll(dir string, entries []os.DirEntry) ([]unix.Stat_t, []error) {
	sts := make([]unix.Stat_t, len(entries))
	errs := make([]error, len(entries))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(statters, len(entries)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = Stat(filepath.Join(dir, entries[i].Name()), &sts[i])
			}
		}()
	}
	for i := range entries {
		next <- i
	}
	close(next)
	wg.Wait()
	return sts, errs
}
