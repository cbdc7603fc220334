package dlbench

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/augur-hpc/augur/shim"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/augur-hpc/augur/seed"
)

// Layouts of a dataset.
const (
	// LayoutImageFolder: class directories holding one file per sample,
	// indexed as torchvision's ImageFolder/DatasetFolder does.
	LayoutImageFolder = "imagefolder"
	// LayoutFlat: one directory of files, indexed in sorted order.
	LayoutFlat = "flat"
	// LayoutRecords: a few large files of fixed-size records, each record
	// a sample read with pread (the CosmoFlow / TFRecord shape).
	LayoutRecords = "records"
)

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
	// Files is the number of record files of a records layout (default 4).
	Files int
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
	case g.Layout != LayoutImageFolder && g.Layout != LayoutFlat && g.Layout != LayoutRecords:
		return fmt.Errorf("unknown layout %q (want %s, %s or %s)", g.Layout, LayoutImageFolder, LayoutFlat, LayoutRecords)
	case g.Count < 1:
		return fmt.Errorf("dataset: count %d: need at least one sample", g.Count)
	case g.Size < 1:
		return fmt.Errorf("dataset: size %d: need at least one byte per sample", g.Size)
	case g.SizeStddev < 0:
		return errors.New("dataset: negative size standard deviation")
	case g.Layout == LayoutRecords && g.SizeStddev > 0:
		return errors.New("dataset: records are fixed-size; give no size standard deviation")
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
		if ds, err := Scan(root, g.Layout, g.Size); err == nil && len(ds.Samples) == g.Count {
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
			if err := writeRandom(filepath.Join(root, fmt.Sprintf("shard-%04d.rec", f)), int64(n)*g.Size, src); err != nil {
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
	return Scan(root, g.Layout, g.Size)
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

// Scan indexes an existing dataset: imagefolder as torchvision's
// ImageFolder (its image extensions); flat as every file
// in sorted order; records as every file in sorted order cut into records
// of recordSize bytes (a trailing partial record is dropped).
func Scan(root, layout string, recordSize int64) (*Dataset, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	ds := &Dataset{Root: root, Layout: layout}
	var paths []string
	switch layout {
	case LayoutImageFolder:
		paths, err = seed.DatasetFolder(root, scanExtensions)
	case LayoutFlat, LayoutRecords:
		paths, err = seed.SortedFiles(root)
	default:
		return nil, fmt.Errorf("unknown layout %q (want %s, %s or %s)", layout, LayoutImageFolder, LayoutFlat, LayoutRecords)
	}
	if err != nil {
		return nil, err
	}
	if layout == LayoutRecords && recordSize < 1 {
		return nil, errors.New("a records dataset needs a record size")
	}
	for _, p := range paths {
		fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return nil, err
		}
		if layout != LayoutRecords {
			ds.Samples = append(ds.Samples, Sample{Path: p, Length: fi.Size()})
			ds.Bytes += fi.Size()
			ds.Files++
			continue
		}
		n := fi.Size() / recordSize
		for k := int64(0); k < n; k++ {
			ds.Samples = append(ds.Samples, Sample{Path: p, Offset: k * recordSize, Length: recordSize, Record: true})
		}
		ds.Bytes += n * recordSize
		if n > 0 {
			ds.Files++
		}
	}
	if len(ds.Samples) == 0 {
		return nil, fmt.Errorf("%s: no samples found (layout %s)", root, layout)
	}
	return ds, nil
}

// WriteList writes the reader's sample list with every path under root
// (which may be the dataset's root, a mount of it or a copy).
func (ds *Dataset) WriteList(name, root string) error {
	var b strings.Builder
	for _, s := range ds.Samples {
		kind := 'f'
		if s.Record {
			kind = 'r'
		}
		fmt.Fprintf(&b, "%c %d %d %s\n", kind, s.Offset, s.Length, filepath.Join(root, filepath.FromSlash(s.Path)))
	}
	return os.WriteFile(name, []byte(b.String()), 0o644)
}

// Describe is a one-line summary.
func (ds *Dataset) Describe() string {
	return fmt.Sprintf("%s, %s: %d samples in %d files, %s", ds.Root, ds.Layout, len(ds.Samples), ds.Files, shim.FormatSize(ds.Bytes))
}
