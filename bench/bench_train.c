/*
 * Benchmark of the trainer's CPU reference backend: matmul throughput in the three
 * transposes the model uses (each result checked against an fp64 dot product on sampled
 * elements), the attention kernels' forward + backward (flash checked against naive), and
 * a whole optimizer step of the tiny preset at seq 64, global batch 8 (target: under one
 * second; the loss must be finite and fall). Times are medians. Prints RESULT lines
 * (bench/run.sh); exits non-zero when a check or a target fails.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "common/model.h"
#include "harness/ops.h"
#include "harness/train.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

#define REPS 7

static int bench_matmul(void)
{
	const struct lb_ops *o = lb_ops_cpu();
	int m = 512, n = 512, k = 256, bad = 0;
	float *a = o->alloc((size_t)m * k, LB_K_F32), *b = o->alloc((size_t)n * k, LB_K_F32);
	float *c = o->alloc((size_t)m * n, LB_K_F32);
	const char *names[] = {"nn", "nt", "tn"};
	const int ta[] = {0, 0, 1}, tb[] = {0, 1, 0};

	if (!a || !b || !c) {
		fprintf(stderr, "bench_train: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < (size_t)m * k; i++)
		a[i] = (float)((i * 7919 % 1000) / 1000.0 - 0.5);
	for (size_t i = 0; i < (size_t)n * k; i++)
		b[i] = (float)((i * 104729 % 1000) / 1000.0 - 0.5);
	for (int v = 0; v < 3; v++) {
		double t[REPS], worst = 0;

		for (int r = 0; r < REPS; r++) {
			double t0 = lb_now_s();

			/* A is (m, k), or (k, m) when transposed; B (k, n), or (n, k) */
			o->matmul(c, a, b, m, n, k, ta[v], tb[v], 1.0, 0, 0);
			t[r] = lb_now_s() - t0;
		}
		qsort(t, REPS, sizeof(t[0]), cmp_double);
		for (int s = 0; s < 64; s++) {
			int i = (s * 37) % m, j = (s * 101) % n;
			double ref = 0;

			for (int p = 0; p < k; p++)
				ref +=
				    (double)(ta[v] ? a[(size_t)p * m + i] : a[(size_t)i * k + p]) *
				    (tb[v] ? b[(size_t)j * k + p] : b[(size_t)p * n + j]);
			if (fabs(c[(size_t)i * n + j] - ref) > worst)
				worst = fabs(c[(size_t)i * n + j] - ref);
		}
		if (worst > 1e-3) {
			printf("RESULT\tcpu_matmul_%s_correct\t%.3g\tmax_abs_err\t< 1e-3\tFAIL\n",
			       names[v], worst);
			bad = 1;
		}
		printf("RESULT\tcpu_matmul_%s_512x512x256\t%.2f\tGFLOP/s\t-\tINFO\n", names[v],
		       2.0 * m * n * k / t[REPS / 2] / 1e9);
	}
	o->free_(a), o->free_(b), o->free_(c);
	return bad;
}

