package shim

/*
#include "../preload/segment.h"
*/
import "C"

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

// MaxTiers is the number of tiers the data plane can serve from.
const MaxTiers = C.AUGUR_MAX_TIERS

// SegmentDir holds the jobs' state; the data plane finds it at the same
// paths (preload/job.c, job_dir).
const SegmentDir = "/dev/shm"

// A job's state is a directory of its own, /dev/shm/augur.<uid>.<job>,
// holding the segment and the leader lock. /dev/shm is writable by every
// user, so any name there can be taken first by someone else; the
// directory is made with mkdir (exclusive) and mode 0700 by the job's
// first process, and every process trusts it only if it is this user's,
// private and not a symlink (opened with O_NOFOLLOW and checked), and
// then opens the segment and lock from it, also with O_NOFOLLOW and
// checked: no one else can have created or changed them. A generated job
// id is 64 random bits, so another user cannot even guess the name.
const (
	segName    = "segment"
	leaderName = "leader"
)

// Segment is a job's shared-memory segment, mapped into this process.
// The mapping lives as long as the process; Ptr may be handed to C.
type Segment struct {
	Job  string
	Path string
	mem  []byte
	s    *C.struct_augur_segment
}

// JobDir is the directory of job's state.
func JobDir(job string) string {
	return fmt.Sprintf("%s/augur.%d.%s", SegmentDir, os.Geteuid(), job)
}

// SegmentPath names the segment of job.
func SegmentPath(job string) string { return JobDir(job) + "/" + segName }

// NewJobID names a job unguessably: 64 random bits after prefix.
func NewJobID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// maxJobID is the longest job id: the segment's job field holds 64
// bytes with the NUL, as does the data plane's.
const maxJobID = 63

// checkJobID refuses ids that cannot name a directory of their own.
func checkJobID(job string) error {
	if job == "" || job == "." || job == ".." || len(job) > maxJobID || strings.ContainsAny(job, "/\x00") {
		return fmt.Errorf("bad job id %q (at most 63 bytes, no '/')", job)
	}
	return nil
}

// AttachSegment maps the segment of job, creating the job's directory and
// initialising the segment if this is the job's first process. Creation is
// serialised with flock, so two processes starting at once initialise it
// once.
func AttachSegment(job string) (*Segment, error) {
	if err := checkJobID(job); err != nil {
		return nil, err
	}
	dir, err := openJobDir(job, true)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	// The lock file first: a job with a lock file nobody holds has ended,
	// and its state may go (pruneJobs), also when its first process dies
	// before it leads.
	lock, err := openPrivate(dir, JobDir(job), leaderName)
	if err != nil {
		return nil, err
	}
	unix.Close(lock)
	fd, err := openPrivate(dir, JobDir(job), segName)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	path := SegmentPath(job)
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		return nil, err
	}
	defer unix.Flock(fd, unix.LOCK_UN)
	size := int64(C.sizeof_struct_augur_segment)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Size != size {
		if err := unix.Ftruncate(fd, size); err != nil {
			return nil, fmt.Errorf("segment %s: %w", path, err)
		}
	}
	seg, err := mapSegment(fd, path, job, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		return nil, err
	}
	if seg.s.magic != C.AUGUR_MAGIC {
		seg.s.version = C.AUGUR_ABI_VERSION
		seg.s.size = C.uint64_t(size)
		seg.s.created_ns = C.uint64_t(time.Now().UnixNano())
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&seg.s.job[0])), len(seg.s.job)-1), job)
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&seg.s.magic)), C.AUGUR_MAGIC)
	}
	if seg.s.version != C.AUGUR_ABI_VERSION {
		return nil, fmt.Errorf("segment %s has ABI version %d, this library %d",
			path, seg.s.version, C.AUGUR_ABI_VERSION)
	}
	return seg, nil
}

