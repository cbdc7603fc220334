package seed

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Samples inside large files. A map-style dataset whose samples are
// ranges of a few large files (an HDF5 dataset read f['x'][i], fixed-size
// records behind a header read with np.fromfile or pread, a ConcatDataset
// of one such dataset per file) gives its sampler indices that stand for
// ranges, not files. The commonest such layout is fixed records: the
// files in sorted order, each past a header of the same size, cut into
// records of one size; sample i is the i-th record over all of them. Its
// whole map follows from the record size, the header and the files'
// sizes, and a few reads of samples tell all three (Records).

// Records is a layout of fixed-size records in files: each file holds
// Counts[f] records of Stride bytes from byte Header on. With Group > 1 a
// sample is Group records in a row (CosmoFlow reads shuffled groups of
// contiguous samples: its sampler's indices are the groups').
type Records struct {
	Files  []string // absolute paths, in the dataset's order
	Header int64
	Stride int64
	Counts []int
	Group  int   // records per sample; 1 unless grouped
	first  []int // the index of each file's first record; one more: the count
}

// NewRecords is the layout of records of stride bytes past header in the
// files of the sizes given, in that order: each holds as many whole
// records as fit.
func NewRecords(files []string, sizes []int64, header, stride int64) (*Records, error) {
	if len(files) == 0 || len(files) != len(sizes) || header < 0 || stride <= 0 {
		return nil, fmt.Errorf("%w: records of %d bytes past %d in %d files", ErrSpec, stride, header, len(files))
	}
	r := &Records{Files: files, Header: header, Stride: stride, Counts: make([]int, len(files)), Group: 1,
		first: make([]int, len(files)+1)}
	for i, s := range sizes {
		if s > header {
			r.Counts[i] = int((s - header) / stride)
		}
		r.first[i+1] = r.first[i] + r.Counts[i]
	}
	if r.Len() == 0 {
		return nil, fmt.Errorf("%w: no record of %d bytes past %d fits in the files", ErrSpec, stride, header)
	}
	return r, nil
}

// Grouped is r with samples of group records in a row.
func (r *Records) Grouped(group int) *Records {
	g := *r
	g.Group = group
	return &g
}

// Len is the number of samples.
func (r *Records) Len() int { return r.first[len(r.Counts)] / r.Group }

// Range is where sample i lies: its file (an index of Files), offset and
// length (a group of records may run into the next file: only the part
// in the first is given).
func (r *Records) Range(i int) (file int, off, n int64) {
	rec := i * r.Group
	f := sort.Search(len(r.Counts), func(k int) bool { return r.first[k+1] > rec })
	k := min(r.Group, r.first[f+1]-rec)
	return f, r.Header + int64(rec-r.first[f])*r.Stride, int64(k) * r.Stride
}

// Index is the sample a read of n bytes at off of file f is part of, if
// it reads one record whole.
func (r *Records) Index(f int, off, n int64) (int, bool) {
	rec, ok := r.record(f, off, n)
	return rec / r.Group, ok
}

// record is the record a read of n bytes at off of file f reads whole.
func (r *Records) record(f int, off, n int64) (int, bool) {
	if f < 0 || f >= len(r.Counts) || n != r.Stride || off < r.Header || (off-r.Header)%r.Stride != 0 {
		return 0, false
	}
	j := int((off - r.Header) / r.Stride)
	if j >= r.Counts[f] {
		return 0, false
	}
	return r.first[f] + j, true
}

// SampleRead is one read of a dataset file: the process that read it,
// the file's index in the files of the dataset's directory, where and
// how much.
type SampleRead struct {
	Reader    int
	File      int
	Off, Size int64
}

// Errors of RecordLayouts.
var (
	// ErrNoStride: too few reads of one size to take it for a sample's.
	ErrNoStride = errors.New("seed: no read size repeats enough to be a sample's")
)

// MinRecordReads is how many reads of one size RecordLayouts needs to
// take that size for a record's.
const MinRecordReads = MinSeen

// maxCounts bounds the record counts RecordLayouts tries per layout.
const maxCounts = 256

// RecordLayouts are the fixed-record layouts of files (sorted, with their
// sizes) that the reads seen fit, likeliest first. The commonest read
// size is the record's and the commonest offset modulo it says where
// records may begin. The other reads (an HDF5 file's metadata, another
// dataset of the same file) bound them: the records begin past every
// such read that comes before the first record read in its file, and
// end before every one that comes after the last. Every file holds the
// same count of records (a ConcatDataset of one dataset per file), at
// least one more than the highest read, as many as fit at most: one
// layout per count, the files' whole room first, then from the least.
func RecordLayouts(files []string, sizes []int64, reads []SampleRead) ([]*Records, error) {
	stride, ok := commonest(reads, func(r SampleRead) (int64, bool) { return r.Size, r.Size >= 512 })
	if !ok {
		return nil, ErrNoStride
	}
	rem, _ := commonest(reads, func(r SampleRead) (int64, bool) { return r.Off % stride, r.Size == stride })
	onGrid := func(r SampleRead) bool { return r.Size == stride && r.Off%stride == rem }
	header, last, room := recordBounds(files, sizes, reads, stride, rem, onGrid)
	lo, hi := last+1, room
	if lo > hi {
		return nil, nil // the reads fall on no layout of fixed records
	}
	counts := []int{hi}
	for n := lo; n < hi && len(counts) < maxCounts; n++ {
		counts = append(counts, n)
	}
	var out []*Records
	for _, n := range counts {
		r := newRecordsOf(files, sizes, header, stride, n)
		if g := r.groupOf(reads); g > 1 {
			out = append(out, r.Grouped(g)) // the likelier: its readers read runs of g
		}
		out = append(out, r)
	}
	return out, nil
}

