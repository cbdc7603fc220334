/*
 * read.c — reads, mappings and descriptor lifetime. The choice
 * between a tier copy and the original is made once, at open; these
 * wrappers keep the descriptor table right (dup, close), count the bytes
 * each descriptor delivers, and hand a teeing descriptor's bytes to its
 * tee (tee.c). They never enter Go and never wait on another
 * process, so they are safe in forked children and before the Go runtime
 * is ready.
 */
#include "internal.h"

#include <errno.h>
#include <linux/close_range.h>
#include <sys/syscall.h>

/* POS, where a read begins for augur_fd_at_end: read()'s -1 (the
 * descriptor's offset), pread's offset when it is valid; AT_END_NEVER for
 * calls whose real answer at the end could be an error the arguments
 * cause (a negative offset, an iovec count or preadv2 flags the kernel
 * refuses, the _chk variants' buffer check) or that the tee does not
 * follow. */
#define AT_END_POS(off) ((off) >= 0 ? (off_t)(off) : AT_END_NEVER)

/* The read family: the real call, then the byte count of a tracked fd,
 * and its bytes to the tee of one that tees (tee.c): TEE says
 * where they are, from the call's own arguments and its result n. A
 * descriptor of a large file tiered in blocks reads through BIG
 * (blocks.c), where the call's arguments are ones the kernel takes. Most
 * descriptors have none of these (augur_fd_plain): their reads are only
 * counted; the rest is a function of its own (name_tracked). */
#define READ_WRAPPER(ret, name, fn, params, TEE, POS, BIG, fd, ...)   \
	static __attribute__((noinline)) ret name##_tracked params     \
	{                                                               \
		augur_fd_before_read(fd);                               \
		if (augur_fdtab[fd].big) {                              \
			BIG;                                            \
		}                                                       \
		if (augur_fdtab[fd].end && augur_fd_at_end(fd, (POS)))  \
			return 0;                                       \
		uint64_t tee_ = augur_fdtab[fd].slot ? augur_tee_enter(fd) : 0; \
		ret n = CALL_REAL(fn, -1, __VA_ARGS__);                 \
		augur_fd_count(fd, (ssize_t)n);                         \
		if (tee_)                                               \
			TEE;                                            \
		return n;                                               \
	}                                                               \
	AUGUR_EXPORT ret name params                                    \
	{                                                               \
		if (!augur_fd_tracked(fd))                              \
			return CALL_REAL(fn, -1, __VA_ARGS__);          \
		if (!augur_fd_plain(fd))                                \
			return name##_tracked(__VA_ARGS__);             \
		ret n = CALL_REAL(fn, -1, __VA_ARGS__);                 \
		augur_fd_count(fd, (ssize_t)n);                         \
		return n;                                               \
	}

/* A read into one buffer at off (-1: the descriptor's offset). */
#define TEE_BUF(off) tee_buf(fd, tee_, (off), buf, n)
/* A read into iov at off. */
#define TEE_IOV(off) augur_tee_leave(fd, tee_, (off), iov, cnt, n)
/* A read the tee cannot follow. */
#define TEE_STOP (augur_tee_leave(in, tee_, -1, NULL, 0, 0), augur_tee_stop(in))

static void tee_buf(int fd, uint64_t token, off_t off, void *buf, ssize_t n)
{
	struct iovec v = {buf, n > 0 ? (size_t)n : 0};
	augur_tee_leave(fd, token, off, &v, 1, n);
}

/* BIG clauses: the _chk variants' buffer check fails in the real call,
 * a negative offset and preadv2's flags are the kernel's to answer. */
#define BIG_BUF(off) return augur_big_read(fd, buf, count, (off))
#define BIG_CHK(off)                                           \
	if (count <= buflen && (off) != -2)                    \
	return augur_big_read(fd, buf, count, (off))
#define BIG_POS(off)                                           \
	if ((off) >= 0)                                        \
	return augur_big_read(fd, buf, count, (off))
#define BIG_IOV(off)                                           \
	if ((off) >= -1)                                       \
	return augur_big_readv(fd, iov, cnt, (off))
#define BIG_IOV2(off)                                          \
	if ((off) >= -1 && !flags)                             \
	return augur_big_readv(fd, iov, cnt, (off))

