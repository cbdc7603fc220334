/*
 * stdio.c — FILE and DIR streams. glibc's stdio opens, reads and
 * closes through internal calls that no preload sees, so fopen decides the
 * tier here, fclose/closedir report the close, and the stream reads count
 * their bytes.
 */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

/* fopen_flags turns a read-only fopen mode into open(2) flags, or returns
 * -1 for a mode that writes or that only fopen itself understands. */
static int fopen_flags(const char *mode)
{
	if (!mode || mode[0] != 'r' || strchr(mode, '+') || strchr(mode, ','))
		return -1;
	return O_RDONLY | (strchr(mode, 'e') ? O_CLOEXEC : 0);
}

/* real_fopen is libc's fopen64 (large) or fopen. */
static FILE *real_fopen(int large, const char *path, const char *mode)
{
	return large ? CALL_REAL(fopen64, NULL, path, mode) : CALL_REAL(fopen, NULL, path, mode);
}

/* real_freopen is libc's freopen64 (large) or freopen. */
static FILE *real_freopen(int large, const char *path, const char *mode, FILE *stream)
{
	return large ? CALL_REAL(freopen64, NULL, path, mode, stream) : CALL_REAL(freopen, NULL, path, mode, stream);
}

/* write_opened registers the descriptor of a stream opened to write,
 * after augur_write_prepare gave w (writers.c). */
static void write_opened(int w, FILE *f, const char *abs)
{
	if (w < 0 && !f)
		return;
	int e = errno;
	augur_guard++;
	augur_write_opened(w, f ? fileno_unlocked(f) : -1, abs);
	augur_guard--;
	errno = e;
}

/* fopen_write opens a stream that may write: a dataset file's writer is
 * registered before glibc opens it, and every writer's descriptor after. */
static FILE *fopen_write(int large, const char *path, const char *mode)
{
	char abs[PATH_MAX];
	int w = augur_write_prepare(AT_FDCWD, path, abs);
	FILE *f = real_fopen(large, path, mode);
	write_opened(w, f, abs);
	return f;
}

/*
 * A stream of a large file tiered in blocks (blocks.c) reads through the
 * read wrapper: glibc's own stdio reads the descriptor through calls of
 * its own that no preload sees. It is a stream of fopencookie's whose
 * functions are the descriptor's read, lseek and close, with the
 * descriptor as its fileno, so that fstat(fileno(f)) and the like see
 * the file.
 */
static ssize_t big_read(void *c, char *buf, size_t size)
{
	return read((int)(intptr_t)c, buf, size);
}

static int big_seek(void *c, off64_t *pos, int whence)
{
	off64_t r = lseek64((int)(intptr_t)c, *pos, whence);
	if (r < 0)
		return -1;
	*pos = r;
	return 0;
}

static int big_close(void *c)
{
	return close((int)(intptr_t)c);
}

/* stream is fdopen of fd, a dataset file opened read-only: a stream of
 * its blocks for a large file, glibc's own otherwise. */
static FILE *stream(int fd, const char *mode)
{
	augur_fd_before_read(fd); /* finds a large file's blocks */
	if (!augur_fd_tracked(fd) || !augur_fdtab[fd].big)
		return CALL_REAL(fdopen, NULL, fd, mode);
	cookie_io_functions_t io = {.read = big_read, .seek = big_seek, .close = big_close};
	FILE *f = fopencookie((void *)(intptr_t)fd, mode, io);
	if (f)
		f->_fileno = fd;
	return f;
}

static FILE *fopen_common(int large, const char *path, const char *mode)
{
	if (!augur_active() || !path)
		return real_fopen(large, path, mode);
	int flags = fopen_flags(mode);
	if (flags < 0)
		return fopen_write(large, path, mode);
	if (!augur_is_dataset_file(AT_FDCWD, path))
		return real_fopen(large, path, mode);
	int fd = augur_open(AT_FDCWD, path, flags, 0);
	if (fd < 0)
		return NULL;
	FILE *f = stream(fd, mode);
	if (!f) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return f;
}

