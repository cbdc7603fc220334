package fetchpool

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/augur-hpc/augur/tiering"
)

// world is a source directory of n files of size bytes and tiers.
func world(t *testing.T, n, size int) ([]string, string) {
	t.Helper()
	dir := t.TempDir()
	var files []string
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, "src", fmt.Sprintf("f%02d", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, bytes.Repeat([]byte{byte(i)}, size), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	return files, dir
}

func tier(t *testing.T, path string, capacity int64) *tiering.Tree {
	t.Helper()
	tr, err := tiering.Open(tiering.Tier{Path: path, Capacity: capacity, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// collect runs fetches and waits for every queued one to finish.
func collect(t *testing.T, tiers []*tiering.Tree, files []string, size int64) ([]Result, []TierState) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var results []Result
	p := New(tiers, make([]int64, len(tiers)), func(r Result) {
		mu.Lock()
		results = append(results, r)
		mu.Unlock()
		if r.Err == nil || !isTierErr(r.Err) {
			wg.Done()
		}
	})
	for _, f := range files {
		wg.Add(1)
		if !p.Fetch(f, size) {
			wg.Done()
		}
	}
	wg.Wait()
	st := p.Tiers()
	p.Close()
	return results, st
}

func isTierErr(err error) bool {
	_, ok := err.(*tiering.TierError)
	return ok
}

func TestFillsFastestFirstWithinCapacity(t *testing.T) {
	files, dir := world(t, 10, 1000)
	tiers := []*tiering.Tree{tier(t, filepath.Join(dir, "ram"), 3500), tier(t, filepath.Join(dir, "disk"), 4000)}
	results, st := collect(t, tiers, files, 1000)
	if len(results) != 7 {
		t.Fatalf("%d copies, want 7 (3 + 4 fit)", len(results))
	}
	if st[0].Used != 3000 || st[1].Used != 4000 || st[0].Reserved+st[1].Reserved != 0 {
		t.Fatalf("tiers %+v, want 3000 and 4000 used", st)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		cp, _ := tiering.CopyPath(tiers[r.Tier].Path, r.Path)
		got, _ := os.ReadFile(cp)
		want, _ := os.ReadFile(r.Path)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: copy differs", r.Path)
		}
	}
}

func TestFetchIsQueuedOnce(t *testing.T) {
	files, dir := world(t, 1, 100)
	tiers := []*tiering.Tree{tier(t, filepath.Join(dir, "ram"), 1<<20)}
	block := make(chan struct{})
	p := New(tiers, []int64{0}, func(Result) { <-block })
	if !p.Fetch(files[0], 100) {
		t.Fatal("first Fetch refused")
	}
	if p.Fetch(files[0], 100) {
		t.Fatal("second Fetch of a pending file accepted")
	}
	close(block)
	p.Close()
}

// A tier that fails (its tmp directory is gone) is marked failed and
// the file goes to the next tier.
func TestFailingTierFallsThrough(t *testing.T) {
	files, dir := world(t, 3, 100)
	bad := tier(t, filepath.Join(dir, "bad"), 1<<20)
	os.RemoveAll(bad.Path)
	good := tier(t, filepath.Join(dir, "good"), 1<<20)
	results, st := collect(t, []*tiering.Tree{bad, good}, files, 100)
	if !st[0].Failed || st[1].Used != 300 {
		t.Fatalf("tiers %+v, want the first failed and 300 bytes in the second", st)
	}
	published := 0
	for _, r := range results {
		if r.Err == nil {
			published++
		}
	}
	if published != 3 {
		t.Fatalf("%d published, want 3: %+v", published, results)
	}
}

// A tier on a filesystem smaller than its configured capacity runs out
// of space: it is marked full and the rest goes to the next tier.
func TestFullTierFallsThrough(t *testing.T) {
	files, dir := world(t, 6, 40<<10)
	small := filepath.Join(dir, "small")
	os.MkdirAll(small, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=100k,mode=0700", "tmpfs", small).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", small).Run() })
	tiers := []*tiering.Tree{tier(t, small, 1<<30), tier(t, filepath.Join(dir, "next"), 1<<30)}
	tiers[0].Threads = 1
	results, st := collect(t, tiers, files, 40<<10)
	if !st[0].Full {
		t.Fatalf("tiers %+v: first not marked full", st)
	}
	published := 0
	for _, r := range results {
		if r.Err == nil {
			published++
		}
	}
	if published != 6 || st[0].Used+st[1].Used != 6*40<<10 {
		t.Fatalf("%d published, tiers %+v; want all 6", published, st)
	}
	if entries, _ := os.ReadDir(filepath.Join(small, "tmp")); len(entries) != 0 {
		t.Errorf("partial copies left in the full tier: %v", entries)
	}
}

