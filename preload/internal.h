/*
 * internal.h — what the preload's files share: the real libc symbols and
 * the one way to call them, the process's state, the descriptor table's
 * entry, and each file's functions for the others. Nothing here is seen by
 * Go except through segment.h and the augur_* functions the Go half
 * (libaugur/main.go) calls at start.
 */
#ifndef AUGUR_PRELOAD_INTERNAL_H
#define AUGUR_PRELOAD_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <limits.h>
#include <string.h>
#include <time.h>

#include "segment.h"

#define AUGUR_HIDDEN __attribute__((visibility("hidden")))
#define AUGUR_EXPORT __attribute__((visibility("default")))
#define AUGUR_TLS __thread __attribute__((tls_model("initial-exec")))

/*
 * The real libc functions, resolved once with dlsym(RTLD_NEXT) in the
 * constructor. A symbol that could not be resolved stays NULL and the
 * wrapper fails that call with ENOSYS instead of crashing the host.
 */
struct augur_real {
	int (*open)(const char *, int, ...);
	int (*open64)(const char *, int, ...);
	int (*openat)(int, const char *, int, ...);
	int (*openat64)(int, const char *, int, ...);
	int (*open_2)(const char *, int);
	int (*open64_2)(const char *, int);
	int (*openat_2)(int, const char *, int);
	int (*openat64_2)(int, const char *, int);
	FILE *(*fopen)(const char *, const char *);
	FILE *(*fopen64)(const char *, const char *);
	FILE *(*freopen)(const char *, const char *, FILE *);
	FILE *(*freopen64)(const char *, const char *, FILE *);
	FILE *(*fdopen)(int, const char *);
	int (*fclose)(FILE *);
	int (*closedir)(DIR *);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*read_chk)(int, void *, size_t, size_t);
	ssize_t (*pread)(int, void *, size_t, off_t);
	ssize_t (*pread64)(int, void *, size_t, off64_t);
	ssize_t (*pread64_chk)(int, void *, size_t, off64_t, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*preadv)(int, const struct iovec *, int, off_t);
	ssize_t (*preadv64)(int, const struct iovec *, int, off64_t);
	ssize_t (*preadv2)(int, const struct iovec *, int, off_t, int);
	ssize_t (*preadv64v2)(int, const struct iovec *, int, off64_t, int);
	size_t (*fread)(void *, size_t, size_t, FILE *);
	size_t (*fread_unlocked)(void *, size_t, size_t, FILE *);
	size_t (*fread_chk)(void *, size_t, size_t, size_t, FILE *);
	char *(*fgets)(char *, int, FILE *);
	ssize_t (*getline)(char **, size_t *, FILE *);
	ssize_t (*getdelim)(char **, size_t *, int, FILE *);
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	void *(*mmap64)(void *, size_t, int, int, int, off64_t);
	int (*munmap)(void *, size_t);
	int (*close)(int);
	int (*close_range)(unsigned int, unsigned int, int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	int (*fcntl64)(int, int, ...);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	ssize_t (*sendfile64)(int, int, off64_t *, size_t);
	ssize_t (*copy_file_range)(int, off64_t *, int, off64_t *, size_t, unsigned int);
	int (*truncate)(const char *, off_t);
	int (*truncate64)(const char *, off64_t);
	int (*unlink)(const char *);
	int (*unlinkat)(int, const char *, int);
	int (*rename)(const char *, const char *);
	int (*renameat)(int, const char *, int, const char *);
	int (*renameat2)(int, const char *, int, const char *, unsigned int);
	int (*remove)(const char *);
	int (*rmdir)(const char *);
	int (*link)(const char *, const char *);
	int (*linkat)(int, const char *, int, const char *, int);
	int (*symlink)(const char *, const char *);
	int (*symlinkat)(const char *, int, const char *);
	int (*fstat)(int, struct stat *);
	int (*fstat64)(int, struct stat64 *);
	int (*fxstat)(int, int, struct stat *);
	int (*fxstat64)(int, int, struct stat64 *);
	int (*fstatat)(int, const char *, struct stat *, int);
	int (*fstatat64)(int, const char *, struct stat64 *, int);
	int (*fxstatat)(int, int, const char *, struct stat *, int);
	int (*fxstatat64)(int, int, const char *, struct stat64 *, int);
	int (*statx)(int, const char *, int, unsigned int, struct statx *);
	ssize_t (*fgetxattr)(int, const char *, void *, size_t);
	ssize_t (*flistxattr)(int, char *, size_t);
	int (*fsetxattr)(int, const char *, const void *, size_t, int);
	int (*fremovexattr)(int, const char *);
	int (*fchmod)(int, mode_t);
	int (*fchown)(int, uid_t, gid_t);
	int (*fstatfs)(int, struct statfs *);
	int (*fstatfs64)(int, struct statfs64 *);
	int (*fstatvfs)(int, struct statvfs *);
	int (*fstatvfs64)(int, struct statvfs64 *);
};

