/*
 * pathscan.c — clean_length and marked_copy (preload/pathscan.h), which
 * look at a path 16 bytes at a time, must answer exactly as
 * clean_length_bytes and marked_copy_bytes, which look at one byte at a
 * time, for every path and every place a path can start in memory, and
 * marked_copy for every room its output may have. The paths are built
 * from the pieces that matter ("/", ".", "..", "@", names of every length
 * up to a block and past it) so that each pattern lands on each side of
 * every 16-byte boundary. Prints "ok N" or the first difference, and
 * exits non-zero on one.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../../preload/pathscan.h"

static const char *pieces[] = {"/", "//", "/.", "/..", "/...", "/.h", "/..h",
			       "/a", "/abcdefg", "/abcdefghijklmno", "/x.", "/x..",
			       ".", "/a@", "/abcdefghijklmnopq"};

enum { NPIECES = sizeof(pieces) / sizeof(pieces[0]) };

static unsigned long checked;

/* check_marked holds marked_copy against marked_copy_bytes for the
 * normal path abs of len bytes, after a prefix of 16 bytes, in rooms of
 * the sizes that matter: plenty, about the result's length (where it
 * stops fitting) and about the room the vector copy asks for. */
static int check_marked(const char *abs, size_t len)
{
	static char want[3 * PATH_MAX], got[3 * PATH_MAX];
	int r = marked_copy_bytes(want, 16, sizeof(want), abs, len);
	size_t at[] = {r > 0 ? (size_t)r : 16, 2 * len + 18};
	for (int k = -1; k < 2 * 6; k++) {
		size_t cap = k < 0 ? sizeof(want) : at[k / 6] - 2 + (size_t)(k % 6);
		if (cap < 17)
			continue;
		memset(want, 'w', cap);
		memset(got, 'g', cap);
		int w = marked_copy_bytes(want, 16, cap, abs, len), g = marked_copy(got, 16, cap, abs, len);
		if (w != g || (w >= 0 && memcmp(want + 16, got + 16, (size_t)w - 16 + 1) != 0)) {
			printf("differ: marked \"%s\" in %zu bytes: bytes %d \"%s\", vector %d \"%s\"\n",
			       abs, cap, w, w >= 0 ? want + 16 : "", g, g >= 0 ? got + 16 : "");
			return 1;
		}
		checked++;
	}
	return 0;
}

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
		if (want > 0 && check_marked(buf + off, (size_t)want))
			return 1;
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
