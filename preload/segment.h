/*
 * segment.h — the shared-memory ABI between augur's data plane (C, in
 * every process of a job) and its control plane (Go, in the job's leader).
 *
 * One segment per job and node lives in /dev/shm/augur.<uid>.<job>/segment,
 * in a directory private to the user (shim/segment.go says why). Every
 * process of the job maps it MAP_SHARED: the leader, forked workers (they
 * inherit the mapping), exec'd and spawned children (they find it again
 * through AUGUR_JOB in their environment). The data plane only ever
 * appends events and bumps counters with atomics; the leader is the only
 * reader of the ring. Changing any layout here means bumping
 * AUGUR_ABI_VERSION: a process that finds another version passes through.
 */
#ifndef AUGUR_PRELOAD_SEGMENT_H
#define AUGUR_PRELOAD_SEGMENT_H

#include <stdint.h>

#define AUGUR_MAGIC 0x52554755u /* "AUGR" */
#define AUGUR_ABI_VERSION 24
#define AUGUR_MAX_TIERS 4
#define AUGUR_TEE_POOL 16 /* struct augur_leader.tee_pool */
#define AUGUR_RING_SLOTS 16384 /* power of two */
#define AUGUR_EVENT_PATH 208
#define AUGUR_PENDING_SLOTS 4096 /* power of two */
#define AUGUR_MAX_ROOTS 16
#define AUGUR_WRITER_SLOTS 4096 /* power of two */
#define AUGUR_HOLD_SLOTS 8192   /* power of two */
#define AUGUR_RECENT_WRITES 64  /* power of two */
#define AUGUR_CONFIG_PATH 1024
#define AUGUR_IDENT_LEVELS 9        /* struct augur_ident: levels of 2^10 .. 2^18 buckets */
#define AUGUR_IDENT_BUCKETS0 1024u  /* the first level's buckets */
#define AUGUR_IDENT_BUCKETS (AUGUR_IDENT_BUCKETS0 * ((1u << AUGUR_IDENT_LEVELS) - 1))
#define AUGUR_IDENT_WAYS 4
#define AUGUR_IDENT_COUNTS 4096 /* power of two; struct augur_writes.ident_count */
#define AUGUR_PAGE_SHIFT 16   /* a page, 64 KiB: a read's bytes become the copy a page at a time */
#define AUGUR_BLOCK_SHIFT 22  /* a block, 4 MiB (64 pages): large files are tiered a block at a time */
#define AUGUR_BFILES 4096     /* power of two; struct augur_bfile */
#define AUGUR_BWORDS (1u << 21) /* struct augur_blocks.words */
#define AUGUR_PRESENT_SHIFT 25 /* struct augur_present: 2^25 buckets of a bit per tier */
#define AUGUR_CHECKED_SLOTS (1u << 18) /* power of two; struct augur_checked */
#define AUGUR_CHECKED_EPOCH_NS 100000000ull /* 100 ms: struct augur_checked */

/* Event kinds. */
enum {
	AUGUR_EV_OPEN = 1,       /* a dataset file was opened read-only */
	AUGUR_EV_CLOSE = 2,      /* a tracked descriptor was closed */
	AUGUR_EV_INVALIDATE = 3, /* a dataset file was opened for writing */
	AUGUR_EV_REQUEST = 4,    /* an open found no copy and waits while the
				  * leader makes one (struct augur_pending) */
	AUGUR_EV_TEED = 5,       /* a reader's tee holds the whole file: pid and
				  * bytes (the tee's number) name it (struct
				  * augur_tee_header) */
	AUGUR_EV_UNTEED = 6,     /* a reader abandoned its tee: the file is one
				  * read from its original, with no copy coming */
	AUGUR_EV_STALE = 7,      /* a process of the job writes or removes, by
				  * another name, a file a tier holds a copy of:
				  * bytes is the key of the copy's source path
				  * (struct augur_hold, AUGUR_HOLD_STALE), path
				  * the file's "<dev>:<ino>" */
	AUGUR_EV_STREAM = 8,     /* a descriptor reads a large file in order:
				  * bytes is where its reads have reached; the
				  * leader copies the blocks ahead of it */
	AUGUR_EV_READ = 9,       /* a read of a large file (when the leader's
				  * want_reads says so): bytes is its offset,
				  * tier its length (at most INT32_MAX); the
				  * leader learns which samples it read */
};

