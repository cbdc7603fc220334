/*
 * names.c — the calls that change or remove a dataset file by name:
 * truncate, unlink, unlinkat, rename, renameat, renameat2. Each drops
 * the file's tier copies first (invalidate.c), so that no process is ever
 * served the old content, then makes the real call.
 */
#include "internal.h"

#include <errno.h>

AUGUR_EXPORT int truncate(const char *path, off_t length)
{
	if (augur_active())
		augur_invalidate_path(AT_FDCWD, path);
	return CALL_REAL(truncate, -1, path, length);
}

AUGUR_EXPORT int truncate64(const char *path, off64_t length)
{
	if (augur_active())
		augur_invalidate_path(AT_FDCWD, path);
	return CALL_REAL(truncate64, -1, path, length);
}

AUGUR_EXPORT int unlink(const char *path)
{
	if (augur_active())
		augur_invalidate_path(AT_FDCWD, path);
	return CALL_REAL(unlink, -1, path);
}

AUGUR_EXPORT int unlinkat(int dirfd, const char *path, int flags)
{
	if (augur_active() && !(flags & AT_REMOVEDIR))
		augur_invalidate_path(dirfd, path);
	return CALL_REAL(unlinkat, -1, dirfd, path, flags);
}

AUGUR_EXPORT int rename(const char *from, const char *to)
{
	if (augur_active()) {
		augur_invalidate_path(AT_FDCWD, from);
		augur_invalidate_path(AT_FDCWD, to);
	}
	return CALL_REAL(rename, -1, from, to);
}

AUGUR_EXPORT int renameat(int fromfd, const char *from, int tofd, const char *to)
{
	if (augur_active()) {
		augur_invalidate_path(fromfd, from);
		augur_invalidate_path(tofd, to);
	}
	return CALL_REAL(renameat, -1, fromfd, from, tofd, to);
}

AUGUR_EXPORT int renameat2(int fromfd, const char *from, int tofd, const char *to,
			   unsigned int flags)
{
	if (augur_active()) {
		augur_invalidate_path(fromfd, from);
		augur_invalidate_path(tofd, to);
	}
	return CALL_REAL(renameat2, -1, fromfd, from, tofd, to, flags);
}
