package seed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Every directory of the tricky tree listed from one catalog is what the
// layout functions (checked against torchvision) list of it, and every
// file's index, lookup and candidates agree.
func TestCatalogListsAsTheLayouts(t *testing.T) {
	root := makeTree(t)
	for _, kind := range []string{LayoutImageFolder, LayoutFiles} {
		c, err := NewCatalog(root, kind, nil)
		if err != nil {
			t.Fatal(err)
		}
		for rel := range c.byRel {
			if len(rel) > 40 { // the symlink loop's deep copies: one is enough
				continue
			}
			dir := filepath.Join(root, rel)
			want, werr := NewLayout(kind, dir, nil)
			ds, err := c.Dataset(rel)
			name := fmt.Sprintf("%s %q", kind, rel)
			if (werr == nil) != (err == nil) {
				t.Errorf("%s: layout %v, catalog %v", name, werr, err)
				continue
			}
			if err != nil {
				if !errors.Is(err, ErrLayout) {
					t.Errorf("%s: %v does not wrap ErrLayout", name, err)
				}
				continue
			}
			if got := ds.Rels(); !slices.Equal(got, want) {
				t.Errorf("%s:\n got %q\nwant %q", name, hexAll(got), hexAll(want))
				continue
			}
			for i := 0; i < ds.Len(); i++ {
				f := ds.File(i)
				if j, ok := ds.Index(f); !ok || j != i {
					t.Errorf("%s: Index(File(%d)) = %d, %v", name, i, j, ok)
				}
				if g, ok := c.Lookup(c.Path(f)); !ok || g != f {
					t.Errorf("%s: Lookup(%q) = %d, %v; want %d", name, c.Path(f), g, ok, f)
				}
				if !slices.Contains(c.Candidates(f), rel) {
					t.Errorf("%s: %q not a candidate of its file %q (%q)", name, rel, c.Rel(f), c.Candidates(f))
				}
			}
		}
	}
}

// The usual layout: train and val under one root, each an ImageFolder,
// and the root too (its classes are train and val).
func TestCatalogTrainAndVal(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"train/n01/a.jpg", "train/n01/b.jpg", "train/n02/c.jpg", "val/n01/d.jpg", "val/n02/e.jpg", "val/n02/f.jpg"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(root, p), nil, 0o644)
	}
	c, err := NewCatalog(root, LayoutImageFolder, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := c.Lookup(root + "/val/n02/e.jpg")
	if !ok {
		t.Fatal("lookup failed")
	}
	if got := c.Candidates(f); !slices.Equal(got, []string{"val", ""}) {
		t.Errorf("candidates %q, want val and the root", got)
	}
	for rel, want := range map[string][]string{"train": {"n01/a.jpg", "n01/b.jpg", "n02/c.jpg"},
		"val": {"n01/d.jpg", "n02/e.jpg", "n02/f.jpg"}, "": {"train/n01/a.jpg", "train/n01/b.jpg", "train/n02/c.jpg",
			"val/n01/d.jpg", "val/n02/e.jpg", "val/n02/f.jpg"}} {
		ds, err := c.Dataset(rel)
		if err != nil || !slices.Equal(ds.Rels(), want) {
			t.Errorf("Dataset(%q) = %v, %v; want %q", rel, ds.Rels(), err, want)
		}
	}
	if _, err := c.Dataset("train/n01"); !errors.Is(err, ErrLayout) {
		t.Errorf("a class folder as a dataset: %v, want ErrLayout (no class folder)", err)
	}
	// Under: the files of a directory's subtree, by their paths.
	for path, want := range map[string][]string{
		root + "/train":    {"train/n01/a.jpg", "train/n01/b.jpg", "train/n02/c.jpg"},
		root + "/val/n02":  {"val/n02/e.jpg", "val/n02/f.jpg"},
		root:               {"train/n01/a.jpg", "train/n01/b.jpg", "train/n02/c.jpg", "val/n01/d.jpg", "val/n02/e.jpg", "val/n02/f.jpg"},
		filepath.Dir(root): {"train/n01/a.jpg", "train/n01/b.jpg", "train/n02/c.jpg", "val/n01/d.jpg", "val/n02/e.jpg", "val/n02/f.jpg"},
		root + "/nowhere":  nil,
		root + "/train/n0": nil,
		root + "x/train":   nil,
	} {
		var got []string
		first, end := c.Under(path)
		for f := first; f < end; f++ {
			got = append(got, c.Rel(f))
		}
		slices.Sort(got) // ids follow the walk, not the names
		if !slices.Equal(got, want) {
			t.Errorf("Under(%s) = %q, want %q", path, got, want)
		}
	}
}

// A file list is one dataset, in the list's order.
func TestListCatalog(t *testing.T) {
	rels := []string{"b/z.bin", "a.bin", "/data/b/y/x.bin", "b/a.bin"}
	c := ListCatalog("/data", rels)
	ds, err := c.Dataset("")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"b/z.bin", "a.bin", "b/y/x.bin", "b/a.bin"}
	if got := ds.Rels(); !slices.Equal(got, want) {
		t.Errorf("list dataset %q, want %q", got, want)
	}
	f, ok := c.Lookup("/data/b/y/x.bin")
	if i, in := ds.Index(f); !ok || !in || i != 2 || !slices.Equal(c.Candidates(f), []string{""}) {
		t.Errorf("lookup %v, index %d %v, candidates %q", ok, i, in, c.Candidates(f))
	}
	if _, err := c.Dataset("b"); !errors.Is(err, ErrLayout) {
		t.Errorf("a directory of a list: %v, want ErrLayout", err)
	}
}
