/*
 * dlreader.c — the reader of `augur bench`: a deep-learning data loader in
 * C, through plain libc calls, as PyTorch's DataLoader workers do it.
 *
 *   dlreader [-R RANKS] [-W WORKERS] [-B BATCH] [-P PREFETCH] [-c COMPUTE_US]
 *            [-t COMPUTE_MBPS] [-m whole|pread|mmap|head|stream] [-s STARTUP_US] [-n] [-S]
 *            [-b] [-p] [-L LATDIR] LIST ORDER
 *
 * LIST has one sample per line, in dataset index order:
 *     f <offset> <length> <path>   a whole file (offset 0, length its size)
 *     r <offset> <length> <path>   a record: length bytes at offset of path
 *     F <offset> <length> <sum> <path>, R ...   the same, with the CRC-32C
 *                                  of the sample's bytes (8 hex digits):
 *                                  every sample read whole is checked
 * ORDER is the access order, computed by the caller (augur bench uses the
 * exact PyTorch DistributedSampler order from seed/):
 *     epochs <E> ranks <R>
 *     <epoch> <rank> <n> <idx> <idx> ...      one line per epoch and rank
 *
 * -m says how a whole file is read: read() to EOF, fstat and pread, mmap
 * and a touch of every page, or (head) a pread of its first 4 KiB, as a
 * loader reads a header; a record is read whole in every mode: lseek and
 * read(), pread, from a mapping of its file, or (stream) with read() on
 * through its file from where the process's last record ended, the bytes
 * between them read and dropped, as tarfile's stream mode and WebDataset
 * read a shard (a record behind that, or in another file, opens the file
 * afresh). Head mode reads part of a sample: a list with sums is refused.
 *
 * Processes, as in DDP training with a DataLoader per rank: every epoch the
 * coordinator (this process) forks RANKS rank processes; each rank forks
 * WORKERS worker processes (0: the rank reads itself), hands batch b to
 * worker b % WORKERS with at most PREFETCH batches per worker in flight,
 * takes the batches back in order and "computes" on each for COMPUTE_US
 * (or the batch's bytes at COMPUTE_MBPS) by sleeping: the GPU computes,
 * the CPU is free. With -S (the default is on; -S turns it off) ranks meet
 * at a barrier after every step, as DDP's gradient all-reduce makes them.
 * -n reads nothing (the compute loop alone). -s sleeps STARTUP_US before the
 * first epoch, the time a training script spends before its first batch
 * (imports, building the model, connecting the ranks) without reading the
 * dataset; the epochs' times do not include it.
 *
 * Output, one line per epoch on stdout:
 *     epoch E samples N bytes B wall_ns T stall_ns S stall_max_ns M
 *           sync_ns Y errors X corrupt C
 * stall_ns is the mean over ranks of the time the compute loop waited for
 * its next batch; sync_ns the mean time waiting for the other ranks;
 * errors counts failed or short reads, corrupt the samples read whole
 * whose bytes were not what their sum says (the first few are named on
 * stderr). With
 * -L, the latency of every sample read (open to close for a whole file, the
 * read calls for a record), in nanoseconds as little-endian uint64, rank
 * after rank in access order, goes to LATDIR/lat-E.bin, and the sample
 * index read at each of those positions to LATDIR/idx-E.bin (same format).
 * With -p, lines "progress E DONE TOTAL" report samples done while an epoch
 * runs. With -b the reader waits for a line on stdin after each epoch line
 * but the last,
 * so the caller can read counters between epochs.
 *
 * With -G FILE:N this reader is one node of a job of N ranks in all, and
 * its ranks meet the other nodes' after every step, at a barrier in FILE
 * (a file every node's reader maps; the caller removes it before the
 * job): DDP's all-reduce keeps every rank of a job in step, not only a
 * node's. DistributedSampler gives every rank as many steps.
 */
#include "dlreader.h"

/* Options and inputs, set before the first fork and read-only after. */
int ranks = 1, workers = 0, batch = 32, prefetch = 2, noio, sync_steps = 1;
int barrier_stdin, progress;
const char *job_barrier; /* -G FILE:N */
int job_ranks;
long long compute_ns;
long long startup_ns; /* -s: before the first epoch */
double compute_bps;
char mode = 'w';
const char *latdir;
char **files;
int nfiles;
struct sample *samples;
long nsamples;
long nchecked;
int epochs;
long **order; /* order[e*ranks + r] */
long *norder; /* its length */

