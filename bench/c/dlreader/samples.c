/*
 * samples.c — the reader's inputs (the sample list and the access order)
 * and the reading of one sample: a whole file (read to EOF, pread, mmap
 * or its head) or a record (a range of a file, its descriptor kept open,
 * or read in a stream through the file), with the CRC-32C of its bytes
 * checked when the list gives one.
 */
#include "dlreader.h"

static int file_index(const char *path)
{
	/* Records come a few large files at a time, in file order: the last
	 * file is the usual hit. Whole files are each their own entry. */
	if (nfiles > 0 && strcmp(files[nfiles - 1], path) == 0)
		return nfiles - 1;
	for (int i = 0; i < nfiles; i++)
		if (strcmp(files[i], path) == 0)
			return i;
	return -1;
}

void load_list(const char *name)
{
	FILE *f = fopen(name, "r");
	if (!f)
		die(name);
	char *line = NULL;
	size_t cap = 0;
	long scap = 0;
	int fcap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] == '\n')
			line[--n] = 0;
		if (n == 0)
			continue;
		char kind;
		long long off, len;
		unsigned sum = 0;
		int pos, more = 0;
		int n3 = sscanf(line, "%c %lld %lld %n", &kind, &off, &len, &pos);
		/* F and R are f and r with the sample's CRC-32C before its path. */
		int check = n3 == 3 && (kind == 'F' || kind == 'R');
		if (check && sscanf(line + pos, "%8x %n", &sum, &more) != 1)
			check = -1;
		pos += more;
		kind |= 0x20; /* lower case */
		if (n3 != 3 || check < 0 || (kind != 'f' && kind != 'r') || off < 0 || len < 0 || !line[pos]) {
			fprintf(stderr, "dlreader: %s: bad line %ld: %s\n", name, nsamples + 1, line);
			exit(2);
		}
		nchecked += check;
		const char *path = line + pos;
		int fi = kind == 'r' ? file_index(path) : -1;
		if (fi < 0) {
			if (nfiles == fcap)
				files = realloc(files, (fcap = fcap ? 2 * fcap : 256) * sizeof(*files));
			files[nfiles] = strdup(path);
			fi = nfiles++;
		}
		if (nsamples == scap)
			samples = realloc(samples, (scap = scap ? 2 * scap : 256) * sizeof(*samples));
		samples[nsamples++] = (struct sample){kind, (char)check, fi, off, len, sum};
	}
	free(line);
	fclose(f);
}

void load_order(const char *name)
{
	FILE *f = fopen(name, "r");
	if (!f)
		die(name);
	int r;
	if (fscanf(f, "epochs %d ranks %d", &epochs, &r) != 2 || epochs < 1 || r < 1) {
		fprintf(stderr, "dlreader: %s: want \"epochs E ranks R\" first\n", name);
		exit(2);
	}
	if (r != ranks) {
		fprintf(stderr, "dlreader: %s is for %d ranks, -R says %d\n", name, r, ranks);
		exit(2);
	}
	order = calloc((size_t)epochs * ranks, sizeof(*order));
	norder = calloc((size_t)epochs * ranks, sizeof(*norder));
	for (int k = 0; k < epochs * ranks; k++) {
		int e, rk;
		long n;
		if (fscanf(f, "%d %d %ld", &e, &rk, &n) != 3 || e < 0 || e >= epochs || rk < 0 ||
		    rk >= ranks || n < 0 || order[e * ranks + rk]) {
			fprintf(stderr, "dlreader: %s: bad or repeated epoch/rank line %d\n", name, k + 2);
			exit(2);
		}
		long *o = malloc((n ? n : 1) * sizeof(*o));
		for (long i = 0; i < n; i++)
			if (fscanf(f, "%ld", &o[i]) != 1 || o[i] < 0 || o[i] >= nsamples) {
				fprintf(stderr, "dlreader: %s: epoch %d rank %d: bad index at %ld\n", name, e, rk, i);
				exit(2);
			}
		order[e * ranks + rk] = o;
		norder[e * ranks + rk] = n;
	}
	fclose(f);
}

/* Records: each process keeps its descriptors (and mappings) open, as a
 * loader holding its shard files does. Whole files are opened per sample.
 * The stream mode reads records through one descriptor per process
 * instead (see read_stream). */
static int *rec_fd;
static unsigned char **rec_map;
static long long *rec_size;
static int stream_fd = -1, stream_file = -1;
static long long stream_pos;

static void stream_close(void)
{
	if (stream_fd >= 0)
		close(stream_fd);
	stream_fd = stream_file = -1;
}

static int rec_open(int fi)
{
	if (!rec_fd) {
		rec_fd = malloc(nfiles * sizeof(*rec_fd));
		rec_map = calloc(nfiles, sizeof(*rec_map));
		rec_size = calloc(nfiles, sizeof(*rec_size));
		for (int i = 0; i < nfiles; i++)
			rec_fd[i] = -1;
	}
	if (rec_fd[fi] < 0)
		rec_fd[fi] = open(files[fi], O_RDONLY | O_CLOEXEC);
	return rec_fd[fi];
}

void rec_close_all(void)
{
	stream_close();
	if (!rec_fd)
		return;
	for (int i = 0; i < nfiles; i++) {
		if (rec_map[i])
			munmap(rec_map[i], rec_size[i]);
		if (rec_fd[i] >= 0)
			close(rec_fd[i]);
	}
}


static unsigned touch(const unsigned char *p, long long n)
{
	volatile unsigned sum = 0;
	for (long long i = 0; i < n; i += 4096)
		sum += p[i];
	if (n > 0)
		sum += p[n - 1];
	return sum;
}

