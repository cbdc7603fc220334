package shim

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Jobs lists this user's jobs on the node, newest first (by when their
// directory last changed: made, or a lock or segment created in it).
func Jobs() []string {
	prefix := fmt.Sprintf("augur.%d.", os.Geteuid())
	entries, _ := os.ReadDir(SegmentDir)
	type job struct {
		id      string
		changed time.Time
	}
	var jobs []job
	for _, e := range entries {
		id, ok := strings.CutPrefix(e.Name(), prefix)
		var st unix.Stat_t
		if !ok || unix.Lstat(SegmentDir+"/"+e.Name(), &st) != nil ||
			untrustedJob(SegmentDir+"/"+e.Name(), &st, unix.S_IFDIR) != nil {
			continue // another user's planted name is not our job
		}
		jobs = append(jobs, job{id, time.Unix(st.Ctim.Unix())})
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].changed.After(jobs[j].changed) })
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.id
	}
	return ids
}

// JobAlive reports whether a live process leads job (holds its lock).
//
// Never call it for the caller's own job from its leader: POSIX locks
// belong to the process, so the probe would see its own lock as free,
// and closing the probe's descriptor would release it.
func JobAlive(job string) bool { return leaderOf(job) == leaderLive }

// The states of a job's leader lock.
const (
	leaderNone  = iota // no lock file yet: the job is starting (or died starting)
	leaderEnded        // a lock file nobody holds
	leaderLive
)

func leaderOf(job string) int {
	dir, err := openJobDir(job, false)
	if err != nil {
		return leaderNone
	}
	defer unix.Close(dir)
	fd, err := unix.Openat(dir, leaderName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return leaderNone
	}
	defer unix.Close(fd)
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if unix.FcntlFlock(uintptr(fd), unix.F_GETLK, &lk) == nil && lk.Type != unix.F_UNLCK {
		return leaderLive
	}
	return leaderEnded
}

// RemoveJob removes a job's state: its segment, lock and directory.
// Processes that still map the segment keep their mapping.
func RemoveJob(job string) error {
	dir, err := openJobDir(job, false)
	if err != nil {
		return err
	}
	for _, name := range []string{segName, leaderName} {
		if err := unix.Unlinkat(dir, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			unix.Close(dir)
			return &os.PathError{Op: "remove", Path: JobDir(job) + "/" + name, Err: err}
		}
	}
	unix.Close(dir)
	removeTees(job)
	return os.Remove(JobDir(job))
}

// Pruning. Every process that leads its own job (a plain preload without
// augur run makes one per command) leaves a 4 MiB segment in /dev/shm,
// which is RAM. A new leader removes the state of this user's ended jobs
// but the newest keepJobs, which augur stat can still show; augur clean
// removes the rest. A job without a lock file yet is starting (its first
// process made the directory a moment ago) and is left alone unless it
// has been so for a minute (its first process died there).
const (
	keepJobs     = 4
	startingJobs = time.Minute
)

// pruneJobs removes ended jobs' state as above, never own's.
func pruneJobs(own string) {
	ended := 0
	for _, job := range Jobs() {
		if job == own {
			continue
		}
		switch leaderOf(job) {
		case leaderLive:
			continue
		case leaderNone:
			var st unix.Stat_t
			if unix.Lstat(JobDir(job), &st) != nil || time.Since(time.Unix(st.Ctim.Unix())) < startingJobs {
				continue
			}
		}
		if ended++; ended > keepJobs {
			RemoveJob(job)
		}
	}
}
