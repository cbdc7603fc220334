/*
 * pathscan.h — is an absolute path already normal? Asked on every
 * open of every process under the shim, so it is fast: 16 bytes at a time.
 * Its own header so that test/c/pathscan.c can hold the vector scan
 * against the byte-by-byte one on every alignment.
 */
#ifndef AUGUR_PRELOAD_PATHSCAN_H
#define AUGUR_PRELOAD_PATHSCAN_H

#include <limits.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* clean_length_bytes returns the length of an absolute path that is
 * already normal (no empty, "." or ".." component, no trailing slash), or
 * -1: most paths are, and need no copy to be classified. */
static inline int clean_length_bytes(const char *path)
{
	for (const char *p = path; p; p = strchr(p + 1, '/')) {
		const char *c = p + 1;
		if (*c == '/' || *c == 0)
			return p == path && *c == 0 ? 1 : -1;
		if (c[0] == '.' && (c[1] == '/' || c[1] == 0 ||
				    (c[1] == '.' && (c[2] == '/' || c[2] == 0))))
			return -1;
	}
	size_t n = strlen(path);
	return n < PATH_MAX ? (int)n : -1;
}

/*
 * clean_length answers as clean_length_bytes does. With SSE2 it looks at
 * 16 bytes per step for a slash followed by a slash, a dot or the end;
 * only a path with such a pair (rare: "/.hidden", "a//b", "x/") is
 * looked at again byte by byte. The loads are aligned, so they never
 * cross into a page the string does not reach (the way libc's strlen
 * reads); bytes before the path and after its end are masked off.
 */
static inline int clean_length(const char *path)
{
#ifdef __SSE2__
	const __m128i slash = _mm_set1_epi8('/'), dot = _mm_set1_epi8('.');
	const __m128i nul = _mm_setzero_si128();
	size_t off = (uintptr_t)path & 15;
	const char *blk = path - off;
	unsigned carry = 0; /* the last byte of the previous block is a slash */
	unsigned skip = ~0u << off;
	for (size_t at = 0; at <= PATH_MAX + 16; at += 16, skip = ~0u) {
		__m128i v = _mm_load_si128((const __m128i *)(blk + at));
		unsigned s = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, slash)) & skip;
		unsigned z = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, nul)) & skip;
		unsigned d = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, dot));
		unsigned upto = z ? z ^ (z - 1) : 0xffffu; /* bytes up to the end */
		unsigned after = (s | d | z) & upto;       /* may not follow a slash */
		if ((carry & after) || (s & upto & (after >> 1)))
			return clean_length_bytes(path);
		if (z) {
			size_t n = at + (size_t)__builtin_ctz(z) - off;
			return n < PATH_MAX ? (int)n : -1;
		}
		carry = (s >> 15) & 1;
	}
	return -1;
#else
	return clean_length_bytes(path);
#endif
}

#endif