AUGUR_HIDDEN extern struct augur_real augur_real;

/*
 * augur_resolve fills augur_real unless that is done. The constructor
 * calls it, but another preloaded library's constructor can run before
 * augur's (LD_PRELOAD=libaugur.so:libother.so runs libother's first) and
 * open, read or close then; every wrapper reaches the real symbol through
 * REAL, which resolves on first use.
 */
AUGUR_HIDDEN void augur_resolve(void);
#define REAL(fn) (augur_real.fn ? augur_real.fn : (augur_resolve(), augur_real.fn))

/* CALL_REAL(fn, fail, args...) is libc's fn(args), or, where libc has no
 * fn, fail with errno ENOSYS: the one way a wrapper or the core calls a
 * real symbol it may lack. (fn) is parenthesised so that a libc macro of
 * the same name (fread_unlocked) is not expanded. */
#define CALL_REAL(fn, fail, ...) (REAL(fn) ? (augur_real.fn)(__VA_ARGS__) : (errno = ENOSYS, (fail)))

/* The process's state (config.c). Written by Go, or from a live leader's
 * segment, at start (before cfg is set to AUGUR_CFG_ON, with release
 * order); read-only afterwards. */
enum { AUGUR_CFG_PENDING = 0, AUGUR_CFG_ON = 1, AUGUR_CFG_OFF = 2 };
struct augur_state {
	int cfg;
	pid_t pid; /* at load: a forked child keeps its parent's */
	int nroots;
	char roots[AUGUR_MAX_ROOTS][PATH_MAX];
	size_t rootlen[AUGUR_MAX_ROOTS];
	/* Per tier and root, the copies' paths up to the root's end:
	 * "<tier>/files/pfs@/imagenet@" (paths.c, augur_make_prefixes):
	 * most of a copy's path, made once. */
	char *prefix[AUGUR_MAX_TIERS][AUGUR_MAX_ROOTS];
	size_t prefixlen[AUGUR_MAX_TIERS][AUGUR_MAX_ROOTS];
	int ntiers;
	char tiers[AUGUR_MAX_TIERS][PATH_MAX]; /* "" for a tier not in use */
	size_t tierlen[AUGUR_MAX_TIERS];
	uint8_t sealed[AUGUR_MAX_TIERS];       /* see config.c's sealed() */
	int every_open; /* compare each copy with its source before serving it */
	uid_t euid; /* copies are served only if this user owns them */
	struct augur_segment *seg;
	char job[64];
};
AUGUR_HIDDEN extern struct augur_state augur_st;

/* augur_now_ns is CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t augur_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The job and its state in /dev/shm (job.c). */
AUGUR_HIDDEN void augur_make_job_id(void);
/* augur_map_segment maps the job's segment if a live leader has published
 * the configuration in it, or returns NULL. */
AUGUR_HIDDEN struct augur_segment *augur_map_segment(void);

