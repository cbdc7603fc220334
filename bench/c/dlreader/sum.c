/*
 * sum.c — CRC-32C (Castagnoli) of the bytes a sample read returned, to
 * compare with the sum `augur bench` computed from the dataset itself:
 * the same function as Go's crc32.Update(crc, crc32.MakeTable(
 * crc32.Castagnoli), p), so sums chain over the pieces of one sample.
 * The processor's crc32 instruction (SSE4.2) makes it cost ~0.1 ms per
 * MiB, far below a read from any tier; a table serves elsewhere.
 */
#include "dlreader.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

static uint32_t table[256];
static int use_hw; /* set by crc32c_init, before the first fork */

void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		table[i] = c;
	}
#if defined(__x86_64__)
	__builtin_cpu_init();
	use_hw = __builtin_cpu_supports("sse4.2");
#else
	use_hw = 0;
#endif
}

static uint32_t sw(uint32_t c, const unsigned char *p, size_t n)
{
	while (n--)
		c = table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t hw(uint32_t c, const unsigned char *p, size_t n)
{
	for (; n && ((uintptr_t)p & 7); n--)
		c = _mm_crc32_u8(c, *p++);
	uint64_t c64 = c;
	for (; n >= 8; n -= 8, p += 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c64 = _mm_crc32_u64(c64, v);
	}
	c = (uint32_t)c64;
	for (; n; n--)
		c = _mm_crc32_u8(c, *p++);
	return c;
}
#endif

uint32_t crc32c(uint32_t crc, const void *p, size_t n)
{
	uint32_t c = ~crc;
#if defined(__x86_64__)
	if (use_hw)
		return ~hw(c, p, n);
#endif
	return ~sw(c, p, n);
}
