/*
 * The step-time model (common/predict.h; equations and sources: docs/prediction.md):
 * table lookups, the per-layer costs of one micro-batch (memoised per shape), the
 * pipeline and the data-parallel reduction, the fit of the terms, and the scores that
 * judge a prediction. Pure: libc and libm.
 */
#include "common/predict.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/model.h"
#include "common/util.h"

const struct lb_fit_term_info lb_fit_terms[LB_FIT_COUNT] = {
#define LB_FIT_INFO(name, def, lo, hi, fit_auto, unit, what) {#name, def, lo, hi, fit_auto, unit, what},
    LB_FIT_TERMS(LB_FIT_INFO)
#undef LB_FIT_INFO
};

int lb_fit_term_find(const char *name)
{
	for (int i = 0; name && i < LB_FIT_COUNT; i++)
		if (!strcmp(lb_fit_terms[i].name, name))
			return i;
	return -1;
}

static const char *const memk_names[LB_MEMK_COUNT] = {
#define LB_MEMK_NAME(id, name) name,
    LB_MEMK_LIST(LB_MEMK_NAME)
#undef LB_MEMK_NAME
};

const char *lb_memk_name(enum lb_memk k)
{
	return (unsigned)k < LB_MEMK_COUNT ? memk_names[k] : "?";
}

int lb_memk_parse(const char *name)
{
	return lb_name_index(memk_names, LB_MEMK_COUNT, name);
}

static const char *const gemm_op_names[LB_GEMM_OPS] = {"fwd", "dgrad", "wgrad"};

const char *lb_gemm_op_name(enum lb_gemm_op op)
{
	return (unsigned)op < LB_GEMM_OPS ? gemm_op_names[op] : "?";
}

int lb_gemm_op_parse(const char *s)
{
	return lb_name_index(gemm_op_names, LB_GEMM_OPS, s);
}

void lb_machine_init(struct lb_machine *m)
{
	memset(m, 0, sizeof(*m));
	m->gemm_efficiency = 0.8;
	m->gemm_half_dim = 128.0;
	m->mem_efficiency = 0.8;
	m->gpus_per_node = 8;
	m->grad_bytes = 4.0;
	m->param_bytes = 2.0;
	m->optimizer_bytes = 34.0;
	for (int i = 0; i < LB_FIT_COUNT; i++)
		m->fit[i] = lb_fit_terms[i].def;
}

struct lb_attn_kernel *lb_machine_attn_mut(struct lb_machine *m, const char *name)
{
	for (int i = 0; name && i < m->n_attn; i++)
		if (!strcmp(m->attn[i].name, name))
			return &m->attn[i];
	return NULL;
}

const struct lb_attn_kernel *lb_machine_attn(const struct lb_machine *m, enum lb_attn attn,
					     const char *label)
{
	const char *want = lb_attn_name(attn);

	for (int i = 0; label && *label && i < m->n_variants; i++)
		if (!strcmp(m->variants[i].label, label)) {
			want = m->variants[i].kernel;
			break;
		}
	return lb_machine_attn_mut((struct lb_machine *)m, want);
}

/* ------------------------------------------------------------------ rates */

/* f(x) = x / (x + half): how a small dimension keeps a GEMM's tiles from filling the GPU. */
static double dim_factor(double x, double half)
{
	return half > 0 ? x / (x + half) : 1.0;
}

static double gemm_parametric(const struct lb_machine *m, double M, double N, double K)
{
	return m->peak_tflops * m->gemm_efficiency * dim_factor(M, m->gemm_half_dim) *
	       dim_factor(N, m->gemm_half_dim) * dim_factor(K, m->gemm_half_dim);
}

/* Seconds of one GEMM (M, N, K) of op on m, before gemm_scale: the parametric rate times
 * the ratio the two nearest rows of the same op measured to it (inverse squared distance
 * in log M, log N, log K; an exact row is taken as measured). */
static double gemm_time(const struct lb_machine *m, enum lb_gemm_op op, double M, double N,
			double K)
{
	double base, d2[2] = {INFINITY, INFINITY}, corr[2] = {1.0, 1.0}, c;
	int found = 0;

	if (M <= 0 || N <= 0 || K <= 0)
		return 0.0;
	base = gemm_parametric(m, M, N, K);
	for (int i = 0; i < m->n_gemm; i++) {
		const struct lb_gemm_row *r = &m->gemm[i];
		double dm, dn, dk, d, rc;

		if (r->op != op || r->tflops <= 0)
			continue;
		dm = log(M / r->m), dn = log(N / r->n), dk = log(K / r->k);
		d = dm * dm + dn * dn + dk * dk;
		rc = r->tflops / gemm_parametric(m, r->m, r->n, r->k);
		found++;
		if (d < d2[0]) {
			d2[1] = d2[0], corr[1] = corr[0];
			d2[0] = d, corr[0] = rc;
		} else if (d < d2[1]) {
			d2[1] = d, corr[1] = rc;
		}
	}
	if (!found)
		c = 1.0;
	else if (d2[0] < 1e-12 || found == 1)
		c = corr[0];
	else
		c = (corr[0] / d2[0] + corr[1] / d2[1]) / (1.0 / d2[0] + 1.0 / d2[1]);
	if (base <= 0 || c <= 0)
		return INFINITY;
	return 2.0 * M * N * K / (base * c * 1e12);
}