/* Paths (paths.c). augur_classify turns (dirfd, path) into an absolute,
 * normal path in abs (PATH_MAX) and says what it is: a file inside a
 * dataset root, a root or a directory above one, or neither (abs is then
 * not set). augur_classify_n, for opens, copies nothing: it names the path
 * (struct augur_name), path itself or buf. augur_classify_normal is its
 * quick answer for a path already absolute and normal, -1 for any other. */
enum { AUGUR_PATH_OTHER = 0, AUGUR_PATH_FILE = 1, AUGUR_PATH_ABOVE = 2 };
/* A path as an open classified it: absolute and normal, its length, and
 * the root (augur_state's index) a dataset file lies under (-1: none
 * known). */
struct augur_name {
	const char *abs;
	size_t len;
	int root;
};
AUGUR_HIDDEN int augur_classify(int dirfd, const char *path, char *abs);
AUGUR_HIDDEN int augur_classify_n(int dirfd, const char *path, char *buf, struct augur_name *name);
AUGUR_HIDDEN int augur_classify_normal(const char *path, struct augur_name *name);
/* augur_classify_ns is augur_classify for the calls that change the
 * namespace: a relative path from a descriptor of a directory the table
 * does not know (opened before the job's roots were, or by a raw system
 * call) is resolved from the kernel's name of the directory. */
AUGUR_HIDDEN int augur_classify_ns(int dirfd, const char *path, char *abs);
/* augur_make_prefixes makes augur_state.prefix, once the roots and tiers
 * are added. */
AUGUR_HIDDEN void augur_make_prefixes(void);
/* augur_tier_path writes the copy's path in tier t of the dataset file
 * name to out; -1 if the tier is not in use or the path does not fit. */
AUGUR_HIDDEN int augur_tier_path(int t, const struct augur_name *name, char *out, size_t cap);

/* Per-thread guard: set while the shim itself calls libc, so re-entrant
 * calls pass straight through. */
AUGUR_HIDDEN extern AUGUR_TLS int augur_guard;

/* augur_active reports whether path-level interception is on for this
 * call: configured, not disabled, not re-entered. It may wait, once per
 * process, for the Go side to publish the configuration
 * (augur_active_wait, config.c). */
AUGUR_HIDDEN int augur_active_wait(void);
static inline int augur_active(void)
{
	if (augur_guard)
		return 0;
	int c = __atomic_load_n(&augur_st.cfg, __ATOMIC_ACQUIRE);
	if (c == AUGUR_CFG_ON)
		return augur_st.nroots > 0;
	return c != AUGUR_CFG_OFF && augur_active_wait();
}

/* augur_open is the single implementation behind every open-family
 * wrapper. has_mode says whether mode is meaningful (O_CREAT/O_TMPFILE). */
AUGUR_HIDDEN int augur_open(int dirfd, const char *path, int flags, mode_t mode);

/* augur_is_dataset_file says whether (dirfd, path) names a file inside a
 * dataset root. Call only when augur_active(). */
AUGUR_HIDDEN int augur_is_dataset_file(int dirfd, const char *path);

/* augur_adopt takes a descriptor that libc opened read-only on path and,
 * when path is a dataset file with a tier copy, swaps the copy in under
 * the same number (keeping FD_CLOEXEC) and tracks it. */
AUGUR_HIDDEN void augur_adopt(int fd, const char *path);

/* Changes of the namespace (invalidate.c), each made before the call:
 * augur_invalidate_path drops the copies of what (dirfd, path) names as
 * written (a name about to be given a new file: link, symlink);
 * augur_name_gone those of a name about to lose its file or, with
 * content, its bytes (unlink, rename, truncate), whatever other name
 * reaches the file; augur_dir_gone those under a directory about to be
 * renamed or removed; augur_invalidate_tree those under abs. */
AUGUR_HIDDEN void augur_invalidate_path(int dirfd, const char *path);
AUGUR_HIDDEN void augur_name_gone(int dirfd, const char *path, int content);
AUGUR_HIDDEN void augur_dir_gone(int dirfd, const char *path);
AUGUR_HIDDEN void augur_invalidate_tree(const char *abs);
AUGUR_HIDDEN void augur_remove_copies(const char *abs, const char *in);

