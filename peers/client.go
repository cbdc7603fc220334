package peers

import (
	"context"
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
)

// ClientConfig tunes a Client. Zero fields take the defaults.
type ClientConfig struct {
	Secret string // the job's secret
	Node   int    // this node's index, named in every request
	// PerPeer bounds the requests in flight to one peer (default 4): a
	// node's copy threads must not all wait on one slow peer.
	PerPeer int
	// Timeout bounds a request (default 10 s), waiting for a slot
	// included, plus a second for every MinRate bytes of the file.
	Timeout time.Duration
	MinRate int64 // bytes per second (default 1 MiB/s)
	// Backoff is how long a peer that failed is left alone (default
	// 1 s); it doubles with every failure after the peer is tried again,
	// up to MaxBackoff (default 1 min), and a success resets it.
	Backoff    time.Duration
	MaxBackoff time.Duration
}

func (c *ClientConfig) defaults() {
	if c.PerPeer <= 0 {
		c.PerPeer = 4
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.MinRate <= 0 {
		c.MinRate = 1 << 20
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
// was given: no proxy from the environment, no redirect followed. A
// peer that fails is marked down for a while; every error of Fetch means
// the caller takes the file from the shared filesystem. A Client is safe
// for concurrent use.
type Client struct {
	cfg   ClientConfig
	key   []byte
	tr    *http.Transport
	hc    *http.Client
	peers []*peer
	now   func() time.Time // the clock of the backoff; tests move it
}

type peer struct {
	slots                        chan struct{} // one token per request in flight
	bytesIn, filesIn, errs, miss atomic.Int64

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
	cfg.defaults()
	c := &Client{cfg: cfg, key: []byte(cfg.Secret), now: time.Now}
	c.tr = &http.Transport{
		Proxy:                 nil, // a proxy is an address outside the job
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   cfg.PerPeer,
		MaxConnsPerHost:       cfg.PerPeer,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: cfg.Timeout,
		DisableCompression:    true, // the bytes must be the copy's, and sendfile sends them as they are
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
// have size bytes and mtime (ns), and streams it into dst at dst's
// offset. It returns the bytes written. On any error the bytes in dst
// are no copy (the caller discards its temporary file) and the caller
// takes the file from the shared filesystem; the peer is marked down
// unless the error was no fault of its own (ErrNotHeld, writing dst, the
// caller's ctx ending).
func (c *Client) Fetch(ctx context.Context, node int, source string, size, mtime int64, dst *os.File) (int64, error) {
	p, addr, err := c.peer(node)
	if err != nil {
		return 0, fmt.Errorf("peer %d: %w", node, err)
	}
	tctx, cancel := context.WithTimeout(ctx, c.timeout(size))
	defer cancel()
	n, err := c.transfer(tctx, p, addr, source, size, mtime, dst)
	var werr *writeError
	switch {
	case err == nil:
		p.filesIn.Add(1)
		p.bytesIn.Add(n)
		c.settle(p, true)
		return n, nil
	case errors.Is(err, ErrNotHeld):
		p.miss.Add(1)
	case errors.As(err, &werr) || ctx.Err() != nil:
	default:
		p.errs.Add(1)
		c.settle(p, false)
	}
	return n, fmt.Errorf("peer %d (%s): %s: %w", node, addr, source, err)
}

// timeout is how long a request for size bytes may take.
func (c *Client) timeout(size int64) time.Duration {
	return c.cfg.Timeout + time.Duration(size/c.cfg.MinRate)*time.Second
}

// transfer sends one request within ctx, holding one of the peer's slots.
func (c *Client) transfer(ctx context.Context, p *peer, addr, source string, size, mtime int64, dst *os.File) (int64, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-p.slots }()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+query(source, size, mtime, c.cfg.Node), nil)
	if err != nil {
		return 0, err
	}
	sign(req, c.key)
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if err := answer(resp, size); err != nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // a short error body: keep the connection
		return 0, err
	}
	n, err := io.Copy(&fileWriter{f: dst}, io.LimitReader(resp.Body, size+1))
	if err == nil && n != size {
		err = fmt.Errorf("%w: %d bytes, %d expected", ErrLength, n, size)
	}
	return n, err
}

// query is the request target for source on a peer.
func query(source string, size, mtime int64, from int) string {
	v := url.Values{"path": {source}, "size": {strconv.FormatInt(size, 10)},
		"mtime": {strconv.FormatInt(mtime, 10)}, "from": {strconv.Itoa(from)}}
	return copyEndpoint + "?" + v.Encode()
}

// answer checks the status and announced length of a response.
func answer(resp *http.Response, size int64) error {
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusConflict:
		return ErrNotHeld
	default:
		return fmt.Errorf("%w: %s", ErrRefused, resp.Status)
	}
	if resp.ContentLength != size {
		return fmt.Errorf("%w: %d bytes announced, %d expected", ErrLength, resp.ContentLength, size)
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
	Misses  int64         `json:"peer_misses"` // asked for a copy it did not hold
	Down    bool          `json:"peer_down"`
	Backoff time.Duration `json:"peer_backoff_ns"`
}

// Stats reads every peer's counters (this node's own entry included, all
// zero).
func (c *Client) Stats() []PeerStats {
	now := c.now()
	var st []PeerStats
	for i, p := range c.peers {
		p.mu.Lock()
		st = append(st, PeerStats{Node: i, Addr: p.addr, BytesIn: p.bytesIn.Load(), FilesIn: p.filesIn.Load(),
			Errors: p.errs.Load(), Misses: p.miss.Load(), Down: now.Before(p.until), Backoff: p.backoff})
		p.mu.Unlock()
	}
	return st
}

// Close closes the idle connections; requests in flight finish.
func (c *Client) Close() { c.tr.CloseIdleConnections() }
