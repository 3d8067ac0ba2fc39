/*
 * Unit tests of the model arithmetic (common/model.c): presets and their published
 * parameter counts, the PaLM FLOP count and the hardware count with recomputation, the
 * GPU peak table, and the memory estimate's direction under each knob and on uneven
 * pipeline stages (the calibration against the paper's runs is
 * tests/unit/test_paper_memory.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "common/model.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* Published totals: LLaMA (Touvron et al. 2023) and Llama 2 70B, vocabulary 32000. */
static void test_preset_param_counts(void **state)
{
	static const struct {
		const char *name;
		int64_t params;
	} want[] = {
	    {"llama-7b", 6738415616LL},	  {"llama-13b", 13015864320LL},
	    {"llama-30b", 32528943616LL}, {"llama-65b", 65285660672LL},
	    {"llama-70b", 68976648192LL},
	};
	struct lb_model m;
	size_t i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		assert_int_equal(lb_model_preset(want[i].name, &m), 0);
		assert_string_equal(m.name, want[i].name);
		assert_int_equal(m.vocab, 32000);
		assert_int_equal(m.tied, 0);
		assert_true(lb_param_count(&m) == want[i].params);
	}
	assert_int_equal(lb_model_preset("llama-70b", &m), 0);
	assert_int_equal(m.n_kv_heads, 8);
	assert_int_equal(m.ffn, 28672);
	assert_int_equal(lb_model_preset("llama-13B", &m), -1);
	assert_int_equal(lb_model_preset(NULL, &m), -1);
}

/* The tiny presets split by tp and pp in {1, 2, 4}. */
static void test_tiny_presets(void **state)
{
	static const char *const tiny[] = {"tiny", "tiny-gqa", "tiny-deep", "tiny-tied"};
	struct lb_model m, t;
	size_t i;
	int tp;

	for (i = 0; i < 4; i++) {
		assert_int_equal(lb_model_preset(tiny[i], &m), 0);
		assert_int_equal(m.hidden, 64);
		assert_int_equal(m.vocab, 256);
		for (tp = 1; tp <= 4; tp *= 2) {
			assert_int_equal(m.n_heads % tp, 0);
			assert_int_equal(m.n_kv_heads % tp, 0);
			assert_int_equal(m.ffn % tp, 0);
			assert_int_equal(m.vocab % tp, 0);
			assert_int_equal(m.n_layers % tp, 0); /* as pp */
		}
	}
	lb_model_preset("tiny-gqa", &m);
	assert_int_equal(m.n_heads, 8);
	assert_int_equal(m.n_kv_heads, 4);
	lb_model_preset("tiny-deep", &m);
	assert_int_equal(m.n_layers, 8);
	lb_model_preset("tiny-tied", &m);
	lb_model_preset("tiny", &t);
	assert_int_equal(m.tied, 1);
	assert_true(lb_param_count(&t) - lb_param_count(&m) == 256 * 64);
	/* every listed name loads */
	for (const char *const *n = lb_model_preset_names(); *n; n++)
		assert_int_equal(lb_model_preset(*n, &m), 0);
}

/* Hand count of "tiny": 4 layers of (4*64*64 + 3*64*128 + 2*64) + 2*256*64 + 64. */
static void test_param_count_by_hand(void **state)
{
	struct lb_model m;

	lb_model_preset("tiny", &m);
	assert_true(lb_param_count(&m) ==
		    4 * (4 * 64 * 64 + 3 * 64 * 128 + 2 * 64) + 2 * 256 * 64 + 64);
	/* GQA: K and V are h * kv_dim each, kv_dim = 4 heads * 8 = 32 */
	lb_model_preset("tiny-gqa", &m);
	assert_true(lb_param_count(&m) ==
		    4 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64) + 2 * 256 * 64 + 64);
}

static void test_flops(void **state)
{
	struct lb_layout l;
	double n, attn, layer_params;

	lb_layout_init(&l);
	lb_model_preset("llama-13b", &l.model);
	l.model.vocab = 128000;
	l.seq_len = 2048;
	l.global_batch = 2048;
	n = (double)lb_param_count(&l.model);
	attn = 12.0 * 40 * 5120 * 2048;
	assert_true(fabs(lb_flops_per_token(&l.model, 2048) - (6 * n + attn)) < 1.0);
	assert_true(fabs(lb_flops_per_step(&l) - (6 * n + attn) * 2048.0 * 2048.0) <
		    1e-9 * lb_flops_per_step(&l));
	/* no recomputation: hardware == model */
	assert_true(lb_hw_flops_per_token(&l) == lb_flops_per_token(&l.model, 2048));
	/* selective: the attention core's forward */
	l.checkpointing = LB_CKPT_SELECTIVE;
	assert_true(fabs(lb_hw_flops_per_token(&l) - (6 * n + attn + attn / 3)) < 1.0);
	/* full: one more forward of every layer (not the embedding, not the head) */
	l.checkpointing = LB_CKPT_FULL;
	layer_params = 40.0 * (4.0 * 5120 * 5120 + 3.0 * 5120 * 13824 + 2 * 5120);
	assert_true(fabs(lb_hw_flops_per_token(&l) - (6 * n + attn + 2 * layer_params + attn / 3)) <
		    1.0);
	assert_true(lb_hw_flops_per_step(&l) > lb_flops_per_step(&l));
}

