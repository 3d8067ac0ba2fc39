/*
 * Benchmark of the shared-memory communicator: all_reduce (sum, fp32) of 64 MiB per rank
 * on 2 and 4 ranks, with the result checked on every rank (a wrong answer fails the
 * benchmark), next to the machine's single-core memcpy bandwidth as the ceiling; and the
 * latency of a barrier and of a one-element all_reduce. Prints RESULT lines (bench/run.sh).
 * Bandwidths as in nccl-tests (algbw = bytes / time, busbw = algbw * 2 (n - 1) / n) from
 * the fastest of the timed iterations, since the machine may be shared; the mean too.
 * Env: LB_BENCH_MIB (buffer size, default 64), LB_BENCH_ITERS (default 5).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "common/util.h"
#include "harness/comm/comm_shm.h"
#include "harness/launch.h"

struct shared {
	double alltime_s;  /* fastest all_reduce (+ barrier), rank 0, seconds */
	double meantime_s; /* mean of the same */
	double bar_us;	   /* per barrier, microseconds */
	double small_us;   /* per 1-element all_reduce, microseconds */
	int wrong[64];	   /* per rank: wrong elements */
};

struct cfg {
	size_t count; /* floats per rank */
	int iters;
	struct shared *sh;
};

static int rank_main(const struct lb_rank_env *env, void *arg)
{
	struct cfg *cf = arg;
	struct lb_comm *c;
	char err[256];
	size_t i, n = cf->count;
	float *buf = malloc(n * sizeof(float));
	int r = env->rank, w = env->world_size, it, wrong = 0;
	double t0;

	if (!buf)
		return 1;
	if (lb_comm_shm_create(env->rdzv_name, r, w, 30.0, &c, err, sizeof(err))) {
		fprintf(stderr, "rank %d: %s\n", r, err);
		return 1;
	}
	/* small integers: every sum is exact, so the check is exact */
	for (i = 0; i < n; i++)
		buf[i] = (float)(r + 1 + (int)(i % 7));
	if (c->ops->all_reduce(c, buf, buf, n, LB_F32, LB_SUM, NULL)) /* warm-up */
		goto fail;
	for (i = 0; i < n; i++) {
		float want = (float)(w * (w + 1) / 2 + w * (int)(i % 7));

		wrong += buf[i] != want;
		buf[i] = (float)(r + 1 + (int)(i % 7));
	}
	{
		double best = 1e9, sum = 0;

		for (it = 0; it < cf->iters; it++) {
			if (c->ops->barrier(c))
				goto fail;
			t0 = lb_now_s();
			if (c->ops->all_reduce(c, buf, buf, n, LB_F32, LB_SUM, NULL) ||
			    c->ops->barrier(c))
				goto fail;
			t0 = lb_now_s() - t0;
			sum += t0;
			best = t0 < best ? t0 : best;
		}
		if (r == 0) {
			cf->sh->alltime_s = best;
			cf->sh->meantime_s = sum / cf->iters;
		}
	}
	/* after iters in-place sums: x * w^iters, still exact for these sizes */
	{
		double scale = 1;

		for (it = 0; it < cf->iters; it++)
			scale *= w;
		for (i = 0; i < n; i++) {
			double want = 0;

			for (int k = 0; k < w; k++)
				want += k + 1 + (int)(i % 7);
			want *= scale / w;
			wrong += (double)buf[i] != want;
		}
	}
	t0 = lb_now_s();
	for (it = 0; it < 2000; it++)
		if (c->ops->barrier(c))
			goto fail;
	if (r == 0)
		cf->sh->bar_us = (lb_now_s() - t0) / 2000 * 1e6;
	t0 = lb_now_s();
	for (it = 0; it < 2000; it++) {
		float x = 1;

		if (c->ops->all_reduce(c, &x, &x, 1, LB_F32, LB_SUM, NULL))
			goto fail;
		wrong += x != (float)w;
	}
	if (r == 0)
		cf->sh->small_us = (lb_now_s() - t0) / 2000 * 1e6;
	cf->sh->wrong[r] = wrong;
	c->ops->destroy(c);
	free(buf);
	return wrong ? 2 : 0;
fail:
	lb_comm_shm_error(c, NULL, err, sizeof(err));
	fprintf(stderr, "rank %d: %s\n", r, err);
	return 1;
}

