/*
 * intercept.c — augur's data plane: start-up, path classification, tier
 * lookup, the descriptor table and the event ring. The wrappers live in
 * intercept_open.c (open family), intercept_read.c (read family, mmap,
 * close, dup) and intercept_stdio.c (FILE and DIR streams).
 *
 * Everything here runs in C only, in every process of a job, including
 * forked children where Go must never run. Go publishes the configuration
 * once at start through the augur_set_* functions below; until it has,
 * every call passes straight through to libc.
 */
#include "intercept_internal.h"
#include "intercept_path.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/xattr.h>

struct augur_real augur_real;
AUGUR_TLS int augur_guard;

#define DIR_SLOTS 64

enum { CFG_PENDING = 0, CFG_ON = 1, CFG_OFF = 2 };

/* Process-wide state. Written by Go at start (before cfg is set to
 * CFG_ON, with release order); read-only afterwards. */
static struct {
	int cfg;
	pid_t pid;
	int nroots;
	char roots[AUGUR_MAX_ROOTS][PATH_MAX];
	size_t rootlen[AUGUR_MAX_ROOTS];
	/* Each root's first component ("pfs" of /pfs/imagenet), for the
	 * quick rejection of absolute paths elsewhere (see first_differs). */
	char first[AUGUR_MAX_ROOTS][256];
	size_t firstlen[AUGUR_MAX_ROOTS];
	int ntiers;
	char tiers[AUGUR_MAX_TIERS][PATH_MAX]; /* "" for a tier not in use */
	uint8_t sealed[AUGUR_MAX_TIERS];       /* see sealed() */
	int every_open; /* compare each copy with its source before serving it */
	uid_t euid; /* copies are served only if this user owns them */
	struct augur_segment *seg;
	char job[64];
} st;

/*
 * The descriptor table: one entry per fd number below FD_MAX. kind says
 * whether the fd is a dataset file (FD_FILE, tier tells where it was
 * served from) or a directory at or above a dataset root (FD_DIR, slot
 * names its path in dirs[]). Entries are set only after the real call has
 * returned the fd to us, and cleared before the real close.
 */
struct fd_entry augur_fdtab[FD_MAX];
#define fdtab augur_fdtab
/* The source path of each descriptor served from the original, so it can
 * move to a copy published later, and of each write descriptor (owned
 * here; freed when it moves or closes). */
char *augur_fdpath[FD_MAX];
#define fdpath augur_fdpath
static int fd_hwm; /* highest fd ever tracked + 1 */

static struct {
	int fd; /* owner, -1 when free */
	char path[PATH_MAX];
} dirs[DIR_SLOTS];

/* ---- start-up ---------------------------------------------------------- */

#define RESOLVE(name, sym) augur_real.name = dlsym(RTLD_NEXT, sym)

static void resolve_symbols(void)
{
	RESOLVE(open, "open");
	RESOLVE(open64, "open64");
	RESOLVE(openat, "openat");
	RESOLVE(openat64, "openat64");
	RESOLVE(open_2, "__open_2");
	RESOLVE(open64_2, "__open64_2");
	RESOLVE(openat_2, "__openat_2");
	RESOLVE(openat64_2, "__openat64_2");
	RESOLVE(fopen, "fopen");
	RESOLVE(fopen64, "fopen64");
	RESOLVE(freopen, "freopen");
	RESOLVE(freopen64, "freopen64");
	RESOLVE(fdopen, "fdopen");
	RESOLVE(fclose, "fclose");
	RESOLVE(closedir, "closedir");
	RESOLVE(read, "read");
	RESOLVE(read_chk, "__read_chk");
	RESOLVE(pread, "pread");
	RESOLVE(pread64, "pread64");
	RESOLVE(pread64_chk, "__pread64_chk");
	RESOLVE(readv, "readv");
	RESOLVE(preadv, "preadv");
	RESOLVE(preadv64, "preadv64");
	RESOLVE(preadv2, "preadv2");
	RESOLVE(preadv64v2, "preadv64v2");
	RESOLVE(fread, "fread");
	RESOLVE(fread_unlocked, "fread_unlocked");
	RESOLVE(fread_chk, "__fread_chk");
	RESOLVE(fgets, "fgets");
	RESOLVE(getline, "getline");
	RESOLVE(getdelim, "getdelim");
	RESOLVE(mmap, "mmap");
	RESOLVE(mmap64, "mmap64");
	RESOLVE(munmap, "munmap");
	RESOLVE(close, "close");
	RESOLVE(close_range, "close_range");
	RESOLVE(dup, "dup");
	RESOLVE(dup2, "dup2");
	RESOLVE(dup3, "dup3");
	RESOLVE(fcntl, "fcntl");
	RESOLVE(fcntl64, "fcntl64");
	RESOLVE(sendfile, "sendfile");
	RESOLVE(sendfile64, "sendfile64");
	RESOLVE(copy_file_range, "copy_file_range");
	RESOLVE(truncate, "truncate");
	RESOLVE(truncate64, "truncate64");
	RESOLVE(unlink, "unlink");
	RESOLVE(unlinkat, "unlinkat");
	RESOLVE(rename, "rename");
	RESOLVE(renameat, "renameat");
	RESOLVE(renameat2, "renameat2");
	RESOLVE(fstat, "fstat");
	RESOLVE(fstat64, "fstat64");
	RESOLVE(fxstat, "__fxstat");
	RESOLVE(fxstat64, "__fxstat64");
	RESOLVE(fstatat, "fstatat");
	RESOLVE(fstatat64, "fstatat64");
	RESOLVE(fxstatat, "__fxstatat");
	RESOLVE(fxstatat64, "__fxstatat64");
	RESOLVE(statx, "statx");
	RESOLVE(fgetxattr, "fgetxattr");
	RESOLVE(flistxattr, "flistxattr");
	RESOLVE(fsetxattr, "fsetxattr");
	RESOLVE(fremovexattr, "fremovexattr");
	RESOLVE(fchmod, "fchmod");
	RESOLVE(fchown, "fchown");
	RESOLVE(fstatfs, "fstatfs");
	RESOLVE(fstatfs64, "fstatfs64");
	RESOLVE(fstatvfs, "fstatvfs");
	RESOLVE(fstatvfs64, "fstatvfs64");
}

/* self_pid is this process's pid for events, kept without a system call
 * per event: set at load and in every child that glibc's fork makes.
 * (vfork and raw clone skip atfork handlers; such children exec or exit
 * at once, and an event of theirs would only carry the parent's pid.) */
static pid_t self_pid;

/* In a forked child only C runs; forget the parent's byte counts so a
 * descriptor shared across fork is not counted twice at close. */
static void atfork_child(void)
{
	pid_t parent = __atomic_exchange_n(&self_pid, getpid(), __ATOMIC_RELAXED);
	for (int fd = 0; fd < fd_hwm; fd++)
		if (fdtab[fd].kind == FD_FILE)
			fdtab[fd].bytes = 0;
	augur_tee_after_fork(fd_hwm);
	augur_write_after_fork(parent, fd_hwm);
}

static void atfork_prepare(void)
{
	AUGUR_ERRNO_SAVE;
	augur_tee_before_fork(__atomic_load_n(&fd_hwm, __ATOMIC_RELAXED));
	AUGUR_ERRNO_RESTORE;
}

AUGUR_HIDDEN pid_t augur_self_pid(void) { return __atomic_load_n(&self_pid, __ATOMIC_RELAXED); }

/*
 * augur_vforked says whether this is a child made by vfork, posix_spawn
 * or a raw clone: no fork handler ran, and a vfork'd child shares the
 * parent's memory, so the tables here are the parent's. Such a child only
 * arranges its descriptors (CPython's closes them with close_range,
 * dup2s pipes) and execs; were its closes and dups booked, the parent's
 * write descriptors would be released while the parent still holds them.
 * A system call, so asked only where a call would change what other
 * processes rely on.
 */
