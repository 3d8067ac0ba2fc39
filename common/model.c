/*
 * The arithmetic on models and layouts: parameter count, PaLM model FLOPs and the
 * hardware FLOPs with recomputation (docs/flops.md), the dense bf16 GPU peak table, and
 * the per-GPU memory estimate used to prune layouts (docs/memory-model.md). Pure
 * functions, libc + libm only.
 */
#include "common/model.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* Parameters of one transformer layer: Q and output (h*h each), K and V (h * kv_dim
 * each, kv_dim = kv_heads * head_dim), gate/up/down (3*h*ffn), two RMSNorm gains.
 * Counted in double: exact below 2^53 (every real model), and no overflow on absurd
 * records. */
static double layer_params(const struct lb_model *m)
{
	double h = m->hidden;
	double kv_dim = m->n_heads > 0 ? (double)(m->hidden / m->n_heads) * m->n_kv_heads : h;

	return 2.0 * h * h + 2.0 * h * kv_dim + 3.0 * h * m->ffn + 2.0 * h;
}

int64_t lb_param_count(const struct lb_model *m)
{
	double h = m->hidden, v = m->vocab;
	double n = (double)m->n_layers * layer_params(m) + v * h + h;

	if (!m->tied)
		n += v * h;
	if (n >= 9.0e18)
		return INT64_MAX;
	if (n <= -9.0e18)
		return INT64_MIN;
	return (int64_t)n;
}

double lb_flops_per_token_as(const struct lb_model *m, int seq_len, enum lb_flops_count c)
{
	double n = (double)lb_param_count(m);

	/* the lookup of an untied input embedding is a gather: no FLOPs by Megatron-LM's and
	 * torchtitan's count; tied, the table is also the head, whose matmul counts */
	if (c == LB_FLOPS_NO_EMBED && !m->tied)
		n -= (double)m->vocab * (double)m->hidden;
	return 6.0 * n + 12.0 * m->n_layers * (double)m->hidden * (double)seq_len;
}

double lb_flops_per_token(const struct lb_model *m, int seq_len)
{
	return lb_flops_per_token_as(m, seq_len, LB_FLOPS_PALM);
}

double lb_hw_flops_per_token(const struct lb_layout *l)
{
	const struct lb_model *m = &l->model;
	double f = lb_flops_per_token(m, l->seq_len);
	double attn_fwd = 4.0 * m->n_layers * (double)m->hidden * (double)l->seq_len;

	switch (l->checkpointing) {
	case LB_CKPT_FULL:
		f += 2.0 * (double)m->n_layers * layer_params(m) + attn_fwd;
		break;
	case LB_CKPT_SELECTIVE:
		f += attn_fwd;
		break;
	default:
		break;
	}
	return f;
}

double lb_flops_per_step(const struct lb_layout *l)
{
	return lb_flops_per_token(&l->model, l->seq_len) * (double)l->global_batch *
	       (double)l->seq_len;
}

double lb_flops_per_step_as(const struct lb_layout *l, enum lb_flops_count c)
{
	return lb_flops_per_token_as(&l->model, l->seq_len, c) * (double)l->global_batch *
	       (double)l->seq_len;
}

double lb_hw_flops_per_step(const struct lb_layout *l)
{
	return lb_hw_flops_per_token(l) * (double)l->global_batch * (double)l->seq_len;
}

/* Dense (non-sparse) bf16 tensor-core peaks from the vendor data sheets, TFLOP/s.
 * Matched case-insensitively as substrings of the product name after mapping '-' and
 * '_' to ' ', most specific first. A negative value marks a known-unknown product
 * (a variant whose peak differs from its family's and is not tabulated). */
static const struct {
	const char *pattern;
	double tflops;
} peaks[] = {
    {"gh200", 989.0},	  /* GH200 Grace Hopper: H100/H200-class GPU, 989.4 dense */
    {"h200 nvl", -1.0},	  /* different clocks; not tabulated */
    {"h200", 989.0},	  /* H200 SXM */
    {"h100 nvl", 835.0},  /* H100 NVL, per GPU */
    {"h100 pcie", 756.0}, /* H100 PCIe */
    {"h100", 989.0},	  /* H100 SXM5 */
    {"a100", 312.0},	  /* A100 SXM4 and PCIe, 40 and 80 GB */
    {"b200", 2250.0},	  /* HGX B200, per GPU */
    {"l40s", 362.0},	  /* L40S */
    {"mi300x", 1307.4},	  /* AMD Instinct MI300X */
    {"mi250x", 383.0},	  /* AMD Instinct MI250X (both dies) */
    {"v100", -1.0},	  /* no bf16 tensor cores: a bf16 MFU has no peak to divide by */
};

