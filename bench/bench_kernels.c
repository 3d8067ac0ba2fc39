/*
 * Benchmark of the CUDA backend's kernels at Llama-13B width (hidden 5120, 40 heads of dim
 * 128, SwiGLU inner size 13824, vocab 32000), for sequences of 2048 and 8192 tokens at
 * micro-batch 1: every GEMM of a layer's and of the head's forward and backward, the
 * RMSNorms (fused and unfused), RoPE, SwiGLU, the embedding, the three cross-entropy passes,
 * add, AdamW on 100M parameters and the attention variants, each timed on the backend's
 * stream with its events (3 warm-up calls, then 20 timed calls, the median) and printed next
 * to a ceiling measured in the same run: for a GEMM the fastest of all of cuBLASLt's
 * heuristic candidates for the same problem (C type and beta included), timed as the GEMM's
 * own row is (gemm_times: least of 3 rounds of back-to-back calls), for a memory-bound kernel the
 * device-to-device copy bandwidth of 2 GiB (lb_cuda_copy_bandwidth), for attention the best
 * candidate's rate on an 8192^3 bf16 GEMM (the dense tensor-core rate this device reaches).
 * A memory-bound row also gets a second ceiling, the size copy: a device-to-device copy of
 * half its bytes (so that the bytes read and written equal the row's), timed as the row
 * (time_job), which shows what a transfer of that size costs on its own: at the 10-30 us of
 * the smaller rows, launch and ramp-up keep even a copy well below the 2 GiB rate.
 * Work: GEMMs 2 m n k FLOPs; causal attention 4 B nh S^2 D / 2 FLOPs forward (Q K^T and
 * P V, half the pairs masked) and 2.5 times that backward (the count of Dao 2023), the same
 * useful FLOPs for every variant though naive and fused compute all S^2 scores;
 * memory-bound kernels the compulsory bytes (each operand read or written once), so the
 * unfused variants, which move more, show what their extra passes cost.
 * Before timing, each kernel is checked once (STYLE.md 10) against the fp64 CPU reference
 * on a small shape of the same width, each GEMM on sampled entries at its timed shape; a
 * wrong kernel prints "#wrong" in its row and the benchmark exits 1 after the table.
 * Prints RESULT lines (bench/run.sh), then the table, last. Flags: --csv FILE (the table as
 * CSV as well), --iters N (timed calls, default 20), --only SUBSTR (rows whose kernel name
 * contains SUBSTR). CSV columns: kernel, shape, time_us, work (FLOPs or bytes), unit,
 * achieved, ceiling, pct_of_ceiling (of the GEMM ceiling or of the 2 GiB copy), check (ok or
 * wrong), then size_copy_gbps and pct_of_size_copy (the size copy; empty for the GEMM and
 * attention rows, and when it was not measured): new columns go last, so that readers by
 * position keep working. Without the CUDA backend or a GPU it says why and exits 0.
 *
 * Why one file: it is one benchmark binary whose checks and timed rows run the same jobs
 * on the same buffers (struct job, struct bp): a kernel is checked and then timed through
 * one description of its call.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cmdline.h"
#include "harness/ops.h"
#ifdef LB_WITH_CUDA
#include "bench/cuda_bench.h"
#endif

/* Llama-13B width (Touvron et al. 2023, table 2) */
#define HID   5120
#define NHEAD 40
#define HDIM  128
#define FFN   13824
#define VOCAB 32000

#define WARMUP	  3
#define MAX_ITERS 1000
#define PAT_N	  (1u << 20) /* elements of the fill pattern */
#define U_BF16	  0.00390625
#define E_F32	  5.9604644775390625e-8
#define CHK_ABS	  (1.0 / 64) /* kernel checks: |gpu - ref| <= CHK_ABS max |ref| + CHK_REL |ref| */
#define CHK_REL	  (1.0 / 32)

static const struct lb_ops *G; /* the CUDA backend */
static const struct lb_ops *R; /* the fp64 CPU reference, for the checks */
static int iters;	       /* --iters */
static const char *only;
static void *ev[MAX_ITERS + 1];
static double *pat; /* PAT_N bf16 values in [-1, 1) */

/* --- host helpers --- */

static uint64_t rng_state = 2024;

static double urand(void) /* [-1, 1) */
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return ((rng_state >> 11) / 9007199254740992.0) * 2.0 - 1.0;
}

static int irand(int n) /* [0, n) */
{
	int r = (int)((urand() + 1.0) * 0.5 * n);

	return r < n ? r : n - 1;
}

