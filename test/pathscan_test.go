package test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPathScan holds the data plane's 16-bytes-at-a-time check of whether
// a path is already normal, and its building of a copy's path in a tier,
// against byte-by-byte ones, for every path of up to four pieces ("/",
// "//", "/.", "/..", "@", names) at every alignment (test/c/pathscan.c). A
// wrong answer there would serve, or miss, a dataset file by a path such
// as "/data//x" or "/data/./x", or open another file's copy.
func TestPathScan(t *testing.T) {
	for _, flags := range [][]string{{"-O2"}, {"-O0"}} {
		prog := compileTestC(t, t.TempDir(), "pathscan", flags...)
		out, err := exec.Command(prog).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "ok ") {
			t.Fatalf("pathscan %v: %v\n%s", flags, err, out)
		}
	}
}
