/*
 * Unit tests of the Llama model: the whole model's gradients against central finite
 * differences of the loss, with the model instantiated on the fp64 ops table (GQA,
 * untied and tied head, every checkpointing mode, attention variant and norm kernel);
 * the 18 combinations of checkpointing x attention x norm agree on loss and gradients to
 * 1e-5 relative in fp32 on the tiny preset; the parameter table covers the flat buffer
 * and matches lb_param_count; initialisation is deterministic; where the backend fuses the
 * residual add into the projection's GEMM (matmul_add) the model uses it, with the same
 * losses and gradients bit for bit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/model.h"
#include "harness/data.h"
#include "harness/model.h"

#define FD_EPS 1e-5
#define FD_TOL 2e-7

/* A small shape: 2 layers, hidden 16, 4 heads over 2 KV heads, ffn 24, vocab 32. */
static void small_layout(struct lb_layout *l, int tied)
{
	lb_layout_init(l);
	snprintf(l->model.name, sizeof(l->model.name), "test-small");
	l->model.n_layers = 2;
	l->model.hidden = 16;
	l->model.n_heads = 4;
	l->model.n_kv_heads = 2;
	l->model.ffn = 24;
	l->model.vocab = 32;
	l->model.tied = tied;
	l->seq_len = 6;
	l->micro_batch = 2;
	l->global_batch = 2;
	l->seed = 7;
}

static void batch(const struct lb_layout *l, int32_t *tok, int32_t *tgt)
{
	struct lb_data d;
	char err[256];

	assert_int_equal(lb_data_open(&d, NULL, 2, l->model.vocab, l->seq_len, 3, err, sizeof(err)),
			 0);
	assert_int_equal(lb_data_batch(&d, l, 0, 0, 0, tok, tgt, err, sizeof(err)), 0);
	lb_data_close(&d);
}

static double loss_of(struct lb_llama *m, const int32_t *tok, const int32_t *tgt)
{
	double sum = 0;

	assert_int_equal(lb_llama_forward(m, 0, 0, tok, tgt, NULL, 1.0 / m->T, &sum), 0);
	return sum / m->T;
}

/* Finite differences over every parameter of the fp64 model. */
static void gradcheck(const struct lb_layout *l)
{
	const struct lb_ops *o = lb_ops_cpu_f64();
	struct lb_llama m;
	int32_t tok[64], tgt[64];
	double *p, *g, worst = 0;
	size_t n;

	assert_int_equal(lb_llama_init(&m, o, NULL, l, 0, 1), 0);
	batch(l, tok, tgt);
	n = m.n_params;
	p = m.params; /* the fp64 CPU table's buffers are host doubles */
	g = malloc(n * sizeof(*g));
	assert_non_null(g);
	lb_llama_zero_grads(&m);
	loss_of(&m, tok, tgt);
	assert_int_equal(lb_llama_backward(&m, 0, 0, NULL), 0);
	o->read(g, m.grads, n, LB_K_F32);
	for (size_t i = 0; i < n; i++) {
		double p0 = p[i], lp, lm, num, err;

		p[i] = p0 + FD_EPS;
		lp = loss_of(&m, tok, tgt);
		p[i] = p0 - FD_EPS;
		lm = loss_of(&m, tok, tgt);
		p[i] = p0;
		num = (lp - lm) / (2 * FD_EPS);
		err = fabs(num - g[i]) / (1e-3 + fabs(num));
		if (fabs(num - g[i]) > FD_TOL && err > 1e-4) {
			int t = 0;

			while (t + 1 < m.n_tensors && m.tensors[t + 1].offset <= i)
				t++;
			fprintf(stderr, "%s/%s/%s: %s[%zu]: analytic %.10g numeric %.10g\n",
				lb_ckpt_name(l->checkpointing), lb_attn_name(l->attention),
				lb_norm_name(l->norm), m.tensors[t].name, i - m.tensors[t].offset,
				g[i], num);
			fail();
		}
		if (fabs(num - g[i]) > worst)
			worst = fabs(num - g[i]);
	}
	free(g);
	lb_llama_free(&m);
}

static void test_gradcheck_untied_flash_none(void **state)
{
	struct lb_layout l;

	small_layout(&l, 0);
	gradcheck(&l);
}

static void test_gradcheck_tied_naive_full_unfused(void **state)
{
	struct lb_layout l;

	small_layout(&l, 1);
	l.attention = LB_ATTN_NAIVE;
	l.checkpointing = LB_CKPT_FULL;
	l.norm = LB_NORM_UNFUSED;
	gradcheck(&l);
}

static void test_gradcheck_fused_softmax_selective(void **state)
{
	struct lb_layout l;

	small_layout(&l, 0);
	l.attention = LB_ATTN_FUSED_SOFTMAX;
	l.checkpointing = LB_CKPT_SELECTIVE;
	gradcheck(&l);
}

