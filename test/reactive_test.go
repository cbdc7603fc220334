package test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The reactive policy serves a first read from the original, copies the
// file in the background, and serves later opens from the copy. The
// reader runs two epochs in one process (whose Go half leads the job);
// between them the test waits for the copies and switches observers, so
// epoch 2 is observed alone.
func TestReactiveCopiesOnFirstRead(t *testing.T) {
	c := NewCase(t)
	c.Set("AUGUR_POLICY=reactive")
	c.Set("AUGUR_TIERS=" + c.RAM + ":300KiB," + c.Disk + ":10MiB")
	files := c.RandomFiles("cls", 6, 100_000)
	want := sha256Of(t, files)
	var copies []string
	for i, f := range files {
		tier := c.RAM
		if i >= 3 { // 300 KiB of RAM hold the first three 100 kB files
			tier = c.Disk
		}
		copies = append(copies, c.CopyOf(tier, f))
	}
	script := `
import hashlib, sys
for line in sys.stdin:
    print(" ".join(hashlib.sha256(open(p, 'rb').read()).hexdigest() for p in sys.argv[1:]), flush=True)
`
	cmd := exec.Command(Python, append([]string{"-c", script}, files...)...)
	cmd.Env = append(append(os.Environ(), c.Env...), "LD_PRELOAD="+Lib)
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	epoch := func(n int) {
		t.Helper()
		fmt.Fprintln(stdin, "go")
		if !lines.Scan() {
			t.Fatalf("epoch %d: no output; stderr:\n%s", n, stderr.String())
		}
		for i, got := range strings.Fields(lines.Text()) {
			if got != want[files[i]] {
				t.Errorf("epoch %d: %s: wrong bytes", n, files[i])
			}
		}
	}
	epoch(1)
	waitFor(t, copies)
	obs := Observe(t, c.Dataset)
	epoch(2)
	stdin.Close()
	must(t, cmd.Wait())
	obs.Stop()
	for i, f := range files {
		if n := obs.Opens(f); n != 0 {
			t.Errorf("%s: original opened %d times in epoch 2, want 0 (copy %s)", f, n, copies[i])
		}
		b, err := os.ReadFile(copies[i])
		if err != nil || fmt.Sprintf("%x", sha256.Sum256(b)) != want[f] {
			t.Errorf("%s: copy %s missing or wrong (%v)", f, copies[i], err)
		}
	}
}

// waitFor waits until every path exists (bounded: a copy that never
// comes is a failure, not a hang).
func waitFor(t *testing.T, paths []string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, p := range paths {
		for {
			if _, err := os.Stat(p); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never published", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// A descriptor opened on the original before its copy exists moves to the
// copy once it is published, keeping its offset: the rest of the file is
// read from the tier and every byte is right.
func TestReactiveDescriptorMovesToCopy(t *testing.T) {
	c := NewCase(t)
	c.Set("AUGUR_POLICY=reactive")
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	f := c.Write("big/records.bin", data)
	cp := c.CopyOf(c.RAM, f)
	prog := filepath.Join(c.Dir, "partial")
	src := `
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
	static unsigned char buf[1 << 20];
	if (argc != 3) return 2;
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0) { perror("open"); return 1; }
	ssize_t n = read(fd, buf, 4096); /* a partial read of a large file */
	struct stat st;
	for (int i = 0; i < 6000 && stat(argv[2], &st) != 0; i++) usleep(10000);
	if (stat(argv[2], &st) != 0) { fprintf(stderr, "copy never published\n"); return 1; }
	ssize_t m;
	while ((m = read(fd, buf + n, sizeof(buf) - n)) > 0) n += m;
	unsigned char *p = mmap(NULL, sizeof(buf), PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) { perror("mmap"); return 1; }
	fwrite(buf, 1, n, stdout);
	fwrite(p, 1, sizeof(buf), stdout);
	return 0;
}`
	must(t, os.WriteFile(prog+".c", []byte(src), 0o644))
	if out, err := exec.Command("gcc", "-Wall", "-Wextra", "-Werror", "-o", prog, prog+".c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	// The copy's directory exists before the run, so the observer can
	// watch it from the start.
	must(t, os.MkdirAll(filepath.Dir(cp), 0o755))
	obs := ObserveAccess(t, filepath.Dir(cp))
	r := c.MustRun(time.Minute, prog, f, cp)
	obs.Stop()
	if !bytes.Equal([]byte(r.Stdout), append(append([]byte{}, data...), data...)) {
		t.Fatalf("read %d bytes, not the file twice (%d)", len(r.Stdout), 2*len(data))
	}
	if n := obs.Accesses(cp); n == 0 {
		t.Errorf("no read of the copy %s: the descriptor did not move", cp)
	}
}

func sha256Of(t *testing.T, files []string) map[string]string {
	want := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		must(t, err)
		want[f] = fmt.Sprintf("%x", sha256.Sum256(b))
	}
	return want
}