/* The count without the input embedding lookup (Megatron-LM's, torchtitan's): N less the
 * untied embedding table; a tied table is the head too and stays. */
static void test_flops_no_embed(void **state)
{
	struct lb_layout l;
	double n, attn, palm, noemb;

	(void)state;
	lb_layout_init(&l);
	lb_model_preset("llama-13b", &l.model);
	l.model.n_layers = 8; /* the H200 study's cut */
	l.seq_len = 8192;
	l.global_batch = 4;
	n = (double)lb_param_count(&l.model);
	assert_true(n == 2865320960.0);
	attn = 12.0 * 8 * 5120 * 8192;
	palm = lb_flops_per_token_as(&l.model, 8192, LB_FLOPS_PALM);
	noemb = lb_flops_per_token_as(&l.model, 8192, LB_FLOPS_NO_EMBED);
	assert_true(palm == lb_flops_per_token(&l.model, 8192));
	assert_true(fabs(noemb - (6.0 * (n - 32000.0 * 5120) + attn)) < 1.0);
	/* the embedding table is 5.7% of N; 63.6% MFU by the paper's count is 60.7% by this */
	assert_true(fabs(32000.0 * 5120 / n - 0.0572) < 0.0001);
	assert_true(fabs(63.6 * noemb / palm - 60.7) < 0.05);
	assert_true(lb_flops_per_step_as(&l, LB_FLOPS_NO_EMBED) == noemb * 4 * 8192);
	assert_true(lb_flops_per_step_as(&l, LB_FLOPS_PALM) == lb_flops_per_step(&l));
	/* tied: nothing taken out */
	l.model.tied = 1;
	assert_true(lb_flops_per_token_as(&l.model, 8192, LB_FLOPS_NO_EMBED) ==
		    lb_flops_per_token_as(&l.model, 8192, LB_FLOPS_PALM));
}

static void test_gpu_peaks(void **state)
{
	static const struct {
		const char *product;
		double tflops;
	} known[] = {
	    {"A100", 312},
	    {"NVIDIA A100-SXM4-80GB", 312},
	    {"A100-PCIE-40GB", 312},
	    {"nvidia a100 80gb pcie", 312},
	    {"H100", 989},
	    {"NVIDIA H100 80GB HBM3", 989},
	    {"NVIDIA H100 PCIe", 756},
	    {"H100-PCIE", 756},
	    {"NVIDIA H100 NVL", 835},
	    {"NVIDIA H200", 989},
	    {"NVIDIA GH200 480GB", 989},
	    {"NVIDIA B200", 2250},
	    {"NVIDIA L40S", 362},
	    {"AMD Instinct MI300X", 1307.4},
	    {"AMD Instinct MI250X", 383},
	};
	static const char *const unknown[] = {"cpu",
					      "",
					      "NVIDIA A10",
					      "Tesla V100-SXM2-32GB",
					      "NVIDIA H200 NVL",
					      "AMD Instinct MI210"};
	double t;
	size_t i;

	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		t = -1;
		if (lb_gpu_peak_tflops(known[i].product, &t) != 0 || t != known[i].tflops)
			fail_msg("'%s': got %g", known[i].product, t);
	}
	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		t = 42;
		assert_int_equal(lb_gpu_peak_tflops(unknown[i], &t), -1);
		assert_true(t == 42);
	}
	assert_int_equal(lb_gpu_peak_tflops(NULL, &t), -1);
}

static void paper_layout(struct lb_layout *l, const char *model)
{
	lb_layout_init(l);
	lb_model_preset(model, &l->model);
	l->model.vocab = 128000;
	l->seq_len = 2048;
	l->global_batch = 2048;
	l->micro_batch = 1;
	l->tp = 1;
	l->pp = 1;
	l->dp = 32;
	l->gpus_per_node = 8;
	l->nodes = 4;
	l->zero_stage = 1;
}

