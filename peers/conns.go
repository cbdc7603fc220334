package peers

import (
	"fmt"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Connections. A server's descriptors are the process's, and that
// process may be the training program itself (a job started with
// LD_PRELOAD alone leads from inside it): a connection a stranger keeps
// open is a descriptor one of the program's opens cannot have. So a
// server keeps at most
//
//   - MaxConns connections (default: 4 for each other node of the job,
//     which is what their clients open (defaultPerPeer), and 16 more for
//     connections being replaced), and never more than an eighth of the
//     process's descriptor limit (RLIMIT_NOFILE, read at each accept);
//   - MaxConnsPerAddr from one address (default 16: a host's nodes, as
//     several share one in tests, and little of the cap for a stranger);
//   - no connection whose descriptor falls in the last eighth of the
//     limit: the kernel hands out the lowest free number, so such a
//     number means the program holds nearly all of its limit, and its own
//     opens come first.
//
// A connection beyond them is closed as soon as it is accepted, and
// counted. Whatever a stranger does then holds at most a cap's
// connections, each for ReadHeaderTimeout (it is never served, and a
// refused request closes its connection): the job loses its peers
// meanwhile, and the shared filesystem serves, but the program keeps
// seven eighths of its descriptor limit.
const (
	fdShare                = 8
	defaultMaxConnsPerAddr = 16
)

func defaultMaxConns(nodes int) int { return defaultPerPeer*(nodes-1) + 16 }

// limitListener is a listener that admits connections within the limits.
type limitListener struct {
	net.Listener
	s                 *Server
	maxConns, perAddr int

	mu   sync.Mutex
	open int            // connections admitted and not closed; guarded by mu
	by   map[string]int // the same per remote address; guarded by mu
}

// Accept returns the next connection the limits admit; it closes and
// counts the others.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		if why, msg := l.admit(c, host); msg != "" {
			l.s.count(c.RemoteAddr().String(), "", why, msg)
			c.Close()
			continue
		}
		return &limitedConn{Conn: c, l: l, host: host}, nil
	}
}

// admit takes a place for c, from host, or says which limit it is over
// (a message, "" if admitted).
func (l *limitListener) admit(c net.Conn, host string) (reason, string) {
	budget := l.maxConns
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil && lim.Cur < 1<<30 {
		share := int(lim.Cur) / fdShare
		budget = min(budget, share)
		if fd := fdOf(c); fd >= int(lim.Cur)-share {
			return refusedFds, fmt.Sprintf("descriptor %d of the process's %d: the last eighth is the program's own", fd, lim.Cur)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.open >= budget:
		return refusedConns, fmt.Sprintf("%d connections open, the most this node keeps", l.open)
	case l.by[host] >= l.perAddr:
		return refusedConnsPerAddr, fmt.Sprintf("%d connections open from %s, the most from one address", l.by[host], host)
	}
	l.open++
	l.by[host]++
	return 0, ""
}

// conns is the number of connections open.
func (l *limitListener) conns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

func (l *limitListener) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.by[host]--; l.by[host] == 0 {
		delete(l.by, host)
	}
}

// fdOf is c's descriptor number (-1 if it has none).
func fdOf(c net.Conn) int {
	fd := -1
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			raw.Control(func(f uintptr) { fd = int(f) })
		}
	}
	return fd
}

// limitedConn gives its place back when closed (once: net/http may
// close a connection twice).
type limitedConn struct {
	net.Conn
	l    *limitListener
	host string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.host) })
	return err
}
