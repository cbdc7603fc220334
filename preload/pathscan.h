/*
 * pathscan.h — is an absolute path already normal, and its copy's path
 * in a tier. Asked on every open of a dataset file, so both are fast: 16
 * bytes at a time. Their own header so that test/c/pathscan.c can hold the
 * vector scans against byte-by-byte ones on every alignment.
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
		__m128i vs = _mm_cmpeq_epi8(v, slash), vz = _mm_cmpeq_epi8(v, nul);
		unsigned s = (unsigned)_mm_movemask_epi8(vs) & skip;
		unsigned z = (unsigned)_mm_movemask_epi8(vz) & skip;
		/* may not follow a slash: a slash, a dot, the end */
		unsigned f = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(vs, vz), _mm_cmpeq_epi8(v, dot)));
		if (z)
			s &= (z & -z) - 1; /* the slashes before the end */
		if ((s & (f >> 1)) | (carry & f))
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

/*
 * marked_copy_bytes writes after the o bytes of out (cap bytes in all)
 * the normal absolute path abs, of len bytes, with an '@' after each of
 * its directories ("/a/b/c" becomes "/a@/b@/c": tiering.CopyPath), and a
 * NUL, a byte at a time. It returns the length of out, or -1 if that does
 * not fit or the file's name ends in '@' (no such file is copied).
 */
static inline int marked_copy_bytes(char *out, size_t o, size_t cap, const char *abs, size_t len)
{
	size_t s = 0; /* where the component being copied begins: at its slash */
	for (size_t p = 1; p <= len; p++) {
		if (p < len && abs[p] != '/')
			continue;
		if (o + (p - s) + 2 >= cap || (p == len && p - s > 1 && abs[p - 1] == '@'))
			return -1;
		memcpy(out + o, abs + s, p - s);
		o += p - s;
		if (p < len)
			out[o++] = '@';
		s = p;
	}
	out[o] = 0;
	return (int)o;
}

/* copy_bytes copies n bytes from src to dst eight at a time, reading and
 * writing none past them (the last word overlaps the one before; below
 * eight bytes, two overlapping halves). */
static inline void copy_bytes(char *dst, const char *src, size_t n)
{
	uint64_t w;
	uint32_t h, t;
	if (n >= 8) {
		for (size_t i = 0; i + 8 < n; i += 8) {
			memcpy(&w, src + i, 8);
			memcpy(dst + i, &w, 8);
		}
		memcpy(&w, src + n - 8, 8);
		memcpy(dst + n - 8, &w, 8);
	} else if (n >= 4) {
		memcpy(&h, src, 4);
		memcpy(&t, src + n - 4, 4);
		memcpy(dst, &h, 4);
		memcpy(dst + n - 4, &t, 4);
	} else if (n > 0) {
		dst[0] = src[0];
		dst[n / 2] = src[n / 2];
		dst[n - 1] = src[n - 1];
	}
}

/*
 * marked_copy answers as marked_copy_bytes does. With SSE2 it finds the
 * slashes 16 bytes at a time, with aligned loads as in clean_length, and
 * copies each directory whole: as 16 bytes at once where the path goes
 * on for that many (what lies past the directory in out is overwritten
 * by what follows it). Only where out has room for the longest result
 * (every byte a directory's) and that overrun; else a byte at a time.
 */
static inline int marked_copy(char *out, size_t o, size_t cap, const char *abs, size_t len)
{
#ifdef __SSE2__
	if (o + 2 * len + 18 > cap || len == 0)
		return marked_copy_bytes(out, o, cap, abs, len);
	const __m128i slash = _mm_set1_epi8('/');
	size_t off = (uintptr_t)abs & 15, s = 0;
	const char *blk = abs - off;
	unsigned skip = ~0u << (off + 1); /* bytes before abs, and its first slash */
	for (size_t at = 0; at < off + len; at += 16, skip = ~0u) {
		__m128i v = _mm_load_si128((const __m128i *)(blk + at));
		unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, slash)) & skip;
		if (off + len - at < 16)
			m &= (1u << (off + len - at)) - 1;
		for (; m; m &= m - 1) {
			size_t p = at + (size_t)__builtin_ctz(m) - off;
			if (p - s <= 16 && len - s >= 16)
				memcpy(out + o, abs + s, 16);
			else
				copy_bytes(out + o, abs + s, p - s);
			o += p - s;
			out[o++] = '@';
			s = p;
		}
	}
	if (len - s > 1 && abs[len - 1] == '@')
		return -1;
	copy_bytes(out + o, abs + s, len - s);
	o += len - s;
	out[o] = 0;
	return (int)o;
#else
	return marked_copy_bytes(out, o, cap, abs, len);
#endif
}

#endif