struct shared *sh;
unsigned long long *lat; /* per sample of the epoch, rank after rank */
unsigned long long *idx; /* the index read there */

char *buf;

long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void die(const char *what)
{
	perror(what);
	exit(1);
}

void sleep_ns(long long ns)
{
	if (ns <= 0)
		return;
	struct timespec ts = {ns / 1000000000LL, ns % 1000000000LL};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void xwrite(int fd, const void *p, size_t n)
{
	while (write(fd, p, n) < 0)
		if (errno != EINTR)
			die("write");
}

static int xread(int fd, void *p, size_t n)
{
	ssize_t got;
	while ((got = read(fd, p, n)) < 0)
		if (errno != EINTR)
			die("read");
	if (got != 0 && (size_t)got != n) {
		fprintf(stderr, "dlreader: short pipe read\n");
		exit(1);
	}
	return got != 0;
}

/* What a worker sends back for one batch. */
struct done {
	long batch;
	long long bytes;
	long samples, errors, corrupt;
};

static void worker(int e, int r, int task, int result, long latbase)
{
	long b;
	while (xread(task, &b, sizeof(b))) {
		struct rankstat st = {0};
		read_batch(e, r, b, &st, latbase);
		struct done d = {b, st.bytes, st.samples, st.errors, st.corrupt};
		xwrite(result, &d, sizeof(d));
	}
	rec_close_all();
	_exit(0);
}

/* jobbar is the job's step barrier, shared by every node's reader
 * through a file: a generation counter that the last rank to arrive
 * advances, the others waiting on it with futex(2). */
struct jobbar {
	int n, count, gen;
};
static struct jobbar *jb;

static void open_job_barrier(void)
{
	int fd = open(job_barrier, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, sizeof(*jb)) != 0)
		die(job_barrier);
	jb = mmap(NULL, sizeof(*jb), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (jb == MAP_FAILED)
		die(job_barrier);
	close(fd);
	__atomic_store_n(&jb->n, job_ranks, __ATOMIC_RELEASE); /* every node writes the same */
}

/* job_step waits until every rank of the job has finished the step, at
 * most a minute: a node that died must not hang the others. */
static void job_step(void)
{
	int gen = __atomic_load_n(&jb->gen, __ATOMIC_ACQUIRE);
	if (__atomic_add_fetch(&jb->count, 1, __ATOMIC_ACQ_REL) == job_ranks) {
		__atomic_store_n(&jb->count, 0, __ATOMIC_RELAXED);
		__atomic_add_fetch(&jb->gen, 1, __ATOMIC_RELEASE);
		syscall(SYS_futex, &jb->gen, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
		return;
	}
	long long deadline = now_ns() + 60000000000LL;
	while (__atomic_load_n(&jb->gen, __ATOMIC_ACQUIRE) == gen) {
		if (now_ns() > deadline) {
			fprintf(stderr, "dlreader: the job's other ranks did not finish their step in a minute\n");
			exit(1);
		}
		struct timespec ts = {1, 0};
		syscall(SYS_futex, &jb->gen, FUTEX_WAIT, gen, &ts, NULL, 0);
	}
}

static void rank(int e, int r, long latbase)
{
	struct rankstat *st = &sh->r[r];
	long n = norder[e * ranks + r];
	long nb = (n + batch - 1) / batch;
	int w = noio ? 0 : workers;
	int task[w > 0 ? w : 1], result[2] = {-1, -1};
	pid_t pids[w > 0 ? w : 1];
	char *ready = calloc(nb ? nb : 1, 1);
	long sent = 0;
	if (w > 0) {
		if (pipe(result) < 0)
			die("pipe");
		for (int k = 0; k < w; k++) {
			int p[2];
			if (pipe(p) < 0)
				die("pipe");
			pids[k] = fork();
			if (pids[k] < 0)
				die("fork");
			if (pids[k] == 0) {
				close(p[1]);
				close(result[0]);
				for (int j = 0; j < k; j++)
					close(task[j]);
				worker(e, r, p[0], result[1], latbase);
			}
			close(p[0]);
			task[k] = p[1];
		}
		close(result[1]);
		for (; sent < nb && sent < (long)prefetch * w; sent++)
			xwrite(task[sent % w], &sent, sizeof(sent));
	}
	for (long b = 0; b < nb; b++) {
		long long t0 = now_ns();
		if (w > 0) {
			while (!ready[b]) {
				struct done d;
				if (!xread(result[0], &d, sizeof(d))) {
					fprintf(stderr, "dlreader: rank %d: a worker died\n", r);
					exit(1);
				}
				ready[d.batch] = 1;
				st->bytes += d.bytes;
				st->samples += d.samples;
				st->errors += d.errors;
				st->corrupt += d.corrupt;
			}
			if (sent < nb) {
				xwrite(task[sent % w], &sent, sizeof(sent));
				sent++;
			}
		} else if (!noio) {
			read_batch(e, r, b, st, latbase);
		}
		st->stall_ns += now_ns() - t0;
		long long c = compute_ns;
		if (compute_bps > 0)
			c += (long long)(batch_bytes(e, r, b) / compute_bps * 1e9);
		sleep_ns(c);
		long in_batch = n - b * batch < batch ? n - b * batch : batch;
		if (noio)
			st->samples += in_batch;
		__atomic_add_fetch(&sh->done, in_batch, __ATOMIC_RELAXED);
		if (sync_steps && (ranks > 1 || jb)) {
			long long t1 = now_ns();
			if (jb)
				job_step();
			else
				pthread_barrier_wait(&sh->step);
			st->sync_ns += now_ns() - t1;
		}
	}
	st->end_ns = now_ns();
	for (int k = 0; k < w; k++)
		close(task[k]);
	for (int k = 0; k < w; k++) {
		int status;
		while (waitpid(pids[k], &status, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "dlreader: rank %d: worker %d failed\n", r, k);
			exit(1);
		}
	}
	rec_close_all();
	exit(0);
}

static void write_array(const char *what, int e, const unsigned long long *a, long total)
{
	char name[4096];
	snprintf(name, sizeof(name), "%s/%s-%d.bin", latdir, what, e + 1);
	FILE *f = fopen(name, "w");
	if (!f)
		die(name);
	if (fwrite(a, sizeof(*a), total, f) != (size_t)total || fclose(f) != 0)
		die(name);
}

static int run_epoch(int e)
{
	long total = 0, latbase[ranks];
	for (int r = 0; r < ranks; r++) {
		latbase[r] = total;
		total += norder[e * ranks + r];
		if (sync_steps && (norder[e * ranks + r] + batch - 1) / batch !=
				      (norder[e * ranks] + batch - 1) / batch) {
			fprintf(stderr, "dlreader: epoch %d: ranks have different batch counts; "
					"step sync (turn it off with -S) would deadlock\n", e + 1);
			return -1;
		}
	}
	memset(sh->r, 0, ranks * sizeof(sh->r[0]));
	sh->done = 0;
	memset(lat, 0, total * sizeof(*lat));
	memset(idx, 0xff, total * sizeof(*idx));
	fflush(stdout);
	pid_t pids[ranks];
	long long start = now_ns();
	for (int r = 0; r < ranks; r++) {
		pids[r] = fork();
		if (pids[r] < 0)
			die("fork");
		if (pids[r] == 0) {
			/* As torchrun does, so an I/O library (augur) knows
			 * which rank reads; workers forked later inherit it. */
			char v[16];
			snprintf(v, sizeof(v), "%d", r);
			setenv("LOCAL_RANK", v, 1);
			setenv("RANK", v, 1);
			snprintf(v, sizeof(v), "%d", ranks);
			setenv("WORLD_SIZE", v, 1);
			rank(e, r, latbase[r]);
		}
	}
	int alive = ranks, failed = 0;
	long shown = -1;
	while (alive > 0) {
		int status;
		pid_t p = waitpid(-1, &status, progress ? WNOHANG : 0);
		if (p < 0 && errno != EINTR)
			die("waitpid");
		if (p > 0) {
			alive--;
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
				failed = 1;
				for (int r = 0; r < ranks; r++)
					kill(pids[r], SIGKILL); /* the others wait at the barrier */
			}
			continue;
		}
		if (p == 0) {
			long d = __atomic_load_n(&sh->done, __ATOMIC_RELAXED);
			if (d != shown) {
				printf("progress %d %ld %ld\n", e + 1, d, total);
				fflush(stdout);
				shown = d;
			}
			sleep_ns(100 * 1000000LL);
		}
	}
	if (failed) {
		fprintf(stderr, "dlreader: epoch %d: a rank failed\n", e + 1);
		return -1;
	}
	long long end = 0, stall = 0, stall_max = 0, syn = 0, bytes = 0;
	long n = 0, errors = 0, corrupt = 0;
	for (int r = 0; r < ranks; r++) {
		struct rankstat *s = &sh->r[r];
		if (s->end_ns > end)
			end = s->end_ns;
		stall += s->stall_ns;
		if (s->stall_ns > stall_max)
			stall_max = s->stall_ns;
		syn += s->sync_ns;
		bytes += s->bytes;
		n += s->samples;
		errors += s->errors;
		corrupt += s->corrupt;
	}
	if (latdir && !noio) {
		write_array("lat", e, lat, total);
		write_array("idx", e, idx, total);
	}
	printf("epoch %d samples %ld bytes %lld wall_ns %lld stall_ns %lld stall_max_ns %lld sync_ns %lld errors %ld "
	       "corrupt %ld\n",
	       e + 1, n, bytes, end - start, stall / ranks, stall_max, syn / ranks, errors, corrupt);
	fflush(stdout);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: dlreader [-R RANKS] [-W WORKERS] [-B BATCH] [-P PREFETCH] [-c COMPUTE_US]\n"
			"                [-t COMPUTE_MBPS] [-m whole|pread|mmap|head|stream] [-s STARTUP_US] [-n] [-S] [-b]\n"
			"                [-p] [-L LATDIR] [-G BARRIERFILE:JOBRANKS] LIST ORDER\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int opt;
	while ((opt = getopt(argc, argv, "R:W:B:P:c:t:m:s:nSbpL:G:")) != -1) {
		switch (opt) {
		case 'R': ranks = atoi(optarg); break;
		case 'W': workers = atoi(optarg); break;
		case 'B': batch = atoi(optarg); break;
		case 'P': prefetch = atoi(optarg); break;
		case 'c': compute_ns = atoll(optarg) * 1000; break;
		case 't': compute_bps = atof(optarg) * 1e6; break;
		case 'm':
			if (strcmp(optarg, "whole") == 0)
				mode = 'w';
			else if (strcmp(optarg, "pread") == 0)
				mode = 'p';
			else if (strcmp(optarg, "mmap") == 0)
				mode = 'm';
			else if (strcmp(optarg, "head") == 0)
				mode = 'h';
			else if (strcmp(optarg, "stream") == 0)
				mode = 's';
			else
				usage();
			break;
		case 's': startup_ns = atoll(optarg) * 1000; break;
		case 'n': noio = 1; break;
		case 'S': sync_steps = 0; break;
		case 'b': barrier_stdin = 1; break;
		case 'p': progress = 1; break;
		case 'L': latdir = optarg; break;
		case 'G': {
			char *colon = strrchr(optarg, ':');
			if (!colon)
				usage();
			*colon = 0;
			job_barrier = optarg;
			job_ranks = atoi(colon + 1);
			break;
		}
		default: usage();
		}
	}
	if (optind != argc - 2 || ranks < 1 || workers < 0 || batch < 1 || prefetch < 1 ||
	    compute_ns < 0 || compute_bps < 0 || startup_ns < 0 || (job_barrier && job_ranks < ranks))
		usage();
	if (job_barrier)
		open_job_barrier();
	load_list(argv[optind]);
	load_order(argv[optind + 1]);
	if (mode == 'h' && nchecked > 0) {
		fprintf(stderr, "dlreader: -m head reads part of each file: its sums cannot be checked\n");
		exit(2);
	}
	crc32c_init();
	buf = malloc(BUFSZ);
	long maxtotal = 1;
	for (int e = 0; e < epochs; e++) {
		long t = 0;
		for (int r = 0; r < ranks; r++)
			t += norder[e * ranks + r];
		if (t > maxtotal)
			maxtotal = t;
	}
	sh = mmap(NULL, sizeof(*sh) + ranks * sizeof(sh->r[0]), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	lat = mmap(NULL, maxtotal * sizeof(*lat), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	idx = mmap(NULL, maxtotal * sizeof(*idx), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED || lat == MAP_FAILED || idx == MAP_FAILED)
		die("mmap");
	pthread_barrierattr_t ba;
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	if (pthread_barrier_init(&sh->step, &ba, ranks) != 0)
		die("pthread_barrier_init");
	sleep_ns(startup_ns);
	for (int e = 0; e < epochs; e++) {
		if (run_epoch(e) < 0)
			return 1;
		if (barrier_stdin && e + 1 < epochs) {
			char line[64];
			if (!fgets(line, sizeof(line), stdin))
				barrier_stdin = 0; /* the caller went away: run on */
		}
	}
	return 0;
}