/* Event flags. */
enum {
	AUGUR_EVF_TRUNCATED = 1, /* path did not fit: the file is not known */
	AUGUR_EVF_TEE = 2,       /* OPEN: the reader tees the file; a TEED or
				  * UNTEED event follows */
	AUGUR_EVF_TREE = 4,      /* INVALIDATE: path is a directory renamed or
				  * removed; every copy under it went to the
				  * tiers' trash/ */
};

/* Which OPEN events the leader reads (struct augur_leader.want_opens):
 * those of every open served from a tier (the clairvoyant policy follows
 * each), those of an open served from a tier whose copy is due to be
 * compared with its source (revalidation; augur_checked), those of opens
 * of the original (the reactive policy copies the file; the clairvoyant
 * one reads every open). */
enum {
	AUGUR_WANT_SERVED = 1,
	AUGUR_WANT_ORIGINAL = 2,
	AUGUR_WANT_DUE = 4,
};

/*
 * One access, 256 bytes. seq is written last (release) and is the slot's
 * sequence number + 1, so the reader knows the slot is complete.
 */
struct augur_event {
	uint64_t seq;
	uint64_t bytes;  /* CLOSE: bytes read through the descriptor */
	uint32_t kind;
	int32_t tier;    /* tier that served it, -1 = the original */
	int32_t pid;
	int32_t rank;    /* the global rank its environment names, -1: none */
	int32_t local;   /* the node-local rank its environment names, -1: none */
	int32_t origin;  /* the job's process it was forked from (itself if exec'd) */
	int32_t fd;
	uint16_t flags;
	uint16_t pathlen;
	char path[AUGUR_EVENT_PATH]; /* absolute source path, NUL-terminated */
};

/* Counters kept by the data plane, in every process, with atomics. */
struct augur_counters {
	/* Read-only opens of dataset files (their sum: one atomic add per
	 * open, not two): */
	uint64_t hits[AUGUR_MAX_TIERS];    /* ... served from tier i */
	uint64_t misses;                   /* ... served from the original */
	uint64_t bytes[AUGUR_MAX_TIERS + 1]; /* read bytes by tier; last = original */
	uint64_t write_opens;              /* write opens of dataset files */
	uint64_t invalidated;              /* tier copies removed by write opens */
	uint64_t tier_errors;              /* tier copy present but unopenable */
	uint64_t untrusted;                /* tier copies refused: not the user's own */
	uint64_t ring_dropped;             /* events lost: ring full */
	uint64_t untracked;                /* descriptors too large to track */
	uint64_t migrated;                 /* open descriptors moved to a new copy */
	uint64_t processes;                /* processes that attached */
	uint64_t revalidated;              /* copies compared with their source at open (revalidate = 0) */
	uint64_t held_opens;               /* opens served from the original: the file is open for writing */
	uint64_t aliased;                  /* writes and removals, by another name, of files with copies */
	uint64_t trees;                    /* directories renamed or removed: their copies out of service */
	uint64_t block_bytes[AUGUR_MAX_TIERS]; /* bytes of large files read from tier i's blocks */
	uint64_t block_teed;               /* pages a reader's read of the original made present */
	uint64_t block_misses;             /* reads of large files that went to the original, in part or whole */
};

