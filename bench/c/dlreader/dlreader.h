/*
 * dlreader.h — what the reader's files share: its options and inputs,
 * the state shared between the processes of an epoch, and each file's
 * functions for the others. dlreader.c holds the processes (ranks,
 * workers, epochs) and main; samples.c the inputs and the reading of one
 * sample.
 */
#ifndef DLREADER_H
#define DLREADER_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


#define BUFSZ (4 << 20)
#define HEAD 4096 /* -m head reads this much of each whole file */

struct sample {
	char kind;  /* 'f' whole file, 'r' record */
	char check; /* sum holds the CRC-32C its bytes must have */
	int file;   /* index into files */
	long long off, len;
	uint32_t sum;
};

/* Options and inputs, set before the first fork and read-only after. */
extern int ranks, workers, batch, prefetch, noio, sync_steps;
extern int barrier_stdin, progress;
extern const char *job_barrier;
extern int job_ranks;
extern long long compute_ns, startup_ns;
extern double compute_bps;
extern char mode;
extern const char *latdir;
extern char **files;
extern int nfiles;
extern struct sample *samples;
extern long nsamples;
extern long nchecked; /* samples with a sum */
extern int epochs;
extern long **order;
extern long *norder;

/* Shared between the processes of one epoch (MAP_SHARED, set up once). */
struct rankstat {
	long long stall_ns, sync_ns, bytes, end_ns;
	long samples, errors, corrupt; /* corrupt: read whole, with other bytes than its sum says */
};
struct shared {
	pthread_barrier_t step;
	long done;
	struct rankstat r[];
};
extern struct shared *sh;
extern unsigned long long *lat, *idx;
extern char *buf; /* BUFSZ, each process's own */

long long now_ns(void);
void die(const char *what);
void sleep_ns(long long ns);

/* samples.c */
void load_list(const char *name);
void load_order(const char *name);
void read_batch(int e, int r, long b, struct rankstat *st, long latbase);
long long batch_bytes(int e, int r, long b);
void rec_close_all(void);

/* sum.c */
void crc32c_init(void);
uint32_t crc32c(uint32_t crc, const void *p, size_t n);

#endif