/* The identity of a copy's source, which the publisher records on the
 * copy as the extended attribute AUGUR_IDENT_XATTR (tiering.IdentXattr):
 * little-endian words in this order. A copy made before the ctime was
 * recorded holds the first two alone. */
#define AUGUR_IDENT_XATTR "user.augur.src"
struct augur_src_ident {
	uint64_t dev, ino, size;
	int64_t mtime_sec, mtime_nsec;
	int64_t ctime_sec, ctime_nsec;
};

/* A tier's directory of subtrees taken out of service, which the leader
 * empties (tiering.TrashDir). */
#define AUGUR_TRASH_DIR "trash"
/* The source directory a subtree in the trash held, on its top
 * (tiering.TrashDirXattr). */
#define AUGUR_TRASH_XATTR "user.augur.dir"

/* augur_write_prepare is the part of a write open before the real call,
 * for opens that go through libc internally (fopen): when (dirfd, path)
 * is a dataset file it registers the writer, drops the copies, leaves the
 * file's path in abs (PATH_MAX) and returns the writer's slot for
 * augur_write_opened with the descriptor opened; otherwise -1. */
AUGUR_HIDDEN int augur_write_prepare(int dirfd, const char *path, char *abs);

/* Descriptor table (fdtable.c): one entry per descriptor number below
 * FD_MAX. The read wrappers test kind inline, so an untracked descriptor
 * costs them one load. */
#define FD_MAX 65536
enum { FD_NONE = 0, FD_FILE = 1, FD_DIR = 2, FD_WRITE = 3 };
struct fd_entry {
	uint8_t kind;
	int8_t tier;
	uint16_t slot; /* FD_DIR: its path in dirs[]; FD_WRITE: its registration;
			* FD_FILE: its tee + 1 (tee.c), 0: none */
	uint32_t gen;  /* publish_gen when a copy was last looked for */
	union {
		uint64_t bytes; /* FD_FILE: bytes read through it */
		uint64_t key;   /* FD_WRITE: its file's key in the writes table */
	};
	/* FD_FILE from its original: where its complete tee says the file
	 * ends (0: not known), while its hold's gen is end_gen (augur_fd_at_end). */
	uint64_t end;
	uint32_t end_gen;
	/* FD_FILE from its original: its large file's entry + 1 (struct
	 * augur_bfile; 0: none), found when the blocks' gen was bgen (its
	 * low bits): the read wrappers look again when it moves. */
	uint16_t big;
	uint16_t bgen;
	uint64_t flushed; /* FD_FILE: of bytes, those counted in the segment (augur_fd_account) */
};
AUGUR_HIDDEN extern struct fd_entry augur_fdtab[FD_MAX];
/* The path of each descriptor served from the original, or written
 * (FD_WRITE); owned by the table, dropped when the entry goes:
 * augur_fd_path sets it (a copy of abs, or NULL), augur_fd_drop_path
 * drops one taken from the table. A descriptor served from a tier has
 * none. */
AUGUR_HIDDEN extern char *augur_fdpath[FD_MAX];
AUGUR_HIDDEN void augur_fd_path(int fd, const char *abs, size_t len);
AUGUR_HIDDEN void augur_fd_drop_path(char *p);

/* A descriptor of a large file served from its blocks (blocks.c): its
 * entry's key, and where its last read ended and how many in a row
 * began where the one before ended (a stream). */
struct augur_fd_big {
	uint64_t key;
	uint64_t next;
	uint32_t seqs;
};
AUGUR_HIDDEN extern struct augur_fd_big augur_fdbig[FD_MAX];

static inline int augur_fd_tracked(int fd)
{
	return fd >= 0 && fd < FD_MAX && augur_fdtab[fd].kind == FD_FILE;
}