/* State published by the leader for `augur stat`. */
struct augur_leader {
	int32_t pid;         /* leader's pid, 0 = none */
	uint32_t ready;      /* 1 once the tiers are validated */
	uint64_t started_ns; /* CLOCK_REALTIME */
	uint64_t ended_ns;   /* CLOCK_REALTIME, 0 while it runs */
	uint64_t tier_used[AUGUR_MAX_TIERS];
	uint64_t tier_files[AUGUR_MAX_TIERS];
	uint64_t tier_capacity[AUGUR_MAX_TIERS];
	uint64_t publish_gen;   /* bumped after every publish: descriptors of
				 * originals look for a new copy when it moves */
	uint64_t inflight;      /* copies queued or being written */
	uint64_t waited;        /* opens that waited for a copy in flight */
	uint64_t wait_max;      /* an open that finds no copy of a file asks
				 * the leader for one and waits for it (the
				 * leader copies files of at most these bytes
				 * at once); 0: opens never ask */
	uint64_t wait_min;      /* with wait_max: an open asks only for a file
				 * of more than these bytes (0: any), which it
				 * stats first; where the client keeps a page
				 * cache, the file its read-ahead fetches in
				 * one request comes no sooner from a copy */
	uint64_t requested;     /* opens that asked for their copy and waited */
	uint64_t tee_max;       /* an open that finds no copy of a file of at
				 * most these bytes, and does not wait for
				 * one, tees its reads into the copy (struct
				 * augur_tee_header); 0: none does */
	uint64_t teed;          /* tees that held the whole file */
	uint64_t untee;         /* tees abandoned: the reader stopped short,
				 * read out of order or through a call that
				 * does not tee */
	uint64_t client_cache;  /* reactive: 0 not known yet; 1 the shared
				 * filesystem's client keeps a page cache, and
				 * opens stop asking (wait_max 0); 2 it does not */
	uint64_t stale_removed; /* stale copies dropped at validation */
	uint64_t copies;        /* copies published by the control plane */
	uint64_t copies_held;   /* copies not made, or discarded: the file was being written */
	uint64_t copy_bytes;
	/* The clairvoyant policy's view of its prediction. */
	uint64_t predicted;     /* files the prediction covers */
	uint64_t sized;         /* of them, files stat'ed: planning is done at predicted */
	uint64_t pred_hits;     /* predicted opens served from a tier */
	uint64_t pred_late;     /* predicted opens whose prefetch was still running */
	uint64_t pred_misses;   /* predicted opens that were not prefetched */
	uint64_t unpredicted;   /* opens the prediction did not expect there */
	uint64_t accuracy_ppm;  /* expected / observed opens, recent window, x1e6 */
	uint64_t staged_files;  /* copies staged for one read, in tier 0 */
	uint64_t staged_bytes;
	uint64_t stage_budget;  /* bytes of tier 0 staging may take */
	uint64_t fell_back;     /* 1: no prediction could be made; reactive */
	uint64_t events;        /* events consumed */
	uint64_t lost;          /* slots skipped: a producer died mid-write */
	uint64_t want_closes;   /* 1: the policy reads CLOSE events (clairvoyant:
				 * staged files are dropped once read); else
				 * the data plane does not send them */
	uint64_t want_reads;    /* 1: the policy reads READ events of large
				 * files (clairvoyant: samples inside files) */
	uint64_t want_opens;    /* the OPEN events someone reads, AUGUR_WANT_*;
				 * the data plane sends no other */
	uint64_t checked_epoch; /* CLOCK_MONOTONIC / AUGUR_CHECKED_EPOCH_NS at the
				 * leader's last poll (struct augur_checked) */
	uint64_t checked_trust; /* a mark younger than these epochs is trusted; 0:
				 * none is (revalidate under 200 ms, or 0) */
	uint64_t copying;       /* 1: the leader copies files into its tiers while
				 * it runs (reactive, clairvoyant): an open that
				 * finds no copy may wait for one or tee, and a
				 * descriptor of an original keeps its path, to
				 * move to a copy published later or read a large
				 * file's blocks; 0 (static): none of these */
	char policy[16];
	char tiers[AUGUR_MAX_TIERS][256];
	/* What each stream (rank) of the clairvoyant policy was found to
	 * read: JSON, streams_len bytes packed into words, written under a
	 * sequence lock (streams_gen odd while it is being written). Only
	 * the leader writes it and only `augur stat` reads it. */
	uint64_t streams_gen;
	uint64_t streams_len;
	uint64_t streams[4096];
	/* A job of several nodes (peers): copies filled from other nodes'
	 * tiers and served to them, and requests that failed. */
	uint64_t peer_files_in;
	uint64_t peer_bytes_in;
	uint64_t peer_files_out;
	uint64_t peer_bytes_out;
	uint64_t peer_errors;
	/* Per peer and the performance model: JSON, as streams above. */
	uint64_t peers_gen;
	uint64_t peers_len;
	uint64_t peers[1024];
	/* Files the leader makes ready for tees (<job directory>/tee/pool.<k>,
	 * their pages allocated): a reader that begins a tee takes one
	 * (READY to TAKEN), moves it to its tee's name and gives the slot
	 * back (EMPTY), so that its writes find their pages there. */
	uint32_t tee_pool[AUGUR_TEE_POOL];
	uint64_t tee_pooled; /* tees begun in a file of the pool */
	/* Large files tiered in blocks (struct augur_blocks). */
	uint64_t big_files;       /* entered */
	uint64_t big_streams;     /* descriptors found reading in order */
	uint64_t big_ahead;       /* blocks the leader copied ahead of them */
	uint64_t big_ahead_bytes;
	uint64_t big_ahead_hits;  /* of them, blocks a reader read from the tier */
	uint64_t big_filled;      /* blocks copied to fill files read half */
	uint64_t big_filled_bytes;
	uint64_t big_predicted;   /* blocks copied ahead of predicted samples */
	uint64_t big_predicted_bytes;
	uint64_t big_blocks[AUGUR_MAX_TIERS]; /* blocks reserved in tier i now */
	/* Files augur cannot cache, each named once with why: JSON, as
	 * streams above. */
	uint64_t uncached_gen;
	uint64_t uncached_len;
	uint64_t uncached[512];
	/* The dataset roots the leader measured against its fastest tier,
	 * and whether it passes them through (shim/sources.go): JSON, as
	 * streams above. */
	uint64_t sources_gen;
	uint64_t sources_len;
	uint64_t sources[256];
};

