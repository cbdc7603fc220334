package shim

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/augur-hpc/augur/tiering"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// Comparing a served copy with its source is a metadata request to the
// shared filesystem. While those requests hang, the leader still takes
// every open event at once (it once stat'ed the source inside its event
// loop, and fell behind a job reading thousands of files a second); once
// they answer, the copy whose source changed is dropped.
func TestRevalidationDoesNotHoldUpEvents(t *testing.T) {
	root := t.TempDir()
	tier := tiering.Tier{Path: t.TempDir(), Capacity: 1 << 20, Threads: 1}
	tree, err := tiering.Open(tier)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	const n = 3 * revalidators // more than can be in flight
	var files []string
	for i := 0; i < n; i++ {
		f := filepath.Join(root, fmt.Sprintf("f%02d", i))
		must(t, os.WriteFile(f, []byte("old"), 0o644))
		if _, err := tree.Publish(f); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	release := make(chan struct{})
	statSource = func(p string, st *unix.Stat_t) error {
		<-release
		return tiering.Stat(p, st)
	}
	defer func() { statSource = tiering.Stat }()

	seg := testSegment(t, "unit-revalidate")
	cfg := &Config{Roots: []string{root}, Policy: "static", Revalidate: 0, Tiers: []tiering.Tier{tier}}
	l, err := Lead(cfg, seg, zerolog.Nop())
	if err != nil || l == nil {
		t.Fatalf("Lead: %v", err)
	}
	handled := make(chan struct{})
	go func() {
		for _, f := range files {
			l.handle(Event{Kind: EvOpen, Tier: 0, Path: f})
		}
		close(handled)
	}()
	select {
	case <-handled:
	case <-time.After(30 * time.Second):
		close(release)
		l.Close()
		t.Fatal("the leader waited for the shared filesystem to handle open events")
	}

	must(t, os.WriteFile(files[0], []byte("newer"), 0o644))
	close(release)
	cp, _ := tiering.CopyPath(tier.Path, files[0])
	for deadline := time.Now().Add(30 * time.Second); u64(&seg.s.leader.stale_removed) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stale copy was not dropped")
		}
	}
	l.Close() // waits for the revalidators
	if _, err := os.Stat(cp); !os.IsNotExist(err) {
		t.Errorf("the stale copy is still there: %v", err)
	}
	if got := u64(&seg.s.leader.stale_removed); got != 1 {
		t.Errorf("stale copies removed: %d, want 1", got)
	}
}

// testSegment attaches the segment of a job of this test process, and
// removes the job's files when the test ends.
func testSegment(t *testing.T, name string) *Segment {
	t.Helper()
	job := fmt.Sprintf("%s-%d", name, os.Getpid())
	seg, err := AttachSegment(job)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		seg.Close()
		RemoveJob(job)
	})
	return seg
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A slot of the tee pool held longer than poolHold is the slot of a
// process that died between taking it and giving it back: keepPool
// empties it. One given back in time, taken again since, or ready stays
// as it is.
func TestPoolEmptiesSlotsHeldTooLong(t *testing.T) {
	seg := testSegment(t, "poolhold")
	r := &reactive{l: &Leader{seg: seg}}
	var taken [poolSlots]time.Time
	now := time.Now()
	*seg.poolSlot(0), *seg.poolSlot(1), *seg.poolSlot(2) = poolTaken, poolTaken, poolReady
	r.reclaimPool(&taken, now)
	*seg.poolSlot(1) = poolEmpty // given back
	r.reclaimPool(&taken, now.Add(poolHold/2))
	*seg.poolSlot(1) = poolTaken // and taken again
	r.reclaimPool(&taken, now.Add(poolHold+time.Millisecond))
	if got := [3]uint32{*seg.poolSlot(0), *seg.poolSlot(1), *seg.poolSlot(2)}; got != [3]uint32{poolEmpty, poolTaken, poolReady} {
		t.Errorf("slots %v: want %v (the one held past %v emptied)", got, [3]uint32{poolEmpty, poolTaken, poolReady}, poolHold)
	}
}

// A pool file is made afresh whether or not a file of its name was left
// there: the one left (a late reader's, or a leader's before) is replaced,
// and the new one is empty and this leader's alone.
func TestPoolFileReplacesOneLeftThere(t *testing.T) {
	dir := t.TempDir()
	name := dir + "/pool.0"
	for _, left := range []bool{false, true} {
		if left {
			must(t, os.WriteFile(name, []byte("left by a reader"), 0o600))
		}
		fd, err := createPoolFile(name)
		must(t, err)
		var st unix.Stat_t
		must(t, unix.Fstat(fd, &st))
		unix.Close(fd)
		if st.Size != 0 || st.Mode&0o777 != 0o600 {
			t.Errorf("left %v: size %d, mode %o: want an empty file of mode 600", left, st.Size, st.Mode&0o777)
		}
		must(t, os.Remove(name))
	}
}
