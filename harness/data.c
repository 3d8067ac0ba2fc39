/*
 * Token sources of the trainer: the synthetic Markov chain and flat token files; see
 * data.h for the slicing rule.
 */
#include "harness/data.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

int lb_data_open(struct lb_data *d, const char *path, int elem, int vocab, int seq_len,
		 uint64_t seed, char *err, size_t errlen)
{
	struct stat st;

	memset(d, 0, sizeof(*d));
	d->fd = -1;
	d->vocab = vocab;
	d->seq_len = seq_len;
	d->seed = seed;
	if (!path) {
		d->succ = malloc((size_t)vocab * LB_DATA_SUCC * sizeof(*d->succ));
		if (!d->succ) {
			snprintf(err, errlen, "synthetic data: out of host memory");
			return -1;
		}
		for (int v = 0; v < vocab; v++)
			for (int k = 0; k < LB_DATA_SUCC; k++)
				d->succ[v * LB_DATA_SUCC + k] =
				    (int32_t)(mix(seed * 31 + (uint64_t)v * LB_DATA_SUCC + k) %
					      (uint64_t)vocab);
		return 0;
	}
	if (elem != 2 && elem != 4) {
		snprintf(err, errlen, "data file '%s': token width must be 2 (u16) or 4 (u32)",
			 path);
		return -1;
	}
	snprintf(d->path, sizeof(d->path), "%s", path);
	d->elem = elem;
	d->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (d->fd < 0) {
		snprintf(err, errlen, "data file '%s': %s", path, strerror(errno));
		return -1;
	}
	if (fstat(d->fd, &st) || st.st_size % elem || st.st_size / elem < 2) {
		snprintf(err, errlen,
			 "data file '%s': size %lld is not a whole number of %s token ids (at "
			 "least 2)",
			 path, (long long)st.st_size, elem == 2 ? "u16" : "u32");
		lb_data_close(d);
		return -1;
	}
	d->n_tokens = (uint64_t)st.st_size / elem;
	return 0;
}

void lb_data_close(struct lb_data *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
	free(d->succ);
	d->succ = NULL;
}

/* The synthetic chain: the first token from (seed, g); then with probability 3/4 the
 * first successor, else one of the others (entropy about 0.8 nats per token). */
static void synth_sequence(const struct lb_data *d, uint64_t g, int32_t *buf, int n)
{
	uint64_t st = mix(d->seed ^ mix(g + 0x5bd1e995ULL));
	int32_t cur = (int32_t)(st % (uint64_t)d->vocab);

	for (int i = 0; i < n; i++) {
		uint64_t r;

		buf[i] = cur;
		st = mix(st);
		r = st >> 32;
		cur = d->succ[cur * LB_DATA_SUCC + (r % 4 ? 0 : 1 + (int)((r >> 8) % 3))];
	}
}

static int file_read(struct lb_data *d, uint64_t pos, int32_t *buf, int n, char *err, size_t errlen)
{
	unsigned char raw[4096];
	int done = 0;

	while (done < n) {
		uint64_t p = (pos + (uint64_t)done) % d->n_tokens;
		uint64_t run = d->n_tokens - p; /* ids until the wrap */
		size_t want = (size_t)(n - done);
		ssize_t got;

		if (want > run)
			want = (size_t)run;
		if (want > sizeof(raw) / (size_t)d->elem)
			want = sizeof(raw) / (size_t)d->elem;
		got = pread(d->fd, raw, want * (size_t)d->elem, (off_t)(p * (uint64_t)d->elem));
		if (got != (ssize_t)(want * (size_t)d->elem)) {
			snprintf(err, errlen, "data file '%s': read failed at byte offset %llu: %s",
				 d->path, (unsigned long long)(p * (uint64_t)d->elem),
				 got < 0 ? strerror(errno) : "short read");
			return -1;
		}
		for (size_t i = 0; i < want; i++) {
			uint32_t id;

			if (d->elem == 2) {
				uint16_t v;
				memcpy(&v, raw + 2 * i, 2);
				id = v;
			} else {
				memcpy(&id, raw + 4 * i, 4);
			}
			if (id >= (uint32_t)d->vocab) {
				snprintf(err, errlen,
					 "data file '%s': token id %u at token offset %llu (byte "
					 "offset %llu) is >= vocab %d",
					 d->path, id, (unsigned long long)(p + i),
					 (unsigned long long)((p + i) * (uint64_t)d->elem),
					 d->vocab);
				return -1;
			}
			buf[done + (int)i] = (int32_t)id;
		}
		done += (int)want;
	}
	return 0;
}

int lb_data_sequence(struct lb_data *d, uint64_t g, int32_t *tokens, int32_t *targets, char *err,
		     size_t errlen)
{
	int s = d->seq_len;
	int32_t *buf = malloc(((size_t)s + 1) * sizeof(*buf));

	if (!buf) {
		snprintf(err, errlen, "data: out of host memory");
		return -1;
	}
	if (d->fd >= 0) {
		if (file_read(d, g * (uint64_t)s, buf, s + 1, err, errlen)) {
			free(buf);
			return -1;
		}
	} else {
		synth_sequence(d, g, buf, s + 1);
	}
	memcpy(tokens, buf, (size_t)s * sizeof(*buf));
	memcpy(targets, buf + 1, (size_t)s * sizeof(*buf));
	free(buf);
	return 0;
}

uint64_t lb_data_seq_index(const struct lb_layout *l, int step, int dp_rank, int micro)
{
	return (uint64_t)step * (uint64_t)l->global_batch +
	       (uint64_t)dp_rank * (uint64_t)(l->global_batch / l->dp) +
	       (uint64_t)micro * (uint64_t)l->micro_batch;
}

int lb_data_batch(struct lb_data *d, const struct lb_layout *l, int step, int dp_rank, int micro,
		  int32_t *tokens, int32_t *targets, char *err, size_t errlen)
{
	uint64_t g0 = lb_data_seq_index(l, step, dp_rank, micro);
	size_t s = (size_t)l->seq_len;

	for (int j = 0; j < l->micro_batch; j++)
		if (lb_data_sequence(d, g0 + (uint64_t)j, tokens + j * s, targets + j * s, err,
				     errlen))
			return -1;
	return 0;
}
