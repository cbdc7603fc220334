package pfsemu

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// delay sleeps d. It deliberately ignores FUSE interrupts: the kernel
// sends one whenever the calling thread gets any signal (Go's preemption
// signal, SIGCHLD, a profiler's SIGPROF), and answering it with EINTR
// would fail a read(2) that a program never expects to fail on a regular
// file. A Lustre client does not abort an RPC for a signal either; a
// process killed while waiting exits once its request is answered.
//
// Go's timers wake a sleeping goroutine through the network poller,
// which waits in whole milliseconds: a sleep of 0.5 ms took 1 ms, one of
// 1.5 ms 2 ms. Measured on a reader's sequential first epoch, a 1 ms
// LOOKUP took 1.17 ms (median) and 2.0 ms (p90) as soon as two requests
// overlapped, and a 0.5 ms READ of 128 KiB 2.5 ms. So the last
// millisecond or two of a delay is slept on the thread (nanosleep): 1.15,
// 1.22 and 1.6 ms then, whatever overlaps. Longer delays (a READ waiting
// for the link behind many others) sleep on a timer before that, so that
// a request holds a thread for at most that long: a thread in nanosleep
// holds its P until the runtime takes it back (see Mount, GOMAXPROCS).
func delay(d time.Duration) {
	if d <= 0 {
		return
	}
	end := time.Now().Add(d)
	if d > 2*time.Millisecond {
		time.Sleep(d - 2*time.Millisecond) // late by at most 1 ms
	}
	ts := unix.NsecToTimespec(int64(time.Until(end)))
	for ts.Nano() > 0 && unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// link models the PFS's aggregate read bandwidth: one pipe that every
// READ of every client shares. It is a token bucket with no burst,
// written as a virtual clock: free is the time at which all bytes
// reserved so far will have passed through the pipe at the rate that
// held when each was reserved. A read of n bytes is done when its own
// bytes have passed, so B bytes, however they are split among readers,
// take at least B/rate.
//
// The rate may depend on how many readers there are (Options.BandwidthCurve).
// A reader is a client thread (the kernel's pid of the caller) with at
// least one READ in flight, counted when a READ arrives, including READs
// still waiting for the pipe.
type link struct {
	rate  float64      // bytes per second when curve is empty; 0: unlimited
	curve []CurvePoint // when not empty, the rate by number of readers

	// mu guards the fields below.
	mu      sync.Mutex
	free    time.Time      // when the pipe has sent everything reserved
	readers map[uint32]int // in-flight READs by caller pid
	peak    int            // most readers seen at once
}

func newLink(o *Options) *link {
	return &link{rate: o.Bandwidth, curve: o.BandwidthCurve, readers: map[uint32]int{}}
}

// begin records a READ from pid and returns the number of readers now.
func (l *link) begin(pid uint32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.readers[pid]++
	n := len(l.readers)
	if n > l.peak {
		l.peak = n
	}
	return n
}

// end undoes begin.
func (l *link) end(pid uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.readers[pid]--; l.readers[pid] <= 0 {
		delete(l.readers, pid)
	}
}

func (l *link) peakReaders() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.peak
}

// reserve books n bytes on the pipe at the rate for the given number of
// readers and returns how long the caller must wait for them to pass.
func (l *link) reserve(n int, readers int) time.Duration {
	rate := l.rate
	if len(l.curve) > 0 {
		rate = curveAt(l.curve, readers)
	}
	if rate <= 0 || n <= 0 {
		return 0
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.free.Before(now) {
		l.free = now // an idle pipe saves no credit
	}
	l.free = l.free.Add(time.Duration(float64(n) / rate * float64(time.Second)))
	return l.free.Sub(now)
}

// faults decides which READs fail or stall. Decisions depend only on the
// seed and the READ's sequence number (1, 2, ...), never on timing.
type faults struct {
	failRate   float64
	seed       uint64
	stallEvery int64
	stall      time.Duration
}

// fail reports whether READ number seq is answered with EIO.
func (f *faults) fail(seq int64) bool {
	if f.failRate <= 0 {
		return false
	}
	h := splitmix64(f.seed ^ splitmix64(uint64(seq)))
	return float64(h>>11)/(1<<53) < f.failRate
}

// stallFor returns how long READ number seq stalls.
func (f *faults) stallFor(seq int64) time.Duration {
	if f.stallEvery <= 0 || seq%f.stallEvery != 0 {
		return 0
	}
	return f.stall
}

// splitmix64 is the finaliser of SplitMix64 (Steele, Lea, Flood 2014): a
// cheap bijection that scatters consecutive inputs over all 64 bits.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
