package test

// Attacks on a job of several nodes (issue 41), run on loopback: a
// stranger (nobody, who does not know the job's secret) who takes a
// member's listed address and answers with forged bytes, or floods a
// leader that lives inside the training process with connections, or
// made the rendezvous directory first; and one who captured a member's
// request and replays it. In every case no forged byte may be read or
// kept, every open of the program must work, and each refusal is counted
// or said.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/augur-hpc/augur/peers"
	"github.com/augur-hpc/augur/shim"
)

// strangerServer runs, as nobody, an HTTP server on addr that answers
// every request with 200 and forged bytes ('F') of the length the
// request's size asks for, and 32 more (a forged tag) where the request
// is of the kind whose answers carry one (it has a nonce): the answer
// the asking node expects, but for the bytes. It stops with the test.
func strangerServer(t *testing.T, addr string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	script := `import http.server, sys, urllib.parse
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        size = int(q.get('size', ['0'])[0]) + 32 * ('n' in q)
        self.send_response(200)
        self.send_header('Content-Length', str(size))
        self.end_headers()
        self.wfile.write(b'F' * size)
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), H)
print('listening', flush=True)
s.serve_forever()
`
	a := attacker.argv(false, Python, "-c", script, host, port)
	cmd := exec.Command(a[0], a[1:]...)
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "listening\n" {
		t.Fatalf("the stranger's server did not start: %q %v", line, err)
	}
}

