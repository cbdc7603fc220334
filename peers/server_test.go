package peers

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/augur-hpc/augur/tiering"
)

func TestServeCopies(t *testing.T) {
	tc := newTestCase(t, "127.0.0.1", 3)
	a, content := tc.source("cls/a.bin", 300<<10)
	b, bcontent := tc.source("cls/b.bin", 1000)
	tc.publish(0, a)
	tc.publish(1, b) // only in the slower tier
	size, mtime := ident(t, a)
	status, body := tc.get("GET", query(a, size, mtime, 2), testSecret, "")
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	equalBytes(t, "a", body, content)
	bsize, bmtime := ident(t, b)
	status, body = tc.get("GET", query(b, bsize, bmtime, 1), testSecret, "")
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	equalBytes(t, "b", body, bcontent)
	ok := func(st ServerStats) bool {
		return slices.Equal(st.Files, []int64{0, 1, 1}) && slices.Equal(st.Bytes, []int64{0, 1000, 300 << 10}) && len(st.NotServed) == 0
	}
	if st := serverStats(tc.srv, ok); !ok(st) {
		t.Errorf("stats %+v", st)
	}
}

func TestServeRange(t *testing.T) {
	tc := newTestCase(t, "127.0.0.2", 2)
	a, content := tc.source("a", 64<<10)
	tc.publish(0, a)
	size, mtime := ident(t, a)
	status, body := tc.get("GET", query(a, size, mtime, 0), testSecret, "bytes=1000-4999")
	if status != http.StatusPartialContent {
		t.Fatalf("status %d: %s", status, body)
	}
	equalBytes(t, "range", body, content[1000:5000])
	status, _ = tc.get("GET", query(a, size, mtime, 0), testSecret, "bytes=70000-")
	st := serverStats(tc.srv, func(st ServerStats) bool { return st.NotServed["range"] == 1 && st.Bytes[0] == 4000 })
	if status != http.StatusRequestedRangeNotSatisfiable || st.NotServed["range"] != 1 {
		t.Errorf("a range past the end: status %d, counted %d", status, st.NotServed["range"])
	}
	if got := st.Bytes[0]; got != 4000 {
		t.Errorf("%d bytes counted; want 4000", got)
	}
}

func TestServeRefuses(t *testing.T) {
	tc := newTestCase(t, "127.0.0.1", 2)
	a, _ := tc.source("a", 4096)
	tc.publish(0, a)
	size, mtime := ident(t, a)
	root := tc.root
	cases := []struct {
		name   string
		method string
		target string
		secret string
		status int
		reason string
	}{
		{"no proof", "GET", query(a, size, mtime, 0), "", 403, "auth"},
		{"wrong secret", "GET", query(a, size, mtime, 0), "another-secret-0123456", 403, "auth"},
		{"post", "POST", query(a, size, mtime, 0), testSecret, 405, "request"},
		{"other endpoint", "GET", "/v1/other?path=" + a, testSecret, 400, "request"},
		{"no size", "GET", copyEndpoint + "?path=" + a + "&mtime=1&from=0", testSecret, 400, "request"},
		{"two paths", "GET", query(a, size, mtime, 0) + "&path=" + a, testSecret, 400, "request"},
		{"bad escape", "GET", query(a, size, mtime, 0) + "&x=%zz", testSecret, 400, "request"},
		{"node out of range", "GET", query(a, size, mtime, 2), testSecret, 400, "request"},
		{"negative size", "GET", query(a, -1, mtime, 0), testSecret, 400, "request"},
		{"relative", "GET", query("pfs/ds/a", size, mtime, 0), testSecret, 400, "request"},
		{"dot dot", "GET", query(root+"/../../../etc/passwd", size, mtime, 0), testSecret, 400, "request"},
		{"dot dot inside", "GET", query(root+"/x/../a", size, mtime, 0), testSecret, 400, "request"},
		{"nul", "GET", query(a+"\x00.jpg", size, mtime, 0), testSecret, 400, "request"},
		{"outside", "GET", query("/etc/passwd", size, mtime, 0), testSecret, 403, "outside"},
		{"the root", "GET", query(root, size, mtime, 0), testSecret, 403, "outside"},
		{"a prefix of the root", "GET", query(root+"x/a", size, mtime, 0), testSecret, 403, "outside"},
		{"not held", "GET", query(root+"/b", size, mtime, 0), testSecret, 404, "missing"},
		{"other size", "GET", query(a, size+1, mtime, 0), testSecret, 409, "stale"},
		{"other mtime", "GET", query(a, size, mtime+1, 0), testSecret, 409, "stale"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := tc.notServed(c.reason)
			status, body := tc.get(c.method, c.target, c.secret, "")
			if status != c.status || tc.notServed(c.reason) != before+1 {
				t.Errorf("status %d (%s), %s counted %d; want %d, one more than %d", status, strings.TrimSpace(string(body)),
					c.reason, tc.notServed(c.reason), c.status, before)
			}
		})
	}
	if st := tc.srv.Stats(); st.Files[0] != 0 || st.Files[1] != 0 {
		t.Errorf("something was served: %+v", st)
	}
}

