package tiering

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
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

// ReadAhead is the read-ahead window of the filesystem on device dev, in
// bytes (/sys/class/bdi/MAJ:MIN/read_ahead_kb): what its client fetches
// ahead of a sequential reader, in one request where the window is not
// larger than its largest request. 0 where the kernel tells none (the
// filesystem has no bdi there, or reads ahead on its own, as Lustre's
// client does).
func ReadAhead(dev uint64) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(dev), unix.Minor(dev)))
	if err != nil {
		return 0
	}
	kb, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || kb < 0 {
		return 0
	}
	return kb << 10
}