/* The table's product names as people write them, in the table's order. */
static const char *const peak_names[] = {"GH200", "H200 NVL", "H200", "H100 NVL", "H100 PCIe",
					 "H100",  "A100",     "B200", "L40S",	  "MI300X",
					 "MI250X", "V100"};

char *lb_gpu_name_norm(const char *product, char *buf, size_t len)
{
	size_t i, n = strlen(product);

	if (n >= len)
		n = len - 1;
	for (i = 0; i < n; i++) {
		char c = (char)tolower((unsigned char)product[i]);

		buf[i] = (c == '-' || c == '_') ? ' ' : c;
	}
	buf[n] = '\0';
	return buf;
}

/* The index of the table's row that product matches, or -1. */
static int peak_row(const char *product)
{
	char norm[256];

	if (!product)
		return -1;
	lb_gpu_name_norm(product, norm, sizeof(norm));
	for (size_t i = 0; i < sizeof(peaks) / sizeof(peaks[0]); i++)
		if (strstr(norm, peaks[i].pattern))
			return (int)i;
	return -1;
}

int lb_gpu_known(const char *product)
{
	return peak_row(product) >= 0;
}

int lb_gpu_names(char *buf, size_t len)
{
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	for (size_t i = 0; i < sizeof(peak_names) / sizeof(peak_names[0]); i++) {
		int n = snprintf(used < len ? buf + used : NULL, used < len ? len - used : 0,
				 "%s%s", i ? ", " : "", peak_names[i]);

		if (n < 0)
			return -1;
		used += (size_t)n;
	}
	return (int)used;
}

int lb_gpu_peak_tflops(const char *product, double *tflops)
{
	int i = peak_row(product);

	if (i < 0 || peaks[i].tflops < 0)
		return -1;
	*tflops = peaks[i].tflops;
	return 0;
}

/*
 * Memory estimate. Terms, sources and the calibration against the paper's runs are in
 * docs/memory-model.md; every constant below is named there. All sizes in bytes.
 */

/* Bytes per parameter (ZeRO-1 as in the paper's stack: Rajbhandari et al. 2020):
 * bf16 weights and bf16 gradients on every rank; fp32 master weights, Adam m and v and
 * the fp32 gradient shard the optimizer steps on (16 bytes), divided over dp by ZeRO-1. */
#ifndef BYTES_WEIGHT
#define BYTES_WEIGHT 2.0
#endif
#ifndef BYTES_GRAD
#define BYTES_GRAD 2.0
#endif
#ifndef BYTES_OPTIM
#define BYTES_OPTIM 16.0
#endif
/* Fixed allowance: CUDA context, cuBLAS workspace, NCCL buffers (fitted: 1 GiB). */
#ifndef WORKSPACE_BYTES
#define WORKSPACE_BYTES (1.0 * 1024 * 1024 * 1024)
#endif
/* Activations kept per layer, in bytes per token (multiply by s*b), after Korthikanti et
 * al. 2022 section 4 with Llama's blocks and no dropout:
 * outside the TP region (sharded only by SP): each RMSNorm's input and output and the
 * two row-parallel outputs the residual adds read, six bf16 [s,b,h] tensors; */
#ifndef ACT_REPL_PER_H
#define ACT_REPL_PER_H 12.0
#endif
/* an unfused RMSNorm also keeps an fp32 copy of its input and its fp32 normalised
 * output (8 bytes per element, two norms per layer); */
#ifndef ACT_NORM_UNFUSED_PER_H
#define ACT_NORM_UNFUSED_PER_H 16.0
#endif
/* inside the TP region: Q, K, V after RoPE (2*(h + 2*kv_dim) bytes per token) and the
 * attention output (2h); SwiGLU keeps gate, up, silu(gate) and their product, four bf16
 * [s,b,ffn] tensors. */
#ifndef ACT_MLP_PER_FFN
#define ACT_MLP_PER_FFN 8.0
#endif
/* Attention core, bytes per (head, query, key) element: the naive kernel keeps the raw
 * scores, the scaled and the masked scores and the softmax output (4 bf16 tensors);
 * the fused softmax kernel only its bf16 output; flash attention, ours or cuDNN's (cudnn),
 * none (only an fp32 log-sum-exp per head and query, FLASH_LSE_BYTES). */
