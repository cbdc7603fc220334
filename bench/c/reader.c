/*
 * reader.c — a training-style dataset reader: each epoch it reads every
 * file of a list in a shuffled order (a pure function of the seed and
 * the epoch), through plain libc calls as a data loader does, optionally
 * "computing" for a while per file. It prints one line per epoch.
 *
 *   reader [-m whole|pread|mmap] [-e EPOCHS] [-s SEED] [-c COMPUTE_US] LIST
 *
 * Output lines: "epoch E files N bytes B seconds T".
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 20];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* splitmix64: a small, well-mixed generator for the shuffle. */
static uint64_t next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static long read_file(const char *path, char mode)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	long total = 0;
	if (mode == 'w') {
		ssize_t n;
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			total += n;
	} else {
		struct stat st;
		fstat(fd, &st);
		if (mode == 'p') {
			ssize_t n;
			while (total < st.st_size &&
			       (n = pread(fd, buf, sizeof(buf), total)) > 0)
				total += n;
		} else if (st.st_size > 0) {
			volatile unsigned char *p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
			if (p == MAP_FAILED) {
				perror("mmap");
				exit(1);
			}
			unsigned sum = 0;
			for (off_t i = 0; i < st.st_size; i += 4096)
				sum += p[i];
			(void)sum;
			munmap((void *)p, st.st_size);
			total = st.st_size;
		}
	}
	close(fd);
	return total;
}

int main(int argc, char **argv)
{
	char mode = 'w';
	int epochs = 1, opt;
	uint64_t seed = 0;
	long compute_us = 0;
	while ((opt = getopt(argc, argv, "m:e:s:c:")) != -1) {
		switch (opt) {
		case 'm': mode = optarg[0] == 'p' ? 'p' : optarg[1] == 'm' ? 'm' : 'w'; break;
		case 'e': epochs = atoi(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'c': compute_us = atol(optarg); break;
		default:
			fprintf(stderr, "usage: reader [-m whole|pread|mmap] [-e N] [-s SEED] [-c US] LIST\n");
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "reader: one list file expected\n");
		return 2;
	}
	FILE *f = fopen(argv[optind], "r");
	if (!f) {
		perror(argv[optind]);
		return 1;
	}
	char **paths = NULL, line[4096];
	size_t np = 0, cap = 0;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!*line)
			continue;
		if (np == cap)
			paths = realloc(paths, (cap = cap ? 2 * cap : 256) * sizeof(*paths));
		paths[np++] = strdup(line);
	}
	fclose(f);
	for (int e = 0; e < epochs; e++) {
		uint64_t s = seed * 1000003 + e;
		for (size_t i = np; i > 1; i--) { /* Fisher-Yates */
			size_t j = next(&s) % i;
			char *t = paths[i - 1];
			paths[i - 1] = paths[j];
			paths[j] = t;
		}
		double t0 = now();
		long bytes = 0;
		for (size_t i = 0; i < np; i++) {
			bytes += read_file(paths[i], mode);
			if (compute_us)
				usleep(compute_us);
		}
		printf("epoch %d files %zu bytes %ld seconds %.3f\n", e + 1, np, bytes, now() - t0);
		fflush(stdout);
	}
	return 0;
}