/* Round to nearest even bf16 (see tests/unit/test_gpu_ops.c; normal range suffices here). */
static double bf16_round(double x)
{
	double q;

	if (x == 0 || !isfinite(x))
		return x;
	q = ldexp(1.0, ilogb(x) - 7);
	return nearbyint(x / q) * q;
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "error: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

static void *xmalloc(size_t bytes)
{
	void *p = malloc(bytes ? bytes : 1);

	if (!p)
		die("out of host memory (%zu bytes)", bytes);
	return p;
}

static void *dev_alloc(size_t n, enum lb_kind k)
{
	void *p = G->alloc(n, k);

	if (!p)
		die("device allocation of %zu elements of kind %d failed", n, (int)k);
	return p;
}

/* n elements of kind k (ACT, F32) := scale * pat[(i + off) % PAT_N]: the first PAT_N
 * written from the host, the rest by doubling device copies, so the value of any element
 * is known on the host (the GEMM checks) without a host copy of the buffer. scale: a power
 * of two, so act values stay exact. */
static void fill(void *p, size_t n, enum lb_kind k, double scale, size_t off)
{
	size_t first = n < PAT_N ? n : PAT_N, done;
	double *h;

	if (!n)
		return;
	h = xmalloc(first * sizeof(double));
	for (size_t i = 0; i < first; i++)
		h[i] = scale * pat[(i + off) % PAT_N];
	G->write(p, h, first, k);
	free(h);
	for (done = first; done < n;) {
		size_t c = done < n - done ? done : n - done;

		G->copy(lb_at(G, p, done, k), p, c, k);
		done += c;
	}
}

static double pat_at(size_t i, size_t off)
{
	return pat[(i + off) % PAT_N];
}

/* --- kernel checks against the fp64 reference on small shapes --- */

enum kid {
	K_GEMM,
	K_RMS_FWD,
	K_RMS_BWD,
	K_RMSU_FWD,
	K_RMSU_BWD,
	K_ROPE_FWD,
	K_ROPE_BWD,
	K_SWIGLU_FWD,
	K_SWIGLU_BWD,
	K_EMBED_FWD,
	K_EMBED_BWD,
	K_XENT_MAX,
	K_XENT_SUM,
	K_XENT_GRAD,
	K_ADD,
	K_ADAMW,
	K_ATTN_NAIVE_FWD,
	K_ATTN_FUSED_FWD,
	K_ATTN_PROBS_BWD,
	K_ATTN_FLASH_FWD,
	K_ATTN_FLASH_BWD,
	K_ATTN_CUDNN_FWD,
	K_ATTN_CUDNN_BWD,
	K_COPY, /* the size copy of a memory-bound row (not a kernel of the backend) */
	K_COUNT
};

static int wrong[K_COUNT];

/* A buffer on both backends with the same contents. */
struct bp {
	void *g, *r;
	size_t n;
	enum lb_kind k;
};

#define BP_MAX 64
static struct bp bps[BP_MAX];
static int nbps;

/* n values uniform in [-scale, scale), bf16-rounded (exact in every kind), on both. */
static struct bp *bp_rand(size_t n, enum lb_kind k, double scale)
{
	struct bp *b = &bps[nbps++];
	double *h = xmalloc(n * sizeof(double));

	if (nbps > BP_MAX)
		die("too many check buffers");
	b->g = dev_alloc(n, k);
	b->r = R->alloc(n, k);
	if (!b->r)
		die("host allocation of %zu elements failed", n);
	b->n = n;
	b->k = k;
	for (size_t i = 0; i < n; i++)
		h[i] = bf16_round(urand() * scale);
	G->write(b->g, h, n, k);
	R->write(b->r, h, n, k);
	free(h);
	return b;
}

static struct bp *bp_tok(const int32_t *tok, size_t n)
{
	struct bp *b = &bps[nbps++];

	if (nbps > BP_MAX)
		die("too many check buffers");
	b->g = dev_alloc(n, LB_K_I32);
	b->r = R->alloc(n, LB_K_I32);
	b->n = n;
	b->k = LB_K_I32;
	G->write_i32(b->g, tok, n);
	R->write_i32(b->r, tok, n);
	return b;
}

/* The GPU's copy := the reference's, so that the next kernel is checked on its own. */
static void r2g(const struct bp *b)
{
	double *h = xmalloc(b->n * sizeof(double));

	R->read(h, b->r, b->n, b->k);
	G->write(b->g, h, b->n, b->k);
	free(h);
}

static void bp_release(void)
{
	while (nbps > 0) {
		nbps--;
		G->free_(bps[nbps].g);
		R->free_(bps[nbps].r);
	}
}

/* 1 (and a note on stderr) when the GPU's contents are not close to the reference's. */
static int differs(const char *what, const struct bp *b)
{
	double *g = xmalloc(b->n * sizeof(double)), *r = xmalloc(b->n * sizeof(double));
	double big = 0;
	size_t bad = 0, first = 0;

	G->read(g, b->g, b->n, b->k);
	R->read(r, b->r, b->n, b->k);
	for (size_t i = 0; i < b->n; i++)
		big = fabs(r[i]) > big ? fabs(r[i]) : big;
	for (size_t i = 0; i < b->n; i++)
		if (!(fabs(g[i] - r[i]) <= CHK_ABS * big + CHK_REL * fabs(r[i])))
			first = bad++ ? first : i;
	if (bad)
		fprintf(stderr,
			"check: %s: %zu of %zu elements wrong (first: element %zu, gpu %.6g, "
			"reference %.6g)\n",
			what, bad, b->n, first, g[first], r[first]);
	free(g);
	free(r);
	return bad != 0;
}

static void check_norm(void)
{
	int t = 8, h = HID;
	size_t th = (size_t)t * h;
	struct bp *x = bp_rand(th, LB_K_ACT, 2), *w = bp_rand(h, LB_K_ACT, 1);
	struct bp *y = bp_rand(th, LB_K_ACT, 1), *rs = bp_rand(t, LB_K_F32, 1);
	struct bp *xh = bp_rand(th, LB_K_ACT, 1), *dy = bp_rand(th, LB_K_ACT, 1);
	struct bp *dx = bp_rand(th, LB_K_ACT, 1), *dw = bp_rand(h, LB_K_F32, 1);
	struct bp *dx2 = bp_rand(th, LB_K_ACT, 1), *dw2 = bp_rand(h, LB_K_F32, 1);
	struct bp *scr =
	    bp_rand(G->norm_scratch(t, h) > R->norm_scratch(t, h) ? G->norm_scratch(t, h)
								  : R->norm_scratch(t, h),
		    LB_K_F32, 1);

	G->rmsnorm_fwd(y->g, rs->g, x->g, w->g, t, h);
	R->rmsnorm_fwd(y->r, rs->r, x->r, w->r, t, h);
	wrong[K_RMS_FWD] |= differs("rmsnorm fused fwd y", y) | differs("rmsnorm fused rstd", rs);
	r2g(rs);
	G->rmsnorm_bwd(dx->g, dw->g, dy->g, x->g, w->g, rs->g, t, h);
	R->rmsnorm_bwd(dx->r, dw->r, dy->r, x->r, w->r, rs->r, t, h);
	wrong[K_RMS_BWD] |= differs("rmsnorm fused bwd dx", dx) | differs("rmsnorm fused dw", dw);
	G->rmsnorm_unfused_fwd(y->g, xh->g, rs->g, scr->g, x->g, w->g, t, h);
	R->rmsnorm_unfused_fwd(y->r, xh->r, rs->r, scr->r, x->r, w->r, t, h);
	wrong[K_RMSU_FWD] |= differs("rmsnorm unfused fwd y", y) |
			     differs("rmsnorm unfused xhat", xh) |
			     differs("rmsnorm unfused rstd", rs);
	r2g(xh);
	r2g(rs);
	G->rmsnorm_unfused_bwd(dx2->g, dw2->g, dy->g, xh->g, w->g, rs->g, scr->g, t, h);
	R->rmsnorm_unfused_bwd(dx2->r, dw2->r, dy->r, xh->r, w->r, rs->r, scr->r, t, h);
	wrong[K_RMSU_BWD] |=
	    differs("rmsnorm unfused bwd dx", dx2) | differs("rmsnorm unfused dw", dw2);
	bp_release();
}

static void check_rope(void)
{
	int s = 64, stride = 3 * NHEAD * HDIM, nheads = 2 * NHEAD;
	size_t n = (size_t)s * stride;
	double *cs = lb_rope_table_host(s, HDIM);
	struct bp *x = bp_rand(n, LB_K_ACT, 1), *pcs = bp_rand((size_t)s * HDIM, LB_K_F32, 1);

	if (!cs)
		die("out of host memory");
	for (size_t i = 0; i < (size_t)s * HDIM; i++)
		cs[i] = (double)(float)cs[i];
	G->write(pcs->g, cs, (size_t)s * HDIM, LB_K_F32);
	R->write(pcs->r, cs, (size_t)s * HDIM, LB_K_F32);
	free(cs);
	G->rope_fwd(x->g, pcs->g, s, s, stride, nheads, HDIM);
	R->rope_fwd(x->r, pcs->r, s, s, stride, nheads, HDIM);
	wrong[K_ROPE_FWD] |= differs("rope fwd", x);
	r2g(x);
	G->rope_bwd(x->g, pcs->g, s, s, stride, nheads, HDIM);
	R->rope_bwd(x->r, pcs->r, s, s, stride, nheads, HDIM);
	wrong[K_ROPE_BWD] |= differs("rope bwd", x);
	bp_release();
}

static void check_swiglu(void)
{
	int t = 4, f = FFN;
	size_t n = (size_t)t * f;
	struct bp *gu = bp_rand(2 * n, LB_K_ACT, 3), *out = bp_rand(n, LB_K_ACT, 1);
	struct bp *dy = bp_rand(n, LB_K_ACT, 1), *dgu = bp_rand(2 * n, LB_K_ACT, 1);

	G->swiglu_fwd(out->g, gu->g, t, f);
	R->swiglu_fwd(out->r, gu->r, t, f);
	wrong[K_SWIGLU_FWD] |= differs("swiglu fwd", out);
	G->swiglu_bwd(dgu->g, dy->g, gu->g, t, f);
	R->swiglu_bwd(dgu->r, dy->r, gu->r, t, f);
	wrong[K_SWIGLU_BWD] |= differs("swiglu bwd", dgu);
	bp_release();
}

static void check_embed(void)
{
	int t = 64, h = HID, v0 = 100, v = 512; /* a shard, tokens inside and outside it */
	int32_t tok[64];
	struct bp *tab, *out, *dout, *dt, *ptok;

	for (int i = 0; i < t; i++)
		tok[i] = irand(v0 + v + 100);
	tok[0] = v0, tok[1] = v0 + v - 1, tok[2] = v0 - 1, tok[3] = v0 + v; /* the edges */
	tab = bp_rand((size_t)v * h, LB_K_ACT, 1);
	out = bp_rand((size_t)t * h, LB_K_ACT, 1);
	dout = bp_rand((size_t)t * h, LB_K_ACT, 1);
	dt = bp_rand((size_t)v * h, LB_K_F32, 1);
	ptok = bp_tok(tok, (size_t)t);
	G->embed_fwd(out->g, tab->g, ptok->g, t, h, v0, v);
	R->embed_fwd(out->r, tab->r, ptok->r, t, h, v0, v);
	wrong[K_EMBED_FWD] |= differs("embed fwd", out);
	G->embed_bwd(dt->g, dout->g, ptok->g, t, h, v0, v);
	R->embed_bwd(dt->r, dout->r, ptok->r, t, h, v0, v);
	wrong[K_EMBED_BWD] |= differs("embed bwd", dt);
	bp_release();
}

static void check_xent(void)
{
	int t = 4, v = VOCAB;
	int32_t tg[4];
	struct bp *lg = bp_rand((size_t)t * v, LB_K_ACT, 4), *mx = bp_rand(t, LB_K_F32, 1);
	struct bp *se = bp_rand(t, LB_K_F32, 1), *tl = bp_rand(t, LB_K_F32, 1);
	struct bp *ls = bp_rand(t, LB_K_F32, 1), *ptg;

	for (int i = 0; i < t; i++)
		tg[i] = irand(v);
	tg[0] = 0, tg[1] = v - 1; /* the edges */
	ptg = bp_tok(tg, (size_t)t);
	G->xent_max(mx->g, lg->g, t, v);
	R->xent_max(mx->r, lg->r, t, v);
	wrong[K_XENT_MAX] |= differs("xent max", mx);
	r2g(mx);
	G->xent_sum(se->g, tl->g, lg->g, mx->g, ptg->g, t, v, 0);
	R->xent_sum(se->r, tl->r, lg->r, mx->r, ptg->r, t, v, 0);
	wrong[K_XENT_SUM] |= differs("xent sumexp", se) | differs("xent target logit", tl);
	r2g(se);
	r2g(tl);
	G->xent_grad(lg->g, ls->g, mx->g, se->g, tl->g, ptg->g, t, v, 0, 0.25);
	R->xent_grad(lg->r, ls->r, mx->r, se->r, tl->r, ptg->r, t, v, 0, 0.25);
	wrong[K_XENT_GRAD] |= differs("xent losses", ls) | differs("xent dlogits", lg);
	bp_release();
}

static void check_add_adamw(void)
{
	size_t n = 100003;
	struct bp *a = bp_rand(n, LB_K_ACT, 4), *b = bp_rand(n, LB_K_ACT, 4);
	struct bp *o = bp_rand(n, LB_K_ACT, 1), *p = bp_rand(n, LB_K_ACT, 1);
	struct bp *ms = bp_rand(n, LB_K_F32, 1), *g = bp_rand(n, LB_K_F32, 0.01);
	struct bp *m = bp_rand(n, LB_K_F32, 0.001), *v = bp_rand(n, LB_K_F32, 0);

	G->add(o->g, a->g, b->g, n);
	R->add(o->r, a->r, b->r, n);
	wrong[K_ADD] |= differs("add", o);
	G->adamw(p->g, ms->g, g->g, m->g, v->g, n, 1e-2, 0.9, 0.95, 1e-8, 0.1, 1, 1.0);
	R->adamw(p->r, ms->r, g->r, m->r, v->r, n, 1e-2, 0.9, 0.95, 1e-8, 0.1, 1, 1.0);
	wrong[K_ADAMW] |= differs("adamw param", p) | differs("adamw master", ms) |
			  differs("adamw m", m) | differs("adamw v", v);
	bp_release();
}

/* The variants at Llama-13B's head dim, a few heads and a sequence of several tiles: the
 * forward, then the backward on the reference's saved tensors (each kernel on its own). */
static void check_attn(void)
{
	int b = 1, s = 256, nh = 2, nkv = 2, d = HDIM;
	size_t t = (size_t)b * s, nq = t * (nh + 2 * nkv) * d, no = t * nh * d;
	size_t sc = G->attn_scratch(b, s, nh, d) > R->attn_scratch(b, s, nh, d)
			? G->attn_scratch(b, s, nh, d)
			: R->attn_scratch(b, s, nh, d);
	struct bp *qkv = bp_rand(nq, LB_K_ACT, 1.5), *dout = bp_rand(no, LB_K_ACT, 1);
	struct bp *scr = bp_rand(sc, LB_K_F32, 1), *out = bp_rand(no, LB_K_ACT, 1);
	struct bp *dq = bp_rand(nq, LB_K_ACT, 1);
	struct bp *pr = bp_rand((size_t)b * nh * s * s, LB_K_ACT, 1);
	struct bp *lse = bp_rand((size_t)b * nh * s, LB_K_F32, 1);

	/* cudnn is checked against the reference's flash (the same math) */
	for (int v = 0; v < 4; v++) {
		enum kid fk = v == 0   ? K_ATTN_NAIVE_FWD
			      : v == 1 ? K_ATTN_FUSED_FWD
			      : v == 2 ? K_ATTN_FLASH_FWD
				       : K_ATTN_CUDNN_FWD;
		enum kid bk = v < 2    ? K_ATTN_PROBS_BWD
			      : v == 2 ? K_ATTN_FLASH_BWD
				       : K_ATTN_CUDNN_BWD;

		if (v == 0) {
			G->attn_naive_fwd(out->g, pr->g, scr->g, qkv->g, b, s, nh, nkv, d);
			R->attn_naive_fwd(out->r, pr->r, scr->r, qkv->r, b, s, nh, nkv, d);
		} else if (v == 1) {
			G->attn_fused_fwd(out->g, pr->g, qkv->g, b, s, nh, nkv, d);
			R->attn_fused_fwd(out->r, pr->r, qkv->r, b, s, nh, nkv, d);
		} else {
			if (v == 2)
				G->attn_flash_fwd(out->g, lse->g, scr->g, qkv->g, b, s, nh, nkv, d);
			else
				G->attn_cudnn_fwd(out->g, lse->g, scr->g, qkv->g, b, s, nh, nkv, d);
			R->attn_flash_fwd(out->r, lse->r, scr->r, qkv->r, b, s, nh, nkv, d);
		}
		wrong[fk] |=
		    differs("attention fwd out", out) |
		    (v < 2 ? differs("attention fwd probs", pr) : differs("attention lse", lse));
		r2g(out);
		r2g(v < 2 ? pr : lse);
		if (v < 2) {
			G->attn_probs_bwd(dq->g, scr->g, dout->g, pr->g, qkv->g, b, s, nh, nkv, d);
			R->attn_probs_bwd(dq->r, scr->r, dout->r, pr->r, qkv->r, b, s, nh, nkv, d);
		} else {
			if (v == 2)
				G->attn_flash_bwd(dq->g, scr->g, dout->g, out->g, lse->g, qkv->g, b,
						  s, nh, nkv, d);
			else
				G->attn_cudnn_bwd(dq->g, scr->g, dout->g, out->g, lse->g, qkv->g, b,
						  s, nh, nkv, d);
			R->attn_flash_bwd(dq->r, scr->r, dout->r, out->r, lse->r, qkv->r, b, s, nh,
					  nkv, d);
		}
		wrong[bk] |= differs("attention bwd dqkv", dq);
	}
	bp_release();
}

/* --- timing --- */

/* One kernel call, its operands and shape. */
struct job {
	enum kid k;
	void *p[7];			   /* the op's pointer arguments, in order */
	int m, n, kk, ta, tb, cf32, accum; /* GEMM */
	int t, h, f, v, s, b, nh, nkv, d, stride, nheads;
	size_t n_el;
};

static void run(const struct job *j)
{
	void *const *p = j->p;

	switch (j->k) {
	case K_GEMM:
		G->matmul(p[0], p[1], p[2], j->m, j->n, j->kk, j->ta, j->tb, 1.0, j->accum,
			  j->cf32);
		break;
	case K_RMS_FWD:
		G->rmsnorm_fwd(p[0], p[1], p[2], p[3], j->t, j->h);
		break;
	case K_RMS_BWD: /* dx, dw, dy, x, w, rstd */
		G->rmsnorm_bwd(p[0], p[1], p[2], p[3], p[4], p[5], j->t, j->h);
		break;
	case K_RMSU_FWD: /* y, xhat, rstd, scratch, x, w */
		G->rmsnorm_unfused_fwd(p[0], p[1], p[2], p[3], p[4], p[5], j->t, j->h);
		break;
	case K_RMSU_BWD: /* dx, dw, dy, xhat, w, rstd, scratch */
		G->rmsnorm_unfused_bwd(p[0], p[1], p[2], p[3], p[4], p[5], p[6], j->t, j->h);
		break;
	case K_ROPE_FWD:
		G->rope_fwd(p[0], p[1], j->t, j->s, j->stride, j->nheads, j->d);
		break;
	case K_ROPE_BWD:
		G->rope_bwd(p[0], p[1], j->t, j->s, j->stride, j->nheads, j->d);
		break;
	case K_SWIGLU_FWD:
		G->swiglu_fwd(p[0], p[1], j->t, j->f);
		break;
	case K_SWIGLU_BWD:
		G->swiglu_bwd(p[0], p[1], p[2], j->t, j->f);
		break;
	case K_EMBED_FWD:
		G->embed_fwd(p[0], p[1], p[2], j->t, j->h, 0, j->v);
		break;
	case K_EMBED_BWD:
		G->embed_bwd(p[0], p[1], p[2], j->t, j->h, 0, j->v);
		break;
	case K_XENT_MAX:
		G->xent_max(p[0], p[1], j->t, j->v);
		break;
	case K_XENT_SUM: /* sumexp, tgt, logits, rowmax, targets */
		G->xent_sum(p[0], p[1], p[2], p[3], p[4], j->t, j->v, 0);
		break;
	case K_XENT_GRAD: /* logits, losses, rowmax, sumexp, tgt, targets */
		G->xent_grad(p[0], p[1], p[2], p[3], p[4], p[5], j->t, j->v, 0, 1.0 / j->t);
		break;
	case K_ADD:
		G->add(p[0], p[1], p[2], j->n_el);
		break;
	case K_ADAMW: /* param, master, grad, m, v */
		G->adamw(p[0], p[1], p[2], p[3], p[4], j->n_el, 1e-4, 0.9, 0.95, 1e-8, 0.1, 10,
			 1.0);
		break;
	case K_ATTN_NAIVE_FWD: /* out, probs, scratch, qkv */
		G->attn_naive_fwd(p[0], p[1], p[2], p[3], j->b, j->s, j->nh, j->nkv, j->d);
		break;
	case K_ATTN_FUSED_FWD: /* out, probs, qkv */
		G->attn_fused_fwd(p[0], p[1], p[3], j->b, j->s, j->nh, j->nkv, j->d);
		break;
	case K_ATTN_PROBS_BWD: /* dqkv, scratch, dout, probs, qkv */
		G->attn_probs_bwd(p[0], p[1], p[2], p[3], p[4], j->b, j->s, j->nh, j->nkv, j->d);
		break;
	case K_ATTN_FLASH_FWD: /* out, lse, scratch, qkv */
		G->attn_flash_fwd(p[0], p[1], p[2], p[3], j->b, j->s, j->nh, j->nkv, j->d);
		break;
	case K_ATTN_FLASH_BWD: /* dqkv, scratch, dout, out, lse, qkv */
		G->attn_flash_bwd(p[0], p[1], p[2], p[3], p[4], p[5], j->b, j->s, j->nh, j->nkv,
				  j->d);
		break;
	case K_ATTN_CUDNN_FWD: /* as flash */
		G->attn_cudnn_fwd(p[0], p[1], p[2], p[3], j->b, j->s, j->nh, j->nkv, j->d);
		break;
	case K_ATTN_CUDNN_BWD:
		G->attn_cudnn_bwd(p[0], p[1], p[2], p[3], p[4], p[5], j->b, j->s, j->nh, j->nkv,
				  j->d);
		break;
	case K_COPY: /* dst, src: n_el act elements */
		G->copy(p[0], p[1], j->n_el, LB_K_ACT);
		break;
	default:
		break;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median seconds per call: WARMUP calls, then iters calls each between two events, all
 * enqueued before the first is read, so the stream never idles between them. */
static double time_job(const struct job *j)
{
	double t[MAX_ITERS];

	for (int i = 0; i < WARMUP; i++)
		run(j);
	G->event_record(ev[0]);
	for (int i = 0; i < iters; i++) {
		run(j);
		G->event_record(ev[i + 1]);
	}
	for (int i = 0; i < iters; i++)
		t[i] = G->event_elapsed(ev[i], ev[i + 1]);
	qsort(t, (size_t)iters, sizeof(double), cmp_double);
	return iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
}

/* --- ceilings --- */

/*
 * A GEMM's tuned algorithm (the one lbc_gemm picks and the trainer runs) and the ceiling,
 * the fastest of all the heuristic's candidates, for the same problem (C type and beta
 * included) and timed the same way (lb_cuda_gemm_seconds: the mean of iters back-to-back
 * calls): three rounds, each timing ours and then every candidate, and the least time of
 * each over the rounds, so that clock drift and noise favour neither side. *ours and *best
 * are seconds per call, -1 when not timed. A candidate that computes a wrong product is
 * left out of the ceiling (noted); a wrong product of ours gives *ours = -2.
 */
static void gemm_times(int m, int n, int k, int ta, int tb, int cf32, double *ours, double *best)
{
	*ours = *best = -1;
#ifdef LB_WITH_CUDA
	int na = lb_cuda_gemm_n_algos(m, n, k, ta, tb, cf32, cf32);

	for (int round = 0; round < 3; round++) {
		double s = lb_cuda_gemm_seconds(m, n, k, ta, tb, cf32, cf32, -1, iters);

		if (s == -2)
			*ours = -2;
		else if (s > 0 && *ours != -2 && (*ours < 0 || s < *ours))
			*ours = s;
		for (int a = 0; a < na; a++) {
			s = lb_cuda_gemm_seconds(m, n, k, ta, tb, cf32, cf32, a, iters);
			if (s == -2 && round == 0)
				fprintf(stderr,
					"note: cuBLASLt candidate %d of %dx%dx%d computed a wrong "
					"product; left out of the ceiling\n",
					a, m, n, k);
			if (s > 0 && (*best < 0 || s < *best))
				*best = s;
		}
	}
#else
	(void)m, (void)n, (void)k, (void)ta, (void)tb, (void)cf32;
#endif
}

static double copy_bandwidth(void)
{
#ifdef LB_WITH_CUDA
	return lb_cuda_copy_bandwidth((size_t)2 << 30, iters);
#else
	return -1;
#endif
}

/* --- the table --- */

struct row {
	char name[32];
	char shape[48];
	double us;	  /* median per call */
	double work;	  /* FLOPs or bytes per call */
	int flops;	  /* 1: work is FLOPs (TFLOP/s), 0: bytes (GB/s) */
	double ceil;	  /* FLOP/s or bytes/s; <= 0: unknown */
	double size_copy; /* bytes/s of the size copy (memory-bound rows); <= 0: not measured */
	int wrong;
};

#define ROWS_MAX 128
static struct row rows[ROWS_MAX];
static int nrows;
static double attn_ceiling = -1, mem_ceiling = -1;

static int wanted(const char *name)
{
	return !only || strstr(name, only);
}

/*
 * Bytes per second of a device-to-device copy of bytes / 2 (read + written: bytes), timed as
 * a row is (time_job); -1 when the two buffers cannot be allocated (the row itself is still
 * measured) or bytes is below one element.
 */
static double size_copy_rate(double bytes)
{
	size_t n = (size_t)(bytes / 4); /* act elements of 2 bytes: bytes / 2 copied */
	struct job j = {.k = K_COPY, .n_el = n};
	double t;

	if (!n)
		return -1;
	j.p[0] = G->alloc(n, LB_K_ACT);
	j.p[1] = G->alloc(n, LB_K_ACT);
	if (!j.p[0] || !j.p[1]) {
		if (j.p[0])
			G->free_(j.p[0]);
		if (j.p[1])
			G->free_(j.p[1]);
		return -1;
	}
	t = time_job(&j);
	G->free_(j.p[0]), G->free_(j.p[1]);
	return t > 0 ? 4.0 * n / t : -1;
}

static void add_row(const char *name, const char *shape, const struct job *j, double work,
		    int flops, double ceil, int is_wrong)
{
	struct row *r;

	if (nrows >= ROWS_MAX)
		die("too many rows");
	r = &rows[nrows++];
	snprintf(r->name, sizeof(r->name), "%s", name);
	snprintf(r->shape, sizeof(r->shape), "%s", shape);
	r->work = work;
	r->flops = flops;
	r->ceil = ceil;
	r->wrong = is_wrong;
	fprintf(stderr, "bench: %-22s %s\n", name, shape);
	r->us = time_job(j) * 1e6;
	r->size_copy = flops ? -1 : size_copy_rate(work);
}

/* A memory-bound row of job j (its kernel's check beside it), bytes moved per call, when
 * --only wants it. */
static void mem_row(const char *name, const char *shape, const struct job *j, double bytes)
{
	if (wanted(name))
		add_row(name, shape, j, bytes, 0, mem_ceiling, wrong[j->k]);
}

/* An attention row of job j, FLOPs per call, when --only wants it. */
static void attn_row(const char *name, const char *shape, const struct job *j, double flops)
{
	if (wanted(name))
		add_row(name, shape, j, flops, 1, attn_ceiling, wrong[j->k]);
}

/* One GEMM row: C (m, n) = op(A) op(B), A scaled 1, B scaled 1/64 (the pattern's
 * values), C act or f32 (the weight gradients, accumulated as the model does). Checked on
 * 34 sampled entries (the corners and 32 random ones) against a host dot product of the
 * known pattern values, within the bound of tests/unit/test_gpu_ops.c's matmul check. */
static void gemm_row(const char *name, int m, int n, int k, int ta, int tb, int cf32, int T)
{
	enum lb_kind ck = cf32 ? LB_K_F32 : LB_K_ACT;
	size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
	double sb = 1.0 / 64, best, ours;
	struct job j = {
	    .k = K_GEMM, .m = m, .n = n, .kk = k, .ta = ta, .tb = tb, .cf32 = cf32, .accum = cf32};
	char shape[48];
	int bad = 0;

	if (!wanted(name))
		return;
	j.p[0] = dev_alloc(nc, ck);
	j.p[1] = dev_alloc(na, LB_K_ACT);
	j.p[2] = dev_alloc(nb, LB_K_ACT);
	fill(j.p[1], na, LB_K_ACT, 1.0, 0);
	fill(j.p[2], nb, LB_K_ACT, sb, 4099);
	run(&j); /* C was zero-filled: C = A B either way */
	for (int s = 0; s < 34; s++) {
		int i = s == 0 ? 0 : s == 1 ? m - 1 : irand(m);
		int jj = s == 0 ? 0 : s == 1 ? n - 1 : irand(n);
		double ref = 0, mag = 0, got;

		for (int p = 0; p < k; p++) {
			double a = pat_at(ta ? (size_t)p * m + i : (size_t)i * k + p, 0);
			double b = sb * pat_at(tb ? (size_t)jj * k + p : (size_t)p * n + jj, 4099);

			ref += a * b;
			mag += fabs(a * b);
		}
		G->read(&got, lb_at(G, j.p[0], (size_t)i * n + jj, ck), 1, ck);
		if (!(fabs(got - ref) <=
		      2 * ((k + 2) * E_F32 * mag + (cf32 ? E_F32 : U_BF16) * fabs(ref)))) {
			if (!bad)
				fprintf(stderr, "check: %s: C[%d, %d] = %.6g, want %.6g\n", name, i,
					jj, got, ref);
			bad++;
		}
	}
	gemm_times(m, n, k, ta, tb, cf32, &ours, &best);
	snprintf(shape, sizeof(shape), "T%d m%d n%d k%d %c%c%s", T, m, n, k, ta ? 'T' : 'N',
		 tb ? 'T' : 'N', cf32 ? " f32+=" : "");
	add_row(name, shape, &j, 2.0 * m * n * k, 1, best > 0 ? 2.0 * m * n * k / best : -1,
		bad != 0 || ours == -2);
	if (ours > 0) /* the time measured as the ceiling's was (gemm_times) */
		rows[nrows - 1].us = ours * 1e6;
	for (int i = 0; i < 3; i++)
		G->free_(j.p[i]);
}

static void gemm_rows(int T)
{
	int H = HID, F = FFN, V = VOCAB;
	char nm[32];
	static const char *const layer[5] = {"qkv", "out", "gateup", "down", "head"};
	/* (N, K) of each weight: y (T, N) = x (T, K) W^T */
	int wn[5] = {3 * H, H, 2 * F, H, V}, wk[5] = {H, H, H, F, H};

	for (int l = 0; l < 5; l++) {
		snprintf(nm, sizeof(nm), "gemm.%s.fwd", layer[l]);
		gemm_row(nm, T, wn[l], wk[l], 0, 1, 0, T);
		snprintf(nm, sizeof(nm), "gemm.%s.dgrad", layer[l]); /* dx = dy W */
		gemm_row(nm, T, wk[l], wn[l], 0, 0, 0, T);
		snprintf(nm, sizeof(nm), "gemm.%s.wgrad", layer[l]); /* dW += dy^T x */
		gemm_row(nm, wn[l], wk[l], T, 1, 0, 1, T);
	}
}

/* Memory-bound rows at T tokens (B 1, S T). */
static void mem_rows(int T)
{
	int H = HID, F = FFN, V = VOCAB, nqk = 2 * NHEAD, stride = 3 * NHEAD * HDIM;
	size_t th = (size_t)T * H, tf = (size_t)T * F, tv = (size_t)T * V;
	char shp[48];
	struct job j;
	void *x, *w, *y, *rs, *xh, *dy, *dx, *dw, *scr;

	snprintf(shp, sizeof(shp), "T%d H%d", T, H);
	x = dev_alloc(th, LB_K_ACT), w = dev_alloc(H, LB_K_ACT), y = dev_alloc(th, LB_K_ACT);
	rs = dev_alloc(T, LB_K_F32), xh = dev_alloc(th, LB_K_ACT), dy = dev_alloc(th, LB_K_ACT);
	dx = dev_alloc(th, LB_K_ACT), dw = dev_alloc(H, LB_K_F32);
	scr = dev_alloc(G->norm_scratch(T, H), LB_K_F32);
	fill(x, th, LB_K_ACT, 2, 0), fill(w, H, LB_K_ACT, 1, 7), fill(dy, th, LB_K_ACT, 1, 99);
	G->rmsnorm_fwd(y, rs, x, w, T, H);
	G->rmsnorm_unfused_fwd(y, xh, rs, scr, x, w, T, H);
	j = (struct job){.k = K_RMS_FWD, .p = {y, rs, x, w}, .t = T, .h = H};
	mem_row("rmsnorm.fused.fwd", shp, &j, 4.0 * th + 2 * H + 4 * T);
	j = (struct job){.k = K_RMS_BWD, .p = {dx, dw, dy, x, w, rs}, .t = T, .h = H};
	mem_row("rmsnorm.fused.bwd", shp, &j, 8.0 * th + 10 * H + 4 * T);
	j = (struct job){.k = K_RMSU_FWD, .p = {y, xh, rs, scr, x, w}, .t = T, .h = H};
	mem_row("rmsnorm.unfused.fwd", shp, &j, 6.0 * th + 2 * H + 4 * T);
	j = (struct job){.k = K_RMSU_BWD, .p = {dx, dw, dy, xh, w, rs, scr}, .t = T, .h = H};
	mem_row("rmsnorm.unfused.bwd", shp, &j, 8.0 * th + 10 * H + 4 * T);
	G->free_(x), G->free_(w), G->free_(y), G->free_(rs), G->free_(xh), G->free_(dy);
	G->free_(dx), G->free_(dw), G->free_(scr);

	/* RoPE on the q and k heads of the QKV buffer */
	if (wanted("rope.fwd") || wanted("rope.bwd")) {
		size_t nq = (size_t)T * stride;
		double *cs = lb_rope_table_host(T, HDIM);
		void *q = dev_alloc(nq, LB_K_ACT), *pcs = dev_alloc((size_t)T * HDIM, LB_K_F32);
		double bytes = 4.0 * T * nqk * HDIM + 4.0 * T * HDIM;

		if (!cs)
			die("out of host memory");
		G->write(pcs, cs, (size_t)T * HDIM, LB_K_F32);
		free(cs);
		fill(q, nq, LB_K_ACT, 1, 0);
		snprintf(shp, sizeof(shp), "T%d %d heads D%d", T, nqk, HDIM);
		j = (struct job){.k = K_ROPE_FWD,
				 .p = {q, pcs},
				 .t = T,
				 .s = T,
				 .stride = stride,
				 .nheads = nqk,
				 .d = HDIM};
		mem_row("rope.fwd", shp, &j, bytes);
		j.k = K_ROPE_BWD;
		mem_row("rope.bwd", shp, &j, bytes);
		G->free_(q), G->free_(pcs);
	}

	if (wanted("swiglu.fwd") || wanted("swiglu.bwd")) {
		void *gu = dev_alloc(2 * tf, LB_K_ACT), *out = dev_alloc(tf, LB_K_ACT);
		void *dgu = dev_alloc(2 * tf, LB_K_ACT);

		fill(gu, 2 * tf, LB_K_ACT, 2, 0);
		fill(out, tf, LB_K_ACT, 1, 5);
		snprintf(shp, sizeof(shp), "T%d F%d", T, F);
		j = (struct job){.k = K_SWIGLU_FWD, .p = {out, gu}, .t = T, .f = F};
		mem_row("swiglu.fwd", shp, &j, 6.0 * tf);
		j = (struct job){.k = K_SWIGLU_BWD, .p = {dgu, out, gu}, .t = T, .f = F};
		mem_row("swiglu.bwd", shp, &j, 10.0 * tf);
		G->free_(gu), G->free_(out), G->free_(dgu);
	}

	if (wanted("embed.fwd") || wanted("embed.bwd")) {
		int32_t *tok = xmalloc((size_t)T * sizeof(int32_t));
		void *tab = dev_alloc((size_t)V * H, LB_K_ACT), *out = dev_alloc(th, LB_K_ACT);
		void *dt = dev_alloc((size_t)V * H, LB_K_F32), *ptok = dev_alloc(T, LB_K_I32);

		for (int i = 0; i < T; i++)
			tok[i] = irand(V);
		G->write_i32(ptok, tok, (size_t)T);
		fill(tab, (size_t)V * H, LB_K_ACT, 1, 0);
		fill(out, th, LB_K_ACT, 1, 3);
		snprintf(shp, sizeof(shp), "T%d H%d V%d", T, H, V);
		j = (struct job){.k = K_EMBED_FWD, .p = {out, tab, ptok}, .t = T, .h = H, .v = V};
		mem_row("embed.fwd", shp, &j, 4.0 * th + 4 * T);
		j = (struct job){.k = K_EMBED_BWD, .p = {dt, out, ptok}, .t = T, .h = H, .v = V};
		mem_row("embed.bwd", shp, &j, 10.0 * th + 4 * T);
		G->sync();
		free(tok);
		G->free_(tab), G->free_(out), G->free_(dt), G->free_(ptok);
	}

	if (wanted("xent.max") || wanted("xent.sum") || wanted("xent.grad")) {
		int32_t *tg = xmalloc((size_t)T * sizeof(int32_t));
		void *lg = dev_alloc(tv, LB_K_ACT), *ptg = dev_alloc(T, LB_K_I32);
		void *mx = dev_alloc(T, LB_K_F32), *se = dev_alloc(T, LB_K_F32);
		void *tl = dev_alloc(T, LB_K_F32), *ls = dev_alloc(T, LB_K_F32);

		for (int i = 0; i < T; i++)
			tg[i] = irand(V);
		G->write_i32(ptg, tg, (size_t)T);
		fill(lg, tv, LB_K_ACT, 4, 0);
		G->xent_max(mx, lg, T, V);
		G->xent_sum(se, tl, lg, mx, ptg, T, V, 0);
		snprintf(shp, sizeof(shp), "T%d V%d", T, V);
		j = (struct job){.k = K_XENT_MAX, .p = {mx, lg}, .t = T, .v = V};
		mem_row("xent.max", shp, &j, 2.0 * tv + 4 * T);
		j = (struct job){.k = K_XENT_SUM, .p = {se, tl, lg, mx, ptg}, .t = T, .v = V};
		mem_row("xent.sum", shp, &j, 2.0 * tv + 16 * T);
		j = (struct job){.k = K_XENT_GRAD, .p = {lg, ls, mx, se, tl, ptg}, .t = T, .v = V};
		mem_row("xent.grad", shp, &j, 4.0 * tv + 20 * T);
		G->sync();
		free(tg);
		G->free_(lg), G->free_(ptg), G->free_(mx), G->free_(se), G->free_(tl);
		G->free_(ls);
	}

	if (wanted("add")) {
		void *a = dev_alloc(th, LB_K_ACT), *b = dev_alloc(th, LB_K_ACT);
		void *o = dev_alloc(th, LB_K_ACT);

		fill(a, th, LB_K_ACT, 1, 0);
		fill(b, th, LB_K_ACT, 1, 11);
		snprintf(shp, sizeof(shp), "n %zu (T%d x H%d)", th, T, H);
		j = (struct job){.k = K_ADD, .p = {o, a, b}, .n_el = th};
		mem_row("add", shp, &j, 6.0 * th);
		G->free_(a), G->free_(b), G->free_(o);
	}
}

static void adamw_row(void)
{
	size_t n = 100000000;
	void *p, *ms, *g, *m, *v;
	struct job j;

	if (!wanted("adamw"))
		return;
	p = dev_alloc(n, LB_K_ACT), ms = dev_alloc(n, LB_K_F32), g = dev_alloc(n, LB_K_F32);
	m = dev_alloc(n, LB_K_F32), v = dev_alloc(n, LB_K_F32);
	fill(ms, n, LB_K_F32, 1, 0);
	fill(g, n, LB_K_F32, 1.0 / 128, 17);
	j = (struct job){.k = K_ADAMW, .p = {p, ms, g, m, v}, .n_el = n};
	/* param written (2), master, m, v read and written (8 each), grad read (4) */
	mem_row("adamw", "n 100M", &j, 30.0 * n);
	G->free_(p), G->free_(ms), G->free_(g), G->free_(m), G->free_(v);
}

/* The job of attention kernel k on its n operands p (as run() takes them) at shape's sizes. */
static struct job attn_job(const struct job *shape, enum kid k, void *const *p, int n)
{
	struct job j = *shape;

	j.k = k;
	memcpy(j.p, p, (size_t)n * sizeof(void *));
	return j;
}

/* Attention rows at sequence s (B 1, 40 heads of 128, no GQA, as Llama-13B). */
static void attn_rows(int s, int all_variants)
{
	int b = 1, nh = NHEAD, d = HDIM;
	size_t t = (size_t)b * s, nq = t * 3 * nh * d, no = t * nh * d;
	double fwd = 4.0 * b * nh * (double)s * s * d / 2, bwd = 2.5 * fwd;
	void *qkv, *out, *dout, *dq, *scr, *lse, *pr = NULL;
	char shp[48];
	struct job j, shape = {.b = b, .s = s, .nh = nh, .nkv = nh, .d = d};
	int want_probs = all_variants && (wanted("attn.naive.fwd") || wanted("attn.fused.fwd") ||
					  wanted("attn.probs.bwd"));

	if (!want_probs && !wanted("attn.flash.fwd") && !wanted("attn.flash.bwd") &&
	    !wanted("attn.cudnn.fwd") && !wanted("attn.cudnn.bwd"))
		return;
	snprintf(shp, sizeof(shp), "B%d S%d nh%d D%d causal", b, s, nh, d);
	qkv = dev_alloc(nq, LB_K_ACT), out = dev_alloc(no, LB_K_ACT);
	dout = dev_alloc(no, LB_K_ACT), dq = dev_alloc(nq, LB_K_ACT);
	scr = dev_alloc(G->attn_scratch(b, s, nh, d), LB_K_F32);
	lse = dev_alloc((size_t)b * nh * s, LB_K_F32);
	fill(qkv, nq, LB_K_ACT, 1, 0);
	fill(dout, no, LB_K_ACT, 1, 21);
	if (want_probs) {
		pr = dev_alloc((size_t)b * nh * s * s, LB_K_ACT);
		j = attn_job(&shape, K_ATTN_NAIVE_FWD, (void *[]){out, pr, scr, qkv}, 4);
		attn_row("attn.naive.fwd", shp, &j, fwd);
		j.k = K_ATTN_FUSED_FWD;
		attn_row("attn.fused.fwd", shp, &j, fwd);
		run(&j); /* the probs of the last forward, for the backward */
		j = attn_job(&shape, K_ATTN_PROBS_BWD, (void *[]){dq, scr, dout, pr, qkv}, 5);
		attn_row("attn.probs.bwd", shp, &j, bwd);
	}
	/* flash and cudnn take the same operands; each backward runs on its forward's */
	for (int v = 0; v < 2; v++) {
		j = attn_job(&shape, v ? K_ATTN_CUDNN_FWD : K_ATTN_FLASH_FWD,
			     (void *[]){out, lse, scr, qkv}, 4);
		attn_row(v ? "attn.cudnn.fwd" : "attn.flash.fwd", shp, &j, fwd);
		run(&j);
		j = attn_job(&shape, v ? K_ATTN_CUDNN_BWD : K_ATTN_FLASH_BWD,
			     (void *[]){dq, scr, dout, out, lse, qkv}, 6);
		attn_row(v ? "attn.cudnn.bwd" : "attn.flash.bwd", shp, &j, bwd);
	}
	G->free_(qkv), G->free_(out), G->free_(dout), G->free_(dq), G->free_(scr);
	G->free_(lse);
	if (pr)
		G->free_(pr);
}

/* achieved and ceiling in the row's unit (TFLOP/s or GB/s) */
static void row_rates(const struct row *r, double *ach, double *ceil, double *pct)
{
	double unit = r->flops ? 1e12 : 1e9;

	*ach = r->work / (r->us * 1e-6) / unit;
	*ceil = r->ceil > 0 ? r->ceil / unit : -1;
	*pct = r->ceil > 0 ? 100.0 * *ach / *ceil : -1;
}

static void print_table(FILE *csv)
{
	printf("\n%-22s %-36s %10s %9s %-7s %9s %7s %9s  %s\n", "kernel", "shape", "time_us",
	       "achieved", "unit", "ceiling", "of_ceil", "size_copy", "check");
	if (csv)
		fprintf(csv, "kernel,shape,time_us,work,unit,achieved,ceiling,pct_of_ceiling,"
			     "check,size_copy_gbps,pct_of_size_copy\n");
	for (int i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		const char *unit = r->flops ? "TFLOP/s" : "GB/s";
		double ach, ceil, pct;

		row_rates(r, &ach, &ceil, &pct);
		printf("%-22s %-36s %10.1f %9.1f %-7s ", r->name, r->shape, r->us, ach, unit);
		if (ceil > 0)
			printf("%9.1f %6.1f%%", ceil, pct);
		else
			printf("%9s %7s", "-", "-");
		if (r->size_copy > 0)
			printf(" %9.1f", r->size_copy / 1e9);
		else
			printf(" %9s", "-");
		printf("  %s\n", r->wrong ? "#wrong" : "ok");
		if (csv) {
			fprintf(csv, "%s,%s,%.3f,%.6g,%s,%.3f,", r->name, r->shape, r->us, r->work,
				unit, ach);
			if (ceil > 0)
				fprintf(csv, "%.3f,%.2f,", ceil, pct);
			else
				fprintf(csv, ",,");
			fprintf(csv, "%s,", r->wrong ? "wrong" : "ok");
			if (r->size_copy > 0)
				fprintf(csv, "%.3f,%.2f\n", r->size_copy / 1e9,
					100.0 * r->work / (r->us * 1e-6) / r->size_copy);
			else
				fprintf(csv, ",\n");
		}
	}
}

/* Attention forward + backward together (what a training step pays), per kernel and shape:
 * the FLOPs of both rows over the sum of their times. */
static void print_attn_pairs(void)
{
	for (int i = 0; i < nrows; i++) {
		const struct row *f = &rows[i];
		char want[32];
		size_t n = strlen(f->name);

		if (strncmp(f->name, "attn.", 5) || n < 4 || strcmp(f->name + n - 4, ".fwd"))
			continue;
		snprintf(want, sizeof(want), "%.*s.bwd", (int)(n - 4), f->name);
		if (!strcmp(f->name, "attn.naive.fwd") || !strcmp(f->name, "attn.fused.fwd"))
			snprintf(want, sizeof(want), "attn.probs.bwd");
		for (int k = 0; k < nrows; k++) {
			const struct row *b = &rows[k];

			if (strcmp(b->name, want) || strcmp(b->shape, f->shape))
				continue;
			printf("RESULT\tattention fwd+bwd %.*s %s\t%.1f\tTFLOP/s\t%s\n",
			       (int)(n - 9), f->name + 5, f->shape,
			       (f->work + b->work) / ((f->us + b->us) * 1e-6) / 1e12,
			       f->wrong || b->wrong ? "FAIL" : "INFO");
		}
	}
}

enum { O_CSV, O_ITERS, O_ONLY };

static const struct lb_option opts[] = {
    LB_TEXT(O_CSV, "csv", "FILE", NULL,
	    "also write every row as CSV (calibrate --kernels reads it)"),
    LB_WHOLE(O_ITERS, "iters", "N", "20", 1, MAX_ITERS, "timed iterations of each kernel"),
    LB_TEXT(O_ONLY, "only", "SUBSTR", NULL, "only the kernels whose name holds SUBSTR"),
    LB_OPT_END,
};

static int run_bench(const struct lb_args *a)
{
	const char *csv_path = a->str[O_CSV];
	char err[256] = "";
	struct lb_device_info info;
	FILE *csv = NULL;
	int nwrong = 0;
	double best, ours;

	iters = (int)a->num[O_ITERS];
	if (a->str[O_ONLY])
		only = a->str[O_ONLY];
	G = lb_ops_find("cuda");
	if (!G) {
		printf("skip: built without the CUDA backend (nvcc not found at build time)\n");
		return 0;
	}
	if (G->init && G->init(0, err, sizeof(err))) {
		printf("skip: %s\n", err); /* err says what is missing */
		return 0;
	}
	R = lb_ops_cpu_f64();
	if (csv_path && !(csv = fopen(csv_path, "w"))) {
		fprintf(stderr, "error: cannot write '%s'\n", csv_path);
		return 2;
	}
	for (int i = 0; i <= iters; i++)
		if (!(ev[i] = G->event_create()))
			die("event_create failed");
	pat = xmalloc(PAT_N * sizeof(double));
	for (size_t i = 0; i < PAT_N; i++)
		pat[i] = bf16_round(urand());
	memset(&info, 0, sizeof(info));
	if (G->device_info)
		G->device_info(&info);

	fprintf(stderr, "bench: checking the kernels against the fp64 reference\n");
	check_norm();
	check_rope();
	check_swiglu();
	check_embed();
	check_xent();
	check_add_adamw();
	check_attn();

	fprintf(stderr, "bench: measuring the ceilings\n");
	mem_ceiling = copy_bandwidth();
	gemm_times(8192, 8192, 8192, 0, 1, 0, &ours, &best);
	attn_ceiling = best > 0 ? 2.0 * 8192 * 8192 * 8192 / best : -1;

	gemm_rows(2048);
	gemm_rows(8192);
	mem_rows(2048);
	mem_rows(8192);
	adamw_row();
	attn_rows(2048, 1);
	attn_rows(8192, 0);

	printf("device: %s, %d SMs, %.1f GiB, cc %d.%d, driver %s, runtime %s, %s\n", info.name,
	       info.sm_count, info.mem_bytes / 1073741824.0, info.cc_major, info.cc_minor,
	       info.driver, info.runtime, info.libs);
	printf("ceilings: copy %.1f GB/s (read + written, 2 GiB device to device); dense GEMM "
	       "%.1f TFLOP/s (best cuBLASLt candidate, 8192^3 bf16; the attention rows' "
	       "ceiling); <= 0: not measured; size_copy: a memory-bound row's own size copied "
	       "device to device (half its bytes, read + written), timed as the row\n",
	       mem_ceiling / 1e9, attn_ceiling / 1e12);
	printf("work: GEMM 2mnk FLOPs, time and ceiling (the best heuristic candidate for the "
	       "same problem, f32 C accumulated where marked +=) the least over 3 rounds of the "
	       "mean of %d back-to-back calls; attention causal 4*B*nh*S^2*D/2 FLOPs forward, "
	       "2.5x backward; memory-bound kernels compulsory bytes read + written; median of %d "
	       "calls after %d warm-ups\n",
	       iters, iters, WARMUP);
	for (int i = 0; i < nrows; i++) {
		double ach, ceil, pct;

		row_rates(&rows[i], &ach, &ceil, &pct);
		printf("RESULT\tkernels %s %s\t%.1f\t%s\t%.1f\t%s\n", rows[i].name, rows[i].shape,
		       ach, rows[i].flops ? "TFLOP/s" : "GB/s", ceil > 0 ? ceil : 0.0,
		       rows[i].wrong ? "FAIL" : "INFO");
		nwrong += rows[i].wrong;
	}
	print_attn_pairs();
	print_table(csv);
	if (csv)
		fclose(csv);
	for (int i = 0; i <= iters; i++)
		G->event_destroy(ev[i]);
	free(pat);
	return nwrong ? 1 : 0;
}

LB_PROGRAM_MAIN("bench_kernels", opts, run_bench,
		"every kernel of the CUDA backend against the fp64 reference, with its "
		"throughput")