static int bench_attention(void)
{
	const struct lb_ops *o = lb_ops_cpu();
	int b = 1, s = 256, nh = 4, nkv = 4, d = 16, bad = 0;
	size_t nq = (size_t)b * s * (nh + 2 * nkv) * d, no = (size_t)b * s * nh * d;
	float *qkv = o->alloc(nq, LB_K_F32), *dout = o->alloc(no, LB_K_F32), *out[3], *dq[3];
	float *saved = o->alloc((size_t)b * nh * s * s, LB_K_ACT);
	float *scr = o->alloc(o->attn_scratch(b, s, nh, d), LB_K_F32);
	const char *names[] = {"naive", "fused_softmax", "flash"};

	for (size_t i = 0; i < nq; i++)
		qkv[i] = (float)((i * 7919 % 1000) / 500.0 - 1.0);
	for (size_t i = 0; i < no; i++)
		dout[i] = (float)((i * 104729 % 1000) / 1000.0 - 0.5);
	for (int v = 0; v < 3; v++) {
		double t[REPS];

		out[v] = o->alloc(no, LB_K_F32), dq[v] = o->alloc(nq, LB_K_F32);
		for (int r = 0; r < REPS; r++) {
			double t0 = lb_now_s();

			if (v == 0) {
				o->attn_naive_fwd(out[v], saved, scr, qkv, b, s, nh, nkv, d);
				o->attn_probs_bwd(dq[v], scr, dout, saved, qkv, b, s, nh, nkv, d);
			} else if (v == 1) {
				o->attn_fused_fwd(out[v], saved, qkv, b, s, nh, nkv, d);
				o->attn_probs_bwd(dq[v], scr, dout, saved, qkv, b, s, nh, nkv, d);
			} else {
				o->attn_flash_fwd(out[v], saved, scr, qkv, b, s, nh, nkv, d);
				o->attn_flash_bwd(dq[v], scr, dout, out[v], saved, qkv, b, s, nh,
						  nkv, d);
			}
			t[r] = lb_now_s() - t0;
		}
		qsort(t, REPS, sizeof(t[0]), cmp_double);
		printf("RESULT\tcpu_attn_%s_fwd_bwd_s256\t%.3f\tms\t-\tINFO\n", names[v],
		       t[REPS / 2] * 1e3);
	}
	for (int v = 1; v < 3; v++) {
		double worst = 0;

		for (size_t i = 0; i < no; i++)
			worst = fmax(worst, fabs(out[v][i] - out[0][i]));
		for (size_t i = 0; i < nq; i++)
			worst = fmax(worst, fabs(dq[v][i] - dq[0][i]));
		printf("RESULT\tcpu_attn_%s_matches_naive\t%.3g\tmax_abs_err\t< 1e-4\t%s\n",
		       names[v], worst, worst < 1e-4 ? "PASS" : "FAIL");
		bad |= !(worst < 1e-4);
	}
	for (int v = 0; v < 3; v++)
		o->free_(out[v]), o->free_(dq[v]);
	o->free_(qkv), o->free_(dout), o->free_(saved), o->free_(scr);
	return bad;
}

static int bench_step(void)
{
	struct lb_train_opts opts;
	struct lb_trainer t;
	double times[8], loss[10];
	int warm = 2, timed = 8, bad = 0;

	lb_train_opts_init(&opts);
	opts.layout.seq_len = 64;
	opts.layout.global_batch = 8;
	opts.layout.micro_batch = 1;
	if (lb_trainer_init(&t, &opts, lb_ops_cpu(), NULL)) {
		fprintf(stderr, "bench_train: %s\n", t.err);
		return 1;
	}
	for (int s = 0; s < warm + timed; s++) {
		double t0 = lb_now_s();

		if (lb_trainer_step(&t, s, &loss[s])) {
			fprintf(stderr, "bench_train: %s\n", t.err);
			lb_trainer_free(&t);
			return 1;
		}
		if (s >= warm)
			times[s - warm] = lb_now_s() - t0;
	}
	lb_trainer_free(&t);
	qsort(times, timed, sizeof(times[0]), cmp_double);
	if (!isfinite(loss[warm + timed - 1]) || !(loss[warm + timed - 1] < loss[0] - 0.5)) {
		printf("RESULT\ttrain_tiny_s64_b8_loss_falls\t%.3f\tloss\t< %.3f\tFAIL\n",
		       loss[warm + timed - 1], loss[0] - 0.5);
		bad = 1;
	} else {
		printf("RESULT\ttrain_tiny_s64_b8_loss_falls\t%.3f\tloss\t< %.3f\tPASS\n",
		       loss[warm + timed - 1], loss[0] - 0.5);
	}
	printf("RESULT\ttrain_tiny_s64_b8_step\t%.3f\ts\t< 1\t%s\n", times[timed / 2],
	       times[timed / 2] < 1.0 ? "PASS" : "FAIL");
	printf("RESULT\ttrain_tiny_s64_b8_throughput\t%.0f\ttokens/s\t-\tINFO\n",
	       opts.layout.global_batch * opts.layout.seq_len / times[timed / 2]);
	printf("RESULT\ttrain_tiny_s64_b8_model_flops\t%.2f\tGFLOP/s\t-\tINFO\n",
	       lb_flops_per_step(&opts.layout) / times[timed / 2] / 1e9);
	return bad || !(times[timed / 2] < 1.0);
}

int main(void)
{
	int bad = 0;

	bad |= bench_matmul();
	bad |= bench_attention();
	bad |= bench_step();
	return bad;
}