static double total(const struct lb_layout *l)
{
	struct lb_mem_estimate e;

	lb_memory_estimate(l, &e);
	assert_true(e.total > 0);
	assert_true(fabs(e.total - (e.weights + e.grads + e.optimizer + e.activations + e.logits +
				    e.workspace)) < 1.0);
	return e.total;
}

static void test_memory_terms(void **state)
{
	struct lb_layout l;
	struct lb_mem_estimate e;
	double n;

	paper_layout(&l, "llama-13b");
	lb_memory_estimate(&l, &e);
	n = (double)lb_param_count(&l.model);
	/* one stage: every parameter, bf16 weights and grads, 16 bytes over dp */
	assert_true(fabs(e.weights - 2 * n) < 1.0);
	assert_true(fabs(e.grads - 2 * n) < 1.0);
	assert_true(fabs(e.optimizer - 16 * n / 32) < 1.0);
	assert_true(e.logits > 0);
	assert_true(e.workspace > 0);
	/* the paper's best 13B layout fits in 80 GiB */
	assert_true(e.total <= 80 * GIB * LB_MEM_USABLE_FRACTION);
	/* ZeRO-0 keeps the whole optimizer state */
	l.zero_stage = 0;
	lb_memory_estimate(&l, &e);
	assert_true(fabs(e.optimizer - 16 * n) < 1.0);
}

/* Each knob moves the estimate the way the physics says. */
static void test_memory_directions(void **state)
{
	struct lb_layout a, b;

	paper_layout(&a, "llama-30b");
	a.seq_len = 8192;
	a.global_batch = 512;
	a.tp = 2;
	a.pp = 4;
	a.dp = 8;
	a.gpus_per_node = 8;
	a.nodes = 8;
	b = a;
	b.micro_batch = 2;
	assert_true(total(&b) > total(&a));
	b = a;
	b.tp = 4;
	b.dp = 4;
	assert_true(total(&b) < total(&a));
	b = a;
	b.sequence_parallel = 1;
	assert_true(total(&b) < total(&a));
	b = a;
	b.checkpointing = LB_CKPT_FULL;
	assert_true(total(&b) < total(&a));
	b = a;
	b.norm = LB_NORM_UNFUSED;
	assert_true(total(&b) > total(&a));
	b = a;
	b.attention = LB_ATTN_FUSED_SOFTMAX;
	assert_true(total(&b) > total(&a));
	b.attention = LB_ATTN_NAIVE;
	assert_true(total(&b) > total(&a));
	{
		struct lb_layout c = b;

		c.attention = LB_ATTN_FUSED_SOFTMAX;
		assert_true(total(&b) > total(&c));
		/* selective drops the attention core, so it beats none with naive */
		c = b;
		c.checkpointing = LB_CKPT_SELECTIVE;
		assert_true(total(&c) < total(&b));
	}
	b = a;
	b.zero_stage = 0;
	assert_true(total(&b) > total(&a));
	/* degenerate records give zeros, not a crash */
	b = a;
	b.tp = 0;
	{
		struct lb_mem_estimate e;

		lb_memory_estimate(&b, &e);
		assert_true(e.total == 0);
	}
}

/* Parameters of one layer of m: the difference the layer count makes. */
static double one_layer(const struct lb_model *m)
{
	struct lb_model a = *m, b = *m;

	a.n_layers = 2;
	b.n_layers = 1;
	return (double)(lb_param_count(&a) - lb_param_count(&b));
}

/* Uneven stages: the most loaded stage decides (lb_stage_layers' split). */
static void test_memory_uneven_stages(void **state)
{
	struct lb_layout a, lo, hi;
	struct lb_mem_estimate e;
	double layer, emb;

	/* 30B's 60 layers on 8 stages (7 7 8 8 8 8 7 7) lie between 56 (7 each) and 64
	 * layers (8 each) */
	paper_layout(&a, "llama-30b");
	a.seq_len = 8192;
	a.global_batch = 512;
	a.tp = 2;
	a.pp = 8;
	a.dp = 8;
	a.gpus_per_node = 8;
	a.nodes = 16;
	lo = hi = a;
	lo.model.n_layers = 56;
	hi.model.n_layers = 64;
	assert_true(total(&lo) <= total(&a));
	assert_true(total(&a) < total(&hi));
	a.pp = 16;
	a.dp = 4;
	lo = hi = a;
	lo.model.n_layers = 48;
	hi.model.n_layers = 64;
	assert_true(total(&lo) <= total(&a));
	assert_true(total(&a) < total(&hi));
	/* a middle stage can be the most loaded: one micro-batch per step (nothing in
	 * flight beyond it) and a small vocabulary, 6 layers on 4 stages (1 2 2 1): stage 1
	 * holds two layers and nothing else */
	paper_layout(&a, "llama-13b");
	a.model.vocab = 512;
	a.model.n_layers = 6;
	a.global_batch = 1;
	a.dp = 1;
	a.pp = 4;
	a.nodes = 1;
	a.gpus_per_node = 4;
	lb_memory_estimate(&a, &e);
	layer = one_layer(&a.model);
	assert_true(fabs(e.weights - 2.0 * 2.0 * layer) < 1.0);
	assert_true(e.logits == 0.0);
	/* with a large vocabulary the first stage's embedding outweighs a layer: 1 layer +
	 * the embedding */
	a.model.vocab = 128000;
	lb_memory_estimate(&a, &e);
	emb = (double)a.model.vocab * a.model.hidden;
	assert_true(layer < emb);
	assert_true(e.weights >= 2.0 * (layer + emb) - 1.0);
	/* pp above the layers is no layout: zeros */
	a.pp = 7;
	lb_memory_estimate(&a, &e);
	assert_true(e.total == 0);
}

