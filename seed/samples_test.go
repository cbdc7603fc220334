package seed

import (
	"errors"
	"testing"
)

func TestRecordsRangeAndIndex(t *testing.T) {
	r, err := NewRecords([]string{"/d/a", "/d/b"}, []int64{100 + 3*10 + 7, 100 + 2*10}, 100, 10)
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 5 {
		t.Fatalf("Len %d, want 5 (3 whole records in a, 2 in b)", r.Len())
	}
	for i := 0; i < r.Len(); i++ {
		f, off, n := r.Range(i)
		if j, ok := r.Index(f, off, n); !ok || j != i {
			t.Errorf("Index(Range(%d)) = %d, %v", i, j, ok)
		}
	}
	if f, off, _ := r.Range(3); f != 1 || off != 100 {
		t.Errorf("sample 3 at file %d offset %d, want b's first record (1, 100)", f, off)
	}
	for _, bad := range [][3]int64{{0, 130, 10}, {0, 105, 10}, {0, 100, 9}, {1, 120, 10}, {2, 100, 10}, {0, 90, 10}} {
		if _, ok := r.Index(int(bad[0]), bad[1], bad[2]); ok {
			t.Errorf("Index(%v) is a sample", bad)
		}
	}
}

// The layout of make bench's records (8 files of 64 records of 1 MiB
// past 2148 bytes) is found from 16 of its samples read in a shuffled
// order, among a few small reads of headers.
func TestRecordLayoutsFindsTheRecords(t *testing.T) {
	const header, size, per = 2148, 1 << 20, 64
	files, sizes := make([]string, 8), make([]int64, 8)
	for i := range files {
		files[i], sizes[i] = "/d/shard-"+string(rune('0'+i)), header+per*size
	}
	var reads []SampleRead
	for _, i := range []int{77, 3, 400, 511, 128, 64, 9, 300, 255, 256, 0, 63, 200, 450, 33, 101} {
		reads = append(reads, SampleRead{File: i / per, Off: header + int64(i%per)*size, Size: size})
		reads = append(reads, SampleRead{File: i / per, Off: 0, Size: 96}) // a header's read
	}
	got, err := RecordLayouts(files, sizes, reads)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Header() != header || got[0].Stride != size || got[0].Len() != 512 {
		t.Fatalf("layouts %+v; want one: header %d, records of %d, 512 of them", got, header, size)
	}
	if _, err := RecordLayouts(files, sizes, reads[:10]); !errors.Is(err, ErrNoStride) {
		t.Errorf("5 samples' reads: %v, want ErrNoStride", err)
	}
}

// Two readers reading shuffled groups of 4 contiguous records each, in
// turn: the grouped layout comes first.
func TestRecordLayoutsFindsGroups(t *testing.T) {
	const size = 4096
	files, sizes := []string{"/d/a", "/d/b"}, []int64{64 * size, 64 * size}
	var reads []SampleRead
	for k, g := range []int{5, 30, 2, 17, 11, 0, 24, 9} {
		for j := 0; j < 4; j++ {
			rec := 4*g + j
			reads = append(reads, SampleRead{Reader: k % 2, File: rec / 64, Off: int64(rec%64) * size, Size: size})
		}
	}
	got, err := RecordLayouts(files, sizes, reads)
	if err != nil || len(got) == 0 {
		t.Fatalf("layouts %v, %v", got, err)
	}
	if got[0].Group != 4 || got[0].Len() != 32 {
		t.Fatalf("first layout: groups of %d, %d samples; want 4, 32", got[0].Group, got[0].Len())
	}
	if f, off, n := got[0].Range(17); f != 1 || off != 4*size || n != 4*size {
		t.Errorf("group 17 at (%d, %d, %d), want (1, %d, %d)", f, off, n, 4*size, 4*size)
	}
	if i, ok := got[0].Index(1, 6*size, size); !ok || i != 17 {
		t.Errorf("record 70 is in group %d, %v; want 17", i, ok)
	}
}

// A chunked HDF5 dataset as h5py writes it: a chunk per sample from past
// the root node of the chunk index, two nodes after chunk 64 and one after
// chunk 121; the reads of the index's nodes cut the records into runs,
// and until every node among them was read the runs do not add up.
func TestRecordLayoutsRunsBetweenNodes(t *testing.T) {
	const chunk, node, first = 65536, 3656, 10491464
	at := func(i int) int64 {
		o := int64(first) + int64(i)*chunk
		if i >= 65 {
			o += 2 * node
		}
		if i >= 122 {
			o += node
		}
		return o
	}
	size := at(159) + chunk
	meta := []SampleRead{{Off: 0, Size: 1400}, {Off: first - node, Size: node}, {Off: at(64) + chunk + node, Size: node}}
	var reads []SampleRead
	for _, i := range []int{3, 70, 130, 5, 99, 150, 12, 64, 65, 121, 122, 159, 40, 88, 140, 7, 111, 33} {
		reads = append(reads, SampleRead{Off: at(i), Size: chunk})
	}
	if _, err := RecordLayouts([]string{"/d/a.h5"}, []int64{size}, append(meta, reads...)); !errors.Is(err, ErrUnsettled) {
		t.Fatalf("with a node among the chunks not read: %v, want ErrUnsettled", err)
	}
	meta = append(meta, SampleRead{Off: at(64) + chunk, Size: node}, SampleRead{Off: at(121) + chunk, Size: node})
	got, err := RecordLayouts([]string{"/d/a.h5"}, []int64{size}, append(meta, reads...))
	if err != nil || len(got) == 0 {
		t.Fatalf("layouts %v, %v", got, err)
	}
	r := got[0]
	if r.Len() != 160 || len(r.Segs[0]) != 3 {
		t.Fatalf("%d samples in %d runs, want 160 in 3", r.Len(), len(r.Segs[0]))
	}
	for _, i := range []int{0, 64, 65, 121, 122, 159} {
		if j, ok := r.Index(0, at(i), chunk); !ok || j != i {
			t.Errorf("chunk %d at %d: sample %d, %v", i, at(i), j, ok)
		}
		if f, off, n := r.Range(i); f != 0 || off != at(i) || n != chunk {
			t.Errorf("Range(%d) = %d, %d, %d; want 0, %d, %d", i, f, off, n, at(i), chunk)
		}
	}
}
