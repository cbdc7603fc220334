/*
 * posix.c — the intercepted API beyond a plain open and read, one family
 * per run:
 *
 *	posix OP DATASET SCRATCH
 *
 * Built with -O2 -D_FORTIFY_SOURCE=2, so that open with a flags variable
 * and reads into arrays of known size reach the __*_chk and __open*_2
 * entry points, as they do in distribution binaries.
 *
 * Output, one observation a line:
 *	data TAG REL OFF LEN FNV   bytes OFF..EOF of dataset file REL, read one way
 *	ident FN REL DEV INO       st_dev/st_ino of a descriptor-based stat
 *	anything else              must be identical with and without the shim
 * The test checks every data line against the original file and compares
 * the rest of the output of the two runs exactly.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

static const char *root, *scratch;

/* Not constants, so that _FORTIFY_SOURCE picks the checking variants. */
static volatile int rdonly = O_RDONLY;
static volatile size_t chunk = 8192;

/* ---- helpers ------------------------------------------------------------ */

struct acc {
	uint64_t h;
	size_t n;
};

static struct acc acc_new(void) { return (struct acc){1469598103934665603ULL, 0}; }

static void acc_add(struct acc *a, const void *p, size_t n)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++) {
		a->h ^= s[i];
		a->h *= 1099511628211ULL;
	}
	a->n += n;
}

static void data(const char *tag, const char *rel, long off, struct acc a)
{
	printf("data %s %s %ld %zu %016llx\n", tag, rel, off, a.n, (unsigned long long)a.h);
}

static void err(const char *what)
{
	printf("error %s %s\n", what, strerrorname_np(errno));
}

/* P joins the dataset root and rel, in one of a few rotating buffers. */
static const char *P(const char *rel)
{
	static char bufs[8][4096];
	static int i;
	char *b = bufs[i++ % 8];
	snprintf(b, 4096, "%s/%s", root, rel);
	return b;
}

/* read_all reads fd to EOF with read(2) into an array of known size and a
 * variable count: __read_chk under _FORTIFY_SOURCE. */
static struct acc read_all(int fd)
{
	struct acc a = acc_new();
	char buf[8192];
	for (;;) {
		size_t want = chunk;
		ssize_t n = read(fd, buf, want);
		if (n < 0) {
			err("read");
			break;
		}
		if (n == 0)
			break;
		acc_add(&a, buf, (size_t)n);
	}
	return a;
}

/* pread_all reads fd from off to EOF with pread: __pread_chk. */
static struct acc pread_all(int fd, off_t off)
{
	struct acc a = acc_new();
	char buf[8192];
	for (;;) {
		size_t want = chunk;
		ssize_t n = pread(fd, buf, want, off);
		if (n < 0) {
			err("pread");
			break;
		}
		if (n == 0)
			break;
		acc_add(&a, buf, (size_t)n);
		off += n;
	}
	return a;
}

static struct acc fread_all(FILE *f, int unlocked)
{
	struct acc a = acc_new();
	char *buf = malloc(10000);
	for (;;) {
		size_t n = unlocked ? fread_unlocked(buf, 1, 10000, f) : fread(buf, 1, 10000, f);
		acc_add(&a, buf, n);
		if (n < 10000)
			break;
	}
	if (ferror(f))
		err("fread");
	free(buf);
	return a;
}

static off_t size_of(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 ? st.st_size : -1;
}

/* read_via opens path one way and reports its whole content. */
static void read_path(const char *tag, const char *rel, const char *path, int flags)
{
	int fd = open(path, flags, 0);
	if (fd < 0) {
		err(tag);
		return;
	}
	data(tag, rel, 0, read_all(fd));
	close(fd);
}

static void cloexec_of(const char *tag, int fd)
{
	int fl = fcntl(fd, F_GETFD);
	printf("cloexec %s %d\n", tag, fl < 0 ? -1 : !!(fl & FD_CLOEXEC));
}

/* ---- operations --------------------------------------------------------- */

