package shim

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/augur-hpc/augur/fetchpool"
	"github.com/augur-hpc/augur/peers"
	"golang.org/x/sys/unix"
)

// peering is the leader's part in a job of several nodes (package
// peers): it serves this node's copies to the other nodes, and fills
// this node's copies from theirs when the node that should hold a file
// is expected to deliver it before the shared filesystem would. It is
// the copy pool's Source: the bytes land in a temporary file of the
// local tier and are published as any copy, so the data plane never
// touches the network.
type peering struct {
	l      *Leader
	cfg    peers.Config
	roots  []string // the dataset's roots, as configured and resolved
	addr   string   // where this node serves
	srv    *peers.Server
	client *peers.Client
	model  *peers.Model
	rdv    *peers.Rendezvous // nil: the addresses are listed
	ctx    context.Context   // ends with the leader: requests in flight give up
	cancel context.CancelFunc
	wg     sync.WaitGroup
	holder atomic.Pointer[holderFunc] // the policy's; nil until it has one
	demand atomic.Pointer[demandFunc] // the policy's; nil: it makes no copy on demand
}

var _ interface {
	fetchpool.Source
	fetchpool.Statter
	peers.Blocks
} = (*peering)(nil)

// holderFunc names the node that should hold path's copy (-1: none
// known) and, if not nil, says whether that node should hold it by now.
type holderFunc func(path string) (node int, ready readiness)

// readiness says whether the holder should have a file by now, and
// whether this node's ranks have begun to read its dataset.
type readiness func() (ready, begun bool)

// demandFunc makes this node's copy of a file another node asked for and
// found none of here, if this node should hold it, and reports within ctx
// whether the copy is published (peers.ServerConfig.Miss).
type demandFunc func(ctx context.Context, path string, size, mtime int64) bool

// Peering's timing. readyWait bounds how long a copy waits for the node
// that reads a file first to have read it (it reads in step with this
// node's ranks, so normally for less than a batch; see await); addrPoll
// is how often the rendezvous is read again for a leader that moved (a
// node's leader died and another process of the job took over, on
// another port).
const (
	readyWait   = 5 * time.Second
	readyPoll   = 5 * time.Millisecond
	addrPoll    = 2 * time.Second
	statsPeriod = 500 * time.Millisecond
)

// startPeering joins the job's nodes; anything that keeps it from doing
// so is said once, and the node then works alone (nil).
func startPeering(l *Leader) *peering {
	p, err := joinPeers(l)
	if err != nil {
		l.log.Warn().Msgf("peers: %v; this node fetches nothing from other nodes and serves them nothing", err)
		return nil
	}
	l.log.Info().Msgf("peers: node %d of %d, serving on %s", p.cfg.Node, p.cfg.Nodes, p.addr)
	return p
}

func joinPeers(l *Leader) (*peering, error) {
	cfg := l.cfg.Peers
	p := &peering{l: l, cfg: cfg, roots: l.cfg.RootForms(), model: peers.NewModel(cfg.Nodes, peers.ModelConfig{PFSWeight: cfg.PFSWeight})}
	secret := cfg.Secret
	if cfg.Rendezvous != "" {
		rdv, err := peers.OpenRendezvous(cfg.Rendezvous, cfg.Job, cfg.Nodes)
		if err != nil {
			return nil, err
		}
		p.rdv = rdv
		if secret == "" {
			if secret, err = rdv.Secret(); err != nil {
				return nil, err
			}
		}
	}
	listen, err := cfg.ListenAddr()
	if err != nil {
		return nil, err
	}
	var tiers []string
	for _, t := range l.ServedTiers() {
		if t != "" {
			tiers = append(tiers, t)
		}
	}
	p.srv, err = peers.NewServer(peers.ServerConfig{Roots: p.roots, Tiers: tiers,
		Secret: secret, Job: cfg.Job, Node: cfg.Node, Nodes: cfg.Nodes, Log: l.log, Miss: p.miss, Blocks: p})
	if err != nil {
		return nil, err
	}
	if p.addr, err = p.srv.Listen(listen); err != nil {
		return nil, err
	}
	addrs := make([]string, cfg.Nodes)
	if p.rdv == nil {
		copy(addrs, cfg.Peers)
	} else if err := p.rdv.Announce(cfg.Node, p.addr); err != nil {
		p.srv.Close()
		return nil, err
	}
	addrs[cfg.Node] = p.addr
	if p.client, err = peers.NewClient(peers.ClientConfig{Secret: secret, Job: cfg.Job, Node: cfg.Node, Log: l.log}, addrs); err != nil {
		p.srv.Close()
		return nil, err
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.wg.Add(1)
	go p.watch()
	return p, nil
}

// watch keeps the peers' addresses current (from the rendezvous) and
// augur stat's view of the peers, until close.
func (p *peering) watch() {
	defer p.wg.Done()
	stats := time.NewTicker(statsPeriod)
	defer stats.Stop()
	addrs := time.NewTimer(0)
	defer addrs.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-stats.C:
			p.publish()
		case <-addrs.C:
			p.readAddrs()
			addrs.Reset(addrPoll)
		}
	}
}

