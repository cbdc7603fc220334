package seed

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// A Catalog is one walk of a dataset root, kept compact, from which the
// file list a layout makes of any directory at or below the root comes
// without listing again. A script that reads ImageFolder(root + "/train")
// and ImageFolder(root + "/val") reads two datasets under one root, and
// augur learns which from the files opened: each directory that could be
// one is a candidate (Candidates), and Dataset lists it as the script
// would (exactly as ImageFolder or SortedFiles of that directory).
//
// Files have ids: those of one directory are consecutive, in name order,
// and those of a directory's subtree too. A Catalog keeps per file its
// name and an offset (some 24 bytes for ImageNet's names), and per
// directory its path and children; it is safe for concurrent use once
// built.
type Catalog struct {
	Root  string
	kind  string // LayoutImageFolder or LayoutFiles
	dirs  []cdir // by id; 0 is the root
	files int
	byRel map[string]int32
	list  []FileID // ListCatalog: the root dataset's order
}

// names are a directory's file names back to back, in order: packed as
// the directory is listed, so that a walk of millions of files never
// holds a string per file.
type names struct {
	b   []byte
	end []uint32 // name k is b[end[k-1]:end[k]]
}

func packNames(ns []string) names {
	size := 0
	for _, n := range ns {
		size += len(n)
	}
	p := names{b: make([]byte, 0, size), end: make([]uint32, 0, len(ns))}
	for _, n := range ns {
		p.b = append(p.b, n...)
		p.end = append(p.end, uint32(len(p.b)))
	}
	return p
}

func (p names) len() int { return len(p.end) }

func (p names) at(k int) string {
	from := uint32(0)
	if k > 0 {
		from = p.end[k-1]
	}
	return string(p.b[from:p.end[k]])
}

// cdir is one directory of a walk, as os.walk(followlinks=True) reaches
// it: a directory reached twice through symlinks is two.
type cdir struct {
	rel    string  // relative to the root, "" for it
	parent int32   // -1 for the root
	subs   []int32 // subdirectories (symlinks to directories too), by name
	first  int32   // its files are first, first+1, ... first+count-1, by name
	count  int32
	names  names
}

// FileID names a file of a Catalog.
type FileID int32

// NewCatalog walks root for a layout kind, LayoutImageFolder (files with
// an image extension, as ImageFolder keeps them) or LayoutFiles (regular
// files, after symlinks), reporting to listed as NewLayout does.
func NewCatalog(root, kind string, listed func(n int)) (*Catalog, error) {
	var keep func(dir, name string) bool
	switch kind {
	case LayoutImageFolder:
		keep = func(dir, name string) bool { return hasExtension(dir+"/"+name, IMGExtensions) }
	case LayoutFiles:
		keep = func(dir, name string) bool {
			fi, err := os.Stat(filepath.Join(dir, name))
			return err == nil && fi.Mode().IsRegular()
		}
	default:
		return nil, fmt.Errorf("%w: a catalog lists %q or %q, not %q", ErrLayout, LayoutImageFolder, LayoutFiles, kind)
	}
	if _, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrLayout, err)
	}
	w := treeWalker{root: root, keep: keep, listed: listed, visited: new(atomic.Int64)}
	walked, err := w.walkAll()
	if err != nil {
		return nil, err
	}
	return build(root, kind, walked), nil
}

// ListCatalog is the catalog of the files an explicit list names
// (FileList: paths relative to root, or absolute under it), whose only
// dataset is the root, in the list's order.
func ListCatalog(root string, rels []string) *Catalog {
	byDir := map[string]*walked{}
	var dirs []string
	for _, r := range rels {
		r = strings.TrimPrefix(r, root+"/")
		d := parentRel(r)
		for p := d; ; p = parentRel(p) { // the directories above, for the tree
			if byDir[p] == nil {
				byDir[p] = &walked{rel: p}
				dirs = append(dirs, p)
			}
			if p == "" {
				break
			}
		}
		w := byDir[d]
		w.listed = append(w.listed, r[strings.LastIndexByte(r, '/')+1:])
	}
	slices.SortFunc(dirs, func(a, b string) int { // the root first, parents before children
		if c := strings.Count(a, "/") - strings.Count(b, "/"); a != "" && b != "" && c != 0 {
			return c
		}
		return pyCompare(a, b)
	})
	ws := make([]walked, 0, len(dirs))
	for _, d := range dirs {
		w := byDir[d]
		slices.SortFunc(w.listed, pyCompare)
		w.files, w.listed = packNames(slices.Compact(w.listed)), nil
		if d != "" {
			p := byDir[parentRel(d)]
			p.subs = append(p.subs, d[strings.LastIndexByte(d, '/')+1:])
		}
		ws = append(ws, *w)
	}
	for i := range ws {
		ws[i].subs = byDir[ws[i].rel].subs
	}
	c := build(root, LayoutListPrefix, ws)
	for _, r := range rels {
		if f, ok := c.Lookup(root + "/" + strings.TrimPrefix(r, root+"/")); ok {
			c.list = append(c.list, f)
		}
	}
	return c
}

