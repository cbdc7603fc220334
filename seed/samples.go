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
// whole map follows from the record size, where the records lie and the
// files' sizes, and a few reads of samples tell all three (Records).

// Records is a layout of fixed-size records in files: each file holds
// its records of Stride bytes in runs (Segs: where each run begins, how
// many records it holds), Counts[f] in all: one run past a header in a
// file of records or an HDF5 contiguous dataset, several in a chunked one
// (h5py puts the chunk index's nodes among the chunks). With Group > 1 a
// sample is Group records in a row (CosmoFlow reads shuffled groups of
// contiguous samples: its sampler's indices are the groups').
type Records struct {
	Files  []string // absolute paths, in the dataset's order
	Stride int64
	Segs   [][]Seg
	Counts []int
	Group  int   // records per sample; 1 unless grouped
	first  []int // the index of each file's first record; one more: the count
}

// Seg is a run of N records in a row from byte At.
type Seg struct {
	At int64
	N  int
}

// NewRecords is the layout of records of stride bytes past header in the
// files of the sizes given, in that order: each holds as many whole
// records as fit.
func NewRecords(files []string, sizes []int64, header, stride int64) (*Records, error) {
	if len(files) == 0 || len(files) != len(sizes) || header < 0 || stride <= 0 {
		return nil, fmt.Errorf("%w: records of %d bytes past %d in %d files", ErrSpec, stride, header, len(files))
	}
	segs := make([][]Seg, len(files))
	for i, s := range sizes {
		segs[i] = []Seg{{At: header, N: int(max(s-header, 0) / stride)}}
	}
	r := newRecords(files, stride, segs)
	if r.Len() == 0 {
		return nil, fmt.Errorf("%w: no record of %d bytes past %d fits in the files", ErrSpec, stride, header)
	}
	return r, nil
}

// newRecords is the layout of records of stride bytes in the runs segs.
func newRecords(files []string, stride int64, segs [][]Seg) *Records {
	r := &Records{Files: files, Stride: stride, Segs: segs, Counts: make([]int, len(files)), Group: 1,
		first: make([]int, len(files)+1)}
	for f, ss := range segs {
		for _, sg := range ss {
			r.Counts[f] += sg.N
		}
		r.first[f+1] = r.first[f] + r.Counts[f]
	}
	return r
}

// Header is where the first file's records begin.
func (r *Records) Header() int64 { return r.Segs[0][0].At }

// Grouped is r with samples of group records in a row.
func (r *Records) Grouped(group int) *Records {
	g := *r
	g.Group = group
	return &g
}

// Len is the number of samples.
func (r *Records) Len() int { return r.first[len(r.Counts)] / r.Group }

// Range is where sample i lies: its file (an index of Files), offset and
// length (a group of records may run into the next run or file: only the
// part in the first is given).
func (r *Records) Range(i int) (file int, off, n int64) {
	rec := i * r.Group
	f := sort.Search(len(r.Counts), func(k int) bool { return r.first[k+1] > rec })
	j := rec - r.first[f]
	for _, sg := range r.Segs[f] {
		if j < sg.N {
			return f, sg.At + int64(j)*r.Stride, int64(min(r.Group, sg.N-j)) * r.Stride
		}
		j -= sg.N
	}
	return f, 0, 0 // not reached: rec < first[f+1]
}

// Index is the sample a read of n bytes at off of file f is part of, if
// it reads one record whole.
func (r *Records) Index(f int, off, n int64) (int, bool) {
	rec, ok := r.record(f, off, n)
	return rec / r.Group, ok
}