/* Rate of a table (xs rising, n >= 1) at x: linear in log x between rows, the end rows
 * beyond them. */
static double interp_log(const double *xs, const double *ys, int n, double x)
{
	if (n <= 0)
		return 0.0;
	if (x <= xs[0] || n == 1)
		return ys[0];
	for (int i = 1; i < n; i++)
		if (x <= xs[i]) {
			double t = log(x / xs[i - 1]) / log(xs[i] / xs[i - 1]);

			return ys[i - 1] + t * (ys[i] - ys[i - 1]);
		}
	return ys[n - 1];
}

/* Seconds of the attention core of one micro-batch on one tensor-parallel rank, before
 * the kernel's scale: b sequences of s tokens, heads local heads of dim hd. */
static double attn_time(const struct lb_attn_kernel *k, int bwd, double b, double s, double heads,
			double hd)
{
	double work = 4.0 * b * heads * s * s * hd / 2.0, rate;

	if (bwd) {
		work *= 2.5;
		rate = interp_log(k->bwd_seq, k->bwd_tflops, k->n_bwd, s);
	} else {
		rate = interp_log(k->fwd_seq, k->fwd_tflops, k->n_fwd, s);
	}
	return rate > 0 ? work / (rate * 1e12) : INFINITY;
}

/* Seconds a memory-bound kernel moving bytes takes, before mem_scale. */
static double mem_time(const struct lb_machine *m, enum lb_memk k, double bytes)
{
	double xs[LB_MACHINE_MEM_MAX], ys[LB_MACHINE_MEM_MAX], rate;
	int n = 0;

	if (bytes <= 0)
		return 0.0;
	for (int i = 0; i < m->n_mem; i++) /* rows are kept sorted by kernel, then bytes */
		if (m->mem[i].kernel == k && m->mem[i].gbps > 0) {
			xs[n] = m->mem[i].bytes;
			ys[n++] = m->mem[i].gbps;
		}
	if (n)
		rate = interp_log(xs, ys, n, bytes);
	else
		rate = m->copy_gbps * (m->mem_kernel_efficiency[k] > 0 ? m->mem_kernel_efficiency[k]
								       : m->mem_efficiency);
	return rate > 0 ? bytes / (rate * 1e9) : INFINITY;
}

/* Ring collectives over n ranks of bytes each at bw GB/s, lat seconds a step. */
static double t_allreduce(double bytes, int n, double gbps, double lat)
{
	if (n <= 1)
		return 0.0;
	return 2.0 * (n - 1) / n * bytes / (gbps * 1e9) + 2.0 * (n - 1) * lat;
}

static double t_half(double bytes, int n, double gbps, double lat) /* reduce-scatter, gather */
{
	if (n <= 1)
		return 0.0;
	return (double)(n - 1) / n * bytes / (gbps * 1e9) + (double)(n - 1) * lat;
}

/* ------------------------------------------------------------------ per-layer costs */

/* What the memo is keyed by: everything the costs of one layer and of the edges of one
 * micro-batch depend on. Zeroed before filling, so that memcmp compares it. */
struct pc_key {
	int hidden, heads, kv_heads, ffn, vocab;
	int seq, micro, tp, sp, gpn;
	int attn_kernel; /* index into m->attn */
	int norm;
};

/* Raw seconds (before the fitted scales) of one micro-batch on one tensor-parallel rank. */
struct layer_costs {
	/* one layer, forward and backward (recomputation is added when combined) */
	double f_gemm, f_attn, f_mem, f_norm, f_tp;
	double b_gemm, b_attn, b_mem, b_norm, b_tp;
	/* the first stage's embedding, forward + backward */
	double e_mem, e_tp;
	/* the last stage's final norm, head and loss, forward + backward */
	double h_gemm, h_mem, h_norm, h_tp;
};

struct lb_pc_slot {
	int used;
	struct pc_key key;
	struct layer_costs c;
};

void lb_predict_cache_init(struct lb_predict_cache *c)
{
	memset(c, 0, sizeof(*c));
}

void lb_predict_cache_release(struct lb_predict_cache *c)
{
	free(c->slots);
	memset(c, 0, sizeof(*c));
}

static uint64_t key_hash(const struct pc_key *k)
{
	const unsigned char *p = (const unsigned char *)k;
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; i < sizeof(*k); i++) {
		h ^= p[i];
		h *= 1099511628211ULL;
	}
	return h;
}

