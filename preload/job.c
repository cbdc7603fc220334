/*
 * job.c — the job's name and its private state in /dev/shm: the job id
 * every process of the job shares, the directory the leader keeps there,
 * its leader lock and shared segment (mapped only when a live leader has
 * published the configuration in it), and the paths of the tee files.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* augur_make_job_id names the job: AUGUR_JOB, or 64 random bits, so that no
 * other user can guess the name of its state in /dev/shm and take it
 * first (shim/segment.go). */
AUGUR_HIDDEN void augur_make_job_id(void)
{
	const char *job = getenv("AUGUR_JOB");
	if (job && *job && strlen(job) < sizeof(augur_st.job)) {
		strcpy(augur_st.job, job);
		return;
	}
	uint64_t r = 0;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		struct timespec ts; /* no entropy yet (early boot): still not a pid and time alone */
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)(uintptr_t)&ts ^ (uint64_t)augur_st.pid << 40;
	}
	snprintf(augur_st.job, sizeof(augur_st.job), "%016llx", (unsigned long long)r);
	/* Children inherit it, so every process of the job finds the same
	 * segment; this runs before main, while only this thread exists. */
	setenv("AUGUR_JOB", augur_st.job, 1);
	setenv("AUGUR_JOB_MADE", augur_st.job, 1); /* not the nodes' shared job id (shim.JobMadeVar) */
}

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
	return fstat(fd, &sb) == 0 && (sb.st_mode & S_IFMT) == kind && sb.st_uid == augur_st.euid &&
	       (sb.st_mode & 077) == 0;
}

static int job_dir(void)
{
	char path[128];
	snprintf(path, sizeof(path), "/dev/shm/augur.%u.%s", (unsigned)augur_st.euid, augur_st.job);
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && !private_fd(fd, S_IFDIR)) {
		close(fd);
		return -1;
	}
	return fd;
}

AUGUR_HIDDEN int augur_tee_path(pid_t pid, uint64_t n, char *out, size_t cap)
{
	int k = snprintf(out, cap, "/dev/shm/augur.%u.%s/" AUGUR_TEE_DIR "/%d.%llu", (unsigned)augur_st.euid, augur_st.job,
			 (int)pid, (unsigned long long)n);
	return k > 0 && (size_t)k < cap ? 0 : -1;
}

AUGUR_HIDDEN int augur_tee_pool_path(int slot, char *out, size_t cap)
{
	int k = snprintf(out, cap, "/dev/shm/augur.%u.%s/" AUGUR_TEE_DIR "/pool.%d", (unsigned)augur_st.euid, augur_st.job, slot);
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

/* augur_map_segment maps the job's segment if a live leader has published the
 * configuration in it, or returns NULL. */
AUGUR_HIDDEN struct augur_segment *augur_map_segment(void)
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
