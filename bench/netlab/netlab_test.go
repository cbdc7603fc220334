package netlab

import (
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// Two hosts reach each other at their addresses, and a link limited to
// 1 MiB/s takes at least that long to carry 2 MiB (a bound no machine,
// however slow, can beat).
func TestHostsTalkThroughTheirLinks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("netlab needs root (network namespaces, tc): run the tests as root")
	}
	l, err := New(2, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	var ln net.Listener
	if err := l.Do(0, func() (err error) { ln, err = net.Listen("tcp", l.Hosts[0].Addr+":0"); return }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const size = 2 << 20
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		got <- n
	}()
	var c net.Conn
	if err := l.Do(1, func() (err error) { c, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second); return }); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case n := <-got:
		if n != size {
			t.Fatalf("%d bytes arrived of %d", n, size)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("2 MiB did not arrive in 30 s")
	}
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Errorf("2 MiB went through a 1 MiB/s link in %v", d)
	}
}