/* The costs of key k (memo first). */
static void layer_costs_compute(const struct lb_machine *m, const struct pc_key *k,
				struct layer_costs *c)
{
	const struct lb_attn_kernel *ak = &m->attn[k->attn_kernel];
	double t = k->tp, H = k->hidden, s = k->seq, b = k->micro, T = b * s;
	double Tl = k->sp ? T / t : T; /* tokens of the residual stream on a rank */
	double hd = (double)k->hidden / k->heads, heads = k->heads / t, kvh = k->kv_heads / t;
	double qkv = (heads + 2.0 * kvh) * hd, att = heads * hd, F = k->ffn / t, V = k->vocab / t;
	double th = Tl * H, S = T * H * 2.0; /* bf16 activations of the whole micro-batch */
	int fused = k->norm == LB_NORM_FUSED, n = k->tp;
	enum lb_memk nf = fused ? LB_MEMK_NORM_FUSED_FWD : LB_MEMK_NORM_UNFUSED_FWD;
	enum lb_memk nb = fused ? LB_MEMK_NORM_FUSED_BWD : LB_MEMK_NORM_UNFUSED_BWD;
	double nf_bytes = (fused ? 4.0 : 6.0) * th + 2.0 * H + 4.0 * Tl;
	double nb_bytes = 8.0 * th + 10.0 * H + 4.0 * Tl;
	double bw = m->nvlink_gbps, lat = m->nvlink_lat_s;
	double norm_f, norm_b, ar, rs, ag, tiny;
	/* the weight shapes (N, K) of y = x W^T: qkv, out, gate+up, down */
	const double wn[4] = {qkv, H, 2.0 * F, H}, wk[4] = {H, att, H, F};

	memset(c, 0, sizeof(*c));
	if (n > k->gpn && k->gpn > 0) { /* tp across nodes */
		bw = m->node_gbps / k->gpn;
		lat = m->node_lat_s;
	}
	for (int i = 0; i < 4; i++) {
		c->f_gemm += gemm_time(m, LB_GEMM_FWD, T, wn[i], wk[i]);
		c->b_gemm += gemm_time(m, LB_GEMM_DGRAD, T, wk[i], wn[i]) +
			     gemm_time(m, LB_GEMM_WGRAD, wn[i], wk[i], T);
	}
	c->f_attn = attn_time(ak, 0, b, s, heads, hd);
	c->b_attn = attn_time(ak, 1, b, s, heads, hd);
	norm_f = mem_time(m, nf, nf_bytes);
	norm_b = mem_time(m, nb, nb_bytes);
	/* forward: two norms, two residual adds, RoPE on q and k, SwiGLU */
	c->f_mem = 2.0 * mem_time(m, LB_MEMK_ADD, 6.0 * th) +
		   mem_time(m, LB_MEMK_ROPE_FWD, 4.0 * T * (heads + kvh) * hd + 4.0 * T * hd) +
		   mem_time(m, LB_MEMK_SWIGLU_FWD, 6.0 * T * F);
	c->b_mem = mem_time(m, LB_MEMK_ROPE_BWD, 4.0 * T * (heads + kvh) * hd + 4.0 * T * hd) +
		   mem_time(m, LB_MEMK_SWIGLU_BWD, 10.0 * T * F);
	if (fused) {
		c->f_mem += 2.0 * norm_f;
		c->b_mem += 2.0 * norm_b;
	} else {
		c->f_norm = 2.0 * norm_f;
		c->b_norm = 2.0 * norm_b;
	}
	/* tensor parallelism: the two row-parallel outputs reduced (all-reduce, or with
	 * sequence parallelism reduce-scatter) and, with sequence parallelism, the two norm
	 * outputs gathered; backward the same, plus the gathers of the saved norm outputs
	 * for the weight gradients (harness/model.c) */
	ar = t_allreduce(S, n, bw, lat);
	rs = t_half(S, n, bw, lat);
	ag = rs;
	tiny = t_allreduce(4.0 * T, n, bw, lat); /* fp32 per-token statistics */
	if (k->sp) {
		c->f_tp = 2.0 * rs + 2.0 * ag;
		c->b_tp = 2.0 * rs + 4.0 * ag;
	} else {
		c->f_tp = 2.0 * ar;
		c->b_tp = 2.0 * ar;
	}
	/* the first stage: embedding lookup (vocabulary-parallel: reduced over tp) */
	c->e_mem = mem_time(m, LB_MEMK_EMBED_FWD, 4.0 * T * H + 4.0 * T) +
		   mem_time(m, LB_MEMK_EMBED_BWD, 10.0 * T * H + 4.0 * T);
	c->e_tp = k->sp ? rs + ag : ar;
	/* the last stage: final norm, head GEMMs, the three cross-entropy passes */
	c->h_gemm = gemm_time(m, LB_GEMM_FWD, T, V, H) + gemm_time(m, LB_GEMM_DGRAD, T, H, V) +
		    gemm_time(m, LB_GEMM_WGRAD, V, H, T);
	c->h_mem = mem_time(m, LB_MEMK_XENT_MAX, 2.0 * T * V + 4.0 * T) +
		   mem_time(m, LB_MEMK_XENT_SUM, 2.0 * T * V + 16.0 * T) +
		   mem_time(m, LB_MEMK_XENT_GRAD, 4.0 * T * V + 20.0 * T);
	if (fused)
		c->h_mem += norm_f + norm_b;
	else
		c->h_norm = norm_f + norm_b;
	c->h_tp = 3.0 * tiny + (k->sp ? 2.0 * ag + rs : ar);
}