#ifndef ATTN_NAIVE_BYTES
#define ATTN_NAIVE_BYTES 8.0
#endif
#ifndef ATTN_FUSED_BYTES
#define ATTN_FUSED_BYTES 2.0
#endif
#ifndef FLASH_LSE_BYTES
#define FLASH_LSE_BYTES 4.0
#endif
/* LM head and loss, bytes per logit element, last stage: the paper's stack gathers the
 * full-vocabulary logits on every TP rank (the calibration shows no 1/tp saving): bf16
 * logits, their fp32 copy, the fp32 softmax, the fp32 gradient and its bf16 cast
 * (2 + 4 + 4 + 4 + 2). */
#ifndef LOGIT_BYTES
#define LOGIT_BYTES 16.0
#endif

/* Activation bytes one layer keeps for one micro-batch. selective drops the attention
 * core (Korthikanti et al. 2022, section 5). */
static double layer_activations(const struct lb_layout *l, enum lb_ckpt mode)
{
	const struct lb_model *m = &l->model;
	double s = l->seq_len, b = l->micro_batch, h = m->hidden, a = m->n_heads;
	double f = m->ffn, t = l->tp;
	double kv_dim = m->n_heads > 0 ? h / m->n_heads * m->n_kv_heads : h;
	double sb = s * b;
	double repl, shard, core;

	repl = ACT_REPL_PER_H * sb * h;
	if (l->norm == LB_NORM_UNFUSED)
		repl += ACT_NORM_UNFUSED_PER_H * sb * h;
	shard = 2.0 * sb * (h + 2.0 * kv_dim) + 2.0 * sb * h + ACT_MLP_PER_FFN * sb * f;
	if (lb_attn_saves_lse(l->attention))
		core = FLASH_LSE_BYTES * a * s * b;
	else if (l->attention == LB_ATTN_NAIVE)
		core = ATTN_NAIVE_BYTES * a * s * s * b;
	else
		core = ATTN_FUSED_BYTES * a * s * s * b;
	/* flash and cudnn have no (s, s) core to drop: their lse stays */
	if (mode == LB_CKPT_SELECTIVE && !lb_attn_saves_lse(l->attention))
		core = 0.0;
	if (l->sequence_parallel)
		return (repl + shard + core) / t;
	return repl + (shard + core) / t;
}

/* One pipeline stage's memory. lpp: its layers (lb_stage_layers); stage_params:
 * parameters on this rank; inflight: micro-batches whose activations it holds (1F1B);
 * first: holds the embedding output; last: holds the head and loss. */
static void stage_memory(const struct lb_layout *l, double lpp, double stage_params,
			 double inflight, int first, int last, struct lb_mem_estimate *out)
{
	const struct lb_model *m = &l->model;
	double s = l->seq_len, b = l->micro_batch, h = m->hidden, t = l->tp;
	double d = l->zero_stage ? l->dp : 1.0;
	double act;

	if (l->checkpointing == LB_CKPT_FULL) {
		/* each layer's input per micro-batch in flight, plus one layer's full working
		 * set while it is recomputed and backpropagated */
		double input = 2.0 * s * b * h / (l->sequence_parallel ? t : 1.0);

		act = inflight * lpp * input + layer_activations(l, LB_CKPT_NONE);
	} else {
		act = inflight * lpp * layer_activations(l, l->checkpointing);
	}
	if (first)
		act += inflight * 2.0 * s * b * h; /* embedding output */
	memset(out, 0, sizeof(*out));
	out->weights = stage_params * BYTES_WEIGHT;
	out->grads = stage_params * BYTES_GRAD / (l->zero_stage >= 2 ? d : 1.0); /* ZeRO-2 */
	out->optimizer = stage_params * BYTES_OPTIM / d;
	out->activations = act;
	out->logits = last ? LOGIT_BYTES * s * b * m->vocab : 0.0;
	out->workspace = WORKSPACE_BYTES;
	out->total = out->weights + out->grads + out->optimizer + out->activations + out->logits +
		     out->workspace;
}

/* The first stage with the larger share (floor(L/p) + 1 layers) of an uneven split, or
 * 0 when p divides L. Found in O(log p) through lb_stage_layers alone, whatever its
 * rule: every stage holds floor(L/p) or one more, so lo(i) - i*floor(L/p), the extra
 * layers before stage i, never decreases. */