// TestServeProofIsBoundToTheRequest: a proof taken from one request does
// not serve another file or another range.
func TestServeProofIsBoundToTheRequest(t *testing.T) {
	tc := newTestCase(t, "127.0.0.1", 1)
	a, _ := tc.source("a", 4096)
	b, _ := tc.source("b", 4096)
	tc.publish(0, a)
	tc.publish(0, b)
	size, mtime := ident(t, a)
	req, _ := http.NewRequest("GET", "http://"+tc.addr+query(a, size, mtime, 0), nil)
	req.Header.Set("Range", "bytes=0-9")
	sign(req, []byte(testSecret))
	proof := req.Header.Get(authHeader)
	bsize, bmtime := ident(t, b)
	for _, r := range []struct{ target, rng string }{{query(b, bsize, bmtime, 0), "bytes=0-9"}, {query(a, size, mtime, 0), "bytes=0-"}} {
		replay, _ := http.NewRequest("GET", "http://"+tc.addr+r.target, nil)
		replay.Header.Set("Range", r.rng)
		replay.Header.Set(authHeader, proof)
		resp, err := http.DefaultClient.Do(replay)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("replayed proof for %s %s: status %d", r.target, r.rng, resp.StatusCode)
		}
	}
}

func TestServeRefusesUntrustedCopies(t *testing.T) {
	tc := newTestCase(t, "127.0.0.1", 1)
	secret := tc.dir + "/private.txt" // a file of the user's outside any tier
	os.WriteFile(secret, []byte("private bytes"), 0o600)
	ssize, smtime := ident(t, secret)
	sources := map[string]string{}
	for _, name := range []string{"link", "dirlink/x", "nobody", "writable", "fifo"} {
		p, _ := tc.source(name, 13)
		tc.publish(0, p)
		sources[name] = p
	}
	// The copy itself a symlink to the private file.
	c := tc.copyOf(0, sources["link"])
	os.Remove(c)
	os.Symlink(secret, c)
	// A directory of the tier a symlink to one holding a file named x.
	c = tc.copyOf(0, sources["dirlink/x"])
	os.MkdirAll(tc.dir+"/elsewhere", 0o700)
	os.Rename(c, tc.dir+"/elsewhere/x")
	os.Remove(c[:len(c)-2])
	os.Symlink(tc.dir+"/elsewhere", c[:len(c)-2])
	// Another user's copy, and one anybody may write.
	if !giveAway(tc.copyOf(0, sources["nobody"])) {
		delete(sources, "nobody")
	}
	os.Chmod(tc.copyOf(0, sources["writable"]), 0o666)
	// A FIFO where the copy was: must not hang the server.
	c = tc.copyOf(0, sources["fifo"])
	os.Remove(c)
	syscall.Mkfifo(c, 0o600)

	for name, src := range sources {
		size, mtime := ident(t, src)
		if name == "link" {
			size, mtime = ssize, smtime // as if the asker wanted the private file's identity
		}
		start := time.Now()
		status, body := tc.get("GET", query(src, size, mtime, 0), testSecret, "")
		if status != http.StatusNotFound || strings.Contains(string(body), "private") {
			t.Errorf("%s: status %d, body %q", name, status, body)
		}
		if time.Since(start) > 2*time.Second {
			t.Errorf("%s: took %v", name, time.Since(start))
		}
	}
	if n := tc.notServed("untrusted"); n != int64(len(sources)) {
		t.Errorf("%d counted untrusted; want %d", n, len(sources))
	}
}