static void op_fortify(void)
{
	int fl = rdonly, fd;
	if ((fd = open(P("a.bin"), fl)) < 0)
		err("__open_2");
	else {
		data("__open_2", "a.bin", 0, read_all(fd));
		close(fd);
	}
	if ((fd = open64(P("a.bin"), fl)) < 0)
		err("__open64_2");
	else {
		data("__open64_2", "a.bin", 0, pread_all(fd, 0));
		close(fd);
	}
	int dfd = open(P("sub"), O_RDONLY | O_DIRECTORY, 0);
	if ((fd = openat(dfd, "c.bin", fl)) < 0)
		err("__openat_2");
	else {
		data("__openat_2", "sub/c.bin", 0, read_all(fd));
		close(fd);
	}
	if ((fd = openat64(dfd, "c.bin", fl)) < 0)
		err("__openat64_2");
	else {
		data("__openat64_2", "sub/c.bin", 100, pread_all(fd, 100));
		close(fd);
	}
	close(dfd);
}

static void op_open(void)
{
	int fd;
	read_path("open", "a.bin", P("a.bin"), O_RDONLY);
	if ((fd = open64(P("a.bin"), O_RDONLY, 0)) < 0)
		err("open64");
	else {
		data("open64", "a.bin", 0, read_all(fd));
		close(fd);
	}
	if ((fd = openat(AT_FDCWD, P("a.bin"), O_RDONLY, 0)) < 0)
		err("openat");
	else {
		data("openat", "a.bin", 0, read_all(fd));
		close(fd);
	}
	if ((fd = openat64(AT_FDCWD, P("a.bin"), O_RDONLY, 0)) < 0)
		err("openat64");
	else {
		data("openat64", "a.bin", 0, read_all(fd));
		close(fd);
	}
	read_path("empty", "empty.bin", P("empty.bin"), O_RDONLY);
}

static void at(const char *tag, int dfd, const char *rel, const char *path)
{
	int fd = openat(dfd, path, O_RDONLY, 0);
	if (fd < 0) {
		err(tag);
		return;
	}
	data(tag, rel, 0, read_all(fd));
	close(fd);
}

static void op_openat(void)
{
	int dfd = open(P("sub"), O_RDONLY | O_DIRECTORY, 0);
	at("dirfd", dfd, "sub/b.txt", "b.txt");
	at("dirfd-dotdot", dfd, "a.bin", "../a.bin");
	at("dirfd-dot", dfd, "sub/c.bin", ".//c.bin");
	at("dirfd-abs", dfd, "a.bin", P("a.bin"));
	at("dirfd-missing", dfd, "-", "nosuch");
	int d2 = dup(dfd);
	close(dfd);
	at("dirfd-dup", d2, "sub/c.bin", "c.bin");
	close(d2);

	int pfd = open(P("sub"), O_PATH, 0);
	at("dirfd-opath", pfd, "sub/c.bin", "c.bin");
	close(pfd);

	int rfd = open(root, O_RDONLY | O_DIRECTORY, 0);
	at("rootfd", rfd, "sub/b.txt", "sub/b.txt");
	int r2 = fcntl(rfd, F_DUPFD_CLOEXEC, 0);
	close(rfd);
	at("rootfd-dupfd", r2, "a.bin", "a.bin");
	close(r2);

	/* A directory above the root. */
	char parent[4096], base[4096];
	snprintf(parent, sizeof(parent), "%s", root);
	char *slash = strrchr(parent, '/');
	snprintf(base, sizeof(base), "%s/a.bin", slash + 1);
	*slash = 0;
	int up = open(parent, O_RDONLY | O_DIRECTORY, 0);
	at("parentfd", up, "a.bin", base);
	close(up);
}

/* Directory streams get their descriptor from glibc's internal open. */
static void op_opendir(void)
{
	DIR *d = opendir(P("sub"));
	if (!d) {
		err("opendir");
		return;
	}
	at("opendir-dirfd", dirfd(d), "sub/c.bin", "c.bin");
	closedir(d);
}