// readAddrs takes the addresses the rendezvous holds now.
func (p *peering) readAddrs() {
	if p.rdv == nil {
		return
	}
	addrs, err := p.rdv.Addrs()
	if err != nil {
		p.l.log.Debug().Msgf("peers: %v", err)
	}
	for i, a := range addrs {
		if i != p.cfg.Node && a != "" {
			if err := p.client.SetAddr(i, a); err != nil {
				p.l.log.Debug().Msgf("peers: %v", err)
			}
		}
	}
}

// setHolder tells the copies which node should hold which file, and the
// server how this node makes on demand a copy it should hold (d nil: it
// does not).
func (p *peering) setHolder(h holderFunc, d demandFunc) {
	if p != nil {
		p.holder.Store(&h)
		p.demand.Store(&d)
	}
}

// miss is the server's Miss: the policy's copy on demand, if it makes
// any.
func (p *peering) miss(ctx context.Context, path string, size, mtime int64) bool {
	d := p.demand.Load()
	return d != nil && *d != nil && (*d)(ctx, path, size, mtime)
}

// Fill fills a copy from the node that should hold the file, if that node
// is up, should hold it by now and is expected to deliver it before the
// shared filesystem (fetchpool.Source).
func (p *peering) Fill(path string, st *unix.Stat_t, dst *os.File) (int64, bool) {
	h := p.holder.Load()
	if h == nil {
		return 0, false
	}
	node, ready := (*h)(path)
	if node < 0 || node == p.cfg.Node || !p.client.Up(node) || !p.await(ready) {
		return 0, false
	}
	src := peers.Source(node)
	if p.model.Choose(st.Size, []peers.Source{peers.PFS, src}) != src {
		return 0, false
	}
	t := p.model.Begin(src, st.Size)
	n, err := p.client.Fetch(p.ctx, node, path, st.Size, st.Mtim.Nano(), st.Ino, dst)
	t.Done(n)
	if err != nil {
		p.l.log.Debug().Msgf("peers: %v; from the shared filesystem", err)
		return 0, false
	}
	return n, true
}

// fetchBlock reads buf, the bytes at off of block b of the large file
// path (st as entered; ino as peers.StatSource found it), from the
// block's owner, if that is another node, up, and expected to deliver
// them before the shared filesystem; it reports whether it did, and the
// bytes are right only then.
func (p *peering) fetchBlock(path string, st *unix.Stat_t, ino uint64, b, off int64, buf []byte) bool {
	node := peers.BlockOwner(path, b, p.cfg.Nodes)
	if node == p.cfg.Node || !p.client.Up(node) {
		return false
	}
	src, n := peers.Source(node), int64(len(buf))
	if p.model.Choose(n, []peers.Source{peers.PFS, src}) != src {
		return false
	}
	t := p.model.Begin(src, n)
	err := p.client.FetchBlock(p.ctx, node, path, st.Size, st.Mtim.Nano(), ino, b, off, buf)
	if err != nil {
		t.Done(0)
		p.l.log.Debug().Msgf("peers: %v; from the shared filesystem", err)
		return false
	}
	t.Done(n)
	return true
}

// Block is the server's peers.Blocks: the leader's large files, once it
// tiers any.
func (p *peering) Block(source string, off, n int64) (*os.File, peers.BlockFile, bool) {
	if m := p.l.big.Load(); m != nil {
		return m.Block(source, off, n)
	}
	return nil, peers.BlockFile{}, false
}

// FillBlock is the server's peers.Blocks: the leader's large files, once
// it tiers any.
func (p *peering) FillBlock(ctx context.Context, source string, st *unix.Stat_t, off, n int64) *os.File {
	if m := p.l.big.Load(); m != nil {
		return m.FillBlock(ctx, source, st, off, n)
	}
	return nil
}

// Stat stats a file whose copy may be filled from another node, as that
// node's server will have it: reached from its root without a symlink,
// with one name (peers.StatSource; fetchpool.Statter). Any other file is
// copied from the shared filesystem, and never asked of a peer.
func (p *peering) Stat(path string, st *unix.Stat_t) error {
	return peers.StatSource(p.roots, path, st)
}

// BeginPFS times a copy from the shared filesystem for the model
// (fetchpool.Source).
func (p *peering) BeginPFS(size int64) func(int64) {
	return p.model.Begin(peers.PFS, size).Done
}

