package tiering

import (
	"golang.org/x/sys/unix"
)

// Tier is one node-local level of the storage hierarchy.
type Tier struct {
	Path     string // directory holding files/, tmp/ and lock
	Capacity int64  // bytes of copies it may hold
	Threads  int    // copy workers writing into it
	Fsync    bool   // fsync copies before publishing (disk tiers)
}

// IsTmpfs reports whether dir is on a RAM-backed filesystem, where fsync
// buys nothing.
func IsTmpfs(dir string) bool {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return false
	}
	return fs.Type == unix.TMPFS_MAGIC || fs.Type == unix.RAMFS_MAGIC
}

// fresh says whether a copy still matches its source.
func fresh(copy, src *unix.Stat_t) bool {
	return copy.Size == src.Size && copy.Mtim == src.Mtim
}