/* Max |a - b| / max |b| over one tensor. */
static double rel_diff(const double *a, const double *b, size_t n)
{
	double d = 0, s = 0;

	for (size_t i = 0; i < n; i++) {
		if (fabs(a[i] - b[i]) > d)
			d = fabs(a[i] - b[i]);
		if (fabs(b[i]) > s)
			s = fabs(b[i]);
	}
	return s > 0 ? d / s : d;
}

static void run_ops(const struct lb_ops *o, const struct lb_layout *l, double *loss, double *grads)
{
	struct lb_llama m;
	int32_t tok[256], tgt[256];
	double sum = 0, ls;
	int accum = lb_layout_accum_steps(l);
	struct lb_data d;
	char err[256];

	assert_int_equal(lb_llama_init(&m, o, NULL, l, 0, 1), 0);
	assert_int_equal(lb_data_open(&d, NULL, 2, l->model.vocab, l->seq_len, 5, err, sizeof(err)),
			 0);
	lb_llama_zero_grads(&m);
	for (int i = 0; i < accum; i++) {
		assert_int_equal(lb_data_batch(&d, l, 0, 0, i, tok, tgt, err, sizeof(err)), 0);
		assert_int_equal(lb_llama_forward(&m, 0, 0, tok, tgt, NULL,
						  1.0 / (l->global_batch * l->seq_len), &ls),
				 0);
		assert_int_equal(lb_llama_backward(&m, 0, 0, NULL), 0);
		sum += ls;
	}
	*loss = sum / (l->global_batch * l->seq_len);
	lb_ops_cpu()->read(grads, m.grads, m.n_params, LB_K_F32);
	lb_data_close(&d);
	lb_llama_free(&m);
}

static void run_f32(const struct lb_layout *l, double *loss, double *grads)
{
	run_ops(lb_ops_cpu(), l, loss, grads);
}

/* A backend with matmul_add: the CPU's matmul, then its add (what the fused GEMM computes),
 * counted. */
static int fused_calls;

static void fused_matmul_add(void *out, const void *a, const void *b, const void *addend, int m,
			     int n, int k, int ta, int tb)
{
	fused_calls++;
	lb_ops_cpu()->matmul(out, a, b, m, n, k, ta, tb, 1.0, 0, 0);
	lb_ops_cpu()->add(out, out, addend, (size_t)m * n);
}

/* The output and down projections add the residual stream in their GEMM where the backend
 * offers it (twice a layer, again in full checkpointing's recompute): the same numbers. */
static void test_matmul_add_fused(void **state)
{
	struct lb_ops fused = *lb_ops_cpu();
	struct lb_layout l;
	struct lb_llama probe;
	double la, lb, *ga, *gb;

	fused.matmul_add = fused_matmul_add;
	lb_layout_init(&l);
	assert_int_equal(lb_model_preset("tiny-gqa", &l.model), 0);
	l.seq_len = 24;
	l.micro_batch = 2;
	l.global_batch = 4;
	assert_int_equal(lb_llama_init(&probe, lb_ops_cpu(), NULL, &l, 0, 1), 0);
	ga = malloc(probe.n_params * sizeof(double));
	gb = malloc(probe.n_params * sizeof(double));
	assert_true(ga && gb);
	for (int ck = 0; ck < 3; ck++) {
		l.checkpointing = ck;
		run_f32(&l, &la, ga);
		fused_calls = 0;
		run_ops(&fused, &l, &lb, gb);
		/* 2 micro-batches, each 2 a layer in its forward (and its full recompute) */
		assert_int_equal(fused_calls,
				 2 * 2 * l.model.n_layers * (ck == LB_CKPT_FULL ? 2 : 1));
		assert_memory_equal(&la, &lb, sizeof(la));
		assert_memory_equal(ga, gb, probe.n_params * sizeof(double));
	}
	free(ga);
	free(gb);
	lb_llama_free(&probe);
}