static double memcpy_gbs(size_t bytes)
{
	char *a = malloc(bytes), *b = malloc(bytes);
	double t0, best = 1e9;

	if (!a || !b)
		return 0;
	memset(a, 1, bytes);
	memset(b, 2, bytes);
	for (int k = 0; k < 3; k++) {
		t0 = lb_now_s();
		memcpy(b, a, bytes);
		t0 = lb_now_s() - t0;
		if (t0 < best)
			best = t0;
	}
	if (b[bytes / 2] != 1)
		best = 1e9;
	free(a);
	free(b);
	return (double)bytes / best / 1e9;
}

int main(void)
{
	struct cfg cf;
	struct lb_launch_result res;
	const char *e;
	long mib = 64, iters = 5;
	int rc = 0, sizes[] = {2, 4};

	if ((e = getenv("LB_BENCH_MIB")) && lb_parse_long(e, 1, 4096, &mib)) {
		fprintf(stderr, "error: LB_BENCH_MIB='%s': expected 1 to 4096\n", e);
		return 2;
	}
	if ((e = getenv("LB_BENCH_ITERS")) && lb_parse_long(e, 1, 1000, &iters)) {
		fprintf(stderr, "error: LB_BENCH_ITERS='%s': expected 1 to 1000\n", e);
		return 2;
	}
	cf.count = (size_t)mib * 1024 * 1024 / sizeof(float);
	cf.iters = (int)iters;
	cf.sh =
	    mmap(NULL, sizeof(*cf.sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (cf.sh == MAP_FAILED)
		return 1;
	double ceiling = memcpy_gbs((size_t)mib << 20);
	printf("RESULT\tmemcpy_1core_%ldMiB\t%.2f\tGB/s\t-\tINFO\n", mib, ceiling);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		int w = sizes[k], wrong = 0;
		double bytes = (double)cf.count * sizeof(float), alg, bus;

		memset(cf.sh, 0, sizeof(*cf.sh));
		if (lb_launch(w, rank_main, &cf, NULL, &res) != 0) {
			fprintf(stderr, "bench_comm: %s\n", res.message);
			printf("RESULT\tshm_allreduce_%dranks_check\t%d\twrong\t0\tFAIL\n", w, -1);
			rc = 1;
			continue;
		}
		for (int r = 0; r < w; r++)
			wrong += cf.sh->wrong[r];
		alg = bytes / cf.sh->alltime_s / 1e9;
		bus = alg * 2.0 * (w - 1) / w;
		printf("RESULT\tshm_allreduce_%dranks_%ldMiB_algbw\t%.2f\tGB/s\t-\tINFO\n", w, mib,
		       alg);
		printf("RESULT\tshm_allreduce_%dranks_%ldMiB_busbw\t%.2f\tGB/s\t-\tINFO\n", w, mib,
		       bus);
		printf("RESULT\tshm_allreduce_%dranks_%ldMiB_time_min\t%.2f\tms\t-\tINFO\n", w, mib,
		       cf.sh->alltime_s * 1e3);
		printf("RESULT\tshm_allreduce_%dranks_%ldMiB_time_mean\t%.2f\tms\t-\tINFO\n", w,
		       mib, cf.sh->meantime_s * 1e3);
		printf("RESULT\tshm_barrier_%dranks\t%.1f\tus\t-\tINFO\n", w, cf.sh->bar_us);
		printf("RESULT\tshm_allreduce_%dranks_1elem\t%.1f\tus\t-\tINFO\n", w,
		       cf.sh->small_us);
		printf("RESULT\tshm_allreduce_%dranks_check\t%d\twrong\t0\t%s\n", w, wrong,
		       wrong ? "FAIL" : "PASS");
		if (wrong)
			rc = 1;
	}
	return rc;
}