// TestPeersAttackForgedAnswers: a stranger listens on node 1's listed
// address (bound before node 1's leader, or after it died) and answers
// node 0 with forged bytes of the right length. Node 0 (reactive policy)
// asks node 1 for the files node 1 owns: every answer fails its check,
// the shared filesystem serves, the program reads every file right on a
// second pass from the tier, no copy holds a forged byte, and augur stat
// counts the forged answers (peer_forged), said once. Before, the
// forged answers were published as copies: 31 of 40 files read right on
// the second pass.
func TestPeersAttackForgedAnswers(t *testing.T) {
	c := NewCase(t)
	openUp(t, c)
	files := c.RandomFiles("cls", 40, 40_000)
	owned := 0
	for _, f := range files {
		if peers.Owner(f, 2) == 1 {
			owned++
		}
	}
	if owned == 0 {
		t.Fatal("node 1 owns none of the files: the attack would prove nothing")
	}
	addrs := []string{fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.2:%d", freePort(t))}
	strangerServer(t, addrs[1])
	c.Set("AUGUR_POLICY=reactive")
	logFile := filepath.Join(c.Dir, "log")
	c.Set("AUGUR_LOG=warn:" + logFile)
	reader := `import hashlib, sys
files = sys.argv[1:]
for f in files:
    open(f, 'rb').read()
print('first pass', flush=True)
sys.stdin.readline()
for f in files:
    print(f, hashlib.sha256(open(f, 'rb').read()).hexdigest(), flush=True)
`
	cmd := exec.Command(Augur, append([]string{"run", "--", Python, "-c", reader}, files...)...)
	cmd.Env = append(append(os.Environ(), c.Env...), "AUGUR_NODES=2", "AUGUR_NODE_RANK=0",
		"AUGUR_PEER_SECRET="+randHex(16), "AUGUR_PEERS="+strings.Join(addrs, ","))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	must(t, err)
	outPipe, err := cmd.StdoutPipe()
	must(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	out := bufio.NewReader(outPipe)
	if line, err := out.ReadString('\n'); err != nil || line != "first pass\n" {
		t.Fatalf("reader: %q %v\n%s", line, err, stderr.String())
	}
	// The second pass reads from the tier once the copies are there
	// (all of them, or most, within 20 s: a copy the queue gave up on
	// is read from the original).
	copies := func() int {
		n := 0
		for _, f := range files {
			if _, err := os.Stat(c.CopyOf(c.RAM, f)); err == nil {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(20 * time.Second); copies() < len(files) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if n := copies(); n < len(files)/2 {
		t.Fatalf("%d copies of %d files made: the second pass would not read the tier", n, len(files))
	}
	st := peerStats(t, c)
	in.Write([]byte("\n"))
	right := 0
	for range files {
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("reader: %v\n%s", err, stderr.String())
		}
		f := strings.Fields(line)
		want, _ := os.ReadFile(f[0])
		if f[1] == sha256Hex(want) {
			right++
		}
	}
	if right != len(files) {
		t.Errorf("%d of %d files read right on the second pass", right, len(files))
	}
	for _, f := range files {
		got, err := os.ReadFile(c.CopyOf(c.RAM, f))
		want, _ := os.ReadFile(f)
		if err == nil && string(got) != string(want) {
			t.Errorf("the copy of %s is not the file", f)
		}
	}
	if len(st.Peers.Peers) != 1 {
		t.Fatalf("augur stat shows %d peers", len(st.Peers.Peers))
	}
	p := st.Peers.Peers[0]
	t.Logf("node 1 (the stranger): %d files in, %d errors, %d forged answers; %d files owned by node 1", p.FilesIn, p.Errors, p.Forged, owned)
	if p.FilesIn != 0 || p.Errors == 0 || p.Forged == 0 {
		t.Errorf("from the stranger %d files, %d errors, %d forged; want none, and the errors counted", p.FilesIn, p.Errors, p.Forged)
	}
	b, _ := os.ReadFile(logFile)
	if n := strings.Count(string(b), "sent an answer that failed its check"); n != 1 {
		t.Errorf("the forged answers were said %d times; want once:\n%s", n, b)
	}
}

// TestPeersAttackHoldsNoDescriptors: the leader lives inside the
// training process (LD_PRELOAD alone), whose descriptor limit is 1,024.
// A stranger opens 1,100 connections to its peer server and sends a
// request without the secret on each, and holds them. Every open of the
// program still works: 300 dataset files at once and /etc/hostname
// (before, each failed with EMFILE while the connections were held), and
// augur stat counts the connections refused.
func TestPeersAttackHoldsNoDescriptors(t *testing.T) {
	c := NewCase(t)
	openUp(t, c)
	files := c.RandomFiles("cls", 300, 100)
	port := freePort(t)
	victim := `import sys, time
files = sys.argv[1:]
open(files[0], 'rb').read()  # the leader starts with the first dataset open
print('started', flush=True)
sys.stdin.readline()
held, errors = [], []
for f in files + ['/etc/hostname']:
    try:
        held.append(open(f, 'rb'))
    except OSError as e:
        errors.append('%s: %s' % (f, e))
print('opened %d, failed %d %s' % (len(held), len(errors), errors[:2]), flush=True)
sys.stdin.readline()
`
	cmd := exec.Command("prlimit", append([]string{"--nofile=1024:1024", "--", Python, "-c", victim}, files...)...)
	cmd.Env = append(append(os.Environ(), c.Env...), "LD_PRELOAD="+Lib, "AUGUR_NODES=2", "AUGUR_NODE_RANK=0",
		"AUGUR_PEER_SECRET="+randHex(16), fmt.Sprintf("AUGUR_PEERS=127.0.0.1:%d,127.0.0.2:%d", port, freePort(t)))
	in, err := cmd.StdinPipe()
	must(t, err)
	outPipe, err := cmd.StdoutPipe()
	must(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	out := bufio.NewReader(outPipe)
	if line, err := out.ReadString('\n'); err != nil || line != "started\n" {
		t.Fatalf("victim: %q %v\n%s", line, err, stderr.String())
	}
	waitUntil(t, func() bool {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	flood := `import socket, sys, time
conns = []
for i in range(1100):
    s = socket.socket()
    s.connect(('127.0.0.1', int(sys.argv[1])))
    conns.append(s)
for s in conns:
    try:
        s.sendall(b'GET /v1/copy?path=/x HTTP/1.1\r\nHost: x\r\n\r\n')
    except OSError:
        pass
print('held', flush=True)
time.sleep(60)
`
	// prlimit as root, then nobody: nobody may not raise its own limit.
	a := append([]string{"prlimit", "--nofile=4096:4096", "--"}, attacker.argv(false, Python, "-c", flood, fmt.Sprint(port))...)
	stranger := exec.Command(a[0], a[1:]...)
	sout, err := stranger.StdoutPipe()
	must(t, err)
	var serr strings.Builder
	stranger.Stderr = &serr
	must(t, stranger.Start())
	t.Cleanup(func() { stranger.Process.Kill(); stranger.Wait() })
	if line, err := bufio.NewReader(sout).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("the stranger did not hold its connections: %q %v\n%s", line, err, serr.String())
	}
	time.Sleep(time.Second) // the server accepts what it accepts
	in.Write([]byte("\n"))
	line, err := out.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, fmt.Sprintf("opened %d, failed 0 ", len(files)+1)) {
		t.Errorf("with the stranger's connections held: %q %v; want every open to work\n%s", line, err, stderr.String())
	}
	st := peerStats(t, c)
	// All from one address: at most 16 kept at once; the others closed
	// at once, or after their one request (auth).
	if ns := st.Peers.NotServed; ns["conns_per_addr"] == 0 || ns["conns_per_addr"]+ns["conns"]+ns["fds"]+ns["auth"] < 1100-16 {
		t.Errorf("refused %v; want the stranger's connections refused, at least %d of them", ns, 1100-16)
	} else {
		t.Logf("refused: %v", ns)
	}
	in.Close()
}

// peerStats is augur stat of the case's job (named: the latest job of
// the machine may be another test's) once it shows its peers and the
// leader has written its counters since (every half second).
func peerStats(t *testing.T, c *Case) shim.Stats {
	t.Helper()
	time.Sleep(700 * time.Millisecond)
	var st shim.Stats
	waitUntil(t, func() bool {
		out, err := c.Augur("stat", "--json", "--job", c.job())
		st = shim.Stats{}
		return err == nil && json.Unmarshal([]byte(out), &st) == nil && st.Peers != nil
	})
	return st
}

// recordingProxy forwards every connection ln accepts to upstream and
// keeps the first request line and headers sent through it.
func recordingProxy(t *testing.T, ln net.Listener, upstream string) func() []byte {
	var mu sync.Mutex
	var first []byte
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.DialTimeout("tcp", upstream, 5*time.Second)
			if err != nil {
				down.Close()
				continue
			}
			go func() { io.Copy(down, up); down.Close() }()
			go func() {
				defer up.Close()
				r := bufio.NewReader(down)
				var req []byte
				for {
					line, err := r.ReadBytes('\n')
					req = append(req, line...)
					if err != nil {
						return
					}
					if string(line) == "\r\n" {
						mu.Lock()
						if first == nil {
							first = append([]byte(nil), req...)
						}
						mu.Unlock()
						up.Write(req)
						req = nil
					}
				}
			}()
		}
	}()
	return func() []byte {
		mu.Lock()
		defer mu.Unlock()
		return first
	}
}

// replay sends a recorded request to addr and returns the status line.
func replay(t *testing.T, addr string, req []byte) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	must(t, err)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	conn.Write(req)
	line, _ := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line)
}

// TestPeersAttackReplay: someone who reads the job's network captures a
// request node 1 sends node 0 (through a proxy at node 0's listed
// address), and sends it again: to node 0, and to node 1, which holds the
// file by then. Both refuse it (replay, misdirected), count it and say
// so once; before, both served the file again.
func TestPeersAttackReplay(t *testing.T) {
	c := NewCase(t)
	files := c.RandomFiles("cls", 30, 10_000)
	var theirs []string // node 0 owns them: node 1 asks node 0
	for _, f := range files {
		if peers.Owner(f, 2) == 0 {
			theirs = append(theirs, f)
		}
	}
	if len(theirs) == 0 {
		t.Fatal("node 0 owns none of the files")
	}
	ln, err := net.Listen("tcp", "127.0.0.101:0")
	must(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	captured := recordingProxy(t, ln, fmt.Sprintf("127.0.0.1:%d", port))
	addrs := []string{ln.Addr().String(), fmt.Sprintf("127.0.0.2:%d", freePort(t))}
	secret := randHex(16)
	job := "replay-" + randHex(4)
	t.Cleanup(func() { removeJobState(job + "-node0"); removeJobState(job + "-node1") })
	c.Set("AUGUR_POLICY=reactive")
	nodes := make([]*exec.Cmd, 2)
	logs := make([]string, 2)
	for i := range nodes {
		// Each node a job state of its own on this one machine: its
		// AUGUR_JOB, marked as made up (which peers ignore), names its
		// /dev/shm state; the nodes' job id is SLURM's.
		logs[i] = filepath.Join(c.Dir, fmt.Sprintf("log%d", i))
		script := "cat \"$@\" >/dev/null; sleep 60"
		if i == 1 {
			script = "sleep 2; cat \"$@\" >/dev/null; sleep 60"
		}
		args := append([]string{"run", "--", "sh", "-c", script, "sh"}, theirs...)
		cmd := exec.Command(Augur, args...)
		cmd.Env = append(append(os.Environ(), c.Env...), "AUGUR_NODES=2", fmt.Sprintf("AUGUR_NODE_RANK=%d", i),
			"AUGUR_PEER_SECRET="+secret, "AUGUR_PEERS="+strings.Join(addrs, ","), "AUGUR_JOB="+job+"-node"+fmt.Sprint(i),
			shim.JobMadeVar+"="+job+"-node"+fmt.Sprint(i), "SLURM_JOB_ID="+job, "AUGUR_LOG=warn:"+logs[i], fmt.Sprintf("AUGUR_TIERS=%s/tier%d:1GiB", c.Dir, i))
		if i == 0 {
			cmd.Env = append(cmd.Env, fmt.Sprintf("AUGUR_PEER_LISTEN=127.0.0.1:%d", port))
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		must(t, cmd.Start())
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		nodes[i] = cmd
	}
	statOf := func(i int) shim.Stats {
		cmd := exec.Command(Augur, "stat", "--json", "--job", job+"-node"+fmt.Sprint(i))
		cmd.Env = append(os.Environ(), c.Env...)
		b, err := cmd.Output()
		must(t, err)
		var st shim.Stats
		must(t, json.Unmarshal(b, &st))
		return st
	}
	// The request captured is for a file node 1 then holds.
	waitUntil(t, func() bool { return captured() != nil })
	req := captured()
	target, err := url.Parse(strings.Fields(string(req))[1])
	must(t, err)
	waitUntil(t, func() bool {
		_, err := os.Stat(c.CopyOf(filepath.Join(c.Dir, "tier1"), target.Query().Get("path")))
		return err == nil
	})
	if status := replay(t, fmt.Sprintf("127.0.0.1:%d", port), req); !strings.Contains(status, " 403 ") {
		t.Errorf("replayed at node 0: %q; want 403", status)
	}
	if status := replay(t, addrs[1], req); !strings.Contains(status, " 403 ") {
		t.Errorf("replayed at node 1: %q; want 403", status)
	}
	time.Sleep(700 * time.Millisecond) // the leaders write their counters every half second
	for i, why := range []string{"replay", "misdirected"} {
		st := statOf(i)
		if st.Peers == nil || st.Peers.NotServed[why] != 1 {
			t.Errorf("node %d counted %v; want one %s", i, st.Peers, why)
		}
		b, _ := os.ReadFile(logs[i])
		if !strings.Contains(string(b), "refused a request ("+why+")") {
			t.Errorf("node %d did not say it refused a request (%s):\n%s", i, why, b)
		}
	}
}

// TestPeersAttackRendezvousMadeFirst: a stranger made the rendezvous
// directory first, open to all, where it could swap the job's directory
// for one of its choosing (or one of the user's, with stale addresses).
// The node refuses it, says why once, and runs its program alone.
func TestPeersAttackRendezvousMadeFirst(t *testing.T) {
	c := NewCase(t)
	openUp(t, c)
	f := c.Write("a.bin", []byte("the job's bytes\n"))
	scratch := filepath.Join(c.Dir, "scratch") // a shared place, as /tmp is
	must(t, os.Mkdir(scratch, 0o777))
	must(t, os.Chmod(scratch, 0o777|os.ModeSticky))
	rdv := filepath.Join(scratch, "rendezvous")
	a := attacker.argv(false, "mkdir", "-m", "0777", rdv)
	if out, err := exec.Command(a[0], a[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("mkdir as the stranger: %v %s", err, out)
	}
	c.Set("AUGUR_NODES=2")
	c.Set("AUGUR_NODE_RANK=0")
	c.Set("AUGUR_RENDEZVOUS=" + rdv)
	c.Set("AUGUR_PEER_LISTEN=127.0.0.1:0")
	out, stderr := c.AugurRun("--", "cat", f)
	if out != "the job's bytes\n" {
		t.Errorf("the program printed %q", out)
	}
	want := fmt.Sprintf("augur: peers: rendezvous: %s is owned by uid 65534 (nobody), not by you", rdv)
	if lines := augurLines(stderr); len(lines) != 1 || !strings.HasPrefix(lines[0], want) {
		t.Errorf("augur said %q; want one line beginning %q", lines, want)
	}
	if _, err := os.Stat(filepath.Join(rdv, c.job())); err == nil {
		t.Error("the node made its job directory in the stranger's")
	}
}
