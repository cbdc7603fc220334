package peers

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// ClientConfig tunes a Client. Zero fields take the defaults.
type ClientConfig struct {
	Secret string // the job's secret
	Job    string // the job id: with the secret, the job's key
	Node   int    // this node's index, named in every request
	Log    zerolog.Logger
	// PerPeer bounds the requests in flight to one peer, and the
	// connections kept to it (default 4): a node's copy threads must not
	// all wait on one slow peer.
	PerPeer int
	// Timeout bounds a request (default 10 s), waiting for a slot
	// included, plus a second for every MinRate bytes of the file.
	Timeout time.Duration
	MinRate int64 // bytes per second (default 1 MiB/s)
	// BlockTimeout bounds a request for a block of a large file
	// (default 5 s, waiting for a slot included: FetchBlock).
	BlockTimeout time.Duration
	// Backoff is how long a peer that failed is left alone (default
	// 1 s); it doubles with every failure after the peer is tried again,
	// up to MaxBackoff (default 1 min), and a success resets it.
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// defaultPerPeer is ClientConfig.PerPeer's default, which a server's
// cap on connections counts on (conns.go).
const defaultPerPeer = 4

func (c *ClientConfig) defaults() {
	if c.PerPeer <= 0 {
		c.PerPeer = defaultPerPeer
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.MinRate <= 0 {
		c.MinRate = 1 << 20
	}
	if c.BlockTimeout <= 0 {
		c.BlockTimeout = defaultBlockTimeout
	}
	if c.Backoff <= 0 {
		c.Backoff = time.Second
	}
	if c.MaxBackoff < c.Backoff {
		c.MaxBackoff = max(time.Minute, c.Backoff)
	}
}

// Client fetches copies from the job's other nodes. It keeps one pool of
// keep-alive connections for all of them and dials only the addresses it
// was given: no proxy from the environment, no redirect followed. It
// writes a peer's bytes where the caller asked only as they come, and
// reports them a copy only once the answer's tag after them is right
// (auth.go). A peer that fails, or whose answer fails its check, is
// marked down for a while; every error of Fetch means the caller takes
// the file from the shared filesystem. A Client is safe for concurrent
// use.
type Client struct {
	cfg   ClientConfig
	key   []byte
	tr    *http.Transport
	hc    *http.Client
	peers []*peer
	now   func() time.Time // the clock of the backoff; tests move it
	said  atomic.Bool      // a forged answer was logged
}

type peer struct {
	slots                                chan struct{} // one token per request in flight
	bytesIn, filesIn, errs, miss, forged atomic.Int64
	blocksIn, blockBytesIn               atomic.Int64 // FetchBlock's

	mu      sync.Mutex
	addr    string        // "" while unknown; guarded by mu
	until   time.Time     // down until then; guarded by mu
	backoff time.Duration // the last down interval, 0 after a success; guarded by mu
}

// NewClient makes a client for the job's nodes, addrs[i] being node i's
// address ("" while unknown; this node's own is never dialled).
func NewClient(cfg ClientConfig, addrs []string) (*Client, error) {
	if err := checkSecret(cfg.Secret); err != nil {
		return nil, fmt.Errorf("peer client: secret %w", err)
	}
	if cfg.Node < 0 || cfg.Node >= len(addrs) {
		return nil, fmt.Errorf("peer client: node %d of %d", cfg.Node, len(addrs))
	}
	if err := checkJob(cfg.Job); err != nil || cfg.Job == "" {
		return nil, fmt.Errorf("peer client: job id %q: a job needs one, usable as a directory name", cfg.Job)
	}
	cfg.defaults()
	c := &Client{cfg: cfg, key: jobKey(cfg.Secret, cfg.Job), now: time.Now}
	c.tr = &http.Transport{
		Proxy:                 nil, // a proxy is an address outside the job
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   cfg.PerPeer,
		MaxConnsPerHost:       cfg.PerPeer,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: cfg.Timeout,
		DisableCompression:    true, // the bytes must be the copy's, as the tag covers them
	}
	c.hc = &http.Client{Transport: c.tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // a redirect would lead to an address outside the job
	}}
	for i := range addrs {
		c.peers = append(c.peers, &peer{slots: make(chan struct{}, cfg.PerPeer)})
		if err := c.SetAddr(i, addrs[i]); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// SetAddr sets node's address (a leader that took over on that node
// announced a new one) and gives the peer a fresh start.
func (c *Client) SetAddr(node int, addr string) error {
	if node < 0 || node >= len(c.peers) {
		return fmt.Errorf("peer client: %w: node %d", ErrNoPeer, node)
	}
	if addr != "" {
		if err := checkAddr(addr, false); err != nil {
			return fmt.Errorf("peer client: node %d: %w", node, err)
		}
	}
	p := c.peers[node]
	p.mu.Lock()
	defer p.mu.Unlock()
	if addr != p.addr {
		p.addr, p.until, p.backoff = addr, time.Time{}, 0
	}
	return nil
}

// Up says whether node may be asked now: a known peer, not marked down.
func (c *Client) Up(node int) bool {
	_, _, err := c.peer(node)
	return err == nil
}

// peer returns node's state and address if it may be asked now.
func (c *Client) peer(node int) (*peer, string, error) {
	if node < 0 || node >= len(c.peers) || node == c.cfg.Node {
		return nil, "", ErrNoPeer
	}
	p := c.peers[node]
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.addr == "":
		return nil, "", ErrNoPeer
	case c.now().Before(p.until):
		return nil, "", ErrPeerDown
	}
	return p, p.addr, nil
}

// Fetch asks node for its copy of source, which the caller expects to
// have size bytes and mtime (ns), and, if ino is not 0, to be the inode
// StatSource found (the peer then asks the shared filesystem nothing),
// and streams it into dst at dst's offset. It returns the bytes written.
// On any error the bytes in dst are no copy (the caller discards its
// temporary file) and the caller takes the file from the shared
// filesystem; the peer is marked down unless the error was no fault of
// its own (ErrNotHeld, writing dst, the caller's ctx ending).
func (c *Client) Fetch(ctx context.Context, node int, source string, size, mtime int64, ino uint64, dst *os.File) (int64, error) {
	p, addr, err := c.peer(node)
	if err != nil {
		return 0, fmt.Errorf("peer %d: %w", node, err)
	}
	tctx, cancel := context.WithTimeout(ctx, c.timeout(size))
	defer cancel()
	n, err := c.transfer(tctx, p, addr, query(source, size, mtime, ino, c.cfg.Node, node, time.Now()), size, &fileWriter{f: dst})
	if err == nil {
		p.filesIn.Add(1)
		p.bytesIn.Add(n)
	}
	return n, c.settleFetch(ctx, p, node, addr, source, err)
}

// settleFetch counts the outcome err of a request to node (at addr) for
// source, made within ctx, and marks the peer down if it was its fault.
func (c *Client) settleFetch(ctx context.Context, p *peer, node int, addr, source string, err error) error {
	var werr *writeError
	switch {
	case err == nil:
		c.settle(p, true)
		return nil
	case errors.Is(err, ErrNotHeld):
		p.miss.Add(1)
	case errors.As(err, &werr) || ctx.Err() != nil:
	case errors.Is(err, ErrForged):
		p.forged.Add(1)
		if c.said.CompareAndSwap(false, true) {
			c.cfg.Log.Warn().Msgf("peers: node %d (%s) sent an answer that failed its check (%v): its bytes are discarded, the file is read from the shared filesystem, and the node is left alone for a while; further ones are only counted",
				node, addr, err)
		}
		fallthrough
	default:
		p.errs.Add(1)
		c.settle(p, false)
	}
	return fmt.Errorf("peer %d (%s): %s: %w", node, addr, source, err)
}

// timeout is how long a request for size bytes may take.
func (c *Client) timeout(size int64) time.Duration {
	return c.cfg.Timeout + time.Duration(size/c.cfg.MinRate)*time.Second
}

// transfer sends one request for target (of size bytes) to the peer at
// addr within ctx, holding one of its slots, and writes the bytes of its
// answer into dst. The bytes are a copy only if it returns no error:
// the tag after them is checked last.
func (c *Client) transfer(ctx context.Context, p *peer, addr, target string, size int64, dst io.Writer) (int64, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-p.slots }()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+target, nil)
	if err != nil {
		return 0, err
	}
	proof := sign(req, c.key)
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if err := c.answer(resp, size, proof); err != nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // a short error body: keep the connection
		return 0, err
	}
	tag := answerTag(c.key, proof, http.StatusOK)
	n, err := io.Copy(dst, io.TeeReader(io.LimitReader(resp.Body, size), tag))
	if err != nil {
		return n, err
	}
	var got [tagLen]byte
	if m, err := io.ReadFull(resp.Body, got[:]); n != size || err != nil {
		return n, fmt.Errorf("%w: %d bytes and %d of the tag, %d expected", ErrLength, n, m, size)
	}
	if !hmac.Equal(got[:], tag.Sum(nil)) {
		return n, fmt.Errorf("%w: the tag after the %d bytes is not theirs", ErrForged, n)
	}
	return n, nil
}

