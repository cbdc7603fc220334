/*
 * waits.c — the waits of an open for a copy: one the leader is making
 * (a prefetch in flight), one the open asks for (the reactive policy's
 * request), and a change of a file waiting for a publication of its copy
 * under way to settle. Sleeps are on futex words in the shared segment
 * and always bounded, and a leader that died ends them.
 */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>

/* augur_futex_wait sleeps while *w is v, at most ns; futex_wake wakes every
 * process sleeping on w. The segment is shared between processes: not
 * FUTEX_PRIVATE. */
AUGUR_HIDDEN void augur_futex_wait(uint32_t *w, uint32_t v, uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
	syscall(SYS_futex, w, FUTEX_WAIT, v, &ts, NULL, 0);
}

static void futex_wake(uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

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
		uint64_t now = augur_now_ns();
		if (now >= deadline || !leader_runs(seg))
			return;
		uint64_t nap = deadline - now;
		augur_futex_wait(&p->state, s, nap < 100000000u ? nap : 100000000u);
	}
}

/*
 * augur_wait_pending waits while the leader is writing the copy of the file keyed h (see
 * struct augur_pending) and reports whether it did: the caller then looks
 * for the copy again. The reader would otherwise fetch from the shared
 * filesystem what the prefetcher is fetching at that moment.
 */
AUGUR_HIDDEN int augur_wait_pending(uint64_t h)
{
	struct augur_segment *seg = augur_st.seg;
	if (!seg)
		return 0;
	struct augur_pending *p = &seg->pending[h & (AUGUR_PENDING_SLOTS - 1)];
	if (__atomic_load_n(&p->hash, __ATOMIC_ACQUIRE) != h ||
	    __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != AUGUR_PENDING_COPYING)
		return 0;
	await_slot(seg, p, h, augur_now_ns() + PENDING_WAIT_NS);
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
 * augur_request_copy asks the leader for a copy of abs (len bytes, keyed
 * h), which has none, and
 * waits until it is published or refused; it reports whether it asked:
 * the caller then looks for the copy again. The copy is the shared
 * filesystem's one read of the file: a reader that read the original
 * while the leader copied it would read it twice, and a client that keeps
 * no page cache would fetch it twice (the reactive policy, wait_max). The
 * leader wakes on the ring's bell, not at its next poll.
 */
AUGUR_HIDDEN int augur_request_copy(const char *abs, size_t len, uint64_t h)
{
	struct augur_segment *seg = augur_st.seg;
	if (!seg || !__atomic_load_n(&seg->leader.wait_max, __ATOMIC_ACQUIRE) ||
	    len >= AUGUR_EVENT_PATH || !worth_asking(seg, abs))
		return 0;
	struct augur_pending *p = &seg->pending[h & (AUGUR_PENDING_SLOTS - 1)];
	uint32_t s = AUGUR_PENDING_NONE;
	if (!__atomic_compare_exchange_n(&p->state, &s, AUGUR_PENDING_CLAIMED, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return 0; /* another file's copy holds the slot */
	__atomic_store_n(&p->hash, h, __ATOMIC_RELEASE);
	__atomic_store_n(&p->state, AUGUR_PENDING_REQUESTED, __ATOMIC_RELEASE);
	if (!augur_emit(AUGUR_EV_REQUEST, -1, -1, 0, abs, 0)) {
		s = AUGUR_PENDING_REQUESTED;
		__atomic_compare_exchange_n(&p->state, &s, AUGUR_PENDING_NONE, 0,
					    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
		return 0;
	}
	__atomic_fetch_add(&seg->ring.bell, 1, __ATOMIC_RELEASE);
	futex_wake(&seg->ring.bell);
	await_slot(seg, p, h, augur_now_ns() + REQUEST_WAIT_NS);
	__atomic_fetch_add(&seg->leader.requested, 1, __ATOMIC_RELAXED);
	return 1;
}

/* PUBLISH_WAIT_NS bounds how long a change of a file waits for the
 * leader's publication under way of a copy of it: a rename between two
 * loads, unless the leader is stopped or dies there. */
#define PUBLISH_WAIT_NS (1000ull * 1000 * 1000)

/* await_count sleeps while *publishing is not 0, at most
 * PUBLISH_WAIT_NS, counted in *waiting so that the publication that ends
 * wakes it (shim/writers.go, writeGuard.Commit). */
static void await_count(uint32_t *publishing, uint32_t *waiting)
{
	if (!__atomic_load_n(publishing, __ATOMIC_SEQ_CST))
		return;
	/* Counted before publishing is loaded again: a publication that ends
	 * after that load sees the count and wakes this one. */
	__atomic_fetch_add(waiting, 1, __ATOMIC_SEQ_CST);
	uint64_t deadline = augur_now_ns() + PUBLISH_WAIT_NS;
	for (;;) {
		uint32_t n = __atomic_load_n(publishing, __ATOMIC_SEQ_CST);
		if (!n || augur_now_ns() >= deadline || !leader_runs(augur_st.seg))
			break;
		augur_futex_wait(publishing, n, 10 * 1000 * 1000);
	}
	__atomic_fetch_sub(waiting, 1, __ATOMIC_SEQ_CST);
}

/* augur_await_publishers waits while the leader is publishing a copy of a file
 * hashed as abs, whose gen the caller moved: that publication then either
 * saw the new gen and removed its copy, or renamed it into place before
 * the caller removed the copies (struct augur_hold). */
AUGUR_HIDDEN void augur_await_publishers(const char *abs)
{
	struct augur_hold *h = augur_hold(augur_key(abs));
	if (h)
		await_count(&h->publishing, &h->waiting);
}

/* augur_await_all_publishers waits while the leader publishes any copy,
 * after the caller moved ns_gen (a directory renamed or removed). */
AUGUR_HIDDEN void augur_await_all_publishers(void)
{
	struct augur_segment *seg = augur_st.seg;
	if (seg)
		await_count(&seg->writes.publishing, &seg->writes.waiting);
}
