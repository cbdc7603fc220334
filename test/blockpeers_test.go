package test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augur-hpc/augur/bench/pfsemu"
	"github.com/augur-hpc/augur/peers"
	"github.com/augur-hpc/augur/shim"
)

// Large files' blocks between nodes: each node an `augur run` of
// test/python/stream_reader.py in a mount namespace of its own (a private
// /dev/shm), serving on 127.0.0.1+i, all reading one emulated shared
// filesystem with direct I/O, whose counters say what each node read
// from it.

// blockNode is one node of such a job.
type blockNode struct {
	dir  string
	cmd  *exec.Cmd
	done chan error
}

// blockJob starts nodes nodes of a job over root, each with a tier of
// 256 MiB, listed at addrs (node i listens on addrs[i]); only the nodes
// in run are started. Node i reads path once dir/go-i exists, and exits
// once dir/release exists.
func blockJob(t *testing.T, c *Case, root, path string, addrs []string, run []int) []*blockNode {
	t.Helper()
	secret, job := randHex(16), "blocks-"+randHex(6)
	reader, _ := filepath.Abs("python/stream_reader.py")
	nodes := make([]*blockNode, len(addrs))
	for _, i := range run {
		n := &blockNode{dir: filepath.Join(c.Dir, fmt.Sprintf("node%d", i)), done: make(chan error, 1)}
		must(t, os.MkdirAll(n.dir+"/tier", 0o755))
		var args []string
		for _, a := range []string{Augur, "run", "--", Python, reader, path, n.dir + "/ready", n.dir + "/go", c.Dir + "/release"} {
			args = append(args, shellQuote(a))
		}
		script := fmt.Sprintf("mount -t tmpfs tmpfs /dev/shm && %s >%s 2>%s; rc=$?; %s stat --json --job %s >%s; exit $rc",
			strings.Join(args, " "), shellQuote(n.dir+"/out"), shellQuote(n.dir+"/err"), shellQuote(Augur), job,
			shellQuote(n.dir+"/stat.json"))
		n.cmd = exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script)
		n.cmd.Env = append(os.Environ(), "AUGUR_DATASET="+root, "AUGUR_POLICY=reactive", "AUGUR_JOB="+job,
			"AUGUR_TIERS="+n.dir+"/tier:256MiB", "AUGUR_LOG=warn:"+n.dir+"/log",
			fmt.Sprintf("AUGUR_NODES=%d", len(addrs)), fmt.Sprintf("AUGUR_NODE_RANK=%d", i),
			"AUGUR_PEERS="+strings.Join(addrs, ","), "AUGUR_PEER_SECRET="+secret,
			// A peer that holds a block is always asked: the test is
			// about the blocks, not about the model's choice of the
			// faster source on a machine whose cores the nodes share.
			"AUGUR_PEER_PFS_WEIGHT=1e6")
		n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		must(t, n.cmd.Start())
		pid := n.cmd.Process.Pid
		t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL) })
		go func() { n.done <- n.cmd.Wait() }()
		nodes[i] = n
	}
	t.Cleanup(func() { os.WriteFile(c.Dir+"/release", nil, 0o644) })
	for _, i := range run {
		nodes[i].await(t, "ready", func() bool { return exists(nodes[i].dir + "/ready") })
	}
	return nodes
}

// await waits for cond, at most two minutes, failing if the node ends
// first.
func (n *blockNode) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		select {
		case err := <-n.done:
			b, _ := os.ReadFile(n.dir + "/err")
			t.Fatalf("%s: ended before %s: %v: %s", n.dir, what, err, tail(string(b), 2000))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %s in 2 minutes", n.dir, what)
		}
	}
}

// read has the node read its file, and returns the digest it printed.
func (n *blockNode) read(t *testing.T) string {
	t.Helper()
	must(t, os.WriteFile(n.dir+"/go", nil, 0o644))
	n.await(t, "its digest", func() bool { return lines(n.dir+"/out") == 1 })
	b, _ := os.ReadFile(n.dir + "/out")
	return strings.TrimSpace(string(b))
}

// finish releases every node and returns each one's augur stat.
func finish(t *testing.T, c *Case, nodes []*blockNode) map[int]shim.Stats {
	t.Helper()
	must(t, os.WriteFile(c.Dir+"/release", nil, 0o644))
	stats := map[int]shim.Stats{}
	for i, n := range nodes {
		if n == nil {
			continue
		}
		select {
		case err := <-n.done:
			if err != nil {
				b, _ := os.ReadFile(n.dir + "/err")
				t.Fatalf("node %d: %v: %s", i, err, tail(string(b), 2000))
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("node %d did not end in 2 minutes", i)
		}
		b, err := os.ReadFile(n.dir + "/stat.json")
		must(t, err)
		var st shim.Stats
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("node %d: augur stat: %v: %s", i, err, b)
		}
		stats[i] = st
		if log, _ := os.ReadFile(n.dir + "/log"); len(log) > 0 {
			t.Logf("node %d logged: %s", i, log)
		}
	}
	return stats
}