static const struct layer_costs *layer_costs_get(const struct lb_machine *m,
						 struct lb_predict_cache *cache,
						 const struct pc_key *k, struct layer_costs *tmp)
{
	size_t i;

	if (!cache) {
		layer_costs_compute(m, k, tmp);
		return tmp;
	}
	if (cache->m != m) {
		free(cache->slots);
		memset(cache, 0, sizeof(*cache));
		cache->m = m;
	}
	if (cache->n * 10 >= cache->cap * 7) {
		size_t ncap = cache->cap ? cache->cap * 2 : 256;
		struct lb_pc_slot *ns = calloc(ncap, sizeof(*ns));

		if (!ns) {
			layer_costs_compute(m, k, tmp);
			return tmp;
		}
		for (size_t j = 0; j < cache->cap; j++) {
			if (!cache->slots[j].used)
				continue;
			i = key_hash(&cache->slots[j].key) & (ncap - 1);
			while (ns[i].used)
				i = (i + 1) & (ncap - 1);
			ns[i] = cache->slots[j];
		}
		free(cache->slots);
		cache->slots = ns;
		cache->cap = ncap;
	}
	i = key_hash(k) & (cache->cap - 1);
	while (cache->slots[i].used) {
		if (!memcmp(&cache->slots[i].key, k, sizeof(*k))) {
			cache->hits++;
			return &cache->slots[i].c;
		}
		i = (i + 1) & (cache->cap - 1);
	}
	cache->slots[i].used = 1;
	cache->slots[i].key = *k;
	layer_costs_compute(m, k, &cache->slots[i].c);
	cache->n++;
	cache->misses++;
	return &cache->slots[i].c;
}

/* ------------------------------------------------------------------ the step */

/* Parameters of one transformer layer (as common/model.c counts them). */
static double layer_params(const struct lb_model *md)
{
	double h = md->hidden;
	double kv_dim = md->n_heads > 0 ? (double)(md->hidden / md->n_heads) * md->n_kv_heads : h;

	return 2.0 * h * h + 2.0 * h * kv_dim + 3.0 * h * md->ffn + 2.0 * h;
}

int lb_predict(const struct lb_machine *m, const struct lb_layout *l, const char *label,
	       struct lb_predict_cache *cache, struct lb_prediction *out, char *why, size_t len)
{
	const struct lb_model *md = &l->model;
	const struct lb_attn_kernel *ak;
	const struct layer_costs *c;
	struct layer_costs tmp;
	struct pc_key key;
	const double *fit = m->fit;
	double F, B, passes, cmax = 0, csum = 0, p_stage_max = 0, p2p = 0, scale_a;
	double cost_first_last[2];
	int t = l->tp, p = l->pp, d = l->dp, v = lb_layout_chunks(l), accum;
	/* where the ranks sit: the layout's GPUs per node (the machine's when unset) */
	int g = l->gpus_per_node > 0 ? l->gpus_per_node : m->gpus_per_node;
	int bott = 0;
	char reason[160];

	memset(out, 0, sizeof(*out));
	if (lb_layout_check(l, reason, sizeof(reason))) {
		snprintf(why, len, "invalid layout: %s", reason);
		return -1;
	}
	if (m->peak_tflops <= 0) {
		snprintf(why, len, "machine '%s' has no peak rate (peak_tflops)", m->name);
		return -1;
	}
	ak = lb_machine_attn(m, l->attention, label);
	if (!ak || (!ak->n_fwd || !ak->n_bwd)) {
		snprintf(why, len,
			 "machine '%s' has no rate for attention '%s' (measure it with "
			 "bench_kernels --csv and calibrate)",
			 m->name, ak ? ak->name : lb_attn_name(l->attention));
		return -1;
	}
	accum = lb_layout_accum_steps(l);
	memset(&key, 0, sizeof(key));
	key.hidden = md->hidden, key.heads = md->n_heads, key.kv_heads = md->n_kv_heads;
	key.ffn = md->ffn, key.vocab = md->vocab, key.seq = l->seq_len, key.micro = l->micro_batch;
	key.tp = t, key.sp = l->sequence_parallel, key.gpn = g, key.norm = l->norm;
	key.attn_kernel = (int)(ak - m->attn);
	c = layer_costs_get(m, cache, &key, &tmp);

