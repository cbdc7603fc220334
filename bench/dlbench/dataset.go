package dlbench

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/augur-hpc/augur/seed"
	"github.com/augur-hpc/augur/shim"
)

// Layouts of a dataset.
const (
	// LayoutImageFolder: class directories holding one file per sample,
	// indexed as torchvision's ImageFolder/DatasetFolder does.
	LayoutImageFolder = "imagefolder"
	// LayoutFlat: one directory of files, indexed in sorted order.
	LayoutFlat = "flat"
	// LayoutRecords: a few large files of fixed-size records, each record
	// a sample read with pread (the CosmoFlow / TFRecord shape), after a
	// header of GenSpec.Header bytes in each file (an HDF5 file's
	// contiguous dataset: sample i of a file at header + i*size).
	LayoutRecords = "records"
	// LayoutTar: tar shards (ustar: a 512-byte header before each member,
	// members padded to 512 bytes), one member per sample, as
	// WebDataset's; Python's tarfile reads them.
	LayoutTar = "tar"
)

// layouts names the layouts for messages.
const layouts = LayoutImageFolder + ", " + LayoutFlat + ", " + LayoutRecords + " or " + LayoutTar

// Sample is one dataset index: a whole file, or a record of a file.
type Sample struct {
	Path   string // relative to the dataset root, slash-separated
	Offset int64  // 0 for a whole file
	Length int64  // the file's size for a whole file
	Record bool   // a record of a larger file, read with pread
}

// Dataset is a dataset as the benchmark sees it: where it lies and which
// sample each index reads. Samples are in index order (what a sampler's
// indices refer to).
type Dataset struct {
	Root    string
	Layout  string
	Samples []Sample
	Files   int   // distinct files
	Bytes   int64 // sum of sample lengths
	// Sums is the CRC-32C of every sample's bytes, in index order, once
	// Checksum has read them: the readers check what they read against
	// them.
	Sums []uint32
}

// GenSpec describes a dataset to generate.
type GenSpec struct {
	Layout string
	// Count is the number of samples.
	Count int
	// Size is the mean sample size in bytes; SizeStddev, when > 0, draws
	// sizes from a normal distribution (clipped at 1 byte), as NoPFS's
	// simulations do. Records are fixed-size: SizeStddev must be 0.
	Size, SizeStddev int64
	// Classes is the number of class directories of an imagefolder
	// (default 10).
	Classes int
	// Files is the number of record files of a records layout, or of
	// shards of a tar layout (default 4).
	Files int
	// Header is the bytes before the first record of each file of a
	// records layout (pseudo-random, like the rest): an HDF5 file's
	// superblock and object headers before a contiguous dataset. Not a
	// power of two puts records at offsets aligned to nothing.
	Header int64
	// Seed makes sizes and contents reproducible.
	Seed uint64
}

func (g *GenSpec) normalize() error {
	if g.Layout == "" {
		g.Layout = LayoutImageFolder
	}
	if g.Classes <= 0 {
		g.Classes = 10
	}
	if g.Files <= 0 {
		g.Files = 4
	}
	switch {
	case g.Layout != LayoutImageFolder && g.Layout != LayoutFlat && g.Layout != LayoutRecords && g.Layout != LayoutTar:
		return fmt.Errorf("unknown layout %q (want %s)", g.Layout, layouts)
	case g.Count < 1:
		return fmt.Errorf("dataset: count %d: need at least one sample", g.Count)
	case g.Size < 1:
		return fmt.Errorf("dataset: size %d: need at least one byte per sample", g.Size)
	case g.SizeStddev < 0:
		return errors.New("dataset: negative size standard deviation")
	case g.Layout == LayoutRecords && g.SizeStddev > 0:
		return errors.New("dataset: records are fixed-size; give no size standard deviation")
	case g.Header < 0 || g.Header > 0 && g.Layout != LayoutRecords:
		return fmt.Errorf("dataset: header %d: a header is for the records layout, and not negative", g.Header)
	}
	return nil
}

// sizes returns the size of every sample, a pure function of the spec.
func (g *GenSpec) sizes() []int64 {
	r := rand.New(rand.NewPCG(g.Seed, 0x5eed))
	out := make([]int64, g.Count)
	for i := range out {
		s := g.Size
		if g.SizeStddev > 0 {
			s = int64(math.Round(float64(g.Size) + r.NormFloat64()*float64(g.SizeStddev)))
		}
		out[i] = max(s, 1)
	}
	return out
}