// openJobDir opens job's directory (making it first, with create) and
// checks that it is this user's, private and not a symlink.
func openJobDir(job string, create bool) (int, error) {
	path := JobDir(job)
	if create {
		if err := unix.Mkdir(path, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, fmt.Errorf("job directory %s: %w", path, err)
		}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		var st unix.Stat_t
		if unix.Lstat(path, &st) == nil {
			return -1, untrustedJob(path, &st, unix.S_IFDIR)
		}
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if err := checkPrivate(fd, path, unix.S_IFDIR); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// openPrivate opens name in the job directory dir (named dirPath),
// creating it exclusively (mode 0600) if it does not exist, without
// following a symlink, and checks it.
func openPrivate(dir int, dirPath, name string) (int, error) {
	path := dirPath + "/" + name
	const flags = unix.O_RDWR | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dir, name, flags|unix.O_CREAT|unix.O_EXCL, 0o600)
	if errors.Is(err, unix.EEXIST) {
		fd, err = unix.Openat(dir, name, flags, 0)
	}
	if err != nil {
		var st unix.Stat_t
		if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			return -1, untrustedJob(path, &st, unix.S_IFREG)
		}
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if err := checkPrivate(fd, path, unix.S_IFREG); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func checkPrivate(fd int, path string, kind uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return untrustedJob(path, &st, kind)
}

// untrustedJob says why a job's directory, segment or lock is not to be
// trusted: tiering.Untrusted's reasons, or any access for group or
// others (augur makes them 0700 and 0600).
func untrustedJob(path string, st *unix.Stat_t, kind uint32) error {
	if err := tiering.Untrusted(path, st, kind); err != nil {
		return fmt.Errorf("job state %w", err)
	}
	if st.Mode&0o077 != 0 {
		return fmt.Errorf("job state %s is open to group or others (mode %04o), not as augur makes it",
			path, st.Mode&0o7777)
	}
	return nil
}

// OpenSegment maps an existing segment read-only, for augur stat.
func OpenSegment(path string) (*Segment, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if err := checkPrivate(fd, path, unix.S_IFREG); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Size != int64(C.sizeof_struct_augur_segment) {
		return nil, fmt.Errorf("%s: not a segment of this augur version", path)
	}
	seg, err := mapSegment(fd, path, "", unix.PROT_READ)
	if err != nil {
		return nil, err
	}
	if seg.s.magic != C.AUGUR_MAGIC || seg.s.version != C.AUGUR_ABI_VERSION {
		seg.Close()
		return nil, fmt.Errorf("%s: not a segment of this augur version", path)
	}
	seg.Job = C.GoString(&seg.s.job[0])
	return seg, nil
}

func mapSegment(fd int, path, job string, prot int) (*Segment, error) {
	mem, err := unix.Mmap(fd, 0, int(C.sizeof_struct_augur_segment), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("segment %s: %w", path, err)
	}
	return &Segment{Job: job, Path: path, mem: mem,
		s: (*C.struct_augur_segment)(unsafe.Pointer(&mem[0]))}, nil
}

// Ptr is the segment's address, for the data plane.
func (s *Segment) Ptr() unsafe.Pointer { return unsafe.Pointer(s.s) }

// Close unmaps the segment; it must not be used afterwards.
func (s *Segment) Close() error { return unix.Munmap(s.mem) }

// ErrNoSegment: no job of this user's has run on this node since the
// last clean.
var ErrNoSegment = errors.New("no augur job of yours found on this node (no " + SegmentDir + "/augur.<uid>.<job>)")

// u64 reads a counter of the segment atomically.
func u64(p *C.uint64_t) uint64 { return atomic.LoadUint64((*uint64)(unsafe.Pointer(p))) }

func setU64(p *C.uint64_t, v uint64) { atomic.StoreUint64((*uint64)(unsafe.Pointer(p)), v) }

func addU64(p *C.uint64_t, v uint64) { atomic.AddUint64((*uint64)(unsafe.Pointer(p)), v) }

// publishConfig writes the data plane's configuration — every form of
// every dataset root, the tier paths, whether a copy is compared with
// its source at every open (revalidate = 0) — for the processes that start
// while this leader lives: they take it from the segment and never start
// a Go runtime (intercept.c, attach_leader). Entries that do not fit are
// left out, as the data plane would refuse them.
func (s *Segment) publishConfig(roots, tiers []string, everyOpen bool) {
	c := &s.s.config
	s.unpublishConfig()
	c.every_open = 0
	if everyOpen {
		c.every_open = 1
	}
	put := func(dst *[C.AUGUR_CONFIG_PATH]C.char, v string) bool {
		if len(v) >= len(dst) {
			return false
		}
		b := unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), len(dst))
		copy(b, v)
		b[len(v)] = 0
		return true
	}
	n := 0
	for _, r := range roots {
		if n < len(c.roots) && put(&c.roots[n], r) {
			n++
		}
	}
	c.nroots = C.uint32_t(n)
	n = 0
	for _, t := range tiers {
		if n < len(c.tiers) && put(&c.tiers[n], t) {
			n++
		}
	}
	c.ntiers = C.uint32_t(n)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&c.published)), 1)
}

// unpublishConfig withdraws a configuration published by an earlier
// leader of the job: until this leader has validated the tiers and
// published its own, new processes load the Go half and wait for it.
func (s *Segment) unpublishConfig() {
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&s.s.config.published)), 0)
}
