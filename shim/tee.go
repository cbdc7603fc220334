package shim

/*
#include "../preload/segment.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

// Tees: a first read that makes the copy (preload/tee.c). Under the
// reactive policy a reader that found no copy of a file of at most
// tee_max bytes, and did not wait for one, writes what its reads return
// into a file of the job's tee directory; once it has read every byte in
// order it sends EvTeed, and the leader publishes those bytes as the copy
// (adoptTee), through the fetch pool, if the file did not change since the
// reader's open. The shared filesystem then serves the file once, to the
// reader, and the reader waits for no one. Readers tee until the leader
// finds that the client keeps a page cache (learnClient): from then on
// the leader copies from the pages the readers left, which spares them
// the tee's writes. A reader that stopped short or read out of order
// sends EvUnteed, and the file is copied as any read from its original.

// teeDir is the directory of job's tees.
func teeDir(job string) string { return JobDir(job) + "/" + C.AUGUR_TEE_DIR }

// makeTeeDir makes job's tee directory, private as the job's, or checks
// the one there.
func makeTeeDir(job string) error {
	dir, err := openJobDir(job, false)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	if err := unix.Mkdirat(dir, C.AUGUR_TEE_DIR, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return &os.PathError{Op: "mkdir", Path: teeDir(job), Err: err}
	}
	fd, err := unix.Openat(dir, C.AUGUR_TEE_DIR, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: teeDir(job), Err: err}
	}
	defer unix.Close(fd)
	return checkPrivate(fd, teeDir(job), unix.S_IFDIR)
}

// startTees lets first reads of files of at most wait_max bytes tee, if
// the tee directory can be made. wait_max bounds what a first reader may
// be kept for, waiting or teeing (the tee is its own read, written to
// memory once more); 0 turns both off: the leader copies behind readers.
func (r *reactive) startTees() {
	if err := makeTeeDir(r.l.seg.Job); err != nil {
		r.l.log.Warn().Msgf("first reads will not make their copies: %v", err)
		return
	}
	r.adopting.Add(2)
	go r.adopter()
	go r.keepPool()
	setU64(&r.l.seg.s.leader.tee_max, uint64(r.l.cfg.WaitMax))
}

// The pool of tee files (struct augur_leader.tee_pool): the leader
// creates them with their pages allocated (fallocate), for the size of
// the last tee, so that a reader's tee writes into memory the leader
// allocated beside it rather than allocate each page on its own way
// (tmpfs: 55 us to create and write 128 KiB alone, 25 us into a file
// allocated beforehand). At most poolMax bytes a file.
const poolMax = 1 << 20

// A slot's states (struct augur_leader.tee_pool).
const (
	poolSlots = C.AUGUR_TEE_POOL
	poolEmpty = C.AUGUR_POOL_EMPTY
	poolReady = C.AUGUR_POOL_READY
	poolTaken = C.AUGUR_POOL_TAKEN
)

// poolSlot is the state of slot k of the pool.
func (s *Segment) poolSlot(k int) *uint32 { return (*uint32)(unsafe.Pointer(&s.s.leader.tee_pool[k])) }

// keepPool refills the pool's empty slots after each tee (adoptTee) and
// every poolHold/2 (reclaiming the slots of dead readers) until the
// leader closes, then removes the ready files.
func (r *reactive) keepPool() {
	defer r.adopting.Done()
	tick := time.NewTicker(poolHold / 2)
	defer tick.Stop()
	var taken [poolSlots]time.Time
	for {
		select {
		case <-r.l.stop:
			// The ready files go; a slot a reader holds is its own.
			for k := range poolSlots {
				if atomic.CompareAndSwapUint32(r.l.seg.poolSlot(k), poolReady, poolEmpty) {
					os.Remove(poolName(r.l.seg.Job, k))
				}
			}
			return
		case <-r.refill:
			r.fillPool()
		case now := <-tick.C:
			r.reclaimPool(&taken, now)
			r.fillPool()
		}
	}
}

// poolHold is how long a reader may hold a slot of the pool (its rename
// and open take microseconds): a slot held longer is its process's that
// died in between, and is emptied. Emptying the slot of a reader that is
// only late is harmless: its rename of the file, or of the one made in
// its place, is atomic and replaces nothing, or fails and it creates its
// tee as without the pool.
const poolHold = time.Second

// reclaimPool empties the slots held longer than poolHold; taken is when
// each was first seen held.
func (r *reactive) reclaimPool(taken *[poolSlots]time.Time, now time.Time) {
	for k := range poolSlots {
		state := r.l.seg.poolSlot(k)
		switch {
		case atomic.LoadUint32(state) != poolTaken:
			taken[k] = time.Time{}
		case taken[k].IsZero():
			taken[k] = now
		case now.Sub(taken[k]) > poolHold:
			atomic.CompareAndSwapUint32(state, poolTaken, poolEmpty)
			taken[k] = time.Time{}
		}
	}
}

func poolName(job string, k int) string { return fmt.Sprintf("%s/pool.%d", teeDir(job), k) }

// fillPool makes a file ready in every empty slot of the pool, once a tee
// told its size.
func (r *reactive) fillPool() {
	size := r.teeSize.Load()
	if size <= 0 || size > poolMax || u64(&r.l.seg.s.leader.tee_max) == 0 {
		return
	}
	bytes := teeHeaderAt(size) + int64(C.sizeof_struct_augur_tee_header)
	for k := range poolSlots {
		state := r.l.seg.poolSlot(k)
		if atomic.LoadUint32(state) != poolEmpty {
			continue
		}
		name := poolName(r.l.seg.Job, k)
		fd, err := createPoolFile(name)
		if err != nil {
			return
		}
		err = unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, bytes)
		unix.Close(fd)
		if err != nil {
			os.Remove(name)
			return
		}
		atomic.StoreUint32(state, poolReady)
	}
}

// createPoolFile creates the pool's file name, removing one left there
// (by a reader that took its slot too late, or a leader before this one)
// only when there is one: an unlink of a name that is not there costs the
// leader as much as the create, once a tee.
func createPoolFile(name string) (int, error) {
	const flags = unix.O_CREAT | unix.O_EXCL | unix.O_WRONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open(name, flags, 0o600)
	if errors.Is(err, unix.EEXIST) {
		os.Remove(name)
		fd, err = unix.Open(name, flags, 0o600)
	}
	return fd, err
}

// A tee the adopter publishes: the file's path and the tee file's.
type tee struct{ path, name string }

// onTeed hands a reader's finished tee (EvTeed) to the adopter, which
// publishes the tees one after another in the order their reads ended:
// the fastest tier goes to the files read first, as the statter's order
// gives it to the copies of the queue. With the adopter a full queue
// behind, the tee is dropped and the file copied as one read from its
// original.
func (r *reactive) onTeed(ev Event) {
	name := fmt.Sprintf("%s/%d.%d", teeDir(r.l.seg.Job), ev.PID, ev.Bytes)
	select {
	case r.tees <- tee{ev.Path, name}:
	default:
		os.Remove(name)
		r.l.seg.clearCopying(ev.Path)
		r.queue(ev.Path)
	}
}

// adopter publishes the tees onTeed hands it until the leader closes;
// drain publishes the rest.
func (r *reactive) adopter() {
	defer r.adopting.Done()
	for {
		select {
		case <-r.l.stop:
			return
		case t := <-r.tees:
			r.adoptTee(t.path, t.name)
		}
	}
}

// drainTees publishes the tees still handed to the adopter, once it has
// stopped (Leader.Close).
func (r *reactive) drainTees() {
	r.adopting.Wait()
	for {
		select {
		case t := <-r.tees:
			r.adoptTee(t.path, t.name)
		default:
			return
		}
	}
}

// onUnteed takes up an abandoned tee (EvUnteed): the file is one read
// from its original, and is copied as such.
func (r *reactive) onUnteed(ev Event) {
	if ev.Truncated {
		return
	}
	r.known.Store(ev.Path, struct{}{})
	r.queue(ev.Path)
}

// adoptTee publishes the tee file name as the copy of path: moved into
// the tier where it is on the tee's filesystem (tiering.PublishFile).
func (r *reactive) adoptTee(path, name string) {
	// drop removes the tee and frees the file's slot; forget, a later
	// open copies the file.
	drop := func(forget bool) {
		os.Remove(name)
		if forget {
			r.known.Delete(path)
		}
		r.l.seg.clearCopying(path)
	}
	if r.l.sources.judge(path) {
		drop(true) // worth no copy (sources.go)
		return
	}
	f, hd, err := openTee(name)
	if err != nil {
		r.l.log.Debug().Msgf("tee of %s: %v", path, err)
		drop(true)
		return
	}
	defer f.Close()
	if tiering.LookupPath(r.l.open, path) >= 0 {
		// A tier holds it already: the queue's copy after another
		// reader's tee was abandoned. A second copy would hold the
		// file twice.
		drop(false)
		return
	}
	st := hd.stat()
	r.teeSize.Store(st.Size)
	select {
	case r.refill <- struct{}{}: // its file may have come from the pool
	default:
	}
	link := hd.link != 0 && isLink(path)
	dir, err := unix.Open(filepath.Dir(name), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		drop(true)
		return
	}
	defer unix.Close(dir)
	publish := func(tier *tiering.Tree, commit tiering.Commit) (int64, error) {
		return tier.PublishFile(path, &st, link, dir, filepath.Base(name), f, commit)
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestWait)
	defer cancel()
	if !r.pool.FetchFilled(ctx, path, st.Size, uint64(hd.gen), publish) {
		drop(true)
		if !r.fits(st.Size) {
			r.stopWaiting()
		}
	}
}

// isLink says whether path ends in a symlink: asked only of a tee whose
// reader could not tell.
func isLink(path string) bool {
	var st unix.Stat_t
	return unix.Lstat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// teeHeaderAt is where a tee of size bytes holds its header
// (AUGUR_TEE_HEADER: the first multiple of 64 KiB at or past the size).
func teeHeaderAt(size int64) int64 { return (size + 65535) &^ 65535 }

// teeHeader is struct augur_tee_header.
type teeHeader C.struct_augur_tee_header

// openTee opens a tee file for writing (it is cut to the file's size
// when published) and checks it: this user's (the directory is private),
// its header augur's and where the file's size puts it.
func openTee(name string) (*os.File, *teeHeader, error) {
	f, err := os.OpenFile(name, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil, err
	}
	fail := func(why string) (*os.File, *teeHeader, error) {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %s", name, why)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() {
		return fail("not a regular file of this user")
	}
	hd := new(teeHeader)
	n := int64(C.sizeof_struct_augur_tee_header)
	b := unsafe.Slice((*byte)(unsafe.Pointer(hd)), n)
	if st.Size < n {
		return fail("no tee header")
	}
	if _, err := f.ReadAt(b, st.Size-n); err != nil || hd.magic != C.AUGUR_TEE_MAGIC {
		return fail("no tee header")
	}
	if at := teeHeaderAt(int64(hd.size)); st.Size-n != at {
		return fail(fmt.Sprintf("its header at %d, not at %d for %d bytes", st.Size-n, at, hd.size))
	}
	return f, hd, nil
}

// stat is the original's stat as the reader's open saw it: what the copy
// records of it (mode, times, identity) and what the source is checked
// against when the copy is published.
func (hd *teeHeader) stat() unix.Stat_t {
	return unix.Stat_t{
		Dev: uint64(hd.dev), Ino: uint64(hd.ino), Mode: uint32(hd.mode), Size: int64(hd.size),
		Atim: unix.Timespec{Sec: int64(hd.atime_sec), Nsec: int64(hd.atime_nsec)},
		Mtim: unix.Timespec{Sec: int64(hd.mtime_sec), Nsec: int64(hd.mtime_nsec)},
		Ctim: unix.Timespec{Sec: int64(hd.ctime_sec), Nsec: int64(hd.ctime_nsec)},
	}
}

// reapTees frees the pending slots of tees whose process died before it
// finished them (killed, or exec'd: its tables went with its image), and
// removes their files: the slot would keep the file from being asked for
// again.
func (s *Segment) reapTees() {
	for i := range s.s.pending {
		p := &s.s.pending[i]
		state := (*uint32)(unsafe.Pointer(&p.state))
		if atomic.LoadUint32(state) != C.AUGUR_PENDING_TEEING {
			continue
		}
		pid := int(atomic.LoadInt32((*int32)(unsafe.Pointer(&p.pid))))
		if !errors.Is(unix.Kill(pid, 0), unix.ESRCH) ||
			!atomic.CompareAndSwapUint32(state, C.AUGUR_PENDING_TEEING, C.AUGUR_PENDING_NONE) {
			continue
		}
		futexWake(state)
		names, _ := filepath.Glob(fmt.Sprintf("%s/%d.*", teeDir(s.Job), pid))
		for _, n := range names {
			os.Remove(n)
		}
	}
}

// removeTees removes job's tee directory and what is left in it.
func removeTees(job string) {
	names, _ := filepath.Glob(teeDir(job) + "/*")
	for _, n := range names {
		os.Remove(n)
	}
	os.Remove(teeDir(job))
}
