/*
 * serve.c — which file a dataset open gets. A read-only open is served
 * from the fastest tier holding a copy the user may trust, after waiting
 * for a copy in flight or asking for one (waits.c), else from the
 * original, whose reads may make the copy (tee.c); a write open registers
 * the writer and drops the copies first (writers.c, invalidate.c). A
 * descriptor of an original moves to the copy published later (migrate),
 * and a descriptor served from a copy can name its original (source_of,
 * source_ident).
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

static int is_write_open(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY ||
	       (flags & (O_TRUNC | O_CREAT | O_APPEND)) ||
	       (flags & O_TMPFILE) == O_TMPFILE;
}

/* leader_ready says whether the tiers of this job have been validated:
 * until then no copy is served. */
static int leader_ready(void)
{
	return augur_st.seg && __atomic_load_n(&augur_st.seg->leader.ready, __ATOMIC_ACQUIRE);
}

/* owned_fd says whether fd is of kind (S_IFREG, S_IFDIR), this user's,
 * and not writable by group or others. */
AUGUR_HIDDEN int augur_owned_fd(int fd, mode_t kind, struct stat *sb)
{
	return REAL(fstat) && augur_real.fstat(fd, sb) == 0 && (sb->st_mode & S_IFMT) == kind &&
	       sb->st_uid == augur_st.euid && !(sb->st_mode & 022);
}

/*
 * trusted_copy says whether the copy open on fd, in a tier that is not
 * sealed, may be served: a regular file this user owns and no one else
 * may write. Anything else was not written there by augur for this user
 * (another user swapped the tier for one of theirs, say), and serving it
 * could feed the job someone else's bytes: it is refused with one
 * message, counted, and fd is closed.
 */
static int trusted_copy(int fd, int t, const char *abs)
{
	static int warned;
	struct stat sb = {0};
	if (augur_owned_fd(fd, S_IFREG, &sb))
		return 1;
	augur_real.close(fd);
	if (augur_st.seg)
		__atomic_fetch_add(&augur_st.seg->counters.untrusted, 1, __ATOMIC_RELAXED);
	char msg[PATH_MAX + 160];
	snprintf(msg, sizeof(msg), "tier %s: the copy of %s is owned by uid %u, mode %04o, not by you (uid %u) alone: not served",
		 augur_st.tiers[t], abs, (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777), (unsigned)augur_st.euid);
	augur_warn_once(&warned, msg);
	return 0;
}

AUGUR_HIDDEN int augur_trusted(int fd, int t, const char *abs)
{
	return augur_st.sealed[t] || trusted_copy(fd, t, abs);
}

/* fresh_copy compares the copy open on fd with its source, for
 * revalidate = 0: a copy whose source has another size or mtime (a writer
 * outside the job) is closed and dropped, and the original serves. */
static int fresh_copy(int fd, const char *abs)
{
	struct stat c, s;
	int r;
	__atomic_fetch_add(&augur_st.seg->counters.revalidated, 1, __ATOMIC_RELAXED);
	while ((r = stat(abs, &s)) != 0 && errno == EINTR) /* a signal during a slow metadata request */
		;
	if (r == 0 && augur_real.fstat(fd, &c) == 0 && c.st_size == s.st_size &&
	    c.st_mtim.tv_sec == s.st_mtim.tv_sec && c.st_mtim.tv_nsec == s.st_mtim.tv_nsec)
		return 1;
	augur_real.close(fd);
	augur_invalidate_abs(abs);
	return 0;
}

/* tiers_to_try is the set of tiers (bit t) whose copy of the file keyed
 * key an open tries: every tier whose presence filter the leader keeps
 * and says may hold one, and every tier whose filter it does not keep
 * (struct augur_present). */
static unsigned tiers_to_try(uint64_t key)
{
	unsigned all = (1u << augur_st.ntiers) - 1;
	if (!augur_st.seg)
		return all;
	struct augur_present *p = &augur_st.seg->present;
	unsigned kept = __atomic_load_n(&p->kept, __ATOMIC_ACQUIRE);
	unsigned bits = __atomic_load_n(&p->words[augur_present_word(key)], __ATOMIC_ACQUIRE) >> augur_present_shift(key);
	return (bits | ~kept) & all;
}