// stampPath is where Generate records what it generated: beside the root,
// never inside it (an extra file would become a sample or a class).
func stampPath(root string) string {
	return filepath.Join(filepath.Dir(root), "."+filepath.Base(root)+".dlbench.json")
}

// Generate makes the dataset g describes under root, or reuses it when a
// previous Generate made the same one there. Contents are pseudo-random
// bytes (incompressible, like JPEG data). The stamp that records the spec
// is written beside root, not inside it.
func Generate(root string, g GenSpec) (*Dataset, error) {
	if err := g.normalize(); err != nil {
		return nil, err
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	want, _ := json.Marshal(g)
	if have, err := os.ReadFile(stampPath(root)); err == nil && string(have) == string(want) {
		if ds, err := Scan(root, g); err == nil && len(ds.Samples) == g.Count {
			return ds, nil
		}
	}
	os.Remove(stampPath(root))
	if err := os.RemoveAll(root); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	src := rand.New(rand.NewChaCha8([32]byte{byte(g.Seed), byte(g.Seed >> 8), byte(g.Seed >> 16), byte(g.Seed >> 24), 'd', 'l'}))
	sizes := g.sizes()
	switch g.Layout {
	case LayoutRecords:
		per := (g.Count + g.Files - 1) / g.Files
		for f := 0; f < g.Files && f*per < g.Count; f++ {
			n := min(per, g.Count-f*per)
			if err := writeRandom(filepath.Join(root, fmt.Sprintf("shard-%04d.rec", f)), g.Header+int64(n)*g.Size, src); err != nil {
				return nil, err
			}
		}
	case LayoutTar:
		per := (g.Count + g.Files - 1) / g.Files
		for f := 0; f < g.Files && f*per < g.Count; f++ {
			first := f * per
			if err := writeTar(filepath.Join(root, fmt.Sprintf("shard-%04d.tar", f)), first, sizes[first:min(first+per, g.Count)], src); err != nil {
				return nil, err
			}
		}
	default:
		for i, s := range sizes {
			dir := root
			if g.Layout == LayoutImageFolder {
				dir = filepath.Join(root, fmt.Sprintf("class%03d", i%g.Classes))
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			if err := writeRandom(filepath.Join(dir, fmt.Sprintf("sample%07d.jpg", i)), s, src); err != nil {
				return nil, err
			}
		}
	}
	if err := os.WriteFile(stampPath(root), want, 0o644); err != nil {
		return nil, err
	}
	return Scan(root, g)
}

// writeTar writes a tar shard of one member of pseudo-random bytes per
// size, named after its sample index from first on.
func writeTar(path string, first int, sizes []int64, src *rand.Rand) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for i, n := range sizes {
		h := &tar.Header{Name: fmt.Sprintf("%07d.bin", first+i), Mode: 0o644, Size: n,
			Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR}
		if err = tw.WriteHeader(h); err != nil {
			break
		}
		if _, err = io.CopyN(tw, randReader{src}, n); err != nil {
			break
		}
	}
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func writeRandom(path string, n int64, src *rand.Rand) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, randReader{src}, n); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

type randReader struct{ r *rand.Rand }

func (r randReader) Read(p []byte) (int, error) {
	for i := 0; i+8 <= len(p); i += 8 {
		v := r.r.Uint64()
		for k := 0; k < 8; k++ {
			p[i+k] = byte(v >> (8 * k))
		}
	}
	for i := len(p) &^ 7; i < len(p); i++ {
		p[i] = byte(r.r.Uint32())
	}
	return len(p), nil
}

// scanExtensions are the files an imagefolder scan keeps: torchvision's
// IMG_EXTENSIONS, exactly as ImageFolder (and so augur's "imagefolder"
// layout) does. Generated samples are named .jpg for that reason; their
// bytes are random, which the C reader does not mind.
var scanExtensions = seed.IMGExtensions

// Scan indexes an existing dataset laid out as g.Layout says:
// imagefolder as torchvision's ImageFolder (its image extensions); flat as
// every file in sorted order; records as every file in sorted order, past
// its first g.Header bytes, cut into records of g.Size bytes (a trailing
// partial record is dropped); tar as every .tar file in sorted order, each
// regular member a sample.
func Scan(root string, g GenSpec) (*Dataset, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	ds := &Dataset{Root: root, Layout: g.Layout}
	var paths []string
	switch g.Layout {
	case LayoutImageFolder:
		paths, err = seed.DatasetFolder(root, scanExtensions)
	case LayoutFlat, LayoutRecords, LayoutTar:
		paths, err = seed.SortedFiles(root)
	default:
		return nil, fmt.Errorf("unknown layout %q (want %s)", g.Layout, layouts)
	}
	if err != nil {
		return nil, err
	}
	if g.Layout == LayoutRecords && g.Size < 1 {
		return nil, errors.New("a records dataset needs a record size")
	}
	for _, p := range paths {
		name := filepath.Join(root, filepath.FromSlash(p))
		var samples []Sample
		switch g.Layout {
		case LayoutRecords:
			samples, err = scanRecords(name, p, g.Header, g.Size)
		case LayoutTar:
			if strings.HasSuffix(p, ".tar") {
				samples, err = scanTar(name, p)
			}
		default:
			var fi os.FileInfo
			if fi, err = os.Stat(name); err == nil {
				samples = []Sample{{Path: p, Length: fi.Size()}}
			}
		}
		if err != nil {
			return nil, err
		}
		for _, s := range samples {
			ds.Bytes += s.Length
		}
		ds.Samples = append(ds.Samples, samples...)
		if len(samples) > 0 {
			ds.Files++
		}
	}
	if len(ds.Samples) == 0 {
		return nil, fmt.Errorf("%s: no samples found (layout %s)", root, g.Layout)
	}
	return ds, nil
}

// scanRecords cuts the file name (rel, relative to the root) into records
// of size bytes after its header.
func scanRecords(name, rel string, header, size int64) ([]Sample, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	var out []Sample
	for off := header; off+size <= fi.Size(); off += size {
		out = append(out, Sample{Path: rel, Offset: off, Length: size, Record: true})
	}
	return out, nil
}

// scanTar lists the regular members of the tar file name (rel, relative
// to the root) as records: where each member's bytes start, and how many.
func scanTar(name, rel string) ([]Sample, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f) // it seeks f past each member's bytes
	var out []Sample
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		off, err := f.Seek(0, io.SeekCurrent) // Next has read the member's header(s), no more
		if err != nil {
			return nil, err
		}
		out = append(out, Sample{Path: rel, Offset: off, Length: h.Size, Record: true})
	}
}