AUGUR_HIDDEN int augur_vforked(void) { return getpid() != augur_self_pid(); }

AUGUR_HIDDEN struct augur_segment *augur_seg(void) { return st.seg; }

/* make_job_id names the job: AUGUR_JOB, or 64 random bits, so that no
 * other user can guess the name of its state in /dev/shm and take it
 * first (shim/segment.go). */
static void make_job_id(void)
{
	const char *job = getenv("AUGUR_JOB");
	if (job && *job && strlen(job) < sizeof(st.job)) {
		strcpy(st.job, job);
		return;
	}
	uint64_t r = 0;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		struct timespec ts; /* no entropy yet (early boot): still not a pid and time alone */
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)(uintptr_t)&ts ^ (uint64_t)st.pid << 40;
	}
	snprintf(st.job, sizeof(st.job), "%016llx", (unsigned long long)r);
	/* Children inherit it, so every process of the job finds the same
	 * segment; this runs before main, while only this thread exists. */
	setenv("AUGUR_JOB", st.job, 1);
	setenv("AUGUR_JOB_MADE", st.job, 1); /* not the nodes' shared job id (shim.JobMadeVar) */
}

AUGUR_HIDDEN void augur_resolve(void)
{
	static int resolved;
	if (__atomic_load_n(&resolved, __ATOMIC_ACQUIRE))
		return;
	AUGUR_ERRNO_SAVE;
	augur_guard++;
	resolve_symbols();
	augur_guard--;
	__atomic_store_n(&resolved, 1, __ATOMIC_RELEASE);
	AUGUR_ERRNO_RESTORE;
}

/*
 * Where the configuration comes from. Most processes of a job — the
 * command under `augur run`, DataLoader workers, spawned children, every
 * rank but the first — start while the job's leader lives and has
 * published the configuration in the segment: they take it from there
 * and run the data plane alone, with no Go runtime and none of its
 * threads (a second thread makes every system call on a descriptor
 * dearer, ~10% of a 4 KiB pread from the page cache). Otherwise the
 * process loads the Go half, libaugur-go.so, from next to this library:
 * it reads the configuration, and leads the job or waits to.
 */

/*
 * The job's state is trusted only as shim/segment.go makes it: a
 * directory /dev/shm/augur.<uid>.<job> of this user's, private (no
 * access for group or others) and not a symlink, holding the files
 * "leader" and "segment", also this user's, private, regular, opened
 * without following a symlink. Anything else (another user's planted
 * name) is never attached; the process then loads the Go half, which
 * says what is wrong and passes through.
 */
static int private_fd(int fd, mode_t kind)
{
	struct stat sb;
	return fstat(fd, &sb) == 0 && (sb.st_mode & S_IFMT) == kind && sb.st_uid == st.euid &&
	       (sb.st_mode & 077) == 0;
}

static int job_dir(void)
{
	char path[128];
	snprintf(path, sizeof(path), "/dev/shm/augur.%u.%s", (unsigned)st.euid, st.job);
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && !private_fd(fd, S_IFDIR)) {
		close(fd);
		return -1;
	}
	return fd;
}

AUGUR_HIDDEN int augur_tee_path(pid_t pid, uint64_t n, char *out, size_t cap)
{
	int k = snprintf(out, cap, "/dev/shm/augur.%u.%s/" AUGUR_TEE_DIR "/%d.%llu", (unsigned)st.euid, st.job,
			 (int)pid, (unsigned long long)n);
	return k > 0 && (size_t)k < cap ? 0 : -1;
}

AUGUR_HIDDEN int augur_tee_pool_path(int slot, char *out, size_t cap)
{
	int k = snprintf(out, cap, "/dev/shm/augur.%u.%s/" AUGUR_TEE_DIR "/pool.%d", (unsigned)st.euid, st.job, slot);
	return k > 0 && (size_t)k < cap ? 0 : -1;
}

static int job_file(int dir, const char *name, int flags)
{
	int fd = openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && !private_fd(fd, S_IFREG)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* leader_alive reports whether a process holds the job's leader lock (a
 * POSIX record lock on its file "leader"; shim/leader.go). */
static int leader_alive(int dir)
{
	int fd = job_file(dir, "leader", O_RDONLY);
	if (fd < 0)
		return 0;
	struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	int alive = fcntl(fd, F_GETLK, &lk) == 0 && lk.l_type != F_UNLCK;
	close(fd);
	return alive;
}

/* map_segment maps the job's segment if a live leader has published the
 * configuration in it, or returns NULL. */