func TestServerChecksItsConfiguration(t *testing.T) {
	good := ServerConfig{Roots: []string{"/pfs"}, Tiers: []string{"/t"}, Secret: testSecret, Nodes: 2}
	bad := []ServerConfig{good, good, good, good}
	bad[0].Secret = "short"
	bad[1].Roots = []string{"pfs"}
	bad[2].Tiers = []string{"t"}
	bad[3].Nodes = 0
	for _, c := range bad {
		if _, err := NewServer(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	s, err := NewServer(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		if _, err := s.Listen(addr); err == nil || !strings.Contains(err.Error(), "interface") {
			t.Errorf("Listen(%q): %v", addr, err)
		}
	}
	addr, err := s.Listen("127.0.0.3:0")
	if err != nil || !strings.HasPrefix(addr, "127.0.0.3:") || strings.HasSuffix(addr, ":0") {
		t.Errorf("Listen: %q, %v", addr, err)
	}
	s.Close()
}

// TestServeCountsAbortedBodies: an asker that hangs up mid-body is
// counted, and the file is not counted as served.
func TestServeCountsAbortedBodies(t *testing.T) {
	tc := newTestCase(t, "127.0.0.1", 1)
	a, _ := tc.source("big", 32<<20) // more than the socket buffers hold
	tc.publish(0, a)
	size, mtime := ident(t, a)
	req, _ := http.NewRequest("GET", "http://"+tc.addr+query(a, size, mtime, 0), nil)
	sign(req, []byte(testSecret))
	resp, err := (&http.Transport{Proxy: nil}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Read(make([]byte, 1))
	resp.Body.Close() // hangs up
	deadline := time.Now().Add(5 * time.Second)
	for tc.notServed("aborted") == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := tc.srv.Stats(); st.NotServed["aborted"] != 1 || st.Files[0] != 0 {
		t.Errorf("stats %+v", st)
	}
}

// missHook records the requests a server's Miss hook is asked for, and
// answers by do.
type missHook struct {
	mu    sync.Mutex
	asked []string // "source size mtime"; guarded by mu
	do    func(ctx context.Context, source string) bool
}

func (h *missHook) miss(ctx context.Context, source string, size, mtime int64) bool {
	h.mu.Lock()
	h.asked = append(h.asked, fmt.Sprint(source, " ", size, " ", mtime))
	h.mu.Unlock()
	return h.do(ctx, source)
}

func (h *missHook) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.asked)
}

// missCase is a test case whose server has h's hook and waits for it
// at most wait.
func missCase(t *testing.T, h *missHook, wait time.Duration) *testCase {
	return newTestCaseWith(t, "127.0.0.1", 2, func(_ *testCase, cfg *ServerConfig) {
		cfg.Miss, cfg.MissWait = h.miss, wait
	})
}

// publishIn publishes source's copy in tier, as the hook of a node that
// copies on demand does (no t.Fatal: it runs on the server's goroutine).
func publishIn(tier, source string) bool {
	tr, err := tiering.Open(tiering.Tier{Path: tier, Capacity: 1 << 30, Threads: 1})
	if err != nil {
		return false
	}
	defer tr.Close()
	_, err = tr.Publish(source)
	return err == nil
}

// A file the server has no copy of is copied on demand by the Miss hook
// and served from that copy, and counted as fetched for a peer, not as
// refused.
func TestServeWhatTheMissHookCopies(t *testing.T) {
	h := &missHook{}
	tc := missCase(t, h, 0)
	h.do = func(ctx context.Context, source string) bool {
		if _, ok := ctx.Deadline(); !ok {
			return false // unbounded: the asker would give up first
		}
		return publishIn(tc.tiers[1], source)
	}
	a, content := tc.source("cls/a.bin", 200<<10)
	size, mtime := ident(t, a)
	status, body := tc.get("GET", query(a, size, mtime, 1), testSecret, "")
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	equalBytes(t, "a", body, content)
	if got, want := h.calls(), []string{fmt.Sprint(a, " ", size, " ", mtime)}; !slices.Equal(got, want) {
		t.Errorf("hook asked %q; want %q", got, want)
	}
	ok := func(st ServerStats) bool { return st.Fetched == 1 && st.Files[1] == 1 }
	if st := serverStats(tc.srv, ok); !ok(st) || len(st.NotServed) != 0 {
		t.Errorf("stats %+v; want 1 file fetched for node 1, none refused", st)
	}
	// Asked again, the copy is there: served without the hook.
	if status, _ := tc.get("GET", query(a, size, mtime, 1), testSecret, ""); status != http.StatusOK || len(h.calls()) != 1 {
		t.Errorf("second request: status %d, hook called %d times; want 200, once", status, len(h.calls()))
	}
	if st := serverStats(tc.srv, func(st ServerStats) bool { return st.Files[1] == 2 }); st.Fetched != 1 {
		t.Errorf("%d fetched for peers; want 1", st.Fetched)
	}
}

// A hook that makes no copy, says it made one that is not there, or
// takes longer than MissWait leaves the request refused as missing, in
// time for the asker to read the file itself.
func TestServeMissHookFailures(t *testing.T) {
	for _, c := range []struct {
		name string
		do   func(ctx context.Context, source string) bool
	}{
		{"fails", func(context.Context, string) bool { return false }},
		{"lies", func(context.Context, string) bool { return true }},
		{"hangs", func(ctx context.Context, _ string) bool { <-ctx.Done(); return false }},
	} {
		t.Run(c.name, func(t *testing.T) {
			tc := missCase(t, &missHook{do: c.do}, 200*time.Millisecond)
			a, _ := tc.source("a", 4096)
			size, mtime := ident(t, a)
			start := time.Now()
			status, body := tc.get("GET", query(a, size, mtime, 0), testSecret, "")
			if status != http.StatusNotFound {
				t.Errorf("status %d (%s); want 404", status, body)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("answered after %v; MissWait is 200ms", d)
			}
			if st := tc.srv.Stats(); st.NotServed["missing"] != 1 || st.Fetched != 0 || st.Files[0] != 0 {
				t.Errorf("stats %+v; want one missing, nothing served", st)
			}
		})
	}
}

// The hook is asked only for a well-formed request that proves the
// secret, of a file below the root of which no copy at all is here: not
// for a stale copy, nor one the server would not serve.
func TestServeMissHookOnlyForMissingCopies(t *testing.T) {
	h := &missHook{do: func(context.Context, string) bool { return false }}
	tc := missCase(t, h, 0)
	a, _ := tc.source("a", 4096)
	link, _ := tc.source("link", 13)
	tc.publish(0, a)
	tc.publish(0, link)
	c := tc.copyOf(0, link)
	os.Remove(c)
	os.Symlink(a, c) // untrusted
	size, mtime := ident(t, a)
	lsize, lmtime := ident(t, link)
	for _, r := range []struct{ name, target, secret string }{
		{"wrong secret", query(tc.root+"/b", size, mtime, 0), "another-secret-0123456"},
		{"no proof", query(tc.root+"/b", size, mtime, 0), ""},
		{"malformed", copyEndpoint + "?path=" + tc.root + "/b", testSecret},
		{"outside", query("/etc/passwd", size, mtime, 0), testSecret},
		{"dot dot", query(tc.root+"/../b", size, mtime, 0), testSecret},
		{"stale", query(a, size, mtime+1, 0), testSecret},
		{"untrusted", query(link, lsize, lmtime, 0), testSecret},
		{"held", query(a, size, mtime, 0), testSecret},
	} {
		if status, _ := tc.get("GET", r.target, r.secret, ""); status == http.StatusOK && r.name != "held" {
			t.Errorf("%s: served", r.name)
		}
		if n := len(h.calls()); n != 0 {
			t.Fatalf("%s: hook asked %q", r.name, h.calls())
		}
	}
}