/* cudnn (cuDNN's fused flash attention) saves what flash saves: both memory models give
 * it flash's bytes, term by term, under every checkpointing mode, sequence parallel or not;
 * the (s, s) kernels differ. */
static void test_memory_cudnn_is_flash(void **state)
{
	static const enum lb_ckpt modes[] = {LB_CKPT_NONE, LB_CKPT_SELECTIVE, LB_CKPT_FULL};
	struct lb_layout f, c;
	struct lb_mem_estimate ef, ec;

	(void)state;
	paper_layout(&f, "llama-13b");
	f.tp = 2; /* sequence parallelism acts, two pipeline stages */
	f.pp = 2;
	f.dp = 8;
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		for (int sp = 0; sp <= 1; sp++) {
			f.checkpointing = modes[i];
			f.sequence_parallel = sp;
			f.attention = LB_ATTN_FLASH;
			c = f;
			c.attention = LB_ATTN_CUDNN;
			lb_memory_estimate(&f, &ef);
			lb_memory_estimate(&c, &ec);
			assert_memory_equal(&ef, &ec, sizeof(ef));
			assert_true(ef.total > 0);
			for (int gpu = 0; gpu <= 1; gpu++) {
				assert_int_equal(lb_memory_trainer(&f, gpu, 0, &ef), 0);
				assert_int_equal(lb_memory_trainer(&c, gpu, 0, &ec), 0);
				assert_memory_equal(&ef, &ec, sizeof(ef));
			}
		}
	}
	/* the probabilities kernels keep more */
	c.checkpointing = f.checkpointing = LB_CKPT_NONE;
	c.attention = LB_ATTN_FUSED_SOFTMAX;
	lb_memory_estimate(&f, &ef);
	lb_memory_estimate(&c, &ec);
	assert_true(ec.activations > ef.activations);
	assert_int_equal(lb_memory_trainer(&f, 1, 0, &ef), 0);
	assert_int_equal(lb_memory_trainer(&c, 1, 0, &ec), 0);
	assert_true(ec.activations > ef.activations);
}

/* The names the peak table knows: each listed name is known, a misspelling is not. */
static void test_gpu_known_names(void **state)
{
	char names[256], *tok, *save = NULL;
	int n;

	(void)state;
	n = lb_gpu_names(names, sizeof(names));
	assert_true(n > 0 && (size_t)n < sizeof(names));
	for (tok = strtok_r(names, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		while (*tok == ' ')
			tok++;
		if (!lb_gpu_known(tok))
			fail_msg("'%s' is listed but not known", tok);
	}
	assert_int_equal(lb_gpu_known("A100"), 1);
	assert_int_equal(lb_gpu_known("NVIDIA H200"), 1);
	assert_int_equal(lb_gpu_known("Tesla V100-SXM2-32GB"), 1); /* known, without a peak */
	assert_int_equal(lb_gpu_known("A1OO"), 0);
	assert_int_equal(lb_gpu_known("cpu"), 0);
	assert_int_equal(lb_gpu_known(NULL), 0);
	lb_gpu_names(names, sizeof(names));
	assert_non_null(strstr(names, "A100"));
	assert_non_null(strstr(names, "H200"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_preset_param_counts),
	    cmocka_unit_test(test_tiny_presets),
	    cmocka_unit_test(test_param_count_by_hand),
	    cmocka_unit_test(test_flops),
	    cmocka_unit_test(test_flops_no_embed),
	    cmocka_unit_test(test_gpu_peaks),
	    cmocka_unit_test(test_memory_terms),
	    cmocka_unit_test(test_memory_directions),
	    cmocka_unit_test(test_memory_uneven_stages),
	    cmocka_unit_test(test_memory_cudnn_is_flash),
	    cmocka_unit_test(test_gpu_known_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