	/* one layer, one micro-batch, scaled; recomputation adds forward work to the backward */
	scale_a = ak->scale;
	F = fit[LB_FIT_gemm_scale] * c->f_gemm + scale_a * c->f_attn +
	    fit[LB_FIT_mem_scale] * (c->f_mem + fit[LB_FIT_norm_unfused_scale] * c->f_norm) +
	    fit[LB_FIT_tp_scale] * c->f_tp;
	B = fit[LB_FIT_gemm_scale] * c->b_gemm + scale_a * c->b_attn +
	    fit[LB_FIT_mem_scale] * (c->b_mem + fit[LB_FIT_norm_unfused_scale] * c->b_norm) +
	    fit[LB_FIT_tp_scale] * c->b_tp;
	passes = 2.0;
	if (l->checkpointing == LB_CKPT_FULL) {
		B += F;
		passes = 3.0;
	} else if (l->checkpointing == LB_CKPT_SELECTIVE) {
		B += scale_a * c->f_attn;
	}
	cost_first_last[0] = fit[LB_FIT_mem_scale] * c->e_mem + fit[LB_FIT_tp_scale] * c->e_tp;
	cost_first_last[1] = fit[LB_FIT_gemm_scale] * c->h_gemm +
			     fit[LB_FIT_mem_scale] *
				 (c->h_mem + fit[LB_FIT_norm_unfused_scale] * c->h_norm) +
			     fit[LB_FIT_tp_scale] * c->h_tp;

	/* pipeline sends: each stage receives and sends one activation (forward) and one
	 * gradient (backward) per micro-batch and chunk; across nodes once the pipeline spans
	 * more than one (tp * dp * pp > GPUs per node), the node's link shared by the
	 * tp * dp GPUs of a stage that send at once */
	if (p > 1) {
		double sa = (double)l->micro_batch * l->seq_len * md->hidden * 2.0 /
			    (l->sequence_parallel ? t : 1);
		double one;

		if ((long)t * d * p > g) {
			int senders = t * d < g ? t * d : g;

			one = sa * senders / (m->node_gbps * 1e9) + m->node_lat_s;
		} else {
			one = sa / (m->nvlink_gbps * 1e9) + m->nvlink_lat_s;
		}
		p2p = fit[LB_FIT_p2p_scale] * 2.0 * v * one;
	}

	/* per stage: its layers, its edges, its sends and host time for one micro-batch */
	for (int s = 0; s < p; s++) {
		int nl = lb_stage_layer_count(l, s);
		double cs, params;

		if (nl < 0) {
			snprintf(why, len, "stage %d has no layers", s);
			return -1;
		}
		cs = nl * (F + B) + p2p + nl * passes * fit[LB_FIT_layer_s] +
		     v * fit[LB_FIT_microbatch_s];
		params = nl * layer_params(md) / t;
		if (s == 0) {
			cs += cost_first_last[0];
			params += (double)md->vocab * md->hidden / t;
		}
		if (s == p - 1) {
			cs += cost_first_last[1];
			params += md->hidden;
			if (!md->tied || p > 1)
				params += (double)md->vocab * md->hidden / t;
		}
		csum += cs;
		if (cs > cmax) {
			cmax = cs;
			bott = s;
		}
		if (params > p_stage_max)
			p_stage_max = params;
	}
	out->micro_batches = accum;
	out->bottleneck = bott;
	out->pipeline_s = (accum - 1.0 / v) * cmax + csum / v;
	out->bubble_s = (csum - cmax) / v;
	{
		int nl = lb_stage_layer_count(l, bott);
		double per_mb_layers = nl;

		out->gemm_s = accum * fit[LB_FIT_gemm_scale] *
			      (per_mb_layers * (c->b_gemm + c->f_gemm *
							     (l->checkpointing == LB_CKPT_FULL ? 2
											       : 1)) +
			       (bott == p - 1 ? c->h_gemm : 0));
		out->attn_s = accum * scale_a * per_mb_layers *
			      (c->b_attn + c->f_attn * (l->checkpointing == LB_CKPT_NONE ? 1 : 2));
		out->tp_s = accum * fit[LB_FIT_tp_scale] *
			    (per_mb_layers * (c->b_tp + c->f_tp * (passes - 1.0)) +
			     (bott == 0 ? c->e_tp : 0) + (bott == p - 1 ? c->h_tp : 0));
		out->p2p_s = accum * p2p;
		out->host_s = accum * (per_mb_layers * passes * fit[LB_FIT_layer_s] +
				       v * fit[LB_FIT_microbatch_s]);
		/* the rest of the bottleneck's time: memory-bound kernels */
		out->mem_s = accum * cmax - out->gemm_s - out->attn_s - out->tp_s - out->p2p_s -
			     out->host_s;
		if (out->mem_s < 0)
			out->mem_s = 0;
	}

