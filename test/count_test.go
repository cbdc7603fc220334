package test

import (
	"path/filepath"
	"strings"
	"testing"
)

// exitHolding reads its dataset files through descriptors it never
// closes: the parent 1,300,000 bytes of a.bin before a normal exit, a
// forked child 64 KiB more of a.bin (the descriptor it shares) and 3 MiB
// and 5 bytes of b.bin before os._exit (as a DataLoader worker leaves).
const exitHolding = `
import os, sys
a = os.open(sys.argv[1], os.O_RDONLY)
assert len(os.read(a, 1300000)) == 1300000
pid = os.fork()
if pid == 0:
    assert len(os.read(a, 65536)) == 65536
    b = os.open(sys.argv[2], os.O_RDONLY)
    for _ in range(48):
        assert len(os.read(b, 65536)) == 65536
    assert len(os.read(b, 5)) == 5
    os._exit(0)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
`

// TestBytesOfDescriptorsNeverClosed requires augur stat to count the
// bytes read through descriptors a process never closes: exactly, for a
// process that exits; to within a megabyte a descriptor, for one that
// leaves by _exit (augur's code does not run there).
func TestBytesOfDescriptorsNeverClosed(t *testing.T) {
	c := NewCase(t)
	c.Set("AUGUR_POLICY=static") // nothing is copied: every byte is the original's
	a := c.Write("cls/a.bin", randomBytes(2<<20))
	b := c.Write("cls/b.bin", randomBytes(4<<20))
	c.AugurRun(statsAfter(c, []string{Python, "-c", exitHolding, a, b})...)
	st := statsOfRun(t, c)
	if want := uint64(1300000 + 3<<20); st.OriginalBytes != want {
		t.Errorf("augur stat counts %d bytes read from the originals; want %d (1,300,000 before exit, 3 MiB at _exit: "+
			"of a.bin's 64 KiB and b.bin's 3 MiB + 5, what reached a megabyte on one descriptor)",
			st.OriginalBytes, want)
	}
}

// TestStatNamesFilesNotCached requires augur stat to name a file augur
// cannot cache, or can cache only in part, with why: a whole file larger
// than the tier, and a large file, tiered in blocks, three times the
// tier.
func TestStatNamesFilesNotCached(t *testing.T) {
	for _, tc := range []struct{ name, above, why string }{
		{"whole", "64MiB", "24.0 MiB, larger than every tier"},
		{"blocks", "8MiB", "cached in part: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCase(t)
			c.Set("AUGUR_POLICY=reactive")
			c.Set("AUGUR_TIERS=" + c.RAM + ":8MiB")
			c.Set("AUGUR_BLOCK_ABOVE=" + tc.above)
			c.Set("AUGUR_BIN=" + Augur)
			c.Set("STATS=" + filepath.Join(c.Dir, "stats.json"))
			p := c.Write("cls/big.bin", randomBytes(24<<20))
			// Read it until augur stat names it (a minute at most).
			const script = `for i in $(seq 600); do
    cat "$1" >/dev/null || exit 1
    "$AUGUR_BIN" stat --json --job "$AUGUR_JOB" | grep -q '"not_cached"' && break
    sleep 0.1
done
exec "$AUGUR_BIN" stat --json --job "$AUGUR_JOB" >"$STATS"`
			c.AugurRun("--", "sh", "-c", script, "sh", p)
			st := statsOfRun(t, c)
			if len(st.Uncached) != 1 || st.Uncached[0].Path != p || !strings.HasPrefix(st.Uncached[0].Why, tc.why) {
				t.Fatalf("augur stat names %+v; want %s: %s...", st.Uncached, p, tc.why)
			}
			t.Logf("not cached: %s: %s", st.Uncached[0].Path, st.Uncached[0].Why)
		})
	}
}
