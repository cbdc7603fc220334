/*
 * blocks.c — large files, tiered in blocks (struct augur_blocks). A
 * descriptor of a large file's original reads the pages its tiers hold
 * from their blocks files and the rest from the original; a read of the
 * original that covers pages whole writes them into a block reserved for
 * them, so that a byte read once is read from the tier from then on.
 * Every read call on the descriptor returns what the original would,
 * offsets and short reads included. A descriptor that reads in order asks
 * the leader to copy the blocks ahead of it (AUGUR_EV_STREAM).
 */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PAGE ((uint64_t)1 << AUGUR_PAGE_SHIFT)
#define BLOCK ((uint64_t)1 << AUGUR_BLOCK_SHIFT)
#define IOV_SLICE 64 /* a request of more buffers than this is read from the original */

/* This process's descriptors of the blocks files, by entry and tier, for
 * the entry's gen: fd + 1, 0 not opened yet, -1 not to be opened. */
static struct {
	uint32_t gen;
	int fd[AUGUR_MAX_TIERS];
} bfds[AUGUR_BFILES];

/* The buffer the bytes a read of the original is widened by go to (two
 * pages: before and after the caller's), per thread (kept for the
 * thread's life: reads come again). */
static AUGUR_TLS char *bounce;

static uint64_t *pword(struct augur_segment *seg, const struct augur_bfile *f, int t, uint64_t b)
{
	return &seg->blocks.words[f->words + (uint64_t)t * f->nblocks + b];
}

static uint64_t *rword(struct augur_segment *seg, const struct augur_bfile *f, int t, uint64_t b)
{
	uint64_t per = (f->nblocks + 63) / 64;
	return &seg->blocks.words[f->words + (uint64_t)f->ntiers * f->nblocks + t * per + b / 64];
}

/* cword is the word saying which blocks of f, around b, the leader is
 * copying; b's bit in it is 1 << b % 64. */
static uint64_t *cword(struct augur_segment *seg, const struct augur_bfile *f, uint64_t b)
{
	uint64_t per = (f->nblocks + 63) / 64;
	return &seg->blocks.words[f->words + (uint64_t)f->ntiers * (f->nblocks + per) + b / 64];
}

/* COPY_WAIT_NS bounds how long a reader waits for the leader's copy of a
 * block before it reads the original after all. */
#define COPY_WAIT_NS (2ull * 1000 * 1000 * 1000)

/* await_copy waits while the leader copies block b of f (at most
 * COPY_WAIT_NS in all, per read) and reports whether it waited: the
 * caller looks at the block's pages again. */
static int await_copy(struct augur_segment *seg, struct augur_bfile *f, uint64_t b, uint64_t *deadline)
{
	uint64_t bit = 1ull << (b % 64);
	int waited = 0;
	for (;;) {
		uint32_t w = __atomic_load_n(&f->wake, __ATOMIC_ACQUIRE);
		if (!(__atomic_load_n(cword(seg, f, b), __ATOMIC_ACQUIRE) & bit))
			return waited;
		uint64_t now = augur_now_ns();
		if (!*deadline)
			*deadline = now + COPY_WAIT_NS;
		if (now >= *deadline)
			return waited;
		augur_futex_wait(&f->wake, w, *deadline - now < 50000000u ? *deadline - now : 50000000u);
		waited = 1;
	}
}

static int has_tier(const struct augur_bfile *f, int t)
{
	return t < (int)f->ntiers && (__atomic_load_n(&f->tiers, __ATOMIC_ACQUIRE) >> t & 1);
}

/* page_tier is the fastest tier holding the page at pos, or -1. */
static int page_tier(struct augur_segment *seg, const struct augur_bfile *f, uint64_t pos)
{
	uint64_t b = pos >> AUGUR_BLOCK_SHIFT, bit = 1ull << (pos >> AUGUR_PAGE_SHIFT & 63);
	for (int t = 0; t < (int)f->ntiers; t++)
		if (has_tier(f, t) && (__atomic_load_n(pword(seg, f, t, b), __ATOMIC_ACQUIRE) & bit))
			return t;
	return -1;
}

/* block_fd is this process's descriptor of tier t's blocks file of entry
 * i, whose source is abs (opened on first need, trusted as a copy is),
 * or -1. */