static void test_modes_agree(void **state)
{
	struct lb_layout l;
	struct lb_llama probe;
	double ref_loss, *ref, *g;
	size_t n;

	lb_layout_init(&l);
	assert_int_equal(lb_model_preset("tiny-gqa", &l.model), 0);
	l.seq_len = 40; /* more than one flash key tile */
	l.micro_batch = 2;
	l.global_batch = 4; /* two accumulated micro-batches */
	assert_int_equal(lb_llama_init(&probe, lb_ops_cpu(), NULL, &l, 0, 1), 0);
	n = probe.n_params;
	ref = malloc(n * sizeof(double));
	g = malloc(n * sizeof(double));
	assert_non_null(ref);
	assert_non_null(g);
	run_f32(&l, &ref_loss, ref); /* none, flash, fused */
	for (int ck = 0; ck < 3; ck++)
		for (int at = 0; at < 3; at++)
			for (int nm = 0; nm < 2; nm++) {
				double loss;

				l.checkpointing = ck;
				l.attention = at;
				l.norm = nm;
				run_f32(&l, &loss, g);
				if (fabs(loss - ref_loss) > 1e-5 * fabs(ref_loss)) {
					fprintf(stderr, "%s/%s/%s: loss %.9g vs %.9g\n",
						lb_ckpt_name(ck), lb_attn_name(at),
						lb_norm_name(nm), loss, ref_loss);
					fail();
				}
				for (int t = 0; t < probe.n_tensors; t++) {
					const struct lb_tensor *tt = &probe.tensors[t];
					double r =
					    rel_diff(g + tt->offset, ref + tt->offset, tt->count);

					if (r > 1e-5) {
						fprintf(stderr, "%s/%s/%s: %s differs by %.3g\n",
							lb_ckpt_name(ck), lb_attn_name(at),
							lb_norm_name(nm), tt->name, r);
						fail();
					}
				}
			}
	free(ref);
	free(g);
	lb_llama_free(&probe);
}

/* Two pipeline stages chained by hand (stage 0's output is stage 1's input, stage 1's
 * input gradient is stage 0's output gradient) give the loss and gradients of one stage. */
static void test_pp2_stages_match_pp1(void **state)
{
	const struct lb_ops *o = lb_ops_cpu();
	struct lb_layout l1, l2;
	struct lb_llama whole, st[2];
	int32_t tok[256], tgt[256];
	double loss1 = 0, loss2 = 0;

	lb_layout_init(&l1);
	assert_int_equal(lb_model_preset("tiny-gqa", &l1.model), 0);
	l1.seq_len = 24;
	l1.micro_batch = 2;
	l1.global_batch = 2;
	l1.checkpointing = LB_CKPT_SELECTIVE;
	l2 = l1;
	l2.pp = 2;
	batch(&l1, tok, tgt);
	assert_int_equal(lb_llama_init(&whole, o, NULL, &l1, 0, 1), 0);
	for (int s = 0; s < 2; s++) {
		assert_int_equal(lb_llama_init(&st[s], o, NULL, &l2, s, 2), 0);
		lb_llama_zero_grads(&st[s]);
	}
	assert_true(st[0].first && !st[0].last && !st[1].first && st[1].last);
	assert_int_equal(st[0].chunks[0].layer_hi, 2);
	assert_int_equal(st[1].chunks[0].layer_lo, 2);
	assert_int_equal(st[0].t_head, -1);
	assert_int_equal(st[1].t_embed, -1);
	lb_llama_zero_grads(&whole);
	assert_int_equal(lb_llama_forward(&whole, 0, 0, tok, tgt, NULL, 1.0 / whole.T, &loss1), 0);
	assert_int_equal(lb_llama_backward(&whole, 0, 0, NULL), 0);
	/* slot 1 of each stage, to use a slot other than the first */
	assert_int_equal(lb_llama_forward(&st[0], 0, 1, tok, tgt, NULL, 1.0 / whole.T, NULL), 0);
	assert_int_equal(lb_llama_forward(&st[1], 0, 1, tok, tgt,
					  lb_llama_stage_output(&st[0], 0, 1), 1.0 / whole.T,
					  &loss2),
			 0);
	assert_true(fabs(loss1 - loss2) <= 1e-6 * loss1);
	assert_int_equal(lb_llama_backward(&st[1], 0, 1, NULL), 0);
	assert_int_equal(lb_llama_backward(&st[0], 0, 1, lb_llama_stage_dinput(&st[1])), 0);
	for (int s = 0; s < 2; s++)
		for (int t = 0; t < st[s].n_tensors; t++) {
			const struct lb_tensor *tt = &st[s].tensors[t];
			int w = lb_llama_find(&whole, tt->name);
			const float *a = lb_llama_grad(&st[s], t), *b = lb_llama_grad(&whole, w);

			assert_true(w >= 0);
			for (size_t e = 0; e < tt->count; e++)
				if (a[e] != b[e]) {
					fprintf(stderr, "stage %d %s[%zu]: %.9g vs %.9g\n", s,
						tt->name, e, a[e], b[e]);
					fail();
				}
		}
	lb_llama_free(&whole);
	lb_llama_free(&st[0]);
	lb_llama_free(&st[1]);
}

/* Activation memory by mode: full keeps only layer inputs, selective drops the attention
 * core's probabilities (one shared buffer), none keeps everything; flash saves only the
 * log-sum-exp, so selective gains little there. */