// castagnoli is the CRC-32C table the readers' sums use (bench/c/dlreader/sum.c).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum sets ds.Sums, the CRC-32C of every sample, from the bytes under
// ds.Root (read by Go, without any preload); a second call does nothing.
func (ds *Dataset) Checksum() error {
	if ds.Sums != nil {
		return nil
	}
	sums := make([]uint32, len(ds.Samples))
	buf := make([]byte, 1<<20)
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for i, s := range ds.Samples {
		if f == nil || f.Name() != filepath.Join(ds.Root, filepath.FromSlash(s.Path)) {
			if f != nil {
				f.Close()
			}
			var err error
			if f, err = os.Open(filepath.Join(ds.Root, filepath.FromSlash(s.Path))); err != nil {
				return err
			}
		}
		h := crc32.New(castagnoli)
		n, err := io.CopyBuffer(h, io.NewSectionReader(f, s.Offset, s.Length), buf)
		if err != nil {
			return err
		}
		if n != s.Length {
			return fmt.Errorf("%s: sample %d: %d bytes at %d, the file has %d", f.Name(), i, s.Length, s.Offset, n)
		}
		sums[i] = h.Sum32()
	}
	ds.Sums = sums
	return nil
}

// WriteList writes the reader's sample list with every path under root
// (which may be the dataset's root, a mount of it or a copy), and every
// sample's sum when sums is set (ds.Sums, which Checksum makes).
func (ds *Dataset) WriteList(name, root string, sums bool) error {
	if sums && len(ds.Sums) != len(ds.Samples) {
		return errors.New("the dataset's samples have no sums to check (Checksum)")
	}
	var b strings.Builder
	for i, s := range ds.Samples {
		kind := 'f'
		if s.Record {
			kind = 'r'
		}
		if sums {
			kind -= 'a' - 'A' // F, R: a sum follows
			fmt.Fprintf(&b, "%c %d %d %08x %s\n", kind, s.Offset, s.Length, ds.Sums[i], filepath.Join(root, filepath.FromSlash(s.Path)))
			continue
		}
		fmt.Fprintf(&b, "%c %d %d %s\n", kind, s.Offset, s.Length, filepath.Join(root, filepath.FromSlash(s.Path)))
	}
	return os.WriteFile(name, []byte(b.String()), 0o644)
}

// Describe is a one-line summary.
func (ds *Dataset) Describe() string {
	return fmt.Sprintf("%s, %s: %d samples in %d files, %s", ds.Root, ds.Layout, len(ds.Samples), ds.Files, shim.FormatSize(ds.Bytes))
}