/* Descriptor table operations. */
AUGUR_HIDDEN extern int augur_fd_hwm; /* highest descriptor ever tracked + 1 */
AUGUR_HIDDEN void augur_fd_track_file(int fd, int tier, const char *abs, size_t len);
AUGUR_HIDDEN void augur_fd_track_dir(int fd, const char *abs);
AUGUR_HIDDEN const char *augur_fd_dir_path(int fd);
AUGUR_HIDDEN int augur_fd_after_fork(void);
AUGUR_HIDDEN void augur_migrate(int fd);
/* augur_fd_at_end says whether a read of fd at off (-1: its offset; below
 * -1: a call it does not apply to) is answered end of file without the
 * shared filesystem (fdtable.c). */
AUGUR_HIDDEN int augur_fd_at_end(int fd, off_t off);
#define AT_END_NEVER ((off_t)-2)
AUGUR_HIDDEN int augur_fd_tier(int fd);
AUGUR_HIDDEN void augur_fd_account(int fd, ssize_t n);

/* AUGUR_FLUSH_BYTES is how much a descriptor reads before its bytes are
 * added to the segment's counters (augur_fd_flush), rather than at its
 * close: a DataLoader worker exits holding its files open. */
#define AUGUR_FLUSH_BYTES (1ull << 20)
AUGUR_HIDDEN void augur_fd_flush(int fd);

/* augur_fd_count is augur_fd_account of a descriptor the table tracks
 * (augur_fd_tracked), inline for the read wrappers. */
static inline void augur_fd_count(int fd, ssize_t n)
{
	struct fd_entry *e = &augur_fdtab[fd];
	if (n > 0 && __atomic_add_fetch(&e->bytes, (uint64_t)n, __ATOMIC_RELAXED) -
			     __atomic_load_n(&e->flushed, __ATOMIC_RELAXED) >= AUGUR_FLUSH_BYTES)
		augur_fd_flush(fd);
}
AUGUR_HIDDEN void augur_fd_closed(int fd);
AUGUR_HIDDEN void augur_fd_closed_range(unsigned int first, unsigned int last);
AUGUR_HIDDEN void augur_fd_dup(int oldfd, int newfd);

/* augur_publish_gen is the leader's count of copies published. */
static inline uint32_t augur_publish_gen(void)
{
	return augur_st.seg ? (uint32_t)__atomic_load_n(&augur_st.seg->leader.publish_gen, __ATOMIC_ACQUIRE) : 0;
}

/* augur_fd_plain says whether a read of the tracked descriptor fd needs
 * only its bytes counted: it is served from a tier (a copy has no copy to
 * move to, no blocks, no tee, no end a tee knows), or it is an original's
 * that tees not, has no blocks nor an end its tee knows, and since it
 * last looked the leader published no copy and entered no large file
 * (augur_fd_before_read would do nothing). */
static inline int augur_fd_plain(int fd)
{
	struct fd_entry *e = &augur_fdtab[fd];
	struct augur_segment *seg = augur_st.seg;
	if (e->tier >= 0)
		return 1;
	if (e->slot || e->big || e->end)
		return 0;
	return !seg || (e->bgen == (uint16_t)__atomic_load_n(&seg->blocks.gen, __ATOMIC_ACQUIRE) &&
			e->gen == (uint32_t)__atomic_load_n(&seg->leader.publish_gen, __ATOMIC_ACQUIRE));
}

/* augur_fd_seen raises the highest descriptor number tracked. */
AUGUR_HIDDEN void augur_fd_seen(int fd);

/* This process's pid, kept without a system call (intercept.c). */
AUGUR_HIDDEN pid_t augur_self_pid(void);
AUGUR_HIDDEN int augur_vforked(void);

/* augur_key is the key of the dataset file abs in the segment's tables
 * (augur_path_key). */
static inline uint64_t augur_key(const char *abs) { return augur_path_key(abs, strlen(abs)); }

/* augur_invalidate_abs drops every tier copy of the dataset file abs and
 * tells the leader (invalidate.c). */
AUGUR_HIDDEN void augur_invalidate_abs(const char *abs);

