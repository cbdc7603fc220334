// Package netlab makes test hosts on one machine: network namespaces,
// each joined to a bridge of its own by a veth pair, with an address
// that exists only inside its namespace and a link whose bandwidth tc's
// token bucket (tbf) limits in both directions, as a node's NIC. make
// bench's job of several nodes (S4) and the peers' tests run their nodes
// in them; nothing is ever routed outside the lab. It needs root.
//
// netem (tc delay) needs a kernel module this machine may lack: delay is
// added in user space where needed (a delaying proxy).
package netlab

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Lab is a set of hosts on one bridge.
type Lab struct {
	id     string
	bridge string
	Hosts  []*Host
}

// Host is one network namespace of a Lab.
type Host struct {
	NS   string // the namespace's name, for ip netns exec
	Addr string // its IPv4 address, reachable from the lab's other hosts only
	dev  string // the veth end inside the namespace
	br   string // the veth end on the bridge
}

// subnet is the lab's: its hosts are subnet.1 to subnet.n. Each lab has
// a bridge of its own, so two labs may use the same addresses.
const subnet = "10.231.0"

// New makes n hosts whose links carry rate bytes per second each way
// (0: unlimited). On error it removes what it made.
func New(n int, rate int64) (*Lab, error) {
	if n < 1 || n > 200 {
		return nil, fmt.Errorf("netlab: %d hosts: want 1 to 200", n)
	}
	var b [3]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])[:5]
	l := &Lab{id: id, bridge: "al" + id + "br"}
	if err := ip("link", "add", l.bridge, "type", "bridge"); err != nil {
		return nil, err
	}
	if err := ip("link", "set", l.bridge, "up"); err != nil {
		l.Close()
		return nil, err
	}
	for i := range n {
		h := &Host{NS: fmt.Sprintf("augur-%s-%d", id, i), Addr: fmt.Sprintf("%s.%d", subnet, i+1),
			dev: fmt.Sprintf("al%sp%d", id, i), br: fmt.Sprintf("al%sv%d", id, i)}
		l.Hosts = append(l.Hosts, h)
		if err := l.add(h); err != nil {
			l.Close()
			return nil, err
		}
		if err := l.SetRate(i, rate); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// add makes h's namespace and link.
func (l *Lab) add(h *Host) error {
	steps := [][]string{
		{"netns", "add", h.NS},
		{"link", "add", h.br, "type", "veth", "peer", "name", h.dev},
		{"link", "set", h.dev, "netns", h.NS},
		{"link", "set", h.br, "master", l.bridge, "up"},
		{"-n", h.NS, "addr", "add", h.Addr + "/24", "dev", h.dev},
		{"-n", h.NS, "link", "set", h.dev, "up"},
		{"-n", h.NS, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	return nil
}

// SetRate limits host i's link to rate bytes per second each way: what
// it sends (the veth end in its namespace) and what it receives (the end
// on the bridge). 0 removes the limit.
func (l *Lab) SetRate(i int, rate int64) error {
	h := l.Hosts[i]
	for _, d := range [][]string{{"-n", h.NS, "qdisc", "del", "dev", h.dev, "root"}, {"qdisc", "del", "dev", h.br, "root"}} {
		exec.Command("tc", d...).Run() // none yet: nothing to delete
	}
	if rate <= 0 {
		return nil
	}
	// The bucket holds 10 ms of the rate (at least 64 KiB: a TSO
	// segment), enough for any kernel tick, little enough to shape.
	burst := max(rate/100, 64<<10)
	tbf := []string{"root", "tbf", "rate", fmt.Sprintf("%dbit", rate*8), "burst", fmt.Sprint(burst), "latency", "100ms"}
	for _, dev := range [][]string{{"-n", h.NS, "qdisc", "add", "dev", h.dev}, {"qdisc", "add", "dev", h.br}} {
		if err := run("tc", append(dev, tbf...)...); err != nil {
			return err
		}
	}
	return nil
}

// Command runs name in host i's namespace (ip netns exec), which also
// gives it a mount namespace of its own with the namespace's /sys.
func (l *Lab) Command(i int, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", l.Hosts[i].NS, name}, args...)...)
}

// Do runs f on a thread in host i's network namespace: the sockets f
// makes (a listener, a connection) are the host's, and stay so after.
func (l *Lab) Do(i int, f func() error) error {
	runtime.LockOSThread()
	self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netlab: %w", err)
	}
	defer unix.Close(self)
	ns, err := unix.Open("/run/netns/"+l.Hosts[i].NS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netlab: %w", err)
	}
	defer unix.Close(ns)
	if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netlab: setns %s: %w", l.Hosts[i].NS, err)
	}
	defer func() {
		// A thread that cannot go back stays locked: Go ends it with
		// the goroutine, and no other goroutine runs in the lab.
		if unix.Setns(self, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return f()
}

// Close removes the namespaces (and with them the veth pairs) and the
// bridge. Processes still in a namespace keep it until they exit.
func (l *Lab) Close() error {
	var errs []error
	for _, h := range l.Hosts {
		if err := ip("netns", "del", h.NS); err != nil {
			errs = append(errs, err)
		}
		exec.Command("ip", "link", "del", h.br).Run() // gone with its namespace's end, usually
	}
	if err := ip("link", "del", l.bridge); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func ip(args ...string) error { return run("ip", args...) }

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netlab: %s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
