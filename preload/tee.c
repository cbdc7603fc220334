/*
 * tee.c — a first read that makes the copy (the reactive
 * policy; issue 13).
 *
 * A descriptor of a dataset file served from its original, which found no
 * copy and did not wait for one, may tee: what its reads return is also
 * written into a file of the job, <job directory>/tee/<pid>.<n> (struct
 * augur_tee_header). Once every byte has been read, in order, the reader
 * sends AUGUR_EV_TEED and the leader publishes those bytes as the copy
 * (shim/tee.go), if the file did not change since the reader's open. The
 * shared filesystem then serves the file once, to its reader, with or
 * without a client page cache, and nothing stands in the reader's way: it
 * neither waits for the leader's copy nor is read behind by a copier.
 *
 * A reader that reads out of order past what it teed, stops short (closes
 * early), or reads through a call that does not tee (stdio's internal
 * reads, sendfile, copy_file_range) abandons the tee: AUGUR_EV_UNTEED,
 * and the leader copies the file as for any first read of the original.
 * A mapping of a teeing descriptor (read-only or private) is made of the
 * tee instead: the rest of the file is read into it first, by the mapper,
 * at once (augur_tee_map).
 *
 * The read wrappers call in here only for a descriptor that tees, and
 * nothing here waits or enters Go: a forked child drops its parent's tees
 * (augur_tee_after_fork) and tees its own.
 */
#include "internal.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#define TEE_SLOTS 64
#define TEE_FDS 4
#define TEE_MAP_BUF (1u << 20) /* augur_tee_map's reads of the rest */

/* One tee. A slot is taken by the open that begins it and freed by the
 * call that ends it (complete or abandoned: fd -1), once it has let go of
 * busy, which serializes the threads that read the descriptor at once. */
static struct tee {
	uint32_t used;
	uint32_t busy;
	int fd;            /* the tee file */
	uint32_t pending;  /* its pending slot (struct augur_pending) */
	uint64_t hash;     /* the source's path hash there */
	uint64_t next;     /* bytes teed: [0, next) of the file */
	uint64_t size;     /* the file's size at open */
	uint64_t n;        /* its number: the file is tee/<pid>.<n> */
	uint32_t gen;      /* its file's hold gen at the open (struct augur_hold) */
	/* The descriptors that share it (dup: one open file, one offset),
	 * whose fdtab slots name it until it ends. */
	int fds[TEE_FDS];
	int nfds;
	/* Reads of the descriptor's offset under way, and begun: such a
	 * read's bytes are placed by the offset after it, which only a read
	 * that ran alone can tell (see augur_tee_enter). */
	uint32_t inflight;
	uint64_t starts;
} tees[TEE_SLOTS];

static uint64_t tee_numbers;

/* tee_of is fd's tee, or NULL. fdtab's slot holds its index + 1. */
static struct tee *tee_of(int fd)
{
	if (fd < 0 || fd >= FD_MAX || augur_fdtab[fd].kind != FD_FILE || !augur_fdtab[fd].slot)
		return NULL;
	return &tees[augur_fdtab[fd].slot - 1];
}

/* shares says whether fd is one of t's descriptors. */
static int shares(struct tee *t, int fd)
{
	for (int i = 0; i < t->nfds; i++)
		if (t->fds[i] == fd)
			return 1;
	return 0;
}

/* locked is fd's tee, held (busy), or NULL if it has none or it ended.
 * Another thread holds it only to write one read's bytes: this one waits
 * its turn rather than leave a gap, but not forever (a signal handler
 * that reads the descriptor would wait for the thread it interrupted):
 * then NULL, and the gap its read leaves ends the tee later. */