static void op_cwd(void)
{
	if (chdir(root) < 0)
		err("chdir");
	read_path("cwd", "a.bin", "a.bin", O_RDONLY);
	at("cwd-openat", AT_FDCWD, "sub/b.txt", "sub/b.txt");
	FILE *f = fopen("./sub/../a.bin", "r");
	if (!f)
		err("cwd-fopen");
	else {
		data("cwd-fopen", "a.bin", 0, fread_all(f, 0));
		fclose(f);
	}
	if (chdir("sub") < 0)
		err("chdir");
	read_path("cwd-sub-dotdot", "a.bin", "../a.bin", O_RDONLY);
	read_path("cwd-sub", "sub/c.bin", "c.bin", O_RDONLY);
	if (chdir("/") < 0)
		err("chdir");
	char rel[4096];
	snprintf(rel, sizeof(rel), "%s/a.bin", root + 1);
	read_path("cwd-slash", "a.bin", rel, O_RDONLY);
}

static void op_dots(void)
{
	char p[4096];
	read_path("dot", "a.bin", P("./a.bin"), O_RDONLY);
	read_path("slashslash", "a.bin", P("/a.bin"), O_RDONLY);
	read_path("dotdot", "a.bin", P("sub/../a.bin"), O_RDONLY);
	read_path("sub-dot", "sub/b.txt", P("sub/./b.txt"), O_RDONLY);
	read_path("sub-slashslash", "sub/b.txt", P("sub//b.txt"), O_RDONLY);
	read_path("mixed", "sub/c.bin", P("./sub/./../sub/c.bin"), O_RDONLY);
	snprintf(p, sizeof(p), "/%s/a.bin", root);
	read_path("leading-slashslash", "a.bin", p, O_RDONLY);
	snprintf(p, sizeof(p), "%s/../%s/a.bin", root, strrchr(root, '/') + 1);
	read_path("out-and-in", "a.bin", p, O_RDONLY);
	/* From another top directory: the first component is no root's. */
	snprintf(p, sizeof(p), "/dev/..%s/a.bin", root);
	read_path("elsewhere-and-in", "a.bin", p, O_RDONLY);
	snprintf(p, sizeof(p), "%s/sub/", root);
	read_path("trailing-slash", "-", P("a.bin/"), O_RDONLY);
	read_path("missing-dotdot", "-", P("nosuch/../a.bin"), O_RDONLY);
	read_path("file-dotdot", "-", P("a.bin/../a.bin"), O_RDONLY);
	/* ext links to a directory outside the dataset: the kernel resolves
	 * ext/.. to that directory's parent, not to the dataset root. */
	read_path("symlink-dotdot", "@outside/x.bin", P("ext/../x.bin"), O_RDONLY);
	read_path("symlink-dotdot-deep", "@outside/deep/y.bin", P("ext/./../deep/y.bin"), O_RDONLY);
}

static void op_symlink(void)
{
	read_path("file-link", "link.bin", P("link.bin"), O_RDONLY);
	read_path("dir-link", "sub/b.txt", P("zdir/b.txt"), O_RDONLY);
	read_path("outside-link", "out.bin", P("out.bin"), O_RDONLY);
	FILE *f = fopen(P("link.bin"), "r");
	if (!f)
		err("fopen-link");
	else {
		data("fopen-link", "link.bin", 0, fread_all(f, 0));
		fclose(f);
	}
}

