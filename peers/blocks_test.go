package peers

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeBlocks is a node's large file in blocks, as the leader keeps it
// (shim/blocks.go): a blocks file holding the source's bytes, of which
// the blocks in held count as present.
type fakeBlocks struct {
	source string
	file   string // the blocks file
	fill   bool   // FillBlock copies what it is asked for

	mu      sync.Mutex
	entered bool           // guarded by mu
	id      BlockFile      // guarded by mu
	held    map[int64]bool // guarded by mu
	fills   []string       // "off n st" of FillBlock's calls; guarded by mu
}

var _ Blocks = (*fakeBlocks)(nil)

// bigCase is a test case whose server serves the blocks of a large file
// of 2.5 blocks (fb), entered as the file it is, with block 0 held.
func bigCase(t *testing.T) (*testCase, *fakeBlocks, []byte) {
	fb := &fakeBlocks{held: map[int64]bool{0: true}}
	tc := newTestCaseWith(t, "127.0.0.1", 2, func(_ *testCase, cfg *ServerConfig) { cfg.Blocks = fb })
	src, content := tc.source("cls/big.h5", 2*BlockSize+BlockSize/2)
	fb.source, fb.file = src, tc.dir+"/blocks-file"
	if err := os.WriteFile(fb.file, content, 0o600); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := StatSource([]string{tc.root}, src, &st); err != nil {
		t.Fatal(err)
	}
	fb.entered, fb.id = true, BlockFile{Dev: st.Dev, Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano()}
	return tc, fb, content
}

func (fb *fakeBlocks) Block(source string, off, n int64) (*os.File, BlockFile, bool) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if source != fb.source || !fb.entered {
		return nil, BlockFile{}, false
	}
	if !fb.held[off/BlockSize] {
		return nil, fb.id, true
	}
	f, err := os.Open(fb.file)
	if err != nil {
		return nil, fb.id, true
	}
	return f, fb.id, true
}

func (fb *fakeBlocks) FillBlock(ctx context.Context, source string, st *unix.Stat_t, off, n int64) *os.File {
	fb.mu.Lock()
	fb.fills = append(fb.fills, fmt.Sprint(off, " ", n, " ", st != nil))
	if _, bounded := ctx.Deadline(); !fb.fill || !bounded || source != fb.source {
		fb.mu.Unlock()
		return nil
	}
	if !fb.entered && st != nil {
		fb.entered, fb.id = true, BlockFile{Dev: st.Dev, Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano()}
	}
	fb.held[off/BlockSize] = true
	fb.mu.Unlock()
	f, _, _ := fb.Block(source, off, n)
	return f
}

func (fb *fakeBlocks) calls() []string {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return slices.Clone(fb.fills)
}

// askBlock is the target of node from's request for [off, off+n) of
// block b of the test case's large file, made now.
func (tc *testCase) askBlock(fb *fakeBlocks, b, off, n int64, from int) string {
	var st unix.Stat_t
	if err := StatSource([]string{tc.root}, fb.source, &st); err != nil {
		tc.t.Fatal(err)
	}
	return blockQuery(fb.source, st.Size, st.Mtim.Nano(), st.Ino, b, off, n, from, tc.node, time.Now())
}

// TestServeBlocks: a range of a block the server holds is served with
// its tag, byte for byte, and counted as a block (not a file) to the
// node that asked; a block it does not hold is copied on demand when the
// tiers have room (FillBlock, bounded), counted as fetched for a peer,
// and refused as not held (404, with the tag) when they have none.
func TestServeBlocks(t *testing.T) {
	tc, fb, content := bigCase(t)
	status, body := tc.get("GET", tc.askBlock(fb, 0, 0, BlockSize, 0), testSecret, "")
	if status != http.StatusOK {
		t.Fatalf("block 0: status %d: %s", status, body)
	}
	equalBytes(t, "block 0", body, content[:BlockSize])
	status, body = tc.get("GET", tc.askBlock(fb, 0, 3*PageSize, 5*PageSize+17, 0), testSecret, "")
	if status != http.StatusOK {
		t.Fatalf("a range of block 0: status %d: %s", status, body)
	}
	equalBytes(t, "a range of block 0", body, content[3*PageSize:8*PageSize+17])

	// Block 2 (the last, short) is not held, and the tiers have no room.
	last := int64(len(content)) - 2*BlockSize
	if status, _ := tc.get("GET", tc.askBlock(fb, 2, 2*BlockSize, last, 0), testSecret, ""); status != http.StatusNotFound || tc.notServed("missing") != 1 {
		t.Errorf("a block not held, no room: status %d, missing %d; want 404, 1", status, tc.notServed("missing"))
	}
	fb.fill = true
	status, body = tc.get("GET", tc.askBlock(fb, 2, 2*BlockSize, last, 0), testSecret, "")
	if status != http.StatusOK {
		t.Fatalf("block 2 on demand: status %d: %s", status, body)
	}
	equalBytes(t, "block 2", body, content[2*BlockSize:])
	// The asker named the inode the server's entry is of: the fill is of
	// the entered file (st nil), and asks the shared filesystem nothing.
	if calls := fb.calls(); !slices.Equal(calls, []string{fmt.Sprint(2*BlockSize, " ", last, " false"), fmt.Sprint(2*BlockSize, " ", last, " false")}) {
		t.Errorf("FillBlock calls %q", calls)
	}
	ok := func(st ServerStats) bool {
		return slices.Equal(st.Blocks, []int64{3, 0}) && st.BlockBytes[0] == BlockSize+5*PageSize+17+last &&
			st.FetchedBlocks == 1 && st.Files[0] == 0 && st.Bytes[0] == 0
	}
	if st := serverStats(tc.srv, ok); !ok(st) {
		t.Errorf("stats %+v", st)
	}
}

