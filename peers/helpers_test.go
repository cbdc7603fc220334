package peers

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/augur-hpc/augur/tiering"
)

const (
	testSecret = "test-secret-0123456789"
	testJob    = "job-test"
)

// testKey is the test job's key.
var testKey = jobKey(testSecret, testJob)

// testCase is one node's dataset root, two tiers and peer server, on a
// loopback address.
type testCase struct {
	t     *testing.T
	dir   string
	root  string   // the dataset root
	tiers []string // tier directories, fastest first
	srv   *Server
	node  int    // srv's node index
	addr  string // where srv listens
}

// newTestCase makes the directories and starts a server on host
// (a 127.0.0.0/8 address) for a job of nodes nodes, as node 1 of them
// (node 0 of one): a client of node 0 asks it as node 1.
func newTestCase(t *testing.T, host string, nodes int) *testCase {
	t.Helper()
	return newTestCaseWith(t, host, nodes, func(*testCase, *ServerConfig) {})
}

// newTestCaseWith is newTestCase with the server's configuration changed
// by set.
func newTestCaseWith(t *testing.T, host string, nodes int, set func(*testCase, *ServerConfig)) *testCase {
	t.Helper()
	tc := &testCase{t: t, dir: t.TempDir()}
	tc.root = tc.dir + "/pfs/ds"
	tc.tiers = []string{tc.dir + "/t0", tc.dir + "/t1"}
	if err := os.MkdirAll(tc.root, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := ServerConfig{Roots: []string{tc.root}, Tiers: tc.tiers, Secret: testSecret, Job: testJob, Node: min(1, nodes-1), Nodes: nodes}
	set(tc, &cfg)
	tc.node = cfg.Node
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tc.addr, err = srv.Listen(host + ":0"); err != nil {
		t.Fatal(err)
	}
	tc.srv = srv
	t.Cleanup(func() { srv.Close() })
	return tc
}

// source writes a file of n random bytes (seeded by its name) under the
// root and returns its path and content.
func (tc *testCase) source(rel string, n int) (string, []byte) {
	tc.t.Helper()
	p := filepath.Join(tc.root, rel)
	var seed [32]byte
	copy(seed[:], fmt.Sprint(rel, n))
	b := make([]byte, n)
	rand.NewChaCha8(seed).Read(b)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tc.t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		tc.t.Fatal(err)
	}
	return p, b
}

// publish copies source into tier i by the tiering package's protocol.
func (tc *testCase) publish(i int, source string) {
	tc.t.Helper()
	tr, err := tiering.Open(tiering.Tier{Path: tc.tiers[i], Capacity: 1 << 30, Threads: 1})
	if err != nil {
		tc.t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Publish(source); err != nil {
		tc.t.Fatal(err)
	}
}

// copyOf is the path of source's copy in tier i.
func (tc *testCase) copyOf(i int, source string) string {
	p, err := tiering.CopyPath(tc.tiers[i], source)
	if err != nil {
		tc.t.Fatal(err)
	}
	return p
}

// ident is a file's size and mtime in nanoseconds.
func ident(t *testing.T, path string) (int64, int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size(), fi.ModTime().UnixNano()
}

// ask is the target of a request from node from to the test case's
// server, made now.
func (tc *testCase) ask(source string, size, mtime int64, from int) string {
	return query(source, size, mtime, 0, from, tc.node, time.Now())
}

// get sends a request for target to the server, signed with the key of
// secret and the test job unless secret is "", with the given Range
// unless "", and returns the status and body. The answer's tag is
// checked and taken off a body.
func (tc *testCase) get(method, target, secret, rng string) (int, []byte) {
	tc.t.Helper()
	req, err := http.NewRequest(method, "http://"+tc.addr+target, nil)
	if err != nil {
		tc.t.Fatal(err)
	}
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	var proof []byte
	if secret != "" {
		proof = sign(req, jobKey(secret, testJob))
	}
	hc := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := hc.Do(req)
	if err != nil {
		tc.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		tc.t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		if len(body) < tagLen {
			tc.t.Fatalf("a body of %d bytes has no tag", len(body))
		}
		body, got := body[:len(body)-tagLen], body[len(body)-tagLen:]
		tag := answerTag(testKey, proof, http.StatusOK)
		tag.Write(body)
		if !bytes.Equal(got, tag.Sum(nil)) {
			tc.t.Errorf("the answer's tag is wrong")
		}
		return resp.StatusCode, body
	}
	return resp.StatusCode, body
}

// answerWith answers r as a server of the test job would, with body.
func answerWith(w http.ResponseWriter, r *http.Request, body []byte) {
	proof, _ := hex.DecodeString(r.Header.Get(authHeader))
	tag := answerTag(testKey, proof, http.StatusOK)
	tag.Write(body)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+tagLen))
	w.Write(body)
	w.Write(tag.Sum(nil))
}

// notServed is the server's count of requests not served for reason.
func (tc *testCase) notServed(why string) int64 { return tc.srv.Stats().NotServed[why] }

func equalBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s: %d bytes differ from the %d expected", what, len(got), len(want))
	}
}

// giveAway makes path another user's (nobody's). Only root can; it
// reports whether it did.
func giveAway(path string) bool {
	return os.Geteuid() == 0 && os.Chown(path, 65534, 65534) == nil
}

// serverStats returns srv's counters once ok accepts them, or after 5 s.
// A body is counted when its handler returns, which may be just after the
// asker has read all of it.
func serverStats(srv *Server, ok func(ServerStats) bool) ServerStats {
	deadline := time.Now().Add(5 * time.Second)
	st := srv.Stats()
	for !ok(st) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		st = srv.Stats()
	}
	return st
}
