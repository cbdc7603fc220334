package peers

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// fakePeer serves handler on 127.0.0.1 and returns its address.
func fakePeer(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// newClient is node 0's client of a two-node job whose node 1 is at addr.
func newClient(t *testing.T, cfg ClientConfig, addr string) *Client {
	t.Helper()
	if cfg.Secret == "" {
		cfg.Secret, cfg.Job = testSecret, testJob
	}
	c, err := NewClient(cfg, []string{"", addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// tempFile is an empty file to fetch into.
func tempFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "dst")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestFetchFromAPeer(t *testing.T) {
	tc := newTestCase(t, "127.0.0.2", 2)
	a, content := tc.source("cls/a.jpg", 200<<10)
	tc.publish(0, a)
	size, mtime := ident(t, a)
	c := newClient(t, ClientConfig{}, tc.addr)
	dst := tempFile(t)
	n, err := c.Fetch(context.Background(), 1, a, size, mtime, 0, dst)
	if err != nil || n != size {
		t.Fatalf("Fetch: %d, %v", n, err)
	}
	got, _ := os.ReadFile(dst.Name())
	equalBytes(t, "fetched", got, content)
	for _, miss := range []struct {
		path        string
		size, mtime int64
	}{{tc.root + "/b", 1, mtime}, {a, size, mtime + 1}, {a, size - 1, mtime}} {
		if _, err := c.Fetch(context.Background(), 1, miss.path, miss.size, miss.mtime, 0, tempFile(t)); !errors.Is(err, ErrNotHeld) {
			t.Errorf("%+v: %v; want ErrNotHeld", miss, err)
		}
	}
	st := c.Stats()[1]
	if st.FilesIn != 1 || st.BytesIn != size || st.Misses != 3 || st.Errors != 0 || st.Down || !c.Up(1) {
		t.Errorf("client stats %+v", st)
	}
	if out := serverStats(tc.srv, func(st ServerStats) bool { return st.Files[0] == 1 && st.Bytes[0] == size }); out.Files[0] != 1 || out.Bytes[0] != size {
		t.Errorf("server stats %+v", out)
	}
	for _, node := range []int{0, 2, -1} {
		if _, err := c.Fetch(context.Background(), node, a, size, mtime, 0, tempFile(t)); !errors.Is(err, ErrNoPeer) {
			t.Errorf("node %d: %v; want ErrNoPeer", node, err)
		}
	}
}

// TestFetchBacksOff: a peer that fails is left alone, twice as long after
// each failure up to the cap, and a success starts afresh.
func TestFetchBacksOff(t *testing.T) {
	var fail atomic.Bool
	var requests atomic.Int64
	addr := fakePeer(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if fail.Load() {
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		answerWith(w, r, []byte("abc"))
	})
	c := newClient(t, ClientConfig{Backoff: time.Second, MaxBackoff: 4 * time.Second}, addr)
	clock := time.Unix(1000, 0)
	c.now = func() time.Time { return clock }
	fetch := func() error {
		_, err := c.Fetch(context.Background(), 1, "/pfs/a", 3, 1, 0, tempFile(t))
		return err
	}
	fail.Store(true)
	for _, backoff := range []time.Duration{1, 2, 4, 4} {
		before := requests.Load()
		if err := fetch(); !errors.Is(err, ErrRefused) {
			t.Fatalf("%v; want ErrRefused", err)
		}
		if err := fetch(); !errors.Is(err, ErrPeerDown) || requests.Load() != before+1 {
			t.Fatalf("while down: %v after %d requests; want ErrPeerDown and no request", err, requests.Load()-before)
		}
		clock = clock.Add(backoff*time.Second - time.Millisecond)
		if c.Up(1) {
			t.Fatalf("up before its %ds backoff ended", backoff)
		}
		clock = clock.Add(time.Millisecond)
		if !c.Up(1) {
			t.Fatalf("still down after its %ds backoff", backoff)
		}
	}
	fail.Store(false)
	if err := fetch(); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	fetch()
	if st := c.Stats()[1]; st.Backoff != time.Second || !st.Down || st.Errors != 5 || st.FilesIn != 1 {
		t.Errorf("after a success and a failure: %+v", st)
	}
}

// TestFetchChecksTheLength: a body longer or shorter than the file and
// its tag, or of unannounced length, is refused and the peer marked
// down.
func TestFetchChecksTheLength(t *testing.T) {
	const size = 10000
	body := strings.Repeat("x", size+5)
	cases := map[string]http.HandlerFunc{
		"longer": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(size+5))
			w.Write([]byte(body))
		},
		"shorter": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(size))
			w.Write([]byte(body[:size-10])) // the server then closes the connection
		},
		"unannounced": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(body[:size]))
			w.(http.Flusher).Flush() // chunked: no length
			w.Write([]byte(body[size:]))
		},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, ClientConfig{}, fakePeer(t, h))
			_, err := c.Fetch(context.Background(), 1, "/pfs/a", size, 1, 0, tempFile(t))
			if err == nil {
				t.Fatal("accepted")
			}
			if name != "shorter" && !errors.Is(err, ErrLength) {
				t.Errorf("%v; want ErrLength", err)
			}
			if c.Up(1) || c.Stats()[1].Errors != 1 {
				t.Errorf("not marked down: %+v", c.Stats()[1])
			}
		})
	}
}