static struct tee *locked(int fd)
{
	for (int tries = 0; tries < 100000; tries++) {
		struct tee *t = tee_of(fd);
		uint32_t free_ = 0;
		if (!t)
			return NULL;
		if (!__atomic_compare_exchange_n(&t->busy, &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			sched_yield();
			continue;
		}
		if (t->fd >= 0 && tee_of(fd) == t && shares(t, fd))
			return t;
		__atomic_store_n(&t->busy, 0, __ATOMIC_RELEASE); /* ended meanwhile */
	}
	return NULL;
}

/* unbind clears the fdtab slots of t's descriptors: it ended. They look
 * for a copy to move to only after the next publication: the leader has
 * yet to publish this tee's. */
static void unbind(struct tee *t)
{
	uint32_t gen = (uint32_t)__atomic_load_n(&augur_st.seg->leader.publish_gen, __ATOMIC_ACQUIRE);
	for (int i = 0; i < t->nfds; i++) {
		struct fd_entry *e = &augur_fdtab[t->fds[i]];
		if (e->slot == (uint16_t)(t - tees) + 1) {
			e->slot = 0;
			e->gen = gen;
		}
	}
	t->nfds = 0;
}

/* unlock lets go of t, and frees its slot if it ended. */
static void unlock(struct tee *t)
{
	int ended = t->fd < 0;
	__atomic_store_n(&t->busy, 0, __ATOMIC_RELEASE);
	if (ended)
		__atomic_store_n(&t->used, 0, __ATOMIC_RELEASE);
}

static struct augur_pending *slot_of(struct tee *t)
{
	return &augur_st.seg->pending[t->pending];
}

/* release frees the pending slot (to state s, if the tee still holds it)
 * and closes the tee file: t has ended. */
static void release(struct tee *t, uint32_t s)
{
	struct augur_pending *p = slot_of(t);
	uint32_t teeing = AUGUR_PENDING_TEEING;
	if (__atomic_load_n(&p->hash, __ATOMIC_ACQUIRE) == t->hash)
		__atomic_compare_exchange_n(&p->state, &teeing, s, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
	augur_real.close(t->fd);
	t->fd = -1;
}

/* abandon drops fd's tee: its file, its slots, and tells the leader. */
static void abandon(int fd, struct tee *t)
{
	char path[PATH_MAX], abs[PATH_MAX];
	const char *src = __atomic_load_n(&augur_fdpath[fd], __ATOMIC_ACQUIRE);
	snprintf(abs, sizeof(abs), "%s", src ? src : "");
	if (augur_tee_path(augur_self_pid(), t->n, path, sizeof(path)) == 0 && REAL(unlinkat))
		augur_real.unlinkat(AT_FDCWD, path, 0);
	release(t, AUGUR_PENDING_NONE);
	unbind(t);
	struct augur_segment *seg = augur_st.seg;
	__atomic_fetch_add(&seg->leader.untee, 1, __ATOMIC_RELAXED);
	if (abs[0])
		augur_emit(AUGUR_EV_UNTEED, -1, fd, 0, abs, 0);
}

/* mark_end has t's descriptors, which read the whole file, answer a read
 * at its end themselves (augur_fd_at_end). Not those opened with
 * O_DIRECT: the real read would check the request's alignment first. */
static void mark_end(struct tee *t)
{
	int fl = t->nfds ? augur_real.fcntl(t->fds[0], F_GETFL) : -1;
	if (fl < 0 || (fl & O_DIRECT))
		return;
	for (int i = 0; i < t->nfds; i++) {
		augur_fdtab[t->fds[i]].end = t->size;
		augur_fdtab[t->fds[i]].end_gen = t->gen;
	}
}

/* complete hands fd's tee, which holds the whole file, to the leader: the
 * slot says COPYING (an open of the file waits for the copy rather than
 * read the original again) until the leader has published or dropped it.
 * With the ring full the tee is abandoned: the leader would never know. */
static void complete(int fd, struct tee *t)
{
	const char *abs = __atomic_load_n(&augur_fdpath[fd], __ATOMIC_ACQUIRE);
	struct augur_segment *seg = augur_st.seg;
	if (!abs || !augur_emit(AUGUR_EV_TEED, -1, fd, t->n, abs, 0)) {
		abandon(fd, t);
		return;
	}
	__atomic_fetch_add(&seg->leader.teed, 1, __ATOMIC_RELAXED);
	release(t, AUGUR_PENDING_COPYING);
	mark_end(t);
	unbind(t);
}

/* cached_stat is fd's stat as the client has it, without a request to the
 * shared filesystem (AT_STATX_DONT_SYNC): the attributes its open just
 * brought. A client without attribute caching (pfsemu --direct-io, NFS
 * with noac) would otherwise make each first read wait for one more
 * metadata request. Kernels without statx: fstat. */
static int cached_stat(int fd, struct stat *sb)
{
	struct statx sx;
	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_BASIC_STATS, &sx) != 0)
		return REAL(fstat) ? augur_real.fstat(fd, sb) : -1;
	*sb = (struct stat){.st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor), .st_ino = sx.stx_ino,
			    .st_mode = sx.stx_mode, .st_size = (off_t)sx.stx_size,
			    .st_atim = {sx.stx_atime.tv_sec, sx.stx_atime.tv_nsec},
			    .st_mtim = {sx.stx_mtime.tv_sec, sx.stx_mtime.tv_nsec},
			    .st_ctim = {sx.stx_ctime.tv_sec, sx.stx_ctime.tv_nsec}};
	return 0;
}