// TestServeBlockRefuses: a block's request is refused for every reason a
// whole file's is, with the same status, and for a range that is not
// within one block of the file (400); a request naming a file of
// another size, mtime or inode than the one this node's blocks are of
// is stale (409). Nothing is served.
func TestServeBlockRefuses(t *testing.T) {
	tc, fb, content := bigCase(t)
	size := int64(len(content))
	var st unix.Stat_t
	if err := StatSource([]string{tc.root}, fb.source, &st); err != nil {
		t.Fatal(err)
	}
	mtime, ino := st.Mtim.Nano(), st.Ino
	ask := func(size, mtime int64, ino uint64, b, off, n int64) string {
		return blockQuery(fb.source, size, mtime, ino, b, off, n, 0, tc.node, time.Now())
	}
	good := ask(size, mtime, ino, 0, 0, BlockSize)
	cases := []struct {
		name   string
		target string
		secret string
		status int
		reason string
	}{
		{"no proof", good, "", 403, "auth"},
		{"wrong secret", ask(size, mtime, ino, 0, 0, BlockSize), "another-secret-0123456", 403, "auth"},
		{"for node 0", blockQuery(fb.source, size, mtime, ino, 0, 0, BlockSize, 0, 0, time.Now()), testSecret, 403, "misdirected"},
		{"asked 31 s ago", blockQuery(fb.source, size, mtime, ino, 0, 0, BlockSize, 0, 1, time.Now().Add(-31*time.Second)), testSecret, 403, "expired"},
		{"outside", blockQuery("/etc/passwd", size, mtime, ino, 0, 0, BlockSize, 0, 1, time.Now()), testSecret, 403, "outside"},
		{"a range header", ask(size, mtime, ino, 0, 0, BlockSize), testSecret, 400, "request"},
		{"no len", strings.Replace(good, "len=", "lem=", 1), testSecret, 400, "request"},
		{"bad off", strings.Replace(good, "off=0", "off=x", 1), testSecret, 400, "request"},
		{"empty", ask(size, mtime, ino, 0, 0, 0), testSecret, 400, "request"},
		{"negative offset", ask(size, mtime, ino, 0, -1, 10), testSecret, 400, "request"},
		{"across blocks", ask(size, mtime, ino, 0, BlockSize-10, 20), testSecret, 400, "request"},
		{"before its block", ask(size, mtime, ino, 1, BlockSize-10, 5), testSecret, 400, "request"},
		{"past the end", ask(size, mtime, ino, 2, size-10, 20), testSecret, 400, "request"},
		{"no such block", ask(size, mtime, ino, 3, 3*BlockSize, 10), testSecret, 400, "request"},
		{"a huge block", ask(size, mtime, ino, 1<<60, 0, 10), testSecret, 400, "request"},
		{"other size", ask(size+1, mtime, ino, 0, 0, BlockSize), testSecret, 409, "stale"},
		{"other mtime", ask(size, mtime+1, ino, 0, 0, BlockSize), testSecret, 409, "stale"},
		{"other inode", ask(size, mtime, ino+1, 0, 0, BlockSize), testSecret, 409, "stale"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := tc.notServed(c.reason)
			rng := map[bool]string{true: "bytes=0-9"}[c.name == "a range header"]
			status, body := tc.get("GET", c.target, c.secret, rng)
			if status != c.status || tc.notServed(c.reason) != before+1 {
				t.Errorf("status %d (%s), %s counted %d; want %d, one more than %d", status, strings.TrimSpace(string(body)),
					c.reason, tc.notServed(c.reason), c.status, before)
			}
		})
	}
	// A captured request, replayed: served once.
	req, _ := http.NewRequest("GET", "http://"+tc.addr+good, nil)
	sign(req, testKey)
	for i, want := range []int{http.StatusOK, http.StatusForbidden} {
		resp, err := http.DefaultClient.Do(req.Clone(context.Background()))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("sent %d times: status %d; want %d", i+1, resp.StatusCode, want)
		}
	}
	if tc.notServed("replay") != 1 {
		t.Errorf("replays counted %d; want 1", tc.notServed("replay"))
	}
	// A file changed since this node entered it (another mtime on the
	// shared filesystem, the asker's view): its blocks are stale here.
	os.Chtimes(fb.source, time.Now(), time.Unix(0, mtime+1e9))
	if status, _ := tc.get("GET", ask(size, mtime+1e9, ino, 0, 0, BlockSize), testSecret, ""); status != http.StatusConflict {
		t.Errorf("the file changed: status %d; want 409", status)
	}
	if st := serverStats(tc.srv, func(st ServerStats) bool { return st.Blocks[0] == 1 }); st.Blocks[0] != 1 || st.FetchedBlocks != 0 || len(fb.calls()) != 0 {
		t.Errorf("served %v blocks, %d on demand, fills %q; want the replayed one only", st.Blocks, st.FetchedBlocks, fb.calls())
	}
}