// record is the record a read of n bytes at off of file f reads whole.
func (r *Records) record(f int, off, n int64) (int, bool) {
	if f < 0 || f >= len(r.Counts) || n != r.Stride {
		return 0, false
	}
	j := r.first[f]
	for _, sg := range r.Segs[f] {
		if off >= sg.At && off < sg.At+int64(sg.N)*r.Stride {
			if (off-sg.At)%r.Stride != 0 {
				return 0, false
			}
			return j + int((off-sg.At)/r.Stride), true
		}
		j += sg.N
	}
	return 0, false
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

// ErrUnsettled: the reads fall on records in runs that do not add up yet
// (a chunk index's node among the records not read yet); see more.
var ErrUnsettled = errors.New("seed: the records' runs do not add up yet")

// RecordLayouts are the fixed-record layouts of files (sorted, with their
// sizes) that the reads seen fit, likeliest first. The commonest read
// size is the record's; the other reads are metadata (an HDF5 file's
// superblock, object headers, chunk index nodes), and a file's records
// lie in the runs between them, past those before its first record read
// (runsOf). A file no record of which was read is taken to be laid out
// as the file most read. Every file holds the same count of records (a
// ConcatDataset of one dataset per file, written alike): at least one
// more than the highest read, as many as fit at most; one layout per
// count, the files' whole room first, then from the least.
func RecordLayouts(files []string, sizes []int64, reads []SampleRead) ([]*Records, error) {
	stride, ok := commonest(reads, func(r SampleRead) (int64, bool) { return r.Size, r.Size >= 512 })
	if !ok {
		return nil, ErrNoStride
	}
	segs := make([][]Seg, len(files))
	most, mostReads := -1, 0
	for f := range files {
		var fr []SampleRead
		for _, r := range reads {
			if r.File == f {
				fr = append(fr, r)
			}
		}
		ss, n, err := runsOf(fr, sizes[f], stride)
		if err != nil {
			return nil, err
		}
		segs[f] = ss
		if n > mostReads {
			most, mostReads = f, n
		}
	}
	if most < 0 {
		return nil, ErrNoStride
	}
	for f := range segs {
		if segs[f] == nil {
			segs[f] = clip(segs[most], sizes[f], stride)
		}
	}
	whole := newRecords(files, stride, segs)
	last, room := -1, math.MaxInt
	for f := range files {
		room = min(room, whole.Counts[f])
	}
	for _, r := range reads {
		if rec, ok := whole.record(r.File, r.Off, r.Size); ok {
			last = max(last, rec-whole.first[r.File])
		}
	}
	if last < 0 || last >= room {
		return nil, nil // the reads fall on no layout of records every file holds alike
	}
	counts := []int{room}
	for n := last + 1; n < room && len(counts) < maxCounts; n++ {
		counts = append(counts, n)
	}
	var out []*Records
	for _, n := range counts {
		trimmed := make([][]Seg, len(segs))
		for f := range segs {
			trimmed[f] = trim(segs[f], n)
		}
		r := newRecords(files, stride, trimmed)
		if g := r.groupOf(reads); g > 1 {
			out = append(out, r.Grouped(g)) // the likelier: its readers read runs of g
		}
		out = append(out, r)
	}
	return out, nil
}

// runsOf lays out one file of size bytes by its reads: the metadata reads
// (of another size than stride) that end before its first record read
// are its header; the others cut the rest into runs, each a run of records
// from its start (a chunk follows the node before it) or, where records
// were read in it, from the first offset at or past its start on their
// grid. Every run but the last must hold whole records, and all the
// records read in a run must lie on one grid: else the runs do not add up
// yet (ErrUnsettled). It returns nil for a file no record of which was
// read, and how many were.
func runsOf(reads []SampleRead, size, stride int64) ([]Seg, int, error) {
	var data, meta []SampleRead
	for _, r := range reads {
		if r.Size == stride {
			data = append(data, r)
		} else {
			meta = append(meta, r)
		}
	}
	if len(data) == 0 {
		return nil, 0, nil
	}
	firstData := data[0].Off
	for _, r := range data {
		firstData = min(firstData, r.Off)
	}
	header := int64(0)
	var cuts [][2]int64 // metadata extents past the header, in order
	for _, m := range meta {
		if m.Off+m.Size <= firstData {
			header = max(header, m.Off+m.Size)
		} else {
			cuts = append(cuts, [2]int64{m.Off, m.Off + m.Size})
		}
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i][0] < cuts[j][0] })
	var segs []Seg
	at := header
	for k := 0; k <= len(cuts); k++ {
		end := size
		if k < len(cuts) {
			end = cuts[k][0]
		}
		if end > at || k == len(cuts) {
			sg, err := runIn(data, at, end, stride, k == len(cuts))
			if err != nil {
				return nil, 0, err
			}
			if sg.N > 0 {
				segs = append(segs, sg)
			}
		}
		if k < len(cuts) {
			at = max(at, cuts[k][1])
		}
	}
	return segs, len(data), nil
}

// runIn is the run of records in [at, end) whose records read are data's
// there; open says it is the file's last run, which need not end on a
// record.
func runIn(data []SampleRead, at, end, stride int64, open bool) (Seg, error) {
	origin, grid := at, int64(-1)
	for _, r := range data {
		if r.Off < at || r.Off+r.Size > end {
			continue
		}
		if grid >= 0 && r.Off%stride != grid {
			return Seg{}, ErrUnsettled
		}
		grid = r.Off % stride
	}
	if grid >= 0 {
		origin = at + (grid-at%stride+stride)%stride
	}
	n := int(max(end-origin, 0) / stride)
	if !open && grid >= 0 && (end-origin)%stride != 0 {
		return Seg{}, ErrUnsettled
	}
	return Seg{At: origin, N: n}, nil
}

// clip is segs for a file of size bytes: the runs, or their parts, in it.
func clip(segs []Seg, size, stride int64) []Seg {
	var out []Seg
	for _, sg := range segs {
		if n := min(sg.N, int(max(size-sg.At, 0)/stride)); n > 0 {
			out = append(out, Seg{At: sg.At, N: n})
		}
	}
	return out
}

// trim is segs holding n records, the first n.
func trim(segs []Seg, n int) []Seg {
	var out []Seg
	for _, sg := range segs {
		if n == 0 {
			break
		}
		k := min(sg.N, n)
		out = append(out, Seg{At: sg.At, N: k})
		n -= k
	}
	return out
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
