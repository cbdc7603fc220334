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

// sameFile says whether two stats of a source describe the same file,
// unchanged: device, inode, size, mtime and ctime.
func sameFile(a, b *unix.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Size == b.Size && a.Mtim == b.Mtim && a.Ctim == b.Ctim
}