READ_WRAPPER(ssize_t, read, read, (int fd, void *buf, size_t count),
	     TEE_BUF(-1), -1, BIG_BUF(-1), fd, fd, buf, count)

READ_WRAPPER(ssize_t, __read_chk, read_chk, (int fd, void *buf, size_t count, size_t buflen),
	     TEE_BUF(-1), AT_END_NEVER, BIG_CHK(-1), fd, fd, buf, count, buflen)

READ_WRAPPER(ssize_t, pread, pread, (int fd, void *buf, size_t count, off_t off),
	     TEE_BUF(off), AT_END_POS(off), BIG_POS(off), fd, fd, buf, count, off)

READ_WRAPPER(ssize_t, pread64, pread64, (int fd, void *buf, size_t count, off64_t off),
	     TEE_BUF(off), AT_END_POS(off), BIG_POS(off), fd, fd, buf, count, off)

READ_WRAPPER(ssize_t, __pread64_chk, pread64_chk, (int fd, void *buf, size_t count, off64_t off, size_t buflen),
	     TEE_BUF(off), AT_END_NEVER, BIG_CHK(off >= 0 ? off : -2), fd, fd, buf, count, off, buflen)

READ_WRAPPER(ssize_t, readv, readv, (int fd, const struct iovec *iov, int cnt),
	     TEE_IOV(-1), AT_END_NEVER, BIG_IOV(-1), fd, fd, iov, cnt)

READ_WRAPPER(ssize_t, preadv, preadv, (int fd, const struct iovec *iov, int cnt, off_t off),
	     TEE_IOV(off), AT_END_NEVER, BIG_IOV(off >= 0 ? off : -2), fd, fd, iov, cnt, off)

READ_WRAPPER(ssize_t, preadv64, preadv64, (int fd, const struct iovec *iov, int cnt, off64_t off),
	     TEE_IOV(off), AT_END_NEVER, BIG_IOV(off >= 0 ? off : -2), fd, fd, iov, cnt, off)

/* preadv2's offset -1 is the descriptor's, as the tee's -1 is. */
READ_WRAPPER(ssize_t, preadv2, preadv2, (int fd, const struct iovec *iov, int cnt, off_t off, int flags),
	     TEE_IOV(off), AT_END_NEVER, BIG_IOV2(off), fd, fd, iov, cnt, off, flags)

READ_WRAPPER(ssize_t, preadv64v2, preadv64v2, (int fd, const struct iovec *iov, int cnt, off64_t off, int flags),
	     TEE_IOV(off), AT_END_NEVER, BIG_IOV2(off), fd, fd, iov, cnt, off, flags)

/* sendfile of a large file's descriptor copies through augur_big_copy,
 * where the offset is one the kernel takes. */
#define BIG_SEND(off)                                          \
	if (!(off) || *(off) >= 0)                             \
	return augur_big_copy(in, (off64_t *)(off), out, NULL, count)

READ_WRAPPER(ssize_t, sendfile, sendfile, (int out, int in, off_t *off, size_t count),
	     TEE_STOP, AT_END_NEVER, BIG_SEND(off), in, out, in, off, count)

READ_WRAPPER(ssize_t, sendfile64, sendfile64, (int out, int in, off64_t *off, size_t count),
	     TEE_STOP, AT_END_NEVER, BIG_SEND(off), in, out, in, off, count)

/*
 * copy_file_range fails with EXDEV between filesystems. A descriptor served
 * from a tier is on the tier's filesystem, not the original's, so a copy
 * that works without the shim (dataset and target on one filesystem)
 * failed with it. The shim then copies itself: sendfile when the output
 * goes to the file offset, pread and pwrite otherwise, as far as the
 * kernel's copy between two regular files would go (len, or the end).
 */
static ssize_t copy_across(int in, off64_t *inoff, int out, off64_t *outoff, size_t len)
{
	if (!outoff)
		return CALL_REAL(sendfile64, -1, out, in, inoff, len);
	char buf[32768];
	off64_t pos = inoff ? *inoff : lseek64(in, 0, SEEK_CUR);
	if (pos < 0)
		return -1;
	size_t done = 0;
	while (done < len) {
		size_t want = len - done < sizeof(buf) ? len - done : sizeof(buf);
		ssize_t n = CALL_REAL(pread64, -1, in, buf, want, pos + (off64_t)done);
		ssize_t w = n > 0 ? pwrite64(out, buf, (size_t)n, *outoff + (off64_t)done) : n;
		if (w < 0 && !done)
			return -1;
		if (w <= 0)
			break;
		done += (size_t)w;
		if (w < n)
			break;
	}
	if (inoff)
		*inoff = pos + (off64_t)done;
	else
		lseek64(in, pos + (off64_t)done, SEEK_SET);
	*outoff += (off64_t)done;
	return (ssize_t)done;
}

