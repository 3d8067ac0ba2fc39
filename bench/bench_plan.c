/*
 * Planner benchmark: a synthetic spec whose grid has 1,000,000 points (6 axes of 10
 * values over llama-13b), with a `where` that drops a known fifth of them, planned with
 * sweep_plan_text (parse, expand, where, validity rules, memory estimate, ids, duplicate
 * check). Target: under 2 s of wall time on a 2-core machine. The answer is checked
 * against an independent oracle (plain nested loops calling lb_layout_check), and
 * entries are spot-checked against the odometer order; a wrong count is a FAIL.
 * Prints RESULT lines (bench/run.sh); the wall time is the median of 3 runs.
 * LB_BENCH_THREADS=N sets the planner's thread count (default: the online CPUs).
 *
 * `bench_plan --slice K` plans only the last K values of the layers axis (K * 100,000
 * points; K = 1: 80 layers, where every pipeline size is valid and the memory model runs
 * its deepest pipelines), once, checked against the oracle likewise, and prints the point
 * count: tests/sh/plan_cost.sh counts its instructions under callgrind, which a loaded
 * machine does not change, against a budget per point.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/layout.h"
#include "common/model.h"
#include "sweeps/sweep.h"

#define N 10
static const int layers[N] = {8, 16, 24, 32, 40, 48, 56, 64, 72, 80};
static const int *lay = layers; /* the layers axis planned: its last n_lay values */
static int n_lay = N;
static const int seqs[N] = {256, 512, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 16384};
static const int gbs[N] = {64, 96, 128, 192, 256, 384, 512, 1024, 1536, 2048};
static const int mbs[N] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; /* where: micro_batch <= 8 */
static const int tps[N] = {1, 2, 3, 4, 5, 8, 10, 16, 20, 40};
static const int pps[N] = {1, 2, 4, 5, 8, 10, 16, 20, 40, 80};
#define GPN 8
#define DP  2