AUGUR_EXPORT FILE *fopen(const char *path, const char *mode)
{
	return fopen_common(0, path, mode);
}

AUGUR_EXPORT FILE *fopen64(const char *path, const char *mode)
{
	return fopen_common(1, path, mode);
}

/* freopen reuses the stream's descriptor number; the shim lets glibc open
 * the original and then swaps a tier copy in under the same number. */
static FILE *freopen_common(int large, const char *path, const char *mode, FILE *stream)
{
	if (stream)
		augur_fd_closed(fileno_unlocked(stream));
	if (!augur_active() || !path)
		return real_freopen(large, path, mode, stream);
	if (fopen_flags(mode) < 0) {
		char abs[PATH_MAX];
		int w = augur_write_prepare(AT_FDCWD, path, abs);
		FILE *f = real_freopen(large, path, mode, stream);
		write_opened(w, f, abs);
		return f;
	}
	FILE *f = real_freopen(large, path, mode, stream);
	if (f)
		augur_adopt(fileno_unlocked(f), path);
	return f;
}

AUGUR_EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream)
{
	return freopen_common(0, path, mode, stream);
}

AUGUR_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
	return freopen_common(1, path, mode, stream);
}

AUGUR_EXPORT int fclose(FILE *f)
{
	if (f)
		augur_fd_closed(fileno_unlocked(f));
	return CALL_REAL(fclose, EOF, f);
}

AUGUR_EXPORT int closedir(DIR *d)
{
	augur_fd_closed(dirfd(d));
	return CALL_REAL(closedir, -1, d);
}

/* fdopen of a large file's descriptor opened to read makes a stream of
 * its blocks (numpy.fromfile reads a dup of a Python file's descriptor
 * so). */
AUGUR_EXPORT FILE *fdopen(int fd, const char *mode)
{
	if (augur_active() && fopen_flags(mode) >= 0 && augur_fd_tracked(fd))
		return stream(fd, mode);
	return CALL_REAL(fdopen, NULL, fd, mode);
}

/* account counts n bytes a stream read, unless its descriptor is a large
 * file's, whose reads count themselves (the read wrapper). */
static void account(FILE *f, ssize_t n)
{
	int fd = fileno_unlocked(f);
	if (!augur_fd_tracked(fd) || !augur_fdtab[fd].big)
		augur_fd_account(fd, n);
}

/* Stream reads: the real call, then the byte count. */

AUGUR_EXPORT size_t fread(void *buf, size_t size, size_t n, FILE *f)
{
	size_t r = CALL_REAL(fread, 0, buf, size, n, f);
	account(f, (ssize_t)(r * size));
	return r;
}

AUGUR_EXPORT size_t (fread_unlocked)(void *buf, size_t size, size_t n, FILE *f)
{
	size_t r = CALL_REAL(fread_unlocked, 0, buf, size, n, f);
	account(f, (ssize_t)(r * size));
	return r;
}

AUGUR_EXPORT size_t __fread_chk(void *buf, size_t buflen, size_t size, size_t n, FILE *f)
{
	size_t r = CALL_REAL(fread_chk, 0, buf, buflen, size, n, f);
	account(f, (ssize_t)(r * size));
	return r;
}

AUGUR_EXPORT char *fgets(char *s, int size, FILE *f)
{
	char *r = CALL_REAL(fgets, NULL, s, size, f);
	if (r)
		account(f, (ssize_t)strlen(r));
	return r;
}

AUGUR_EXPORT ssize_t getline(char **line, size_t *cap, FILE *f)
{
	ssize_t r = CALL_REAL(getline, -1, line, cap, f);
	account(f, r);
	return r;
}

AUGUR_EXPORT ssize_t getdelim(char **line, size_t *cap, int delim, FILE *f)
{
	ssize_t r = CALL_REAL(getdelim, -1, line, cap, delim, f);
	account(f, r);
	return r;
}
