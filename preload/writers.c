/*
 * writers.c — writers inside the job. A copy of a dataset file
 * must never be served while the file can change under it, so every
 * descriptor through which a process of the job may write a dataset file,
 * and every shared writable mapping of one, is registered in the job's
 * segment (struct augur_writes) for as long as it exists:
 *
 *   - a write open (any write flag) registers the descriptor before the
 *     real open, and drops the file's copies;
 *   - dup, dup2, dup3 and fcntl(F_DUPFD*) register the new descriptor;
 *     close, close_range and fclose release it;
 *   - a forked child registers the descriptors and mappings it inherits
 *     (pthread_atfork);
 *   - a process that starts (exec, posix_spawn, vfork) finds its own
 *     registrations from before an exec again, drops those exec closed,
 *     and registers the write descriptors it inherited of files the job
 *     is writing (by device and inode);
 *   - mmap(PROT_WRITE, MAP_SHARED) of a write descriptor registers the
 *     mapping until munmap covers it;
 *   - the leader releases the registrations of processes that died
 *     (shim/writers.go).
 *
 * While a file has a registration, the data plane serves it from the
 * original and the leader neither starts nor publishes a copy of it.
 * When its last registration goes, its copies are dropped again and it
 * may be copied anew.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOSLOT 0xffff /* a writer counted in hold[] but not registered: slot[] was full */

static struct augur_hold *hold_of(struct augur_segment *seg, uint64_t key)
{
	return &seg->writes.hold[key & (AUGUR_HOLD_SLOTS - 1)];
}

AUGUR_HIDDEN void augur_bump_gen(const char *abs)
{
	struct augur_segment *seg = augur_st.seg;
	/* Sequentially consistent, as the load of publishing that follows
	 * (await_publishers) and the leader's checks: see struct augur_hold. */
	if (seg)
		__atomic_fetch_add(&hold_of(seg, augur_key(abs))->gen, 1, __ATOMIC_SEQ_CST);
}

AUGUR_HIDDEN struct augur_hold *augur_hold(uint64_t key)
{
	struct augur_segment *seg = augur_st.seg;
	return seg ? hold_of(seg, key) : NULL;
}

AUGUR_HIDDEN int augur_write_held(uint64_t key)
{
	struct augur_segment *seg = augur_st.seg;
	if (!seg || !__atomic_load_n(&seg->writes.active, __ATOMIC_ACQUIRE))
		return 0;
	return __atomic_load_n(&hold_of(seg, key)->writers, __ATOMIC_ACQUIRE) != 0;
}

/* ident_counted says whether slot s counts in ident_count (it names
 * its file), and ident_count_of is its file's count. */
static int ident_counted(const struct augur_writer *s)
{
	return s->dev || s->ino;
}

static uint32_t *ident_count_of(struct augur_segment *seg, uint64_t dev, uint64_t ino)
{
	return &seg->writes.ident_count[augur_ident_hash(dev, ino) & (AUGUR_IDENT_COUNTS - 1)];
}

/* claim takes a free slot for a writer of key (starting where the key
 * hashes, so that a file's slots tend to lie together) and counts it in
 * hold[], unless key is 0 (a file with no dataset path: only its
 * identity counts). It returns the slot, or NOSLOT when slot[] is full:
 * the writer is then counted but cannot be found again after an exec or
 * its death. */
