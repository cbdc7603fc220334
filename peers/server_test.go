package peers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/augur-hpc/augur/tiering"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

func TestServeCopies(t *testing.T) {
	tc := newTestCase(t, "127.0.0.1", 3)
	a, content := tc.source("cls/a.bin", 300<<10)
	b, bcontent := tc.source("cls/b.bin", 1000)
	tc.publish(0, a)
	tc.publish(1, b) // only in the slower tier
	size, mtime := ident(t, a)
	status, body := tc.get("GET", tc.ask(a, size, mtime, 2), testSecret, "")
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	equalBytes(t, "a", body, content)
	bsize, bmtime := ident(t, b)
	status, body = tc.get("GET", tc.ask(b, bsize, bmtime, 1), testSecret, "")
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
		{"no proof", "GET", tc.ask(a, size, mtime, 0), "", 403, "auth"},
		{"wrong secret", "GET", tc.ask(a, size, mtime, 0), "another-secret-0123456", 403, "auth"},
		{"post", "POST", tc.ask(a, size, mtime, 0), testSecret, 405, "request"},
		{"other endpoint", "GET", "/v1/other?path=" + a, testSecret, 400, "request"},
		{"no size", "GET", copyEndpoint + "?path=" + a + "&mtime=1&from=0", testSecret, 400, "request"},
		{"two paths", "GET", tc.ask(a, size, mtime, 0) + "&path=" + a, testSecret, 400, "request"},
		{"bad escape", "GET", tc.ask(a, size, mtime, 0) + "&x=%zz", testSecret, 400, "request"},
		{"node out of range", "GET", tc.ask(a, size, mtime, 2), testSecret, 400, "request"},
		{"negative size", "GET", tc.ask(a, -1, mtime, 0), testSecret, 400, "request"},
		{"relative", "GET", tc.ask("pfs/ds/a", size, mtime, 0), testSecret, 400, "request"},
		{"dot dot", "GET", tc.ask(root+"/../../../etc/passwd", size, mtime, 0), testSecret, 400, "request"},
		{"dot dot inside", "GET", tc.ask(root+"/x/../a", size, mtime, 0), testSecret, 400, "request"},
		{"nul", "GET", tc.ask(a+"\x00.jpg", size, mtime, 0), testSecret, 400, "request"},
		{"outside", "GET", tc.ask("/etc/passwd", size, mtime, 0), testSecret, 403, "outside"},
		{"the root", "GET", tc.ask(root, size, mtime, 0), testSecret, 403, "outside"},
		{"a prefix of the root", "GET", tc.ask(root+"x/a", size, mtime, 0), testSecret, 403, "outside"},
		{"not held", "GET", tc.ask(root+"/b", size, mtime, 0), testSecret, 404, "missing"},
		{"other size", "GET", tc.ask(a, size+1, mtime, 0), testSecret, 409, "stale"},
		{"other mtime", "GET", tc.ask(a, size, mtime+1, 0), testSecret, 409, "stale"},
		{"a range", "GET", tc.ask(a, size, mtime, 0), testSecret, 400, "request"},
		{"no nonce", "GET", strings.Split(tc.ask(a, size, mtime, 0), "&n=")[0], testSecret, 400, "request"},
		{"for node 0", "GET", query(a, size, mtime, 0, 0, 0, time.Now()), testSecret, 403, "misdirected"},
		{"asked 31 s ago", "GET", query(a, size, mtime, 0, 0, 1, time.Now().Add(-31*time.Second)), testSecret, 403, "expired"},
		{"asked 31 s ahead", "GET", query(a, size, mtime, 0, 0, 1, time.Now().Add(31*time.Second)), testSecret, 403, "expired"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := tc.notServed(c.reason)
			rng := map[bool]string{true: "bytes=0-9"}[c.name == "a range"]
			status, body := tc.get(c.method, c.target, c.secret, rng)
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

// TestServeProofIsBoundToTheRequest: a proof taken from one request
// serves neither another request, nor the same one again, nor the same
// one after the window, at the node it was meant for or at another, in
// this job or in another with the same secret.
func TestServeProofIsBoundToTheRequest(t *testing.T) {
	tc := newTestCase(t, "127.0.0.1", 2)
	a, _ := tc.source("a", 4096)
	b, _ := tc.source("b", 4096)
	tc.publish(0, a)
	tc.publish(0, b)
	size, mtime := ident(t, a)
	bsize, bmtime := ident(t, b)
	target := tc.ask(a, size, mtime, 0)
	req, _ := http.NewRequest("GET", "http://"+tc.addr+target, nil)
	sign(req, testKey)
	proof := req.Header.Get(authHeader)
	send := func(tc *testCase, target string) int {
		t.Helper()
		replay, _ := http.NewRequest("GET", "http://"+tc.addr+target, nil)
		replay.Header.Set(authHeader, proof)
		resp, err := http.DefaultClient.Do(replay)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status := send(tc, target); status != http.StatusOK {
		t.Fatalf("the request itself: status %d", status)
	}
	other := newTestCaseWith(t, "127.0.0.2", 2, func(_ *testCase, cfg *ServerConfig) { cfg.Node, cfg.Roots = 0, []string{tc.root} })
	later := newTestCaseWith(t, "127.0.0.3", 2, func(_ *testCase, cfg *ServerConfig) { cfg.Job = "job-later" })
	for _, r := range []struct {
		name   string
		tc     *testCase
		target string
		reason string
	}{
		{"another file", tc, tc.ask(b, bsize, bmtime, 0), "auth"},
		{"again", tc, target, "replay"},
		{"at another node", other, target, "misdirected"},
		{"in a later job", later, target, "auth"},
	} {
		if status := send(r.tc, r.target); status != http.StatusForbidden || r.tc.notServed(r.reason) != 1 {
			t.Errorf("%s: status %d, %s counted %d; want 403, once", r.name, status, r.reason, r.tc.notServed(r.reason))
		}
	}
	// The same request after the window: the server's clock moved on.
	tc.srv.now = func() time.Time { return time.Now().Add(requestWindow + 2*time.Second) }
	if status := send(tc, target); status != http.StatusForbidden || tc.notServed("expired") != 1 {
		t.Errorf("after the window: status %d, expired counted %d; want 403, once", status, tc.notServed("expired"))
	}
	if st := tc.srv.Stats(); st.Files[0] != 1 {
		t.Errorf("served %d files; want the one", st.Files[0])
	}
}

// TestServeMisdirected: a node's proof for another node of the job is
// refused as meant for that node.
func TestServeMisdirected(t *testing.T) {
	tc := newTestCaseWith(t, "127.0.0.1", 3, func(_ *testCase, cfg *ServerConfig) { cfg.Node = 2 })
	a, _ := tc.source("a", 100)
	tc.publish(0, a)
	size, mtime := ident(t, a)
	if status, _ := tc.get("GET", query(a, size, mtime, 0, 0, 1, time.Now()), testSecret, ""); status != http.StatusForbidden || tc.notServed("misdirected") != 1 {
		t.Errorf("status %d, misdirected %d; want 403, 1", status, tc.notServed("misdirected"))
	}
	if status, _ := tc.get("GET", query(a, size, mtime, 0, 0, 2, time.Now()), testSecret, ""); status != http.StatusOK {
		t.Errorf("its own request: status %d", status)
	}
}

func TestServeRefusesUntrustedCopies(t *testing.T) {
	tc := newTestCase(t, "127.0.0.1", 1)
	secret := tc.dir + "/private.txt" // a file of the user's outside any tier
	os.WriteFile(secret, []byte("private bytes"), 0o600)
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
		start := time.Now()
		status, body := tc.get("GET", tc.ask(src, size, mtime, 0), testSecret, "")
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
	good := ServerConfig{Roots: []string{"/pfs"}, Tiers: []string{"/t"}, Secret: testSecret, Job: testJob, Nodes: 2}
	bad := []ServerConfig{good, good, good, good, good, good, good}
	bad[0].Secret = "short"
	bad[1].Roots = []string{"pfs"}
	bad[2].Tiers = []string{"t"}
	bad[3].Nodes = 0
	bad[4].Node = 2
	bad[5].Job = ""
	bad[6].Job = "../j"
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
	req, _ := http.NewRequest("GET", "http://"+tc.addr+tc.ask(a, size, mtime, 0), nil)
	sign(req, testKey)
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
	status, body := tc.get("GET", tc.ask(a, size, mtime, 1), testSecret, "")
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
	if status, _ := tc.get("GET", tc.ask(a, size, mtime, 1), testSecret, ""); status != http.StatusOK || len(h.calls()) != 1 {
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
			status, body := tc.get("GET", tc.ask(a, size, mtime, 0), testSecret, "")
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
		{"wrong secret", tc.ask(tc.root+"/b", size, mtime, 0), "another-secret-0123456"},
		{"no proof", tc.ask(tc.root+"/b", size, mtime, 0), ""},
		{"malformed", copyEndpoint + "?path=" + tc.root + "/b", testSecret},
		{"outside", tc.ask("/etc/passwd", size, mtime, 0), testSecret},
		{"dot dot", tc.ask(tc.root+"/../b", size, mtime, 0), testSecret},
		{"stale", tc.ask(a, size, mtime+1, 0), testSecret},
		{"untrusted", tc.ask(link, lsize, lmtime, 0), testSecret},
		{"held", tc.ask(a, size, mtime, 0), testSecret},
	} {
		if status, _ := tc.get("GET", r.target, r.secret, ""); status == http.StatusOK && r.name != "held" {
			t.Errorf("%s: served", r.name)
		}
		if n := len(h.calls()); n != 0 {
			t.Fatalf("%s: hook asked %q", r.name, h.calls())
		}
	}
}

// TestServeOnlyTheDatasetsOwnFiles: a source reached through a symlink
// in the dataset (to a file outside it, or inside), or with other names
// (a hard link), is neither served nor copied on demand, whatever copy
// the tier holds: whoever can write into the dataset could otherwise have
// any file of the user's sent to the other nodes. Each is counted and
// the first logged; an ordinary file is served.
func TestServeOnlyTheDatasetsOwnFiles(t *testing.T) {
	var log strings.Builder
	h := &missHook{do: func(context.Context, string) bool { return false }}
	tc := newTestCaseWith(t, "127.0.0.1", 2, func(tc *testCase, cfg *ServerConfig) {
		cfg.Miss, cfg.Log = h.miss, zerolog.New(&log)
	})
	private := tc.dir + "/private.txt"
	os.WriteFile(private, []byte("private bytes of the user's"), 0o600)
	inside, _ := tc.source("cls/inside.bin", 64)
	plain, content := tc.source("cls/plain.bin", 64)
	os.MkdirAll(tc.dir+"/elsewhere", 0o700)
	os.WriteFile(tc.dir+"/elsewhere/x", []byte("private bytes, in a directory"), 0o600)
	links := map[string]func(p string) error{
		"symlink out":         func(p string) error { return os.Symlink(private, p) },
		"symlink in":          func(p string) error { return os.Symlink(inside, p) },
		"directory symlink":   func(p string) error { return os.Symlink(tc.dir+"/elsewhere", filepath.Dir(p)) },
		"hard link out":       func(p string) error { return os.Link(private, p) },
		"hard link in":        func(p string) error { return os.Link(inside, p) },
		"relative symlink up": func(p string) error { return os.Symlink("../../../private.txt", p) },
	}
	i := 0
	for name, link := range links {
		i++
		p := fmt.Sprintf("%s/cls%d/x", tc.root, i)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if name == "directory symlink" {
			os.Remove(filepath.Dir(p))
		}
		if err := link(p); err != nil {
			t.Fatal(err)
		}
		tc.publish(0, p) // as the node's own reader's copy would be
		size, mtime := ident(t, p)
		status, body := tc.get("GET", tc.ask(p, size, mtime, 0), testSecret, "")
		if status != http.StatusNotFound || strings.Contains(string(body), "private") || strings.Contains(string(body), "\x00") {
			t.Errorf("%s: status %d, body %q; want 404 and nothing of the file", name, status, body)
		}
		os.Remove(tc.copyOf(0, p)) // no copy: it would be made on demand
		if status, _ := tc.get("GET", tc.ask(p, size, mtime, 0), testSecret, ""); status != http.StatusNotFound || len(h.calls()) != 0 {
			t.Errorf("%s, no copy: status %d, copy on demand asked %q; want 404 and none", name, status, h.calls())
		}
	}
	if n := tc.notServed("linked"); n != int64(2*len(links)) {
		t.Errorf("%d counted linked; want %d", n, 2*len(links))
	}
	if n := strings.Count(log.String(), "(linked)"); n != 1 {
		t.Errorf("logged %d times: %s", n, log.String())
	}
	tc.publish(0, plain)
	size, mtime := ident(t, plain)
	if status, body := tc.get("GET", tc.ask(plain, size, mtime, 0), testSecret, ""); status != http.StatusOK {
		t.Errorf("an ordinary file: status %d", status)
	} else {
		equalBytes(t, "plain", body, content)
	}
}

// TestServeRefusesACopyOfAnotherFile: a copy made from another file than
// the one the source path now names (a symlink swapped in while it was
// copied, then swapped back), with the same size and mtime, is not
// served: the copy records its source's identity.
func TestServeRefusesACopyOfAnotherFile(t *testing.T) {
	tc := newTestCase(t, "127.0.0.1", 2)
	a, _ := tc.source("a", 4096)
	other := tc.dir + "/other"
	os.WriteFile(other, make([]byte, 4096), 0o600)
	size, mtime := ident(t, a)
	os.Chtimes(other, time.Unix(0, mtime), time.Unix(0, mtime))
	os.Rename(a, a+".real")
	os.Symlink(other, a)
	tc.publish(0, a)
	os.Remove(a)
	os.Rename(a+".real", a)
	if status, _ := tc.get("GET", tc.ask(a, size, mtime, 0), testSecret, ""); status != http.StatusConflict || tc.notServed("stale") != 1 {
		t.Errorf("status %d, stale %d; want 409, 1", status, tc.notServed("stale"))
	}
}

// dialFrom connects to addr from the loopback address from.
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closed says whether the server closed c (within 5 s).
func closed(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF)
}

// waitFor polls cond for up to 5 s and reports whether it held.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// TestServerBoundsConnections: connections beyond the cap in all or from
// one address are closed at once and counted; one whose request is
// refused is closed after the answer; a closed one frees its place.
func TestServerBoundsConnections(t *testing.T) {
	tc := newTestCaseWith(t, "127.0.0.1", 2, func(_ *testCase, cfg *ServerConfig) {
		cfg.MaxConns, cfg.MaxConnsPerAddr = 4, 2
	})
	open := func(n int) func() bool { return func() bool { return tc.srv.ln.conns() == n } }
	var held []net.Conn
	for _, from := range []string{"127.0.0.10", "127.0.0.10", "127.0.0.11", "127.0.0.11"} {
		held = append(held, dialFrom(t, from, tc.addr))
	}
	if !waitFor(open(4)) {
		t.Fatalf("%d connections open; want 4", tc.srv.ln.conns())
	}
	if c := dialFrom(t, "127.0.0.12", tc.addr); !closed(c) || tc.notServed("conns") != 1 {
		t.Errorf("a fifth connection was kept (conns refused %d)", tc.notServed("conns"))
	}
	held[3].Close()
	if !waitFor(open(3)) {
		t.Fatalf("%d connections open after one closed; want 3", tc.srv.ln.conns())
	}
	dialFrom(t, "127.0.0.11", tc.addr)
	if !waitFor(open(4)) {
		t.Errorf("a connection in the place of a closed one was not kept: %d open", tc.srv.ln.conns())
	}
	held[0].Close()
	waitFor(open(3))
	if c := dialFrom(t, "127.0.0.11", tc.addr); !closed(c) || tc.notServed("conns_per_addr") != 1 {
		t.Errorf("a third connection from one address was kept (refused %d)", tc.notServed("conns_per_addr"))
	}
	// A stranger's request is answered, and its connection closed.
	fmt.Fprintf(held[1], "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", tc.ask(tc.root+"/a", 1, 1, 0))
	resp, err := http.ReadResponse(bufio.NewReader(held[1]), nil)
	if err != nil || resp.StatusCode != http.StatusForbidden || !resp.Close || !closed(held[1]) {
		t.Errorf("a request without proof: %v %+v; want 403 and the connection closed", err, resp)
	}
	if !waitFor(open(2)) || tc.notServed("auth") != 1 {
		t.Errorf("%d open, %v refused; want 2 open and one auth", tc.srv.ln.conns(), tc.srv.Stats().NotServed)
	}
}

// TestServerKeepsToItsDescriptorBudget: under a descriptor limit of 128,
// the server keeps at most 16 connections (an eighth), and none once the
// process's own descriptors reach the last eighth of the limit, which it
// leaves to the process.
func TestServerKeepsToItsDescriptorBudget(t *testing.T) {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = 128
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &old) })
	tc := newTestCaseWith(t, "127.0.0.1", 2, func(_ *testCase, cfg *ServerConfig) { cfg.MaxConnsPerAddr = 100 })
	var conns []net.Conn
	for range 20 {
		conns = append(conns, dialFrom(t, "127.0.0.20", tc.addr))
	}
	if !waitFor(func() bool { return tc.srv.ln.conns() == 16 && tc.notServed("conns") == 4 }) {
		t.Errorf("%d connections kept, %d refused; want 16 and 4", tc.srv.ln.conns(), tc.notServed("conns"))
	}
	for _, c := range conns {
		c.Close()
	}
	if !waitFor(func() bool { return tc.srv.ln.conns() == 0 }) {
		t.Fatalf("%d connections open after all closed", tc.srv.ln.conns())
	}
	// The process takes descriptors until its next one is in the last
	// eighth: a new connection is refused, though the server holds none.
	var files []*os.File
	t.Cleanup(func() {
		for _, f := range files {
			f.Close()
		}
	})
	for len(files) == 0 || files[len(files)-1].Fd() < 128-16 {
		f, err := os.Open("/dev/null")
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	dialFrom(t, "127.0.0.21", tc.addr)
	if !waitFor(func() bool { return tc.notServed("fds") == 1 }) || tc.srv.ln.conns() != 0 {
		t.Errorf("%d connections kept with the process at the last eighth of its limit; refused %v", tc.srv.ln.conns(), tc.srv.Stats().NotServed)
	}
}

