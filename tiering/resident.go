package tiering

import (
	"errors"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentProbe bounds the bytes Resident maps and asks about.
const residentProbe = 1 << 20

// Resident says whether the first bytes of f (up to size, at most a
// MiB), just read through it, are in the kernel's page cache: whether the
// filesystem's client keeps what it reads there. A FUSE mount with
// direct I/O does not, nor an NFS mount with forcedirectio; Lustre's and
// NFS's usual clients do. A filesystem whose file cannot be mapped is
// said not to (errors are not the caller's concern: the answer is the
// safe one). Read f without O_DIRECT first.
func Resident(f *os.File, size int64) bool {
	n := int(min(size, residentProbe))
	if n <= 0 {
		return false
	}
	fd := int(f.Fd())
	m, err := unix.Mmap(fd, 0, n, unix.PROT_READ, unix.MAP_SHARED)
	if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.EINVAL) {
		// A FUSE file open with direct I/O maps only privately.
		m, err = unix.Mmap(fd, 0, n, unix.PROT_READ, unix.MAP_PRIVATE)
	}
	if err != nil {
		return false
	}
	defer unix.Munmap(m)
	vec := make([]byte, (n+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(n), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return false
	}
	for _, v := range vec {
		if v&1 == 0 {
			return false
		}
	}
	return true
}