// walked is one directory as the walk saw it.
type walked struct {
	rel    string
	subs   []string // names
	files  names    // kept, by name
	listed []string // ListCatalog's, before they are packed into files
}

type treeWalker struct {
	root    string
	keep    func(dir, name string) bool
	listed  func(n int)
	visited *atomic.Int64
}

// walkAll lists the root, then its subdirectories' trees, listers at a
// time (each directory read is a round trip to the shared filesystem).
func (w *treeWalker) walkAll() ([]walked, error) {
	top, err := w.list("")
	if err != nil {
		return nil, err
	}
	out := []walked{top}
	trees := make([][]walked, len(top.subs))
	errs := make([]error, len(top.subs))
	sem := make(chan struct{}, listers)
	var wg sync.WaitGroup
	for i, s := range top.subs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			trees[i], errs[i] = w.tree(s)
		}()
	}
	wg.Wait()
	for i := range trees {
		if errs[i] != nil {
			return nil, errs[i]
		}
		out = append(out, trees[i]...)
	}
	return out, nil
}

// tree lists rel and everything below it, depth first.
func (w *treeWalker) tree(rel string) ([]walked, error) {
	var out []walked
	stack := []string{rel}
	for len(stack) > 0 {
		r := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		d, err := w.list(r)
		if err != nil {
			return nil, err
		}
		if d.rel != r { // unreadable: os.walk leaves it out
			continue
		}
		out = append(out, d)
		for _, s := range d.subs {
			stack = append(stack, joinRel(r, s))
		}
	}
	return out, nil
}

// list reads one directory. A directory that cannot be read comes back
// with another rel (os.walk skips it); a walk past maxWalk entries fails.
func (w *treeWalker) list(rel string) (walked, error) {
	dir := filepath.Join(w.root, rel)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if rel == "" {
			return walked{}, fmt.Errorf("%w: %v", ErrLayout, err)
		}
		return walked{rel: "\x00"}, nil
	}
	if w.visited.Add(int64(len(entries))) > maxWalk {
		return walked{}, fmt.Errorf("%w: %s: more than %d entries (a symlink loop?)", ErrLayout, w.root, maxWalk)
	}
	if w.listed != nil {
		w.listed(len(entries))
	}
	d := walked{rel: rel}
	var files []string
	for _, e := range entries {
		switch {
		case isDirFollow(dir, e):
			d.subs = append(d.subs, e.Name())
		case w.keep(dir, e.Name()):
			files = append(files, e.Name())
		}
	}
	slices.SortFunc(d.subs, pyCompare)
	slices.SortFunc(files, pyCompare)
	d.files = packNames(files)
	return d, nil
}

// build packs a walk into a Catalog.
func build(root, kind string, ws []walked) *Catalog {
	c := &Catalog{Root: root, kind: kind, byRel: make(map[string]int32, len(ws))}
	for i, w := range ws {
		c.byRel[w.rel] = int32(i)
	}
	c.dirs = make([]cdir, len(ws))
	for i, w := range ws {
		d := cdir{rel: w.rel, parent: -1, first: int32(c.files), count: int32(w.files.len()), names: w.files}
		if i > 0 {
			d.parent = c.byRel[parentRel(w.rel)]
		}
		for _, s := range w.subs {
			if id, ok := c.byRel[joinRel(w.rel, s)]; ok {
				d.subs = append(d.subs, id)
			}
		}
		c.files += w.files.len()
		c.dirs[i] = d
	}
	return c
}

