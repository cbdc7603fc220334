/*
 * names.c — the calls that change the namespace or a file by name:
 * truncate, unlink, unlinkat, rmdir, remove, rename, renameat,
 * renameat2 (RENAME_EXCHANGE and RENAME_NOREPLACE alike), link, linkat,
 * symlink, symlinkat. Each takes the copies of what it changes out of
 * service first (invalidate.c), whatever name or directory descriptor
 * reaches the file, so that no process is ever served the old content,
 * then makes the real call.
 */
#include "internal.h"

AUGUR_EXPORT int truncate(const char *path, off_t length)
{
	if (augur_active())
		augur_name_gone(AT_FDCWD, path, 1);
	return CALL_REAL(truncate, -1, path, length);
}

AUGUR_EXPORT int truncate64(const char *path, off64_t length)
{
	if (augur_active())
		augur_name_gone(AT_FDCWD, path, 1);
	return CALL_REAL(truncate64, -1, path, length);
}

AUGUR_EXPORT int unlink(const char *path)
{
	if (augur_active())
		augur_name_gone(AT_FDCWD, path, 0);
	return CALL_REAL(unlink, -1, path);
}

AUGUR_EXPORT int unlinkat(int dirfd, const char *path, int flags)
{
	if (augur_active()) {
		if (flags & AT_REMOVEDIR)
			augur_dir_gone(dirfd, path);
		else
			augur_name_gone(dirfd, path, 0);
	}
	return CALL_REAL(unlinkat, -1, dirfd, path, flags);
}

AUGUR_EXPORT int rmdir(const char *path)
{
	if (augur_active())
		augur_dir_gone(AT_FDCWD, path);
	return CALL_REAL(rmdir, -1, path);
}

/* glibc's remove unlinks or removes a directory through calls of its own
 * that no preload sees. */
AUGUR_EXPORT int remove(const char *path)
{
	if (augur_active())
		augur_name_gone(AT_FDCWD, path, 0);
	return CALL_REAL(remove, -1, path);
}

/* A rename takes the name from's file away, and the file to's named, if
 * any (or, with RENAME_EXCHANGE, gives it from's name). */
static void renaming(int fromfd, const char *from, int tofd, const char *to)
{
	augur_name_gone(fromfd, from, 0);
	augur_name_gone(tofd, to, 0);
}

AUGUR_EXPORT int rename(const char *from, const char *to)
{
	if (augur_active())
		renaming(AT_FDCWD, from, AT_FDCWD, to);
	return CALL_REAL(rename, -1, from, to);
}

AUGUR_EXPORT int renameat(int fromfd, const char *from, int tofd, const char *to)
{
	if (augur_active())
		renaming(fromfd, from, tofd, to);
	return CALL_REAL(renameat, -1, fromfd, from, tofd, to);
}

AUGUR_EXPORT int renameat2(int fromfd, const char *from, int tofd, const char *to,
			   unsigned int flags)
{
	if (augur_active())
		renaming(fromfd, from, tofd, to);
	return CALL_REAL(renameat2, -1, fromfd, from, tofd, to, flags);
}

/* A new name for a file, or a symlink: the name had no file a moment
 * ago, or the call fails; a copy left there by a file removed outside the
 * job must not stand for the new one. */

AUGUR_EXPORT int link(const char *from, const char *to)
{
	if (augur_active())
		augur_invalidate_path(AT_FDCWD, to);
	return CALL_REAL(link, -1, from, to);
}

AUGUR_EXPORT int linkat(int fromfd, const char *from, int tofd, const char *to, int flags)
{
	if (augur_active())
		augur_invalidate_path(tofd, to);
	return CALL_REAL(linkat, -1, fromfd, from, tofd, to, flags);
}

AUGUR_EXPORT int symlink(const char *target, const char *to)
{
	if (augur_active())
		augur_invalidate_path(AT_FDCWD, to);
	return CALL_REAL(symlink, -1, target, to);
}

AUGUR_EXPORT int symlinkat(const char *target, int tofd, const char *to)
{
	if (augur_active())
		augur_invalidate_path(tofd, to);
	return CALL_REAL(symlinkat, -1, target, tofd, to);
}