// query is the request target for source, asked by node from of node to
// at the time at.
func query(source string, size, mtime int64, ino uint64, from, to int, at time.Time) string {
	return target(copyEndpoint, url.Values{}, source, size, mtime, ino, from, to, at)
}

// target is the request target at endpoint for source with the
// parameters v and those every request has, asked by node from of node to
// at the time at, with a fresh nonce.
func target(endpoint string, v url.Values, source string, size, mtime int64, ino uint64, from, to int, at time.Time) string {
	var nonce [16]byte
	rand.Read(nonce[:])
	v.Set("path", source)
	v.Set("size", strconv.FormatInt(size, 10))
	v.Set("mtime", strconv.FormatInt(mtime, 10))
	v.Set("ino", strconv.FormatUint(ino, 10))
	v.Set("from", strconv.Itoa(from))
	v.Set("to", strconv.Itoa(to))
	v.Set("t", strconv.FormatInt(at.Unix(), 10))
	v.Set("n", hex.EncodeToString(nonce[:]))
	return endpoint + "?" + v.Encode()
}

// answer checks the status and announced length of a response. A "not
// held" counts only with its tag: anything else a stranger could say to
// keep a node from its peers is the peer's fault.
func (c *Client) answer(resp *http.Response, size int64, proof []byte) error {
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusConflict:
		got, err := hex.DecodeString(resp.Header.Get(answerHeader))
		if err != nil || !hmac.Equal(got, answerTag(c.key, proof, resp.StatusCode).Sum(nil)) {
			return fmt.Errorf("%w: %s without its tag", ErrForged, resp.Status)
		}
		return ErrNotHeld
	default:
		return fmt.Errorf("%w: %s", ErrRefused, resp.Status)
	}
	if resp.ContentLength != size+tagLen {
		return fmt.Errorf("%w: %d bytes announced, %d and the tag expected", ErrLength, resp.ContentLength, size)
	}
	return nil
}