static struct augur_segment *map_segment(void)
{
	int dir = job_dir();
	if (dir < 0)
		return NULL;
	int fd = leader_alive(dir) ? job_file(dir, "segment", O_RDWR) : -1;
	close(dir);
	if (fd < 0)
		return NULL;
	struct stat sb;
	void *m = MAP_FAILED;
	if (fstat(fd, &sb) == 0 && sb.st_size == (off_t)sizeof(struct augur_segment))
		m = mmap(NULL, sizeof(struct augur_segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return NULL;
	struct augur_segment *seg = m;
	struct augur_config *c = &seg->config;
	if (__atomic_load_n(&seg->magic, __ATOMIC_ACQUIRE) != AUGUR_MAGIC ||
	    seg->version != AUGUR_ABI_VERSION ||
	    !__atomic_load_n(&c->published, __ATOMIC_ACQUIRE) ||
	    c->nroots > AUGUR_MAX_ROOTS || c->ntiers > AUGUR_MAX_TIERS) {
		munmap(m, sizeof(struct augur_segment));
		return NULL;
	}
	return seg;
}

/* attach_leader takes the configuration a live leader published in the
 * job's segment. It reports whether it did. */
static int attach_leader(void)
{
	struct augur_segment *seg = map_segment();
	if (!seg)
		return 0;
	struct augur_config *c = &seg->config;
	for (uint32_t i = 0; i < c->nroots; i++)
		if (memchr(c->roots[i], 0, AUGUR_CONFIG_PATH))
			augur_add_root(c->roots[i]);
	for (uint32_t i = 0; i < c->ntiers; i++)
		augur_add_tier(memchr(c->tiers[i], 0, AUGUR_CONFIG_PATH) ? c->tiers[i] : "");
	augur_set_every_open(c->every_open != 0);
	augur_set_segment(seg);
	augur_start(1);
	return 1;
}

/* load_control_plane loads libaugur-go.so, whose Go runtime then
 * configures the data plane (libaugur/main.go). If it cannot be loaded
 * the process passes through, with one message. */
static void load_control_plane(void)
{
	Dl_info self;
	char path[PATH_MAX];
	const char *err = "cannot find libaugur.so's own path";
	if (dladdr((void *)augur_start, &self) && self.dli_fname) {
		const char *slash = strrchr(self.dli_fname, '/');
		int dir = slash ? (int)(slash - self.dli_fname) : 0;
		snprintf(path, sizeof(path), "%.*s%slibaugur-go.so", dir, self.dli_fname, slash ? "/" : "");
		if (dlopen(path, RTLD_NOW | RTLD_LOCAL))
			return;
		err = dlerror();
	}
	static int warned;
	char msg[400];
	snprintf(msg, sizeof(msg), "cannot load the control plane: %s; passing through", err ? err : "?");
	augur_warn_once(&warned, msg);
	augur_start(0);
}

/*
 * The constructor resolves the real symbols and names the job, then
 * takes the configuration from a live leader or loads the Go half, whose
 * runtime starts on a thread of its own after the job id is set (a Go
 * runtime that read it earlier once named no job: "augur: bad job id").
 */
__attribute__((constructor(101))) static void augur_ctor(void)
{
	augur_guard++;
	augur_resolve();
	st.pid = getpid();
	st.euid = geteuid();
	self_pid = st.pid;
	for (int i = 0; i < DIR_SLOTS; i++)
		dirs[i].fd = -1;
	const char *off = getenv("AUGUR_DISABLE");
	if (off && *off && strcmp(off, "0") != 0) {
		__atomic_store_n(&st.cfg, CFG_OFF, __ATOMIC_RELEASE);
	} else {
		make_job_id();
		if (!attach_leader())
			load_control_plane();
	}
	pthread_atfork(atfork_prepare, NULL, atfork_child);
	augur_guard--;
}

/* ---- configuration, published by Go (libaugur/main.go) --------------- */
/* The functions below are exported for the Go half, libaugur-go.so. */

AUGUR_EXPORT const char *augur_job(void) { return st.job; }

AUGUR_EXPORT int augur_disabled(void)
{
	return __atomic_load_n(&st.cfg, __ATOMIC_ACQUIRE) == CFG_OFF;
}

/* augur_add_root registers a dataset root; path must be absolute and
 * normalised (Go does that). Returns -1 when the table is full. */
AUGUR_EXPORT int augur_add_root(const char *path)
{
	size_t n = strlen(path);
	if (st.nroots >= AUGUR_MAX_ROOTS || n == 0 || n >= PATH_MAX || path[0] != '/')
		return -1;
	while (n > 1 && path[n - 1] == '/')
		n--;
	memcpy(st.roots[st.nroots], path, n);
	st.roots[st.nroots][n] = 0;
	st.rootlen[st.nroots] = n == 1 ? 0 : n; /* "/" matches every path */
	size_t f = strcspn(path + 1, "/");
	if (n > 1 && f < sizeof(st.first[0])) {
		memcpy(st.first[st.nroots], path + 1, f);
		st.firstlen[st.nroots] = f;
	} else {
		st.firstlen[st.nroots] = 0; /* never rejects */
	}
	st.nroots++;
	return 0;
}

/*
 * A tier is sealed when no one but this user (and root) can change what
 * its path leads to: the tier and its files/ are directories of the
 * user's that no one else may write, and every directory above is root's
 * or the user's and, if others may write it, sticky (/dev/shm, /tmp), with
 * no symlink on the way. Only the user can then have put a copy there,
 * and validation removed any a job may not serve, so copies are served
 * without a check each. Anywhere else a tier can be swapped under a
 * running job, and every copy opened is checked (trusted_copy): a system
 * call per served open that a sealed tier does without.
 */
static int sealed_dir(const char *path, int own)
{
	struct stat sb;
	if (lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
		return 0;
	if (own)
		return sb.st_uid == st.euid && !(sb.st_mode & 022);
	return (sb.st_uid == 0 || sb.st_uid == st.euid) && (!(sb.st_mode & 022) || (sb.st_mode & S_ISVTX));
}

static int sealed(const char *tier)
{
	char p[PATH_MAX];
	size_t n = strlen(tier);
	if (n == 0 || tier[0] != '/' || n + 7 > sizeof(p))
		return 0;
	memcpy(p, tier, n + 1);
	if (!sealed_dir("/", 0))
		return 0;
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = 0;
		int ok = sealed_dir(p, 0);
		*s = '/';
		if (!ok)
			return 0;
	}
	if (!sealed_dir(p, 1))
		return 0;
	memcpy(p + n, "/files", 7);
	return sealed_dir(p, 1);
}

/* augur_add_tier appends the next tier, fastest first; "" keeps the
 * place of a tier not in use, so that tiers keep their numbers. A tier
 * whose directory exists but is a symlink, another user's or writable by
 * others is not used either (the leader says so; shim/leader.go). */
AUGUR_EXPORT int augur_add_tier(const char *path)
{
	if (st.ntiers >= AUGUR_MAX_TIERS || strlen(path) >= PATH_MAX - 64)
		return -1;
	struct stat sb;
	if (*path && lstat(path, &sb) == 0 &&
	    (!S_ISDIR(sb.st_mode) || sb.st_uid != st.euid || (sb.st_mode & 022)))
		path = "";
	st.sealed[st.ntiers] = (uint8_t)sealed(path);
	strcpy(st.tiers[st.ntiers++], path);
	return 0;
}

AUGUR_EXPORT void augur_set_segment(struct augur_segment *seg)
{
	st.seg = seg;
	if (!seg)
		return;
	__atomic_fetch_add(&seg->counters.processes, 1, __ATOMIC_RELAXED);
	augur_guard++;
	augur_write_adopt();
	augur_guard--;
}

/* augur_set_every_open makes every open served from a tier compare the
 * copy with its source first (revalidate = 0). */
AUGUR_EXPORT void augur_set_every_open(int on) { st.every_open = on; }

/* augur_start turns interception on (on = 1) or leaves this process in
 * pass-through for good (on = 0). Either way, waiting hooks go on. */
AUGUR_EXPORT void augur_start(int on)
{
	__atomic_store_n(&st.cfg, on ? CFG_ON : CFG_OFF, __ATOMIC_RELEASE);
}

/* ---- activity check ---------------------------------------------------- */

AUGUR_HIDDEN void augur_warn_once(int *once, const char *msg)
{
	if (__atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
		return;
	AUGUR_ERRNO_SAVE;
	augur_guard++;
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "augur: %s\n", msg);
	if (n > 0)
		(void)!write(2, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
	augur_guard--;
	AUGUR_ERRNO_RESTORE;
}

/*
 * In a process that loads the Go half, its runtime starts on its own thread
 * while the host's main() is already running. The first path-level call of the
 * process waits for it (bounded), so that even a program that opens its
 * dataset in the first microsecond is served from the tiers. After the
 * bound, calls stop waiting and pass through until Go is ready; they are
 * intercepted from then on. A forked child never waits: Go does not run
 * there.
 */
static int stopped_waiting;

static int wait_for_go(void)
{
	static int warned;
	if (__atomic_load_n(&stopped_waiting, __ATOMIC_RELAXED) || getpid() != st.pid)
		return 0;
	AUGUR_ERRNO_SAVE;
	struct timespec nap = {0, 200 * 1000};
	for (int i = 0; i < 10000; i++) { /* 2 s */
		int c = __atomic_load_n(&st.cfg, __ATOMIC_ACQUIRE);
		if (c != CFG_PENDING) {
			AUGUR_ERRNO_RESTORE;
			return c == CFG_ON;
		}
		nanosleep(&nap, NULL);
	}
	__atomic_store_n(&stopped_waiting, 1, __ATOMIC_RELAXED);
	augur_warn_once(&warned, "control plane not ready after 2s; passing through until it is");
	AUGUR_ERRNO_RESTORE;
	return 0;
}

AUGUR_HIDDEN int augur_active(void)
{
	if (augur_guard)
		return 0;
	int c = __atomic_load_n(&st.cfg, __ATOMIC_ACQUIRE);
	if (c == CFG_ON)
		return st.nroots > 0;
	if (c == CFG_OFF)
		return 0;
	return wait_for_go() && st.nroots > 0;
}

/* ---- paths ------------------------------------------------------------- */

/*
 * normalize joins base and path and removes ".", empty and ".."
 * components lexically. It reports through *dotdot whether a ".." was
 * met, because lexical ".." is only right when no symlink precedes it.
 * Returns the length, or -1 if the result does not fit.
 */
static int normalize(const char *base, const char *path, char *out, int *dotdot)
{
	size_t n = 0;
	const char *parts[2] = {base, path};
	*dotdot = 0;
	out[n++] = '/';
	for (int p = 0; p < 2; p++) {
		const char *s = parts[p];
		if (!s)
			continue;
		while (*s) {
			while (*s == '/')
				s++;
			const char *e = s;
			while (*e && *e != '/')
				e++;
			size_t len = (size_t)(e - s);
			if (len == 0 || (len == 1 && s[0] == '.')) {
				/* skip */
			} else if (len == 2 && s[0] == '.' && s[1] == '.') {
				*dotdot = 1;
				while (n > 1 && out[n - 1] != '/')
					n--;
				if (n > 1)
					n--; /* drop the slash too */
			} else {
				if (n > 1) {
					if (n + 1 >= PATH_MAX)
						return -1;
					out[n++] = '/';
				}
				if (n + len >= PATH_MAX)
					return -1;
				memcpy(out + n, s, len);
				n += len;
			}
			s = e;
		}
	}
	out[n] = 0;
	return (int)n;
}

enum { PATH_OTHER = 0, PATH_FILE = 1, PATH_ABOVE = 2 };

/* classify_abs tells whether abs is inside a dataset root (PATH_FILE), is
 * a root or one of its ancestors (PATH_ABOVE), or neither. */
static inline __attribute__((always_inline)) int classify_abs(const char *abs, size_t len)
{
	int cls = PATH_OTHER;
	for (int i = 0; i < st.nroots; i++) {
		size_t rl = st.rootlen[i];
		const char *r = st.roots[i];
		if (len > rl && memcmp(abs, r, rl) == 0 && abs[rl] == '/')
			return PATH_FILE;
		if (rl >= len && memcmp(abs, r, len) == 0 &&
		    (r[len] == 0 || r[len] == '/' || len == 1))
			cls = PATH_ABOVE;
	}
	return cls;
}

/* base_of returns the directory a relative path is resolved against, or
 * NULL when that is a directory fd the shim does not track (then the path
 * cannot be a dataset path the shim knows about, and it passes through). */
static const char *base_of(int dirfd, char *cwd)
{
	if (dirfd == AT_FDCWD) {
		if (syscall(SYS_getcwd, cwd, PATH_MAX) < 0)
			return NULL;
		return cwd;
	}
	if (dirfd < 0 || dirfd >= FD_MAX)
		return NULL;
	struct fd_entry e = fdtab[dirfd];
	if (e.kind != FD_DIR)
		return NULL;
	return dirs[e.slot].path;
}

/*
 * first_differs is the fast answer for most paths a program opens: a
 * normal absolute path (see clean_length) whose first component is the
 * first component of no root can be under no root and above none. Only a
 * normal path: "/usr/../data/x" is under a root "/data".
 */
static int first_differs(const char *path)
{
	const char *p = path + 1;
	if (*p == 0)
		return 0; /* "/" is above every root */
	for (int i = 0; i < st.nroots; i++) {
		const char *f = st.first[i];
		size_t n = st.firstlen[i], k = 0; /* a short compare: no call */
		if (n == 0)
			return 0;
		while (k < n && f[k] == p[k])
			k++;
		if (k == n && (p[k] == '/' || p[k] == 0))
			return 0;
	}
	return 1;
}

static int resolve_slow(int dirfd, const char *path, char *abs);

/*
 * resolve_path turns (dirfd, path) into an absolute, normalised path in abs
 * and classifies it. A path with ".." under a root is resolved again with
 * realpath(3) of its parent directory, so that a symlink before the ".."
 * is followed as the kernel would.
 */
static int resolve_path(int dirfd, const char *path, char *abs)
{
	if (!path || !*path)
		return PATH_OTHER;
	if (path[0] == '/') {
		int n = clean_length(path);
		if (n >= 0) {
			if (first_differs(path))
				return PATH_OTHER;
			int cls = classify_abs(path, (size_t)n);
			if (cls != PATH_OTHER)
				memcpy(abs, path, (size_t)n + 1);
			return cls;
		}
	}
	return resolve_slow(dirfd, path, abs);
}

/* resolve_slow handles relative paths and paths that need normalising,
 * apart from resolve_path so that the common case does not set up its
 * buffers. */
static __attribute__((noinline)) int resolve_slow(int dirfd, const char *path, char *abs)
{
	char cwd[PATH_MAX];
	const char *base = NULL;
	int dotdot;
	if (path[0] != '/') {
		base = base_of(dirfd, cwd);
		if (!base)
			return PATH_OTHER;
	}
	int n = normalize(base, path, abs, &dotdot);
	if (n < 0)
		return PATH_OTHER;
	int cls = classify_abs(abs, (size_t)n);
	if (cls == PATH_OTHER || !dotdot)
		return cls;

	char joined[PATH_MAX], real[PATH_MAX];
	int w = snprintf(joined, sizeof(joined), "%s/%s", base ? base : "", path);
	if (w < 0 || w >= (int)sizeof(joined))
		return PATH_OTHER;
	char *slash = strrchr(joined, '/');
	const char *leaf = slash + 1;
	*slash = 0;
	if (!realpath(joined[0] ? joined : "/", real))
		return PATH_OTHER;
	if (normalize(real, leaf, abs, &dotdot) < 0)
		return PATH_OTHER;
	return classify_abs(abs, strlen(abs));
}

/*
 * names_dir says whether path can only name a directory: it ends in a
 * slash, or its last component is "." or "..". The kernel never opens a
 * regular file by such a name ("a.bin/" is ENOTDIR), but normalising
 * drops that information, so resolve makes such a path a directory the
 * shim tracks, never a file it serves from a copy.
 */
static int names_dir(const char *path)
{
	size_t n = strlen(path);
	if (n > 0 && path[n - 1] == '/')
		return 1;
	const char *last = strrchr(path, '/');
	last = last ? last + 1 : path;
	return strcmp(last, ".") == 0 || strcmp(last, "..") == 0;
}

static int resolve(int dirfd, const char *path, char *abs)
{
	int cls = resolve_path(dirfd, path, abs);
	return cls == PATH_FILE && names_dir(path) ? PATH_ABOVE : cls;
}

/*
 * tier_path maps an absolute source path to its copy in tier t:
 * <tier>/files/<dir>@/<dir>@/<name>. The '@' on every directory component
 * keeps a directory of the source from ever matching a copied file, so a
 * read-only open of a dataset directory never lands on a tier directory.
 * Files whose name ends in '@' are never copied (see tiering.CopyPath).
 */
AUGUR_HIDDEN int augur_tier_path(int t, const char *abs, char *out, size_t cap)
{
	size_t n = strlen(st.tiers[t]);
	if (n == 0 || n + 6 >= cap) /* a tier not in use, or too long a path */
		return -1;
	memcpy(out, st.tiers[t], n);
	memcpy(out + n, "/files", 6);
	n += 6;
	const char *s = abs;
	while (*s) {
		const char *e = strchr(s + 1, '/');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		if (n + len + 2 >= cap)
			return -1;
		memcpy(out + n, s, len);
		n += len;
		if (e)
			out[n++] = '@';
		else if (len > 1 && s[len - 1] == '@')
			return -1;
		s += len;
	}
	out[n] = 0;
	return (int)n;
}

/* ---- the event ring ---------------------------------------------------- */

AUGUR_HIDDEN uint64_t augur_fnv1a(const char *s)
{
	uint64_t h = 14695981039346656037ULL; /* FNV-1a 64, as Go's hash/fnv */
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * Ranks. Every launcher leaves the process's global rank in its
 * environment under a name of its own (torchrun RANK, SLURM SLURM_PROCID,
 * Open MPI OMPI_COMM_WORLD_RANK, MPICH/Hydra PMI_RANK, PMIx PMIX_RANK),
 * and most its rank on the node (LOCAL_RANK, SLURM_LOCALID,
 * OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID); torch.multiprocessing.spawn
 * leaves none, and the leader infers those ranks. They are read again in
 * each new process, because ranks are not always exec'd: a launcher may
 * fork them and set the variable in the child (workers forked later
 * inherit it).
 */
static int env_int(const char *const *names)
{
	for (; *names; names++) {
		const char *v = getenv(*names);
		char *end;
		long r = v ? strtol(v, &end, 10) : -1;
		if (v && *v && !*end && r >= 0 && r < 1 << 24)
			return (int)r;
	}
	return -1;
}

/* ranks_of sets the global and local rank of process pid; one cached set
 * per process, checked by pid before and after it is read. */
static void ranks_of(pid_t pid, int32_t *global, int32_t *local)
{
	static const char *const globals[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", NULL};
	static const char *const locals[] = {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", NULL};
	static pid_t cached_pid;
	static uint64_t cached; /* global + 1 << 32 | local + 1 */
	if (__atomic_load_n(&cached_pid, __ATOMIC_ACQUIRE) == pid) {
		uint64_t c = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);
		if (__atomic_load_n(&cached_pid, __ATOMIC_ACQUIRE) == pid) {
			*global = (int32_t)(c >> 32) - 1;
			*local = (int32_t)(uint32_t)c - 1;
			return;
		}
	}
	*global = env_int(globals);
	*local = env_int(locals);
	__atomic_store_n(&cached_pid, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&cached, (uint64_t)(uint32_t)(*global + 1) << 32 | (uint32_t)(*local + 1), __ATOMIC_RELEASE);
	__atomic_store_n(&cached_pid, pid, __ATOMIC_RELEASE);
}

/* emit appends one event; when the ring is full it drops the event and
 * counts it: the leader is behind, and training must not wait for it. */
static int emit(uint32_t kind, int tier, int fd, uint64_t bytes, const char *abs)
{
	return augur_emit(kind, tier, fd, bytes, abs, 0);
}

AUGUR_HIDDEN int augur_emit(uint32_t kind, int tier, int fd, uint64_t bytes, const char *abs, uint16_t flags)
{
	struct augur_segment *seg = st.seg;
	if (!seg)
		return 0;
	struct augur_ring *r = &seg->ring;
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
	for (;;) {
		uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		if (head - tail >= AUGUR_RING_SLOTS) {
			__atomic_fetch_add(&seg->counters.ring_dropped, 1, __ATOMIC_RELAXED);
			return 0;
		}
		if (__atomic_compare_exchange_n(&r->head, &head, head + 1, 1,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			break;
	}
	struct augur_event *ev = &r->slots[head & (AUGUR_RING_SLOTS - 1)];
	size_t len = strlen(abs);
	ev->bytes = bytes;
	ev->kind = kind;
	ev->tier = tier;
	ev->pid = (int32_t)__atomic_load_n(&self_pid, __ATOMIC_RELAXED);
	ranks_of(ev->pid, &ev->rank, &ev->local);
	ev->origin = (int32_t)st.pid; /* st.pid is set at load: a forked child keeps its parent's */
	ev->fd = fd;
	ev->flags = flags | (len >= AUGUR_EVENT_PATH ? AUGUR_EVF_TRUNCATED : 0);
	if (len >= AUGUR_EVENT_PATH)
		len = AUGUR_EVENT_PATH - 1;
	ev->pathlen = (uint16_t)len;
	memcpy(ev->path, abs, len);
	ev->path[len] = 0;
	__atomic_store_n(&ev->seq, head + 1, __ATOMIC_RELEASE);
	return 1;
}

/* ---- the descriptor table ---------------------------------------------- */

static uint32_t publish_gen(void)
{
	return st.seg ? (uint32_t)__atomic_load_n(&st.seg->leader.publish_gen, __ATOMIC_ACQUIRE) : 0;
}

AUGUR_HIDDEN void augur_fd_seen(int fd)
{
	if (fd >= __atomic_load_n(&fd_hwm, __ATOMIC_RELAXED))
		__atomic_store_n(&fd_hwm, fd + 1, __ATOMIC_RELAXED);
}

static void fd_track_file(int fd, int tier, const char *abs)
{
	if (fd >= FD_MAX) {
		if (st.seg)
			__atomic_fetch_add(&st.seg->counters.untracked, 1, __ATOMIC_RELAXED);
		return;
	}
	if (fdtab[fd].kind == FD_FILE && fdtab[fd].slot)
		augur_tee_closed(fd); /* closed unseen (a raw system call) */
	free(__atomic_exchange_n(&fdpath[fd], tier < 0 && abs ? strdup(abs) : NULL, __ATOMIC_ACQ_REL));
	fdtab[fd] = (struct fd_entry){.kind = FD_FILE, .tier = (int8_t)tier, .gen = publish_gen()};
	augur_fd_seen(fd);
}

static int dir_slot_get(const char *abs)
{
	for (int i = 0; i < DIR_SLOTS; i++) {
		int free_fd = -1;
		if (__atomic_compare_exchange_n(&dirs[i].fd, &free_fd, INT_MAX, 0,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			strcpy(dirs[i].path, abs);
			return i;
		}
	}
	return -1;
}

static void fd_track_dir(int fd, const char *abs)
{
	if (fd >= FD_MAX)
		return;
	int slot = dir_slot_get(abs);
	if (slot < 0)
		return; /* untracked: openat relative to it passes through */
	__atomic_store_n(&dirs[slot].fd, fd, __ATOMIC_RELEASE);
	fdtab[fd] = (struct fd_entry){.kind = FD_DIR, .slot = (uint16_t)slot};
	augur_fd_seen(fd);
}

/* augur_fd_tier is the tier serving fd, or -1 (the original, or not a
 * dataset file). */
AUGUR_HIDDEN int augur_fd_tier(int fd)
{
	if (fd < 0 || fd >= FD_MAX || fdtab[fd].kind != FD_FILE)
		return -1;
	return fdtab[fd].tier;
}

AUGUR_HIDDEN void augur_fd_account(int fd, ssize_t n)
{
	if (n > 0 && fd >= 0 && fd < FD_MAX && fdtab[fd].kind == FD_FILE)
		__atomic_fetch_add(&fdtab[fd].bytes, (uint64_t)n, __ATOMIC_RELAXED);
}

/* fd_forget clears an entry (and its directory slot and path) without
 * reporting a close. */
static void fd_forget(int fd)
{
	if (fd < 0 || fd >= FD_MAX || fdtab[fd].kind == FD_NONE)
		return;
	if (fdtab[fd].kind == FD_DIR)
		__atomic_store_n(&dirs[fdtab[fd].slot].fd, -1, __ATOMIC_RELEASE);
	fdtab[fd] = (struct fd_entry){0};
	free(__atomic_exchange_n(&fdpath[fd], NULL, __ATOMIC_ACQ_REL));
}

/* augur_fd_closed reports a tracked file's close and clears its entry.
 * Call it before the real close, so a concurrent open that gets the same
 * number is never cleared by mistake. */
AUGUR_HIDDEN void augur_fd_closed(int fd)
{
	if (fd < 0 || fd >= FD_MAX || fdtab[fd].kind == FD_NONE)
		return;
	if (fdtab[fd].kind == FD_FILE && fdtab[fd].slot && !augur_vforked())
		augur_tee_closed(fd);
	struct fd_entry e = fdtab[fd];
	if (e.kind == FD_WRITE) {
		if (augur_vforked())
			return;
		char *abs = __atomic_exchange_n(&fdpath[fd], NULL, __ATOMIC_ACQ_REL);
		fdtab[fd] = (struct fd_entry){0};
		AUGUR_ERRNO_SAVE;
		augur_guard++;
		augur_write_closed(e, abs);
		augur_guard--;
		AUGUR_ERRNO_RESTORE;
		free(abs);
		return;
	}
	fd_forget(fd);
	if (e.kind != FD_FILE || !st.seg)
		return;
	AUGUR_ERRNO_SAVE;
	int slot = e.tier >= 0 ? e.tier : AUGUR_MAX_TIERS;
	__atomic_fetch_add(&st.seg->counters.bytes[slot], e.bytes, __ATOMIC_RELAXED);
	if (__atomic_load_n(&st.seg->leader.want_closes, __ATOMIC_RELAXED))
		emit(AUGUR_EV_CLOSE, e.tier, fd, e.bytes, "");
	AUGUR_ERRNO_RESTORE;
}

AUGUR_HIDDEN void augur_fd_closed_range(unsigned int first, unsigned int last)
{
	unsigned int hwm = (unsigned int)__atomic_load_n(&fd_hwm, __ATOMIC_RELAXED);
	if (first >= hwm || augur_vforked())
		return;
	for (unsigned int fd = first; fd <= last && fd < hwm; fd++)
		augur_fd_closed((int)fd);
}

AUGUR_HIDDEN void augur_fd_dup(int oldfd, int newfd)
{
	if (newfd < 0 || newfd >= FD_MAX || oldfd < 0 || oldfd >= FD_MAX)
		return;
	struct fd_entry e = fdtab[oldfd];
	if (e.kind == FD_FILE) {
		fd_track_file(newfd, e.tier, __atomic_load_n(&fdpath[oldfd], __ATOMIC_ACQUIRE));
		if (e.slot && !augur_vforked())
			fdtab[newfd].slot = (uint16_t)augur_tee_dup(oldfd, newfd);
	} else if (e.kind == FD_WRITE && !augur_vforked()) {
		augur_write_dup(oldfd, newfd);
	} else if (e.kind == FD_DIR) {
		fd_track_dir(newfd, dirs[e.slot].path);
	}
}

/* augur_fd_before_read lets a descriptor of an original move to a copy
 * published since it last looked. One load and compare otherwise. A
 * descriptor that tees makes its file's copy: there is none to move to. */
AUGUR_HIDDEN void augur_fd_before_read(int fd)
{
	if (fd >= 0 && fd < FD_MAX && fdtab[fd].kind == FD_FILE && fdtab[fd].tier < 0 &&
	    !fdtab[fd].slot && fdtab[fd].gen != publish_gen())
		augur_migrate(fd);
}

/*
 * augur_fd_at_end answers, without a request to the shared filesystem, a
 * read at or past the end of a file whose descriptor completed a tee
 * (intercept_tee.c sets the entry's end): the tee holds every byte the
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
	struct fd_entry *e = &fdtab[fd];
	if (!e->end)
		return 0;
	int at = 0;
	const char *abs = __atomic_load_n(&fdpath[fd], __ATOMIC_ACQUIRE);
	struct augur_hold *h = abs ? augur_hold(abs) : NULL;
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

/* ---- opening ----------------------------------------------------------- */

static int is_write_open(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY ||
	       (flags & (O_TRUNC | O_CREAT | O_APPEND)) ||
	       (flags & O_TMPFILE) == O_TMPFILE;
}

static int real_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	if (!REAL(openat)) {
		errno = ENOSYS;
		return -1;
	}
	return augur_real.openat(dirfd, path, flags, mode);
}

/* leader_ready says whether the tiers of this job have been validated:
 * until then no copy is served. */
static int leader_ready(void)
{
	return st.seg && __atomic_load_n(&st.seg->leader.ready, __ATOMIC_ACQUIRE);
}

/* owned_fd says whether fd is of kind (S_IFREG, S_IFDIR), this user's,
 * and not writable by group or others. */
static int owned_fd(int fd, mode_t kind, struct stat *sb)
{
	return REAL(fstat) && augur_real.fstat(fd, sb) == 0 && (sb->st_mode & S_IFMT) == kind &&
	       sb->st_uid == st.euid && !(sb->st_mode & 022);
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
	if (owned_fd(fd, S_IFREG, &sb))
		return 1;
	augur_real.close(fd);
	if (st.seg)
		__atomic_fetch_add(&st.seg->counters.untrusted, 1, __ATOMIC_RELAXED);
	char msg[PATH_MAX + 160];
	snprintf(msg, sizeof(msg), "tier %s: the copy of %s is owned by uid %u, mode %04o, not by you (uid %u) alone: not served",
		 st.tiers[t], abs, (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777), (unsigned)st.euid);
	augur_warn_once(&warned, msg);
	return 0;
}

/* fresh_copy compares the copy open on fd with its source, for
 * revalidate = 0: a copy whose source has another size or mtime (a writer
 * outside the job) is closed and dropped, and the original serves. */
static int fresh_copy(int fd, const char *abs)
{
	struct stat c, s;
	int r;
	__atomic_fetch_add(&st.seg->counters.revalidated, 1, __ATOMIC_RELAXED);
	while ((r = stat(abs, &s)) != 0 && errno == EINTR) /* a signal during a slow metadata request */
		;
	if (r == 0 && augur_real.fstat(fd, &c) == 0 && c.st_size == s.st_size &&
	    c.st_mtim.tv_sec == s.st_mtim.tv_sec && c.st_mtim.tv_nsec == s.st_mtim.tv_nsec)
		return 1;
	augur_real.close(fd);
	augur_invalidate_abs(abs);
	return 0;
}

/* open_copy tries the tiers, fastest first. Returns the fd of a copy and
 * sets *tier, or -1 when no tier has one (errno is then irrelevant). */
static int open_copy(const char *abs, int flags, int *tier)
{
	char tp[PATH_MAX];
	/* A copy is never a symlink: O_NOFOLLOW opens nothing else. */
	int tflags = (flags & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_NOFOLLOW;
	for (int t = 0; t < st.ntiers; t++) {
		if (augur_tier_path(t, abs, tp, sizeof(tp)) < 0)
			continue;
		int fd = real_openat(AT_FDCWD, tp, tflags, 0);
		/* tmpfs refuses O_DIRECT: the copy is still the right bytes
		 * without it. */
		if (fd < 0 && errno == EINVAL && (tflags & O_DIRECT))
			fd = real_openat(AT_FDCWD, tp, tflags & ~O_DIRECT, 0);
		if (fd >= 0 && (st.sealed[t] || trusted_copy(fd, t, abs))) {
			if (st.every_open && !fresh_copy(fd, abs))
				return -1; /* every tier's copy was as stale, and is gone */
			*tier = t;
			return fd;
		}
		if (fd < 0 && errno != ENOENT && errno != ENOTDIR && st.seg)
			__atomic_fetch_add(&st.seg->counters.tier_errors, 1, __ATOMIC_RELAXED);
	}
	return -1;
}

/* plain_source says whether the source of abs's copy in the fastest tier
 * holding one is known not to be a symlink: the publisher marks copies of
 * symlinks with user.augur.link. It asks by path, so it opens nothing.
 * Without xattrs nothing is known. */
static int plain_source(const char *abs)
{
	char tp[PATH_MAX], v;
	for (int t = 0; t < st.ntiers; t++) {
		if (augur_tier_path(t, abs, tp, sizeof(tp)) < 0)
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

/* futex_wait sleeps while *w is v, at most ns; futex_wake wakes every
 * process sleeping on w. The segment is shared between processes: not
 * FUTEX_PRIVATE. */
static void futex_wait(uint32_t *w, uint32_t v, uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
	syscall(SYS_futex, w, FUTEX_WAIT, v, &ts, NULL, 0);
}

static void futex_wake(uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static uint64_t now_ns(void);

/* PENDING_WAIT_NS bounds how long an open waits for a copy in flight it
 * did not ask for before it reads the original after all; REQUEST_WAIT_NS
 * how long it waits for the copy it asked for: a whole file of at most
 * wait_max bytes at the shared filesystem's pace, or the leader died. */
#define PENDING_WAIT_NS (200ull * 1000 * 1000)
#define REQUEST_WAIT_NS (30ull * 1000 * 1000 * 1000)

/* leader_runs says whether the leader that answers requests still runs. */
static int leader_runs(struct augur_segment *seg)
{
	pid_t pid = __atomic_load_n(&seg->leader.pid, __ATOMIC_ACQUIRE);
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* await_slot sleeps while slot p says the copy of the file hashed h is
 * asked for or being made, until deadline. Every change of state away
 * from those is followed by a wake; the sleeps are bounded all the same,
 * to notice a leader that died (checked at each wake, at least every
 * 100 ms). */
static void await_slot(struct augur_segment *seg, struct augur_pending *p, uint64_t h, uint64_t deadline)
{
	for (;;) {
		uint32_t s = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
		if (__atomic_load_n(&p->hash, __ATOMIC_ACQUIRE) != h ||
		    (s != AUGUR_PENDING_COPYING && s != AUGUR_PENDING_REQUESTED))
			return;
		uint64_t now = now_ns();
		if (now >= deadline || !leader_runs(seg))
			return;
		uint64_t nap = deadline - now;
		futex_wait(&p->state, s, nap < 100000000u ? nap : 100000000u);
	}
}

/*
 * wait_pending waits while the leader is writing the copy of abs (see
 * struct augur_pending) and reports whether it did: the caller then looks
 * for the copy again. The reader would otherwise fetch from the shared
 * filesystem what the prefetcher is fetching at that moment.
 */
static int wait_pending(const char *abs)
{
	struct augur_segment *seg = st.seg;
	if (!seg)
		return 0;
	uint64_t h = augur_fnv1a(abs);
	struct augur_pending *p = &seg->pending[h & (AUGUR_PENDING_SLOTS - 1)];
	if (__atomic_load_n(&p->hash, __ATOMIC_ACQUIRE) != h ||
	    __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != AUGUR_PENDING_COPYING)
		return 0;
	await_slot(seg, p, h, now_ns() + PENDING_WAIT_NS);
	__atomic_fetch_add(&seg->leader.waited, 1, __ATOMIC_RELAXED);
	return 1;
}

/* worth_asking says whether a file without a copy is large enough to
 * ask for one (wait_min): one the client's read-ahead fetches in a single
 * request is read from the original, and the leader copies it behind the
 * reader. The stat is the lookup the open would make anyway, and its
 * failure the open's to report. */
static int worth_asking(struct augur_segment *seg, const char *abs)
{
	uint64_t min = __atomic_load_n(&seg->leader.wait_min, __ATOMIC_ACQUIRE);
	if (!min)
		return 1;
	struct stat sb;
	return REAL(fstatat) && augur_real.fstatat(AT_FDCWD, abs, &sb, 0) == 0 &&
	       S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > min;
}

/*
 * request_copy asks the leader for a copy of abs, which has none, and
 * waits until it is published or refused; it reports whether it asked:
 * the caller then looks for the copy again. The copy is the shared
 * filesystem's one read of the file: a reader that read the original
 * while the leader copied it would read it twice, and a client that keeps
 * no page cache would fetch it twice (the reactive policy, wait_max). The
 * leader wakes on the ring's bell, not at its next poll.
 */
static int request_copy(const char *abs)
{
	struct augur_segment *seg = st.seg;
	if (!seg || !__atomic_load_n(&seg->leader.wait_max, __ATOMIC_ACQUIRE) ||
	    strlen(abs) >= AUGUR_EVENT_PATH || !worth_asking(seg, abs))
		return 0;
	uint64_t h = augur_fnv1a(abs);
	struct augur_pending *p = &seg->pending[h & (AUGUR_PENDING_SLOTS - 1)];
	uint32_t s = AUGUR_PENDING_NONE;
	if (!__atomic_compare_exchange_n(&p->state, &s, AUGUR_PENDING_CLAIMED, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return 0; /* another file's copy holds the slot */
	__atomic_store_n(&p->hash, h, __ATOMIC_RELEASE);
	__atomic_store_n(&p->state, AUGUR_PENDING_REQUESTED, __ATOMIC_RELEASE);
	if (!emit(AUGUR_EV_REQUEST, -1, -1, 0, abs)) {
		s = AUGUR_PENDING_REQUESTED;
		__atomic_compare_exchange_n(&p->state, &s, AUGUR_PENDING_NONE, 0,
					    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
		return 0;
	}
	__atomic_fetch_add(&seg->ring.bell, 1, __ATOMIC_RELEASE);
	futex_wake(&seg->ring.bell);
	await_slot(seg, p, h, now_ns() + REQUEST_WAIT_NS);
	__atomic_fetch_add(&seg->leader.requested, 1, __ATOMIC_RELAXED);
	return 1;
}

/* PUBLISH_WAIT_NS bounds how long a change of a file waits for the
 * leader's publication under way of a copy of it: a rename between two
 * loads, unless the leader is stopped or dies there. */
#define PUBLISH_WAIT_NS (1000ull * 1000 * 1000)

/* await_publishers waits while the leader is publishing a copy of a file
 * hashed as abs, whose gen the caller moved: that publication then either
 * saw the new gen and removed its copy, or renamed it into place before
 * the caller removed the copies (struct augur_hold). */
static void await_publishers(const char *abs)
{
	struct augur_hold *h = st.seg ? augur_hold(abs) : NULL;
	if (!h || !__atomic_load_n(&h->publishing, __ATOMIC_SEQ_CST))
		return;
	/* Counted before publishing is loaded again: a publication that ends
	 * after that load sees the count and wakes this one. */
	__atomic_fetch_add(&h->waiting, 1, __ATOMIC_SEQ_CST);
	uint64_t deadline = now_ns() + PUBLISH_WAIT_NS;
	for (;;) {
		uint32_t n = __atomic_load_n(&h->publishing, __ATOMIC_SEQ_CST);
		if (!n || now_ns() >= deadline || !leader_runs(st.seg))
			break;
		futex_wait(&h->publishing, n, 10 * 1000 * 1000);
	}
	__atomic_fetch_sub(&h->waiting, 1, __ATOMIC_SEQ_CST);
}

/* augur_invalidate_abs removes every tier copy of abs. Any process may
 * do it: a stale copy must disappear before the writer's open returns.
 * It first moves the file's gen, so that a copy being made now is
 * discarded rather than published (struct augur_writes), and last waits
 * for a publication under way to settle (await_publishers). It removes
 * through the tier's directory, opened without following a symlink and
 * checked, not by the whole path: a tier swapped for a symlink must not
 * lead the removal out of the tier. */
AUGUR_HIDDEN void augur_invalidate_abs(const char *abs)
{
	char tp[PATH_MAX];
	augur_bump_gen(abs);
	for (int t = 0; t < st.ntiers; t++) {
		if (augur_tier_path(t, abs, tp, sizeof(tp)) < 0 || !REAL(unlinkat))
			continue;
		int dir = real_openat(AT_FDCWD, st.tiers[t], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
		if (dir < 0)
			continue;
		struct stat sb;
		if (owned_fd(dir, S_IFDIR, &sb) &&
		    augur_real.unlinkat(dir, tp + strlen(st.tiers[t]) + 1, 0) == 0 && st.seg)
			__atomic_fetch_add(&st.seg->counters.invalidated, 1, __ATOMIC_RELAXED);
		augur_real.close(dir);
	}
	await_publishers(abs);
	if (st.seg)
		emit(AUGUR_EV_INVALIDATE, -1, -1, 0, abs);
}

AUGUR_HIDDEN void augur_invalidate_path(int dirfd, const char *path)
{
	char abs[PATH_MAX];
	AUGUR_ERRNO_SAVE;
	augur_guard++;
	if (resolve(dirfd, path, abs) == PATH_FILE)
		augur_invalidate_abs(abs);
	augur_guard--;
	AUGUR_ERRNO_RESTORE;
}

/* held says whether a process of the job may be writing abs: it is then
 * served from the original (counted). */
static int held(const char *abs)
{
	if (!augur_write_held(abs))
		return 0;
	__atomic_fetch_add(&st.seg->counters.held_opens, 1, __ATOMIC_RELAXED);
	return 1;
}

/* opened records a read-only open of a dataset file served from tier
 * (-1: the original), which tees if tee (augur_tee_begin's): descriptor
 * table, counters, event. */
static void opened(int fd, int tier, const char *abs, int tee)
{
	fd_track_file(fd, tier, abs);
	if (fd < FD_MAX)
		fdtab[fd].slot = (uint16_t)tee;
	if (!st.seg)
		return;
	struct augur_counters *c = &st.seg->counters;
	__atomic_fetch_add(&c->opens, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(tier >= 0 ? &c->hits[tier] : &c->misses, 1, __ATOMIC_RELAXED);
	augur_emit(AUGUR_EV_OPEN, tier, fd, 0, abs, tee ? AUGUR_EVF_TEE : 0);
}

AUGUR_HIDDEN int augur_open(int dirfd, const char *path, int flags, mode_t mode)
{
	char abs[PATH_MAX];
	augur_guard++;
	int cls = resolve(dirfd, path, abs);
	int fd;
	if (cls == PATH_OTHER) {
		fd = real_openat(dirfd, path, flags, mode);
	} else if (is_write_open(flags)) {
		/* The writer is registered before the real open and the copies
		 * dropped after: a copy a reader may open from then on, or the
		 * leader may publish, is none (intercept_write.c). */
		int w = -1;
		if (cls == PATH_FILE && (flags & O_TMPFILE) != O_TMPFILE) {
			AUGUR_ERRNO_SAVE;
			if (st.seg)
				__atomic_fetch_add(&st.seg->counters.write_opens, 1, __ATOMIC_RELAXED);
			w = augur_write_begin(abs);
			augur_invalidate_abs(abs);
			AUGUR_ERRNO_RESTORE;
		}
		fd = real_openat(dirfd, path, flags, mode);
		if (w >= 0) {
			AUGUR_ERRNO_SAVE;
			augur_write_end(w, fd, abs);
			AUGUR_ERRNO_RESTORE;
		}
	} else if (cls == PATH_ABOVE || (flags & (O_DIRECTORY | O_PATH))) {
		fd = real_openat(dirfd, path, flags, mode);
		if (fd >= 0) {
			AUGUR_ERRNO_SAVE;
			fd_track_dir(fd, abs);
			AUGUR_ERRNO_RESTORE;
		}
	} else {
		AUGUR_ERRNO_SAVE;
		int tier = -1;
		/* O_NOATIME fails with EPERM unless the caller owns the
		 * source (the copy's owner is the tier's writer): only the
		 * original can tell. O_NOFOLLOW must fail on a symlinked
		 * source: the copy says whether it stands for one. */
		int serve = leader_ready() && !(flags & O_NOATIME) &&
			    (!(flags & O_NOFOLLOW) || plain_source(abs)) && !held(abs);
		fd = serve ? open_copy(abs, flags & ~O_NOFOLLOW, &tier) : -1;
		if (fd < 0 && serve && (wait_pending(abs) || request_copy(abs)))
			fd = open_copy(abs, flags & ~O_NOFOLLOW, &tier);
		AUGUR_ERRNO_RESTORE;
		if (fd < 0)
			fd = real_openat(dirfd, path, flags, mode);
		if (fd >= 0) {
			AUGUR_ERRNO_SAVE;
			/* No copy, none made for this reader: its reads may
			 * make it (intercept_tee.c). */
			int tee = serve && tier < 0 ? augur_tee_begin(fd, abs) : 0;
			opened(fd, tier, abs, tee);
			AUGUR_ERRNO_RESTORE;
		}
	}
	augur_guard--;
	return fd;
}

AUGUR_HIDDEN int augur_write_prepare(int dirfd, const char *path, char *abs)
{
	int w = -1;
	AUGUR_ERRNO_SAVE;
	augur_guard++;
	if (resolve(dirfd, path, abs) == PATH_FILE) {
		if (st.seg)
			__atomic_fetch_add(&st.seg->counters.write_opens, 1, __ATOMIC_RELAXED);
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
	int cls = resolve(dirfd, path, abs);
	augur_guard--;
	AUGUR_ERRNO_RESTORE;
	return cls == PATH_FILE;
}

AUGUR_HIDDEN void augur_adopt(int fd, const char *path)
{
	char abs[PATH_MAX];
	if (fd < 0)
		return;
	AUGUR_ERRNO_SAVE;
	augur_guard++;
	if (resolve(AT_FDCWD, path, abs) == PATH_FILE) {
		int tier = -1;
		int copy = leader_ready() && !held(abs) ? open_copy(abs, O_RDONLY | O_CLOEXEC, &tier) : -1;
		if (copy >= 0) {
			int cloexec = augur_real.fcntl(fd, F_GETFD) & FD_CLOEXEC;
			if (augur_real.dup3(copy, fd, cloexec ? O_CLOEXEC : 0) < 0)
				tier = -1;
			augur_real.close(copy);
		}
		opened(fd, tier, abs, 0);
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
	struct fd_entry *e = &fdtab[fd];
	uint32_t gen = publish_gen();
	if (e->gen == gen)
		return;
	e->gen = gen;
	const char *abs = __atomic_load_n(&fdpath[fd], __ATOMIC_ACQUIRE);
	if (!abs || !leader_ready() || augur_write_held(abs))
		return;
	AUGUR_ERRNO_SAVE;
	augur_guard++;
	int tier = -1;
	int copy = open_copy(abs, O_RDONLY | O_CLOEXEC, &tier);
	if (copy >= 0) {
		off_t off = lseek(fd, 0, SEEK_CUR);
		int fl = augur_real.fcntl(fd, F_GETFL);
		int fdfl = augur_real.fcntl(fd, F_GETFD);
		if (off >= 0 && fl >= 0 && fdfl >= 0 && lseek(copy, off, SEEK_SET) == off &&
		    augur_real.fcntl(copy, F_SETFL, fl & (O_NONBLOCK | O_NOATIME)) >= 0 &&
		    augur_real.dup3(copy, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) == fd) {
			e->tier = (int8_t)tier;
			free(__atomic_exchange_n(&fdpath[fd], NULL, __ATOMIC_ACQ_REL));
			if (st.seg)
				__atomic_fetch_add(&st.seg->counters.migrated, 1, __ATOMIC_RELAXED);
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
	if (fd < 0 || fd >= FD_MAX || fdtab[fd].kind != FD_FILE || fdtab[fd].tier < 0)
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
	const char *t = st.tiers[fdtab[fd].tier];
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
	if (fd < 0 || fd >= FD_MAX || fdtab[fd].kind != FD_FILE || fdtab[fd].tier < 0)
		return 0;
	uint64_t v[2];
	AUGUR_ERRNO_SAVE;
	ssize_t n = REAL(fgetxattr) ? augur_real.fgetxattr(fd, "user.augur.src", v, sizeof(v)) : -1;
	AUGUR_ERRNO_RESTORE;
	if (n != (ssize_t)sizeof(v))
		return 0;
	*dev = v[0];
	*ino = v[1];
	return 1;
}
