package sim

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pages is the memory of a job's large arrays (its reads, the nodes'
// lists, the policies' file state), mapped from the kernel outside Go's
// heap and unmapped all at once when the job is done (free).
//
// Why not Go's heap: a page fault is dear in this machine's VM (the host
// backs the page then), a huge page is one fault where small ones are 512,
// and Go asks for none itself. The kernel gives huge pages only to memory
// that asked for them (transparent huge pages, madvise mode, Debian's
// default) before its first touch, and Go zeroes a large allocation made
// of pages its heap used before (the setup's garbage) as it hands it out,
// first, in small pages. Mapped here, an array is zero without a write and
// asks before it is touched. The policies' file state is gigabytes at
// scale, read at random, one node's part after another's, where a miss of
// the TLB costs more than the cache miss it comes with (1024 x 90 in
// 72.7 s with huge pages, 79.5 s without); the job's arrays, read in
// order, gain in their first touch.
type pages struct {
	mu   sync.Mutex
	maps [][]byte
}

// hugeMin is the size from which an array is mapped in huge pages; a
// smaller one is made in Go's heap.
const hugeMin = 8 << 20

// slab is n zero Ts, one allocation to be cut into many nodes' arrays,
// mapped by p where it is large. T holds no pointer: the garbage collector
// does not look into p's memory. Where the kernel refuses the mapping, the
// slice is made in Go's heap (only slower).
func slab[T any](p *pages, n int) []T {
	var t T
	size := n * int(unsafe.Sizeof(t))
	if size < hugeMin {
		return make([]T, n)
	}
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]T, n)
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	p.mu.Lock()
	p.maps = append(p.maps, b)
	p.mu.Unlock()
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// free unmaps every slab of p: nothing may use them after.
func (p *pages) free() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.maps {
		_ = unix.Munmap(b)
	}
	p.maps = nil
}

// arena cuts many slices from few slabs of p: each node's lists are
// hundreds of kilobytes at scale, a gigabyte in all, and made one by one
// in Go's heap they would be faulted in a small page at a time.
type arena[T any] struct {
	p    *pages
	free []T
}

// arenaSlab is the size of an arena's slabs, in bytes.
const arenaSlab = 32 << 20

// take is a new slice of n zero Ts.
func (a *arena[T]) take(n int) []T {
	if n > len(a.free) {
		var t T
		a.free = slab[T](a.p, max(n, arenaSlab/int(unsafe.Sizeof(t))))
	}
	s := a.free[:n:n]
	a.free = a.free[n:]
	return s
}

// clone is a copy of s in the arena.
func (a *arena[T]) clone(s []T) []T {
	c := a.take(len(s))
	copy(c, s)
	return c
}