/* pooled moves a file of the leader's pool (its pages allocated
 * beforehand, off the reader's way) to path, a tee's, and opens it; -1 if
 * none is ready. The slot goes back to the leader either way. */
static int pooled(struct augur_segment *seg, const char *path)
{
	char name[PATH_MAX];
	for (int k = 0; k < AUGUR_TEE_POOL; k++) {
		uint32_t ready = AUGUR_POOL_READY;
		if (!__atomic_compare_exchange_n(&seg->leader.tee_pool[k], &ready, AUGUR_POOL_TAKEN, 0,
						 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		int fd = -1;
		if (augur_tee_pool_path(k, name, sizeof(name)) == 0 &&
		    syscall(SYS_renameat2, AT_FDCWD, name, AT_FDCWD, path, RENAME_NOREPLACE) == 0) {
			fd = augur_real.openat(AT_FDCWD, path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0)
				augur_real.unlinkat(AT_FDCWD, path, 0);
		}
		__atomic_store_n(&seg->leader.tee_pool[k], AUGUR_POOL_EMPTY, __ATOMIC_RELEASE);
		if (fd >= 0) {
			__atomic_fetch_add(&seg->leader.tee_pooled, 1, __ATOMIC_RELAXED);
			return fd;
		}
	}
	return -1;
}

/*
 * augur_tee_begin starts a tee of abs, just opened from its original on
 * fd, if the leader asks for tees (tee_max), the file is a regular one of
 * at most tee_max bytes, and no one else makes its copy (the pending
 * slot is free). It returns the tee's index + 1 for fdtab's slot, or 0.
 * Called with the open's errno saved.
 */
AUGUR_HIDDEN int augur_tee_begin(int fd, const char *abs, size_t len, uint64_t h)
{
	struct augur_segment *seg = augur_st.seg;
	uint64_t max = seg ? __atomic_load_n(&seg->leader.tee_max, __ATOMIC_ACQUIRE) : 0;
	struct stat sb;
	if (!max || fd < 0 || fd >= FD_MAX || len >= AUGUR_EVENT_PATH ||
	    cached_stat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size <= 0 ||
	    (uint64_t)sb.st_size > max)
		return 0;
	struct tee *t = NULL;
	for (int i = 0; i < TEE_SLOTS && !t; i++) {
		uint32_t free_ = 0;
		if (__atomic_compare_exchange_n(&tees[i].used, &free_, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			t = &tees[i];
	}
	if (!t)
		return 0; /* this process tees as many files as it may */
	struct augur_pending *p = &seg->pending[h & (AUGUR_PENDING_SLOTS - 1)];
	uint32_t s = AUGUR_PENDING_NONE;
	if (!__atomic_compare_exchange_n(&p->state, &s, AUGUR_PENDING_CLAIMED, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
		__atomic_store_n(&t->used, 0, __ATOMIC_RELEASE);
		return 0;
	}
	__atomic_store_n(&p->hash, h, __ATOMIC_RELEASE);
	__atomic_store_n(&p->pid, augur_self_pid(), __ATOMIC_RELEASE);
	__atomic_store_n(&p->state, AUGUR_PENDING_TEEING, __ATOMIC_RELEASE);
	*t = (struct tee){.used = 1, .fd = -1, .pending = (uint32_t)(h & (AUGUR_PENDING_SLOTS - 1)),
			  .hash = h, .size = (uint64_t)sb.st_size,
			  .n = __atomic_add_fetch(&tee_numbers, 1, __ATOMIC_RELAXED),
			  .fds = {fd}, .nfds = 1};
	char path[PATH_MAX];
	struct augur_hold *hold = augur_hold(h);
	struct augur_tee_header hd = {
		.magic = AUGUR_TEE_MAGIC, .dev = sb.st_dev, .ino = sb.st_ino, .size = (uint64_t)sb.st_size,
		.atime_sec = sb.st_atim.tv_sec, .atime_nsec = sb.st_atim.tv_nsec,
		.mtime_sec = sb.st_mtim.tv_sec, .mtime_nsec = sb.st_mtim.tv_nsec,
		.ctime_sec = sb.st_ctim.tv_sec, .ctime_nsec = sb.st_ctim.tv_nsec,
		.mode = sb.st_mode, .gen = hold ? __atomic_load_n(&hold->gen, __ATOMIC_SEQ_CST) : 0};
	t->gen = hd.gen;
	/* Whether the path ends in a symlink (the copy says so,
	 * tiering.LinkXattr), asked of the descriptor, not the shared
	 * filesystem: a path with none on its way is the one the kernel
	 * gives for the descriptor. */
	char fdp[64], real[PATH_MAX];
	snprintf(fdp, sizeof(fdp), "/proc/self/fd/%d", fd);
	ssize_t rl = readlink(fdp, real, sizeof(real) - 1);
	hd.link = !(rl > 0 && (real[rl] = 0, strcmp(real, abs) == 0));
	if (augur_tee_path(augur_self_pid(), t->n, path, sizeof(path)) == 0 &&
	    (t->fd = pooled(seg, path)) < 0)
		t->fd = augur_real.openat(AT_FDCWD, path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (t->fd < 0 || pwrite(t->fd, &hd, sizeof(hd), (off_t)AUGUR_TEE_HEADER(hd.size)) != (ssize_t)sizeof(hd)) {
		if (t->fd >= 0) {
			augur_real.unlinkat(AT_FDCWD, path, 0);
			release(t, AUGUR_PENDING_NONE);
		} else {
			uint32_t teeing = AUGUR_PENDING_TEEING;
			__atomic_compare_exchange_n(&p->state, &teeing, AUGUR_PENDING_NONE, 0,
						    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
		}
		__atomic_store_n(&t->used, 0, __ATOMIC_RELEASE);
		return 0;
	}
	return (int)(t - tees) + 1;
}

/*
 * augur_tee_enter is called before each read of a teeing descriptor, and
 * augur_tee_leave after it with the token it returned (0: fd does not
 * tee). A read of the descriptor's offset (read, readv) is placed by the
 * offset after it, less its count; that is its place only if no other
 * read of the descriptor ran at the same time, in this process: none
 * under way when it began (inflight) and none begun since (starts).
 * Otherwise the tee is abandoned. (A forked child would share the offset
 * unseen: a fork abandons the parent's tees, augur_tee_before_fork. A
 * child spawned without fork handlers, posix_spawn or vfork, that inherits
 * the descriptor and reads it while the parent does is not seen: such a
 * pair reads from one offset at random without augur too.)
 */
AUGUR_HIDDEN uint64_t augur_tee_enter(int fd)
{
	struct tee *t = tee_of(fd);
	if (!t)
		return 0;
	uint32_t before = __atomic_fetch_add(&t->inflight, 1, __ATOMIC_ACQ_REL);
	uint64_t s = __atomic_add_fetch(&t->starts, 1, __ATOMIC_ACQ_REL);
	return s << 1 | (before == 0);
}

/* augur_tee_leave tees the n bytes fd's read put in iov (cnt buffers),
 * read at off (-1: at the descriptor's offset, which the read moved past
 * them). Bytes before what the tee holds are read again and change
 * nothing; bytes past it, or past the size at open, end the tee. */
AUGUR_HIDDEN void augur_tee_leave(int fd, uint64_t token, off_t off, const struct iovec *iov, int cnt, ssize_t n)
{
	struct tee *t = tee_of(fd);
	if (!token || !t)
		return; /* it ended meanwhile, its counters with it */
	AUGUR_ERRNO_SAVE;
	int placed = off >= 0;
	if (!placed && n > 0) {
		off_t end = lseek(fd, 0, SEEK_CUR);
		placed = (token & 1) && end >= (off_t)n &&
			 __atomic_load_n(&t->starts, __ATOMIC_ACQUIRE) == token >> 1;
		off = end - (off_t)n;
	}
	__atomic_fetch_sub(&t->inflight, 1, __ATOMIC_ACQ_REL);
	if (n > 0 && (t = locked(fd))) {
		int ok = placed && (uint64_t)off <= t->next && (uint64_t)off + (uint64_t)n <= t->size;
		if (ok && (uint64_t)off + (uint64_t)n > t->next) {
			/* The whole read at its place: what it repeats of the
			 * tee is the same bytes. */
			struct iovec v[64];
			int k = cnt < 64 ? cnt : 64;
			size_t left = (size_t)n;
			for (int i = 0; i < k; i++) {
				v[i] = iov[i];
				if (v[i].iov_len > left)
					v[i].iov_len = left;
				left -= v[i].iov_len;
			}
			ok = left == 0 && pwritev(t->fd, v, k, off) == n;
			if (ok)
				t->next = (uint64_t)off + (uint64_t)n;
		}
		if (!ok)
			abandon(fd, t);
		else if (t->next == t->size)
			complete(fd, t);
		unlock(t);
	}
	AUGUR_ERRNO_RESTORE;
}

/* augur_tee_stop abandons fd's tee: a read through a call that does not
 * tee (sendfile, copy_file_range) left a gap in it. */
AUGUR_HIDDEN void augur_tee_stop(int fd)
{
	struct tee *t = locked(fd);
	if (!t)
		return;
	AUGUR_ERRNO_SAVE;
	abandon(fd, t);
	unlock(t);
	AUGUR_ERRNO_RESTORE;
}

/* augur_tee_closed lets fd go of its tee, before the real close; the
 * last descriptor's close, short of the whole file, abandons it. */
AUGUR_HIDDEN void augur_tee_closed(int fd)
{
	struct tee *t = locked(fd);
	if (!t)
		return;
	AUGUR_ERRNO_SAVE;
	if (t->nfds == 1) {
		abandon(fd, t);
	} else {
		for (int i = 0; i < t->nfds; i++)
			if (t->fds[i] == fd)
				t->fds[i] = t->fds[--t->nfds];
		augur_fdtab[fd].slot = 0;
	}
	unlock(t);
	AUGUR_ERRNO_RESTORE;
}

/* augur_tee_dup has newfd, a duplicate of oldfd (one open file, one
 * offset), share oldfd's tee: CPython's mmap maps a duplicate. Returns
 * the slot for newfd's fdtab entry, 0 if it does not tee (more
 * duplicates than a tee keeps: the tee is abandoned). */
AUGUR_HIDDEN int augur_tee_dup(int oldfd, int newfd)
{
	struct tee *t = locked(oldfd);
	if (!t)
		return 0;
	AUGUR_ERRNO_SAVE;
	int slot = 0;
	if (newfd < FD_MAX && t->nfds < TEE_FDS) {
		t->fds[t->nfds++] = newfd;
		slot = (int)(t - tees) + 1;
	} else {
		abandon(oldfd, t);
	}
	unlock(t);
	AUGUR_ERRNO_RESTORE;
	return slot;
}

/*
 * augur_tee_map reads the rest of fd's file into its tee, hands the tee to
 * the leader, and returns a descriptor of the tee file for the caller to
 * map at the same offset and close; -1 if fd does not tee, or the
 * tee failed (it is then abandoned, and the original is mapped). map is
 * the caller's mapping of the original, of len bytes from off (within
 * the file's pages, or nothing is done): one of the whole file is where
 * the rest is read from, so that the client fetches
 * it as the mapping's faults would (its read-ahead, requests in flight
 * together; one pread of a file without a page cache took 2.5 ms where
 * the faults took 1.9, make bench's R1). Otherwise pread on fd (its offset
 * does not move), in requests of up to TEE_MAP_BUF.
 */
AUGUR_HIDDEN int augur_tee_map(int fd, const void *map, off_t off, size_t len)
{
	struct tee *t = locked(fd);
	if (!t)
		return -1;
	uint64_t page = (uint64_t)getpagesize();
	if (off < 0 || (uint64_t)off + len > (t->size + page - 1) / page * page) {
		/* Past the file's last page a mapping of the original faults
		 * (SIGBUS), one of the tee would find its header: keep it. */
		unlock(t);
		return -1;
	}
	AUGUR_ERRNO_SAVE;
	int ok = 1;
	if (off == 0 && len >= t->size) {
		/* A fault past a shrunk file's end is EFAULT here, not SIGBUS. */
		while (ok && t->next < t->size) {
			ssize_t w = pwrite(t->fd, (const char *)map + t->next, t->size - t->next,
					   (off_t)t->next);
			ok = w > 0;
			if (ok)
				t->next += (uint64_t)w;
		}
	} else {
		size_t cap = t->size - t->next < TEE_MAP_BUF ? t->size - t->next : TEE_MAP_BUF;
		char *buf = malloc(cap ? cap : 1);
		ok = buf != NULL;
		while (ok && t->next < t->size) {
			size_t want = t->size - t->next < cap ? t->size - t->next : cap;
			ssize_t r = REAL(pread64) ? augur_real.pread64(fd, buf, want, (off64_t)t->next) : -1;
			if (r < 0 && errno == EINTR)
				continue;
			ok = r > 0 && pwrite(t->fd, buf, (size_t)r, (off_t)t->next) == r;
			if (ok)
				t->next += (uint64_t)r;
		}
		free(buf);
	}
	int dup = ok ? augur_real.fcntl(t->fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (dup < 0)
		abandon(fd, t);
	else
		complete(fd, t);
	unlock(t);
	AUGUR_ERRNO_RESTORE;
	return dup;
}

/* augur_tee_before_fork abandons this process's tees: the child shares
 * their descriptors' offsets, and its reads would move them unseen. */
AUGUR_HIDDEN void augur_tee_before_fork(int hwm)
{
	for (int fd = 0; fd < hwm && fd < FD_MAX; fd++)
		if (augur_fdtab[fd].kind == FD_FILE && augur_fdtab[fd].slot)
			augur_tee_stop(fd);
}

/* augur_tee_after_fork forgets, in a forked child, its parent's tees
 * (abandoned before the fork): it closes its copies of their files. */
AUGUR_HIDDEN void augur_tee_after_fork(int hwm)
{
	for (int fd = 0; fd < hwm && fd < FD_MAX; fd++)
		if (augur_fdtab[fd].kind == FD_FILE)
			augur_fdtab[fd].slot = 0;
	for (int i = 0; i < TEE_SLOTS; i++) {
		if (tees[i].used && tees[i].fd >= 0)
			augur_real.close(tees[i].fd);
		tees[i] = (struct tee){0};
	}
}
