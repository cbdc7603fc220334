package seed

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// makeTree builds a dataset tree with what trips naive listings: mixed-case
// and unknown extensions, nested directories whose names sort around "/",
// symlinked class and nested directories, a symlink to a file, a broken
// symlink, a symlink loop, hidden entries, non-ASCII and non-UTF-8 names, and
// a file at the top that is not in any class. "😀" and "\xfe" sort one way
// by bytes and the other way as Python strs.
func makeTree(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "data")
	files := []string{
		"data/cat/a.JPG", "data/cat/b.jpeg", "data/cat/c.txt", "data/cat/d.Png", "data/cat/.hidden.jpg",
		"data/cat/noext", "data/cat/x.tİf", "data/cat/bad\xff.jpg", "data/cat/sp ace.png", "data/cat/Kelvin.PNG",
		"data/cat/sub/e.webp", "data/cat/sub-x/f.tif", "data/cat/sub/deeper/g.PPM", "data/cat/sub.d/q.pgm",
		"data/élan/éclair.PPM", "data/élan/z.bmp", "data/élan/日本.pgm", "data/élan/e\u0301.jpg",
		"data/Zebra/x.TIFF", "data/_under/file.jpg", "data/.hid/h.jpg", "data/readme.jpg",
		"data/loopy/one.png", "data/zz\xfe/k.webp", "data/cat/😀.png", "data/cat/\xfe.png",
		"outside/nested/h.png", "outside/nested/i.bmp", "outside/file.jpg",
		"outside/dogdata/1.jpg", "outside/dogdata/10.jpg", "outside/dogdata/2.jpg", "outside/dogdata/sub/3.jpeg",
	}
	for _, f := range files {
		p := filepath.Join(base, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"data/cat/linkdir":      "../../outside/nested",
		"data/cat/broken.jpg":   "nonexistent",
		"data/cat/filelink.png": "../../outside/file.jpg",
		"data/dog":              "../outside/dogdata",
		"data/loopy/self":       ".",
		"data/brokenclass":      "../nowhere",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func hexAll(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = hex.EncodeToString([]byte(p))
	}
	return out
}

func TestLayoutsAgainstTorchvision(t *testing.T) {
	root := makeTree(t)
	base := filepath.Dir(root)

	// Trees torchvision refuses: a class without an image, and no class.
	emptyClass := filepath.Join(base, "emptyclass")
	noClass := filepath.Join(base, "noclass")
	for _, f := range []string{"emptyclass/a/x.jpg", "emptyclass/b/readme.txt", "noclass/x.jpg"} {
		p := filepath.Join(base, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	a := oracle(t, []request{
		{"op": "imagefolder", "root": root},
		{"op": "files", "root": root},
		{"op": "imagefolder", "root": emptyClass},
		{"op": "imagefolder", "root": noClass},
	}, true)

	got, err := ImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	want := unhexAll(t, decode[[]string](t, a[0]))
	if g, w := shallow(t, got), shallow(t, want); !slices.Equal(g, w) {
		t.Fatalf("ImageFolder differs from torchvision:\ngot  %q\nwant %q", g, w)
	}

	got, err = SortedFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	want = unhexAll(t, decode[[]string](t, a[1]))
	if g, w := shallow(t, got), shallow(t, want); !slices.Equal(g, w) {
		t.Fatalf("SortedFiles differs from sorted(os.walk):\ngot  %q\nwant %q", g, w)
	}

	for i, dir := range []string{emptyClass, noClass} {
		msg, ok := oracleError(a[2+i])
		if !ok {
			t.Fatalf("torchvision accepted %s; the test tree is wrong", dir)
		}
		if _, err := ImageFolder(dir); !errors.Is(err, ErrLayout) {
			t.Fatalf("ImageFolder(%s) error = %v; torchvision: %s", dir, err, msg)
		}
	}
}

// loopDepth is how deep into makeTree's symlink loop two listings are
// compared. Beyond it the kernel decides, and not the same way twice: a
// lookup that drops out of RCU walk (a dentry evicted under it) is retried
// with the links of its first try still counted, so a path of more than 20
// links can fail with ELOOP (seen in CI: os.walk stopped at 30 levels, Go at
// 40). Three tries of 13 links stay within the kernel's 40.
const loopDepth = 12

// shallow is a listing without its entries deeper than loopDepth in the
// loop. It fails the test unless the listing went that deep: the loop must
// be followed.
func shallow(t *testing.T, paths []string) []string {
	t.Helper()
	deepest := "loopy/" + strings.Repeat("self/", loopDepth) + "one.png"
	if !slices.Contains(paths, deepest) {
		t.Fatalf("%s not listed: the symlink loop was not followed %d deep", deepest, loopDepth)
	}
	return slices.DeleteFunc(slices.Clone(paths), func(p string) bool {
		return strings.HasPrefix(p, "loopy/") && strings.Count(p, "self/") > loopDepth
	})
}

func unhexAll(t *testing.T, hs []string) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

func TestFileListAndNewLayout(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "list.txt")
	if err := os.WriteFile(list, []byte("b/2.jpg\r\n\na/1.jpg\n with space \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := NewLayout("list:"+list, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"b/2.jpg", "a/1.jpg", " with space "}; !slices.Equal(got, want) {
		t.Fatalf("FileList = %q, want %q", got, want)
	}
	for _, kind := range []string{"", "list:", "folders"} {
		if _, err := NewLayout(kind, dir, nil); !errors.Is(err, ErrLayout) {
			t.Errorf("NewLayout(%q) error = %v, want ErrLayout", kind, err)
		}
	}
	if _, err := SortedFiles(filepath.Join(dir, "missing")); !errors.Is(err, ErrLayout) {
		t.Errorf("SortedFiles of a missing root: error = %v, want ErrLayout", err)
	}
}

// NewLayout tells its listed hook of every entry the walk reads, from
// however many walkers.
func TestNewLayoutCountsEntriesListed(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"a/1.jpg", "a/2.jpg", "a/3.txt", "a/sub/4.jpg", "a/sub/5.jpg", "b/6.png"} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// a: 3 files and sub; a/sub: 2 files; b: 1 file. The files layout
	// also reads the root's 2 entries.
	for kind, want := range map[string]int64{LayoutImageFolder: 7, LayoutFiles: 9} {
		var listed atomic.Int64
		if _, err := NewLayout(kind, root, func(n int) { listed.Add(int64(n)) }); err != nil {
			t.Fatal(err)
		}
		if listed.Load() != want {
			t.Errorf("%s: %d entries listed, want %d", kind, listed.Load(), want)
		}
	}
}