static void op_stdio(void)
{
	FILE *f;
	if (!(f = fopen(P("a.bin"), "r")))
		err("fopen");
	else {
		data("fopen-fread", "a.bin", 0, fread_all(f, 0));
		fclose(f);
	}
	if (!(f = fopen64(P("a.bin"), "rb")))
		err("fopen64");
	else {
		data("fopen64-fread_unlocked", "a.bin", 0, fread_all(f, 1));
		fclose(f);
	}
	if (!(f = fopen(P("a.bin"), "re")))
		err("fopen-e");
	else {
		cloexec_of("fopen-e", fileno(f));
		struct acc a = acc_new();
		char buf[4096];
		for (;;) {
			size_t want = chunk / 2;
			size_t n = fread(buf, 1, want, f); /* __fread_chk */
			acc_add(&a, buf, n);
			if (n < want)
				break;
		}
		data("__fread_chk", "a.bin", 0, a);
		fclose(f);
	}
	if (!(f = fopen(P("sub/b.txt"), "r")))
		err("fopen-fgets");
	else {
		struct acc a = acc_new();
		char *line = malloc(100);
		while (fgets(line, 100, f))
			acc_add(&a, line, strlen(line));
		data("fgets", "sub/b.txt", 0, a);
		free(line);
		fclose(f);
	}
	if (!(f = fopen(P("sub/b.txt"), "r")))
		err("fopen-getline");
	else {
		struct acc a = acc_new();
		char *line = NULL;
		size_t cap = 0;
		ssize_t n;
		int lines = 0;
		/* Through a pointer: with -O2 a direct call becomes __getdelim. */
		ssize_t (*volatile gl)(char **, size_t *, FILE *) = getline;
		while ((n = gl(&line, &cap, f)) > 0) {
			acc_add(&a, line, (size_t)n);
			lines++;
		}
		data("getline", "sub/b.txt", 0, a);
		printf("getline lines %d\n", lines);
		rewind(f);
		a = acc_new();
		while ((n = getdelim(&line, &cap, ',', f)) > 0)
			acc_add(&a, line, (size_t)n);
		data("getdelim", "sub/b.txt", 0, a);
		free(line);
		fclose(f);
	}
	if (!(f = fopen(P("nosuch"), "r")))
		err("fopen-missing");
	if (!(f = fopen(P("sub"), "r")))
		err("fopen-dir");
	else {
		char c;
		if (fread(&c, 1, 1, f) != 1)
			err("fread-dir");
		fclose(f);
	}
}

static void op_freopen(void)
{
	FILE *f = fopen(P("a.bin"), "r");
	if (!f) {
		err("fopen");
		return;
	}
	FILE *g = freopen(P("f.bin"), "r", f);
	if (!g)
		err("freopen");
	else {
		data("freopen", "f.bin", 0, fread_all(g, 0));
		fclose(g);
	}
	if (!freopen(P("f.bin"), "r", stdin))
		err("freopen-stdin");
	else
		data("freopen-stdin", "f.bin", 0, fread_all(stdin, 0));
}

/* dup_case opens d.bin, duplicates it one way, closes one of the two and
 * reads through the other, then closes that too. */
static void dup_case(const char *tag, int how, int close_new_first)
{
	int fd = open(P("d.bin"), O_RDONLY, 0);
	int n = -1;
	switch (how) {
	case 0: n = dup(fd); break;
	case 1: n = dup2(fd, 100); break;
	case 2: n = dup3(fd, 101, O_CLOEXEC); break;
	case 3: n = fcntl(fd, F_DUPFD, 50); break;
	case 4: n = fcntl(fd, F_DUPFD_CLOEXEC, 60); break;
	case 5: n = fcntl64(fd, F_DUPFD, 70); break;
	}
	if (n < 0) {
		err(tag);
		close(fd);
		return;
	}
	printf("dup %s at-or-above-target %d\n", tag,
	       how == 0 ? n > fd : how == 1 ? n == 100 : how == 2 ? n == 101 : n >= (how - 2) * 10 + 40);
	cloexec_of(tag, n);
	int keep = close_new_first ? fd : n, drop = close_new_first ? n : fd;
	if (close(drop) < 0)
		err("close");
	data(tag, "d.bin", 0, read_all(keep));
	if (close(keep) < 0)
		err("close");
}

static void op_dup(void)
{
	const char *tags[] = {"dup", "dup2", "dup3", "F_DUPFD", "F_DUPFD_CLOEXEC", "fcntl64-F_DUPFD"};
	for (int how = 0; how < 6; how++) {
		dup_case(tags[how], how, 0);
		char t[64];
		snprintf(t, sizeof(t), "%s-keep-old", tags[how]);
		dup_case(t, how, 1);
	}
	/* dup2 onto a tracked descriptor replaces what it serves. */
	int a = open(P("a.bin"), O_RDONLY, 0), d = open(P("d.bin"), O_RDONLY, 0);
	if (dup2(a, d) != d)
		err("dup2-onto");
	close(a);
	data("dup2-onto", "a.bin", 0, read_all(d));
	close(d);
	/* Shared offsets: half through one descriptor, the rest through
	 * its duplicate. */
	a = open(P("a.bin"), O_RDONLY, 0);
	char buf[1000];
	struct acc acc = acc_new();
	ssize_t got = read(a, buf, sizeof(buf));
	if (got > 0)
		acc_add(&acc, buf, (size_t)got);
	int b = dup(a);
	close(a);
	struct acc rest = read_all(b);
	printf("dup shared-offset first %zd rest %zu\n", got, rest.n);
	data("dup-shared-offset-rest", "a.bin", (long)got, rest);
	close(b);
}

