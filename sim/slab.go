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
// 72.7 s with them, 79.5 s without). Go asks for none itself. The job's
// arrays, read in order, gain in their first touch: a page fault is dear
// in this machine's VM (the host backs the page then), and a huge page
// is one fault where small ones are 512 (the setup of 1024 x 90: 50,000
// faults rather than 650,000, 0.8-3.4 s of system time rather than
// 5.7-8.6 s). Where the kernel refuses, s is as it was: only slower.
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

// arena cuts many slices from few slabs: each node's lists are hundreds
// of kilobytes at scale, a gigabyte in all, and made one by one they
// would be faulted in a small page at a time (see huge).
type arena[T any] struct{ free []T }

// arenaSlab is the size of an arena's slabs, in bytes.
const arenaSlab = 32 << 20

// take is a new slice of n Ts, zero where the arena's slab is new.
func (a *arena[T]) take(n int) []T {
	if n > len(a.free) {
		var t T
		a.free = slab[T](max(n, arenaSlab/int(unsafe.Sizeof(t))))
	}
	s := a.free[:n:n]
	a.free = a.free[n:]
	return s
}
