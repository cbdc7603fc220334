package tiering

import (
	"os"
	"path/filepath"
	"syscall"
)

// Walk calls fn for every regular file under the roots, in sorted order,
// following symlinks as torchvision's ImageFolder does; a directory
// reached twice (a symlink loop) is visited once. Unreadable entries are
// passed to onErr and skipped.
func Walk(roots []string, fn func(path string, size int64), onErr func(error)) {
	seen := map[[2]uint64]bool{}
	for _, r := range roots {
		walkDir(r, seen, fn, onErr)
	}
}

func walkDir(dir string, seen map[[2]uint64]bool, fn func(string, int64), onErr func(error)) {
	info, err := os.Stat(dir)
	if err != nil {
		onErr(err)
		return
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		key := [2]uint64{st.Dev, st.Ino}
		if seen[key] {
			return
		}
		seen[key] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		onErr(err)
		return
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		info, err := os.Stat(p) // follows symlinks
		if err != nil {
			onErr(err)
			continue
		}
		switch {
		case info.IsDir():
			walkDir(p, seen, fn, onErr)
		case info.Mode().IsRegular():
			fn(p, info.Size())
		}
	}
}
