/*
 * bigread.c — every read call on a large file's descriptor returns what
 * the kernel returns for the file: bigread FILE PASSES.
 *
 * Each pass opens FILE and reads it through read, pread, pread64, readv,
 * preadv, preadv2 (at the descriptor's offset), the _FORTIFY_SOURCE
 * variants __read_chk and __pread64_chk, a duplicate sharing the offset,
 * mmap and sendfile, at seeded random offsets and lengths (unaligned,
 * across blocks, past the end), and compares every byte and every result
 * with the raw system calls' (which no preload sees). It prints "pass N
 * ok" per pass, or what differed, and exits 1 then.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static int bad;
static unsigned char *want; /* the file, read with raw system calls */
static off_t size;

static void check(const char *what, off_t off, ssize_t got, ssize_t expect, const unsigned char *buf)
{
	if (got != expect) {
		printf("%s at %lld: returned %zd, want %zd (errno %d)\n", what, (long long)off, got, expect, errno);
		bad++;
		return;
	}
	if (got > 0 && memcmp(buf, want + off, (size_t)got) != 0) {
		printf("%s at %lld: %zd bytes differ from the file's\n", what, (long long)off, got);
		bad++;
	}
}

/* expect is what a read of len at off returns for the file. */
static ssize_t expect(off_t off, size_t len)
{
	if (off >= size)
		return 0;
	return (ssize_t)(len < (size_t)(size - off) ? len : (size_t)(size - off));
}

