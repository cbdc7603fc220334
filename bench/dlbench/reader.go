package dlbench

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ReaderSource is the directory of the reader's C sources, relative to
// the repository root.
const ReaderSource = "bench/c/dlreader"

// FindReader returns the dlreader binary to run: explicit when given;
// else "dlreader" beside the running executable (make builds it into
// build/); else one compiled with gcc from ReaderSource, found above the
// working directory or the executable, into the user cache directory
// (keyed by the source's hash, so an edited source is rebuilt).
func FindReader(explicit string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("reader: %v", err)
		}
		return filepath.Abs(explicit)
	}
	exe, _ := os.Executable()
	if exe != "" {
		if p := filepath.Join(filepath.Dir(exe), "dlreader"); isExecutable(p) {
			return p, nil
		}
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe != "" {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, s := range starts {
		for d := s; ; d = filepath.Dir(d) {
			src := filepath.Join(d, filepath.FromSlash(ReaderSource))
			if _, err := os.Stat(src); err == nil {
				return BuildReader(src, "")
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return "", errors.New("no dlreader: build it with make (build/dlreader), give --reader, or run from the source tree")
}

// BuildReader compiles the reader's sources, the .c files of the
// directory src, with gcc into out, or, when out is empty, into the user
// cache directory under a name derived from the sources' hash (reused
// when it exists).
func BuildReader(src, out string) (string, error) {
	srcs, err := filepath.Glob(filepath.Join(src, "*.[ch]"))
	if err != nil || len(srcs) == 0 {
		return "", fmt.Errorf("no reader sources in %s (%v)", src, err)
	}
	h := sha256.New()
	var cfiles []string
	for _, f := range srcs {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		h.Write(data)
		if filepath.Ext(f) == ".c" {
			cfiles = append(cfiles, f)
		}
	}
	if out == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		out = filepath.Join(cache, "augur", "dlreader-"+hex.EncodeToString(h.Sum(nil)[:8]))
		if isExecutable(out) {
			return out, nil
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return "", err
		}
	}
	tmp := out + fmt.Sprintf(".tmp%d", os.Getpid())
	cmd := exec.Command("gcc", append([]string{"-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o", tmp}, cfiles...)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("compiling %s: %v\n%s", src, err, msg)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	return out, nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