/* Waits for a copy (waits.c): one in flight, one asked for; a change
 * waiting for a publication under way. The first two report whether they
 * waited (look for the copy again). */
AUGUR_HIDDEN int augur_wait_pending(uint64_t key);
AUGUR_HIDDEN int augur_request_copy(const char *abs, size_t len, uint64_t key);
AUGUR_HIDDEN void augur_await_publishers(const char *abs);
AUGUR_HIDDEN void augur_await_all_publishers(void);
/* augur_futex_wait sleeps while *w is v, at most ns (a futex shared
 * between processes). */
AUGUR_HIDDEN void augur_futex_wait(uint32_t *w, uint32_t v, uint64_t ns);

/* augur_owned_fd says whether fd is of kind (S_IFREG, S_IFDIR), this
 * user's, and not writable by group or others (serve.c). */
AUGUR_HIDDEN int augur_owned_fd(int fd, mode_t kind, struct stat *sb);

/* Writers inside the job (writers.c). */
AUGUR_HIDDEN int augur_write_begin(const char *abs);
AUGUR_HIDDEN void augur_write_opened(int slot, int fd, const char *abs);
/* augur_ident_changed marks stale the copy of the file (dev, ino) if
 * ident[] holds one under another key than own (a change made through
 * another name); augur_ident_forget drops the entry of a copy removed. */
AUGUR_HIDDEN void augur_ident_changed(uint64_t dev, uint64_t ino, uint64_t own);
AUGUR_HIDDEN void augur_ident_forget(uint64_t dev, uint64_t ino, uint64_t key);
AUGUR_HIDDEN void augur_write_closed(struct fd_entry e, const char *abs);
AUGUR_HIDDEN void augur_write_dup(int oldfd, int newfd);
AUGUR_HIDDEN void augur_write_mapped(int fd, void *addr, size_t len);
AUGUR_HIDDEN void augur_write_unmapped(void *addr, size_t len);
AUGUR_HIDDEN void augur_write_after_fork(pid_t parent, int hwm);
AUGUR_HIDDEN void augur_write_adopt(void);
AUGUR_HIDDEN int augur_write_held(uint64_t key);
AUGUR_HIDDEN void augur_bump_gen(const char *abs);
/* augur_emit appends an event to the ring (flags: AUGUR_EVF_*); 0 if it
 * was dropped (no segment, or the ring is full). augur_emit_n is it for
 * a path of len bytes. */
AUGUR_HIDDEN int augur_emit_n(uint32_t kind, int tier, int fd, uint64_t bytes, const char *abs, size_t len,
			      uint16_t flags);
static inline int augur_emit(uint32_t kind, int tier, int fd, uint64_t bytes, const char *abs, uint16_t flags)
{
	return augur_emit_n(kind, tier, fd, bytes, abs, strlen(abs), flags);
}

/* augur_tee_path writes the path of tee n of process pid (struct
 * augur_tee_header) to out; -1 if it does not fit. */
AUGUR_HIDDEN int augur_tee_path(pid_t pid, uint64_t n, char *out, size_t cap);
/* augur_tee_pool_path writes the path of the pool's file in slot k
 * (struct augur_leader.tee_pool). */
AUGUR_HIDDEN int augur_tee_pool_path(int k, char *out, size_t cap);

/* blocks.c: large files, served range by range from their blocks.
 * augur_big_look marks fd, open on the original abs, as one served from
 * its large file's blocks when the leader tiers that very file (device,
 * inode, size) in blocks; the read wrappers then read through
 * augur_big_readv (off -1: at the descriptor's offset). augur_big_map is
 * the descriptor of a blocks file holding every page of [off, off+len),
 * to map in the original's stead, or -1. augur_big_invalidate takes the
 * blocks of abs out of service, before a change of the file. */