// TestFetchChecksTheAnswer: an answer not made with the job's key for
// this request (forged, replayed from another request, another job's,
// a "not held" without its tag) or cut short is a peer error: the peer
// is marked down, the forged ones counted and the first logged.
func TestFetchChecksTheAnswer(t *testing.T) {
	const size = 1000
	body := []byte(strings.Repeat("F", size))
	tagged := func(key []byte, proof func(*http.Request) []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			tag := answerTag(key, proof(r), http.StatusOK)
			tag.Write(body)
			w.Header().Set("Content-Length", strconv.Itoa(size+tagLen))
			w.Write(body)
			w.Write(tag.Sum(nil))
		}
	}
	itsProof := func(r *http.Request) []byte { p, _ := hex.DecodeString(r.Header.Get(authHeader)); return p }
	otherProof := func(*http.Request) []byte {
		return requestMAC(testKey, "GET", query("/pfs/a", size, 1, 0, 0, 1, time.Now()))
	}
	cases := []struct {
		name    string
		h       http.HandlerFunc
		want    error
		counted int64 // as forged
	}{
		{"forged", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(size+tagLen))
			w.Write(body)
			w.Write(make([]byte, tagLen))
		}, ErrForged, 1},
		{"another request's", tagged(testKey, otherProof), ErrForged, 1},
		{"another job's", tagged(jobKey(testSecret, "job-other"), itsProof), ErrForged, 1},
		{"not held, untagged", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, ErrForged, 1},
		{"truncated", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(size+tagLen))
			w.Write(body)
		}, ErrLength, 0},
		{"theirs", tagged(testKey, itsProof), nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logged strings.Builder
			c := newClient(t, ClientConfig{Log: zerolog.New(&logged)}, fakePeer(t, tc.h))
			_, err := c.Fetch(context.Background(), 1, "/pfs/a", size, 1, 0, tempFile(t))
			st := c.Stats()[1]
			if tc.want == nil {
				if err != nil || !c.Up(1) || st.FilesIn != 1 {
					t.Fatalf("the peer's own answer: %v, %+v", err, st)
				}
				return
			}
			if !errors.Is(err, tc.want) || c.Up(1) || st.Errors != 1 || st.Forged != tc.counted || st.FilesIn != 0 {
				t.Errorf("%v, %+v; want %v, the peer down, %d forged", err, st, tc.want, tc.counted)
			}
			if lines := strings.Count(logged.String(), "\n"); lines != int(tc.counted) {
				t.Errorf("logged %d times: %s", lines, logged.String())
			}
		})
	}
}

// hangingPeer answers nothing until the request ends or the test does.
func hangingPeer(t *testing.T) string {
	release := make(chan struct{})
	addr := fakePeer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	return addr
}

