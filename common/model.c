/*
 * Model presets and the arithmetic on them: parameter count, PaLM model FLOPs and the
 * hardware FLOPs with recomputation (docs/flops.md), the dense bf16 GPU peak table, and
 * the per-GPU memory estimate used to prune layouts (docs/memory-model.md). Pure
 * functions, libc + libm only.
 */
#include "common/model.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

struct preset {
	const char *name;
	int layers, hidden, heads, kv_heads, ffn, vocab, tied;
};

/* Llama shapes: Touvron et al. 2023 (LLaMA, table 2; Llama 2 for 70B), vocabulary 32000
 * with an untied head. Tiny presets: CPU shapes that split by tp, pp in {1, 2, 4}. */
static const struct preset presets[] = {
    {"llama-7b", 32, 4096, 32, 32, 11008, 32000, 0},
    {"llama-13b", 40, 5120, 40, 40, 13824, 32000, 0},
    {"llama-30b", 60, 6656, 52, 52, 17920, 32000, 0},
    {"llama-65b", 80, 8192, 64, 64, 22016, 32000, 0},
    {"llama-70b", 80, 8192, 64, 8, 28672, 32000, 0},
    {"tiny", 4, 64, 4, 4, 128, 256, 0},
    {"tiny-gqa", 4, 64, 8, 4, 128, 256, 0},
    {"tiny-deep", 8, 64, 4, 4, 128, 256, 0},
    {"tiny-tied", 4, 64, 4, 4, 128, 256, 1},
};
#define NPRESETS (sizeof(presets) / sizeof(presets[0]))

static const char *const preset_names[] = {
    "llama-7b", "llama-13b", "llama-30b", "llama-65b", "llama-70b",
    "tiny",	"tiny-gqa",  "tiny-deep", "tiny-tied", NULL,
};

int lb_model_preset(const char *name, struct lb_model *m)
{
	size_t i;

	if (!name)
		return -1;
	for (i = 0; i < NPRESETS; i++) {
		const struct preset *p = &presets[i];

		if (strcmp(name, p->name))
			continue;
		memset(m, 0, sizeof(*m));
		snprintf(m->name, sizeof(m->name), "%s", p->name);
		m->n_layers = p->layers;
		m->hidden = p->hidden;
		m->n_heads = p->heads;
		m->n_kv_heads = p->kv_heads;
		m->ffn = p->ffn;
		m->vocab = p->vocab;
		m->tied = p->tied;
		return 0;
	}
	return -1;
}

const char *const *lb_model_preset_names(void)
{
	return preset_names;
}

/* Parameters of one transformer layer: Q and output (h*h each), K and V (h * kv_dim
 * each, kv_dim = kv_heads * head_dim), gate/up/down (3*h*ffn), two RMSNorm gains. */
static int64_t layer_params(const struct lb_model *m)
{
	int64_t h = m->hidden;
	int64_t kv_dim = m->n_heads > 0 ? h / m->n_heads * m->n_kv_heads : h;

	return 2 * h * h + 2 * h * kv_dim + 3 * h * (int64_t)m->ffn + 2 * h;
}

int64_t lb_param_count(const struct lb_model *m)
{
	int64_t h = m->hidden, v = m->vocab;
	int64_t n = (int64_t)m->n_layers * layer_params(m) + v * h + h;

	if (!m->tied)
		n += v * h;
	return n;
}

double lb_flops_per_token(const struct lb_model *m, int seq_len)
{
	return 6.0 * (double)lb_param_count(m) +
	       12.0 * m->n_layers * (double)m->hidden * (double)seq_len;
}

