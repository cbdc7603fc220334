package shim

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/augur-hpc/augur/tiering"
	"github.com/rs/zerolog"
)

// A reader's request for a copy that no tier has room for is answered
// no, and readers are told to stop asking (wait_max 0): nothing is
// evicted under the reactive policy, and every later request would cost
// the shared filesystem an open and the reader a wait for nothing. A copy
// that fits is made while there is room. A file larger than every tier
// is named (augur stat) and stops no one.
func TestReactiveStopsWaitingWhenTheTiersAreFull(t *testing.T) {
	root := t.TempDir()
	small, big, huge := filepath.Join(root, "small"), filepath.Join(root, "big"), filepath.Join(root, "huge")
	must(t, os.WriteFile(small, make([]byte, 1000), 0o644))
	must(t, os.WriteFile(big, make([]byte, 3500), 0o644))
	must(t, os.WriteFile(huge, make([]byte, 5000), 0o644))
	l, seg, tier := leadReactive(t, "unit-reactive-full", root, 4096)
	if got := u64(&seg.s.leader.wait_max); got != 1<<20 {
		t.Fatalf("wait_max %d published, want %d", got, 1<<20)
	}
	// A client that keeps no page cache, as the first copy finds of a
	// mount with direct I/O (a local directory caches, which would end
	// the asking by itself: learnClient).
	l.react.cache.Store(clientUncached)
	l.request(Event{Kind: EvRequest, Path: small}) // returns once the copy is settled
	if cp, _ := tiering.CopyPath(tier.Path, small); !exists(cp) {
		t.Fatal("the file that fits was not copied")
	}
	if got := u64(&seg.s.leader.wait_max); got != 1<<20 {
		t.Fatalf("wait_max %d after a copy that fit, want %d", got, 1<<20)
	}
	l.request(Event{Kind: EvRequest, Path: huge})
	if u := seg.Stats().Uncached; len(u) != 1 || u[0].Path != huge {
		t.Errorf("augur stat names %+v as not cached, want %s", u, huge)
	}
	if got := u64(&seg.s.leader.wait_max); got != 1<<20 {
		t.Fatalf("wait_max %d after a file larger than every tier, want %d", got, 1<<20)
	}
	l.request(Event{Kind: EvRequest, Path: big})
	if cp, _ := tiering.CopyPath(tier.Path, big); exists(cp) {
		t.Error("a copy larger than the room left was made")
	}
	if got := u64(&seg.s.leader.wait_max); got != 0 {
		t.Errorf("wait_max %d once the tiers are full, want 0", got)
	}
}

// leadReactive leads a job of this test process under the reactive policy
// (wait_max 1 MiB) over root, with one tier of capacity bytes, and closes
// it when the test ends.
func leadReactive(t *testing.T, job, root string, capacity int64) (*Leader, *Segment, tiering.Tier) {
	t.Helper()
	tier := tiering.Tier{Path: filepath.Join(t.TempDir(), "ram"), Capacity: capacity, Threads: 1}
	seg := testSegment(t, job)
	cfg := &Config{Roots: []string{root}, Policy: "reactive", Tiers: []tiering.Tier{tier}, WaitMax: 1 << 20}
	l, err := Lead(cfg, seg, zerolog.Nop())
	if err != nil || l == nil {
		t.Fatalf("Lead: %v", err)
	}
	t.Cleanup(l.Close)
	return l, seg, tier
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// The first copy a reader waits for is read through the client's cache
// and tells whether the client keeps one; a local filesystem does. Its
// readers then ask only for files larger than its read-ahead (wait_min),
// or, where the kernel tells no read-ahead or one of wait_max or more,
// stop asking (wait_max 0); augur stat says which. An empty file tells
// nothing.
func TestReactiveAsksAboveTheReadAheadWhereTheClientCaches(t *testing.T) {
	for k, c := range []struct {
		name             string
		readAhead        int64
		waitMax, waitMin uint64
	}{
		{"read-ahead 128 KiB", 128 << 10, 1 << 20, 128 << 10},
		{"no read-ahead told", 0, 0, 0},
		{"read-ahead of wait_max", 1 << 20, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func(f func(uint64) int64) { readAhead = f }(readAhead)
			readAhead = func(uint64) int64 { return c.readAhead }
			root := t.TempDir()
			empty, small := filepath.Join(root, "empty"), filepath.Join(root, "small")
			must(t, os.WriteFile(empty, nil, 0o644))
			must(t, os.WriteFile(small, make([]byte, 10000), 0o644))
			l, seg, tier := leadReactive(t, fmt.Sprintf("unit-reactive-cache-%d", k), root, 1<<20)
			l.request(Event{Kind: EvRequest, Path: empty})
			if got, st := u64(&seg.s.leader.wait_max), seg.Stats(); got != 1<<20 || st.ClientCache != "" || st.WaitMin != 0 {
				t.Fatalf("after an empty file: wait_max %d, wait_min %d, client cache %q; want %d, 0, not known", got, st.WaitMin, st.ClientCache, 1<<20)
			}
			l.request(Event{Kind: EvRequest, Path: small})
			if cp, _ := tiering.CopyPath(tier.Path, small); !exists(cp) {
				t.Fatal("the requested file was not copied")
			}
			if got, st := u64(&seg.s.leader.wait_max), seg.Stats(); got != c.waitMax || st.WaitMin != c.waitMin || st.ClientCache != "yes" {
				t.Errorf("wait_max %d, wait_min %d, client cache %q; want %d, %d, yes", got, st.WaitMin, st.ClientCache, c.waitMax, c.waitMin)
			}
		})
	}
}
