/*
 * errs.c — the errors of the intercepted calls, one case per argument:
 *
 *	errs "OP PATH [ARG]"...
 *
 * Each case prints one line: its number and operation, then either the
 * errno name of the failure or "ok" with what it read, and whether errno
 * was left alone by a call that succeeded. The test runs the same cases
 * with and without the shim and requires identical output.
 *
 * OPs (PATH is a path, FD a descriptor number):
 *	open FLAGS PATH      FLAGS: r w rw + ,dir ,nofollow ,path ,creat ,excl
 *	                     ,noatime ,cloexec ,append (comma-separated)
 *	openat-file PATH     openat relative to a descriptor of a file
 *	fopen MODE PATH      and fread to EOF
 *	stat PATH, lstat PATH, opendir PATH, truncate PATH, unlink PATH
 *	rename PATH PATH2
 *	read-dir PATH        read(2) on a directory opened O_RDONLY
 *	read-opath PATH      read(2) on an O_PATH descriptor
 *	write-ro PATH        write(2) on a read-only descriptor
 *	mmap-write PATH      a shared writable mapping of a read-only descriptor
 *	ftruncate-ro PATH, close-twice PATH, dup3-same PATH
 *	read FD, pread FD, readv FD, close FD, dup FD, dup2 FD, dup3 FD,
 *	fcntl-dupfd FD, fstat FD, mmap FD, sendfile FD, copy_file_range FD,
 *	fdopen FD
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define SENTINEL 9999 /* no errno has this value */

static int flags_of(const char *s)
{
	int fl = 0;
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
		if (!strcmp(tok, "r"))
			fl |= O_RDONLY;
		else if (!strcmp(tok, "w"))
			fl |= O_WRONLY;
		else if (!strcmp(tok, "rw"))
			fl |= O_RDWR;
		else if (!strcmp(tok, "dir"))
			fl |= O_DIRECTORY;
		else if (!strcmp(tok, "nofollow"))
			fl |= O_NOFOLLOW;
		else if (!strcmp(tok, "path"))
			fl |= O_PATH;
		else if (!strcmp(tok, "creat"))
			fl |= O_CREAT;
		else if (!strcmp(tok, "excl"))
			fl |= O_EXCL;
		else if (!strcmp(tok, "noatime"))
			fl |= O_NOATIME;
		else if (!strcmp(tok, "cloexec"))
			fl |= O_CLOEXEC;
		else if (!strcmp(tok, "append"))
			fl |= O_APPEND;
		else {
			fprintf(stderr, "errs: unknown flag %s\n", tok);
			exit(2);
		}
	}
	return fl;
}

/* What a case reports: "ok ..." or the errno name. */
static char result[512];

static int fail(void)
{
	snprintf(result, sizeof(result), "%s", strerrorname_np(errno) ? strerrorname_np(errno) : "?");
	return -1;
}

static void ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ok(const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(result, sizeof(result), "ok");
	if (fmt && *fmt) {
		result[n++] = ' ';
		va_start(ap, fmt);
		vsnprintf(result + n, sizeof(result) - (size_t)n, fmt, ap);
		va_end(ap);
	}
}

static uint64_t fnv(const unsigned char *p, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 1099511628211ULL;
	}
	return h;
}

/* drain reads fd to EOF; returns -1 with errno on a failed read. */
static int drain(int fd, size_t *len, uint64_t *h)
{
	unsigned char buf[8192];
	*len = 0;
	*h = 1469598103934665603ULL;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0)
			return -1;
		if (n == 0)
			return 0;
		*h = fnv(buf, (size_t)n, *h);
		*len += (size_t)n;
	}
}