// TestServeBlocksOfAFileNotEntered: a node that has not entered a large
// file fills the block asked for as the file the shared filesystem has
// below the root (checked as a whole file's source is); a file reached
// through a symlink is refused as linked, and asks for no fill.
func TestServeBlocksOfAFileNotEntered(t *testing.T) {
	tc, fb, content := bigCase(t)
	fb.entered, fb.held, fb.fill = false, map[int64]bool{}, true
	status, body := tc.get("GET", tc.askBlock(fb, 1, BlockSize, BlockSize, 0), testSecret, "")
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	equalBytes(t, "block 1", body, content[BlockSize:2*BlockSize])
	if calls := fb.calls(); !slices.Equal(calls, []string{fmt.Sprint(BlockSize, " ", BlockSize, " true")}) {
		t.Errorf("FillBlock calls %q; want one, with the source's stat", calls)
	}
	link := tc.root + "/cls/link.h5"
	os.Symlink(fb.source, link)
	var st unix.Stat_t
	unix.Stat(fb.source, &st)
	target := blockQuery(link, st.Size, st.Mtim.Nano(), st.Ino, 0, 0, BlockSize, 0, tc.node, time.Now())
	if status, _ := tc.get("GET", target, testSecret, ""); status != http.StatusNotFound || tc.notServed("linked") != 1 {
		t.Errorf("through a symlink: status %d, linked %d; want 404, 1", status, tc.notServed("linked"))
	}
	if len(fb.calls()) != 1 {
		t.Errorf("FillBlock calls %q; want none for the symlink", fb.calls())
	}
}

// TestFetchBlock: a client gets a range of a block from a server that
// holds it, byte for byte, counted as a block; a block the server cannot
// give is ErrNotHeld, and the peer stays up.
func TestFetchBlock(t *testing.T) {
	tc, fb, content := bigCase(t)
	c := newClient(t, ClientConfig{}, tc.addr)
	var st unix.Stat_t
	if err := StatSource([]string{tc.root}, fb.source, &st); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3*PageSize)
	if err := c.FetchBlock(context.Background(), 1, fb.source, st.Size, st.Mtim.Nano(), st.Ino, 0, PageSize, buf); err != nil {
		t.Fatal(err)
	}
	equalBytes(t, "fetched", buf, content[PageSize:4*PageSize])
	err := c.FetchBlock(context.Background(), 1, fb.source, st.Size, st.Mtim.Nano(), st.Ino, 1, BlockSize, buf)
	if !errors.Is(err, ErrNotHeld) || !c.Up(1) {
		t.Errorf("a block not held: %v, up %v; want ErrNotHeld, up", err, c.Up(1))
	}
	if s := c.Stats()[1]; s.BlocksIn != 1 || s.BlockBytesIn != 3*PageSize || s.FilesIn != 0 || s.Misses != 1 || s.Errors != 0 {
		t.Errorf("client stats %+v", s)
	}
}

