/*
 * stat.c — the descriptor-based stat family. A descriptor the
 * shim served from a tier describes the copy: same size, mode and times
 * as the original, but another device and inode. These wrappers put the
 * original's identity back (augur_source_ident), so that fstat(fd) and
 * stat(path) name the same file, as programs such as cp check. Calls by
 * path are not redirected and need nothing. Both the current names and
 * the pre-2.33 __fxstat family that older binaries reference are here,
 * and the other calls that ask a descriptor about its file's metadata.
 */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

/* fix patches a stat buffer of fd (any of the two struct layouts). */
#define FIX_STAT(r, fd, st)                                            \
	do {                                                           \
		uint64_t dev_, ino_;                                   \
		if ((r) == 0 && augur_source_ident((fd), &dev_, &ino_)) { \
			(st)->st_dev = dev_;                           \
			(st)->st_ino = ino_;                           \
		}                                                      \
	} while (0)

/* An *at call names the descriptor itself only with AT_EMPTY_PATH and "". */
static int names_fd(const char *path, int flags)
{
	return (flags & AT_EMPTY_PATH) && path && path[0] == 0;
}

AUGUR_EXPORT int fstat(int fd, struct stat *st)
{
	int r = CALL_REAL(fstat, -1, fd, st);
	FIX_STAT(r, fd, st);
	return r;
}

AUGUR_EXPORT int fstat64(int fd, struct stat64 *st)
{
	int r = CALL_REAL(fstat64, -1, fd, st);
	FIX_STAT(r, fd, st);
	return r;
}

AUGUR_EXPORT int __fxstat(int ver, int fd, struct stat *st)
{
	int r = CALL_REAL(fxstat, -1, ver, fd, st);
	FIX_STAT(r, fd, st);
	return r;
}

AUGUR_EXPORT int __fxstat64(int ver, int fd, struct stat64 *st)
{
	int r = CALL_REAL(fxstat64, -1, ver, fd, st);
	FIX_STAT(r, fd, st);
	return r;
}

AUGUR_EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	int r = CALL_REAL(fstatat, -1, dirfd, path, st, flags);
	if (names_fd(path, flags))
		FIX_STAT(r, dirfd, st);
	return r;
}

AUGUR_EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
	int r = CALL_REAL(fstatat64, -1, dirfd, path, st, flags);
	if (names_fd(path, flags))
		FIX_STAT(r, dirfd, st);
	return r;
}

AUGUR_EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
	int r = CALL_REAL(fxstatat, -1, ver, dirfd, path, st, flags);
	if (names_fd(path, flags))
		FIX_STAT(r, dirfd, st);
	return r;
}

AUGUR_EXPORT int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags)
{
	int r = CALL_REAL(fxstatat64, -1, ver, dirfd, path, st, flags);
	if (names_fd(path, flags))
		FIX_STAT(r, dirfd, st);
	return r;
}

AUGUR_EXPORT int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *sx)
{
	int r = CALL_REAL(statx, -1, dirfd, path, flags, mask, sx);
	uint64_t dev, ino;
	if (r == 0 && names_fd(path, flags) && augur_source_ident(dirfd, &dev, &ino)) {
		sx->stx_dev_major = major(dev);
		sx->stx_dev_minor = minor(dev);
		sx->stx_ino = ino;
	}
	return r;
}

/*
 * What a descriptor tells of its file beyond its bytes — extended
 * attributes, and the mode, owner and filesystem — is the original's. On a
 * descriptor served from a tier these calls go to the original by its
 * path: the copy's own attributes are augur's (user.augur.src), and a
 * change made through it would change the copy, not the file.
 */
#define THROUGH_SOURCE(fn, bypath, fd, ...)                    \
	do {                                                          \
		char src_[PATH_MAX];                                  \
		int e_ = errno;                                       \
		if (augur_source_of((fd), src_)) {                     \
			errno = e_;                                   \
			return bypath(src_, __VA_ARGS__);             \
		}                                                     \
		errno = e_;                                           \
		return CALL_REAL(fn, -1, (fd), __VA_ARGS__);          \
	} while (0)

AUGUR_EXPORT ssize_t fgetxattr(int fd, const char *name, void *value, size_t size)
{
	THROUGH_SOURCE(fgetxattr, getxattr, fd, name, value, size);
}

AUGUR_EXPORT ssize_t flistxattr(int fd, char *list, size_t size)
{
	THROUGH_SOURCE(flistxattr, listxattr, fd, list, size);
}

AUGUR_EXPORT int fsetxattr(int fd, const char *name, const void *value, size_t size, int flags)
{
	THROUGH_SOURCE(fsetxattr, setxattr, fd, name, value, size, flags);
}

AUGUR_EXPORT int fremovexattr(int fd, const char *name)
{
	THROUGH_SOURCE(fremovexattr, removexattr, fd, name);
}

AUGUR_EXPORT int fchmod(int fd, mode_t mode)
{
	THROUGH_SOURCE(fchmod, chmod, fd, mode);
}

AUGUR_EXPORT int fchown(int fd, uid_t owner, gid_t group)
{
	THROUGH_SOURCE(fchown, chown, fd, owner, group);
}

AUGUR_EXPORT int fstatfs(int fd, struct statfs *buf)
{
	THROUGH_SOURCE(fstatfs, statfs, fd, buf);
}

AUGUR_EXPORT int fstatfs64(int fd, struct statfs64 *buf)
{
	THROUGH_SOURCE(fstatfs64, statfs64, fd, buf);
}

AUGUR_EXPORT int fstatvfs(int fd, struct statvfs *buf)
{
	THROUGH_SOURCE(fstatvfs, statvfs, fd, buf);
}

AUGUR_EXPORT int fstatvfs64(int fd, struct statvfs64 *buf)
{
	THROUGH_SOURCE(fstatvfs64, statvfs64, fd, buf);
}
