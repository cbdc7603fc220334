package tiering

import (
	"errors"
	"path/filepath"
	"strings"
)

// Subdirectories of a tier.
const (
	filesDir = "files" // published copies, mirroring absolute source paths
	tmpDir   = "tmp"   // copies being written
	lockName = "lock"  // the writer lock
	dirMark  = "@"     // appended to every directory component of a copy path
)

// ErrNotCopyable is returned for a source path that has no copy path: not
// absolute, or a name ending in the directory mark.
var ErrNotCopyable = errors.New("path cannot be tiered")

// CopyPath maps an absolute, clean source path to its copy in tier:
// /pfs/ds/cls/a.jpg → <tier>/files/pfs@/ds@/cls@/a.jpg. Marking every
// directory keeps a source directory from ever matching a copied file, so
// a read-only open of a directory never lands on a tier directory. It
// must agree with augur_tier_path in intercept.c.
func CopyPath(tier, source string) (string, error) {
	if !filepath.IsAbs(source) || source != filepath.Clean(source) || source == "/" {
		return "", ErrNotCopyable
	}
	parts := strings.Split(source[1:], "/")
	last := parts[len(parts)-1]
	if strings.HasSuffix(last, dirMark) {
		return "", ErrNotCopyable
	}
	for i := range parts[:len(parts)-1] {
		parts[i] += dirMark
	}
	return filepath.Join(tier, filesDir, filepath.Join(parts...)), nil
}

// SourcePath is the inverse of CopyPath for a path under <tier>/files.
func SourcePath(tier, copyPath string) (string, bool) {
	rel, err := filepath.Rel(filepath.Join(tier, filesDir), copyPath)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return "", false
	}
	parts := strings.Split(rel, "/")
	for i := range parts[:len(parts)-1] {
		if !strings.HasSuffix(parts[i], dirMark) {
			return "", false
		}
		parts[i] = strings.TrimSuffix(parts[i], dirMark)
	}
	return "/" + strings.Join(parts, "/"), true
}