static int block_fd(struct augur_segment *seg, uint32_t i, int t, const char *abs)
{
	struct augur_bfile *f = &seg->blocks.files[i];
	uint32_t gen = __atomic_load_n(&f->gen, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&bfds[i].gen, __ATOMIC_ACQUIRE) != gen) {
		for (int k = 0; k < AUGUR_MAX_TIERS; k++) {
			int old = __atomic_exchange_n(&bfds[i].fd[k], 0, __ATOMIC_ACQ_REL);
			if (old > 0)
				augur_real.close(old - 1);
		}
		__atomic_store_n(&bfds[i].gen, gen, __ATOMIC_RELEASE);
	}
	int have = __atomic_load_n(&bfds[i].fd[t], __ATOMIC_ACQUIRE);
	if (have)
		return have - 1;
	char tp[PATH_MAX];
	int fd = -1;
	if (augur_tier_path_in(t, "blocks", abs, tp, sizeof(tp)) >= 0) {
		fd = CALL_REAL(openat, -1, AT_FDCWD, tp, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
		if (fd < 0 && errno == EACCES)
			fd = CALL_REAL(openat, -1, AT_FDCWD, tp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
		if (fd >= 0 && !augur_trusted(fd, t, abs))
			fd = -1;
	}
	int want = fd >= 0 ? fd + 1 : -1, none = 0;
	if (!__atomic_compare_exchange_n(&bfds[i].fd[t], &none, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		if (fd >= 0)
			augur_real.close(fd); /* another thread opened it first */
		return none > 0 ? none - 1 : -1;
	}
	return fd;
}

/* reserved_tier is the tier block b of f is reserved in, or, where none
 * is, the fastest one that gives it room from the leader's budget; -1 if
 * none can. */
static int reserved_tier(struct augur_segment *seg, struct augur_bfile *f, uint64_t b)
{
	uint64_t bit = 1ull << (b % 64);
	for (int t = 0; t < (int)f->ntiers; t++)
		if (has_tier(f, t) && (__atomic_load_n(rword(seg, f, t, b), __ATOMIC_ACQUIRE) & bit))
			return t;
	for (int t = 0; t < (int)f->ntiers; t++) {
		int64_t *budget = &seg->blocks.budget[t];
		int64_t v = __atomic_load_n(budget, __ATOMIC_ACQUIRE);
		while (has_tier(f, t) && v > 0) {
			if (!__atomic_compare_exchange_n(budget, &v, v - 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				continue;
			if (__atomic_fetch_or(rword(seg, f, t, b), bit, __ATOMIC_ACQ_REL) & bit)
				__atomic_fetch_add(budget, 1, __ATOMIC_RELEASE); /* reserved meanwhile */
			return t;
		}
	}
	return -1;
}

/* iov_slice makes out (at most IOV_SLICE buffers) the bytes [from,
 * from+len) of the buffers iov; it returns their count, or -1. */
static int iov_slice(const struct iovec *iov, int cnt, size_t from, size_t len, struct iovec *out)
{
	int n = 0;
	/* out has room for IOV_SLICE + 2: a widened read's two more */
	for (int i = 0; i < cnt && len; i++) {
		if (from >= iov[i].iov_len) {
			from -= iov[i].iov_len;
			continue;
		}
		if (n == IOV_SLICE + 2)
			return -1;
		size_t take = iov[i].iov_len - from < len ? iov[i].iov_len - from : len;
		out[n++] = (struct iovec){(char *)iov[i].iov_base + from, take};
		len -= take;
		from = 0;
	}
	return n;
}

/* keep writes the whole pages of the len bytes of the original from
 * pos (a page boundary) that the buffers v hold into the blocks files of
 * the tiers their blocks are reserved in, and marks them present. A page
 * ends at the file's size at most. */
static void keep(struct augur_segment *seg, uint32_t i, uint32_t seq, const char *abs, const struct iovec *v,
		 int cnt, uint64_t pos, size_t len)
{
	struct augur_bfile *f = &seg->blocks.files[i];
	for (uint64_t p = pos; p < pos + len;) {
		uint64_t end = (p + PAGE < f->size ? p + PAGE : f->size);
		if (end > pos + len)
			break; /* a page the read did not cover whole */
		uint64_t b = p >> AUGUR_BLOCK_SHIFT;
		int t = reserved_tier(seg, f, b);
		int bfd = t >= 0 ? block_fd(seg, i, t, abs) : -1;
		struct iovec pv[IOV_SLICE + 2];
		int k = bfd >= 0 ? iov_slice(v, cnt, p - pos, end - p, pv) : -1;
		uint64_t bit = 1ull << (p >> AUGUR_PAGE_SHIFT & 63);
		if (k > 0 && pwritev(bfd, pv, k, (off_t)p) == (ssize_t)(end - p) &&
		    __atomic_load_n(&f->seq, __ATOMIC_SEQ_CST) == seq) {
			__atomic_fetch_or(pword(seg, f, t, b), bit, __ATOMIC_SEQ_CST);
			/* Pages taken away meanwhile (a change of the file): this
			 * one was read before it, and goes too. */
			if (__atomic_load_n(&f->seq, __ATOMIC_SEQ_CST) != seq) {
				__atomic_fetch_and(pword(seg, f, t, b), ~bit, __ATOMIC_SEQ_CST);
				return;
			}
			__atomic_fetch_add(&seg->counters.block_teed, 1, __ATOMIC_RELAXED);
		}
		p = end;
	}
}

/*
 * from_original reads [pos, pos+len) of the original into the buffers
 * iov from byte at on. Where the blocks of it are, or can be, reserved,
 * the read is widened to whole pages, one call still: the bytes before
 * and after the caller's go to this thread's buffer, the caller's to its
 * own buffers; the pages are then kept (keep) from the same buffers. The
 * bytes the caller asked for are the same either way. It returns what
 * preadv would.
 */
static ssize_t from_original(struct augur_segment *seg, int fd, uint32_t i, uint32_t seq, const char *abs,
			     const struct iovec *iov, int cnt, size_t at, uint64_t pos, size_t len)
{
	struct augur_bfile *f = &seg->blocks.files[i];
	struct iovec v[IOV_SLICE + 2];
	int k = iov_slice(iov, cnt, at, len, v + 1);
	if (k < 0)
		return -1;
	uint64_t pa = pos & ~(PAGE - 1);
	uint64_t pb = (pos + len + PAGE - 1) & ~(PAGE - 1);
	if (pb > f->size)
		pb = f->size;
	if (pb <= pa || reserved_tier(seg, f, pa >> AUGUR_BLOCK_SHIFT) < 0 ||
	    reserved_tier(seg, f, (pb - 1) >> AUGUR_BLOCK_SHIFT) < 0 || (!bounce && !(bounce = malloc(2 * PAGE))))
		return CALL_REAL(preadv64, -1, fd, v + 1, k, (off64_t)pos);
	/* head: [pa, pos) into bounce; tail: [pos+len, pb) after it */
	v[0] = (struct iovec){bounce, pos - pa};
	v[k + 1] = (struct iovec){bounce + PAGE, pb > pos + len ? pb - (pos + len) : 0};
	ssize_t r = CALL_REAL(preadv64, -1, fd, v, k + 2, (off64_t)pa);
	if (r <= (ssize_t)(pos - pa))
		return r < 0 ? -1 : 0;
	keep(seg, i, seq, abs, v, k + 2, pa, (size_t)r);
	size_t got = (size_t)r - (pos - pa);
	return (ssize_t)(got < len ? got : len);
}

/* from_tier reads [pos, pos+len) from tier t's blocks file into the
 * buffers iov from byte at on; -1 when it cannot (the caller reads the
 * original). */
static ssize_t from_tier(struct augur_segment *seg, uint32_t i, int t, const char *abs,
			 const struct iovec *iov, int cnt, size_t at, uint64_t pos, size_t len)
{
	struct iovec out[IOV_SLICE + 2];
	int k = iov_slice(iov, cnt, at, len, out);
	int bfd = k < 0 ? -1 : block_fd(seg, i, t, abs);
	return bfd < 0 ? -1 : CALL_REAL(preadv64, -1, bfd, out, k, (off64_t)pos);
}

/*
 * serve reads len bytes at pos of the large file open as fd into iov:
 * each run of pages a tier holds from its blocks file, the others from
 * the original. A run read from a tier while the entry's pages were taken
 * away (seq moved) is read again from the original. It returns what
 * preadv of the original would.
 */
static ssize_t serve(struct augur_segment *seg, int fd, const struct iovec *iov, int cnt, size_t len, uint64_t pos,
		     size_t *from_tiers)
{
	uint32_t i = (uint32_t)augur_fdtab[fd].big - 1;
	struct augur_bfile *f = &seg->blocks.files[i];
	const char *abs = __atomic_load_n(&augur_fdpath[fd], __ATOMIC_ACQUIRE);
	uint32_t seq = __atomic_load_n(&f->seq, __ATOMIC_ACQUIRE);
	int fresh = abs && !(seq & 1) && !augur_write_held(augur_fdbig[fd].key);
	size_t done = 0, tiered = 0;
	uint64_t per[AUGUR_MAX_TIERS] = {0}, deadline = 0;
	while (done < len) {
		uint64_t p = pos + done;
		int t = fresh && p < f->size ? page_tier(seg, f, p) : -1;
		uint64_t end = pos + len;
		if (p < f->size) {
			/* The run of pages with p's source, within p's block. */
			uint64_t q = (p | (PAGE - 1)) + 1, bend = (p | (BLOCK - 1)) + 1;
			while (q < end && q < bend && q < f->size && page_tier(seg, f, q) == t)
				q += PAGE;
			end = q < end ? q : end;
		}
		if (t < 0 && fresh && p < f->size && await_copy(seg, f, p >> AUGUR_BLOCK_SHIFT, &deadline))
			continue; /* the leader copied it meanwhile: look again */
		ssize_t r = -1;
		if (t >= 0 && (r = from_tier(seg, i, t, abs, iov, cnt, done, p, end - p)) > 0) {
			tiered += (size_t)r;
			per[t] += (uint64_t)r;
		}
		if (r < 0 && fresh)
			r = from_original(seg, fd, i, seq, abs, iov, cnt, done, p, end - p);
		else if (r < 0) {
			struct iovec out[IOV_SLICE];
			int k = iov_slice(iov, cnt, done, end - p, out);
			r = k < 0 ? -1 : CALL_REAL(preadv64, -1, fd, out, k, (off64_t)p);
		}
		if (r < 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)r;
		if (r < (ssize_t)(end - p))
			break; /* a short read: what the original would return there */
	}
	if (tiered && __atomic_load_n(&f->seq, __ATOMIC_ACQUIRE) != seq) {
		*from_tiers = 0;
		struct iovec out[IOV_SLICE + 2];
		int k = iov_slice(iov, cnt, 0, len, out);
		return k < 0 ? -1 : CALL_REAL(preadv64, -1, fd, out, k, (off64_t)pos);
	}
	for (int t = 0; t < AUGUR_MAX_TIERS; t++)
		if (per[t])
			__atomic_fetch_add(&seg->counters.block_bytes[t], per[t], __ATOMIC_RELAXED);
	if (done > tiered)
		__atomic_fetch_add(&seg->counters.block_misses, 1, __ATOMIC_RELAXED);
	*from_tiers = tiered;
	return (ssize_t)done;
}

/* The locks of reads at a descriptor's offset, which are two calls here
 * (the offset's, then the read's) where the kernel makes one: by
 * descriptor number. */
#define OFFSET_LOCKS 64
static pthread_mutex_t offset_locks[OFFSET_LOCKS] = {[0 ... OFFSET_LOCKS - 1] = PTHREAD_MUTEX_INITIALIZER};

/* stream tells the leader where a descriptor that reads in order (two
 * reads, the second where the first ended) has reached, then each time
 * it enters a new block (AUGUR_EV_STREAM). */
static void stream(int fd, uint64_t pos, ssize_t n)
{
	struct augur_fd_big *e = &augur_fdbig[fd];
	if (n <= 0)
		return;
	e->seqs = pos == e->next ? (e->seqs < 0xffff ? e->seqs + 1 : e->seqs) : 0;
	e->next = pos + (uint64_t)n;
	const char *abs = __atomic_load_n(&augur_fdpath[fd], __ATOMIC_ACQUIRE);
	if (abs && e->seqs >= 1 && (e->seqs == 1 || (pos >> AUGUR_BLOCK_SHIFT) != (e->next >> AUGUR_BLOCK_SHIFT)))
		augur_emit(AUGUR_EV_STREAM, -1, fd, e->next, abs, 0);
}

/* read_event tells a leader that wants them (want_reads) where a read of
 * n bytes at pos of fd's large file was: the samples its reader read. */
static void read_event(struct augur_segment *seg, int fd, uint64_t pos, ssize_t n)
{
	if (n <= 0 || !__atomic_load_n(&seg->leader.want_reads, __ATOMIC_RELAXED))
		return;
	const char *abs = __atomic_load_n(&augur_fdpath[fd], __ATOMIC_ACQUIRE);
	if (abs)
		augur_emit(AUGUR_EV_READ, n > INT32_MAX ? INT32_MAX : (int)n, fd, pos, abs, 0);
}

/* live says whether fd's entry still stands for its file (a change of
 * the file frees it: AUGUR_BFILE_GONE). */
static int live(struct augur_segment *seg, int fd)
{
	return __atomic_load_n(&seg->blocks.files[augur_fdtab[fd].big - 1].key, __ATOMIC_ACQUIRE) == augur_fdbig[fd].key;
}

/* real_readv is the read the caller asked for, of the original. */
static ssize_t real_readv(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return off == -1 ? CALL_REAL(readv, -1, fd, iov, cnt) : CALL_REAL(preadv64, -1, fd, iov, cnt, off);
}

AUGUR_HIDDEN ssize_t augur_big_readv(int fd, const struct iovec *iov, int cnt, off_t off)
{
	struct augur_segment *seg = augur_st.seg;
	size_t len = 0;
	for (int k = 0; k >= 0 && k < cnt; k++)
		len += iov[k].iov_len;
	if (!seg || cnt < 0 || cnt > IOV_SLICE || len > (size_t)SSIZE_MAX || !live(seg, fd))
		return real_readv(fd, iov, cnt, off);
	int saved = errno;
	pthread_mutex_t *lock = off == -1 ? &offset_locks[fd % OFFSET_LOCKS] : NULL;
	if (lock)
		pthread_mutex_lock(lock);
	off_t pos = lock ? lseek(fd, 0, SEEK_CUR) : off;
	size_t tiered = 0;
	ssize_t n = pos < 0 ? real_readv(fd, iov, cnt, off) : serve(seg, fd, iov, cnt, len, (uint64_t)pos, &tiered);
	if (lock && pos >= 0 && n > 0)
		lseek(fd, pos + n, SEEK_SET);
	if (lock)
		pthread_mutex_unlock(lock);
	int e = n < 0 ? errno : saved;
	if (pos >= 0) {
		stream(fd, (uint64_t)pos, n);
		read_event(seg, fd, (uint64_t)pos, n);
	}
	augur_fd_account(fd, n - (ssize_t)tiered); /* the tiers' bytes are counted as read (serve) */
	errno = e;
	return n;
}

AUGUR_HIDDEN ssize_t augur_big_read(int fd, void *buf, size_t count, off_t off)
{
	struct iovec v = {buf, count};
	return augur_big_readv(fd, &v, 1, off);
}

/* find is the entry of key, or NULL. */
static struct augur_bfile *find(struct augur_segment *seg, uint64_t key)
{
	for (uint32_t n = 0; n < AUGUR_BFILES; n++) {
		struct augur_bfile *f = &seg->blocks.files[(key + n) & (AUGUR_BFILES - 1)];
		uint64_t k = __atomic_load_n(&f->key, __ATOMIC_ACQUIRE);
		if (k == key)
			return f;
		if (!k)
			return NULL;
	}
	return NULL;
}

AUGUR_HIDDEN void augur_big_look(int fd, const char *abs)
{
	struct augur_segment *seg = augur_st.seg;
	struct fd_entry *e = &augur_fdtab[fd];
	uint64_t gen = seg ? __atomic_load_n(&seg->blocks.gen, __ATOMIC_ACQUIRE) : 0;
	e->bgen = (uint16_t)gen;
	e->big = 0;
	if (!gen || !abs)
		return;
	uint64_t key = augur_key(abs);
	struct augur_bfile *f = find(seg, key);
	struct stat sb;
	AUGUR_ERRNO_SAVE;
	int ok = f && CALL_REAL(fstat, -1, fd, &sb) == 0 && (uint64_t)sb.st_dev == f->dev &&
		 (uint64_t)sb.st_ino == f->ino && (uint64_t)sb.st_size == f->size;
	AUGUR_ERRNO_RESTORE;
	if (!ok)
		return;
	augur_fdbig[fd] = (struct augur_fd_big){.key = key};
	e->big = (uint16_t)(f - seg->blocks.files + 1);
}

AUGUR_HIDDEN int augur_big_map(int fd, off_t off, size_t len)
{
	struct augur_segment *seg = augur_st.seg;
	const char *abs = __atomic_load_n(&augur_fdpath[fd], __ATOMIC_ACQUIRE);
	if (!seg || !abs || off < 0 || !len || !live(seg, fd) || augur_write_held(augur_fdbig[fd].key))
		return -1;
	uint32_t i = (uint32_t)augur_fdtab[fd].big - 1;
	struct augur_bfile *f = &seg->blocks.files[i];
	uint32_t seq = __atomic_load_n(&f->seq, __ATOMIC_ACQUIRE);
	uint64_t end = (uint64_t)off + len < f->size ? (uint64_t)off + len : f->size;
	int t = (seq & 1) || (uint64_t)off >= end ? -1 : page_tier(seg, f, (uint64_t)off);
	for (uint64_t p = (uint64_t)off & ~(PAGE - 1); t >= 0 && p < end; p += PAGE)
		if (page_tier(seg, f, p) != t)
			t = -1;
	if (t < 0)
		return -1;
	/* Marked before the check that follows: pages are never taken away
	 * from a file that may be mapped, but by a change of the file, after
	 * which its mappings hold what they held (the blocks files are made
	 * anew, not emptied). */
	__atomic_fetch_or(&f->flags, AUGUR_BFILE_MAPPED, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&f->seq, __ATOMIC_SEQ_CST) != seq)
		return -1;
	return block_fd(seg, i, t, abs);
}

/*
 * augur_big_invalidate takes the blocks of abs out of service before its
 * file changes: with seq odd the entry is freed (AUGUR_BFILE_GONE, so
 * that every descriptor reads the original) and its words cleared, and
 * its blocks files are removed, through each tier's directory as copies
 * are (invalidate.c). Descriptors' mappings of them keep what they map.
 * The leader enters the file anew when it is read again.
 */
AUGUR_HIDDEN void augur_big_invalidate(const char *abs)
{
	struct augur_segment *seg = augur_st.seg;
	struct augur_bfile *f = seg && __atomic_load_n(&seg->blocks.gen, __ATOMIC_ACQUIRE) ?
					find(seg, augur_key(abs)) : NULL;
	if (!f)
		return;
	__atomic_fetch_add(&f->seq, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&f->key, AUGUR_BFILE_GONE, __ATOMIC_SEQ_CST);
	uint64_t n = (uint64_t)f->ntiers * (f->nblocks + (f->nblocks + 63) / 64);
	for (uint64_t w = 0; w < n; w++)
		__atomic_store_n(&seg->blocks.words[f->words + w], 0, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&f->gen, 1, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&f->seq, 1, __ATOMIC_SEQ_CST);
	augur_remove_copies(abs, "blocks");
}

/*
 * augur_big_copy is sendfile and copy_file_range of a large file's
 * descriptor in: its bytes read through augur_big_read (from the tiers'
 * blocks where they are), then written to out (at *outoff where given), a
 * MiB at a time, as far as out takes them. The input's offset is *inoff
 * where given (and moved there), else the descriptor's. It returns what
 * the call would: the bytes written, or -1 with errno when none were.
 */
AUGUR_HIDDEN ssize_t augur_big_copy(int in, off64_t *inoff, int out, off64_t *outoff, size_t count)
{
	off64_t pos = inoff ? *inoff : lseek64(in, 0, SEEK_CUR);
	if (pos < 0)
		return -1;
	size_t chunk = count < (1u << 20) ? count : (1u << 20);
	char *buf = chunk ? malloc(chunk) : NULL;
	if (chunk && !buf)
		return -1;
	size_t done = 0;
	while (done < count) {
		size_t want = count - done < chunk ? count - done : chunk;
		ssize_t r = augur_big_read(in, buf, want, pos + (off64_t)done);
		if (r <= 0) {
			if (r < 0 && !done) {
				free(buf);
				return -1;
			}
			break;
		}
		ssize_t w = outoff ? pwrite64(out, buf, (size_t)r, *outoff + (off64_t)done) : write(out, buf, (size_t)r);
		if (w <= 0) {
			if (w < 0 && !done) {
				free(buf);
				return -1;
			}
			break;
		}
		done += (size_t)w;
		if (w < r)
			break;
	}
	free(buf);
	if (inoff)
		*inoff = pos + (off64_t)done;
	else
		lseek64(in, pos + (off64_t)done, SEEK_SET);
	if (outoff)
		*outoff += (off64_t)done;
	return (ssize_t)done;
}
