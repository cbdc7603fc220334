/*
 * config.c — the configuration the Go half publishes (libaugur/main.go,
 * or a live leader's segment through intercept.c's attach_leader): the
 * dataset roots, the tiers and whether each is sealed, the segment; and
 * the activity check every wrapper asks first (augur_active), which waits
 * once, bounded, for that configuration. The augur_* functions exported
 * here are the Go half's calls.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>
#include <time.h>

struct augur_state augur_st;

AUGUR_EXPORT const char *augur_job(void) { return augur_st.job; }

AUGUR_EXPORT int augur_disabled(void)
{
	return __atomic_load_n(&augur_st.cfg, __ATOMIC_ACQUIRE) == AUGUR_CFG_OFF;
}

/* augur_add_root registers a dataset root; path must be absolute and
 * normalised (Go does that). Returns -1 when the table is full. */
AUGUR_EXPORT int augur_add_root(const char *path)
{
	size_t n = strlen(path);
	if (augur_st.nroots >= AUGUR_MAX_ROOTS || n == 0 || n >= PATH_MAX || path[0] != '/')
		return -1;
	while (n > 1 && path[n - 1] == '/')
		n--;
	memcpy(augur_st.roots[augur_st.nroots], path, n);
	augur_st.roots[augur_st.nroots][n] = 0;
	augur_st.rootlen[augur_st.nroots] = n == 1 ? 0 : n; /* "/" matches every path */
	augur_st.nroots++;
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
		return sb.st_uid == augur_st.euid && !(sb.st_mode & 022);
	return (sb.st_uid == 0 || sb.st_uid == augur_st.euid) && (!(sb.st_mode & 022) || (sb.st_mode & S_ISVTX));
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
	if (augur_st.ntiers >= AUGUR_MAX_TIERS || strlen(path) >= PATH_MAX - 64)
		return -1;
	struct stat sb;
	if (*path && lstat(path, &sb) == 0 &&
	    (!S_ISDIR(sb.st_mode) || sb.st_uid != augur_st.euid || (sb.st_mode & 022)))
		path = "";
	augur_st.sealed[augur_st.ntiers] = (uint8_t)sealed(path);
	augur_st.tierlen[augur_st.ntiers] = strlen(path);
	strcpy(augur_st.tiers[augur_st.ntiers++], path);
	return 0;
}

AUGUR_EXPORT void augur_set_segment(struct augur_segment *seg)
{
	augur_st.seg = seg;
	if (!seg)
		return;
	__atomic_fetch_add(&seg->counters.processes, 1, __ATOMIC_RELAXED);
	augur_guard++;
	augur_write_adopt();
	augur_guard--;
}

/* augur_set_every_open makes every open served from a tier compare the
 * copy with its source first (revalidate = 0). */
AUGUR_EXPORT void augur_set_every_open(int on) { augur_st.every_open = on; }

/* augur_start turns interception on (on = 1) or leaves this process in
 * pass-through for good (on = 0). Either way, waiting hooks go on. */
AUGUR_EXPORT void augur_start(int on)
{
	if (on)
		augur_make_prefixes();
	__atomic_store_n(&augur_st.cfg, on ? AUGUR_CFG_ON : AUGUR_CFG_OFF, __ATOMIC_RELEASE);
}

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
	if (__atomic_load_n(&stopped_waiting, __ATOMIC_RELAXED) || getpid() != augur_st.pid)
		return 0;
	AUGUR_ERRNO_SAVE;
	struct timespec nap = {0, 200 * 1000};
	for (int i = 0; i < 10000; i++) { /* 2 s */
		int c = __atomic_load_n(&augur_st.cfg, __ATOMIC_ACQUIRE);
		if (c != AUGUR_CFG_PENDING) {
			AUGUR_ERRNO_RESTORE;
			return c == AUGUR_CFG_ON;
		}
		nanosleep(&nap, NULL);
	}
	__atomic_store_n(&stopped_waiting, 1, __ATOMIC_RELAXED);
	augur_warn_once(&warned, "control plane not ready after 2s; passing through until it is");
	AUGUR_ERRNO_RESTORE;
	return 0;
}

AUGUR_HIDDEN int augur_active_wait(void) { return wait_for_go() && augur_st.nroots > 0; }