// All tiers share one queue, served in the order of the requests: a copy
// for the second tier asked after two for the first does not overtake
// them, even though the second tier's thread is idle (a queue per tier
// gave a far-future file of the disk tier the same share of the shared
// filesystem as the next file of the RAM tier). A tier's thread is busy
// until the copy's done callback returns: with both workers held by the
// first tier's copies (one copying, one waiting for the tier's thread),
// the second tier's copy waits for a worker.
func TestOneQueueInRequestOrder(t *testing.T) {
	files, dir := world(t, 3, 100)
	a := tier(t, filepath.Join(dir, "a"), 1<<20)
	b := tier(t, filepath.Join(dir, "b"), 1<<20)
	a.Threads, b.Threads = 1, 1
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(3)
	p := New([]*tiering.Tree{a, b}, []int64{0, 0}, func(r Result) {
		if r.Path != files[2] { // both copies for the first tier hold their worker
			<-release
		}
		wg.Done()
	})
	defer p.Close()
	var once sync.Once
	defer once.Do(func() { close(release) }) // before Close, which waits for the held copy
	if !p.FetchTo(files[0], 100, 0) || !p.FetchTo(files[1], 100, 0) || !p.FetchTo(files[2], 100, 1) {
		t.Fatal("FetchTo refused")
	}
	late, _ := tiering.CopyPath(b.Path, files[2])
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(late); err == nil {
		t.Fatal("the copy asked last, for the idle tier, was made before those asked first")
	}
	once.Do(func() { close(release) })
	wg.Wait()
	if _, err := os.Stat(late); err != nil {
		t.Fatalf("the last copy was not made: %v", err)
	}
}

// A copy that fails for a reason of its file's own — a copy path whose
// directory name is too long for the tier's filesystem, a source
// directory removed while its files are being copied — leaves the tier in
// service: the next file is copied there. (Once, a source directory
// removed mid-copy took the tier out of service for the rest of the job.)
func TestFileFailuresKeepTheTier(t *testing.T) {
	_, dir := world(t, 0, 0)
	long := filepath.Join(dir, "src", strings.Repeat("d", 255), "f")
	os.MkdirAll(filepath.Dir(long), 0o755)
	must(t, os.WriteFile(long, []byte("x"), 0o644))
	var gone []string
	for i := 0; i < 5; i++ {
		p := filepath.Join(dir, "doomed", fmt.Sprintf("f%d", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		must(t, os.WriteFile(p, []byte("y"), 0o644))
		gone = append(gone, p)
	}
	later := filepath.Join(dir, "src", "later")
	must(t, os.WriteFile(later, []byte("z"), 0o644))

	first := tier(t, filepath.Join(dir, "first"), 1<<20)
	first.Threads = 1
	next := tier(t, filepath.Join(dir, "next"), 1<<20)
	results := make(chan Result, 10)
	holding, held := make(chan struct{}), make(chan struct{})
	p := New([]*tiering.Tree{first, next}, []int64{0, 0}, func(r Result) {
		if r.Path == long {
			close(holding)
			<-held // the first tier's one thread is busy: the doomed files wait for it
		}
		results <- r
	})
	defer p.Close()
	p.Fetch(long, 1)
	<-holding
	for _, g := range gone {
		p.Fetch(g, 1)
	}
	os.RemoveAll(filepath.Join(dir, "doomed"))
	close(held)
	for i := 0; i < 6; i++ {
		r := <-results
		if r.Err == nil || r.TierDown {
			t.Errorf("%s: %v, tier down %v; want a failure of the file's own", r.Path, r.Err, r.TierDown)
		}
	}
	p.Fetch(later, 1)
	if r := <-results; r.Err != nil || r.Tier != 0 {
		t.Errorf("the next file: tier %d, %v; want it copied into the first tier", r.Tier, r.Err)
	}
	if st := p.Tiers()[0]; st.Failed || st.Full {
		t.Errorf("first tier %+v after failures of files, want it in service", st)
	}
}

// A tier that really failed is tried again after RetryDown, and serves
// again once it is usable.
func TestFailedTierComesBack(t *testing.T) {
	files, dir := world(t, 2, 10)
	saved := RetryDown
	RetryDown = 50 * time.Millisecond
	defer func() { RetryDown = saved }()
	first := tier(t, filepath.Join(dir, "first"), 1<<20)
	next := tier(t, filepath.Join(dir, "next"), 1<<20)
	tmp := filepath.Join(first.Path, "tmp")
	must(t, os.Remove(tmp))
	results := make(chan Result, 4)
	p := New([]*tiering.Tree{first, next}, []int64{0, 0}, func(r Result) { results <- r })
	defer p.Close()
	p.Fetch(files[0], 10)
	if r := <-results; !r.TierDown {
		t.Fatalf("copy into a tier without tmp/: %v, tier down %v; want it down", r.Err, r.TierDown)
	}
	if r := <-results; r.Err != nil || r.Tier != 1 {
		t.Fatalf("the file after the tier failed: tier %d, %v; want the next", r.Tier, r.Err)
	}
	must(t, os.Mkdir(tmp, 0o700))
	time.Sleep(2 * RetryDown)
	p.Fetch(files[1], 10)
	if r := <-results; r.Err != nil || r.Tier != 0 {
		t.Errorf("after the tier was mended: tier %d, %v; want the first again", r.Tier, r.Err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