AUGUR_EXPORT ssize_t copy_file_range(int in, off64_t *inoff, int out, off64_t *outoff,
				     size_t len, unsigned int flags)
{
	augur_fd_before_read(in);
	if (augur_fd_tracked(in) && augur_fdtab[in].big && !flags && (!inoff || *inoff >= 0) &&
	    (!outoff || *outoff >= 0) && !(CALL_REAL(fcntl, -1, out, F_GETFL) & O_APPEND)) /* the kernel refuses that one */
		return augur_big_copy(in, inoff, out, outoff, len);
	uint64_t tee_ = augur_tee_enter(in);
	ssize_t n = CALL_REAL(copy_file_range, -1, in, inoff, out, outoff, len, flags);
	if (n < 0 && errno == EXDEV && augur_fd_tier(in) >= 0)
		n = copy_across(in, inoff, out, outoff, len);
	augur_fd_account(in, n);
	if (tee_) {
		int e = errno;
		TEE_STOP;
		errno = e;
	}
	return n;
}

/*
 * mmap is also called by the Go runtime for its heap (through cgo) before
 * it is ready: anonymous mappings and fd < 0 go straight to libc, and
 * nothing here ever waits or enters Go.
 *
 * The Go runtime of the library starts on its own thread from the
 * library's initialiser, which can run before augur_ctor has resolved the
 * real symbols. Its first heap mappings then find augur_real.mmap still
 * NULL; failing them with ENOSYS made the runtime die with "cannot
 * allocate memory" in about half of the Python runs. So an unresolved
 * mmap is the system call itself, which is all libc's mmap is here.
 */
static void *raw_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

/* mapped does the bookkeeping of a mapping of fd: bytes for a dataset
 * file read, a writer for a shared writable mapping of a written one. */
static void *mapped(void *p, size_t len, int prot, int flags, int fd)
{
	if (p == MAP_FAILED || fd < 0 || fd >= FD_MAX || (flags & MAP_ANONYMOUS))
		return p;
	if (augur_fdtab[fd].kind == FD_WRITE && (prot & PROT_WRITE) && (flags & MAP_SHARED)) {
		int e = errno;
		augur_write_mapped(fd, p, len);
		errno = e;
	}
	augur_fd_account(fd, (ssize_t)len);
	return p;
}

/*
 * map_tee maps, for a mapping p of a descriptor that tees, the tee
 * instead, once the mapper has read the rest of the file into it
 * (augur_tee_map, through p where p maps the whole file): the mapping's pages are the copy's, not the shared
 * filesystem's, and its bytes were read from there once. The original was
 * mapped first so that its answer (its errors, a device that refuses
 * mappings) is the caller's. A mapping that writes the file, or is placed
 * by the caller (MAP_FIXED), keeps the original.
 */
static void *map_tee(void *p, size_t len, int prot, int flags, int fd, off64_t off)
{
	if (p == MAP_FAILED || fd < 0 || fd >= FD_MAX || augur_fdtab[fd].kind != FD_FILE ||
	    !augur_fdtab[fd].slot || (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_ANONYMOUS)) ||
	    ((prot & PROT_WRITE) && (flags & MAP_SHARED)) || !augur_real.mmap64 || !augur_real.munmap)
		return p;
	int e = errno;
	int t = augur_tee_map(fd, p, (off_t)off, len);
	if (t >= 0) {
		void *q = augur_real.mmap64(NULL, len, prot, flags, t, off);
		augur_real.close(t);
		if (q != MAP_FAILED) {
			augur_real.munmap(p, len);
			p = q;
		}
	}
	errno = e;
	return p;
}

/* map_blocks maps, for a mapping of a large file's descriptor that does
 * not write the file (read-only or private) and that the caller does not
 * place, its blocks file where it holds every page of the range; NULL
 * where it does not (the original is mapped). */
