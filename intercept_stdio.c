/*
 * intercept_stdio.c — FILE and DIR streams. glibc's stdio opens, reads and
 * closes through internal calls that no preload sees, so fopen decides the
 * tier here, fclose/closedir report the close, and the stream reads count
 * their bytes.
 */
#include "intercept_internal.h"

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

/* fopen_write opens a stream that may write: a dataset file's writer is
 * registered before glibc opens it and its descriptor after
 * (intercept_write.c). */
static FILE *fopen_write(FILE *(*real)(const char *, const char *), const char *path, const char *mode)
{
	char abs[PATH_MAX];
	int w = augur_write_prepare(AT_FDCWD, path, abs);
	FILE *f = real(path, mode);
	if (w >= 0) {
		int e = errno;
		augur_write_end(w, f ? fileno_unlocked(f) : -1, abs);
		errno = e;
	}
	return f;
}

static FILE *fopen_common(FILE *(*real)(const char *, const char *),
			  const char *path, const char *mode)
{
	if (!real) {
		errno = ENOSYS;
		return NULL;
	}
	if (!augur_active() || !path)
		return real(path, mode);
	int flags = fopen_flags(mode);
	if (flags < 0)
		return fopen_write(real, path, mode);
	if (!augur_is_dataset_file(AT_FDCWD, path))
		return real(path, mode);
	int fd = augur_open(AT_FDCWD, path, flags, 0);
	if (fd < 0)
		return NULL;
	FILE *f = REAL(fdopen) ? augur_real.fdopen(fd, mode) : NULL;
	if (!f) {
		int e = augur_real.fdopen ? errno : ENOSYS;
		close(fd);
		errno = e;
	}
	return f;
}

AUGUR_EXPORT FILE *fopen(const char *path, const char *mode)
{
	return fopen_common(REAL(fopen), path, mode);
}

AUGUR_EXPORT FILE *fopen64(const char *path, const char *mode)
{
	return fopen_common(REAL(fopen64), path, mode);
}

/* freopen reuses the stream's descriptor number; the shim lets glibc open
 * the original and then swaps a tier copy in under the same number. */
static FILE *freopen_common(FILE *(*real)(const char *, const char *, FILE *),
			    const char *path, const char *mode, FILE *stream)
{
	if (!real) {
		errno = ENOSYS;
		return NULL;
	}
	if (stream)
		augur_fd_closed(fileno_unlocked(stream));
	if (!augur_active() || !path)
		return real(path, mode, stream);
	if (fopen_flags(mode) < 0) {
		char abs[PATH_MAX];
		int w = augur_write_prepare(AT_FDCWD, path, abs);
		FILE *f = real(path, mode, stream);
		if (w >= 0) {
			int e = errno;
			augur_write_end(w, f ? fileno_unlocked(f) : -1, abs);
			errno = e;
		}
		return f;
	}
	FILE *f = real(path, mode, stream);
	if (f)
		augur_adopt(fileno_unlocked(f), path);
	return f;
}

AUGUR_EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream)
{
	return freopen_common(REAL(freopen), path, mode, stream);
}

AUGUR_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
	return freopen_common(REAL(freopen64), path, mode, stream);
}

AUGUR_EXPORT int fclose(FILE *f)
{
	if (!REAL(fclose)) {
		errno = ENOSYS;
		return EOF;
	}
	if (f)
		augur_fd_closed(fileno_unlocked(f));
	return augur_real.fclose(f);
}

AUGUR_EXPORT int closedir(DIR *d)
{
	if (!REAL(closedir)) {
		errno = ENOSYS;
		return -1;
	}
	augur_fd_closed(dirfd(d));
	return augur_real.closedir(d);
}

/* Stream reads: the real call, then the byte count. */

AUGUR_EXPORT size_t fread(void *buf, size_t size, size_t n, FILE *f)
{
	if (!REAL(fread))
		return 0;
	size_t r = augur_real.fread(buf, size, n, f);
	augur_fd_account(fileno_unlocked(f), (ssize_t)(r * size));
	return r;
}

AUGUR_EXPORT size_t (fread_unlocked)(void *buf, size_t size, size_t n, FILE *f)
{
	if (!REAL(fread_unlocked))
		return 0;
	size_t r = (augur_real.fread_unlocked)(buf, size, n, f);
	augur_fd_account(fileno_unlocked(f), (ssize_t)(r * size));
	return r;
}

AUGUR_EXPORT size_t __fread_chk(void *buf, size_t buflen, size_t size, size_t n, FILE *f)
{
	if (!REAL(fread_chk))
		return 0;
	size_t r = augur_real.fread_chk(buf, buflen, size, n, f);
	augur_fd_account(fileno_unlocked(f), (ssize_t)(r * size));
	return r;
}

AUGUR_EXPORT char *fgets(char *s, int size, FILE *f)
{
	if (!REAL(fgets))
		return NULL;
	char *r = augur_real.fgets(s, size, f);
	if (r)
		augur_fd_account(fileno_unlocked(f), (ssize_t)strlen(r));
	return r;
}

AUGUR_EXPORT ssize_t getline(char **line, size_t *cap, FILE *f)
{
	if (!REAL(getline)) {
		errno = ENOSYS;
		return -1;
	}
	ssize_t r = augur_real.getline(line, cap, f);
	augur_fd_account(fileno_unlocked(f), r);
	return r;
}

AUGUR_EXPORT ssize_t getdelim(char **line, size_t *cap, int delim, FILE *f)
{
	if (!REAL(getdelim)) {
		errno = ENOSYS;
		return -1;
	}
	ssize_t r = augur_real.getdelim(line, cap, delim, f);
	augur_fd_account(fileno_unlocked(f), r);
	return r;
}