// TestFetchBlockChecksTheAnswer: an answer to a block's request that is
// not the server's answer to that very request (a forged tag, the answer
// to another block of the file or to the whole file, another job's, a
// "not held" without its tag) or cut short is an error: the peer is
// marked down, the forged ones counted, and the caller told to read the
// block from the shared filesystem.
func TestFetchBlockChecksTheAnswer(t *testing.T) {
	const size, n = 3 * BlockSize, 2 * PageSize
	body := []byte(strings.Repeat("F", n))
	tagged := func(key []byte, proof func(*http.Request) []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			tag := answerTag(key, proof(r), http.StatusOK)
			tag.Write(body)
			w.Header().Set("Content-Length", strconv.Itoa(n+tagLen))
			w.Write(body)
			w.Write(tag.Sum(nil))
		}
	}
	itsProof := func(r *http.Request) []byte { p, _ := hex.DecodeString(r.Header.Get(authHeader)); return p }
	proofOf := func(target string) func(*http.Request) []byte {
		return func(*http.Request) []byte { return requestMAC(testKey, "GET", target) }
	}
	cases := []struct {
		name    string
		h       http.HandlerFunc
		want    error
		counted int64 // as forged
	}{
		{"forged", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(n+tagLen))
			w.Write(body)
			w.Write(make([]byte, tagLen))
		}, ErrForged, 1},
		{"another block's", tagged(testKey, proofOf(blockQuery("/pfs/a", size, 1, 7, 2, 2*BlockSize, n, 0, 1, time.Now()))), ErrForged, 1},
		{"the whole file's", tagged(testKey, proofOf(query("/pfs/a", size, 1, 7, 0, 1, time.Now()))), ErrForged, 1},
		{"another job's", tagged(jobKey(testSecret, "job-other"), itsProof), ErrForged, 1},
		{"not held, untagged", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, ErrForged, 1},
		{"truncated", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(n+tagLen))
			w.Write(body)
		}, ErrLength, 0},
		{"too long", func(w http.ResponseWriter, r *http.Request) {
			tag := answerTag(testKey, itsProof(r), http.StatusOK)
			tag.Write(body)
			tag.Write(body)
			w.Header().Set("Content-Length", strconv.Itoa(2*n+tagLen))
			w.Write(body)
			w.Write(body)
			w.Write(tag.Sum(nil))
		}, ErrLength, 0},
		{"theirs", tagged(testKey, itsProof), nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, ClientConfig{}, fakePeer(t, tc.h))
			buf := make([]byte, n)
			err := c.FetchBlock(context.Background(), 1, "/pfs/a", size, 1, 7, 1, BlockSize, buf)
			st := c.Stats()[1]
			if tc.want == nil {
				if err != nil || !c.Up(1) || st.BlocksIn != 1 || st.BlockBytesIn != n {
					t.Fatalf("the peer's own answer: %v, %+v", err, st)
				}
				return
			}
			if !errors.Is(err, tc.want) || c.Up(1) || st.Errors != 1 || st.Forged != tc.counted || st.BlocksIn != 0 {
				t.Errorf("%v, %+v; want %v, the peer down, %d forged", err, st, tc.want, tc.counted)
			}
		})
	}
}

// TestFetchBlockTimesOut: a peer that does not answer a block's request
// is given up after BlockTimeout, not the whole file's Timeout, and
// marked down.
func TestFetchBlockTimesOut(t *testing.T) {
	c := newClient(t, ClientConfig{BlockTimeout: 200 * time.Millisecond, Timeout: time.Minute}, hangingPeer(t))
	begin := time.Now()
	err := c.FetchBlock(context.Background(), 1, "/pfs/a", BlockSize, 1, 7, 0, 0, make([]byte, PageSize))
	if err == nil || c.Up(1) || time.Since(begin) > 30*time.Second {
		t.Errorf("%v after %v, up %v; want an error after about 200 ms, down", err, time.Since(begin), c.Up(1))
	}
}

// TestBlockOwnerSpreadsAFile: the blocks of one file have owners on
// every node, in near equal shares, the same on every node; a job of one
// node owns them all.
func TestBlockOwnerSpreadsAFile(t *testing.T) {
	for _, nodes := range []int{2, 3, 4} {
		counts := make([]int, nodes)
		for b := int64(0); b < 1200; b++ {
			o := BlockOwner("/pfs/ds/big.h5", b, nodes)
			if o != BlockOwner("/pfs/ds//./big.h5", b, nodes) {
				t.Fatalf("block %d: owners differ for one path's two spellings", b)
			}
			counts[o]++
		}
		for i, n := range counts {
			if n < 1200/nodes*8/10 || n > 1200/nodes*12/10 {
				t.Errorf("%d nodes: node %d owns %d of 1200 blocks (%v)", nodes, i, n, counts)
			}
		}
	}
	if BlockOwner("/pfs/ds/big.h5", 5, 1) != 0 {
		t.Error("a node alone does not own its blocks")
	}
}
