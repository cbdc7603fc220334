/*
 * pathscan.c — clean_length (preload/pathscan.h), which looks at a path 16
 * bytes at a time, must answer exactly as clean_length_bytes, which looks
 * at one byte at a time, for every path and every place a path can start
 * in memory. The paths are built from the pieces that matter ("/", ".",
 * "..", names of every length up to a block) so that each pattern lands on
 * each side of every 16-byte boundary. Prints "ok N" or the first
 * difference, and exits non-zero on one.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../../preload/pathscan.h"

static const char *pieces[] = {"/", "//", "/.", "/..", "/...", "/.h", "/..h",
			       "/a", "/abcdefg", "/abcdefghijklmno", "/x.", "/x..",
			       "."};

enum { NPIECES = sizeof(pieces) / sizeof(pieces[0]) };

static unsigned long checked;

/* check places path at every offset of a 16-byte block, with bytes that
 * would look like a slash or a dot on either side of it. */
static int check(const char *path)
{
	static char buf[PATH_MAX + 64] __attribute__((aligned(16)));
	size_t n = strlen(path);
	for (size_t off = 0; off < 16; off++) {
		memset(buf, '/', sizeof(buf));
		memcpy(buf + off, path, n + 1);
		memset(buf + off + n + 1, '.', 16);
		int want = clean_length_bytes(buf + off), got = clean_length(buf + off);
		if (want != got) {
			printf("differ: \"%s\" at offset %zu: bytes %d, vector %d\n",
			       path, off, want, got);
			return 1;
		}
		checked++;
	}
	return 0;
}

/* walk checks every path of up to depth pieces that starts with "/". */
static int walk(char *path, size_t len, int depth)
{
	if (len > 0 && check(path))
		return 1;
	if (depth == 0)
		return 0;
	for (int i = 0; i < NPIECES; i++) {
		size_t k = strlen(pieces[i]);
		if (len == 0 && pieces[i][0] != '/')
			continue;
		memcpy(path + len, pieces[i], k + 1);
		if (walk(path, len + k, depth - 1))
			return 1;
		path[len] = 0;
	}
	return 0;
}

int main(void)
{
	char path[PATH_MAX + 32] = "";
	if (walk(path, 0, 4))
		return 1;
	/* The longest paths: one under PATH_MAX, one at it, one over. */
	for (size_t n = PATH_MAX - 17; n <= PATH_MAX + 17; n++) {
		memset(path, 'a', n);
		path[0] = '/';
		path[n] = 0;
		if (check(path))
			return 1;
	}
	printf("ok %lu\n", checked);
	return 0;
}
