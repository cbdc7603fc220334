/*
 * fdtable.c — the descriptor table: one entry per descriptor number below
 * FD_MAX, for the dataset files and the directories at or above a root
 * that a process of the job opened. dup*, F_DUPFD*, close, close_range,
 * fclose and closedir keep it right; the read wrappers test an entry's
 * kind inline, so an untracked descriptor costs them one load.
 */
#include "internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define DIR_SLOTS 64

/*
 * The descriptor table: one entry per fd number below FD_MAX. kind says
 * whether the fd is a dataset file (FD_FILE, tier tells where it was
 * served from) or a directory at or above a dataset root (FD_DIR, slot
 * names its path in dirs[]). Entries are set only after the real call has
 * returned the fd to us, and cleared before the real close.
 */
struct fd_entry augur_fdtab[FD_MAX];
/* The source path of each descriptor served from the original, so it can
 * move to a copy published later, and of each write descriptor (owned
 * here; freed when it moves or closes). */
char *augur_fdpath[FD_MAX];
struct augur_fd_big augur_fdbig[FD_MAX];
int augur_fd_hwm; /* highest fd ever tracked + 1 */

static struct {
	int used; /* 0 when free */
	char path[PATH_MAX];
} dirs[DIR_SLOTS];

AUGUR_HIDDEN void augur_fd_seen(int fd)
{
	if (fd >= __atomic_load_n(&augur_fd_hwm, __ATOMIC_RELAXED))
		__atomic_store_n(&augur_fd_hwm, fd + 1, __ATOMIC_RELAXED);
}

/* Descriptors' paths are kept in a buffer of the table's own where they
 * fit (a malloc at the open of an original and a free at its close cost
 * it some 230 instructions), else on the heap. */
#define FD_NAME 128
static char fd_names[FD_MAX][FD_NAME];

AUGUR_HIDDEN void augur_fd_drop_path(char *p)
{
	uintptr_t a = (uintptr_t)p, names = (uintptr_t)fd_names;
	if (a - names >= sizeof(fd_names))
		free(p);
}

/* augur_fd_path gives fd a copy of abs, of len bytes, as its path (NULL:
 * none) and drops the one it had. */
AUGUR_HIDDEN void augur_fd_path(int fd, const char *abs, size_t len)
{
	char *p = NULL;
	if (abs) {
		p = len < FD_NAME ? fd_names[fd] : malloc(len + 1);
		if (p)
			memcpy(p, abs, len + 1);
	}
	if (__atomic_load_n(&augur_fdpath[fd], __ATOMIC_RELAXED))
		augur_fd_drop_path(__atomic_exchange_n(&augur_fdpath[fd], p, __ATOMIC_ACQ_REL));
	else
		__atomic_store_n(&augur_fdpath[fd], p, __ATOMIC_RELEASE);
}

AUGUR_HIDDEN void augur_fd_track_file(int fd, int tier, const char *abs, size_t len)
{
	if (fd >= FD_MAX) {
		if (augur_st.seg)
			__atomic_fetch_add(&augur_st.seg->counters.untracked, 1, __ATOMIC_RELAXED);
		return;
	}
	if (augur_fdtab[fd].kind == FD_FILE && augur_fdtab[fd].slot)
		augur_tee_closed(fd); /* closed unseen (a raw system call) */
	/* An original's path, to move to its copy or read its blocks: only
	 * where the leader copies (a descriptor of a copy has none). */
	int keep = tier < 0 && augur_st.seg && __atomic_load_n(&augur_st.seg->leader.copying, __ATOMIC_RELAXED);
	if (keep || augur_fdpath[fd])
		augur_fd_path(fd, keep ? abs : NULL, len);
	augur_fdtab[fd] = (struct fd_entry){.kind = FD_FILE, .tier = (int8_t)tier, .gen = augur_publish_gen()};
	augur_fd_seen(fd);
}