	/* the data-parallel reduction of the largest stage's gradients (and ZeRO's gather of
	 * its parameters), ring over dp: within a node over NVLink; across nodes the node's
	 * link carries the reduction of every tensor-parallel rank it holds */
	if (d > 1) {
		double bpp = l->zero_stage >= 1 ? m->grad_bytes + m->param_bytes : 2.0 * m->grad_bytes;
		double frac = (double)(d - 1) / d, dp, on_node;

		if ((long)t * d <= g) {
			dp = frac * bpp * p_stage_max / (m->nvlink_gbps * 1e9) +
			     2.0 * (d - 1) * m->nvlink_lat_s;
		} else {
			on_node = p_stage_max * (t < g ? t : g);
			dp = frac * bpp * on_node / (m->node_gbps * 1e9) +
			     2.0 * (d - 1) * m->node_lat_s;
		}
		dp = fit[LB_FIT_dp_scale] * dp + fit[LB_FIT_dp_hop_s] * (d - 1);
		out->dp_s = dp * (p > 1 ? fit[LB_FIT_dp_exposed] : fit[LB_FIT_dp_exposed_nopp]);
	}
	/* the optimizer: on the rank's parameters, or its ZeRO shard */
	{
		double n_upd = p_stage_max / (l->zero_stage >= 1 ? d : 1);

		out->optimizer_s = fit[LB_FIT_mem_scale] *
				   mem_time(m, LB_MEMK_ADAMW, m->optimizer_bytes * n_upd);
	}
	out->step_host_s = fit[LB_FIT_step_s];
	out->step_s = out->pipeline_s + out->dp_s + out->optimizer_s + out->step_host_s;
	if (!(out->step_s > 0) || !isfinite(out->step_s)) {
		snprintf(why, len, "machine '%s' gives no finite time for this layout", m->name);
		return -1;
	}
	{
		double gpus = (double)lb_layout_world(l);

		out->mfu = lb_flops_per_step(l) / (out->step_s * gpus * m->peak_tflops * 1e12);
		out->hfu = lb_hw_flops_per_step(l) / (out->step_s * gpus * m->peak_tflops * 1e12);
	}
	return 0;
}

/* ------------------------------------------------------------------ fitting */

static double param_get(const struct lb_machine *m, int j)
{
	return j < LB_FIT_COUNT ? m->fit[j] : m->attn[j - LB_FIT_COUNT].scale;
}

static void param_set(struct lb_machine *m, int j, double v)
{
	if (j < LB_FIT_COUNT)
		m->fit[j] = v;
	else
		m->attn[j - LB_FIT_COUNT].scale = v;
}

static void param_bounds(int j, double *lo, double *hi)
{
	if (j < LB_FIT_COUNT) {
		*lo = lb_fit_terms[j].min;
		*hi = lb_fit_terms[j].max;
	} else {
		*lo = LB_ATTN_SCALE_MIN;
		*hi = LB_ATTN_SCALE_MAX;
	}
}

/* Relative residuals of every row on m (NaN for a row that cannot be predicted). */
static void residuals(const struct lb_machine *m, const struct lb_fit_row *rows, size_t n,
		      struct lb_predict_cache *cache, double *r)
{
	struct lb_prediction pr;
	char why[256];

	for (size_t i = 0; i < n; i++) {
		if (rows[i].step_s > 0 &&
		    !lb_predict(m, &rows[i].layout, rows[i].label, cache, &pr, why, sizeof(why)))
			r[i] = (pr.step_s - rows[i].step_s) / rows[i].step_s;
		else
			r[i] = NAN;
	}
}

void lb_fit_identifiable(const struct lb_machine *m, const struct lb_fit_row *rows, size_t n,
			 struct lb_fit_opts *o)
{
	struct lb_machine *w = malloc(sizeof(*w));
	struct lb_predict_cache cache;
	double *r0 = malloc((n ? n : 1) * sizeof(double)), *r1 = malloc((n ? n : 1) * sizeof(double));
	int np = LB_FIT_COUNT + m->n_attn;

	memset(o->free, 0, sizeof(o->free));
	if (!w || !r0 || !r1)
		goto out;
	*w = *m;
	lb_predict_cache_init(&cache);
	residuals(w, rows, n, &cache, r0);
	for (int j = 0; j < np; j++) {
		double lo, hi, v = param_get(w, j), step;

		if (j < LB_FIT_COUNT && !lb_fit_terms[j].fit_auto)
			continue;
		param_bounds(j, &lo, &hi);
		step = 0.01 * (hi - lo);
		param_set(w, j, v + step <= hi ? v + step : v - step);
		residuals(w, rows, n, &cache, r1);
		param_set(w, j, v);
		for (size_t i = 0; i < n; i++)
			if (!isnan(r0[i]) && !isnan(r1[i]) && fabs(r1[i] - r0[i]) > 1e-9) {
				o->free[j] = 1;
				break;
			}
	}
	lb_predict_cache_release(&cache);
out:
	free(w);
	free(r0);
	free(r1);
}

/* Solve A x = b (n x n, row-major, overwritten) by Gaussian elimination with partial
 * pivoting. Returns 0, or -1 when A is singular. */
static int solve(double *A, double *b, int n)
{
	for (int c = 0; c < n; c++) {
		int piv = c;

		for (int r = c + 1; r < n; r++)
			if (fabs(A[r * n + c]) > fabs(A[piv * n + c]))
				piv = r;
		if (fabs(A[piv * n + c]) < 1e-300)
			return -1;
		if (piv != c) {
			for (int k = 0; k < n; k++) {
				double t = A[c * n + k];

				A[c * n + k] = A[piv * n + k];
				A[piv * n + k] = t;
			}
			double t = b[c];

			b[c] = b[piv];
			b[piv] = t;
		}
		for (int r = 0; r < n; r++) {
			double f;

			if (r == c)
				continue;
			f = A[r * n + c] / A[c * n + c];
			if (f == 0.0)
				continue;
			for (int k = c; k < n; k++)
				A[r * n + k] -= f * A[c * n + k];
			b[r] -= f * b[c];
		}
	}
	for (int c = 0; c < n; c++)
		b[c] /= A[c * n + c];
	return 0;
}

