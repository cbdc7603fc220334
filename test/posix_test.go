package test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augur-hpc/augur/tiering"

	"golang.org/x/sys/unix"
)

// posixLayout is the dataset of TestPOSIX, relative to the case directory
// (dataset/... is the dataset root; outside/... is not under it).
//
//	dataset/a.bin  sub/b.txt  sub/c.bin  f.bin d.bin e.bin noat.bin dio.bin
//	dataset/empty.bin   dataset/x.bin (differs from outside/x.bin)
//	dataset/link.bin -> a.bin           dataset/zdir -> sub
//	dataset/out.bin -> ../outside/deep/y.bin
//	dataset/ext -> ../outside/deep      (so dataset/ext/.. is outside/)
func posixLayout(t *testing.T, c *Case) {
	random := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	var text bytes.Buffer
	for i := 0; i < 400; i++ {
		fmt.Fprintf(&text, "line %d,%s\n", i, strings.Repeat("x,y", i%97))
	}
	text.WriteString("last line without newline")
	c.Write("a.bin", random(300_000))
	c.Write("sub/b.txt", text.Bytes())
	c.Write("sub/c.bin", random(70_001))
	c.Write("f.bin", random(5_000))
	c.Write("d.bin", random(200_000))
	c.Write("e.bin", random(150_000))
	c.Write("noat.bin", random(10_000))
	c.Write("dio.bin", random(3*4096+100))
	c.Write("empty.bin", nil)
	c.Write("x.bin", []byte("inside the dataset\n"))
	out := filepath.Join(c.Dir, "outside")
	must(t, os.MkdirAll(filepath.Join(out, "deep"), 0o755))
	must(t, os.WriteFile(filepath.Join(out, "x.bin"), []byte("outside the dataset\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(out, "deep", "y.bin"), random(9_999), 0o644))
	for link, target := range map[string]string{
		"link.bin": "a.bin", "zdir": "sub", "out.bin": "../outside/deep/y.bin", "ext": "../outside/deep",
	} {
		must(t, os.Symlink(target, filepath.Join(c.Dataset, link)))
	}
}

// posixOp is one run of test/c/posix.c and what the kernel must have
// opened during it. Names are dataset-relative; "@x" is c.Dir/x.
type posixOp struct {
	op       string
	tier     []string // served from the RAM copy: copy opened, original not
	copy     []string // RAM copy opened (the original may be too)
	orig     []string // original opened, RAM copy not
	untouch  []string // neither opened
	either   []string // the original or the RAM copy (or both) opened
	notOrigs []string // originals (by real path) that must not be opened
}

var posixOps = []posixOp{
	{op: "fortify", tier: []string{"a.bin", "sub/c.bin"}},
	{op: "open", tier: []string{"a.bin", "empty.bin"}},
	{op: "openat", tier: []string{"a.bin", "sub/b.txt", "sub/c.bin"}},
	// opendir's descriptor comes from glibc's internal openat, which no
	// preload sees: openat relative to it is served from the original.
	{op: "opendir"},
	{op: "cwd", tier: []string{"a.bin", "sub/b.txt", "sub/c.bin"}},
	{op: "dots", tier: []string{"a.bin", "sub/b.txt", "sub/c.bin"},
		untouch: []string{"x.bin"}, notOrigs: nil},
	// link.bin and out.bin have copies of their own (warm follows file
	// links); zdir is the same directory as sub, which warm copies once.
	{op: "symlink", copy: []string{"link.bin", "out.bin"}, notOrigs: []string{"a.bin", "@outside/deep/y.bin"}},
	{op: "stdio", tier: []string{"a.bin", "sub/b.txt"}},
	// freopen lets glibc open the original, then swaps the copy in.
	{op: "freopen", tier: []string{"a.bin"}, copy: []string{"f.bin"}},
	{op: "dup", tier: []string{"a.bin", "d.bin"}},
	{op: "sendfile", tier: []string{"e.bin"}},
	{op: "cfr", tier: []string{"e.bin"}},
	{op: "vec", tier: []string{"a.bin"}},
	{op: "mmap", tier: []string{"a.bin"}},
	{op: "stat", tier: []string{"a.bin", "sub/c.bin"}, copy: []string{"link.bin"}},
	{op: "directory", untouch: []string{"a.bin"}},
	// O_PATH opens nothing; reopening through /proc/self/fd opens what
	// the O_PATH descriptor names: the original.
	{op: "opath", orig: []string{"a.bin"}},
	// O_NOFOLLOW must fail on a symlinked source (ELOOP, compared above),
	// which only the original can tell: the shim opens it there, and may
	// then serve the copy of a regular file. Bytes and errors decide.
	{op: "nofollow", either: []string{"sub/c.bin"}},
	{op: "cloexec", tier: []string{"a.bin"}},
	// So must O_NOATIME, which is refused (EPERM) to callers who do not
	// own the source, whoever owns the copy.
	{op: "noatime", orig: []string{"noat.bin"}},
	{op: "direct", tier: []string{"dio.bin"}},
}

// fortifiedSymbols must be referenced by the fortified build of posix.c,
// or the fortify wrappers are not being tested.
var fortifiedSymbols = []string{"__open_2", "__open64_2", "__openat_2", "__openat64_2",
	"__read_chk", "__pread_chk", "__fread_chk", "open", "open64", "openat", "openat64",
	"read", "pread", "readv", "preadv", "preadv64", "preadv2", "preadv64v2", "fopen",
	"fopen64", "freopen", "fread", "fread_unlocked", "fgets", "getline", "getdelim",
	"mmap", "mmap64", "dup", "dup2", "dup3", "fcntl", "fcntl64", "sendfile", "sendfile64",
	"copy_file_range", "close", "fclose", "closedir", "stat", "fstat", "lstat", "fstatat",
	"stat64", "fstat64", "lstat64", "fstatat64", "statx"}

// TestPOSIX runs every family of the intercepted API on a warmed dataset,
// without and with the shim: the outputs must be identical except for the
// documented st_dev/st_ino of descriptor-based stats, every byte must be
// the original's, and the kernel must have opened the RAM copies.
func TestPOSIX(t *testing.T) {
	c := NewCase(t)
	bin := compileTestC(t, t.TempDir(), "posix", "-O2", "-D_FORTIFY_SOURCE=2", "-ldl")
	nm, err := exec.Command("nm", "-D", "--undefined-only", bin).Output()
	must(t, err)
	for _, sym := range fortifiedSymbols {
		if !bytes.Contains(nm, []byte(" "+sym+"@")) {
			t.Errorf("posix binary does not reference %s; the build no longer tests it:\n%s", sym, nm)
		}
	}
	posixLayout(t, c)
	c.Warm()
	primeJob(c)

	for _, op := range posixOps {
		t.Run(op.op, func(t *testing.T) {
			scratch := t.TempDir()
			plain := c.RunPlain(30*time.Second, bin, op.op, c.Dataset, scratch)
			if plain.Err != nil {
				t.Fatalf("without the shim: %v\n%s%s", plain.Err, plain.Stdout, plain.Stderr)
			}
			obs := Observe(t, c.Dataset, c.RAM, filepath.Join(c.Dir, "outside"))
			got := c.Run(30*time.Second, bin, op.op, c.Dataset, scratch)
			obs.Stop()
			if got.Err != nil {
				t.Fatalf("with the shim: %v\n%s%s", got.Err, got.Stdout, got.Stderr)
			}
			if l := augurLines(got.Stderr); len(l) > 0 {
				t.Errorf("shim messages on stderr: %q", l)
			}
			checkPosixData(t, c, "without the shim", plain.Stdout)
			checkPosixData(t, c, "with the shim", got.Stdout)
			pRest, pIdent := splitIdent(plain.Stdout)
			gRest, gIdent := splitIdent(got.Stdout)
			if pRest != gRest {
				t.Errorf("output differs\nwithout the shim:\n%s\nwith the shim:\n%s", pRest, gRest)
			}
			checkIdent(t, c, pIdent, false)
			checkIdent(t, c, gIdent, true)
			checkPosixOpens(t, c, obs, op)
		})
	}
}

// checkPosixData checks every "data TAG REL OFF LEN FNV" line against
// bytes OFF..EOF of the original and requires at least one.
func checkPosixData(t *testing.T, c *Case, run, out string) {
	t.Helper()
	n := 0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "data" {
			continue
		}
		n++
		if len(f) != 6 {
			t.Errorf("%s: malformed line %q", run, l)
			continue
		}
		b, err := os.ReadFile(posixPath(c, f[2]))
		if err != nil {
			t.Errorf("%s: %s: %v", run, l, err)
			continue
		}
		off, _ := strconv.Atoi(f[3])
		if off > len(b) {
			t.Errorf("%s: %s: offset %d beyond %d bytes", run, l, off, len(b))
			continue
		}
		want := fmt.Sprintf("%d %s", len(b)-off, fnv64Hex(b[off:]))
		if got := f[4] + " " + f[5]; got != want {
			t.Errorf("%s: %s %s: got len+fnv %s, original has %s", run, f[1], f[2], got, want)
		}
	}
	if n == 0 && !strings.Contains(out, "stat ") && !strings.Contains(out, "entries") {
		t.Errorf("%s: no data lines:\n%s", run, out)
	}
}

func posixPath(c *Case, rel string) string {
	if r, ok := strings.CutPrefix(rel, "@"); ok {
		return filepath.Join(c.Dir, r)
	}
	return filepath.Join(c.Dataset, rel)
}

// splitIdent separates the "ident" lines from the rest of the output.
func splitIdent(out string) (rest string, ident []string) {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "ident ") {
			ident = append(ident, l)
		} else {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n"), ident
}

// checkIdent pins the st_dev/st_ino a descriptor-based stat reports.
// Without the shim they describe the original. With it, on a descriptor
// served from a tier, fstat/statx/fstatat(AT_EMPTY_PATH) describe the
// copy, unless the copy carries the user.augur.src xattr (the original's
// identity, recorded at publish): then the original, so that they agree
// with stat of the path (cp refuses a file whose two differ). Size, mode
// and mtime agree either way (the rest of the output compares them).
// Directories are never redirected.
func checkIdent(t *testing.T, c *Case, lines []string, shimmed bool) {
	t.Helper()
	for _, l := range lines {
		f := strings.Fields(l) // ident FN REL DEV INO
		if len(f) != 5 {
			t.Errorf("malformed %q", l)
			continue
		}
		src := posixPath(c, f[2])
		want := src
		if info, err := os.Stat(src); err == nil && info.Mode().IsRegular() && shimmed {
			cp := c.CopyOf(c.RAM, src)
			if n, err := unix.Getxattr(cp, tiering.IdentXattr, make([]byte, 64)); err != nil || n < 16 {
				want = cp
			}
		}
		var st syscall.Stat_t
		must(t, syscall.Stat(want, &st))
		if exp := fmt.Sprintf("%d %d", st.Dev, st.Ino); f[3]+" "+f[4] != exp {
			t.Errorf("%s (shim %v): dev ino %s %s, want those of %s: %s", f[1], shimmed, f[3], f[4], want, exp)
		}
	}
}

func checkPosixOpens(t *testing.T, c *Case, obs *Observer, op posixOp) {
	t.Helper()
	for _, rel := range op.tier {
		src := posixPath(c, rel)
		if n := obs.Opens(src); n != 0 {
			t.Errorf("%s: original opened %d times, want 0 (it has a RAM copy)", rel, n)
		}
		if obs.Opens(c.CopyOf(c.RAM, src)) == 0 {
			t.Errorf("%s: RAM copy never opened", rel)
		}
	}
	for _, rel := range op.copy {
		if obs.Opens(c.CopyOf(c.RAM, posixPath(c, rel))) == 0 {
			t.Errorf("%s: RAM copy never opened", rel)
		}
	}
	for _, rel := range op.orig {
		src := posixPath(c, rel)
		if obs.Opens(src) == 0 {
			t.Errorf("%s: original never opened", rel)
		}
		if n := obs.Opens(c.CopyOf(c.RAM, src)); n != 0 {
			t.Errorf("%s: RAM copy opened %d times, want 0", rel, n)
		}
	}
	for _, rel := range op.untouch {
		src := posixPath(c, rel)
		if n := obs.Opens(src) + obs.Opens(c.CopyOf(c.RAM, src)); n != 0 {
			t.Errorf("%s: original or copy opened %d times, want 0", rel, n)
		}
	}
	for _, rel := range op.either {
		src := posixPath(c, rel)
		o, cp := obs.Opens(src), obs.Opens(c.CopyOf(c.RAM, src))
		if o == 0 && cp == 0 {
			t.Errorf("%s: neither the original nor the RAM copy was opened", rel)
		}
	}
	for _, rel := range op.notOrigs {
		if n := obs.Opens(posixPath(c, rel)); n != 0 {
			t.Errorf("%s: opened %d times, want 0 (read through a link with a copy)", rel, n)
		}
	}
}