// TestServeACheckedCopyWithoutTheSource: a copy whose source was checked
// once is served again without asking the shared filesystem (here: the
// source's path a symlink to a private file by then, which would be
// refused), and what it serves is the dataset's bytes it was made of; a
// new copy made through that symlink is not.
func TestServeACheckedCopyWithoutTheSource(t *testing.T) {
	tc := newTestCase(t, "127.0.0.1", 2)
	a, content := tc.source("cls/a.bin", 4096)
	tc.publish(0, a)
	size, mtime := ident(t, a)
	if status, body := tc.get("GET", tc.ask(a, size, mtime, 0), testSecret, ""); status != http.StatusOK {
		t.Fatalf("status %d", status)
	} else {
		equalBytes(t, "first", body, content)
	}
	private := tc.dir + "/private"
	os.WriteFile(private, make([]byte, 4096), 0o600)
	os.Chtimes(private, time.Unix(0, mtime), time.Unix(0, mtime))
	os.Rename(a, tc.dir+"/a.moved")
	os.Symlink(private, a)
	if status, body := tc.get("GET", tc.ask(a, size, mtime, 0), testSecret, ""); status != http.StatusOK {
		t.Errorf("the checked copy: status %d", status)
	} else {
		equalBytes(t, "again", body, content)
	}
	tc.publish(0, a) // the local reader's copy, through the symlink
	if status, _ := tc.get("GET", tc.ask(a, size, mtime, 0), testSecret, ""); status != http.StatusNotFound || tc.notServed("linked") != 1 {
		t.Errorf("a copy made through the symlink: status %d, linked %d; want 404, 1", status, tc.notServed("linked"))
	}
}