static void copy_out(const char *tag, int use_cfr, int with_offsets)
{
	int in = open(P("e.bin"), O_RDONLY, 0);
	char outp[4096];
	snprintf(outp, sizeof(outp), "%s/%s.out", scratch, tag);
	int out = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (in < 0 || out < 0) {
		err(tag);
		return;
	}
	off_t size = size_of(in);
	off_t inoff = 0;
	off64_t in64 = 0, out64 = 0;
	long total = 0;
	for (;;) {
		ssize_t n;
		if (use_cfr)
			n = copy_file_range(in, with_offsets ? &in64 : NULL, out,
					    with_offsets ? &out64 : NULL, 65536, 0);
		else if (with_offsets == 1)
			n = sendfile(out, in, &inoff, 65536);
		else if (with_offsets == 2)
			n = sendfile64(out, in, &in64, 65536);
		else
			n = sendfile(out, in, NULL, 65536);
		if (n < 0) {
			err(tag);
			break;
		}
		if (n == 0)
			break;
		total += n;
	}
	printf("%s copied %ld of %ld\n", tag, total, (long)size);
	if (with_offsets)
		printf("%s file offset after %ld\n", tag, (long)lseek(in, 0, SEEK_CUR));
	close(in);
	close(out);
	int r = open(outp, O_RDONLY, 0);
	data(tag, "e.bin", 0, read_all(r));
	close(r);
}

static void op_sendfile(void)
{
	copy_out("sendfile", 0, 0);
	copy_out("sendfile-offset", 0, 1);
	copy_out("sendfile64-offset", 0, 2);
}

static void op_cfr(void)
{
	copy_out("copy_file_range", 1, 0);
	copy_out("copy_file_range-offsets", 1, 1);
}

static void op_vec(void)
{
	int fd = open(P("a.bin"), O_RDONLY, 0);
	if (fd < 0) {
		err("open");
		return;
	}
	char *b1 = malloc(1000), *b2 = malloc(5000), *b3 = malloc(20000);
	struct iovec iov[3] = {{b1, 1000}, {b2, 5000}, {b3, 20000}};
	const char *tags[] = {"readv", "preadv", "preadv64", "preadv2", "preadv64v2", "preadv2-cur"};
	for (int k = 0; k < 6; k++) {
		struct acc a = acc_new();
		off_t off = 0;
		lseek(fd, 0, SEEK_SET);
		for (;;) {
			ssize_t n = -1;
			switch (k) {
			case 0: n = readv(fd, iov, 3); break;
			case 1: n = preadv(fd, iov, 3, off); break;
			case 2: n = preadv64(fd, iov, 3, off); break;
			case 3: n = preadv2(fd, iov, 3, off, 0); break;
			case 4: n = preadv64v2(fd, iov, 3, off, 0); break;
			case 5: n = preadv2(fd, iov, 3, -1, 0); break;
			}
			if (n < 0) {
				err(tags[k]);
				break;
			}
			if (n == 0)
				break;
			for (int i = 0; i < 3 && n > 0; i++) {
				size_t m = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;
				acc_add(&a, iov[i].iov_base, m);
				n -= (ssize_t)m;
				off += (off_t)m;
			}
		}
		data(tags[k], "a.bin", 0, a);
	}
	free(b1);
	free(b2);
	free(b3);
	close(fd);
}