static uint64_t live_bytes(const struct lb_layout *l)
{
	const struct lb_ops *o = lb_ops_cpu();
	struct lb_llama m;
	uint64_t before, after;

	o->mem_stats(&before, NULL);
	assert_int_equal(lb_llama_init(&m, o, NULL, l, 0, 1), 0);
	o->mem_stats(&after, NULL);
	lb_llama_free(&m);
	return after - before;
}

static void test_checkpointing_memory(void **state)
{
	struct lb_layout l;
	uint64_t none, sel, full, fnone, fsel;

	lb_layout_init(&l);
	l.seq_len = 128;
	l.micro_batch = 2;
	l.attention = LB_ATTN_NAIVE;
	none = live_bytes(&l);
	l.checkpointing = LB_CKPT_SELECTIVE;
	sel = live_bytes(&l);
	l.checkpointing = LB_CKPT_FULL;
	full = live_bytes(&l);
	assert_true(full < sel && sel < none);
	/* 4 layers' probabilities (B, nh, S, S) fp32 minus the one shared buffer */
	assert_int_equal(none - sel, 3ULL * 2 * 4 * 128 * 128 * 4);
	l.attention = LB_ATTN_FLASH;
	l.checkpointing = LB_CKPT_NONE;
	fnone = live_bytes(&l);
	l.checkpointing = LB_CKPT_SELECTIVE;
	fsel = live_bytes(&l);
	assert_true(fnone < none && fsel < fnone);
	assert_int_equal(fnone - fsel, 3ULL * 2 * 4 * 128 * 4); /* the lse only */
}

static void test_param_table(void **state)
{
	const char *presets[] = {"tiny", "tiny-gqa", "tiny-tied"};

	for (int p = 0; p < 3; p++) {
		struct lb_layout l;
		struct lb_llama m;
		size_t off = 0;

		lb_layout_init(&l);
		assert_int_equal(lb_model_preset(presets[p], &l.model), 0);
		l.seq_len = 16;
		assert_int_equal(lb_llama_init(&m, lb_ops_cpu(), NULL, &l, 0, 1), 0);
		for (int t = 0; t < m.n_tensors; t++) {
			assert_int_equal(m.tensors[t].offset, off);
			off += m.tensors[t].count;
		}
		assert_int_equal(off, m.n_params);
		assert_int_equal((int64_t)m.n_params, lb_param_count(&l.model));
		assert_int_equal(m.t_head == m.t_embed, l.model.tied);
		assert_true(lb_llama_find(&m, "layers.3.wqkv") >= 0);
		assert_int_equal(lb_llama_find(&m, "layers.4.wqkv"), -1);
		lb_llama_free(&m);
	}
}

static void test_init_deterministic(void **state)
{
	struct lb_layout l;
	struct lb_llama a, b;
	double *pa, *pb, mean = 0, var = 0;
	int wq;
	size_t n;

	lb_layout_init(&l);
	l.seq_len = 16;
	assert_int_equal(lb_llama_init(&a, lb_ops_cpu(), NULL, &l, 0, 1), 0);
	l.checkpointing = LB_CKPT_FULL; /* activations differ, weights do not */
	assert_int_equal(lb_llama_init(&b, lb_ops_cpu(), NULL, &l, 0, 1), 0);
	n = a.n_params;
	pa = malloc(n * sizeof(double));
	pb = malloc(n * sizeof(double));
	lb_ops_cpu()->read(pa, a.params, n, LB_K_ACT);
	lb_ops_cpu()->read(pb, b.params, n, LB_K_ACT);
	assert_memory_equal(pa, pb, n * sizeof(double));
	wq = lb_llama_find(&a, "layers.0.wqkv");
	for (size_t i = 0; i < a.tensors[wq].count; i++)
		mean += pa[a.tensors[wq].offset + i];
	mean /= a.tensors[wq].count;
	for (size_t i = 0; i < a.tensors[wq].count; i++)
		var += pow(pa[a.tensors[wq].offset + i] - mean, 2);
	var /= a.tensors[wq].count;
	assert_true(fabs(mean) < 0.002 && fabs(sqrt(var) - 0.02) < 0.002);
	assert_true(pa[a.tensors[lb_llama_find(&a, "norm")].offset] == 1.0);
	free(pa);
	free(pb);
	lb_llama_free(&a);
	lb_llama_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_param_table),
	    cmocka_unit_test(test_init_deterministic),
	    cmocka_unit_test(test_gradcheck_untied_flash_none),
	    cmocka_unit_test(test_gradcheck_tied_naive_full_unfused),
	    cmocka_unit_test(test_gradcheck_fused_softmax_selective),
	    cmocka_unit_test(test_modes_agree),
	    cmocka_unit_test(test_matmul_add_fused),
	    cmocka_unit_test(test_pp2_stages_match_pp1),
	    cmocka_unit_test(test_checkpointing_memory),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
