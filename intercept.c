/*
 * intercept.c — the entry of augur's preload, libaugur.so: the data plane.
 *
 * Loaded into every process of a job by LD_PRELOAD, it interposes the libc
 * calls that name or read a file and decides, at open time, which file the
 * kernel opens: a copy in a node-local tier, or the original. This file is
 * where the preload starts: it resolves the real libc symbols, names the
 * job, takes the configuration from a live leader or loads the Go half
 * (libaugur-go.so), and keeps the process's identity right across fork.
 * Everything else of the preload lives in preload/, a file per job:
 *
 *   preload/internal.h   what the preload's files share (real symbols, state, helpers)
 *   preload/segment.h    the shared-memory ABI with the Go half (shim/)
 *   preload/pathscan.h   is an absolute path already normal (SSE2)
 *   preload/job.c        the job's name and its private state in /dev/shm
 *   preload/config.c     the configuration Go publishes; is interception on
 *   preload/paths.c      path classification and a copy's path in a tier
 *   preload/ring.c       the event ring the leader reads
 *   preload/fdtable.c    the descriptor table
 *   preload/serve.c      which file a read-only open gets; moving to a copy
 *   preload/waits.c      waiting for a copy in flight or asked for
 *   preload/invalidate.c dropping a file's copies when it changes
 *   preload/writers.c    writers inside the job
 *   preload/tee.c        a first read that makes the copy
 *   preload/open.c       wrappers: the open family
 *   preload/names.c      wrappers: truncate, unlink, rename (by name)
 *   preload/read.c       wrappers: reads, mappings, close, dup, fcntl
 *   preload/stat.c       wrappers: the descriptor stat family, xattrs
 *   preload/stdio.c      wrappers: FILE and DIR streams
 *
 * Everything here runs in C only, in every process of a job, including
 * forked children where Go must never run. Until the configuration is
 * published, every call passes straight through to libc.
 */
#include "preload/internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct augur_real augur_real;
AUGUR_TLS int augur_guard;

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
	RESOLVE(remove, "remove");
	RESOLVE(rmdir, "rmdir");
	RESOLVE(link, "link");
	RESOLVE(linkat, "linkat");
	RESOLVE(symlink, "symlink");
	RESOLVE(symlinkat, "symlinkat");
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
	int hwm = augur_fd_after_fork();
	augur_tee_after_fork(hwm);
	augur_write_after_fork(parent, hwm);
}

static void atfork_prepare(void)
{
	AUGUR_ERRNO_SAVE;
	augur_tee_before_fork(__atomic_load_n(&augur_fd_hwm, __ATOMIC_RELAXED));
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

/* attach_leader takes the configuration a live leader published in the
 * job's segment. It reports whether it did. */
static int attach_leader(void)
{
	struct augur_segment *seg = augur_map_segment();
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
	augur_st.pid = getpid();
	augur_st.euid = geteuid();
	self_pid = augur_st.pid;
	const char *off = getenv("AUGUR_DISABLE");
	if (off && *off && strcmp(off, "0") != 0) {
		__atomic_store_n(&augur_st.cfg, AUGUR_CFG_OFF, __ATOMIC_RELEASE);
	} else {
		augur_make_job_id();
		if (!attach_leader())
			load_control_plane();
	}
	pthread_atfork(atfork_prepare, NULL, atfork_child);
	augur_guard--;
}