static void huber_weights(const double *r, size_t n, double delta, double *w)
{
	for (size_t i = 0; i < n; i++) {
		if (isnan(r[i]))
			w[i] = 0.0;
		else if (delta > 0 && fabs(r[i]) > delta)
			w[i] = delta / fabs(r[i]);
		else
			w[i] = 1.0;
	}
}

static double wcost(const double *r, const double *w, size_t n)
{
	double c = 0;

	for (size_t i = 0; i < n; i++)
		if (w[i] > 0)
			c += w[i] * r[i] * r[i];
	return c;
}

int lb_predict_fit(struct lb_machine *m, const struct lb_fit_row *rows, size_t n,
		   const struct lb_fit_opts *o, double *resid, struct lb_fit_result *res, char *err,
		   size_t errlen)
{
	int idx[LB_FIT_MAX_PARAMS], np = 0, total = LB_FIT_COUNT + m->n_attn, rc = -1, it = 0;
	int max_iter = o->max_iter > 0 ? o->max_iter : 100;
	size_t nn = n ? n : 1;
	double *r = malloc(nn * sizeof(double)), *r2 = malloc(nn * sizeof(double));
	double *w = malloc(nn * sizeof(double)), *J = NULL, lambda = 1e-3, cost;
	struct lb_predict_cache cache;

	memset(res, 0, sizeof(*res));
	lb_predict_cache_init(&cache);
	for (int j = 0; j < total; j++)
		if (o->free[j])
			idx[np++] = j;
	J = malloc((size_t)(np ? np : 1) * nn * sizeof(double));
	if (!r || !r2 || !w || !J) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	residuals(m, rows, n, &cache, r);
	res->n_rows = (int)n;
	for (size_t i = 0; i < n; i++)
		res->n_used += !isnan(r[i]);
	if (!res->n_used) {
		snprintf(err, errlen, "none of the %zu runs can be predicted on machine '%s'", n,
			 m->name);
		goto out;
	}
	huber_weights(r, n, o->huber, w);
	cost = wcost(r, w, n);
	for (it = 0; np && it < max_iter; it++) {
		double A[LB_FIT_MAX_PARAMS * LB_FIT_MAX_PARAMS], g[LB_FIT_MAX_PARAMS];
		double x0[LB_FIT_MAX_PARAMS];
		int improved = 0;

		for (int a = 0; a < np; a++) {
			double lo, hi, v = param_get(m, idx[a]), h;

			x0[a] = v;
			param_bounds(idx[a], &lo, &hi);
			h = 1e-6 * (hi - lo) + 1e-12;
			if (v + h > hi)
				h = -h;
			param_set(m, idx[a], v + h);
			residuals(m, rows, n, &cache, r2);
			param_set(m, idx[a], v);
			for (size_t i = 0; i < n; i++)
				J[(size_t)a * nn + i] =
				    (isnan(r2[i]) || isnan(r[i])) ? 0.0 : (r2[i] - r[i]) / h;
		}
		for (int a = 0; a < np; a++) {
			g[a] = 0;
			for (int b = 0; b < np; b++) {
				double s = 0;

				for (size_t i = 0; i < n; i++)
					if (w[i] > 0)
						s += w[i] * J[(size_t)a * nn + i] * J[(size_t)b * nn + i];
				A[a * np + b] = s;
			}
			for (size_t i = 0; i < n; i++)
				if (w[i] > 0)
					g[a] -= w[i] * J[(size_t)a * nn + i] * r[i];
		}
		for (int tries = 0; tries < 16 && !improved; tries++) {
			double M[LB_FIT_MAX_PARAMS * LB_FIT_MAX_PARAMS], dx[LB_FIT_MAX_PARAMS];
			double c2;

			memcpy(M, A, sizeof(double) * (size_t)np * np);
			memcpy(dx, g, sizeof(double) * (size_t)np);
			for (int a = 0; a < np; a++)
				M[a * np + a] += lambda * (A[a * np + a] + 1e-12);
			if (solve(M, dx, np)) {
				lambda *= 10;
				continue;
			}
			for (int a = 0; a < np; a++) {
				double lo, hi, v = x0[a] + dx[a];

				param_bounds(idx[a], &lo, &hi);
				param_set(m, idx[a], v < lo ? lo : v > hi ? hi : v);
			}
			residuals(m, rows, n, &cache, r2);
			c2 = wcost(r2, w, n);
			if (c2 < cost) {
				double rel = (cost - c2) / (cost > 0 ? cost : 1);

				memcpy(r, r2, nn * sizeof(double));
				huber_weights(r, n, o->huber, w);
				cost = wcost(r, w, n);
				lambda = lambda / 5 > 1e-12 ? lambda / 5 : 1e-12;
				improved = 1;
				if (rel < 1e-12)
					tries = 16, it = max_iter; /* converged */
			} else {
				for (int a = 0; a < np; a++)
					param_set(m, idx[a], x0[a]);
				lambda *= 8;
			}
		}
		if (!improved)
			break;
	}
	for (int a = 0; a < np; a++) {
		if (idx[a] < LB_FIT_COUNT)
			m->fitted[idx[a]] = 1;
		else
			m->attn[idx[a] - LB_FIT_COUNT].fitted = 1;
	}
	m->calibrated = 1;
	res->n_params = np;
	res->iterations = it;
	{
		double ss = 0, sa = 0, mx = 0;

		for (size_t i = 0; i < n; i++) {
			if (isnan(r[i]))
				continue;
			ss += r[i] * r[i];
			sa += fabs(r[i]);
			if (fabs(r[i]) > mx)
				mx = fabs(r[i]);
		}
		res->rms = sqrt(ss / res->n_used);
		res->mean_abs = sa / res->n_used;
		res->max_abs = mx;
	}
	if (resid)
		memcpy(resid, r, n * sizeof(double));
	rc = 0;
out:
	lb_predict_cache_release(&cache);
	free(r);
	free(r2);
	free(w);
	free(J);
	return rc;
}