// fileWriter writes to the caller's file, telling its failures (a full
// tier) from the peer's.
type fileWriter struct{ f *os.File }

type writeError struct{ err error }

func (e *writeError) Error() string { return "writing the copy: " + e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

func (w *fileWriter) Write(b []byte) (int, error) {
	n, err := w.f.Write(b)
	if err != nil {
		return n, &writeError{err}
	}
	return n, nil
}

// settle records a request's outcome: a success makes the next failure
// start the backoff afresh; a failure marks the peer down, for twice as
// long as last time if it failed again once tried after that. Failures
// of requests in flight while it is down already do not extend it.
func (c *Client) settle(p *peer, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := c.now()
	switch {
	case ok:
		p.backoff = 0
	case now.Before(p.until):
	case p.backoff == 0:
		p.backoff, p.until = c.cfg.Backoff, now.Add(c.cfg.Backoff)
	default:
		p.backoff = min(2*p.backoff, c.cfg.MaxBackoff)
		p.until = now.Add(p.backoff)
	}
}

// PeerStats is what this node fetched from one peer.
type PeerStats struct {
	Node    int           `json:"node"`
	Addr    string        `json:"addr"`
	BytesIn int64         `json:"peer_bytes_in"`
	FilesIn int64         `json:"peer_files_in"`
	Errors  int64         `json:"peer_errors"` // failures that marked it down
	Forged  int64         `json:"peer_forged"` // of those, answers that failed their check
	Misses  int64         `json:"peer_misses"` // asked for a copy or a block it did not hold
	Down    bool          `json:"peer_down"`
	Backoff time.Duration `json:"peer_backoff_ns"`
	// BlocksIn and BlockBytesIn count the blocks of large files (ranges
	// of them) fetched from it; BytesIn and FilesIn, whole files.
	BlocksIn     int64 `json:"peer_blocks_in"`
	BlockBytesIn int64 `json:"peer_block_bytes_in"`
}

// Stats reads every peer's counters (this node's own entry included, all
// zero).
func (c *Client) Stats() []PeerStats {
	now := c.now()
	var st []PeerStats
	for i, p := range c.peers {
		p.mu.Lock()
		st = append(st, PeerStats{Node: i, Addr: p.addr, BytesIn: p.bytesIn.Load(), FilesIn: p.filesIn.Load(),
			Errors: p.errs.Load(), Forged: p.forged.Load(), Misses: p.miss.Load(), Down: now.Before(p.until), Backoff: p.backoff,
			BlocksIn: p.blocksIn.Load(), BlockBytesIn: p.blockBytesIn.Load()})
		p.mu.Unlock()
	}
	return st
}

// Close closes the idle connections; requests in flight finish.
func (c *Client) Close() { c.tr.CloseIdleConnections() }
