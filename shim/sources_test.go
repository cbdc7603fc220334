package shim

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/augur-hpc/augur/tiering"
	"github.com/rs/zerolog"
)

// A root whose files read about as fast as the tier's is passed through
// once five probes say so, readers no longer wait or tee, and no copy of
// its files is queued; when its reads slow down to twice the tier's, its
// files are copied again and readers wait and tee as before.
func TestSourcesPassAFastRootThrough(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "cls", "a.bin")
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, make([]byte, 4096), 0o644))
	tier := tiering.Tier{Path: t.TempDir(), Capacity: 1 << 30, Threads: 1}
	seg := testSegment(t, "unit-sources")
	cfg := &Config{Roots: []string{root}, Policy: "reactive", Tiers: []tiering.Tier{tier}, WaitMax: 8 << 20, PassThrough: "auto"}
	l, err := Lead(cfg, seg, zerolog.Nop())
	if err != nil || l == nil {
		t.Fatalf("Lead: %v", err)
	}
	t.Cleanup(l.Close)
	s := l.sources
	var srcTime atomic.Int64
	srcTime.Store(int64(11 * time.Microsecond))
	s.mu.Lock()
	s.read = func(path string, _ int64) (time.Duration, error) {
		if path == p {
			return time.Duration(srcTime.Load()), nil
		}
		return 10 * time.Microsecond, nil // the tier's
	}
	s.mu.Unlock()
	wait := u64(&seg.s.leader.wait_max)
	if wait == 0 {
		t.Fatal("a reactive leader with a tier lets readers wait")
	}
	s.opened(p)
	waitFor(t, "the root passed through", func() int {
		if s.passes(p) {
			return 1
		}
		return -1
	})
	if w, tee := u64(&seg.s.leader.wait_max), u64(&seg.s.leader.tee_max); w != 0 || tee != 0 {
		t.Errorf("wait_max %d, tee_max %d while the only root passes; want 0, 0", w, tee)
	}
	l.handle(Event{Kind: EvOpen, Tier: -1, Path: p})
	if _, known := l.react.known.Load(p); known {
		t.Error("a file of a root passed through was queued for a copy")
	}
	st := seg.Stats()
	if len(st.Sources) != 1 || !st.Sources[0].Passed || st.Sources[0].Ratio > passBelow {
		t.Errorf("augur stat's sources %+v; want the root, passed through", st.Sources)
	}

	srcTime.Store(int64(40 * time.Microsecond)) // a page cache dropped
	waitFor(t, "the root copied again", func() int {
		if !s.passes(p) {
			return 1
		}
		return -1
	})
	if w := u64(&seg.s.leader.wait_max); w != wait {
		t.Errorf("wait_max %d once the root is copied again, want %d", w, wait)
	}
}