/*
 * Copies in flight: slot hash & (SLOTS-1) holds the key (augur_path_key) of a
 * source whose copy is being made. A reader that finds no copy but its
 * file COPYING here waits (bounded) for the copy instead of reading the
 * shared filesystem a second time. A reader that finds no copy and the
 * slot free may ask for one (wait_max): it claims the slot (CLAIMED, by
 * compare-and-swap from NONE), writes the hash, sets REQUESTED and sends
 * an AUGUR_EV_REQUEST event; the leader answers COPYING (then NONE when
 * the copy is published or abandoned) or NONE (no copy: the reader reads
 * the original). A reader that tees the file (struct augur_tee_header)
 * claims the slot the same way and holds it TEEING, with its pid, until
 * it hands the tee to the leader (COPYING) or abandons it (NONE); the
 * leader frees the slot of a teeing process that died. Every change away
 * from REQUESTED or COPYING is followed by a futex wake of state: readers
 * sleep on it. A collision just loses the hint.
 */
enum {
	AUGUR_PENDING_NONE = 0,
	AUGUR_PENDING_COPYING = 1,
	AUGUR_PENDING_REQUESTED = 2,
	AUGUR_PENDING_CLAIMED = 3,
	AUGUR_PENDING_TEEING = 4,
};
struct augur_pending {
	uint64_t hash;
	uint32_t state;
	int32_t pid; /* TEEING: the reader's process */
};

/*
 * A first read's copy (tee.c, shim/tee.go). A reader that found
 * no copy of a file of at most tee_max bytes, and did not wait for one,
 * writes what its reads of the original return into
 * <job directory>/tee/<pid>.<n>: the file's bytes at their offsets, this
 * header after them, at AUGUR_TEE_HEADER(size) (the first multiple of
 * 64 KiB at or past the size: a mapping of the bytes never shows it).
 * Once it has read every byte in order it sends AUGUR_EV_TEED, and the
 * leader cuts the header off and moves the file into the tier as the
 * copy, if the file did not change since the reader's open (gen).
 */
#define AUGUR_TEE_DIR "tee"
enum { AUGUR_POOL_EMPTY = 0, AUGUR_POOL_READY = 1, AUGUR_POOL_TAKEN = 2 };
#define AUGUR_TEE_HEADER(size) (((size) + 65535) & ~(uint64_t)65535)
#define AUGUR_TEE_MAGIC 0x3165655472756761ull /* "augurTe1" */
struct augur_tee_header {
	uint64_t magic;
	uint64_t dev, ino; /* the original, as the reader's descriptor saw it at open */
	uint64_t size;
	int64_t atime_sec, atime_nsec;
	int64_t mtime_sec, mtime_nsec;
	int64_t ctime_sec, ctime_nsec;
	uint32_t mode;
	uint32_t gen;  /* the file's change generation (struct augur_hold) at open */
	uint32_t link; /* 0: the descriptor's file is at the path itself (no
			* symlink on the way); 1: the path may end in one */
	uint32_t pad;
};

/*
 * The job's configuration as the data plane needs it, written by the
 * leader before it sets published. A process that starts while a live
 * leader has published it takes it from here and never starts the Go
 * runtime (intercept.c, attach_leader).
 */
