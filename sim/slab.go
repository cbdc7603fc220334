package sim

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// slab makes one slice of n T to be cut into many nodes' arrays: one
// allocation rather than one per node, in huge pages where it is large.
func slab[T any](n int) []T {
	s := make([]T, n)
	huge(s)
	return s
}

// hugeMin is the size from which a slab asks for huge pages.
const hugeMin = 8 << 20

// huge asks the kernel to back s with huge pages (transparent huge pages,
// madvise mode, Debian's default): the policies' file state is gigabytes
// at scale, read at random, one node's part after another's, and a miss
// of the TLB costs more than the cache miss it comes with (1024 x 90 in
// 72.7 s with them, 79.5 s without). Go asks for none itself. They cost
// their first touch where the host's memory is fragmented (the kernel
// compacts it), so the slabs read in order (the job's reads) do without.
// Where the kernel refuses, s is as it was: only slower.
func huge[T any](s []T) {
	var t T
	n := uintptr(len(s)) * unsafe.Sizeof(t)
	if n < hugeMin {
		return
	}
	const page = 4096
	start := unsafe.Pointer(unsafe.SliceData(s))
	p := uintptr(start)
	from, to := (p+page-1)&^(page-1), (p+n)&^(page-1)
	_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(start, from-p)), to-from), unix.MADV_HUGEPAGE)
}
