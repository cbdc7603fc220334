package test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// pyScript is the path of a helper script in test/python.
func pyScript(name string) string { return filepath.Join(repoRoot, "test", "python", name) }

// needPython fails the test unless Debian's python3 imports every module.
func needPython(t *testing.T, modules ...string) {
	t.Helper()
	out, err := exec.Command(Python, "-c", "import "+strings.Join(modules, ", ")).CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import %s (run test/deps.sh): %v\n%s", Python, strings.Join(modules, ", "), err, out)
	}
}

// needProgram fails the test unless name is on PATH.
func needProgram(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found (run test/deps.sh): %v", name, err)
	}
	return p
}

// fileSHA256 is the hex sha256 of a file's bytes, read by Go, without the
// shim.
func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// datasetFiles lists the regular files under dir, sorted.
func datasetFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	must(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			files = append(files, p)
		}
		return err
	}))
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatalf("no files under %s", dir)
	}
	return files
}

// assertServedFromRAM checks, from the kernel's account, that no original
// in files was opened and that each one's RAM copy was.
func assertServedFromRAM(t *testing.T, c *Case, obs *Observer, files []string) {
	t.Helper()
	for _, f := range files {
		if n := obs.Opens(f); n != 0 {
			t.Errorf("%s: original opened %d times, want 0 (it has a RAM copy)", f, n)
		}
		if n := obs.Opens(c.CopyOf(c.RAM, f)); n == 0 {
			t.Errorf("%s: RAM copy never opened", f)
		}
	}
}

// assertHaveRAMCopies checks that warming put every file in the RAM tier,
// so a test that expects copies to be served does not pass vacuously.
func assertHaveRAMCopies(t *testing.T, c *Case, files []string) {
	t.Helper()
	for _, f := range files {
		if _, err := os.Stat(c.CopyOf(c.RAM, f)); err != nil {
			t.Fatalf("%s has no RAM copy after warm: %v", f, err)
		}
	}
}

// mustPlain fails the test if a run without the shim failed.
func mustPlain(t *testing.T, r Result) Result {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("run without the shim: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	return r
}

// runIn is c.MustRun failing t, for subtests (c.MustRun fails c.T, the
// parent, which a subtest must not do).
func runIn(t *testing.T, c *Case, timeout time.Duration, name string, args ...string) Result {
	t.Helper()
	r := c.Run(timeout, name, args...)
	if r.Err != nil {
		t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", name, args, r.Err, r.Stdout, r.Stderr)
	}
	return r
}

// digests returns the one digest per file a helper printed.
func digests(t *testing.T, r Result, files []string) []string {
	t.Helper()
	got := strings.Fields(r.Stdout)
	if len(got) != len(files) {
		t.Fatalf("got %d digests, want %d:\n%s%s", len(got), len(files), r.Stdout, r.Stderr)
	}
	return got
}

// npyPayloadSHA256 is the sha256 of the data of a version 1 .npy file: the
// bytes after its header, which np.load returns as a C-order array.
func npyPayloadSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" || b[6] != 1 {
		t.Fatalf("%s: not a version 1 .npy file", path)
	}
	start := 10 + int(binary.LittleEndian.Uint16(b[8:10]))
	if !strings.Contains(string(b[10:start]), "'fortran_order': False") {
		t.Fatalf("%s: not C order", path)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b[start:]))
}

// TestNumpyPILReaders reads warmed dataset files with numpy and PIL, the
// way data pipelines do, and checks that every file came from its RAM copy
// (inotify: the original never opened) with every byte right: raw readers
// against the file's sha256, np.load against the .npy payload, PIL's
// decoded pixels against a run without the shim.
func TestNumpyPILReaders(t *testing.T) {
	needPython(t, "numpy", "PIL")
	c := NewCase(t)
	gen := pyScript("gen_media.py")
	mustPlain(t, c.RunPlain(time.Minute, Python, gen, "npy", filepath.Join(c.Dataset, "npy"), "5"))
	mustPlain(t, c.RunPlain(time.Minute, Python, gen, "img", filepath.Join(c.Dataset, "img"), "3", "png", "jpg"))
	// Raw readers also get odd sizes: 1 byte, one page and one more, 1 MiB and 3.
	c.Write("raw/one.bin", []byte{0x5a})
	raw := append(c.RandomFiles("raw", 2, 4097), c.RandomFiles("raw/big", 1, 1<<20+3)...)
	raw = append(raw, filepath.Join(c.Dataset, "raw/one.bin"))
	npys := datasetFiles(t, filepath.Join(c.Dataset, "npy"))
	imgs := datasetFiles(t, filepath.Join(c.Dataset, "img"))
	// Images decoded without the shim, from the originals, before warming.
	pilWant := digests(t, mustPlain(t, c.RunPlain(time.Minute, Python,
		append([]string{pyScript("np_pil_readers.py"), "pil"}, imgs...)...)), imgs)
	c.Warm()
	all := append(append(append([]string{}, raw...), npys...), imgs...)
	assertHaveRAMCopies(t, c, all)

	rawWant := func(files []string) []string {
		var w []string
		for _, f := range files {
			w = append(w, fileSHA256(t, f))
		}
		return w
	}
	npyWant := func(files []string) []string {
		var w []string
		for _, f := range files {
			w = append(w, npyPayloadSHA256(t, f))
		}
		return w
	}
	cases := []struct {
		method string
		files  []string
		want   []string
	}{
		{"memmap", append(append([]string{}, raw...), npys...), rawWant(append(append([]string{}, raw...), npys...))},
		{"fromfile", append(append([]string{}, raw...), imgs...), rawWant(append(append([]string{}, raw...), imgs...))},
		{"npload", npys, npyWant(npys)},
		{"npload_mmap", npys, npyWant(npys)},
		{"pil", imgs, pilWant},
	}
	for _, tc := range cases {
		t.Run(tc.method, func(t *testing.T) {
			obs := Observe(t, c.Dataset, c.RAM)
			r := runIn(t, c, time.Minute, Python, append([]string{pyScript("np_pil_readers.py"), tc.method}, tc.files...)...)
			obs.Stop()
			got := digests(t, r, tc.files)
			for i, f := range tc.files {
				if got[i] != tc.want[i] {
					t.Errorf("%s: %s digest %s, want %s", f, tc.method, got[i], tc.want[i])
				}
			}
			assertServedFromRAM(t, c, obs, tc.files)
		})
	}
}
