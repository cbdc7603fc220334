package test

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// errLayout makes the same tree under the dataset and under plain/, a
// directory the shim does not accelerate. Files are root's; secret.bin is
// 0600 and private/ is 0700, so nobody may not read them.
func errLayout(t *testing.T, root string) {
	random := make([]byte, 20_000)
	rand.Read(random)
	files := map[string]os.FileMode{"control.bin": 0o644, "a.bin": 0o644, "w.bin": 0o644, "excl.bin": 0o644,
		"secret.bin": 0o600, "private/p.bin": 0o644, "sub/c.bin": 0o644}
	for rel, mode := range files {
		p := filepath.Join(root, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, random[:len(rel)*1000], mode))
		must(t, os.Chmod(p, mode))
	}
	must(t, os.Chmod(filepath.Join(root, "private"), 0o700))
	must(t, os.Symlink("a.bin", filepath.Join(root, "link.bin")))
}

// errLinks are made after warm, which refuses trees it cannot walk.
func errLinks(t *testing.T, root string) {
	must(t, os.Symlink("loop2", filepath.Join(root, "loop1")))
	must(t, os.Symlink("loop1", filepath.Join(root, "loop2")))
	must(t, os.Symlink("nowhere", filepath.Join(root, "dangling")))
}

// errCases are the cases of test/c/errs.c on one tree. The comment says
// what libc answers there as root; as nobody some become EACCES/EPERM.
func errCases(base string) []string {
	p := func(rel string) string { return filepath.Join(base, rel) }
	long := p(strings.Repeat("n", 300))
	tooLong := p(strings.Repeat("d/", 2100) + "a.bin")
	return []string{
		"open r " + p("control.bin"),                // ok: the control case
		"open r " + p("a.bin"),                      // ok
		"open r " + p("missing"),                    // ENOENT
		"open r " + p("missing/x"),                  // ENOENT
		"open r " + p("a.bin/x"),                    // ENOTDIR
		"open r " + p("a.bin/"),                     // ENOTDIR
		"open r " + p("a.bin/."),                    // ENOTDIR
		"open r " + p("sub/"),                       // ok: a directory
		"open r,dir " + p("a.bin"),                  // ENOTDIR
		"openat-file " + p("a.bin"),                 // ENOTDIR
		"open w " + p("sub"),                        // EISDIR
		"open rw " + p("sub"),                       // EISDIR
		"open w,creat " + p("sub"),                  // EISDIR
		"open r,nofollow " + p("link.bin"),          // ELOOP
		"open r " + p("loop1"),                      // ELOOP
		"open r " + p("loop1/../a.bin"),             // ELOOP
		"open r " + p("dangling"),                   // ENOENT
		"open r,nofollow " + p("dangling"),          // ELOOP
		"open w,creat,excl " + p("excl.bin"),        // EEXIST
		"open r " + long,                            // ENAMETOOLONG
		"open r " + tooLong,                         // ENAMETOOLONG
		"open r,noatime " + p("a.bin"),              // ok; nobody: EPERM (not the owner)
		"open r " + p("secret.bin"),                 // ok; nobody: EACCES
		"open r " + p("private/p.bin"),              // ok; nobody: EACCES (directory 0700)
		"open r " + p("private/missing"),            // ENOENT; nobody: EACCES
		"open w " + p("w.bin"),                      // ok; nobody: EACCES
		"fopen r " + p("missing"),                   // ENOENT
		"fopen r " + p("sub"),                       // EISDIR (from fread)
		"fopen r " + p("a.bin/"),                    // ENOTDIR
		"fopen r " + p("secret.bin"),                // ok; nobody: EACCES
		"fopen re " + p("private/p.bin"),            // ok; nobody: EACCES
		"stat " + p("missing"),                      // ENOENT
		"stat " + p("loop1"),                        // ELOOP
		"lstat " + p("private/p.bin"),               // ok; nobody: EACCES
		"opendir " + p("a.bin"),                     // ENOTDIR
		"opendir " + p("private"),                   // ok; nobody: EACCES
		"read-dir " + p("sub"),                      // EISDIR
		"read-opath " + p("a.bin"),                  // EBADF
		"write-ro " + p("a.bin"),                    // EBADF
		"mmap-write " + p("a.bin"),                  // EACCES
		"ftruncate-ro " + p("a.bin"),                // EINVAL
		"close-twice " + p("a.bin"),                 // EBADF
		"dup3-same " + p("a.bin"),                   // EINVAL
		"truncate " + p("sub"),                      // EISDIR
		"truncate " + p("missing"),                  // ENOENT
		"unlink " + p("missing"),                    // ENOENT
		"rename " + p("missing") + " " + p("other"), // ENOENT
	}
}