AUGUR_HIDDEN void augur_big_look(int fd, const char *abs);
AUGUR_HIDDEN ssize_t augur_big_readv(int fd, const struct iovec *iov, int cnt, off_t off);
AUGUR_HIDDEN ssize_t augur_big_read(int fd, void *buf, size_t count, off_t off);
AUGUR_HIDDEN ssize_t augur_big_copy(int in, off64_t *inoff, int out, off64_t *outoff, size_t count);
AUGUR_HIDDEN int augur_big_map(int fd, off_t off, size_t len);
AUGUR_HIDDEN void augur_big_invalidate(const char *abs);

/* augur_fd_before_read lets a descriptor of an original find its large
 * file's blocks, entered since it last looked, or move to a copy
 * published since. Two loads and compares otherwise, inline for the read
 * wrappers. A descriptor that tees makes its file's copy, and a large
 * file has none: there is none to move to. */
static inline void augur_fd_before_read(int fd)
{
	if (fd < 0 || fd >= FD_MAX || augur_fdtab[fd].kind != FD_FILE || augur_fdtab[fd].tier >= 0)
		return;
	struct fd_entry *e = &augur_fdtab[fd];
	struct augur_segment *seg = augur_st.seg;
	if (seg && e->bgen != (uint16_t)__atomic_load_n(&seg->blocks.gen, __ATOMIC_ACQUIRE))
		augur_big_look(fd, __atomic_load_n(&augur_fdpath[fd], __ATOMIC_ACQUIRE));
	if (!e->slot && !e->big && e->gen != augur_publish_gen())
		augur_migrate(fd);
}
AUGUR_HIDDEN int augur_tier_path_in(int t, const char *dir, const char *abs, char *out, size_t cap);
/* augur_trusted says whether the tier file open as fd, in tier t, may be
 * served for abs (serve.c); it closes fd when not. */
AUGUR_HIDDEN int augur_trusted(int fd, int t, const char *abs);

/* tee.c: a first read that makes the copy. */
AUGUR_HIDDEN int augur_tee_begin(int fd, const char *abs, size_t len, uint64_t key);
AUGUR_HIDDEN uint64_t augur_tee_enter(int fd);
AUGUR_HIDDEN void augur_tee_leave(int fd, uint64_t token, off_t off, const struct iovec *iov, int cnt, ssize_t n);
AUGUR_HIDDEN void augur_tee_stop(int fd);
AUGUR_HIDDEN void augur_tee_closed(int fd);
AUGUR_HIDDEN int augur_tee_dup(int oldfd, int newfd);
AUGUR_HIDDEN int augur_tee_map(int fd, const void *map, off_t off, size_t len);
AUGUR_HIDDEN void augur_tee_before_fork(int hwm);
AUGUR_HIDDEN void augur_tee_after_fork(int hwm);

/* augur_hold is the writes table's entry of the files keyed key
 * (struct augur_hold), or NULL without a segment. */
AUGUR_HIDDEN struct augur_hold *augur_hold(uint64_t key);

/* augur_source_of writes into out (PATH_MAX) the source path of a
 * descriptor served from a tier, and reports whether fd is one. */
AUGUR_HIDDEN int augur_source_of(int fd, char *out);

/* The original's identity behind a tier descriptor (serve.c). */
AUGUR_HIDDEN int augur_source_ident(int fd, uint64_t *dev, uint64_t *ino);

/* One message on stderr, once per key, for internal failures. */
AUGUR_HIDDEN void augur_warn_once(int *once, const char *msg);

/* The calls of the Go half, libaugur-go.so (libaugur/main.go), which
 * configures the data plane when no leader has published the job's
 * configuration; exported for it. */
AUGUR_EXPORT const char *augur_job(void);
AUGUR_EXPORT int augur_disabled(void);
AUGUR_EXPORT int augur_add_root(const char *path);
AUGUR_EXPORT int augur_add_tier(const char *path);
AUGUR_EXPORT void augur_set_segment(struct augur_segment *seg);
AUGUR_EXPORT void augur_start(int on);
AUGUR_EXPORT void augur_set_every_open(int on);

#define AUGUR_ERRNO_SAVE int saved_errno_ = errno
#define AUGUR_ERRNO_RESTORE errno = saved_errno_

#endif
