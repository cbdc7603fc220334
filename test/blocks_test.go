package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/augur-hpc/augur/shim"
	"golang.org/x/sys/unix"
)

// TestLargeFileEveryReadCall reads a large file, tiered in blocks,
// through every read call on its descriptor (test/c/bigread.c: read,
// pread, pread64, readv, preadv, preadv2 at the offset, __read_chk,
// __pread64_chk, a duplicate, mmap, sendfile; unaligned, across blocks,
// past the end, a bad offset) three times in one job of each policy that
// copies, with a tier that holds the file and one that holds a third of
// it, and requires every byte and result to be the kernel's: the first
// pass reads the original and keeps its pages, the later ones read them
// from the tier. The later passes begin once the leader has entered the
// file (enteredBetween): from the page cache the three took less time
// than the clairvoyant leader took to start following opens (1 run in 2).
func TestLargeFileEveryReadCall(t *testing.T) {
	dir := t.TempDir()
	prog := compileTestC(t, dir, "bigread", "-O2", "-D_FORTIFY_SOURCE=2")
	for _, policy := range []string{"reactive", "clairvoyant"} {
		for _, tier := range []string{"64MiB", "8MiB"} {
			t.Run(policy+"/tier-"+tier, func(t *testing.T) {
				c := NewCase(t)
				c.Set("AUGUR_POLICY=" + policy)
				c.Set("AUGUR_LAYOUT=flat")
				c.Set("AUGUR_TIERS=" + c.RAM + ":" + tier)
				p := c.Write("cls/big.bin", randomBytes(24<<20+54321))
				stdout, stderr := c.AugurRun(statsAfter(c, enteredBetween(c, []string{prog, p, "1"}, []string{prog, p, "2"}))...)
				if strings.Count(stdout, " ok\n") != 3 {
					t.Fatalf("bigread:\n%s\nstderr:\n%s", stdout, stderr)
				}
				st := statsOfRun(t, c)
				t.Logf("large files %d, pages read in %d, bytes from blocks %d, reads of the original %d, blocks held %d",
					st.BigFiles, st.BigTeed, st.Tiers[0].BlockBytes, st.BigMisses, st.Tiers[0].Blocks)
				if st.BigFiles != 1 || st.BigTeed == 0 || st.Tiers[0].BlockBytes == 0 {
					t.Errorf("the file was not tiered in blocks: %d large files, %d pages read in, %d bytes from blocks",
						st.BigFiles, st.BigTeed, st.Tiers[0].BlockBytes)
				}
				if held := int64(st.Tiers[0].Blocks) << 22; tier == "8MiB" && held > 8<<20 {
					t.Errorf("%d bytes of blocks held in a tier of 8 MiB", held)
				}
				bp := filepath.Join(c.RAM, "blocks")
				if _, err := os.Stat(bp); err != nil {
					t.Errorf("no blocks in the tier: %v", err)
				}
			})
		}
	}
}

// enteredBetween is a command that runs first, waits (20 s at most)
// until the leader has entered a large file in the block table, and runs
// then. A leader enters a file it sees opened soon after, and a reader of
// a local file can read all of it before then (a clairvoyant leader
// enters it only once it has its plan).
func enteredBetween(c *Case, first, then []string) []string {
	c.Set("AUGUR=" + Augur)
	return []string{"sh", "-c", shellWords(first) + ` && for i in $(seq 200); do
	  "$AUGUR" stat --json --job "$AUGUR_JOB" | grep -Eq '"large_files": *[1-9]' && break; sleep 0.1; done && ` +
		shellWords(then)}
}

// shellWords is argv quoted for sh.
func shellWords(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// TestWholeCopyEveryReadCall runs the same read calls on the same file
// copied whole into the RAM tier (below the blocks threshold) and served
// from there: copy_file_range then crosses filesystems, which the shim
// copies itself, as far as the kernel's copy would go.
func TestWholeCopyEveryReadCall(t *testing.T) {
	dir := t.TempDir()
	prog := compileTestC(t, dir, "bigread", "-O2", "-D_FORTIFY_SOURCE=2")
	c := NewCase(t)
	c.Set("AUGUR_POLICY=static")
	c.Set("AUGUR_BLOCK_ABOVE=1GiB")
	c.Set("AUGUR_TIERS=" + c.RAM + ":64MiB")
	p := c.Write("cls/big.bin", randomBytes(24<<20+54321))
	c.Warm()
	stdout, stderr := c.AugurRun(statsAfter(c, []string{prog, p, "3"})...)
	if strings.Count(stdout, " ok\n") != 3 {
		t.Fatalf("bigread:\n%s\nstderr:\n%s", stdout, stderr)
	}
	if st := statsOfRun(t, c); st.Misses != 0 || st.Tiers[0].Hits == 0 {
		t.Errorf("%d opens of the original, %d from the tier: want every open served from the tier", st.Misses, st.Tiers[0].Hits)
	}
}

// TestBlocksKeptAcrossJobs reads a large file in one job and again in
// the next (twice in each: a first read may end before the leader has
// entered the file): the next job serves every byte from the blocks the
// first one's reader put in the tier, from its first read; after the file
// is rewritten in place (its size and mtime kept), the third job reads it
// from the original, and every job reads the file's bytes as they are.
func TestBlocksKeptAcrossJobs(t *testing.T) {
	c := NewCase(t)
	c.Set("AUGUR_POLICY=reactive")
	c.Set("AUGUR_TIERS=" + c.RAM + ":64MiB")
	data := randomBytes(20<<20 + 4321)
	p := c.Write("cls/big.bin", data)
	job := func(name string) shim.Stats {
		t.Helper()
		c.Set("AUGUR_JOB=" + name)
		t.Cleanup(func() { removeJobState(name) })
		read := []string{"sha256sum", p}
		stdout, stderr := c.AugurRun(statsAfter(c, enteredBetween(c, read, read))...)
		plain := c.RunPlain(time.Minute, "sha256sum", p).Stdout
		if stdout != plain+plain {
			t.Fatalf("%s: sha256sum under augur %q, without %q\n%s", name, stdout, plain, stderr)
		}
		return statsOfRun(t, c)
	}
	base := "test-kept-" + randHex(4)
	first := job(base + "-1")
	if first.BigTeed == 0 {
		t.Fatalf("the first job kept no page of the file (%+v)", first)
	}
	second := job(base + "-2")
	t.Logf("second job: %d bytes from blocks, %d reads of the original, %d pages read in",
		second.Tiers[0].BlockBytes, second.BigMisses, second.BigTeed)
	if second.BigMisses != 0 || second.Tiers[0].BlockBytes != 2*uint64(len(data)) {
		t.Errorf("the second job read %d bytes from blocks and the original %d times; want %d and 0",
			second.Tiers[0].BlockBytes, second.BigMisses, 2*len(data))
	}

	// Rewritten in place, its mtime put back: its ctime tells.
	var st unix.Stat_t
	must(t, unix.Stat(p, &st))
	copy(data[5<<20:], []byte("changed between jobs"))
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt(data[5<<20:5<<20+32], 5<<20)
	must(t, err)
	f.Close()
	mt := time.Unix(st.Mtim.Sec, st.Mtim.Nsec)
	must(t, os.Chtimes(p, mt, mt))
	third := job(base + "-3")
	if third.BigMisses == 0 {
		t.Error("after the change the third job never read the original: it served blocks kept from before")
	}
}