func parentRel(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return ""
}

// NumFiles is how many files the walk kept.
func (c *Catalog) NumFiles() int { return c.files }

// dirOf is the directory holding file f.
func (c *Catalog) dirOf(f FileID) int32 {
	// Monotone: directories hold consecutive ids in id order, empty ones
	// none; the first whose files end past f holds it.
	return int32(sort.Search(len(c.dirs), func(i int) bool { return c.dirs[i].first+c.dirs[i].count > int32(f) }))
}

// Rel is file f's path relative to the root.
func (c *Catalog) Rel(f FileID) string {
	d := &c.dirs[c.dirOf(f)]
	return joinRel(d.rel, d.names.at(int(int32(f)-d.first)))
}

// Path is file f's absolute path.
func (c *Catalog) Path(f FileID) string { return c.Root + "/" + c.Rel(f) }

// Lookup finds the file at an absolute path under the root.
func (c *Catalog) Lookup(path string) (FileID, bool) {
	rel, ok := strings.CutPrefix(path, c.Root+"/")
	if !ok {
		return 0, false
	}
	d, ok := c.byRel[parentRel(rel)]
	if !ok {
		return 0, false
	}
	name := rel[strings.LastIndexByte(rel, '/')+1:]
	dd := c.dirs[d]
	i := sort.Search(int(dd.count), func(i int) bool { return pyCompare(dd.names.at(i), name) >= 0 })
	if i < int(dd.count) && dd.names.at(i) == name {
		return FileID(dd.first) + FileID(i), true
	}
	return 0, false
}

// Under is the range [first, end) of the ids of the files under path: a
// directory of the catalog (its subtree's files are consecutive), the
// root or a directory above it (every file); empty for anything else.
func (c *Catalog) Under(path string) (first, end FileID) {
	if path == c.Root || path == "/" || strings.HasPrefix(c.Root, path+"/") {
		return 0, FileID(c.files)
	}
	rel, ok := strings.CutPrefix(path, c.Root+"/")
	d, known := c.byRel[rel]
	if !ok || !known {
		return 0, 0
	}
	lo, hi := int32(c.files), int32(0)
	for _, s := range c.subtree(d) {
		if dd := c.dirs[s]; dd.count > 0 {
			lo, hi = min(lo, dd.first), max(hi, dd.first+dd.count)
		}
	}
	if lo >= hi {
		return 0, 0
	}
	return FileID(lo), FileID(hi)
}

// Candidates are the directories (relative to the root, "" for it) that
// could be the dataset a script reads file f of: for ImageFolder, those f
// lies in a class folder of (its directory's ancestors); for SortedFiles,
// its directory and its ancestors. Nearest first.
func (c *Catalog) Candidates(f FileID) []string {
	if c.list != nil {
		return []string{""}
	}
	d := c.dirOf(f)
	if c.kind == LayoutImageFolder {
		d = c.dirs[d].parent
	}
	var out []string
	for ; d >= 0; d = c.dirs[d].parent {
		out = append(out, c.dirs[d].rel)
	}
	return out
}

// A Dataset is the file list a layout makes of one directory of a
// Catalog: its index i reads file File(i).
type Dataset struct {
	Dir   string // relative to the catalog's root
	cat   *Catalog
	n     int
	segs  []segment       // ImageFolder: directories in list order
	segOf map[int32]int32 // ImageFolder: directory → its segment
	order []FileID        // SortedFiles: the files in list order
	lo    FileID          // SortedFiles: the least file of order
	index []int32         // SortedFiles: index of file lo+k, -1 if none
}

// segment is one directory's files within a dataset's list, from start.
type segment struct {
	dir   int32
	start int32
}

