package peers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// node is one node of a job in TestJobOfThreeNodes: its own tiers,
// server, client and model, found through the rendezvous.
type node struct {
	index  int
	tiers  []string
	srv    *Server
	client *Client
	model  *Model
}

// startNode brings node i up as a leader would: membership from the
// environment, the secret and the addresses from the rendezvous.
func startNode(t *testing.T, i, n int, rdv, root string) (*node, error) {
	env := map[string]string{"AUGUR_NODE_RANK": strconv.Itoa(i), "AUGUR_NODES": strconv.Itoa(n), "AUGUR_JOB": "job-7",
		"AUGUR_RENDEZVOUS": rdv, "AUGUR_PEER_LISTEN": fmt.Sprintf("127.0.0.%d:0", i+1)}
	cfg := Defaults()
	if err := errors.Join(cfg.FromEnv(envOf(env)), cfg.Validate()); err != nil {
		return nil, err
	}
	r, err := OpenRendezvous(cfg.Rendezvous, cfg.Job, cfg.Nodes)
	if err != nil {
		return nil, err
	}
	secret, err := r.Secret()
	if err != nil {
		return nil, err
	}
	// A shared filesystem far slower than the peers: whatever the peers
	// measure on loopback, they stay the faster source.
	nd := &node{index: i, tiers: []string{t.TempDir() + "/ram"}, model: NewModel(n, ModelConfig{PFSPrior: 10e3})}
	if nd.srv, err = NewServer(ServerConfig{Roots: []string{root}, Tiers: nd.tiers, Secret: secret, Job: cfg.Job, Node: i, Nodes: n}); err != nil {
		return nil, err
	}
	listen, err := cfg.ListenAddr()
	if err != nil {
		return nil, err
	}
	addr, err := nd.srv.Listen(listen)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { nd.srv.Close() })
	if err := r.Announce(cfg.Node, addr); err != nil {
		return nil, err
	}
	addrs, err := r.Await(context.Background(), 10*time.Second)
	if err != nil {
		return nil, err
	}
	nd.client, err = NewClient(ClientConfig{Secret: secret, Job: cfg.Job, Node: i, Backoff: time.Minute}, addrs)
	return nd, err
}

// get fetches source into dst as the leader is meant to: from its owner
// if the model expects the owner first and the owner is up, else, or if
// that fails, from the shared filesystem. It returns where the bytes
// came from.
func (nd *node) get(owner int, source string, dst *os.File) (Source, error) {
	fi, err := os.Stat(source)
	if err != nil {
		return PFS, err
	}
	size, mtime := fi.Size(), fi.ModTime().UnixNano()
	candidates := []Source{PFS}
	if nd.client.Up(owner) {
		candidates = append(candidates, Source(owner))
	}
	if s := nd.model.Choose(size, candidates); s != PFS {
		tr := nd.model.Begin(s, size)
		n, err := nd.client.Fetch(context.Background(), owner, source, size, mtime, 0, dst)
		tr.Done(n)
		if err == nil {
			return s, nil
		}
		dst.Truncate(0) // the publish protocol would discard its temporary file
		dst.Seek(0, io.SeekStart)
	}
	tr := nd.model.Begin(PFS, size)
	src, err := os.Open(source)
	if err != nil {
		return PFS, err
	}
	defer src.Close()
	n, err := io.Copy(dst, src)
	tr.Done(n)
	return PFS, err
}

// TestJobOfThreeNodes: three nodes on 127.0.0.1-3 meet through a
// rendezvous directory; each holds the files it owns (as the reactive
// policy would have it read them) and gets every other file from its
// owner, byte for byte; when a node goes away, the files it owns come
// from the shared filesystem and the others carry on.
func TestJobOfThreeNodes(t *testing.T) {
	const n = 3
	dir := t.TempDir()
	root, rdv := dir+"/pfs/ds", dir+"/shared/rdv"
	os.MkdirAll(root, 0o755)
	os.MkdirAll(dir+"/shared", 0o755)
	tc := &testCase{t: t, root: root}
	var sources []string
	contents := map[string][]byte{}
	for i := range 30 {
		p, b := tc.source(fmt.Sprintf("cls%d/f%d.bin", i%3, i), 1000+i*997)
		sources = append(sources, p)
		contents[p] = b
	}
	nodes := make([]*node, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { nodes[i], errs[i] = startNode(t, i, n, rdv, root) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, p := range sources {
		tc.tiers = nodes[Owner(p, n)].tiers
		tc.publish(0, p)
	}
	fromPeers := 0
	for _, nd := range nodes {
		for _, p := range sources {
			owner := Owner(p, n)
			if owner == nd.index {
				continue
			}
			dst := tempFile(t)
			s, err := nd.get(owner, p, dst)
			if err != nil || s != Source(owner) {
				t.Fatalf("node %d, %s: from %v, %v; want node %d", nd.index, p, s, err, owner)
			}
			got, _ := os.ReadFile(dst.Name())
			equalBytes(t, p, got, contents[p])
			fromPeers++
		}
	}
	servedNow := func() (n int) {
		for _, nd := range nodes {
			for _, f := range nd.srv.Stats().Files {
				n += int(f)
			}
		}
		return n
	}
	served := servedNow()
	for deadline := time.Now().Add(5 * time.Second); served != fromPeers && time.Now().Before(deadline); served = servedNow() {
		time.Sleep(5 * time.Millisecond) // a body is counted when its handler returns
	}
	if served != fromPeers || fromPeers != (n-1)*len(sources) {
		t.Errorf("%d fetched from peers, %d served; want %d", fromPeers, served, (n-1)*len(sources))
	}

	nodes[2].srv.Close() // node 2 dies
	for _, p := range sources {
		if Owner(p, n) != 2 {
			continue
		}
		dst := tempFile(t)
		s, err := nodes[0].get(2, p, dst)
		if err != nil || s != PFS {
			t.Fatalf("%s after its owner died: from %v, %v; want pfs", p, s, err)
		}
		got, _ := os.ReadFile(dst.Name())
		equalBytes(t, p, got, contents[p])
	}
	if st := nodes[0].client.Stats()[2]; !st.Down || st.Errors != 1 {
		t.Errorf("the dead node: %+v; want it down after one error", st)
	}
}
