// Package pfsemu emulates a contended shared parallel filesystem (PFS)
// such as Lustre: a FUSE mount of a local directory that delays every
// request the way a busy PFS does and counts every request it serves.
//
// augur's claim is that it sends fewer operations to the PFS. The shim's
// own counters cannot prove that; this package is the independent
// witness. Benchmarks and tests read the dataset through the emulated
// mount, and its counters say what a real PFS would have been asked for.
//
// # Using it
//
// From the command line (the subcommand `augur pfsemu` runs Command):
//
//	augur pfsemu --source /data/imagenet --mount /mnt/pfs \
//	    --bandwidth 200MiB/s --stats-file /tmp/pfs.json --ready-file /tmp/pfs.ready
//
// serves until SIGINT or SIGTERM, then unmounts. From Go, in-process:
//
//	srv, err := pfsemu.Mount(pfsemu.Options{Source: src, Mount: mnt, DirectIO: true})
//	if err != nil { ... }
//	defer srv.Unmount()
//	// ... read files under mnt ...
//	fmt.Println(srv.Stats().Opens, srv.Stats().ReadBytes)
//
// An Options with only Source and Mount is a plain counting passthrough;
// DefaultOptions gives the Lustre-like defaults of the command.
//
// # How a request travels
//
// The kernel sends FUSE requests. They pass through three layers:
//
//   - rawFS (raw.go) sees each request exactly as the kernel sent it. It
//     counts and delays the metadata requests (LOOKUP, GETATTR, READDIR,
//     ...). Counting at this level means that go-fuse's internal calls
//     between its own nodes are never mistaken for PFS traffic.
//   - go-fuse's node bridge and loopback filesystem (fs.NewLoopbackRoot)
//     do the real work against the source directory: path walks,
//     symlinks, xattrs, renames. The emulator inherits their POSIX
//     behaviour unchanged.
//   - node and file (node.go) wrap the loopback's inodes and open files.
//     They count and delay OPEN, READ, WRITE, RELEASE; a READ also pays
//     for its bytes on the shared link and may be failed or stalled on
//     purpose. The file wrapper deliberately hides the loopback's
//     backing descriptor so that the kernel can never read the source
//     behind the emulator's back (FUSE passthrough is also refused at
//     mount time).
//
// # The model
//
// Latency: every metadata request sleeps MetaLatency, every OPEN and
// CREATE OpenLatency, every READ ReadLatency. Requests are served
// concurrently, so latencies of different requests overlap, as on a PFS
// with many servers.
//
// Bandwidth: all READs of all files and all clients share one link
// (type link), a token bucket with no burst: B bytes take at least
// B/rate, however they are split between readers. With a bandwidth
// curve the rate depends on γ, the number of readers with a READ in
// flight, interpolated between the points given, as NoPFS models a PFS
// with t(γ). A reader is a client thread; a READ waiting for the link
// still counts as in flight.
//
// Requests are served in full even when the kernel reports that the
// caller got a signal (FUSE_INTERRUPT): failing them with EINTR would
// break programs that never expect read(2) on a file to be interrupted.
//
// # Caching
//
// By default the kernel caches like a Lustre client: file data stays in
// the page cache across close and reopen (FOPEN_KEEP_CACHE) and is
// dropped when the file's size or mtime changes; entries and attributes
// are cached for one second. So a second epoch over a small dataset may
// cost OPENs but no READs, exactly as on Lustre. With DirectIO the page
// cache is bypassed (FOPEN_DIRECT_IO) and the cache timeout drops to
// zero: every read(2), stat(2) and path walk reaches the emulator, which
// makes counts exact and repeatable. Options.CacheTimeout overrides the
// timeout in either mode.
//
// # Counting
//
// Stats lists the counters; each is a number of FUSE requests. Two
// things to know when comparing them to system calls: the kernel splits
// reads into requests of at most 128 KiB (the mount's max_read), and
// without DirectIO it reads ahead, so READs and read_bytes follow the
// page cache, not the application. RELEASE arrives after close(2) has
// returned. The stats file (Options.StatsFile) is rewritten atomically
// every StatsInterval and at Unmount.
//
// # Faults
//
// FailRate answers that fraction of READs with EIO; which ones is a pure
// function of FaultSeed and the READ's sequence number, so a
// single-threaded run fails the same reads every time. StallEvery and
// Stall make every Nth READ sleep, like a server in failover.
//
// # Caveats
//
//   - Mounting needs root (direct mount(2)) or a working fusermount. Only
//     the mounting user can use the mount (no allow_other).
//   - READDIRPLUS is off: a listing followed by stats costs one LOOKUP per
//     entry, as on a PFS without statahead.
//   - Writes pass through and are counted but not delayed or throttled;
//     the model is a read-mostly dataset.
//   - A process killed while its request sleeps exits only when the
//     request is answered.
//   - An emulator killed with SIGKILL leaves a dead mount (ENOTCONN); the
//     next Mount on the same mount point detaches it and says so once.
//   - Serving and using a mount in one Go process (tests, in-process
//     benchmarks) has two traps. A goroutine that page-faults on a
//     mapping of the mount cannot be preempted, so a garbage collection
//     starting meanwhile stops the very goroutines that would serve the
//     fault: touch such mappings only inside system calls, or read from
//     another process (augur's readers are C or Python anyway). And a
//     process that exits with files still open in its own mount can hang
//     in exit, flushing them to a server whose threads are gone; close
//     them, or close the process's /dev/fuse descriptors first (this
//     package's tests do, see TestMain).
package pfsemu
