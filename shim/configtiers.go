// The configured tiers: parsed from AUGUR_TIERS, the built-in defaults,
// and why a tier cannot be used (a Problem).

package shim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

// ParseTiers reads DIR[:SIZE],DIR[:SIZE],... (fastest first). Without a
// size a tier gets half of the free space of its filesystem.
func ParseTiers(s string) ([]tiering.Tier, error) {
	var tiers []tiering.Tier
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		dir, size := item, ""
		if i := strings.LastIndex(item, ":"); i > 0 {
			dir, size = item[:i], item[i+1:]
		}
		t := tiering.Tier{Path: dir}
		if size == "" {
			t.Capacity = freeSpace(dir) / 2
		} else {
			n, err := ParseSize(size)
			if err != nil {
				return nil, fmt.Errorf("tier %s: %w", dir, err)
			}
			t.Capacity = n
		}
		tiers = append(tiers, t)
	}
	if len(tiers) == 0 {
		return nil, errors.New("no tier given (format: DIR:SIZE,DIR:SIZE)")
	}
	return tiers, nil
}

// DefaultTiers is the built-in hierarchy: a RAM tier under /dev/shm
// holding at most a quarter of the memory available now, and a disk tier
// under the temporary directory holding at most half of its free space.
func DefaultTiers() []tiering.Tier {
	uid := os.Getuid()
	var tiers []tiering.Tier
	if info, err := os.Stat("/dev/shm"); err == nil && info.IsDir() {
		tiers = append(tiers, tiering.Tier{
			Path:     fmt.Sprintf("/dev/shm/augur-%d", uid),
			Capacity: tiering.MemAvailable() / 4,
		})
	}
	tmp := filepath.Join(os.TempDir(), fmt.Sprintf("augur-%d", uid))
	tiers = append(tiers, tiering.Tier{Path: tmp, Capacity: freeSpace(os.TempDir()) / 2})
	return tiers
}

// tierProblem says why t cannot be used beside the tiers kept so far and
// the dataset roots, or "". It cleans t's path.
func (c *Config) tierProblem(t *tiering.Tier) string {
	if !filepath.IsAbs(t.Path) {
		return fmt.Sprintf("tier %q is not an absolute path", t.Path)
	}
	t.Path = filepath.Clean(t.Path)
	for _, k := range c.Tiers {
		switch {
		case k.Path == t.Path || sameFile(k.Path, t.Path):
			return fmt.Sprintf("tier %s is listed twice", t.Path)
		case within(t.Path, k.Path):
			return fmt.Sprintf("tier %s is inside tier %s", t.Path, k.Path)
		case within(k.Path, t.Path):
			return fmt.Sprintf("tier %s contains tier %s", t.Path, k.Path)
		}
	}
	for _, r := range c.RootForms() {
		switch {
		case within(t.Path, r):
			return fmt.Sprintf("tier %s is inside dataset root %s", t.Path, r)
		case within(r, t.Path):
			return fmt.Sprintf("dataset root %s is inside tier %s", r, t.Path)
		}
	}
	if len(c.Tiers) == MaxTiers {
		return fmt.Sprintf("tier %s is one too many: at most %d tiers are supported", t.Path, MaxTiers)
	}
	if err := tiering.Inspect(*t); err != nil {
		return err.Error()
	}
	return ""
}

// sameFile says whether a and b exist and are one directory.
func sameFile(a, b string) bool {
	var sa, sb unix.Stat_t
	return unix.Stat(a, &sa) == nil && unix.Stat(b, &sb) == nil && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// capacityProblem warns of a capacity larger than the tier's filesystem.
func capacityProblem(t tiering.Tier) string {
	dir := t.Path
	var fs unix.Statfs_t
	if unix.Statfs(dir, &fs) != nil {
		if dir = filepath.Dir(dir); unix.Statfs(dir, &fs) != nil {
			return ""
		}
	}
	if size := int64(fs.Blocks) * fs.Bsize; t.Capacity > size {
		return fmt.Sprintf("warning: tier %s: capacity %s is more than its filesystem holds (%s); it fills up first",
			t.Path, FormatSize(t.Capacity), FormatSize(size))
	}
	return ""
}

// within says whether p is dir or inside it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// freeSpace is the space available to us on the filesystem holding dir
// (or its nearest existing parent).
func freeSpace(dir string) int64 {
	for d := dir; ; d = filepath.Dir(d) {
		var fs unix.Statfs_t
		if unix.Statfs(d, &fs) == nil {
			return int64(fs.Bavail) * fs.Bsize
		}
		if d == "/" || d == "." {
			return 0
		}
	}
}
