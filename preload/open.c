/*
 * open.c — the open family: open open64 openat openat64, their
 * _FORTIFY_SOURCE variants and creat. Every wrapper has one shape: not
 * active → the real call; else augur_open (serve.c), which decides
 * between a tier copy and the original.
 */
#include "internal.h"

#include <errno.h>

/* mode_of reads the optional mode argument exactly when open(2) does. */
#define MODE_OF(flags, last)                                           \
	mode_t mode = 0;                                               \
	if (((flags) & O_CREAT) || ((flags) & O_TMPFILE) == O_TMPFILE) { \
		va_list ap;                                            \
		va_start(ap, last);                                    \
		mode = (mode_t)va_arg(ap, unsigned int);               \
		va_end(ap);                                            \
	}

AUGUR_EXPORT int open(const char *path, int flags, ...)
{
	MODE_OF(flags, flags);
	if (!augur_active())
		return CALL_REAL(open, -1, path, flags, mode);
	return augur_open(AT_FDCWD, path, flags, mode);
}

AUGUR_EXPORT int open64(const char *path, int flags, ...)
{
	MODE_OF(flags, flags);
	if (!augur_active())
		return CALL_REAL(open64, -1, path, flags, mode);
	return augur_open(AT_FDCWD, path, flags, mode);
}

AUGUR_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	MODE_OF(flags, flags);
	if (!augur_active())
		return CALL_REAL(openat, -1, dirfd, path, flags, mode);
	return augur_open(dirfd, path, flags, mode);
}

AUGUR_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	MODE_OF(flags, flags);
	if (!augur_active())
		return CALL_REAL(openat64, -1, dirfd, path, flags, mode);
	return augur_open(dirfd, path, flags, mode);
}

/* The _FORTIFY_SOURCE variants, called when the compiler could not prove
 * that a mode is passed when needed; they abort on a missing mode. */
AUGUR_EXPORT int __open_2(const char *path, int flags)
{
	if (!augur_active())
		return CALL_REAL(open_2, -1, path, flags);
	return augur_open(AT_FDCWD, path, flags, 0);
}

AUGUR_EXPORT int __open64_2(const char *path, int flags)
{
	if (!augur_active())
		return CALL_REAL(open64_2, -1, path, flags);
	return augur_open(AT_FDCWD, path, flags, 0);
}

AUGUR_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	if (!augur_active())
		return CALL_REAL(openat_2, -1, dirfd, path, flags);
	return augur_open(dirfd, path, flags, 0);
}

AUGUR_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	if (!augur_active())
		return CALL_REAL(openat64_2, -1, dirfd, path, flags);
	return augur_open(dirfd, path, flags, 0);
}

/* creat is open with O_CREAT|O_WRONLY|O_TRUNC; glibc's does not go
 * through open. */
AUGUR_EXPORT int creat(const char *path, mode_t mode)
{
	return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

AUGUR_EXPORT int creat64(const char *path, mode_t mode)
{
	return open64(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}
