/*
 * ring.c — the event ring: every open, close and request of every process
 * of the job, appended lock-free to a ring in the job's segment, which
 * the leader reads (shim/ring.go) to learn each rank's cursor.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

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

/* seen_tail is a tail of the ring this process read: never past the
 * leader's, which only moves on. A slot before it plus AUGUR_RING_SLOTS
 * is free without a look at the tail, a word the leader writes at every
 * event (each look cost a producer the line from the leader's core). */
static uint64_t seen_tail;

/* augur_emit_n appends one event; when the ring is full it drops the event
 * and counts it: the leader is behind, and training must not wait for it. */
AUGUR_HIDDEN int augur_emit_n(uint32_t kind, int tier, int fd, uint64_t bytes, const char *abs, size_t len,
			      uint16_t flags)
{
	struct augur_segment *seg = augur_st.seg;
	if (!seg)
		return 0;
	struct augur_ring *r = &seg->ring;
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
	for (;;) {
		uint64_t tail = __atomic_load_n(&seen_tail, __ATOMIC_RELAXED);
		if (head - tail >= AUGUR_RING_SLOTS) {
			tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
			__atomic_store_n(&seen_tail, tail, __ATOMIC_RELAXED);
		}
		if (head - tail >= AUGUR_RING_SLOTS) {
			__atomic_fetch_add(&seg->counters.ring_dropped, 1, __ATOMIC_RELAXED);
			return 0;
		}
		if (__atomic_compare_exchange_n(&r->head, &head, head + 1, 1,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			break;
	}
	struct augur_event *ev = &r->slots[head & (AUGUR_RING_SLOTS - 1)];
	ev->bytes = bytes;
	ev->kind = kind;
	ev->tier = tier;
	ev->pid = (int32_t)augur_self_pid();
	ranks_of(ev->pid, &ev->rank, &ev->local);
	ev->origin = (int32_t)augur_st.pid; /* augur_st.pid is set at load: a forked child keeps its parent's */
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