/* sum_into adds n bytes at p to *crc, when the caller checks them. */
static void sum_into(uint32_t *crc, const void *p, size_t n)
{
	if (crc)
		*crc = crc32c(*crc, p, n);
}

/* read_all reads len bytes (to EOF for a negative len) at off with
 * pread, or from the descriptor's position with read for a negative off;
 * returns the bytes read or -1. */
static long long read_all(int fd, long long off, long long len, uint32_t *crc)
{
	long long got = 0;
	while (len < 0 || got < len) {
		size_t want = len < 0 || len - got > BUFSZ ? BUFSZ : len - got;
		ssize_t n = off < 0 ? read(fd, buf, want) : pread(fd, buf, want, off + got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0)
			break;
		sum_into(crc, buf, n);
		got += n;
	}
	return got;
}

/* map_sum checks a mapped sample's bytes, or touches every page of them
 * when there is nothing to check. */
static void map_sum(const unsigned char *p, long long n, uint32_t *crc)
{
	if (crc)
		sum_into(crc, p, n);
	else
		touch(p, n);
}

static long long read_whole(const struct sample *s, uint32_t *crc)
{
	int fd = open(files[s->file], O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	long long total = 0;
	if (mode == 'h') { /* a file's header: its first HEAD bytes */
		total = read_all(fd, 0, HEAD, NULL);
	} else if (mode == 'w' || mode == 's') {
		total = read_all(fd, -1, -1, crc);
	} else {
		struct stat st;
		if (fstat(fd, &st) < 0) {
			total = -1;
		} else if (mode == 'p') {
			total = read_all(fd, 0, st.st_size, crc);
		} else if (st.st_size > 0) {
			void *p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
			if (p == MAP_FAILED) {
				total = -1;
			} else {
				map_sum(p, st.st_size, crc);
				munmap(p, st.st_size);
				total = st.st_size;
			}
		}
	}
	close(fd);
	return total;
}

/*
 * read_stream reads a record as tarfile's stream mode and WebDataset read
 * a shard: one descriptor per process goes through a file front to back
 * with read(), reading and dropping the bytes between records (a tar
 * member's header, its padding). A record behind the position, or in
 * another file, opens that file afresh at its start.
 */
static long long read_stream(const struct sample *s, uint32_t *crc)
{
	if (stream_file != s->file || stream_pos > s->off) {
		stream_close();
		if ((stream_fd = open(files[s->file], O_RDONLY | O_CLOEXEC)) < 0)
			return -1;
		stream_file = s->file;
		stream_pos = 0;
	}
	long long gap = s->off - stream_pos;
	long long got = read_all(stream_fd, -1, gap, NULL);
	if (got == gap)
		got = read_all(stream_fd, -1, s->len, crc);
	else if (got >= 0)
		got = 0; /* the file ends before the record */
	if (got < 0) {
		stream_close();
		return -1;
	}
	stream_pos = s->off + got;
	return got;
}

static long long read_record(const struct sample *s, uint32_t *crc)
{
	if (mode == 's')
		return read_stream(s, crc);
	int fd = rec_open(s->file);
	if (fd < 0)
		return -1;
	if (mode == 'm') {
		if (!rec_map[s->file]) {
			struct stat st;
			if (fstat(fd, &st) < 0 || st.st_size == 0)
				return -1;
			void *p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
			if (p == MAP_FAILED)
				return -1;
			rec_map[s->file] = p;
			rec_size[s->file] = st.st_size;
		}
		if (s->off + s->len > rec_size[s->file])
			return -1;
		map_sum(rec_map[s->file] + s->off, s->len, crc);
		return s->len;
	}
	if (mode == 'w') { /* seek and read, as a stream reader does */
		if (lseek(fd, s->off, SEEK_SET) < 0)
			return -1;
		return read_all(fd, -1, s->len, crc);
	}
	return read_all(fd, s->off, s->len, crc);
}

/* wrong counts a sample read whole whose bytes are not the dataset's,
 * and names the first few of each process on stderr. */
static void wrong(const struct sample *s, long i, long long got, uint32_t crc, struct rankstat *st)
{
	if (st->corrupt++ < 3)
		fprintf(stderr, "dlreader: wrong bytes: sample %ld (%s, %lld bytes at %lld): read %lld bytes, "
				"CRC-32C %08x, want %08x\n",
			i, files[s->file], s->len, s->off, got, crc, s->sum);
}

/* read_batch reads batch b of the rank's order, recording latencies. */
void read_batch(int e, int r, long b, struct rankstat *st, long latbase)
{
	const long *o = order[e * ranks + r];
	long n = norder[e * ranks + r];
	for (long i = b * batch; i < (b + 1) * batch && i < n; i++) {
		const struct sample *s = &samples[o[i]];
		uint32_t crc = 0, *check = s->check ? &crc : NULL;
		long long t0 = now_ns();
		long long got = s->kind == 'r' ? read_record(s, check) : read_whole(s, check);
		lat[latbase + i] = now_ns() - t0;
		idx[latbase + i] = o[i];
		if (got < 0 || (s->kind == 'r' && got != s->len)) {
			st->errors++;
		} else {
			st->bytes += got;
			if (check && (got != s->len || crc != s->sum))
				wrong(s, o[i], got, crc, st);
		}
		st->samples++;
	}
}

long long batch_bytes(int e, int r, long b)
{
	const long *o = order[e * ranks + r];
	long n = norder[e * ranks + r];
	long long sum = 0;
	for (long i = b * batch; i < (b + 1) * batch && i < n; i++)
		sum += samples[o[i]].len;
	return sum;
}