// badFDCases need no tree: descriptors that are not open.
var badFDCases = []string{"read -1", "read 999", "pread 999", "readv 999", "close 999",
	"close -1", "dup 999", "dup2 999", "dup3 999", "fcntl-dupfd 999", "fstat 999",
	"mmap 999", "sendfile 999", "copy_file_range 999", "fdopen 999"}

// TestErrors runs one table of failing (and a few succeeding) calls on
// dataset and non-dataset paths, without and with the shim, as root and as
// nobody: every line — errno name, bytes read, whether errno was left
// alone on success — must be identical. The shim must really be active in
// the runs: the control case reads control.bin, and its RAM copy must be what the
// kernel opened.
func TestErrors(t *testing.T) {
	c := NewCase(t)
	plainRoot := filepath.Join(c.Dir, "plain")
	openUp(t, c)
	errLayout(t, c.Dataset)
	errLayout(t, plainRoot)
	c.Warm()
	errLinks(t, c.Dataset)
	errLinks(t, plainRoot)
	binDir := filepath.Join(c.Dir, "bin")
	must(t, os.Mkdir(binDir, 0o755))
	bin := compileTestC(t, binDir, "errs")
	cases := append(append(errCases(c.Dataset), errCases(plainRoot)...), badFDCases...)
	control := filepath.Join(c.Dataset, "control.bin")
	root := c.Env

	for _, who := range []string{"root", "nobody"} {
		t.Run(who, func(t *testing.T) {
			c.Env = append([]string(nil), root...)
			plainArgv := append([]string{bin}, cases...)
			shimArgv := plainArgv
			ram := c.RAM
			if who == "nobody" {
				// A job of nobody's own, with tiers of nobody's own: a job
				// trusts no other user's state or copies.
				c.Set("AUGUR_JOB=" + c.job() + "-nobody")
				t.Cleanup(func() {
					removeJobState(c.job())
				})
				ram = nobodyTiers(t, c)
				warmAsNobody(t, c)
				plainArgv = nobody.argv(false, plainArgv...)
				shimArgv = nobody.argv(true, shimArgv...)
				primeJob(c, true)
			} else {
				primeJob(c)
			}
			plain := c.RunPlain(time.Minute, plainArgv[0], plainArgv[1:]...)
			if plain.Err != nil {
				t.Fatalf("without the shim: %v\n%s%s", plain.Err, plain.Stdout, plain.Stderr)
			}
			obs := Observe(t, c.Dataset, ram)
			var got Result
			if who == "nobody" {
				got = c.RunPlain(time.Minute, shimArgv[0], shimArgv[1:]...)
			} else {
				got = c.Run(time.Minute, shimArgv[0], shimArgv[1:]...)
			}
			obs.Stop()
			if got.Err != nil {
				t.Fatalf("with the shim: %v\n%s%s", got.Err, got.Stdout, got.Stderr)
			}
			if n := strings.Count(plain.Stdout, "\n"); n != len(cases) {
				t.Fatalf("%d result lines for %d cases:\n%s", n, len(cases), plain.Stdout)
			}
			pl, gl := strings.Split(plain.Stdout, "\n"), strings.Split(got.Stdout, "\n")
			for i := range pl {
				if pl[i] != gl[i] {
					t.Errorf("case %q\n  without the shim: %s\n  with the shim:    %s",
						cases[i], pl[i], gl[i])
				}
			}
			if !strings.Contains(pl[0], ": ok ") {
				t.Errorf("control case failed: %s", pl[0])
			}
			if n := obs.Opens(control); n != 0 {
				t.Errorf("control: original opened %d times; the shim was not serving", n)
			}
			if obs.Opens(c.CopyOf(ram, control)) == 0 {
				t.Errorf("control: RAM copy never opened; the shim was not serving")
			}
			if who == "root" {
				if l := augurLines(got.Stderr); len(l) > 0 {
					t.Errorf("shim messages on stderr: %q", l)
				}
			}
			t.Logf("%d cases; outcomes: %s", len(cases), strings.Join(uniqueErrnos(pl), " "))
		})
	}
}

// uniqueErrnos lists the distinct outcomes of a run, for the log.
func uniqueErrnos(lines []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) >= 3 && !seen[f[2]] {
			seen[f[2]] = true
			out = append(out, f[2])
		}
	}
	return out
}
