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
	FILE *f = CALL_REAL(fdopen, NULL, fd, mode);
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

/* Stream reads: the real call, then the byte count. */

AUGUR_EXPORT size_t fread(void *buf, size_t size, size_t n, FILE *f)
{
	size_t r = CALL_REAL(fread, 0, buf, size, n, f);
	augur_fd_account(fileno_unlocked(f), (ssize_t)(r * size));
	return r;
}

AUGUR_EXPORT size_t (fread_unlocked)(void *buf, size_t size, size_t n, FILE *f)
{
	size_t r = CALL_REAL(fread_unlocked, 0, buf, size, n, f);
	augur_fd_account(fileno_unlocked(f), (ssize_t)(r * size));
	return r;
}

AUGUR_EXPORT size_t __fread_chk(void *buf, size_t buflen, size_t size, size_t n, FILE *f)
{
	size_t r = CALL_REAL(fread_chk, 0, buf, buflen, size, n, f);
	augur_fd_account(fileno_unlocked(f), (ssize_t)(r * size));
	return r;
}

AUGUR_EXPORT char *fgets(char *s, int size, FILE *f)
{
	char *r = CALL_REAL(fgets, NULL, s, size, f);
	if (r)
		augur_fd_account(fileno_unlocked(f), (ssize_t)strlen(r));
	return r;
}

AUGUR_EXPORT ssize_t getline(char **line, size_t *cap, FILE *f)
{
	ssize_t r = CALL_REAL(getline, -1, line, cap, f);
	augur_fd_account(fileno_unlocked(f), r);
	return r;
}

AUGUR_EXPORT ssize_t getdelim(char **line, size_t *cap, int delim, FILE *f)
{
	ssize_t r = CALL_REAL(getdelim, -1, line, cap, delim, f);
	augur_fd_account(fileno_unlocked(f), r);
	return r;
}