static void op_mmap(void)
{
	int fd = open(P("a.bin"), O_RDONLY, 0);
	size_t size = (size_t)size_of(fd);
	struct acc a = acc_new();
	void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		err("mmap");
	else {
		acc_add(&a, p, size);
		data("mmap", "a.bin", 0, a);
		munmap(p, size);
	}
	a = acc_new();
	p = mmap64(NULL, size - 8192, PROT_READ, MAP_SHARED, fd, 8192);
	if (p == MAP_FAILED)
		err("mmap64");
	else {
		acc_add(&a, p, size - 8192);
		data("mmap64-offset", "a.bin", 8192, a);
		munmap(p, size - 8192);
	}
	close(fd);
	/* The mapping outlives the descriptor. */
	fd = open(P("a.bin"), O_RDONLY, 0);
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		err("mmap-after-close");
	else {
		a = acc_new();
		acc_add(&a, p, size);
		data("mmap-after-close", "a.bin", 0, a);
		munmap(p, size);
	}
}

/* ---- the stat family ---------------------------------------------------- */

typedef int (*xstat_fn)(int, const char *, struct stat *);
typedef int (*fxstat_fn)(int, int, struct stat *);
typedef int (*fxstatat_fn)(int, int, const char *, struct stat *, int);

static void show(const char *fn, const char *rel, int r, const struct stat *st, int ident)
{
	if (r < 0) {
		printf("stat %s %s error %s\n", fn, rel, strerrorname_np(errno));
		return;
	}
	printf("stat %s %s size=%lld mode=%o mtime=%lld.%09ld\n", fn, rel,
	       (long long)st->st_size, (unsigned)st->st_mode, (long long)st->st_mtim.tv_sec,
	       st->st_mtim.tv_nsec);
	if (ident)
		printf("ident %s %s %llu %llu\n", fn, rel, (unsigned long long)st->st_dev,
		       (unsigned long long)st->st_ino);
	else
		printf("stat %s %s dev=%llu ino=%llu\n", fn, rel, (unsigned long long)st->st_dev,
		       (unsigned long long)st->st_ino);
}

static void show_statx(const char *fn, const char *rel, int r, const struct statx *sx, int ident)
{
	struct stat st;
	memset(&st, 0, sizeof(st));
	if (r == 0) {
		st.st_size = (off_t)sx->stx_size;
		st.st_mode = sx->stx_mode;
		st.st_mtim.tv_sec = sx->stx_mtime.tv_sec;
		st.st_mtim.tv_nsec = sx->stx_mtime.tv_nsec;
		st.st_dev = makedev(sx->stx_dev_major, sx->stx_dev_minor);
		st.st_ino = sx->stx_ino;
	}
	show(fn, rel, r, &st, ident);
}

