package peers

import (
	"fmt"
	"hash/fnv"
	"testing"
)

func TestOwnerIsStable(t *testing.T) {
	// Every node of a job, and every version of augur, must agree.
	golden := []struct {
		path  string
		nodes int
		want  int
	}{
		{"/pfs/imagenet/train/n01440764/n01440764_10026.JPEG", 4, 1},
		{"/pfs/imagenet/train/n01440764/n01440764_10027.JPEG", 4, 0},
		{"/pfs/ds/a", 3, 1},
		{"/pfs/ds/a", 1, 0},
		{"/pfs/ds/a", 0, 0},
	}
	for _, g := range golden {
		if got := Owner(g.path, g.nodes); got != g.want {
			t.Errorf("Owner(%q, %d) = %d; want %d", g.path, g.nodes, got, g.want)
		}
	}
	for _, p := range []string{"/pfs//ds/a", "/pfs/./ds/a", "/pfs/ds/a/", "/pfs/x/../ds/a"} {
		for n := 2; n < 9; n++ {
			if Owner(p, n) != Owner("/pfs/ds/a", n) {
				t.Errorf("%q and /pfs/ds/a have different owners of %d nodes", p, n)
			}
		}
	}
}

// TestOwnerStartsFromFNV1a: the hash is FNV-1a 64, then mixed.
func TestOwnerStartsFromFNV1a(t *testing.T) {
	p := "/pfs/ds/cls/a.jpg"
	h := fnv.New64a()
	h.Write([]byte(p))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	if got := hashPath(p); got != x {
		t.Errorf("%x; want %x", got, x)
	}
}

func TestOwnerBalances(t *testing.T) {
	var paths []string
	for cls := range 1000 {
		for i := range 100 {
			paths = append(paths, fmt.Sprintf("/pfs/imagenet/train/n%08d/n%08d_%d.JPEG", cls*7919, cls*7919, i))
		}
	}
	// Anagrams: FNV-1a alone puts them all on one of two nodes.
	perm("abcdefgh", func(s string) { paths = append(paths, "/pfs/words/"+s) })
	for _, n := range []int{2, 3, 4, 7, 8, 16} {
		count := make([]int, n)
		for _, p := range paths {
			count[Owner(p, n)]++
		}
		mean := float64(len(paths)) / float64(n)
		for i, c := range count {
			if d := float64(c)/mean - 1; d > 0.05 || d < -0.05 {
				t.Errorf("%d nodes: node %d owns %d files, %.1f%% off the mean", n, i, c, 100*d)
			}
		}
	}
}

// perm calls f with every permutation of s.
func perm(s string, f func(string)) {
	var rec func(prefix, rest string)
	rec = func(prefix, rest string) {
		if rest == "" {
			f(prefix)
			return
		}
		for i := range len(rest) {
			rec(prefix+rest[i:i+1], rest[:i]+rest[i+1:])
		}
	}
	rec("", s)
}