static int run(const char *op, const char *path, const char *arg)
{
	int fd, r;
	struct stat st;
	char c = 0;
	size_t len;
	uint64_t h;
	int bad = path ? atoi(path) : -1;

	errno = SENTINEL;
	if (!strcmp(op, "open")) {
		int fl = flags_of(path);
		if ((fd = open(arg, fl, 0644)) < 0)
			return fail();
		int e = errno;
		if ((fl & O_ACCMODE) == O_RDONLY && !(fl & (O_PATH | O_DIRECTORY))) {
			if (drain(fd, &len, &h) < 0) {
				close(fd);
				return fail();
			}
			ok("%zu %016llx", len, (unsigned long long)h);
		} else {
			ok("%s", "");
		}
		close(fd);
		errno = e;
		return 0;
	}
	if (!strcmp(op, "openat-file")) {
		int dfd = open(path, O_RDONLY);
		if (dfd < 0)
			return fail();
		fd = openat(dfd, "x", O_RDONLY);
		int e = errno;
		close(dfd);
		errno = e;
		if (fd < 0)
			return fail();
		close(fd);
		ok("%s", "");
		return 0;
	}
	if (!strcmp(op, "fopen")) {
		FILE *f = fopen(arg, path);
		if (!f)
			return fail();
		int e = errno;
		unsigned char buf[4096];
		len = 0;
		h = 1469598103934665603ULL;
		size_t n;
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
			h = fnv(buf, n, h);
			len += n;
		}
		if (ferror(f)) {
			int fe = errno;
			fclose(f);
			errno = fe;
			return fail();
		}
		fclose(f);
		ok("%zu %016llx", len, (unsigned long long)h);
		errno = e;
		return 0;
	}
	if (!strcmp(op, "stat") || !strcmp(op, "lstat")) {
		r = op[0] == 's' ? stat(path, &st) : lstat(path, &st);
		if (r < 0)
			return fail();
		ok("size=%lld mode=%o", (long long)st.st_size, (unsigned)st.st_mode);
		return 0;
	}
	if (!strcmp(op, "opendir")) {
		DIR *d = opendir(path);
		if (!d)
			return fail();
		closedir(d);
		ok("%s", "");
		return 0;
	}
	if (!strcmp(op, "truncate"))
		return truncate(path, 0) < 0 ? fail() : (ok("%s", ""), 0);
	if (!strcmp(op, "unlink"))
		return unlink(path) < 0 ? fail() : (ok("%s", ""), 0);
	if (!strcmp(op, "rename"))
		return rename(path, arg) < 0 ? fail() : (ok("%s", ""), 0);
	if (!strcmp(op, "read-dir") || !strcmp(op, "read-opath") || !strcmp(op, "write-ro") ||
	    !strcmp(op, "mmap-write") || !strcmp(op, "ftruncate-ro") ||
	    !strcmp(op, "close-twice") || !strcmp(op, "dup3-same")) {
		fd = open(path, !strcmp(op, "read-opath") ? O_PATH : O_RDONLY);
		if (fd < 0)
			return fail();
		errno = SENTINEL;
		if (!strcmp(op, "read-dir") || !strcmp(op, "read-opath"))
			r = (int)read(fd, &c, 1);
		else if (!strcmp(op, "write-ro"))
			r = (int)write(fd, "x", 1);
		else if (!strcmp(op, "mmap-write"))
			r = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED ? -1 : 0;
		else if (!strcmp(op, "ftruncate-ro"))
			r = ftruncate(fd, 0);
		else if (!strcmp(op, "close-twice")) {
			close(fd);
			r = close(fd);
		} else
			r = dup3(fd, fd, 0);
		int e = errno;
		if (strcmp(op, "close-twice"))
			close(fd);
		errno = e;
		return r < 0 ? fail() : (ok("%s", ""), 0);
	}
	if (!strcmp(op, "read"))
		return read(bad, &c, 1) < 0 ? fail() : (ok("%s", ""), 0);
	if (!strcmp(op, "pread"))
		return pread(bad, &c, 1, 0) < 0 ? fail() : (ok("%s", ""), 0);
	if (!strcmp(op, "readv")) {
		struct iovec iov = {&c, 1};
		return readv(bad, &iov, 1) < 0 ? fail() : (ok("%s", ""), 0);
	}
	if (!strcmp(op, "close"))
		return close(bad) < 0 ? fail() : (ok("%s", ""), 0);
	if (!strcmp(op, "dup"))
		return dup(bad) < 0 ? fail() : (ok("%s", ""), 0);
	if (!strcmp(op, "dup2"))
		return dup2(bad, 50) < 0 ? fail() : (ok("%s", ""), 0);
	if (!strcmp(op, "dup3"))
		return dup3(bad, 51, O_CLOEXEC) < 0 ? fail() : (ok("%s", ""), 0);
	if (!strcmp(op, "fcntl-dupfd"))
		return fcntl(bad, F_DUPFD, 52) < 0 ? fail() : (ok("%s", ""), 0);
	if (!strcmp(op, "fstat"))
		return fstat(bad, &st) < 0 ? fail() : (ok("%s", ""), 0);
	if (!strcmp(op, "mmap"))
		return mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, bad, 0) == MAP_FAILED ? fail()
										      : (ok("%s", ""), 0);
	if (!strcmp(op, "sendfile"))
		return sendfile(1, bad, NULL, 1) < 0 ? fail() : (ok("%s", ""), 0);
	if (!strcmp(op, "copy_file_range"))
		return copy_file_range(bad, NULL, 1, NULL, 1, 0) < 0 ? fail() : (ok("%s", ""), 0);
	if (!strcmp(op, "fdopen"))
		return fdopen(bad, "r") ? (ok("%s", ""), 0) : fail();
	fprintf(stderr, "errs: unknown op %s\n", op);
	exit(2);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		char buf[16384];
		snprintf(buf, sizeof(buf), "%s", argv[i]);
		char *save = NULL;
		char *op = strtok_r(buf, " ", &save);
		char *path = strtok_r(NULL, " ", &save);
		char *arg = strtok_r(NULL, " ", &save);
		if (!op) {
			fprintf(stderr, "errs: empty case %d\n", i);
			return 2;
		}
		int r = run(op, path, arg);
		int e = errno;
		printf("%d %s: %s", i, op, result);
		if (r == 0)
			printf(" errno %s", e == SENTINEL ? "kept" : strerrorname_np(e) ? strerrorname_np(e) : "?");
		printf("\n");
	}
	return fflush(stdout) == 0 ? 0 : 1;
}