static void op_stat(void)
{
	xstat_fn xstat = (xstat_fn)dlsym(RTLD_DEFAULT, "__xstat");
	xstat_fn lxstat = (xstat_fn)dlsym(RTLD_DEFAULT, "__lxstat");
	xstat_fn xstat64 = (xstat_fn)dlsym(RTLD_DEFAULT, "__xstat64");
	xstat_fn lxstat64 = (xstat_fn)dlsym(RTLD_DEFAULT, "__lxstat64");
	fxstat_fn fxstat = (fxstat_fn)dlsym(RTLD_DEFAULT, "__fxstat");
	fxstat_fn fxstat64 = (fxstat_fn)dlsym(RTLD_DEFAULT, "__fxstat64");
	fxstatat_fn fxstatat = (fxstatat_fn)dlsym(RTLD_DEFAULT, "__fxstatat");
	fxstatat_fn fxstatat64 = (fxstatat_fn)dlsym(RTLD_DEFAULT, "__fxstatat64");
	if (!xstat || !lxstat || !xstat64 || !lxstat64 || !fxstat || !fxstat64 || !fxstatat ||
	    !fxstatat64) {
		printf("missing __xstat family\n");
		return;
	}
	const int ver = 1; /* _STAT_VER_LINUX on x86_64 */
	const char *rels[] = {"a.bin", "link.bin", "sub", "zdir", "nosuch", "sub/c.bin"};
	for (unsigned i = 0; i < sizeof(rels) / sizeof(rels[0]); i++) {
		const char *rel = rels[i], *p = P(rels[i]);
		struct stat st;
		struct stat64 st64;
		struct statx sx;
		show("stat", rel, stat(p, &st), &st, 0);
		show("lstat", rel, lstat(p, &st), &st, 0);
		show("fstatat", rel, fstatat(AT_FDCWD, p, &st, 0), &st, 0);
		show("fstatat-nofollow", rel, fstatat(AT_FDCWD, p, &st, AT_SYMLINK_NOFOLLOW), &st, 0);
		show("stat64", rel, stat64(p, &st64), (struct stat *)&st64, 0);
		show("lstat64", rel, lstat64(p, &st64), (struct stat *)&st64, 0);
		show("fstatat64", rel, fstatat64(AT_FDCWD, p, &st64, 0), (struct stat *)&st64, 0);
		show("__xstat", rel, xstat(ver, p, &st), &st, 0);
		show("__lxstat", rel, lxstat(ver, p, &st), &st, 0);
		show("__xstat64", rel, xstat64(ver, p, &st), &st, 0);
		show("__lxstat64", rel, lxstat64(ver, p, &st), &st, 0);
		show("__fxstatat", rel, fxstatat(ver, AT_FDCWD, p, &st, 0), &st, 0);
		show("__fxstatat64", rel, fxstatat64(ver, AT_FDCWD, p, &st, AT_SYMLINK_NOFOLLOW), &st, 0);
		memset(&sx, 0, sizeof(sx));
		show_statx("statx", rel, statx(AT_FDCWD, p, 0, STATX_BASIC_STATS, &sx), &sx, 0);

		/* Descriptor-based: on a descriptor the shim served from a tier. */
		int fd = open(p, O_RDONLY, 0);
		if (fd < 0) {
			err("open-for-fstat");
			continue;
		}
		show("fstat", rel, fstat(fd, &st), &st, 1);
		show("fstat64", rel, fstat64(fd, &st64), (struct stat *)&st64, 1);
		show("__fxstat", rel, fxstat(ver, fd, &st), &st, 1);
		show("__fxstat64", rel, fxstat64(ver, fd, &st), &st, 1);
		show("fstatat-empty", rel, fstatat(fd, "", &st, AT_EMPTY_PATH), &st, 1);
		memset(&sx, 0, sizeof(sx));
		show_statx("statx-empty", rel, statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &sx), &sx, 1);
		if (S_ISDIR(st.st_mode)) {
			/* Relative to a directory descriptor of the dataset. */
			show("fstatat-dirfd", rel, fstatat(fd, "c.bin", &st, 0), &st, 0);
			show("__fxstatat-dirfd", rel, fxstatat(ver, fd, "c.bin", &st, 0), &st, 0);
		}
		close(fd);
	}
}

/* ---- open flags --------------------------------------------------------- */

static void op_directory(void)
{
	int fd = open(root, O_RDONLY | O_DIRECTORY, 0);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		err("O_DIRECTORY");
		return;
	}
	char names[64][256];
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < 64)
		snprintf(names[n++], 256, "%s", e->d_name);
	qsort(names, (size_t)n, 256, (int (*)(const void *, const void *))strcmp);
	printf("entries");
	for (int i = 0; i < n; i++)
		printf(" %s", names[i]);
	printf("\n");
	closedir(d);
	if (open(P("a.bin"), O_RDONLY | O_DIRECTORY, 0) < 0)
		err("O_DIRECTORY-on-file");
	if (open(P("link.bin"), O_RDONLY | O_DIRECTORY, 0) < 0)
		err("O_DIRECTORY-on-link");
	fd = open(P("zdir"), O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		err("O_DIRECTORY-dir-link");
	else {
		at("O_DIRECTORY-dir-link-openat", fd, "sub/c.bin", "c.bin");
		close(fd);
	}
	fd = open(P("sub"), O_RDONLY, 0);
	if (fd < 0)
		err("open-dir");
	else {
		char c;
		if (read(fd, &c, 1) < 0)
			err("read-dir");
		close(fd);
	}
}