/* ------------------------------------------------------------------ scores */

struct ranked {
	double v;
	size_t i;
};

static int cmp_ranked(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;

	return x->v < y->v ? -1 : x->v > y->v ? 1 : (x->i > y->i) - (x->i < y->i);
}

/* Ranks of v (0-based; ties their mean rank) into out. Returns -1 out of memory. */
static int ranks(const double *v, size_t n, double *out)
{
	struct ranked *r = malloc((n ? n : 1) * sizeof(*r));

	if (!r)
		return -1;
	for (size_t i = 0; i < n; i++)
		r[i] = (struct ranked){v[i], i};
	qsort(r, n, sizeof(*r), cmp_ranked);
	for (size_t i = 0; i < n;) {
		size_t j = i;

		while (j + 1 < n && r[j + 1].v == r[i].v)
			j++;
		for (size_t k = i; k <= j; k++)
			out[r[k].i] = (i + j) / 2.0;
		i = j + 1;
	}
	free(r);
	return 0;
}

double lb_spearman(const double *x, const double *y, size_t n)
{
	double *rx = malloc((n ? n : 1) * sizeof(double)), *ry = malloc((n ? n : 1) * sizeof(double));
	double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0, out = NAN;

	if (n < 2 || !rx || !ry || ranks(x, n, rx) || ranks(y, n, ry))
		goto out;
	for (size_t i = 0; i < n; i++)
		mx += rx[i], my += ry[i];
	mx /= n, my /= n;
	for (size_t i = 0; i < n; i++) {
		sxy += (rx[i] - mx) * (ry[i] - my);
		sxx += (rx[i] - mx) * (rx[i] - mx);
		syy += (ry[i] - my) * (ry[i] - my);
	}
	if (sxx > 0 && syy > 0)
		out = sxy / sqrt(sxx * syy);
out:
	free(rx);
	free(ry);
	return out;
}

void lb_pred_score(const double *pred_s, const double *meas_s, const double *pred_mfu,
		   const double *meas_mfu, size_t n, struct lb_pred_score *out)
{
	memset(out, 0, sizeof(*out));
	out->n = n;
	out->spearman = NAN;
	if (!n)
		return;
	for (size_t i = 0; i < n; i++) {
		double e = fabs(pred_s[i] - meas_s[i]) / meas_s[i];

		out->mean_abs += e;
		if (e > out->max_abs)
			out->max_abs = e;
		if (pred_mfu[i] > pred_mfu[out->predicted_best])
			out->predicted_best = i;
		if (meas_mfu[i] > meas_mfu[out->measured_best])
			out->measured_best = i;
	}
	out->mean_abs /= n;
	out->spearman = lb_spearman(pred_s, meas_s, n);
	out->mfu_of_predicted_best = meas_mfu[out->predicted_best];
	out->mfu_best = meas_mfu[out->measured_best];
}

double lb_pipeline_bound(const struct lb_layout *lo, const struct lb_layout *hi)
{
	struct lb_layout same = *hi;
	double n, v, p;

	if (hi->micro_batch <= lo->micro_batch || lo->dp < 1 || lo->micro_batch < 1 ||
	    hi->tp != lo->tp || hi->pp != lo->pp || hi->dp != lo->dp) /* cheap first */
		return 0;
	same.micro_batch = lo->micro_batch;
	if (!lb_layout_equal(lo, &same))
		return 0;
	n = (double)lo->global_batch / lo->dp;
	v = lo->virtual_stages > 1 ? lo->virtual_stages : 1;
	p = lo->pp;
	return (n + (p - 1) * hi->micro_batch / v) / (n + (p - 1) * lo->micro_batch / v);
}