static int first_larger_stage(const struct lb_layout *l)
{
	int q = l->model.n_layers / l->pp, a = 0, b = l->pp - 1, lo, hi;

	if (l->model.n_layers % l->pp == 0)
		return 0;
	/* smallest i with extra(i + 1) > 0; extra(pp) = L mod pp > 0 */
	while (a < b) {
		int mid = a + (b - a) / 2;

		if (lb_stage_layers(l, mid, &lo, &hi))
			return 0;
		if ((long long)hi - (long long)(mid + 1) * q > 0)
			b = mid;
		else
			a = mid + 1;
	}
	return a;
}

/* Micro-batches whose activations stage s holds at once, in units of the whole stage's
 * layers. 1F1B: pp - s, at most the step's micro-batches. Interleaved (Megatron-LM's
 * forward_backward_pipelining_with_interleaving): 2*(pp - s - 1) + (v - 1)*pp + 1 chunk
 * passes of 1/v of the stage each, all v*accum of them when accum == pp. */
static double stage_inflight(const struct lb_layout *l, int s, int accum)
{
	int v = lb_layout_chunks(l);
	double passes;

	if (v == 1) {
		double n = l->pp - s;

		return accum > 0 && accum < n ? accum : n;
	}
	passes = 2.0 * (l->pp - s - 1) + (double)(v - 1) * l->pp + 1.0;
	if (accum > 0 && (accum == l->pp || passes > (double)accum * v))
		passes = (double)accum * v;
	return passes / v;
}

void lb_memory_estimate(const struct lb_layout *l, struct lb_mem_estimate *out)
{
	const struct lb_model *m = &l->model;
	struct lb_mem_estimate st;
	double t, emb;
	int accum, cand[3], i;

	memset(out, 0, sizeof(*out));
	if (l->tp <= 0 || l->pp <= 0 || l->dp <= 0 || m->n_layers < l->pp || l->seq_len <= 0 ||
	    l->micro_batch <= 0)
		return;
	t = l->tp;
	emb = (double)m->vocab * m->hidden / t;
	accum = lb_layout_accum_steps(l);
	if (l->pp == 1) {
		double body = (double)m->n_layers * layer_params(m) / t;

		/* embedding, final norm and head (a tied head shares the embedding) */
		stage_memory(l, m->n_layers, body + emb + m->hidden + (m->tied ? 0.0 : emb), 1.0, 1,
			     1, out);
		return;
	}
	/*
	 * The most loaded stage decides. 1F1B (Narayanan et al. 2021): stage i holds pp - i
	 * micro-batches in flight, never more than the step has. Between the ends (no
	 * embedding, no head) the earliest of the stages with the same layer count holds
	 * the most, so with the split rule three candidates suffice: the first stage
	 * (embedding), the first stage with the larger share of an uneven split
	 * (lb_stage_layers), and the last (final norm and head; a tied head keeps its copy
	 * of the embedding there, as Megatron-LM does). When pp divides the layers no stage
	 * between the ends exceeds the first. An explicit split, or virtual stages, can put
	 * the most anywhere: every stage is a candidate.
	 */
	if (lb_layout_chunks(l) > 1 || lb_layout_split_explicit(l)) {
		for (i = 0; i < l->pp; i++) {
			int first = i == 0, last = i == l->pp - 1, nl = lb_stage_layer_count(l, i);
			double body, inflight;

			if (nl < 0)
				return;
			body = (double)nl * layer_params(m) / t;
			if (first || last)
				body += emb;
			if (last)
				body += m->hidden;
			inflight = stage_inflight(l, i, accum);
			stage_memory(l, nl, body, inflight, first, last, &st);
			if (i == 0 || st.total > out->total)
				*out = st;
		}
		return;
	}
	cand[0] = 0;
	cand[1] = first_larger_stage(l);
	cand[2] = l->pp - 1;
	for (i = 0; i < 3; i++) {
		int s = cand[i], first = s == 0, last = s == l->pp - 1, lo, hi;
		double body, inflight;

		if (i == 1 && (first || last))
			continue;
		if (lb_stage_layers(l, s, &lo, &hi))
			return;
		body = (double)(hi - lo) * layer_params(m) / t;
		inflight = stage_inflight(l, s, accum);
		if (first || last)
			body += emb;
		if (last)
			body += m->hidden;
		stage_memory(l, hi - lo, body, inflight, first, last, &st);
		if (i == 0 || st.total > out->total)
			*out = st;
	}
}