// await waits until ready says the holder should have the file, for at
// most readyWait once this node's ranks have begun to read. Before that
// the wait is not counted: a job's nodes start their ranks seconds apart
// (Python's imports on a loaded machine), and the prefetcher, which
// begins with the leader, would give up on the holders of the files the
// ranks read first and read the shared filesystem for them again.
func (p *peering) await(ready readiness) bool {
	if ready == nil {
		return true
	}
	ok, _ := ready()
	deadline := time.Now().Add(readyWait)
	for !ok && time.Now().Before(deadline) {
		select {
		case <-p.ctx.Done():
			return false
		case <-time.After(readyPoll):
		}
		var begun bool
		if ok, begun = ready(); !begun {
			deadline = time.Now().Add(readyWait)
		}
	}
	return ok
}

// PeerStats is augur stat's view of a job of several nodes.
type PeerStats struct {
	Node      int                 `json:"node"`
	Nodes     int                 `json:"nodes"`
	Addr      string              `json:"addr"`
	Peers     []PeerLink          `json:"peers"`
	Model     []peers.SourceState `json:"model"` // the shared filesystem first, then each node
	NotServed map[string]int64    `json:"not_served,omitempty"`
	// Fetched is the files served to other nodes that found no copy
	// here and waited for the one this node then made (the reactive
	// policy's owner of the file).
	Fetched int64 `json:"fetched_for_peers"`
	// The blocks of large files (ranges of them) this node fetched from
	// the others and served them, in all (whole files are the
	// segment's peer_* counters); of those served, the blocks this node
	// copied from the shared filesystem for the request (it owns them).
	BlocksIn      int64 `json:"peer_blocks_in"`
	BlockBytesIn  int64 `json:"peer_block_bytes_in"`
	BlocksOut     int64 `json:"peer_blocks_out"`
	BlockBytesOut int64 `json:"peer_block_bytes_out"`
	FetchedBlocks int64 `json:"blocks_fetched_for_peers"`
}

// PeerLink is what went between this node and one other.
type PeerLink struct {
	peers.PeerStats
	FilesOut      int64 `json:"peer_files_out"`
	BytesOut      int64 `json:"peer_bytes_out"`
	BlocksOut     int64 `json:"peer_blocks_out"`
	BlockBytesOut int64 `json:"peer_block_bytes_out"`
}

// publish writes the peers' counters and the model to the segment.
func (p *peering) publish() {
	ps := PeerStats{Node: p.cfg.Node, Nodes: p.cfg.Nodes, Addr: p.addr}
	for i, m := range p.model.Snapshot() {
		if i != p.cfg.Node+1 { // this node's own entry, never used
			ps.Model = append(ps.Model, m)
		}
	}
	out := p.srv.Stats()
	ps.NotServed, ps.Fetched, ps.FetchedBlocks = out.NotServed, out.Fetched, out.FetchedBlocks
	var in, filesIn, bytesOut, filesOut, errs int64
	for _, s := range p.client.Stats() {
		if s.Node == p.cfg.Node {
			continue
		}
		link := PeerLink{PeerStats: s}
		if s.Node < len(out.Files) {
			link.FilesOut, link.BytesOut = out.Files[s.Node], out.Bytes[s.Node]
			link.BlocksOut, link.BlockBytesOut = out.Blocks[s.Node], out.BlockBytes[s.Node]
		}
		ps.Peers = append(ps.Peers, link)
		ps.BlocksIn, ps.BlockBytesIn = ps.BlocksIn+s.BlocksIn, ps.BlockBytesIn+s.BlockBytesIn
		ps.BlocksOut, ps.BlockBytesOut = ps.BlocksOut+link.BlocksOut, ps.BlockBytesOut+link.BlockBytesOut
		in, filesIn, errs = in+s.BytesIn, filesIn+s.FilesIn, errs+s.Errors
		bytesOut, filesOut = bytesOut+link.BytesOut, filesOut+link.FilesOut
	}
	ld := &p.l.seg.s.leader
	setU64(&ld.peer_bytes_in, uint64(in))
	setU64(&ld.peer_files_in, uint64(filesIn))
	setU64(&ld.peer_bytes_out, uint64(bytesOut))
	setU64(&ld.peer_files_out, uint64(filesOut))
	setU64(&ld.peer_errors, uint64(errs))
	b, err := json.Marshal(ps)
	if err == nil && !publishJSON(&ld.peers_gen, &ld.peers_len, ld.peers[:], b) {
		ps.Peers, ps.Model = nil, nil // a thousand nodes do not fit: the totals do
		b, _ = json.Marshal(ps)
		publishJSON(&ld.peers_gen, &ld.peers_len, ld.peers[:], b)
	}
}

// close stops serving and fetching; requests in flight give up.
func (p *peering) close() {
	if p == nil {
		return
	}
	p.cancel()
	p.wg.Wait()
	p.srv.Close()
	p.client.Close()
	p.publish()
}