// recordBounds is where the records begin (the first offset of the grid
// of stride at rem past every read off it before the first read on it, in
// any file), the highest record index read within a file, and the most
// records that fit in every file read (before any read off the grid after
// the records begin, and within the file).
func recordBounds(files []string, sizes []int64, reads []SampleRead, stride, rem int64, onGrid func(SampleRead) bool) (header int64, last, room int) {
	first := map[int]int64{} // per file, the first record's offset read
	for _, r := range reads {
		if onGrid(r) && r.File >= 0 && r.File < len(files) {
			if f, ok := first[r.File]; !ok || r.Off < f {
				first[r.File] = r.Off
			}
		}
	}
	header = rem
	for _, r := range reads {
		if f, ok := first[r.File]; ok && !onGrid(r) && r.Off < f && r.Off+r.Size > header {
			header = r.Off + r.Size
		}
	}
	header = rem + (header-rem+stride-1)/stride*stride // the grid point at or past it
	room = math.MaxInt
	for f := range first {
		end := sizes[f]
		for _, r := range reads {
			if r.File == f && !onGrid(r) && r.Off >= header && r.Off < end {
				end = r.Off
			}
		}
		room = min(room, int(max(end-header, 0)/stride))
	}
	last = -1
	for _, r := range reads {
		if onGrid(r) && r.Off >= header {
			last = max(last, int((r.Off-header)/stride))
		}
	}
	return header, last, room
}

// newRecordsOf is the layout of n records (as many as fit, if fewer) of
// stride bytes past header in each of files.
func newRecordsOf(files []string, sizes []int64, header, stride int64, n int) *Records {
	r := &Records{Files: files, Header: header, Stride: stride, Counts: make([]int, len(files)), Group: 1,
		first: make([]int, len(files)+1)}
	for i, s := range sizes {
		r.Counts[i] = min(n, int(max(s-header, 0)/stride))
		r.first[i+1] = r.first[i] + r.Counts[i]
	}
	return r
}

// minGroups is how many whole runs of one length groupOf needs to take
// that length for a group's.
const minGroups = 2

// run is records [start, start+n) read in a row by one reader.
type run struct{ start, n int }

// runs are the runs of records in a row each reader read, but its last.
func (r *Records) runs(reads []SampleRead) []run {
	var out []run
	last := map[int]*run{}
	for _, rd := range reads {
		rec, ok := r.record(rd.File, rd.Off, rd.Size)
		if !ok {
			continue
		}
		cur := last[rd.Reader]
		if cur != nil && rec == cur.start+cur.n {
			cur.n++
			continue
		}
		if cur != nil {
			out = append(out, *cur)
		}
		last[rd.Reader] = &run{start: rec, n: 1}
	}
	return out
}

// groupOf is the length of the runs of records in a row that the readers
// read, when they are groups of one length beginning at multiples of it
// (shuffled groups of contiguous samples), else 1. A run may lack its
// first records (the first reads of a file come before the leader asks
// for them), but ends at its group's end; at least minGroups runs, and
// half of them, must be such.
func (r *Records) groupOf(reads []SampleRead) int {
	runs := r.runs(reads)
	tried := map[int]bool{}
	g, best := 1, 0
	for _, ru := range runs {
		for _, c := range []int{ru.n, ru.n + 1, ru.n + 2} {
			if c < 2 || tried[c] {
				continue
			}
			tried[c] = true
			score := 0
			for _, x := range runs {
				if end := x.start + x.n; x.n >= 2 && end%c == 0 && x.start/c == (end-1)/c && 2*x.n >= c {
					score++
				}
			}
			if score > best || score == best && c > g {
				g, best = c, score
			}
		}
	}
	if best < minGroups || 2*best < len(runs) {
		return 1
	}
	return g
}

// commonest is the value key gives most reads (among those it keeps),
// if MinRecordReads reads have it.
func commonest(reads []SampleRead, key func(SampleRead) (int64, bool)) (int64, bool) {
	count := map[int64]int{}
	best, n := int64(0), 0
	for _, r := range reads {
		k, ok := key(r)
		if !ok {
			continue
		}
		count[k]++
		if c := count[k]; c > n || c == n && k < best {
			best, n = k, c
		}
	}
	return best, n >= MinRecordReads
}
