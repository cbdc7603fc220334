/*
 * intercept_open.c — the open family and the calls that change a dataset
 * file by name. Every wrapper has one shape: not active → the real call;
 * else augur_open, which decides between a tier copy and the original.
 */
#include "intercept_internal.h"

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

#define ENOSYS_IF_NULL(fn)             \
	if (!REAL(fn)) {              \
		errno = ENOSYS;        \
		return -1;             \
	}

AUGUR_EXPORT int open(const char *path, int flags, ...)
{
	MODE_OF(flags, flags);
	if (!augur_active()) {
		ENOSYS_IF_NULL(open);
		return augur_real.open(path, flags, mode);
	}
	return augur_open(AT_FDCWD, path, flags, mode);
}

AUGUR_EXPORT int open64(const char *path, int flags, ...)
{
	MODE_OF(flags, flags);
	if (!augur_active()) {
		ENOSYS_IF_NULL(open64);
		return augur_real.open64(path, flags, mode);
	}
	return augur_open(AT_FDCWD, path, flags, mode);
}

AUGUR_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	MODE_OF(flags, flags);
	if (!augur_active()) {
		ENOSYS_IF_NULL(openat);
		return augur_real.openat(dirfd, path, flags, mode);
	}
	return augur_open(dirfd, path, flags, mode);
}

AUGUR_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	MODE_OF(flags, flags);
	if (!augur_active()) {
		ENOSYS_IF_NULL(openat64);
		return augur_real.openat64(dirfd, path, flags, mode);
	}
	return augur_open(dirfd, path, flags, mode);
}

/* The _FORTIFY_SOURCE variants, called when the compiler could not prove
 * that a mode is passed when needed; they abort on a missing mode. */
AUGUR_EXPORT int __open_2(const char *path, int flags)
{
	if (!augur_active()) {
		ENOSYS_IF_NULL(open_2);
		return augur_real.open_2(path, flags);
	}
	return augur_open(AT_FDCWD, path, flags, 0);
}

AUGUR_EXPORT int __open64_2(const char *path, int flags)
{
	if (!augur_active()) {
		ENOSYS_IF_NULL(open64_2);
		return augur_real.open64_2(path, flags);
	}
	return augur_open(AT_FDCWD, path, flags, 0);
}

AUGUR_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	if (!augur_active()) {
		ENOSYS_IF_NULL(openat_2);
		return augur_real.openat_2(dirfd, path, flags);
	}
	return augur_open(dirfd, path, flags, 0);
}

AUGUR_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	if (!augur_active()) {
		ENOSYS_IF_NULL(openat64_2);
		return augur_real.openat64_2(dirfd, path, flags);
	}
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

/* Calls that change or remove a dataset file by name drop its tier
 * copies first, so no process is ever served the old content. */

AUGUR_EXPORT int truncate(const char *path, off_t length)
{
	ENOSYS_IF_NULL(truncate);
	if (augur_active())
		augur_invalidate_path(AT_FDCWD, path);
	return augur_real.truncate(path, length);
}

AUGUR_EXPORT int truncate64(const char *path, off64_t length)
{
	ENOSYS_IF_NULL(truncate64);
	if (augur_active())
		augur_invalidate_path(AT_FDCWD, path);
	return augur_real.truncate64(path, length);
}

AUGUR_EXPORT int unlink(const char *path)
{
	ENOSYS_IF_NULL(unlink);
	if (augur_active())
		augur_invalidate_path(AT_FDCWD, path);
	return augur_real.unlink(path);
}

AUGUR_EXPORT int unlinkat(int dirfd, const char *path, int flags)
{
	ENOSYS_IF_NULL(unlinkat);
	if (augur_active() && !(flags & AT_REMOVEDIR))
		augur_invalidate_path(dirfd, path);
	return augur_real.unlinkat(dirfd, path, flags);
}

AUGUR_EXPORT int rename(const char *from, const char *to)
{
	ENOSYS_IF_NULL(rename);
	if (augur_active()) {
		augur_invalidate_path(AT_FDCWD, from);
		augur_invalidate_path(AT_FDCWD, to);
	}
	return augur_real.rename(from, to);
}

AUGUR_EXPORT int renameat(int fromfd, const char *from, int tofd, const char *to)
{
	ENOSYS_IF_NULL(renameat);
	if (augur_active()) {
		augur_invalidate_path(fromfd, from);
		augur_invalidate_path(tofd, to);
	}
	return augur_real.renameat(fromfd, from, tofd, to);
}

AUGUR_EXPORT int renameat2(int fromfd, const char *from, int tofd, const char *to,
			   unsigned int flags)
{
	ENOSYS_IF_NULL(renameat2);
	if (augur_active()) {
		augur_invalidate_path(fromfd, from);
		augur_invalidate_path(tofd, to);
	}
	return augur_real.renameat2(fromfd, from, tofd, to, flags);
}