struct augur_config {
	uint32_t published;
	uint32_t nroots;
	uint32_t ntiers;
	uint32_t every_open; /* 1: compare a copy with its source at every open (revalidate = 0) */
	char roots[AUGUR_MAX_ROOTS][AUGUR_CONFIG_PATH]; /* every form of every root */
	char tiers[AUGUR_MAX_TIERS][AUGUR_CONFIG_PATH];
};

/*
 * Writers inside the job. Every descriptor through which a process of
 * the job may write a dataset file, and every shared writable mapping of
 * one, is registered in slot[] while it exists (writers.c); hold[]
 * counts them by the key of the file's path. While a file's count
 * is not zero no copy of it is served, and the leader neither starts nor
 * publishes one. gen is bumped by every change of the file the data plane
 * sees (a write open, a close of a write descriptor, truncate, unlink,
 * rename): a copy whose file's gen moved while it was made is discarded.
 * publishing counts the leader's publications under way of files hashed
 * here (shim/writers.go, writeGuard.Commit): each checks gen, renames
 * the copy into place, and checks gen again, removing the copy if it
 * moved. A change waits, after it has dropped the copies, until none is
 * under way (augur_invalidate_abs), so no copy of the old file is in
 * place once the change returns. A hash collision only makes another
 * file wait for the original, or a change wait for another's rename.
 *
 * A copy belongs to a file, not a name: every write descriptor of a
 * regular file, whatever its path, has a slot with the file's device and
 * inode (key 0 where the path is no dataset file's), counted in
 * ident_count by the hash of (dev, ino), and the leader never publishes a
 * copy of a file so counted (it inserts the copy's identity in ident[]
 * first, and the writer looks there after counting itself: one of the two
 * sees the other). A writer, or a removal, that finds its file in ident[]
 * under another path's key marks that key's hold stale
 * (AUGUR_HOLD_STALE in writers): its copies are served to no one, and the
 * leader removes them and clears the mark once no process writes the
 * file. A directory renamed or removed under a root moves ns_gen: a
 * publication under way at that moment (publishing, all files) removes
 * its copy rather than leave one of the old name in place.
 */
#define AUGUR_HOLD_STALE 0x80000000u
enum { AUGUR_WRITER_FREE = 0, AUGUR_WRITER_FILLING = 1, AUGUR_WRITER_USED = 2 };
struct augur_writer {
	uint32_t state;
	int32_t pid;
	int32_t fd;        /* -1: a mapping */
	uint32_t pad;
	uint64_t key;      /* of the source path (augur_path_key) */
	uint64_t dev, ino; /* the file, to find the descriptor again after exec */
	uint64_t addr, len; /* a mapping's range */
};

struct augur_hold {
	uint32_t writers;
	uint32_t gen;
	uint32_t publishing;
	uint32_t waiting; /* changes waiting for publishing to reach 0: only then is it woken */
};

/* A write descriptor closed lately: a process started by vfork or
 * posix_spawn (no fork handlers run) that inherited a write descriptor of
 * the file, its parent's closed meanwhile, registers it when it starts. */
struct augur_recent {
	uint64_t dev, ino, key;
	uint64_t closed_ns; /* CLOCK_MONOTONIC */
};

struct augur_writes {
	uint64_t active; /* writers of dataset paths and stale marks now, in
			  * slot[] or not: 0 means no hold anywhere */
	uint64_t lost;   /* writers that found slot[] full: counted in hold[], but
			  * not found again after an exec, nor released at death */
	uint64_t recent_next;
	struct augur_recent recent[AUGUR_RECENT_WRITES];
	uint64_t stale;    /* holds marked AUGUR_HOLD_STALE now */
	uint64_t ns_gen;   /* directories renamed or removed under a root */
	uint32_t publishing; /* the leader's publications under way, all files */
	uint32_t waiting;    /* tree changes waiting for publishing to reach 0 */
	uint32_t ident_levels; /* levels of ident[] in use (struct augur_ident) */
	uint32_t pad;
	uint32_t ident_count[AUGUR_IDENT_COUNTS]; /* slots with (dev, ino), by their hash */
	struct augur_hold hold[AUGUR_HOLD_SLOTS];
	struct augur_writer slot[AUGUR_WRITER_SLOTS];
};