// Dataset lists directory rel (relative to the root) as the catalog's
// layout would list it. An error wrapping ErrLayout says why it cannot
// be one (ImageFolder: no class folder, or a class without a file).
func (c *Catalog) Dataset(rel string) (*Dataset, error) {
	top, ok := c.byRel[rel]
	if !ok {
		return nil, fmt.Errorf("%w: %s/%s is not a directory of the walk", ErrLayout, c.Root, rel)
	}
	ds := &Dataset{Dir: rel, cat: c}
	if c.list != nil {
		if rel != "" {
			return nil, fmt.Errorf("%w: a file list is one dataset, its root's", ErrLayout)
		}
		ds.order, ds.n = c.list, len(c.list)
		ds.indexOrder()
		return ds, nil
	}
	if c.kind == LayoutFiles {
		for _, d := range c.subtree(top) {
			for i := int32(0); i < c.dirs[d].count; i++ {
				ds.order = append(ds.order, FileID(c.dirs[d].first+i))
			}
		}
		slices.SortFunc(ds.order, func(a, b FileID) int { return pyCompare(c.Rel(a), c.Rel(b)) })
		ds.n = len(ds.order)
		ds.indexOrder()
		return ds, nil
	}
	classes := c.dirs[top].subs
	if len(classes) == 0 {
		return nil, fmt.Errorf("%w: %s: no class folder", ErrLayout, filepath.Join(c.Root, rel))
	}
	ds.segOf = map[int32]int32{}
	for _, class := range classes {
		// torchvision walks a class and sorts os.walk's tuples by path.
		tree := c.subtree(class)
		slices.SortFunc(tree, func(a, b int32) int { return pyCompare(c.dirs[a].rel, c.dirs[b].rel) })
		n := ds.n
		for _, d := range tree {
			if c.dirs[d].count > 0 {
				ds.segOf[d] = int32(len(ds.segs))
				ds.segs = append(ds.segs, segment{d, int32(ds.n)})
				ds.n += int(c.dirs[d].count)
			}
		}
		if ds.n == n {
			cr := c.dirs[class].rel
			return nil, fmt.Errorf("%w: %s: class %q has no file with extension %s", ErrLayout,
				filepath.Join(c.Root, rel), cr[strings.LastIndexByte(cr, '/')+1:], strings.Join(IMGExtensions, ", "))
		}
	}
	return ds, nil
}

// indexOrder indexes ds.order: 4 bytes per file between its least and
// greatest (a subtree's files are consecutive), not a map entry per file.
// A file listed twice has its first index.
func (ds *Dataset) indexOrder() {
	if len(ds.order) == 0 {
		return
	}
	lo, hi := slices.Min(ds.order), slices.Max(ds.order)
	ds.lo, ds.index = lo, make([]int32, hi-lo+1)
	for k := range ds.index {
		ds.index[k] = -1
	}
	for i, f := range ds.order {
		if k := f - lo; ds.index[k] < 0 {
			ds.index[k] = int32(i)
		}
	}
}

// subtree is directory d and every directory below it.
func (c *Catalog) subtree(d int32) []int32 {
	out := []int32{d}
	for i := 0; i < len(out); i++ {
		out = append(out, c.dirs[out[i]].subs...)
	}
	return out
}

// Len is the dataset's length.
func (ds *Dataset) Len() int { return ds.n }

// File is the file index i of the dataset reads.
func (ds *Dataset) File(i int) FileID {
	if ds.order != nil {
		return ds.order[i]
	}
	k := sort.Search(len(ds.segs), func(k int) bool { return int(ds.segs[k].start) > i }) - 1
	s := ds.segs[k]
	return FileID(ds.cat.dirs[s.dir].first + int32(i) - s.start)
}

// Index is the index of file f in the dataset, if it is in it.
func (ds *Dataset) Index(f FileID) (int, bool) {
	if ds.order != nil {
		if f < ds.lo || int(f-ds.lo) >= len(ds.index) || ds.index[f-ds.lo] < 0 {
			return 0, false
		}
		return int(ds.index[f-ds.lo]), true
	}
	d := ds.cat.dirOf(f)
	k, ok := ds.segOf[d]
	if !ok {
		return 0, false
	}
	s := ds.segs[k]
	return int(s.start + int32(f) - ds.cat.dirs[d].first), true
}

// Rels lists the dataset's files' paths relative to its directory, in
// order: what the layout functions of that directory return.
func (ds *Dataset) Rels() []string {
	out := make([]string, ds.n)
	cut := len(joinRel(ds.Dir, "x")) - 1
	for i := range out {
		out[i] = ds.cat.Rel(ds.File(i))[cut:]
	}
	return out
}