func TestFetchTimesOut(t *testing.T) {
	c := newClient(t, ClientConfig{Timeout: 200 * time.Millisecond}, hangingPeer(t))
	start := time.Now()
	_, err := c.Fetch(context.Background(), 1, "/pfs/a", 100, 1, 0, tempFile(t))
	if err == nil || time.Since(start) > 3*time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
	if c.Up(1) {
		t.Error("a peer that timed out is still up")
	}
}

func TestFetchCancelledIsNotThePeersFault(t *testing.T) {
	c := newClient(t, ClientConfig{Timeout: 5 * time.Second}, hangingPeer(t))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Fetch(ctx, 1, "/pfs/a", 100, 1, 0, tempFile(t)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v; want the caller's deadline", err)
	}
	if !c.Up(1) || c.Stats()[1].Errors != 0 {
		t.Errorf("marked down for the caller's cancellation: %+v", c.Stats()[1])
	}
}

func TestFetchWriteFailureIsNotThePeersFault(t *testing.T) {
	addr := fakePeer(t, func(w http.ResponseWriter, r *http.Request) { answerWith(w, r, []byte("abc")) })
	c := newClient(t, ClientConfig{}, addr)
	ro, err := os.Open(tempFile(t).Name())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := c.Fetch(context.Background(), 1, "/pfs/a", 3, 1, 0, ro); err == nil || !strings.Contains(err.Error(), "writing the copy") {
		t.Fatalf("%v; want a write error", err)
	}
	if !c.Up(1) {
		t.Error("marked down for a local write failure")
	}
}

func TestFetchBoundsRequestsPerPeer(t *testing.T) {
	var active, most atomic.Int64
	addr := fakePeer(t, func(w http.ResponseWriter, r *http.Request) {
		n := active.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(30 * time.Millisecond)
		active.Add(-1)
		answerWith(w, r, []byte("abc"))
	})
	c := newClient(t, ClientConfig{PerPeer: 2}, addr)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := c.Fetch(context.Background(), 1, "/pfs/a", 3, 1, 0, tempFile(t)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if most.Load() > 2 {
		t.Errorf("%d requests at once; the bound is 2", most.Load())
	}
}

// TestFetchFollowsNoRedirect: a peer cannot send the client, and the
// proof of the secret, to another address.
func TestFetchFollowsNoRedirect(t *testing.T) {
	var visits atomic.Int64
	other := fakePeer(t, func(w http.ResponseWriter, r *http.Request) { visits.Add(1) })
	addr := fakePeer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+other+r.RequestURI, http.StatusFound)
	})
	c := newClient(t, ClientConfig{}, addr)
	if _, err := c.Fetch(context.Background(), 1, "/pfs/a", 3, 1, 0, tempFile(t)); !errors.Is(err, ErrRefused) {
		t.Errorf("%v; want ErrRefused", err)
	}
	if visits.Load() != 0 {
		t.Error("the redirect was followed")
	}
}

func TestNewClientChecks(t *testing.T) {
	for _, tc := range []struct {
		cfg   ClientConfig
		addrs []string
	}{
		{ClientConfig{Secret: "short", Job: testJob}, []string{"", "127.0.0.1:1"}},
		{ClientConfig{Secret: testSecret, Job: testJob, Node: 2}, []string{"", "127.0.0.1:1"}},
		{ClientConfig{Secret: testSecret, Job: testJob}, []string{"", "0.0.0.0:1"}},
		{ClientConfig{Secret: testSecret, Job: testJob}, []string{"", "127.0.0.1"}},
		{ClientConfig{Secret: testSecret}, []string{"", "127.0.0.1:1"}},
		{ClientConfig{Secret: testSecret, Job: "a b"}, []string{"", "127.0.0.1:1"}},
	} {
		if _, err := NewClient(tc.cfg, tc.addrs); err == nil {
			t.Errorf("%+v %q accepted", tc.cfg, tc.addrs)
		}
	}
}