double lb_hw_flops_per_token(const struct lb_layout *l)
{
	const struct lb_model *m = &l->model;
	double f = lb_flops_per_token(m, l->seq_len);
	double attn_fwd = 4.0 * m->n_layers * (double)m->hidden * (double)l->seq_len;

	switch (l->checkpointing) {
	case LB_CKPT_FULL:
		f += 2.0 * (double)m->n_layers * (double)layer_params(m) + attn_fwd;
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
};

int lb_gpu_peak_tflops(const char *product, double *tflops)
{
	char norm[256];
	size_t i, n;

	if (!product)
		return -1;
	n = strlen(product);
	if (n >= sizeof(norm))
		n = sizeof(norm) - 1;
	for (i = 0; i < n; i++) {
		char c = (char)tolower((unsigned char)product[i]);

		norm[i] = (c == '-' || c == '_') ? ' ' : c;
	}
	norm[n] = '\0';
	for (i = 0; i < sizeof(peaks) / sizeof(peaks[0]); i++) {
		if (!strstr(norm, peaks[i].pattern))
			continue;
		if (peaks[i].tflops < 0)
			return -1;
		*tflops = peaks[i].tflops;
		return 0;
	}
	return -1;
}

/*
 * Memory estimate. Terms, sources and the calibration against the paper's runs are in
 * docs/memory-model.md. All sizes in bytes.
 */

/* Bytes per parameter: bf16 weights, fp32 gradient accumulation buffer (Megatron-LM's
 * main_grad with bf16), fp32 master weights + Adam m and v (12, sharded over dp by
 * ZeRO-1). */
#define BYTES_WEIGHT 2.0
#define BYTES_GRAD   4.0
#define BYTES_OPTIM  12.0
/* Fixed allowance: CUDA context, cuBLAS workspace, NCCL buffers, allocator slack. */
#define WORKSPACE_BYTES (3.0 * 1024 * 1024 * 1024)

/* Activation bytes of one layer for one micro-batch, kept for the backward pass. */
static double layer_activations(const struct lb_layout *l, int ckpt_mode)
{
	const struct lb_model *m = &l->model;
	double s = l->seq_len, b = l->micro_batch, h = m->hidden, a = m->n_heads;
	double f = m->ffn, t = l->tp;
	double kvh = m->n_heads > 0 ? h / m->n_heads * m->n_kv_heads : h;
	double sbh = s * b * h;
	double repl, shard, core;

	/* Not split by TP (unless SP): the two norm inputs and the inputs of the QKV and
	 * gate/up matmuls (the norm outputs), 2 bytes each. */
	repl = 4.0 * sbh * 2.0;
	if (l->norm == LB_NORM_UNFUSED)
		repl += 2.0 * sbh * 6.0; /* fp32 copy + fp32 normalised tensor per norm */
	/* Split by TP: Q, K, V (rope'd), attention output (out-proj input), SwiGLU's gate,
	 * up and product. */
	shard = 2.0 * s * b * (h + 2.0 * kvh) + 2.0 * sbh + 3.0 * 2.0 * s * b * f;
	if (l->attention == LB_ATTN_NAIVE)
		core = 5.0 * a * s * s * b; /* scores, softmax input/output (bf16) */
	else if (l->attention == LB_ATTN_FUSED_SOFTMAX)
		core = 2.0 * a * s * s * b; /* softmax output only */
	else
		core = 4.0 * a * s * b; /* fp32 log-sum-exp per row */
	if (ckpt_mode == LB_CKPT_SELECTIVE && l->attention != LB_ATTN_FLASH)
		core = 0.0;
	if (l->sequence_parallel)
		return (repl + shard + core) / t;
	return repl + (shard + core) / t;
}

void lb_memory_estimate(const struct lb_layout *l, struct lb_mem_estimate *out)
{
	const struct lb_model *m = &l->model;
	double t = l->tp > 0 ? l->tp : 1, p = l->pp > 0 ? l->pp : 1;
	double d = l->dp > 0 ? l->dp : 1;
	double s = l->seq_len, b = l->micro_batch, h = m->hidden;
	double lpp = m->n_layers / p;
	double emb = (double)m->vocab * h / t;
	double first_params, last_params, params, inflight, per_layer, act, logits;
	double first_total, last_total, first_act, last_act;
	int accum = lb_layout_accum_steps(l);

	memset(out, 0, sizeof(*out));
	if (l->tp <= 0 || l->pp <= 0 || l->dp <= 0 || m->n_layers <= 0)
		return;
	first_params = lpp * (double)layer_params(m) / t + emb;
	last_params = lpp * (double)layer_params(m) / t + h;
	if (!m->tied || l->pp > 1)
		last_params += emb; /* untied head, or the tied copy on the last stage */
	if (l->pp == 1)
		first_params = last_params; /* one stage holds both */

	per_layer = layer_activations(l, l->checkpointing);
	if (l->checkpointing == LB_CKPT_FULL) {
		double input = 2.0 * s * b * h / (l->sequence_parallel ? t : 1.0);
		act = lpp * input;			       /* per micro-batch */
		act += layer_activations(l, LB_CKPT_NONE) / p; /* recompute working set */
	} else {
		act = lpp * per_layer;
	}
	/* 1F1B: stage i holds pp - i micro-batches in flight (fewer if accum is smaller). */
	inflight = p;
	if (accum > 0 && accum < inflight)
		inflight = accum;
	first_act = act * inflight + 2.0 * s * b * h; /* + embedding output */
	last_act = act;
	logits = s * b * m->vocab / t * (2.0 + 4.0);

	first_total = first_params * (BYTES_WEIGHT + BYTES_GRAD) +
		      first_params * BYTES_OPTIM / (l->zero_stage ? d : 1.0) + first_act;
	last_total = last_params * (BYTES_WEIGHT + BYTES_GRAD) +
		     last_params * BYTES_OPTIM / (l->zero_stage ? d : 1.0) + last_act + logits;
	if (l->pp == 1)
		first_total += logits;
	params = first_params;
	out->activations = first_act;
	out->logits = l->pp == 1 ? logits : 0.0;
	if (l->pp > 1 && last_total > first_total) {
		params = last_params;
		out->activations = last_act;
		out->logits = logits;
	}
	out->weights = params * BYTES_WEIGHT;
	out->grads = params * BYTES_GRAD;
	out->optimizer = params * BYTES_OPTIM / (l->zero_stage ? d : 1.0);
	out->workspace = WORKSPACE_BYTES;
	out->total = out->weights + out->grads + out->optimizer + out->activations + out->logits +
		     out->workspace;
}