static void pass(const char *path, int n)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		perror(path);
		exit(2);
	}
	size_t cap = 9 << 20;
	unsigned char *buf = malloc(cap);
	srand(42 + n);
	for (int i = 0; i < 200; i++) {
		off_t off = (off_t)(((uint64_t)rand() << 16 ^ (uint64_t)rand()) % (uint64_t)(size + 4096));
		size_t len = (size_t)rand() % (i % 10 == 0 ? cap : 300000) + 1;
		ssize_t r = i % 2 ? pread(fd, buf, len, off) : pread64(fd, buf, len, off);
		check(i % 2 ? "pread" : "pread64", off, r, expect(off, len), buf);
	}
	/* read() in odd sizes to the end, through a duplicate every other call */
	int dup_fd = dup(fd);
	off_t at = lseek(fd, 12345, SEEK_SET);
	for (int i = 0;; i++) {
		ssize_t r = read(i % 2 ? dup_fd : fd, buf, 777777);
		check("read", at, r, expect(at, 777777), buf);
		if (r <= 0)
			break;
		at += r;
	}
	/* readv, preadv, preadv2 at the offset */
	struct iovec v[3] = {{buf, 1000}, {buf + 1000, 5 << 20}, {buf + 1000 + (5 << 20), 123}};
	size_t vlen = 1000 + (5 << 20) + 123;
	lseek(fd, 3 << 20, SEEK_SET);
	check("readv", 3 << 20, readv(fd, v, 3), expect(3 << 20, vlen), buf);
	check("preadv", 7777, preadv(fd, v, 3, 7777), expect(7777, vlen), buf);
	off_t cur = lseek(fd, 0, SEEK_CUR);
	check("preadv2", cur, preadv2(fd, v, 3, -1, 0), expect(cur, vlen), buf);
	if (lseek(fd, 0, SEEK_CUR) != cur + expect(cur, vlen)) {
		printf("preadv2 at the offset left it at %lld, want %lld\n", (long long)lseek(fd, 0, SEEK_CUR),
		       (long long)(cur + expect(cur, vlen)));
		bad++;
	}
	/* the _FORTIFY_SOURCE variants: a buffer of known size, a length
	 * the compiler cannot know (compiled with -D_FORTIFY_SOURCE=2) */
	static unsigned char fixed[100000];
	volatile size_t flen = sizeof(fixed);
	lseek(fd, size - 50000, SEEK_SET);
	check("__read_chk", size - 50000, read(fd, fixed, flen), expect(size - 50000, flen), fixed);
	check("__pread64_chk", 4 << 20, pread64(fd, fixed, flen, 4 << 20), expect(4 << 20, flen), fixed);
	/* errors as the kernel's */
	errno = 0;
	ssize_t r = pread(fd, buf, 10, -1);
	if (r != -1 || errno != EINVAL) {
		printf("pread at -1: %zd errno %d, want -1 EINVAL\n", r, errno);
		bad++;
	}
	/* a mapping, and sendfile */
	unsigned char *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED || memcmp(m, want, (size_t)size) != 0) {
		printf("mmap: %s\n", m == MAP_FAILED ? strerror(errno) : "bytes differ");
		bad++;
	}
	if (m != MAP_FAILED)
		munmap(m, (size_t)size);
	char tmpl[] = "/tmp/bigread.XXXXXX";
	int out = mkstemp(tmpl);
	unlink(tmpl);
	off_t soff = 5;
	ssize_t s = sendfile(out, fd, &soff, (size_t)size);
	if (s != size - 5 || (size_t)pread(out, buf, cap, 0) < (size_t)(s < (ssize_t)cap ? s : (ssize_t)cap) ||
	    memcmp(buf, want + 5, (size_t)(s < (ssize_t)cap ? s : (ssize_t)cap)) != 0) {
		printf("sendfile: %zd bytes, or they differ\n", s);
		bad++;
	}
	/* sendfile at the descriptor's offset, copy_file_range at one given */
	if (ftruncate(out, 0) != 0 || lseek(out, 0, SEEK_SET) != 0)
		bad++;
	lseek(fd, 1000, SEEK_SET);
	s = sendfile(out, fd, NULL, 3 << 20);
	if (s != expect(1000, 3 << 20) || lseek(fd, 0, SEEK_CUR) != 1000 + s || pread(out, buf, (size_t)s, 0) != s ||
	    memcmp(buf, want + 1000, (size_t)s) != 0) {
		printf("sendfile at the offset: %zd bytes, offset %lld, or they differ\n", s, (long long)lseek(fd, 0, SEEK_CUR));
		bad++;
	}
	loff_t in = size - 100000, to = 0;
	if (ftruncate(out, 0) != 0)
		bad++;
	s = copy_file_range(fd, &in, out, &to, 200000, 0);
	if (s != 100000 || in != size || to != 100000 || pread(out, buf, 100000, 0) != 100000 ||
	    memcmp(buf, want + size - 100000, 100000) != 0) {
		printf("copy_file_range: %zd bytes, offsets %lld %lld, or they differ\n", s, (long long)in, (long long)to);
		bad++;
	}
	close(out);
	/* stdio: fopen, fread, fseek, ftell, fileno; fdopen of a dup */
	FILE *f = fopen(path, "rb");
	struct stat fst;
	if (!f || fstat(fileno(f), &fst) != 0 || fst.st_size != size) {
		printf("fopen/fileno/fstat: %s\n", f ? strerror(errno) : "no stream");
		bad++;
	}
	for (int i = 0; f && i < 20; i++) {
		off_t o = (off_t)((uint64_t)rand() % (uint64_t)size);
		size_t len = (size_t)rand() % 2000000 + 1;
		if (fseeko(f, o, SEEK_SET) != 0 || ftello(f) != o) {
			printf("fseeko to %lld\n", (long long)o);
			bad++;
			continue;
		}
		check("fread", o, (ssize_t)fread(buf, 1, len, f), expect(o, len), buf);
	}
	if (f)
		fclose(f);
	int d2 = dup(fd);
	lseek(d2, 777, SEEK_SET);
	FILE *g = fdopen(d2, "rb");
	check("fdopen+fread", 777, g ? (ssize_t)fread(buf, 1, 3 << 20, g) : -1, expect(777, 3 << 20), buf);
	if (g)
		fclose(g);
	close(dup_fd);
	close(fd);
	free(buf);
	printf("pass %d %s\n", n, bad ? "failed" : "ok");
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: bigread FILE PASSES\n");
		return 2;
	}
	int fd = (int)syscall(SYS_openat, AT_FDCWD, argv[1], O_RDONLY);
	struct stat st;
	if (fd < 0 || syscall(SYS_fstat, fd, &st) != 0)
		return 2;
	size = st.st_size;
	want = malloc((size_t)size);
	for (off_t o = 0; o < size;) {
		ssize_t r = syscall(SYS_pread64, fd, want + o, (size_t)(size - o), o);
		if (r <= 0)
			return 2;
		o += r;
	}
	syscall(SYS_close, fd);
	for (int n = 1; n <= atoi(argv[2]); n++)
		pass(argv[1], n);
	return bad ? 1 : 0;
}
