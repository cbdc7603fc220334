package seed

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// A layout is the dataset's index → file mapping: element i of the slice is
// the file that dataset[i] reads, as a slash-separated path relative to the
// dataset root. The Layout functions below reproduce how frameworks build
// it, because a sampler only yields indices.

// IMGExtensions is torchvision's IMG_EXTENSIONS, the default filter of
// ImageFolder.
var IMGExtensions = []string{".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"}

// maxWalk bounds the entries a walk visits. os.walk(followlinks=True)
// follows a symlink loop until the kernel refuses the path (ELOOP), and
// two loops in one tree make that exponential; a training script would
// hang there, augur must not.
const maxWalk = 1 << 26

// ImageFolder is the index → path mapping of
// torchvision.datasets.ImageFolder(root) with the default extensions.
func ImageFolder(root string) ([]string, error) {
	return DatasetFolder(root, IMGExtensions)
}

// DatasetFolder is the mapping of torchvision.datasets.DatasetFolder(root,
// extensions=extensions), exactly as torchvision's make_dataset builds it:
//   - the classes are the sorted names of the entries of root that are
//     directories, following symlinks (hidden ones too);
//   - for each class in order, os.walk(class_dir, followlinks=True) is
//     sorted by directory path and, within a directory, by file name;
//   - a file is kept when its lower-cased path ends with one of the
//     extensions, which are compared as given (torchvision does not
//     lower-case them). "Files" are all entries that are not directories,
//     broken symlinks included, as os.walk reports them.
//
// Sorting is Python's: by code point, with undecodable bytes as the
// surrogates os.fsdecode makes of them. Like torchvision, it fails when
// root has no class folder or a class has no file that passes.
func DatasetFolder(root string, extensions []string) ([]string, error) {
	return datasetFolder(root, extensions, nil)
}

func datasetFolder(root string, extensions []string, listed func(n int)) ([]string, error) {
	classes, err := folderClasses(root)
	if err != nil {
		return nil, err
	}
	walks, err := walkClasses(root, classes, listed)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, class := range classes {
		n := len(out)
		for _, d := range walks[i] {
			for _, name := range d.files {
				rel := d.rel + "/" + name
				if hasExtension(root+"/"+rel, extensions) {
					out = append(out, rel)
				}
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("%w: %s: class %q has no file with extension %s",
				ErrLayout, root, class, strings.Join(extensions, ", "))
		}
	}
	return out, nil
}

// listers is how many class folders are listed at once: each directory
// read is a round trip to the shared filesystem, and ImageNet has 1000.
const listers = 16

// walkClasses walks every class folder, several at a time, and returns
// the walks in class order.
func walkClasses(root string, classes []string, listed func(n int)) ([][]walkDir, error) {
	walks := make([][]walkDir, len(classes))
	errs := make([]error, len(classes))
	visited := new(atomic.Int64)
	sem := make(chan struct{}, listers)
	var wg sync.WaitGroup
	for i, class := range classes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			w := walker{root: root, visited: visited, listed: listed}
			walks[i], errs[i] = w.walk(class), w.err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return walks, nil
}

// folderClasses is torchvision's find_classes.
func folderClasses(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrLayout, err)
	}
	var classes []string
	for _, e := range entries {
		if isDirFollow(root, e) {
			classes = append(classes, e.Name())
		}
	}
	if len(classes) == 0 {
		return nil, fmt.Errorf("%w: %s: no class folder", ErrLayout, root)
	}
	slices.SortFunc(classes, pyCompare)
	return classes, nil
}

// SortedFiles lists every regular file under root (after following
// symlinks, to files and to directories) as one list sorted by relative
// path: Python's sorted() over the relative paths os.walk(root,
// followlinks=True) yields, keeping os.path.isfile ones.
func SortedFiles(root string) ([]string, error) {
	return sortedFiles(root, nil)
}

func sortedFiles(root string, listed func(n int)) ([]string, error) {
	w := walker{root: root, visited: new(atomic.Int64), listed: listed}
	if _, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrLayout, err)
	}
	var out []string
	for _, d := range w.walk("") {
		for _, name := range d.files {
			rel := joinRel(d.rel, name)
			if fi, err := os.Stat(filepath.Join(root, rel)); err == nil && fi.Mode().IsRegular() {
				out = append(out, rel)
			}
		}
	}
	if w.err != nil {
		return nil, w.err
	}
	slices.SortFunc(out, pyCompare)
	return out, nil
}

// FileList reads an explicit list: one path per line, relative to the
// dataset root, in dataset order. Blank lines are skipped; "\r\n" endings
// are accepted; nothing else is trimmed.
func FileList(name string) ([]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrLayout, err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if line := strings.TrimSuffix(sc.Text(), "\r"); line != "" {
			out = append(out, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrLayout, name, err)
	}
	return out, nil
}

