package test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// coreutilsFiles makes dataset files of awkward sizes (empty, one byte,
// a page and one more, 1 MiB and three) and warms them into RAM.
func coreutilsFiles(c *Case) []string {
	c.T.Helper()
	files := []string{c.Write("cu/empty.bin", nil), c.Write("cu/one.bin", []byte{0xa5})}
	files = append(files, c.RandomFiles("cu/page", 2, 4097)...)
	files = append(files, c.RandomFiles("cu/big", 1, 1<<20+3)...)
	c.Warm()
	assertHaveRAMCopies(c.T, c, files)
	return files
}

// TestCoreutilsCat: cat reads the RAM copies (read(2)) and prints exactly
// the originals' bytes.
func TestCoreutilsCat(t *testing.T) {
	c := NewCase(t)
	files := coreutilsFiles(c)
	obs := Observe(t, c.Dataset, c.RAM)
	r := c.MustRun(time.Minute, needProgram(t, "cat"), files...)
	obs.Stop()
	want := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		must(t, err)
		want.Write(b)
	}
	if got := sha256.Sum256([]byte(r.Stdout)); fmt.Sprintf("%x", got) != fmt.Sprintf("%x", want.Sum(nil)) {
		t.Errorf("cat printed %d bytes that differ from the originals", len(r.Stdout))
	}
	assertServedFromRAM(t, c, obs, files)
}

// TestCoreutilsSha256sum: sha256sum over the RAM copies prints the
// originals' digests under the originals' names.
func TestCoreutilsSha256sum(t *testing.T) {
	c := NewCase(t)
	files := coreutilsFiles(c)
	obs := Observe(t, c.Dataset, c.RAM)
	r := c.MustRun(time.Minute, needProgram(t, "sha256sum"), files...)
	obs.Stop()
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != len(files) {
		t.Fatalf("sha256sum printed %d lines, want %d:\n%s", len(lines), len(files), r.Stdout)
	}
	for i, f := range files {
		if want := fileSHA256(t, f) + "  " + f; lines[i] != want {
			t.Errorf("sha256sum printed %q, want %q", lines[i], want)
		}
	}
	assertServedFromRAM(t, c, obs, files)
}

// runCp runs cp under the shim and fails t if it fails.
func runCp(t *testing.T, c *Case, cp string, args ...string) {
	t.Helper()
	r := c.Run(time.Minute, cp, args...)
	if r.Err == nil {
		return
	}
	hint := ""
	if strings.Contains(r.Stderr, "replaced while being copied") {
		// coreutils' copy_reg compares st_dev/st_ino of stat(2) on the
		// source name with fstat(2) on the descriptor it opened.
		hint = "\n(stat(2) of the name describes the original, fstat(2) of the descriptor the shim " +
			"served describes the tier copy: a different st_dev/st_ino, so cp believes the " +
			"file was replaced. Programs must see the original's identity on both.)"
	}
	t.Fatalf("cp %v: %v\nstderr:\n%s%s", args, r.Err, r.Stderr, hint)
}

// TestCoreutilsCp: cp copies the RAM copies byte for byte. Into /tmp
// (ext4), FICLONE and copy_file_range fail with EXDEV and cp falls back
// to read(2); into /dev/shm, the tmpfs of the RAM tier, copy_file_range
// succeeds, so both of cp's data paths run. The destination is outside
// the dataset and must be written exactly as without the shim.
func TestCoreutilsCp(t *testing.T) {
	c := NewCase(t)
	files := coreutilsFiles(c)
	cp := needProgram(t, "cp")
	shm, err := os.MkdirTemp("/dev/shm", "augur-test-cp-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(shm) })
	for _, tc := range []struct {
		name, dst string
		opts      []string
	}{
		{"to-ext4", filepath.Join(c.Dir, "out"), nil},
		{"to-tmpfs", filepath.Join(shm, "out"), nil},
		{"reflink-never", filepath.Join(c.Dir, "out-noreflink"), []string{"--reflink=never"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			must(t, os.MkdirAll(tc.dst, 0o755))
			obs := Observe(t, c.Dataset, c.RAM)
			// Each file gets its own name under dst: several share a base name.
			for i, f := range files {
				args := append(append([]string{}, tc.opts...), f, filepath.Join(tc.dst, fmt.Sprint(i)))
				runCp(t, c, cp, args...)
			}
			obs.Stop()
			for i, f := range files {
				if got, want := fileSHA256(t, filepath.Join(tc.dst, fmt.Sprint(i))), fileSHA256(t, f); got != want {
					t.Errorf("cp %s: copy has sha256 %s, want %s", f, got, want)
				}
			}
			assertServedFromRAM(t, c, obs, files)
		})
	}
	// cp -r walks a dataset directory (directory fds, openat relative to
	// them or full paths) and must still land on the copies.
	t.Run("recursive", func(t *testing.T) {
		dst := filepath.Join(c.Dir, "tree")
		obs := Observe(t, c.Dataset, c.RAM)
		runCp(t, c, cp, "-r", filepath.Join(c.Dataset, "cu"), dst)
		obs.Stop()
		for _, f := range files {
			rel, err := filepath.Rel(filepath.Join(c.Dataset, "cu"), f)
			must(t, err)
			if got, want := fileSHA256(t, filepath.Join(dst, rel)), fileSHA256(t, f); got != want {
				t.Errorf("cp -r %s: copy has sha256 %s, want %s", f, got, want)
			}
		}
		assertServedFromRAM(t, c, obs, files)
	})
}
