/*
 * micro.c — the shim's overhead, one libc call pattern at a time. It is
 * run with and without LD_PRELOAD by bench/shimbench, which reports the
 * ratios. Output: one line "ns_per_op <value>".
 *
 *   micro orc   FILE  N   open + read(4 KiB) + close of FILE, N times
 *   micro pread FILE  N   pread of 4 KiB at offset 0 of an open FILE, N times
 *   micro files LIST  N   read every file named in LIST whole, N passes
 *
 * A fourth argument "mt" starts an idle thread first. A multi-threaded
 * process pays for glibc's cancellation bookkeeping on every read, open
 * and close; a single-threaded one does not. Any preload that starts a
 * thread (a Go runtime does) moves a single-threaded program from the
 * first case to the second, so the benchmark reports both.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void die(const char *what, const char *arg)
{
	perror(arg ? arg : what);
	exit(1);
}

static char buf[1 << 20];

static void *idle(void *arg)
{
	for (;;)
		pause();
	return arg;
}

static double orc(const char *path, long n)
{
	double t0 = now();
	for (long i = 0; i < n; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			die("open", path);
		if (read(fd, buf, 4096) < 0)
			die("read", path);
		close(fd);
	}
	return (now() - t0) / n;
}

static double pread_loop(const char *path, long n)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die("open", path);
	double t0 = now();
	for (long i = 0; i < n; i++)
		if (pread(fd, buf, 4096, 0) < 0)
			die("pread", path);
	double t = (now() - t0) / n;
	close(fd);
	return t;
}

static double files(const char *list, long passes)
{
	FILE *f = fopen(list, "r");
	if (!f)
		die("fopen", list);
	char **paths = NULL;
	size_t np = 0, cap = 0;
	char line[4096];
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (np == cap)
			paths = realloc(paths, (cap = cap ? 2 * cap : 64) * sizeof(*paths));
		paths[np++] = strdup(line);
	}
	fclose(f);
	double t0 = now();
	for (long p = 0; p < passes; p++)
		for (size_t i = 0; i < np; i++) {
			int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				die("open", paths[i]);
			ssize_t r;
			while ((r = read(fd, buf, sizeof(buf))) > 0)
				;
			if (r < 0)
				die("read", paths[i]);
			close(fd);
		}
	return (now() - t0) / (passes * (double)np);
}

int main(int argc, char **argv)
{
	if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "mt"))) {
		fprintf(stderr, "usage: micro orc|pread|files PATH N [mt]\n");
		return 2;
	}
	long n = atol(argv[3]);
	pthread_t t;
	if (argc == 5 && pthread_create(&t, NULL, idle, NULL) != 0) {
		fprintf(stderr, "micro: pthread_create failed\n");
		return 1;
	}
	double ns;
	if (!strcmp(argv[1], "orc"))
		ns = orc(argv[2], n);
	else if (!strcmp(argv[1], "pread"))
		ns = pread_loop(argv[2], n);
	else if (!strcmp(argv[1], "files"))
		ns = files(argv[2], n);
	else {
		fprintf(stderr, "micro: unknown mode %s\n", argv[1]);
		return 2;
	}
	printf("ns_per_op %.1f\n", ns);
	return 0;
}