static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void list(char *buf, size_t len, const int *v)
{
	size_t n = 0;
	int i;

	for (i = 0; i < (v == lay ? n_lay : N); i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%d", i ? ", " : "", v[i]);
}

/* The oracle: the same layouts built by hand, judged by the layout rules. */
static void oracle(size_t *n_kept, size_t *n_valid)
{
	struct lb_layout base, l;
	char reason[160];
	int a, b, c, d, e, f;

	lb_layout_init(&base);
	lb_model_preset("llama-13b", &base.model);
	base.dp = DP;
	base.steps = 10;
	base.warmup = 1;
	*n_kept = *n_valid = 0;
	for (a = 0; a < n_lay; a++)
		for (b = 0; b < N; b++)
			for (c = 0; c < N; c++)
				for (d = 0; d < N; d++)
					for (e = 0; e < N; e++)
						for (f = 0; f < N; f++) {
							int gpus;

							if (mbs[d] > 8)
								continue;
							l = base;
							l.model.n_layers = lay[a];
							l.seq_len = seqs[b];
							l.global_batch = gbs[c];
							l.micro_batch = mbs[d];
							l.tp = tps[e];
							l.pp = pps[f];
							gpus = l.tp * l.pp * DP;
							l.gpus_per_node = gpus < GPN ? gpus : GPN;
							l.nodes =
							    gpus < GPN ? 1 : (gpus + GPN - 1) / GPN;
							(*n_kept)++;
							if (!lb_layout_check(&l, reason,
									     sizeof(reason)))
								(*n_valid)++;
						}
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

int main(int argc, char **argv)
{
	char spec[4096], l1[128], l2[128], l3[128], l4[128], l5[128], l6[128], err[1024];
	struct sweep_opts opts = {0, 0}; /* threads: LB_BENCH_THREADS, 0 = the online CPUs */
	struct sweep_plan p;
	size_t want_kept, want_valid, i, total;
	double t[3], cpu[3], wall;
	int run, runs = 3, bad = 0;
	long slice = 0;

	if (argc == 3 && !strcmp(argv[1], "--slice")) {
		char *end;

		slice = strtol(argv[2], &end, 10);
		if (*end || end == argv[2] || slice < 1 || slice > N) {
			fprintf(stderr, "error: --slice '%s': expected 1 to %d\n", argv[2], N);
			return 2;
		}
		n_lay = (int)slice;
		lay = layers + N - n_lay;
		runs = 1;
	} else if (argc != 1) {
		fprintf(stderr, "usage: bench_plan [--slice K]\n");
		return 2;
	}
	total = (size_t)n_lay * 100000;

	list(l1, sizeof(l1), lay);
	list(l2, sizeof(l2), seqs);
	list(l3, sizeof(l3), gbs);
	list(l4, sizeof(l4), mbs);
	list(l5, sizeof(l5), tps);
	list(l6, sizeof(l6), pps);
	snprintf(spec, sizeof(spec),
		 "{\"name\": \"bench-1m\", \"model\": \"llama-13b\", \"fixed\": {\"dp\": %d},"
		 "\"grid\": {\"layers\": [%s], \"seq_len\": [%s], \"global_batch\": [%s],"
		 "\"micro_batch\": [%s], \"tp\": [%s], \"pp\": [%s]},"
		 "\"where\": \"micro_batch <= 8\", \"run\": {\"steps\": 10, \"warmup\": 1},"
		 "\"cluster\": {\"gpus_per_node\": %d, \"gpu_mem_gib\": 80}}",
		 DP, l1, l2, l3, l4, l5, l6, GPN);
	if (getenv("LB_BENCH_THREADS") &&
	    (opts.threads = (int)strtol(getenv("LB_BENCH_THREADS"), NULL, 10)) < 0)
		opts.threads = 0;
	oracle(&want_kept, &want_valid);
	printf("oracle: %zu points kept by where, %zu valid layouts\n", want_kept, want_valid);
	for (run = 0; run < runs; run++) {
		double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);

		if (sweep_plan_text_opts("bench.json", spec, strlen(spec), &opts, &p, err,
					 sizeof(err))) {
			printf("plan failed: %s\n", err);
			printf("RESULT\tplan_1m_points_wall\t-\ts\t< 2\tFAIL\n");
			return 1;
		}
		t[run] = clock_s(CLOCK_MONOTONIC) - t0;
		cpu[run] = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
		printf("run %d: %.3f s (cpu %.3f s): %zu entries (%zu ok, %zu oom, %zu invalid), "
		       "%zu filtered, "
		       "%zu duplicates\n",
		       run, t[run], cpu[run], p.n_entries, p.n_ok, p.n_oom, p.n_invalid,
		       p.n_filtered, p.n_duplicates);
		if (p.n_entries != want_kept || p.n_filtered != total - want_kept ||
		    p.n_duplicates != 0 || p.n_ok + p.n_oom != want_valid ||
		    p.n_invalid != want_kept - want_valid) {
			printf("wrong counts: want %zu entries, %zu filtered, %zu valid\n",
			       want_kept, total - want_kept, want_valid);
			bad = 1;
		}
		/* spot checks: the last axis (pp) varies fastest; mb 9 and 10 are dropped */
		for (i = 0; i < p.n_entries && !bad; i += 9973) {
			const struct lb_layout *l = &p.entries[i].layout;
			size_t k = i;
			int f = (int)(k % N), e, d, c, b, a;

			k /= N;
			e = (int)(k % N);
			k /= N;
			d = (int)(k % 8);
			k /= 8;
			c = (int)(k % N);
			k /= N;
			b = (int)(k % N);
			a = (int)(k / N);
			if (l->pp != pps[f] || l->tp != tps[e] || l->micro_batch != mbs[d] ||
			    l->global_batch != gbs[c] || l->seq_len != seqs[b] ||
			    l->model.n_layers != lay[a] || l->dp != DP) {
				printf("entry %zu is not the expected point\n", i);
				bad = 1;
			}
		}
		sweep_plan_free(&p);
		if (bad)
			break;
	}
	if (bad) {
		printf("RESULT\tplan_1m_points_correct\t0\tbool\t1\tFAIL\n");
		return 1;
	}
	if (slice) { /* a slice: its answer, not its time (plan_cost.sh counts instructions) */
		printf("RESULT\tplan_slice_correct\t1\tbool\t1\tPASS\n");
		printf("points %zu\n", total);
		return 0;
	}
	qsort(t, 3, sizeof(t[0]), cmp_double);
	qsort(cpu, 3, sizeof(cpu[0]), cmp_double);
	wall = t[1];
	printf("RESULT\tplan_1m_points_correct\t1\tbool\t1\tPASS\n");
	printf("RESULT\tplan_1m_points_wall\t%.3f\ts\t< 2\t%s\n", wall,
	       wall < 2.0 ? "PASS" : "FAIL");
	printf("RESULT\tplan_1m_points_cpu\t%.3f\ts\t-\tINFO\n", cpu[1]);
	printf("RESULT\tplan_points_per_s\t%.0f\tpoints/s\t> 500000\t%s\n", 1e6 / wall,
	       1e6 / wall > 500000 ? "PASS" : "FAIL");
	return wall < 2.0 ? 0 : 1;
}