// Layout kinds accepted by NewLayout.
const (
	LayoutImageFolder = "imagefolder" // ImageFolder(root)
	LayoutFiles       = "files"       // SortedFiles(root)
	LayoutListPrefix  = "list:"       // "list:<file>": FileList(file)
)

// NewLayout builds the layout a configuration string names:
// "imagefolder", "files" or "list:<file>". listed, when not nil, is told
// of the directory entries the walk reads (a list is read, not walked),
// n at a time, from several goroutines: for a progress display.
func NewLayout(kind, root string, listed func(n int)) ([]string, error) {
	switch {
	case kind == LayoutImageFolder:
		return datasetFolder(root, IMGExtensions, listed)
	case kind == LayoutFiles:
		return sortedFiles(root, listed)
	case strings.HasPrefix(kind, LayoutListPrefix) && len(kind) > len(LayoutListPrefix):
		return FileList(strings.TrimPrefix(kind, LayoutListPrefix))
	}
	return nil, fmt.Errorf("%w: unknown layout %q; want \"imagefolder\", \"files\" or \"list:<file>\"", ErrLayout, kind)
}

// walkDir is one tuple of os.walk: a directory (relative to the walk's
// root) and the names of its entries that are not directories.
type walkDir struct {
	rel   string
	files []string
}

// walker reproduces os.walk(top, followlinks=True) under a root.
type walker struct {
	root    string
	visited *atomic.Int64 // entries seen, shared by the walkers of one layout
	listed  func(n int)   // told of the entries seen, when not nil
	err     error         // set when maxWalk is exceeded
}

// walk returns the tuples of os.walk(root/top, followlinks=True), sorted by
// directory path as torchvision sorts them, each file list sorted by name.
// A directory that cannot be listed is left out, as os.walk does without
// onerror.
func (w *walker) walk(top string) []walkDir {
	var out []walkDir
	stack := []string{top}
	for len(stack) > 0 && w.err == nil {
		rel := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		dir := filepath.Join(w.root, rel)
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		if w.visited.Add(int64(len(entries))) > maxWalk {
			w.err = fmt.Errorf("%w: %s: more than %d entries (a symlink loop?)", ErrLayout, w.root, maxWalk)
			break
		}
		if w.listed != nil {
			w.listed(len(entries))
		}
		d := walkDir{rel: rel}
		for _, e := range entries {
			if isDirFollow(dir, e) {
				stack = append(stack, joinRel(rel, e.Name()))
			} else {
				d.files = append(d.files, e.Name())
			}
		}
		slices.SortFunc(d.files, pyCompare)
		out = append(out, d)
	}
	// All paths share the prefix root/top, so sorting the relative parts
	// sorts the full paths the same way.
	slices.SortFunc(out, func(a, b walkDir) int { return pyCompare(a.rel, b.rel) })
	return out
}

// joinRel joins slash-separated relative paths, "" being the root.
func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// isDirFollow is DirEntry.is_dir() of Python: true for a directory or a
// symlink to one; false when the target cannot be reached.
func isDirFollow(dir string, e fs.DirEntry) bool {
	if e.Type()&fs.ModeSymlink == 0 {
		return e.IsDir()
	}
	fi, err := os.Stat(filepath.Join(dir, e.Name()))
	return err == nil && fi.IsDir()
}

// hasExtension is torchvision's has_file_allowed_extension:
// path.lower().endswith(extensions).
func hasExtension(path string, extensions []string) bool {
	lower := pyLower(path)
	for _, ext := range extensions {
		if strings.HasSuffix(lower, ext) {
			return true
		}
	}
	return false
}

// pyLower is Python's str.lower on a file name as os.fsdecode gives it.
// Undecodable bytes stay as they are (Python keeps their surrogates);
// U+0130 becomes "i̇", the one unconditional multi-rune lower case mapping;
// every other rune takes its simple lower case, as Go's tables give it.
func pyLower(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteByte(s[i])
		case r == 'İ':
			b.WriteString("i\u0307")
		default:
			b.WriteRune(unicode.ToLower(r))
		}
		i += size
	}
	return b.String()
}

// pyCompare orders strings as Python orders the str that os.fsdecode
// makes of them: by code point, where an undecodable byte b is the
// surrogate U+DC00+b. For valid UTF-8 that is plain byte order.
func pyCompare(a, b string) int {
	if utf8.ValidString(a) && utf8.ValidString(b) {
		return strings.Compare(a, b)
	}
	for a != "" && b != "" {
		ra, na := pyRune(a)
		rb, nb := pyRune(b)
		if ra != rb {
			if ra < rb {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	}
	return 1
}

// pyRune decodes the first code point of s with surrogateescape.
func pyRune(s string) (rune, int) {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && n == 1 {
		return 0xDC00 + rune(s[0]), 1
	}
	return r, n
}