static void *map_blocks(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	if (fd < 0 || fd >= FD_MAX || augur_fdtab[fd].kind != FD_FILE || !augur_fdtab[fd].big ||
	    ((prot & PROT_WRITE) && (flags & MAP_SHARED)) || (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) ||
	    !augur_real.mmap64)
		return NULL;
	int e = errno;
	int bfd = augur_big_map(fd, (off_t)off, len);
	void *p = bfd >= 0 ? augur_real.mmap64(addr, len, prot, flags, bfd, off) : MAP_FAILED;
	errno = e;
	return p == MAP_FAILED ? NULL : p;
}

AUGUR_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (fd >= 0 && !(flags & MAP_ANONYMOUS))
		augur_fd_before_read(fd);
	void *p = map_blocks(addr, len, prot, flags, fd, off);
	if (p)
		return mapped(p, len, prot, flags, fd);
	p = augur_real.mmap ? augur_real.mmap(addr, len, prot, flags, fd, off) : raw_mmap(addr, len, prot, flags, fd, off);
	return map_tee(mapped(p, len, prot, flags, fd), len, prot, flags, fd, off);
}

AUGUR_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	if (fd >= 0 && !(flags & MAP_ANONYMOUS))
		augur_fd_before_read(fd);
	void *p = map_blocks(addr, len, prot, flags, fd, off);
	if (p)
		return mapped(p, len, prot, flags, fd);
	p = augur_real.mmap64 ? augur_real.mmap64(addr, len, prot, flags, fd, off)
			      : raw_mmap(addr, len, prot, flags, fd, (off_t)off);
	return map_tee(mapped(p, len, prot, flags, fd), len, prot, flags, fd, off);
}

/* munmap ends a shared writable mapping's hold on its file (the Go
 * runtime's own heap calls come here too before the symbols are
 * resolved: the system call itself then). */
AUGUR_EXPORT int munmap(void *addr, size_t len)
{
	int r = augur_real.munmap ? augur_real.munmap(addr, len) : (int)syscall(SYS_munmap, addr, len);
	if (r == 0) {
		int e = errno;
		augur_write_unmapped(addr, len);
		errno = e;
	}
	return r;
}

AUGUR_EXPORT int close(int fd)
{
	if (fd >= 0 && fd < FD_MAX && augur_fdtab[fd].kind != FD_NONE) /* inline: every close */
		augur_fd_closed(fd);
	return CALL_REAL(close, -1, fd);
}

AUGUR_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	if (!(flags & CLOSE_RANGE_CLOEXEC))
		augur_fd_closed_range(first, last);
	return CALL_REAL(close_range, -1, first, last, flags);
}

AUGUR_EXPORT int dup(int fd)
{
	int n = CALL_REAL(dup, -1, fd);
	if (n >= 0)
		augur_fd_dup(fd, n);
	return n;
}

/* dup2/dup3 close newfd implicitly: report that close first. A failed
 * call leaves newfd open, but then the next close reports it unseen,
 * which only loses a byte count, never a served byte. */
AUGUR_EXPORT int dup2(int oldfd, int newfd)
{
	if (oldfd != newfd)
		augur_fd_closed(newfd);
	int n = CALL_REAL(dup2, -1, oldfd, newfd);
	if (n >= 0 && oldfd != newfd)
		augur_fd_dup(oldfd, n);
	return n;
}

AUGUR_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	if (oldfd != newfd)
		augur_fd_closed(newfd);
	int n = CALL_REAL(dup3, -1, oldfd, newfd, flags);
	if (n >= 0)
		augur_fd_dup(oldfd, n);
	return n;
}

/* fcntl's third argument is an int or a pointer depending on cmd; glibc
 * itself reads it as a pointer, which carries either on this ABI. */
static int fcntl_common(int large, int fd, int cmd, void *arg)
{
	int r = large ? CALL_REAL(fcntl64, -1, fd, cmd, arg) : CALL_REAL(fcntl, -1, fd, cmd, arg);
	if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
		augur_fd_dup(fd, r);
	return r;
}

AUGUR_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_common(0, fd, cmd, arg);
}

AUGUR_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_common(1, fd, cmd, arg);
}