static void op_opath(void)
{
	int fd = open(P("a.bin"), O_PATH, 0);
	if (fd < 0) {
		err("O_PATH");
		return;
	}
	char c;
	if (read(fd, &c, 1) < 0)
		err("read-O_PATH");
	struct stat st;
	if (fstat(fd, &st) == 0)
		printf("O_PATH fstat size=%lld\n", (long long)st.st_size);
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	read_path("O_PATH-reopen", "a.bin", proc, O_RDONLY);
	close(fd);
	fd = open(P("link.bin"), O_PATH | O_NOFOLLOW, 0);
	if (fd < 0)
		err("O_PATH|O_NOFOLLOW");
	else {
		if (fstatat(fd, "", &st, AT_EMPTY_PATH) == 0)
			printf("O_PATH|O_NOFOLLOW is-link %d\n", S_ISLNK(st.st_mode));
		close(fd);
	}
}

static void op_nofollow(void)
{
	read_path("O_NOFOLLOW", "sub/c.bin", P("sub/c.bin"), O_RDONLY | O_NOFOLLOW);
	read_path("O_NOFOLLOW-link", "-", P("link.bin"), O_RDONLY | O_NOFOLLOW);
	read_path("O_NOFOLLOW-dir-link", "sub/c.bin", P("zdir/c.bin"), O_RDONLY | O_NOFOLLOW);
}

static void op_cloexec(void)
{
	int fd = open(P("a.bin"), O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		err("O_CLOEXEC");
		return;
	}
	cloexec_of("O_CLOEXEC", fd);
	printf("O_CLOEXEC accmode %d\n", fcntl(fd, F_GETFL) & O_ACCMODE);
	data("O_CLOEXEC", "a.bin", 0, read_all(fd));
	close(fd);
	fd = open(P("a.bin"), O_RDONLY, 0);
	cloexec_of("plain", fd);
	close(fd);
}

static void op_noatime(void)
{
	int fd = open(P("noat.bin"), O_RDONLY | O_NOATIME, 0);
	if (fd < 0) {
		err("O_NOATIME");
		return;
	}
	data("O_NOATIME", "noat.bin", 0, read_all(fd));
	close(fd);
}

static void op_direct(void)
{
	int fd = open(P("dio.bin"), O_RDONLY | O_DIRECT, 0);
	if (fd < 0) {
		err("O_DIRECT");
		return;
	}
	void *buf;
	if (posix_memalign(&buf, 4096, 65536) != 0)
		return;
	struct acc a = acc_new();
	for (;;) {
		ssize_t n = read(fd, buf, 65536);
		if (n < 0) {
			err("read-O_DIRECT");
			break;
		}
		if (n == 0)
			break;
		acc_add(&a, buf, (size_t)n);
	}
	data("O_DIRECT", "dio.bin", 0, a);
	a = acc_new();
	ssize_t n = pread(fd, buf, 4096, 4096);
	if (n < 0)
		err("pread-O_DIRECT");
	else
		acc_add(&a, buf, (size_t)n);
	printf("O_DIRECT pread %zd\n", n);
	free(buf);
	close(fd);
}

static const struct {
	const char *name;
	void (*fn)(void);
} ops[] = {
	{"fortify", op_fortify}, {"open", op_open},       {"openat", op_openat},
	{"opendir", op_opendir}, {"cwd", op_cwd},         {"dots", op_dots},
	{"symlink", op_symlink}, {"stdio", op_stdio},     {"freopen", op_freopen},
	{"dup", op_dup},         {"sendfile", op_sendfile}, {"cfr", op_cfr},
	{"vec", op_vec},         {"mmap", op_mmap},       {"stat", op_stat},
	{"directory", op_directory}, {"opath", op_opath}, {"nofollow", op_nofollow},
	{"cloexec", op_cloexec}, {"noatime", op_noatime}, {"direct", op_direct},
};

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: posix OP DATASET SCRATCH\n");
		return 2;
	}
	root = argv[2];
	scratch = argv[3];
	for (unsigned i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		if (strcmp(ops[i].name, argv[1]) == 0) {
			ops[i].fn();
			return fflush(stdout) == 0 ? 0 : 1;
		}
	}
	fprintf(stderr, "posix: unknown op %s\n", argv[1]);
	return 2;
}