// TestServeTheInodeTheAskerFound: a request naming the inode its asker
// found at the source's path (StatSource) is served from a copy made
// from that inode without asking the shared filesystem (here: the
// source gone meanwhile); one naming another inode is checked against
// the shared filesystem, and refused.
func TestServeTheInodeTheAskerFound(t *testing.T) {
	tc := newTestCase(t, "127.0.0.1", 2)
	a, content := tc.source("cls/a.bin", 4096)
	tc.publish(0, a)
	var st unix.Stat_t
	if err := StatSource([]string{tc.root}, a, &st); err != nil {
		t.Fatal(err)
	}
	size, mtime := ident(t, a)
	os.Rename(a, tc.dir+"/a.moved")
	status, body := tc.get("GET", query(a, size, mtime, st.Ino, 0, tc.node, time.Now()), testSecret, "")
	if status != http.StatusOK {
		t.Fatalf("the inode asked: status %d", status)
	}
	equalBytes(t, "a", body, content)
	if status, _ := tc.get("GET", query(a, size, mtime, st.Ino+1, 0, tc.node, time.Now()), testSecret, ""); status != http.StatusNotFound || tc.notServed("missing") != 1 {
		t.Errorf("another inode: status %d, missing %d; want 404, 1", status, tc.notServed("missing"))
	}
}