/*
 * The identity of every copy's source: device and inode, and the key
 * (augur_path_key) of the source path the copy is found by; key 0 is a free
 * entry. The table grows by levels, each twice the last (ident_levels in
 * use, raised by the leader when every level before is full where a file
 * would go), so that a job of a few thousand copies touches a few pages
 * of it, and one of a million 48 MiB. In each level a file is in one of
 * two buckets of AUGUR_IDENT_WAYS entries (augur_ident_bucket): a lookup
 * reads two cache lines per level in use. Only the leader inserts
 * (before it publishes a copy, and for the copies it finds at start);
 * whoever removes a copy may remove its entry. An entry whose copy is
 * gone only makes a writer of its file do what it need not.
 */
struct augur_ident {
	uint64_t dev, ino;
	uint64_t key;
};

static inline uint64_t augur_ident_hash(uint64_t dev, uint64_t ino)
{
	uint64_t h = (ino ^ (dev * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
	return h ^ (h >> 29);
}

/* augur_ident_bucket is bucket which (0 or 1) of the file (dev, ino) in
 * level (0 .. AUGUR_IDENT_LEVELS-1): an index of augur_segment.ident. */
static inline uint32_t augur_ident_bucket(uint64_t dev, uint64_t ino, int level, int which)
{
	uint64_t h = augur_ident_hash(dev, ino);
	uint32_t size = AUGUR_IDENT_BUCKETS0 << level;
	return AUGUR_IDENT_BUCKETS0 * ((1u << level) - 1) + (uint32_t)((which ? h >> 32 : h) & (size - 1));
}

/*
 * augur_path_key is the key of a dataset file in every table of the
 * segment (pending, writes, blocks, identities, presence): a hash of its
 * absolute source path, s, of n bytes, taken eight bytes at a time (an
 * FNV-1a of a byte at a time cost an open some 190 instructions). The
 * last word overlaps the one before rather than read past s; the Go half
 * calls this very function (shim/pending.go, pathKey).
 */
static inline uint64_t augur_word(const char *s)
{
	uint64_t w;
	__builtin_memcpy(&w, s, 8);
	return w;
}

static inline uint64_t augur_path_key(const char *s, uint64_t n)
{
	const uint64_t m = 0x9e3779b97f4a7c15ull;
	uint64_t h = n * m;
	uint64_t i = 0;
	if (n < 8) {
		uint64_t w = 0;
		for (; i < n; i++)
			w |= (uint64_t)(unsigned char)s[i] << (8 * i);
		h = (h ^ w) * m;
	} else {
		for (; i + 8 < n; i += 8) {
			h = (h ^ augur_word(s + i)) * m;
			h ^= h >> 29;
		}
		h = (h ^ augur_word(s + n - 8)) * m;
	}
	h ^= h >> 32; /* murmur3's finaliser: every bit of the key, from every bit of h */
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 29;
	h *= 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 32);
}

/*
 * Which tiers may hold a file's copy: a filter the leader keeps for each
 * tier it writes, so that an open tries no tier that does not hold the
 * file (a failed open of a path in tmpfs costs 2.5-3.5 us on this host,
 * as much as the open, read and close of a 4 KiB file). Bucket b of the
 * file keyed k is k's top AUGUR_PRESENT_SHIFT bits; its bit t, bit
 * 4*(b%8)+t of words[b/8], is set, never cleared, by the leader before
 * a copy is renamed into tier t and for every copy it finds there at
 * start, before it sets bit t of kept. A bit set for a copy gone, or
 * another file's of the bucket, costs an open the tier's open attempt it
 * made before; a bit clear means no copy, while kept says so. kept's bit
 * t is set only by a leader holding tier t's lock (the tier's only
 * writer) and cleared by one that does not: a tier not kept is tried at
 * every open.
 */
struct augur_present {
	uint32_t kept;
	uint32_t pad;
	uint32_t words[1u << (AUGUR_PRESENT_SHIFT - 3)];
};

static inline uint32_t augur_present_word(uint64_t key) { return (uint32_t)(key >> (64 - AUGUR_PRESENT_SHIFT + 3)); }
static inline uint32_t augur_present_shift(uint64_t key)
{
	return (uint32_t)(key >> (64 - AUGUR_PRESENT_SHIFT)) % 8 * 4;
}

/*
 * Copies compared lately. The leader, as it queues a served copy's
 * comparison with its source, publishes a copy, or drops the event of an
 * open of a copy compared less than an interval ago (revalidate.go),
 * writes in the slot of the file keyed k, checked[k % AUGUR_CHECKED_SLOTS],
 * k and the epoch (CLOCK_MONOTONIC / AUGUR_CHECKED_EPOCH_NS) of that
 * comparison, under the slot's sequence (odd while it writes). An open
 * served from a tier that finds its key there, whole, with an epoch fewer
 * than leader.checked_trust behind leader.checked_epoch sends no event
 * where the leader only wants the due ones (AUGUR_WANT_DUE): the leader
 * would drop it. checked_trust is the interval's epochs less one, so a
 * mark spares no event the leader would use while it polls every 5 ms;
 * another file's mark in the slot only costs an event.
 */
struct augur_checked {
	uint64_t seq;
	uint64_t key;
	uint64_t epoch;
	uint64_t pad;
};

struct augur_ring {
	uint64_t head; /* next slot to claim (producers, fetch-add) */
	char pad1[56];
	uint64_t tail; /* next slot to read (leader only) */
	char pad2[56];
	uint32_t bell; /* bumped, and futex-woken, after an event someone
			* waits on (AUGUR_EV_REQUEST): the leader sleeps on
			* it when the ring is empty */
	char pad3[60];
	struct augur_event slots[AUGUR_RING_SLOTS];
};

/*
 * Large files, tiered in blocks. A dataset file larger than the leader's
 * threshold is never copied whole: each tier may hold some of its blocks
 * in <tier>/blocks/<path, with '@' on each directory> (tiering.BlockPath),
 * a sparse file of the source's size, and words[] says which pages each
 * tier holds (tier t's block b: words[bf.words + t*nblocks + b], bit i:
 * page i of the block; a block's last page may end at the file's size),
 * and which blocks are reserved for it there (words[bf.words +
 * ntiers*nblocks + t*rwords + b/64], bit b%64): room the leader took from
 * the tier's capacity, and which blocks the leader is copying
 * (words[bf.words + ntiers*(nblocks + rwords) + b/64]): a reader that
 * needs a page of one waits for the copy (on wake, which the leader moves
 * and wakes after each) rather than read the original too. A page is
 * written, then its bit set (release); a
 * reader that finds every page of a range set reads it from the blocks
 * file (preload/blocks.c). Pages are taken away only with seq odd (a
 * change of the file, an eviction), and a reader that saw seq move reads
 * the original again. A reader of the original may make present the
 * pages its read covers whole, in a block reserved for it or one it
 * reserves from budget[t] (the tier's blocks the leader set aside).
 * Entries are found by key, probing; only the leader makes them (key
 * written last), and frees one as key AUGUR_BFILE_GONE.
 */
#define AUGUR_BFILE_GONE 1
enum { AUGUR_BFILE_MAPPED = 1 }; /* flags: a mapping of a blocks file was made: no page is taken away */
struct augur_bfile {
	uint64_t key;      /* of the source path (augur_path_key); 0 free, AUGUR_BFILE_GONE freed */
	uint64_t size;     /* the source's, when it was entered */
	uint64_t dev, ino; /* the source */
	uint32_t nblocks;
	uint32_t words;    /* its first word in struct augur_blocks.words */
	uint32_t ntiers;
	uint32_t tiers;    /* bit t: tier t has its blocks file */
	uint32_t seq;      /* odd while pages are taken away */
	uint32_t gen;      /* moves when its blocks files are made anew: processes reopen them */
	uint32_t flags;
	uint32_t wake;     /* moved, and woken, when a copy of one of its blocks ends */
};

struct augur_blocks {
	uint64_t gen;                      /* moves when an entry is made: descriptors look again */
	uint64_t threshold;                /* files above it are tiered in blocks (0: none is) */
	int64_t budget[AUGUR_MAX_TIERS];   /* blocks a reader may reserve in tier i */
	struct augur_bfile files[AUGUR_BFILES];
	uint64_t words[AUGUR_BWORDS];
};

struct augur_segment {
	uint32_t magic;
	uint32_t version;
	uint64_t size;
	uint64_t created_ns; /* CLOCK_REALTIME, when the job's first process made it */
	char job[64];
	struct augur_counters counters;
	struct augur_leader leader;
	struct augur_config config;
	struct augur_pending pending[AUGUR_PENDING_SLOTS];
	struct augur_writes writes;
	struct augur_ring ring;
	struct augur_blocks blocks;
	struct augur_present present;
	struct augur_checked checked[AUGUR_CHECKED_SLOTS];
	struct augur_ident ident[AUGUR_IDENT_BUCKETS][AUGUR_IDENT_WAYS];
};

#endif
