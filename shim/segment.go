package shim

/*
#include "../intercept.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxTiers is the number of tiers the data plane can serve from.
const MaxTiers = C.AUGUR_MAX_TIERS

// SegmentDir holds the job segments and leader locks; the data plane
// finds them at the same paths (intercept.c, attach_leader).
const SegmentDir = "/dev/shm"

const segPrefix, segSuffix = "augur-", ".seg"

// Segment is a job's shared-memory segment, mapped into this process.
// The mapping lives as long as the process; Ptr may be handed to C.
type Segment struct {
	Job  string
	Path string
	mem  []byte
	s    *C.struct_augur_segment
}

// SegmentPath names the segment of job.
func SegmentPath(job string) string {
	return filepath.Join(SegmentDir, segPrefix+job+segSuffix)
}

// AttachSegment maps the segment of job, creating and initialising it if
// this is the job's first process. Creation is serialised with flock, so
// two processes starting at once initialise it once.
func AttachSegment(job string) (*Segment, error) {
	if job == "" || strings.ContainsAny(job, "/\x00") {
		return nil, fmt.Errorf("bad job id %q", job)
	}
	path := SegmentPath(job)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("segment %s: %w", path, err)
	}
	defer unix.Close(fd)
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

// OpenSegment maps an existing segment read-only, for augur stat.
func OpenSegment(path string) (*Segment, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Size != int64(C.sizeof_struct_augur_segment) {
		return nil, fmt.Errorf("%s: not a segment of this augur version", path)
	}
	job := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), segPrefix), segSuffix)
	seg, err := mapSegment(fd, path, job, unix.PROT_READ)
	if err != nil {
		return nil, err
	}
	if seg.s.magic != C.AUGUR_MAGIC || seg.s.version != C.AUGUR_ABI_VERSION {
		return nil, fmt.Errorf("%s: not a segment of this augur version", path)
	}
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

// Segments lists the segments in SegmentDir, the most recently created
// job first (segments of other versions last).
func Segments() ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(SegmentDir, segPrefix+"*"+segSuffix))
	if err != nil {
		return nil, err
	}
	created := map[string]uint64{}
	for _, m := range matches {
		if seg, err := OpenSegment(m); err == nil {
			created[m] = uint64(seg.s.created_ns)
			seg.Close()
		}
	}
	sort.SliceStable(matches, func(i, j int) bool { return created[matches[i]] > created[matches[j]] })
	return matches, nil
}

// Close unmaps the segment; it must not be used afterwards.
func (s *Segment) Close() error { return unix.Munmap(s.mem) }

// ErrNoSegment: no job has run on this node since the last clean.
var ErrNoSegment = errors.New("no augur job found (no " + SegmentDir + "/" + segPrefix + "*" + segSuffix + ")")

// u64 reads a counter of the segment atomically.
func u64(p *C.uint64_t) uint64 { return atomic.LoadUint64((*uint64)(unsafe.Pointer(p))) }

func setU64(p *C.uint64_t, v uint64) { atomic.StoreUint64((*uint64)(unsafe.Pointer(p)), v) }

func addU64(p *C.uint64_t, v uint64) { atomic.AddUint64((*uint64)(unsafe.Pointer(p)), v) }

// publishConfig writes the data plane's configuration — every form of
// every dataset root, the tier paths — for the processes that start
// while this leader lives: they take it from the segment and never start
// a Go runtime (intercept.c, attach_leader). Entries that do not fit are
// left out, as the data plane would refuse them.
func (s *Segment) publishConfig(roots, tiers []string) {
	c := &s.s.config
	s.unpublishConfig()
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