/* open_copy tries the tiers of try (bit t: tier t; tiers_to_try) for
 * the copy of the dataset file name, fastest first. Returns the fd of a
 * copy and sets *tier, or -1 when no tier has one (errno is then
 * irrelevant). */
static int open_copy(const struct augur_name *name, unsigned try, int flags, int *tier)
{
	const char *abs = name->abs;
	char tp[PATH_MAX];
	/* A copy is never a symlink: O_NOFOLLOW opens nothing else. */
	int tflags = (flags & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_NOFOLLOW;
	for (; try; try &= try - 1) {
		int t = __builtin_ctz(try);
		if (augur_tier_path(t, name, tp, sizeof(tp)) < 0)
			continue;
		int fd = CALL_REAL(openat, -1, AT_FDCWD, tp, tflags, 0);
		/* tmpfs refuses O_DIRECT: the copy is still the right bytes
		 * without it. */
		if (fd < 0 && errno == EINVAL && (tflags & O_DIRECT))
			fd = CALL_REAL(openat, -1, AT_FDCWD, tp, tflags & ~O_DIRECT, 0);
		if (fd >= 0 && augur_trusted(fd, t, abs)) {
			if (augur_st.every_open && !fresh_copy(fd, abs))
				return -1; /* every tier's copy was as stale, and is gone */
			*tier = t;
			return fd;
		}
		if (fd < 0 && errno != ENOENT && errno != ENOTDIR && augur_st.seg)
			__atomic_fetch_add(&augur_st.seg->counters.tier_errors, 1, __ATOMIC_RELAXED);
	}
	return -1;
}

/* plain_source says whether the source of name's copy in the fastest tier
 * holding one is known not to be a symlink: the publisher marks copies of
 * symlinks with user.augur.link. It asks by path, so it opens nothing.
 * Without xattrs nothing is known. */
static int plain_source(const struct augur_name *name, uint64_t key)
{
	char tp[PATH_MAX], v;
	for (unsigned try = tiers_to_try(key); try; try &= try - 1) {
		if (augur_tier_path(__builtin_ctz(try), name, tp, sizeof(tp)) < 0)
			continue;
		if (getxattr(tp, "user.augur.link", &v, 1) >= 0)
			return 0;
		if (errno == ENODATA)
			return 1;
		if (errno != ENOENT)
			return 0;
	}
	return 0;
}

/* held says whether a process of the job may be writing the file keyed
 * key: it is then served from the original (counted). */
static int held(uint64_t key)
{
	if (!augur_write_held(key))
		return 0;
	__atomic_fetch_add(&augur_st.seg->counters.held_opens, 1, __ATOMIC_RELAXED);
	return 1;
}

/* checked_lately says whether the copy of the file keyed key was
 * compared with its source less than an interval ago (struct
 * augur_checked): a slot being written, or another file's, says no. */
static int checked_lately(struct augur_segment *seg, uint64_t key)
{
	uint64_t trust = __atomic_load_n(&seg->leader.checked_trust, __ATOMIC_RELAXED);
	struct augur_checked *c = &seg->checked[key & (AUGUR_CHECKED_SLOTS - 1)];
	uint64_t seq = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
	uint64_t k = __atomic_load_n(&c->key, __ATOMIC_RELAXED), e = __atomic_load_n(&c->epoch, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return trust && !(seq & 1) && __atomic_load_n(&c->seq, __ATOMIC_RELAXED) == seq && k == key &&
	       __atomic_load_n(&seg->leader.checked_epoch, __ATOMIC_RELAXED) - e < trust;
}

/* wanted says whether the leader reads the event of an open served from
 * tier (-1: the original) of the file keyed key (want_opens). */
static int wanted(struct augur_segment *seg, int tier, uint64_t key)
{
	uint64_t want = __atomic_load_n(&seg->leader.want_opens, __ATOMIC_RELAXED);
	if (want & (tier >= 0 ? AUGUR_WANT_SERVED : AUGUR_WANT_ORIGINAL))
		return 1;
	return tier >= 0 && (want & AUGUR_WANT_DUE) && !checked_lately(seg, key);
}

/* opened records a read-only open of a dataset file served from tier
 * (-1: the original), keyed key, which tees if tee (augur_tee_begin's):
 * descriptor table, counters, and the event if the leader reads it
 * (wanted) or the reader tees. */
static void opened(int fd, int tier, const char *abs, size_t len, uint64_t key, int tee)
{
	augur_fd_track_file(fd, tier, abs, len);
	if (fd < FD_MAX)
		augur_fdtab[fd].slot = (uint16_t)tee;
	struct augur_segment *seg = augur_st.seg;
	if (!seg)
		return;
	__atomic_fetch_add(tier >= 0 ? &seg->counters.hits[tier] : &seg->counters.misses, 1, __ATOMIC_RELAXED);
	if (tee || wanted(seg, tier, key))
		augur_emit_n(AUGUR_EV_OPEN, tier, fd, 0, abs, len, tee ? AUGUR_EVF_TEE : 0);
}

/* open_read is augur_open for a read-only open of the dataset file name:
 * a trusted copy if a tier holds one, after waiting for one in flight or
 * asking for one, else the original, whose reads may make the copy. The
 * path is keyed once here, for every table the open asks. */
static int open_read(int dirfd, const char *path, int flags, mode_t mode, const struct augur_name *name)
{
	AUGUR_ERRNO_SAVE;
	const char *abs = name->abs;
	size_t len = name->len;
	uint64_t key = augur_path_key(abs, len);
	int tier = -1;
	/* O_NOATIME fails with EPERM unless the caller owns the source (the
	 * copy's owner is the tier's writer): only the original can tell.
	 * O_NOFOLLOW must fail on a symlinked source: the copy says whether
	 * it stands for one. */
	int serve = leader_ready() && !(flags & O_NOATIME) &&
		    (!(flags & O_NOFOLLOW) || plain_source(name, key)) && !held(key);
	/* Only a leader that copies makes a copy to wait for, or keeps a tee. */
	int copying = serve && __atomic_load_n(&augur_st.seg->leader.copying, __ATOMIC_ACQUIRE);
	unsigned try = serve ? tiers_to_try(key) : 0;
	int fd = try ? open_copy(name, try, flags & ~O_NOFOLLOW, &tier) : -1;
	if (fd < 0 && copying && (augur_wait_pending(key) || augur_request_copy(abs, len, key)))
		fd = open_copy(name, tiers_to_try(key), flags & ~O_NOFOLLOW, &tier);
	if (fd < 0) {
		AUGUR_ERRNO_RESTORE;
		fd = CALL_REAL(openat, -1, dirfd, path, flags, mode);
		if (fd < 0)
			return fd; /* with the original's errno */
	}
	/* No copy, none made for this reader: its reads may make it
	 * (tee.c). */
	int tee = copying && tier < 0 ? augur_tee_begin(fd, abs, len, key) : 0;
	opened(fd, tier, abs, len, key, tee);
	AUGUR_ERRNO_RESTORE;
	return fd;
}

/* open_write is augur_open for a write open. A dataset path's writer is
 * registered before the real open and its copies dropped after: a copy a
 * reader may open from then on, or the leader may publish, is none. Any
 * writer is then matched by its file (writers.c). */
static int open_write(int dirfd, const char *path, int flags, mode_t mode, int cls, const char *abs)
{
	int w = -1;
	int named = (flags & O_TMPFILE) != O_TMPFILE;
	if (cls == AUGUR_PATH_FILE && named) {
		AUGUR_ERRNO_SAVE;
		if (augur_st.seg)
			__atomic_fetch_add(&augur_st.seg->counters.write_opens, 1, __ATOMIC_RELAXED);
		w = augur_write_begin(abs);
		augur_invalidate_abs(abs);
		AUGUR_ERRNO_RESTORE;
	}
	int fd = CALL_REAL(openat, -1, dirfd, path, flags, mode);
	if (named && (w >= 0 || fd >= 0)) {
		AUGUR_ERRNO_SAVE;
		augur_write_opened(w, fd, cls == AUGUR_PATH_FILE ? abs : NULL);
		AUGUR_ERRNO_RESTORE;
	}
	return fd;
}

/* open_classified is augur_open for any open but a read-only one of a
 * path under no root, of class cls, named *name (cls -1: not classified
 * yet). */
static __attribute__((noinline)) int open_classified(int dirfd, const char *path, int flags, mode_t mode, int cls,
						     struct augur_name *name)
{
	char buf[PATH_MAX];
	augur_guard++;
	if (cls < 0)
		cls = augur_classify_n(dirfd, path, buf, name);
	const char *abs = name->abs;
	int fd;
	if (is_write_open(flags)) {
		fd = open_write(dirfd, path, flags, mode, cls, abs);
	} else if (cls == AUGUR_PATH_OTHER) {
		fd = CALL_REAL(openat, -1, dirfd, path, flags, mode);
	} else if (cls == AUGUR_PATH_ABOVE || (flags & (O_DIRECTORY | O_PATH))) {
		fd = CALL_REAL(openat, -1, dirfd, path, flags, mode);
		if (fd >= 0) {
			AUGUR_ERRNO_SAVE;
			augur_fd_track_dir(fd, abs);
			AUGUR_ERRNO_RESTORE;
		}
	} else {
		fd = open_read(dirfd, path, flags, mode, name);
	}
	augur_guard--;
	return fd;
}

AUGUR_HIDDEN int augur_open(int dirfd, const char *path, int flags, mode_t mode)
{
	struct augur_name name;
	int cls = augur_classify_normal(path, &name);
	if (cls == AUGUR_PATH_OTHER && !is_write_open(flags))
		return CALL_REAL(openat, -1, dirfd, path, flags, mode);
	return open_classified(dirfd, path, flags, mode, cls, &name);
}

AUGUR_HIDDEN int augur_write_prepare(int dirfd, const char *path, char *abs)
{
	int w = -1;
	AUGUR_ERRNO_SAVE;
	augur_guard++;
	if (augur_classify(dirfd, path, abs) == AUGUR_PATH_FILE && augur_st.seg) {
		if (augur_st.seg)
			__atomic_fetch_add(&augur_st.seg->counters.write_opens, 1, __ATOMIC_RELAXED);
		w = augur_write_begin(abs);
		augur_invalidate_abs(abs);
	}
	augur_guard--;
	AUGUR_ERRNO_RESTORE;
	return w;
}

AUGUR_HIDDEN int augur_is_dataset_file(int dirfd, const char *path)
{
	char abs[PATH_MAX];
	AUGUR_ERRNO_SAVE;
	augur_guard++;
	int cls = augur_classify(dirfd, path, abs);
	augur_guard--;
	AUGUR_ERRNO_RESTORE;
	return cls == AUGUR_PATH_FILE;
}

AUGUR_HIDDEN void augur_adopt(int fd, const char *path)
{
	char buf[PATH_MAX];
	if (fd < 0)
		return;
	AUGUR_ERRNO_SAVE;
	augur_guard++;
	struct augur_name name;
	if (augur_classify_n(AT_FDCWD, path, buf, &name) == AUGUR_PATH_FILE) {
		int tier = -1;
		uint64_t key = augur_path_key(name.abs, name.len);
		int copy = leader_ready() && !held(key) ? open_copy(&name, tiers_to_try(key), O_RDONLY | O_CLOEXEC, &tier) : -1;
		if (copy >= 0) {
			int cloexec = augur_real.fcntl(fd, F_GETFD) & FD_CLOEXEC;
			if (augur_real.dup3(copy, fd, cloexec ? O_CLOEXEC : 0) < 0)
				tier = -1;
			augur_real.close(copy);
		}
		opened(fd, tier, name.abs, name.len, key, 0);
	}
	augur_guard--;
	AUGUR_ERRNO_RESTORE;
}

/*
 * augur_migrate moves a descriptor opened on an original to the tier copy
 * published since, keeping its offset, status flags and close-on-exec
 * flag, so later reads and mappings come from the tier. It is called by
 * the read wrappers only when the publish generation changed since this
 * descriptor last looked, so its cost is paid once per publish.
 */
AUGUR_HIDDEN void augur_migrate(int fd)
{
	struct fd_entry *e = &augur_fdtab[fd];
	uint32_t gen = augur_publish_gen();
	if (e->gen == gen)
		return;
	e->gen = gen;
	const char *abs = __atomic_load_n(&augur_fdpath[fd], __ATOMIC_ACQUIRE);
	struct augur_name name = {.abs = abs, .len = abs ? strlen(abs) : 0, .root = -1};
	uint64_t key = abs ? augur_path_key(abs, name.len) : 0;
	if (!abs || !leader_ready() || augur_write_held(key))
		return;
	AUGUR_ERRNO_SAVE;
	augur_guard++;
	int tier = -1;
	int copy = open_copy(&name, tiers_to_try(key), O_RDONLY | O_CLOEXEC, &tier);
	if (copy >= 0) {
		off_t off = lseek(fd, 0, SEEK_CUR);
		int fl = augur_real.fcntl(fd, F_GETFL);
		int fdfl = augur_real.fcntl(fd, F_GETFD);
		if (off >= 0 && fl >= 0 && fdfl >= 0 && lseek(copy, off, SEEK_SET) == off &&
		    augur_real.fcntl(copy, F_SETFL, fl & (O_NONBLOCK | O_NOATIME)) >= 0 &&
		    augur_real.dup3(copy, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) == fd) {
			e->tier = (int8_t)tier;
			augur_fd_path(fd, NULL, 0);
			if (augur_st.seg)
				__atomic_fetch_add(&augur_st.seg->counters.migrated, 1, __ATOMIC_RELAXED);
		}
		augur_real.close(copy);
	}
	augur_guard--;
	AUGUR_ERRNO_RESTORE;
}

/*
 * augur_source_of turns the copy a descriptor was served from back into
 * its source path: the copy's path (from /proc) less "<tier>/files", less
 * the '@' of each directory (tiering.SourcePath). Only calls that must
 * reach the original through a descriptor (extended attributes, mode,
 * owner, the filesystem's statistics) ask, so nothing is kept per open.
 */
AUGUR_HIDDEN int augur_source_of(int fd, char *out)
{
	if (fd < 0 || fd >= FD_MAX || augur_fdtab[fd].kind != FD_FILE || augur_fdtab[fd].tier < 0)
		return 0;
	char link[64], cp[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, cp, sizeof(cp) - 1);
	if (n <= 0)
		return 0;
	cp[n] = 0;
	static const char deleted[] = " (deleted)"; /* the copy was dropped while open */
	if ((size_t)n > sizeof(deleted) - 1 && strcmp(cp + n - (sizeof(deleted) - 1), deleted) == 0)
		cp[n - (sizeof(deleted) - 1)] = 0;
	const char *t = augur_st.tiers[augur_fdtab[fd].tier];
	size_t tl = strlen(t);
	if (!tl || strncmp(cp, t, tl) != 0 || strncmp(cp + tl, "/files/", 7) != 0)
		return 0;
	size_t o = 0;
	for (const char *s = cp + tl + 6; *s; s++) { /* from the slash before the first component */
		if (*s == '@' && (s[1] == '/'))
			continue;
		out[o++] = *s;
	}
	out[o] = 0;
	return 1;
}

/*
 * augur_source_ident gives the device and inode of the original behind a
 * descriptor served from a tier, so that fstat of it names the same file
 * as stat of its path (cp, for one, refuses a file whose two differ). The
 * publisher records them on the copy as the xattr user.augur.src; a copy
 * without it (a filesystem without user xattrs) reports its own.
 */
AUGUR_HIDDEN int augur_source_ident(int fd, uint64_t *dev, uint64_t *ino)
{
	if (fd < 0 || fd >= FD_MAX || augur_fdtab[fd].kind != FD_FILE || augur_fdtab[fd].tier < 0)
		return 0;
	struct augur_src_ident id;
	AUGUR_ERRNO_SAVE;
	ssize_t n = CALL_REAL(fgetxattr, -1, fd, AUGUR_IDENT_XATTR, &id, sizeof(id));
	AUGUR_ERRNO_RESTORE;
	if (n < 16)
		return 0;
	*dev = id.dev;
	*ino = id.ino;
	return 1;
}