static int dir_slot_get(const char *abs)
{
	for (int i = 0; i < DIR_SLOTS; i++) {
		int free_slot = 0;
		if (__atomic_compare_exchange_n(&dirs[i].used, &free_slot, 1, 0,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			strcpy(dirs[i].path, abs);
			return i;
		}
	}
	return -1;
}

AUGUR_HIDDEN void augur_fd_track_dir(int fd, const char *abs)
{
	if (fd >= FD_MAX)
		return;
	int slot = dir_slot_get(abs);
	if (slot < 0)
		return; /* untracked: openat relative to it passes through */
	augur_fdtab[fd] = (struct fd_entry){.kind = FD_DIR, .slot = (uint16_t)slot};
	augur_fd_seen(fd);
}

/* augur_fd_dir_path is the path of a directory descriptor the table
 * tracks, or NULL. */
AUGUR_HIDDEN const char *augur_fd_dir_path(int fd)
{
	if (fd < 0 || fd >= FD_MAX || augur_fdtab[fd].kind != FD_DIR)
		return NULL;
	return dirs[augur_fdtab[fd].slot].path;
}

/* augur_fd_after_fork forgets, in a forked child, the parent's byte
 * counts, so that a descriptor shared across fork is not counted twice
 * at close; it returns the table's high-water mark. */
AUGUR_HIDDEN int augur_fd_after_fork(void)
{
	int hwm = __atomic_load_n(&augur_fd_hwm, __ATOMIC_RELAXED);
	for (int fd = 0; fd < hwm; fd++)
		if (augur_fdtab[fd].kind == FD_FILE)
			augur_fdtab[fd].bytes = augur_fdtab[fd].flushed = 0;
	return hwm;
}

/* augur_fd_tier is the tier serving fd, or -1 (the original, or not a
 * dataset file). */
AUGUR_HIDDEN int augur_fd_tier(int fd)
{
	if (fd < 0 || fd >= FD_MAX || augur_fdtab[fd].kind != FD_FILE)
		return -1;
	return augur_fdtab[fd].tier;
}

/* fd_flush adds e's bytes not yet counted to the segment's counters, if
 * they are at least least bytes; one thread of several wins the race. */
static void fd_flush(struct fd_entry *e, uint64_t least)
{
	uint64_t b = __atomic_load_n(&e->bytes, __ATOMIC_RELAXED);
	uint64_t f = __atomic_load_n(&e->flushed, __ATOMIC_RELAXED);
	if (b - f >= least && b != f && augur_st.seg &&
	    __atomic_compare_exchange_n(&e->flushed, &f, b, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		__atomic_fetch_add(&augur_st.seg->counters.bytes[e->tier >= 0 ? e->tier : AUGUR_MAX_TIERS], b - f,
				   __ATOMIC_RELAXED);
}

AUGUR_HIDDEN void augur_fd_account(int fd, ssize_t n)
{
	if (augur_fd_tracked(fd))
		augur_fd_count(fd, n);
}

AUGUR_HIDDEN void augur_fd_flush(int fd) { fd_flush(&augur_fdtab[fd], AUGUR_FLUSH_BYTES); }

/* fd_flush_at_exit adds, when the process exits, the bytes its open
 * descriptors read since their last flush: a program that exits holding
 * its files (a DataLoader worker's h5py handles) is counted whole. One
 * that leaves by _exit is counted to within FLUSH_BYTES a descriptor. */
__attribute__((destructor)) static void fd_flush_at_exit(void)
{
	int hwm = __atomic_load_n(&augur_fd_hwm, __ATOMIC_RELAXED);
	for (int fd = 0; fd < hwm && augur_st.seg; fd++)
		if (augur_fdtab[fd].kind == FD_FILE)
			fd_flush(&augur_fdtab[fd], 0);
}

/* fd_forget clears an entry (and its directory slot and path) without
 * reporting a close. */
static void fd_forget(int fd)
{
	if (fd < 0 || fd >= FD_MAX || augur_fdtab[fd].kind == FD_NONE)
		return;
	if (augur_fdtab[fd].kind == FD_DIR)
		__atomic_store_n(&dirs[augur_fdtab[fd].slot].used, 0, __ATOMIC_RELEASE);
	augur_fdtab[fd] = (struct fd_entry){0};
	augur_fd_path(fd, NULL, 0);
}

/* file_closed reports the close of a dataset file's descriptor: the bytes
 * read through it not counted yet, and the event where the leader reads
 * closes; and clears its entry. */
static void file_closed(int fd)
{
	struct fd_entry *e = &augur_fdtab[fd];
	if (e->slot && !augur_vforked())
		augur_tee_closed(fd);
	int tier = e->tier;
	uint64_t bytes = e->bytes, unflushed = e->bytes - e->flushed;
	*e = (struct fd_entry){0};
	if (augur_fdpath[fd])
		augur_fd_path(fd, NULL, 0);
	struct augur_segment *seg = augur_st.seg;
	if (!seg)
		return;
	AUGUR_ERRNO_SAVE;
	__atomic_fetch_add(&seg->counters.bytes[tier >= 0 ? tier : AUGUR_MAX_TIERS], unflushed, __ATOMIC_RELAXED);
	if (__atomic_load_n(&seg->leader.want_closes, __ATOMIC_RELAXED))
		augur_emit_n(AUGUR_EV_CLOSE, tier, fd, bytes, "", 0, 0);
	AUGUR_ERRNO_RESTORE;
}

/* augur_fd_closed reports a tracked file's close and clears its entry.
 * Call it before the real close, so a concurrent open that gets the same
 * number is never cleared by mistake. */
AUGUR_HIDDEN void augur_fd_closed(int fd)
{
	if (fd < 0 || fd >= FD_MAX || augur_fdtab[fd].kind == FD_NONE)
		return;
	if (augur_fdtab[fd].kind == FD_FILE) {
		file_closed(fd);
		return;
	}
	struct fd_entry e = augur_fdtab[fd];
	if (e.kind == FD_WRITE) {
		if (augur_vforked())
			return;
		char *abs = __atomic_exchange_n(&augur_fdpath[fd], NULL, __ATOMIC_ACQ_REL);
		augur_fdtab[fd] = (struct fd_entry){0};
		AUGUR_ERRNO_SAVE;
		augur_guard++;
		augur_write_closed(e, abs);
		augur_guard--;
		AUGUR_ERRNO_RESTORE;
		augur_fd_drop_path(abs);
		return;
	}
	fd_forget(fd);
}

AUGUR_HIDDEN void augur_fd_closed_range(unsigned int first, unsigned int last)
{
	unsigned int hwm = (unsigned int)__atomic_load_n(&augur_fd_hwm, __ATOMIC_RELAXED);
	if (first >= hwm || augur_vforked())
		return;
	for (unsigned int fd = first; fd <= last && fd < hwm; fd++)
		augur_fd_closed((int)fd);
}

AUGUR_HIDDEN void augur_fd_dup(int oldfd, int newfd)
{
	if (newfd < 0 || newfd >= FD_MAX || oldfd < 0 || oldfd >= FD_MAX)
		return;
	struct fd_entry e = augur_fdtab[oldfd];
	if (e.kind == FD_FILE) {
		const char *abs = __atomic_load_n(&augur_fdpath[oldfd], __ATOMIC_ACQUIRE);
		augur_fd_track_file(newfd, e.tier, abs, abs ? strlen(abs) : 0);
		if (e.slot && !augur_vforked())
			augur_fdtab[newfd].slot = (uint16_t)augur_tee_dup(oldfd, newfd);
	} else if (e.kind == FD_WRITE && !augur_vforked()) {
		augur_write_dup(oldfd, newfd);
	} else if (e.kind == FD_DIR) {
		augur_fd_track_dir(newfd, dirs[e.slot].path);
	}
}

/*
 * augur_fd_at_end answers, without a request to the shared filesystem, a
 * read at or past the end of a file whose descriptor completed a tee
 * (tee.c sets the entry's end): the tee holds every byte the
 * file had at the descriptor's open, and the read would return 0 from the
 * copy the descriptor moves to once the leader publishes it, as one that
 * found the copy at open would. A client that keeps no page cache
 * otherwise sends that read to the server (a FUSE or NFS direct read: one
 * round trip more for every file read whole, by a reader that reads until
 * a read returns 0). Not once a writer of the job opened the file since
 * the tee began (its hold's gen moved), nor after a move to the copy.
 */
AUGUR_HIDDEN int augur_fd_at_end(int fd, off_t off)
{
	struct fd_entry *e = &augur_fdtab[fd];
	if (!e->end)
		return 0;
	int at = 0;
	const char *abs = __atomic_load_n(&augur_fdpath[fd], __ATOMIC_ACQUIRE);
	struct augur_hold *h = abs ? augur_hold(augur_key(abs)) : NULL;
	if (e->tier < 0 && off >= -1 && h && __atomic_load_n(&h->gen, __ATOMIC_SEQ_CST) == e->end_gen) {
		if (off == -1) {
			AUGUR_ERRNO_SAVE;
			off = lseek(fd, 0, SEEK_CUR);
			AUGUR_ERRNO_RESTORE;
		}
		at = off >= 0 && (uint64_t)off >= e->end;
	}
	/* Any other read goes to the file as it is now, and so does every
	 * read after it: the reader has left the tee's end, and what it
	 * reads next may be bytes written since. */
	if (!at)
		e->end = 0;
	return at;
}

