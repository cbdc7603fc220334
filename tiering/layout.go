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
	// TrashDir holds subtrees of files/ taken out of service by a
	// directory's rename or removal (preload/invalidate.c moves them
	// here, one rename each), until EmptyTrash removes them.
	TrashDir = "trash"
	lockName = "lock" // the writer lock
	dirMark  = "@"    // appended to every directory component of a copy path
)

// ErrNotCopyable is returned for a source path that has no copy path: not
// absolute, or a name ending in the directory mark.
var ErrNotCopyable = errors.New("path cannot be tiered")

// CopyPath maps an absolute, clean source path to its copy in tier:
// /pfs/ds/cls/a.jpg → <tier>/files/pfs@/ds@/cls@/a.jpg. Marking every
// directory keeps a source directory from ever matching a copied file, so
// a read-only open of a directory never lands on a tier directory. It
// must agree with augur_tier_path in preload/paths.c.
func CopyPath(tier, source string) (string, error) {
	dir, leaf, err := copyRel(source)
	if err != nil {
		return "", err
	}
	return tier + "/" + dir + "/" + leaf, nil
}

// copyRel is the copy of source relative to its tier: the directory
// holding it (files/pfs@/ds@/cls@) and its name (a.jpg).
func copyRel(source string) (dir, leaf string, err error) {
	if !filepath.IsAbs(source) || source != filepath.Clean(source) || source == "/" {
		return "", "", ErrNotCopyable
	}
	parts := strings.Split(source[1:], "/")
	leaf = parts[len(parts)-1]
	if strings.HasSuffix(leaf, dirMark) {
		return "", "", ErrNotCopyable
	}
	parts = parts[:len(parts)-1]
	for i := range parts {
		parts[i] += dirMark
	}
	return strings.Join(append([]string{filesDir}, parts...), "/"), leaf, nil
}

// SourcePath is the inverse of CopyPath for a path under <tier>/files.
func SourcePath(tier, copyPath string) (string, bool) {
	rel, err := filepath.Rel(tier, copyPath)
	if err != nil {
		return "", false
	}
	return sourceOf(rel)
}

// sourceOf is the source of the copy at rel (files/pfs@/a.jpg) in a tier.
func sourceOf(rel string) (string, bool) {
	rel, ok := strings.CutPrefix(rel, filesDir+"/")
	if !ok || rel == "" {
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
