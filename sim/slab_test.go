package sim

import "testing"

// A large slab is mapped by its pages, zero and writable, and gone from
// them once freed; a small one is Go's.
func TestSlabMapped(t *testing.T) {
	var p pages
	small := slab[int32](&p, 1000)
	if len(small) != 1000 || len(p.maps) != 0 {
		t.Fatalf("a small slab: %d ints, %d mappings; want 1000 from Go's heap", len(small), len(p.maps))
	}
	n := hugeMin/12 + 1
	s := slab[file](&p, n)
	if len(s) != n || len(p.maps) != 1 || len(p.maps[0]) != n*12 {
		t.Fatalf("a large slab: %d files, %d mappings; want %d files in one of %d bytes", len(s), len(p.maps), n, n*12)
	}
	for k := range s {
		if s[k] != (file{}) {
			t.Fatalf("file %d of a new slab is %+v, not zero", k, s[k])
		}
		s[k].setLand(float64(k))
	}
	if s[n-1].land() != float64(n-1) {
		t.Fatalf("the slab's last file lands at %v, not %d", s[n-1].land(), n-1)
	}
	p.free()
	if len(p.maps) != 0 {
		t.Fatalf("%d mappings left after free", len(p.maps))
	}
}

// An arena's slices are its slab's, one after another, each capped at its
// length (an append cannot reach the next), and one larger than a slab gets a slab of its own.
func TestArenaTakes(t *testing.T) {
	var p pages
	defer p.free()
	a := arena[int16]{p: &p}
	x, y := a.take(3), a.take(5)
	if len(x) != 3 || cap(x) != 3 || len(y) != 5 || &x[0] == &y[0] {
		t.Fatalf("take(3), take(5): len %d cap %d, len %d, same start %v", len(x), cap(x), len(y), &x[0] == &y[0])
	}
	big := a.take(arenaSlab) // arenaSlab int16s: twice a slab's bytes
	if len(big) != arenaSlab || len(p.maps) != 2 {
		t.Fatalf("a take beyond a slab: %d elements, %d mappings; want %d in a second", len(big), len(p.maps), arenaSlab)
	}
	big[len(big)-1] = 1
	c := a.clone([]int16{4, 5, 6})
	if len(c) != 3 || c[0] != 4 || c[2] != 6 || &c[0] == &big[0] {
		t.Fatalf("clone of [4 5 6]: %v", c)
	}
}
