/*
 * Prediction benchmark: what step-time prediction adds to `plan`. Two grids on the shipped
 * a100-paper machine: the 16,000-layout plan of tests/sh/plan_json_stream.sh (llama-13b
 * on 64 A100s: micro-batch, tp, pp, global batch, sequence, checkpointing, attention) and
 * the 1,000,000-point grid of bench_plan.c (six axes over llama-13b, 2-way data
 * parallelism) with the cluster's GPU named A100. Each is planned once (not timed), then
 * every layout that fits is predicted through plan_predict (the memo of per-layer costs
 * shared over the grid), the median of 3 runs timed. Target: under 1 s for each. The
 * answer is checked: every 97th prediction of the first grid (and every 997th of the
 * second) is computed again without the memo and must be the same number; a layout that
 * fits and is not predicted is a FAIL. Prints RESULT lines (bench/run.sh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/machine.h"
#include "common/predict.h"
#include "sweeps/plan_predict.h"
#include "sweeps/sweep.h"

static const char grid16k[] =
    "{\"name\": \"big\", \"model\": \"llama-13b\","
    " \"fixed\": {\"gpus\": 64, \"zero_stage\": 1},"
    " \"grid\": {\"micro_batch\": [1, 2, 4, 8, 16], \"tp\": [1, 2, 4, 8], \"pp\": [1, 2, 4, 8],"
    "          \"global_batch\": [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, "
    "262144],"
    "          \"seq_len\": [512, 1024, 2048, 4096, 8192],"
    "          \"checkpointing\": [\"none\", \"full\"], \"attention\": [\"naive\", \"flash\"]},"
    " \"cluster\": {\"gpus_per_node\": 8, \"gpu_mem_gib\": 80, \"gpu\": \"A100\"}}";

static const char grid1m[] =
    "{\"name\": \"bench-1m\", \"model\": \"llama-13b\", \"fixed\": {\"dp\": 2},"
    "\"grid\": {\"layers\": [8, 16, 24, 32, 40, 48, 56, 64, 72, 80],"
    " \"seq_len\": [256, 512, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 16384],"
    " \"global_batch\": [64, 96, 128, 192, 256, 384, 512, 1024, 1536, 2048],"
    " \"micro_batch\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], \"tp\": [1, 2, 3, 4, 5, 8, 10, 16, 20, 40],"
    " \"pp\": [1, 2, 4, 5, 8, 10, 16, 20, 40, 80]},"
    "\"where\": \"micro_batch <= 8\", \"run\": {\"steps\": 10, \"warmup\": 1},"
    "\"cluster\": {\"gpus_per_node\": 8, \"gpu_mem_gib\": 80, \"gpu\": \"A100\"}}";

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

/* Plan spec, predict it 3 times; 0 or 1 (FAIL printed). */
static int bench(const char *name, const char *spec, const struct lb_machine *m, size_t every)
{
	struct sweep_plan p;
	struct plan_predictions pp;
	char err[1024];
	double t[3];
	size_t checked = 0;
	int bad = 0;

	if (sweep_plan_text(name, spec, strlen(spec), &p, err, sizeof(err))) {
		printf("plan failed: %s\nRESULT\tpredict_%s_wall\t-\ts\t< 1\tFAIL\n", err, name);
		return 1;
	}
	for (int run = 0; run < 3; run++) {
		double t0 = now();

		if (plan_predict(&p, m, NULL, &pp, err, sizeof(err))) {
			printf("predict failed: %s\n", err);
			bad = 1;
			break;
		}
		t[run] = now() - t0;
		if (pp.n_pred != p.n_ok) {
			printf("%zu of %zu layouts that fit predicted: %s\n", pp.n_pred, p.n_ok,
			       pp.note);
			bad = 1;
		}
		for (size_t i = 0; run == 0 && i < p.n_entries; i += every) {
			struct lb_prediction q;
			char why[256];

			if (!pp.p[i].ok)
				continue;
			if (lb_predict(m, &p.entries[i].layout, p.entries[i].label, NULL, &q, why,
				       sizeof(why)) ||
			    q.step_s != pp.p[i].step_s) {
				printf("entry %zu: %.9g s with the memo, %.9g s without (%s)\n", i,
				       pp.p[i].step_s, q.step_s, why);
				bad = 1;
			}
			checked++;
		}
		printf("%s: run %d: %zu layouts predicted in %.3f s\n", name, run, pp.n_pred, t[run]);
		plan_predictions_free(&pp);
		if (bad)
			break;
	}
	printf("%s: %zu entries, %zu fit; %zu predictions checked against the memo-free path\n",
	       name, p.n_entries, p.n_ok, checked);
	sweep_plan_free(&p);
	if (bad) {
		printf("RESULT\tpredict_%s_correct\t0\tbool\t1\tFAIL\n", name);
		return 1;
	}
	qsort(t, 3, sizeof(t[0]), cmp_double);
	printf("RESULT\tpredict_%s_correct\t1\tbool\t1\tPASS\n", name);
	printf("RESULT\tpredict_%s_wall\t%.3f\ts\t< 1\t%s\n", name, t[1], t[1] < 1.0 ? "PASS" : "FAIL");
	return t[1] < 1.0 ? 0 : 1;
}

int main(void)
{
	struct lb_machine *m = malloc(sizeof(*m));
	char err[512];
	int rc;

	if (!m || lb_machine_load("a100-paper", m, err, sizeof(err))) {
		printf("machine: %s\nRESULT\tpredict_machine\t0\tbool\t1\tFAIL\n", m ? err : "oom");
		return 1;
	}
	rc = bench("plan_16000", grid16k, m, 97);
	rc |= bench("plan_1m", grid1m, m, 997);
	free(m);
	return rc;
}
