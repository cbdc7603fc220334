package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLargeFileEveryReadCall reads a large file, tiered in blocks,
// through every read call on its descriptor (test/c/bigread.c: read,
// pread, pread64, readv, preadv, preadv2 at the offset, __read_chk,
// __pread64_chk, a duplicate, mmap, sendfile; unaligned, across blocks,
// past the end, a bad offset) three times in one job of each policy that
// copies, with a tier that holds the file and one that holds a third of
// it, and requires every byte and result to be the kernel's: the first
// pass reads the original and keeps its pages, the later ones read them
// from the tier. The passes begin once the leader has entered the file
// (afterEntered): from the page cache they took less time than the
// clairvoyant leader took to start following opens (1 run in 2).
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
				stdout, stderr := c.AugurRun(statsAfter(c, afterEntered(p, prog, p, "3"))...)
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

// afterEntered is argv run once the read-only opens of the large file
// path it makes have had the leader enter it in the segment's block table
// (augur stat's large_files), or after 10 s. An open before the plan knew
// the file's size enters nothing: each try opens it again.
func afterEntered(path string, argv ...string) []string {
	wait := `for i in $(seq 100); do
	head -c 1 "$0" >/dev/null
	"$AUGUR" stat --json --job "$AUGUR_JOB" | grep -q '"large_files": [1-9]' && break
	sleep 0.1
done
exec "$@"`
	return append([]string{"sh", "-c", wait, path}, argv...)
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