static int claim(struct augur_segment *seg, uint64_t key, int fd, uint64_t dev, uint64_t ino,
		 uint64_t addr, uint64_t len)
{
	struct augur_writes *w = &seg->writes;
	if (key) {
		__atomic_fetch_add(&hold_of(seg, key)->writers, 1, __ATOMIC_ACQ_REL);
		__atomic_fetch_add(&hold_of(seg, key)->gen, 1, __ATOMIC_ACQ_REL);
		__atomic_fetch_add(&w->active, 1, __ATOMIC_ACQ_REL);
	}
	for (int i = 0; i < AUGUR_WRITER_SLOTS; i++) {
		int n = (int)((key + (uint64_t)i) & (AUGUR_WRITER_SLOTS - 1));
		struct augur_writer *s = &w->slot[n];
		uint32_t free_ = AUGUR_WRITER_FREE;
		if (!__atomic_compare_exchange_n(&s->state, &free_, AUGUR_WRITER_FILLING, 0,
						 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		s->pid = augur_self_pid();
		s->fd = fd;
		s->key = key;
		s->dev = dev;
		s->ino = ino;
		s->addr = addr;
		s->len = len;
		__atomic_store_n(&s->state, AUGUR_WRITER_USED, __ATOMIC_RELEASE);
		if (ident_counted(s))
			__atomic_fetch_add(ident_count_of(seg, dev, ino), 1, __ATOMIC_SEQ_CST);
		return n;
	}
	__atomic_fetch_add(&w->lost, 1, __ATOMIC_RELAXED);
	return NOSLOT;
}

/* LINGER_NS is how long a closed write descriptor's file still counts
 * as written for a process that starts with a write descriptor of it
 * (see struct augur_recent): a vfork'd child's shim starts within
 * milliseconds of its parent's spawn call. */
#define LINGER_NS (10ULL * 1000 * 1000 * 1000)

/* remember records the file of the write descriptor in slot s, being
 * closed. A reader may see an entry half written: it then at worst
 * registers a descriptor it need not, or misses one as without it. */
static void remember(struct augur_segment *seg, struct augur_writer *s)
{
	uint64_t i = __atomic_fetch_add(&seg->writes.recent_next, 1, __ATOMIC_RELAXED);
	struct augur_recent *r = &seg->writes.recent[i & (AUGUR_RECENT_WRITES - 1)];
	r->dev = s->dev;
	r->ino = s->ino;
	r->key = s->key;
	__atomic_store_n(&r->closed_ns, augur_now_ns(), __ATOMIC_RELEASE);
}

/* release ends a writer of key, in slot n (or NOSLOT), and reports
 * whether it was the file's last. */
static int release(struct augur_segment *seg, int n, uint64_t key)
{
	if (n != NOSLOT) {
		struct augur_writer *s = &seg->writes.slot[n];
		uint32_t used = AUGUR_WRITER_USED;
		if (!__atomic_compare_exchange_n(&s->state, &used, AUGUR_WRITER_FILLING, 0,
						 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return 0; /* the leader found its process dead first */
		if (s->fd >= 0)
			remember(seg, s);
		if (ident_counted(s))
			__atomic_fetch_sub(ident_count_of(seg, s->dev, s->ino), 1, __ATOMIC_SEQ_CST);
		__atomic_store_n(&s->state, AUGUR_WRITER_FREE, __ATOMIC_RELEASE);
	}
	if (!key)
		return 0;
	struct augur_hold *h = hold_of(seg, key);
	__atomic_fetch_add(&h->gen, 1, __ATOMIC_ACQ_REL);
	__atomic_fetch_sub(&seg->writes.active, 1, __ATOMIC_ACQ_REL);
	return (__atomic_sub_fetch(&h->writers, 1, __ATOMIC_ACQ_REL) & ~AUGUR_HOLD_STALE) == 0;
}

/* track makes fd a write descriptor of the file of key, at abs, in slot
 * n. */
static void track(int fd, int n, uint64_t key, const char *abs)
{
	if (fd >= FD_MAX)
		return;
	augur_fd_path(fd, abs, abs ? strlen(abs) : 0);
	augur_fdtab[fd] = (struct fd_entry){.kind = FD_WRITE, .slot = (uint16_t)n, .key = key};
	augur_fd_seen(fd);
}

AUGUR_HIDDEN int augur_write_begin(const char *abs)
{
	struct augur_segment *seg = augur_st.seg;
	return seg && !augur_vforked() ? claim(seg, augur_key(abs), -2, 0, 0, 0, 0) : -1;
}

/* ident_each calls fn(seg, key, dev, ino) for the key of each entry of
 * ident[] naming the file (dev, ino): a copy of it under each of its names. */
static void ident_each(struct augur_segment *seg, uint64_t dev, uint64_t ino, uint64_t own,
		       void (*fn)(struct augur_segment *, uint64_t, uint64_t, uint64_t))
{
	int levels = (int)__atomic_load_n(&seg->writes.ident_levels, __ATOMIC_SEQ_CST);
	for (int level = 0; level < levels && level < AUGUR_IDENT_LEVELS; level++)
		for (int which = 0; which < 2; which++) {
			struct augur_ident *b = seg->ident[augur_ident_bucket(dev, ino, level, which)];
			for (int i = 0; i < AUGUR_IDENT_WAYS; i++) {
				uint64_t key = __atomic_load_n(&b[i].key, __ATOMIC_SEQ_CST);
				if (key && key != own && b[i].dev == dev && b[i].ino == ino)
					fn(seg, key, dev, ino);
			}
		}
}

AUGUR_HIDDEN void augur_ident_forget(uint64_t dev, uint64_t ino, uint64_t key)
{
	struct augur_segment *seg = augur_st.seg;
	if (!seg)
		return;
	int levels = (int)__atomic_load_n(&seg->writes.ident_levels, __ATOMIC_ACQUIRE);
	for (int level = 0; level < levels && level < AUGUR_IDENT_LEVELS; level++)
		for (int which = 0; which < 2; which++) {
			struct augur_ident *b = seg->ident[augur_ident_bucket(dev, ino, level, which)];
			for (int i = 0; i < AUGUR_IDENT_WAYS; i++) {
				uint64_t k = key;
				if (__atomic_load_n(&b[i].key, __ATOMIC_ACQUIRE) == key && b[i].dev == dev && b[i].ino == ino)
					__atomic_compare_exchange_n(&b[i].key, &k, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
			}
		}
}

/*
 * mark_stale takes the copies of the source path of key out of service:
 * a process writes or removes their file by another name. The mark, in
 * the path's hold, keeps readers on the original and the leader from
 * copying it until the leader has removed the copies and no process
 * writes the file (shim/writers.go, clearStale); the gen it moves makes a
 * publication under way take its copy back.
 */
static void mark_stale(struct augur_segment *seg, uint64_t key, uint64_t dev, uint64_t ino)
{
	struct augur_hold *h = hold_of(seg, key);
	__atomic_fetch_add(&h->gen, 1, __ATOMIC_SEQ_CST);
	if (!(__atomic_fetch_or(&h->writers, AUGUR_HOLD_STALE, __ATOMIC_SEQ_CST) & AUGUR_HOLD_STALE)) {
		__atomic_fetch_add(&seg->writes.active, 1, __ATOMIC_SEQ_CST);
		__atomic_fetch_add(&seg->writes.stale, 1, __ATOMIC_RELAXED);
	}
	__atomic_fetch_add(&seg->counters.aliased, 1, __ATOMIC_RELAXED);
	char file[48];
	snprintf(file, sizeof(file), "%llu:%llu", (unsigned long long)dev, (unsigned long long)ino);
	augur_emit(AUGUR_EV_STALE, -1, -1, key, file, 0);
}

AUGUR_HIDDEN void augur_ident_changed(uint64_t dev, uint64_t ino, uint64_t own)
{
	struct augur_segment *seg = augur_st.seg;
	if (seg)
		ident_each(seg, dev, ino, own, mark_stale);
}

/*
 * augur_write_opened registers fd, just opened for writing (fd < 0: the
 * open failed), as a writer of its file. A dataset path's writer took
 * slot n before the open (augur_write_begin; abs is its path); any other
 * regular file's writer takes one now, with key 0. Either way the slot
 * names the file by device and inode and counts it in ident_count before
 * ident[] is asked whether a copy of the same file is held under another
 * path (a hard link, a symlink, a bind mount): the leader inserts there
 * before it checks ident_count, so one of the two sees the other.
 */
AUGUR_HIDDEN void augur_write_opened(int n, int fd, const char *abs)
{
	struct augur_segment *seg = augur_st.seg;
	if (!seg)
		return;
	uint64_t key = n >= 0 ? augur_key(abs) : 0;
	struct stat sb;
	int ok = fd >= 0 && fd < FD_MAX && REAL(fstat) && augur_real.fstat(fd, &sb) == 0;
	if (!ok || (n < 0 && !S_ISREG(sb.st_mode))) {
		if (n >= 0)
			release(seg, n, key); /* the open failed, or the number cannot be tracked */
		return;
	}
	if (n < 0) {
		n = claim(seg, 0, fd, sb.st_dev, sb.st_ino, 0, 0);
		if (n == NOSLOT)
			return; /* slot[] full: no one could find this writer */
	} else if (n != NOSLOT) {
		struct augur_writer *s = &seg->writes.slot[n];
		s->dev = sb.st_dev;
		s->ino = sb.st_ino;
		__atomic_store_n(&s->fd, fd, __ATOMIC_RELEASE);
		__atomic_fetch_add(ident_count_of(seg, sb.st_dev, sb.st_ino), 1, __ATOMIC_SEQ_CST);
	}
	track(fd, n, key, abs);
	augur_ident_changed(sb.st_dev, sb.st_ino, key);
}

/* closed releases a write descriptor whose entry e and path abs (owned
 * now by the caller) were just taken out of the table, and drops the
 * file's copies when it was the file's last writer. */
AUGUR_HIDDEN void augur_write_closed(struct fd_entry e, const char *abs)
{
	struct augur_segment *seg = augur_st.seg;
	if (seg && release(seg, e.slot, e.key) && e.key && abs)
		augur_invalidate_abs(abs);
}

AUGUR_HIDDEN void augur_write_dup(int oldfd, int newfd)
{
	struct augur_segment *seg = augur_st.seg;
	if (!seg || newfd >= FD_MAX)
		return;
	struct fd_entry e = augur_fdtab[oldfd];
	uint64_t dev = 0, ino = 0;
	if (e.slot != NOSLOT) {
		dev = seg->writes.slot[e.slot].dev;
		ino = seg->writes.slot[e.slot].ino;
	}
	track(newfd, claim(seg, e.key, newfd, dev, ino, 0, 0), e.key,
	      __atomic_load_n(&augur_fdpath[oldfd], __ATOMIC_ACQUIRE));
}

/* ---- mappings --------------------------------------------------------- */

static int my_maps; /* this process's registered mappings */

AUGUR_HIDDEN void augur_write_mapped(int fd, void *addr, size_t len)
{
	struct augur_segment *seg = augur_st.seg;
	if (!seg)
		return;
	struct fd_entry e = augur_fdtab[fd];
	struct augur_writer *s = e.slot != NOSLOT ? &seg->writes.slot[e.slot] : NULL;
	if (claim(seg, e.key, -1, s ? s->dev : 0, s ? s->ino : 0, (uintptr_t)addr, len) != NOSLOT)
		__atomic_fetch_add(&my_maps, 1, __ATOMIC_RELAXED);
}

/* unmapped releases this process's mappings that [addr, addr+len) covers
 * whole. One partly unmapped keeps its file held until the process ends. */
AUGUR_HIDDEN void augur_write_unmapped(void *addr, size_t len)
{
	struct augur_segment *seg = augur_st.seg;
	if (!seg || !__atomic_load_n(&my_maps, __ATOMIC_RELAXED))
		return;
	uint64_t lo = (uintptr_t)addr, hi = lo + len;
	pid_t me = augur_self_pid();
	for (int n = 0; n < AUGUR_WRITER_SLOTS; n++) {
		struct augur_writer *s = &seg->writes.slot[n];
		if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != AUGUR_WRITER_USED || s->pid != me ||
		    s->fd != -1 || s->addr < lo || s->addr + s->len > hi)
			continue;
		release(seg, n, s->key);
		__atomic_fetch_sub(&my_maps, 1, __ATOMIC_RELAXED);
	}
}

/* ---- fork and exec ---------------------------------------------------- */

/* after_fork registers, in a forked child, the write descriptors and the
 * mappings it inherited: the child can write through them too. Its
 * parent may have closed its own meanwhile, releasing the file: a copy
 * made in that moment is dropped when the child is the file's only
 * writer again. */
AUGUR_HIDDEN void augur_write_after_fork(pid_t parent, int hwm)
{
	struct augur_segment *seg = augur_st.seg;
	if (!seg)
		return;
	for (int fd = 0; fd < hwm; fd++) {
		struct fd_entry e = augur_fdtab[fd];
		if (e.kind != FD_WRITE)
			continue;
		struct augur_writer *s = e.slot != NOSLOT ? &seg->writes.slot[e.slot] : NULL;
		augur_fdtab[fd].slot = (uint16_t)claim(seg, e.key, fd, s ? s->dev : 0, s ? s->ino : 0, 0, 0);
		if (e.key && (__atomic_load_n(&hold_of(seg, e.key)->writers, __ATOMIC_ACQUIRE) & ~AUGUR_HOLD_STALE) == 1 &&
		    augur_fdpath[fd])
			augur_invalidate_abs(augur_fdpath[fd]);
	}
	if (!__atomic_load_n(&my_maps, __ATOMIC_RELAXED))
		return;
	for (int n = 0; n < AUGUR_WRITER_SLOTS; n++) {
		struct augur_writer *s = &seg->writes.slot[n];
		if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == AUGUR_WRITER_USED && s->pid == parent &&
		    s->fd == -1)
			claim(seg, s->key, -1, s->dev, s->ino, s->addr, s->len); /* my_maps counts them already */
	}
}

/* written says whether a process of the job writes the file (dev, ino),
 * or closed a write descriptor of it lately, and returns its key. */
static int written(struct augur_segment *seg, uint64_t dev, uint64_t ino, uint64_t *key)
{
	for (int n = 0; n < AUGUR_WRITER_SLOTS; n++) {
		struct augur_writer *s = &seg->writes.slot[n];
		if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == AUGUR_WRITER_USED && s->dev == dev &&
		    s->ino == ino) {
			*key = s->key;
			return 1;
		}
	}
	uint64_t now = augur_now_ns();
	for (int i = 0; i < AUGUR_RECENT_WRITES; i++) {
		struct augur_recent *r = &seg->writes.recent[i];
		uint64_t t = __atomic_load_n(&r->closed_ns, __ATOMIC_ACQUIRE);
		if (t && now - t < LINGER_NS && r->dev == dev && r->ino == ino) {
			*key = r->key;
			return 1;
		}
	}
	return 0;
}

/* fd_path is the path /proc says fd names, or NULL. */
static char *fd_path(int fd)
{
	char link[64], path[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return NULL;
	path[n] = 0;
	return strdup(path);
}

/*
 * adopt runs when a process attaches to the job: a process that replaced
 * itself with exec finds its registrations again (the descriptors exec
 * kept; the rest, and every mapping, it releases), and a process started
 * with write descriptors of files the job is writing (inherited through
 * exec, posix_spawn or vfork, which run no fork handlers) registers them.
 */
AUGUR_HIDDEN void augur_write_adopt(void)
{
	struct augur_segment *seg = augur_st.seg;
	if (!seg || (!__atomic_load_n(&seg->writes.active, __ATOMIC_ACQUIRE) &&
		     !__atomic_load_n(&seg->writes.recent_next, __ATOMIC_ACQUIRE)))
		return;
	pid_t me = augur_self_pid();
	for (int n = 0; n < AUGUR_WRITER_SLOTS; n++) {
		struct augur_writer *s = &seg->writes.slot[n];
		if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != AUGUR_WRITER_USED || s->pid != me)
			continue;
		struct stat sb;
		if (s->fd >= 0 && s->fd < FD_MAX && augur_real.fstat(s->fd, &sb) == 0 &&
		    sb.st_dev == s->dev && sb.st_ino == s->ino) {
			char *abs = fd_path(s->fd);
			track(s->fd, n, s->key, abs);
			free(abs);
			continue;
		}
		release(seg, n, s->key);
	}
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return;
	for (struct dirent *de; (de = readdir(d));) {
		int fd = atoi(de->d_name);
		struct stat sb;
		uint64_t key;
		if (de->d_name[0] < '0' || de->d_name[0] > '9' || fd == dirfd(d) || fd >= FD_MAX ||
		    augur_fdtab[fd].kind != FD_NONE || augur_real.fstat(fd, &sb) != 0 ||
		    !S_ISREG(sb.st_mode) || (augur_real.fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY ||
		    !written(seg, sb.st_dev, sb.st_ino, &key))
			continue;
		/* Registered, then the copies made since its parent closed its own
		 * descriptor (if it did) dropped; abs, the kernel's name of it, also
		 * serves to drop them at the last close. */
		char *abs = fd_path(fd);
		track(fd, claim(seg, key, fd, sb.st_dev, sb.st_ino, 0, 0), key, abs);
		if (abs)
			augur_invalidate_abs(abs);
		free(abs);
	}
	augur_real.closedir(d);
}