// bigDataset writes one large file (10.5 blocks) under c's dataset and
// serves it through the emulated shared filesystem; it returns the
// file's path there, its size and its digest. Of a job of two nodes each
// owns three of its blocks or more (peers.BlockOwner: the name is chosen
// so, as the path's directory is the test's own).
func bigDataset(t *testing.T, c *Case) (*pfsemu.Server, string, int64, string) {
	data := randomBytes(42<<20 + 12345)
	var rel string
	for k := 0; rel == ""; k++ {
		rel = fmt.Sprintf("shards/big-%d.tar", k)
		var owned [2]int
		for b := int64(0); b*peers.BlockSize < int64(len(data)); b++ {
			owned[peers.BlockOwner(filepath.Join(c.Dir, "pfs", rel), b, 2)]++
		}
		if min(owned[0], owned[1]) < 3 {
			rel = ""
		}
	}
	c.Write(rel, data)
	pfs, root := mountDirectPFS(t, c)
	sum := sha256.Sum256(data)
	return pfs, filepath.Join(root, rel), int64(len(data)), hex.EncodeToString(sum[:])
}

// TestPeersServeBlocks: node 0 reads a large file in order; node 1 then
// reads it too, and gets its blocks from node 0 and from its own tier,
// where it put the blocks it owns when node 0 asked it for them: the
// shared filesystem serves the file about once to the job, where each
// node alone would read it whole. Every byte is right, and augur stat
// counts the blocks each way.
func TestPeersServeBlocks(t *testing.T) {
	c := NewCase(t)
	pfs, path, size, want := bigDataset(t, c)
	addrs := []string{fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.2:%d", freePort(t))}
	nodes := blockJob(t, c, filepath.Dir(filepath.Dir(path)), path, addrs, []int{0, 1})

	before := pfs.Stats().ReadBytes
	if got := nodes[0].read(t); got != want {
		t.Fatalf("node 0 read %s; want %s", got, want)
	}
	first := pfs.Stats().ReadBytes - before
	if got := nodes[1].read(t); got != want {
		t.Fatalf("node 1 read %s; want %s", got, want)
	}
	second := pfs.Stats().ReadBytes - before - first
	st := finish(t, c, nodes)
	t.Logf("a file of %d bytes: the shared filesystem served %d (%.2fx) while node 0 read it, %d (%.2fx) while node 1 did",
		size, first, float64(first)/float64(size), second, float64(second)/float64(size))
	for i := range 2 {
		s := st[i]
		t.Logf("node %d: blocks from peers %d (%d bytes), to peers %d (%d bytes); copied ahead %d; read from the original %d times; peer errors %d",
			i, s.PeerBlocksIn, s.PeerBlockBytesIn, s.PeerBlocksOut, s.PeerBlockBytesOut, s.BigAhead, s.BigMisses, s.PeerErrors)
		if s.PeerErrors != 0 {
			t.Errorf("node %d: %d peer errors", i, s.PeerErrors)
		}
	}
	// Node 0 reads the file once, the blocks node 1 owns through node 1,
	// which reads them from the shared filesystem for it. Node 1 then
	// has every block: its own in its tier, node 0's from node 0. What
	// either reader read ahead of its copies (its first reads, and any
	// it made before the leader saw it had moved on) is read again.
	// Each node alone would read the whole file: 2x.
	if first > size*5/4 || second > size/4 || first+second > size*13/10 {
		t.Errorf("the shared filesystem served %d bytes while node 0 read the file, %d while node 1 did; want at most 1.25x, 0.25x and 1.3x in all of the file's %d",
			first, second, size)
	}
	// What each node got from the other: the blocks the other owns,
	// but what its reader read itself ahead of its copies (its first
	// reads: half of them at most, even on a loaded machine).
	var owned [2]int64
	for b := int64(0); b*peers.BlockSize < size; b++ {
		owned[peers.BlockOwner(path, b, 2)] += min(peers.BlockSize, size-b*peers.BlockSize)
	}
	for i := range 2 {
		in, out := int64(st[i].PeerBlockBytesIn), int64(st[1-i].PeerBlockBytesOut)
		if in != out || in > owned[1-i] || in < owned[1-i]/2 {
			t.Errorf("node %d got %d bytes of blocks (%d blocks) from node %d, which served it %d and owns %d; want at least half of those it owns",
				i, in, st[i].PeerBlocksIn, 1-i, out, owned[1-i])
		}
	}
}

// TestPeersDeadBlockOwner: a node whose peer is dead (nothing listens at
// its address) asks it for the blocks it owns, fails, and reads them from
// the shared filesystem: every byte right, the file read once.
func TestPeersDeadBlockOwner(t *testing.T) {
	c := NewCase(t)
	pfs, path, size, want := bigDataset(t, c)
	addrs := []string{fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.2:%d", freePort(t))}
	nodes := blockJob(t, c, filepath.Dir(filepath.Dir(path)), path, addrs, []int{1})
	before := pfs.Stats().ReadBytes
	if got := nodes[1].read(t); got != want {
		t.Fatalf("node 1 read %s; want %s", got, want)
	}
	read := pfs.Stats().ReadBytes - before
	st := finish(t, c, nodes)[1]
	t.Logf("the shared filesystem served %d bytes (%.2fx the file); peer errors %d, blocks from peers %d; copied ahead %d",
		read, float64(read)/float64(size), st.PeerErrors, st.PeerBlocksIn, st.BigAhead)
	if st.PeerErrors == 0 || st.PeerBlocksIn != 0 {
		t.Errorf("peer errors %d, blocks from peers %d; want the dead node asked (an error), nothing from it", st.PeerErrors, st.PeerBlocksIn)
	}
	if read < size || read > size*11/10 {
		t.Errorf("the shared filesystem served %d bytes; want the file's %d, at most 1.1x", read, size)
	}
	if st.BigAhead == 0 {
		t.Error("no block copied ahead of the reader")
	}
}
