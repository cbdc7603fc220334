/*
 * theirs.c — another preloaded library, built as a shared object. Its
 * constructor opens, reads and maps the dataset file named by THEIRS_FILE
 * before main, as tracers, profilers and other I/O libraries do, and
 * reports on stderr:
 *
 *	theirs: LEN READ_FNV MMAP_FNV
 *	theirs: error WHAT ERRNO
 *
 * Depending on the LD_PRELOAD order it runs before or after augur's own
 * constructor.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t fnv(const unsigned char *p, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static void fail(const char *what)
{
	fprintf(stderr, "theirs: error %s %s\n", what, strerrorname_np(errno));
}

__attribute__((constructor)) static void theirs_init(void)
{
	const char *p = getenv("THEIRS_FILE");
	if (!p)
		return;
	int fd = open(p, O_RDONLY);
	if (fd < 0) {
		fail("open");
		return;
	}
	unsigned char buf[4096];
	uint64_t h = 1469598103934665603ULL;
	size_t len = 0;
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		h = fnv(buf, (size_t)n, h);
		len += (size_t)n;
	}
	if (n < 0) {
		fail("read");
		close(fd);
		return;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size <= 0) {
		fail("fstat");
		close(fd);
		return;
	}
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED) {
		fail("mmap");
		close(fd);
		return;
	}
	uint64_t mh = fnv(m, (size_t)st.st_size, 1469598103934665603ULL);
	munmap(m, (size_t)st.st_size);
	if (close(fd) < 0)
		fail("close");
	fprintf(stderr, "theirs: %zu %016llx %016llx\n", len, (unsigned long long)h,
		(unsigned long long)mh);
}
