package seed

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
)

// ReadOrder parses an order file, the access order of one rank written by
// hand or recorded from a framework this package does not model:
//
//	# epoch 0
//	train/cat/001.jpg
//	17
//	train/dog/003.jpg
//
//	# epoch 1
//	...
//
// Each line is one sample, either a decimal index into the dataset layout or
// a path. A blank (or all-space) line or a comment line "# epoch N" ends the current epoch
// (empty epochs are not made; N is for the reader only); other lines that
// start with '#' are comments. A path is looked up in layout (the list a
// Layout function returns, relative to the dataset root); an absolute path
// under root is first made relative to it. Only "\n" or "\r\n" ends a line:
// spaces belong to the path.
//
// len(layout) bounds the indices; with a nil layout any index ≥ 0 is taken
// and a path is an error.
func ReadOrder(r io.Reader, layout []string, root string) (*OrderFile, error) {
	byPath := make(map[string]int, len(layout))
	for i, p := range layout {
		byPath[p] = i
	}
	var (
		epochs [][]int
		cur    []int
		lineNo int
	)
	flush := func() {
		if len(cur) > 0 {
			epochs = append(epochs, cur)
			cur = nil
		}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		lineNo++
		line := strings.TrimSuffix(sc.Text(), "\r")
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case strings.HasPrefix(line, "#"):
			if isEpochMarker(line) {
				flush()
			}
		default:
			i, err := resolveEntry(line, byPath, layout, root)
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: %v", ErrOrderFile, lineNo, err)
			}
			cur = append(cur, i)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d: %v", ErrOrderFile, lineNo+1, err)
	}
	flush()
	if len(epochs) == 0 {
		return nil, fmt.Errorf("%w: no sample in the file", ErrOrderFile)
	}
	return &OrderFile{epochs: epochs}, nil
}

// isEpochMarker reports whether a comment line is "# epoch N".
func isEpochMarker(line string) bool {
	f := strings.Fields(strings.TrimPrefix(line, "#"))
	return len(f) == 2 && strings.EqualFold(f[0], "epoch") && leadingDigits(f[1]) == f[1] && f[1] != ""
}

// resolveEntry turns one line into a dataset index.
func resolveEntry(line string, byPath map[string]int, layout []string, root string) (int, error) {
	if leadingDigits(line) == line {
		i, err := strconv.Atoi(line)
		if err != nil {
			return 0, fmt.Errorf("index %q: %v", line, err)
		}
		if layout != nil && i >= len(layout) {
			return 0, fmt.Errorf("index %d is past the %d files of the layout", i, len(layout))
		}
		return i, nil
	}
	if layout == nil {
		return 0, fmt.Errorf("path %q needs a dataset layout to become an index", line)
	}
	p := line
	if root != "" && path.IsAbs(p) {
		r := strings.TrimSuffix(root, "/") + "/"
		if strings.HasPrefix(p, r) {
			p = p[len(r):]
		}
	}
	i, ok := byPath[p]
	if !ok {
		return 0, fmt.Errorf("path %q is not in the dataset layout", line)
	}
	return i, nil
}
