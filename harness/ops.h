/*
 * The ops table: every operation the trainer's model performs, behind function pointers,
 * so the model (harness/model.c) is written once and a backend fills the table. The CPU
 * reference backend (harness/ops_cpu.c) fills it with plain C in fp32 (and, for tests and
 * reference checks, in fp64); the CUDA backend fills the same table with bf16 device memory,
 * fp32 accumulation, cuBLASLt GEMMs and its own kernels.
 *
 * Memory: buffers are opaque backend memory (`void *`), counted in elements of the table's
 * element type (elem_size bytes: 4 for the fp32 CPU table, 8 for the fp64 one). The model
 * never dereferences them and never does pointer arithmetic on them: it asks at(p, off).
 * Host data enters and leaves through write/read (fp64 on the host side, so a test sees
 * backend values exactly) and token ids are passed as host int32 arrays.
 *
 * Shapes are row-major. T = tokens of a micro-batch (B sequences of S tokens, token
 * t = b*S + s), H = hidden, D = head dim, nh / nkv = query / key-value heads (of this
 * tensor-parallel shard), F = SwiGLU inner size (of this shard), V = vocab rows of this
 * shard. The QKV buffer holds per token [q heads (nh*D) | k heads (nkv*D) | v heads (nkv*D)];
 * query head i reads key-value head i / (nh / nkv) (grouped-query attention).
 *
 * Backward conventions: weight gradients always accumulate (+=) into their buffers (the
 * gradient-accumulation buffer); activation gradients overwrite unless the comment says +=.
 */
#ifndef LB_OPS_H
#define LB_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "harness/comm.h"

#define LB_RMS_EPS 1e-5

struct lb_ops {
	const char *name;    /* "cpu" (fp32), "cpu-f64", "cuda" */
	size_t elem_size;    /* bytes per element of every buffer */
	enum lb_dtype dtype; /* element type given to the comm table (the fp64 CPU table has no
				comm type: it serves single-process checks, with no group) */

	/* --- memory --- */
	/* n elements, zero-filled. NULL when the allocation fails or would take the
	 * allocator's live bytes above its limit (an out-of-memory). Free with free_. */
	void *(*alloc)(size_t n);
	void (*free_)(void *p);
	void *(*at)(void *p, size_t off); /* p advanced by off elements */
	void (*zero)(void *p, size_t n);
	void (*copy)(void *dst, const void *src, size_t n);    /* no overlap */
	void (*write)(void *dst, const double *src, size_t n); /* host -> backend */
	void (*read)(double *dst, const void *src, size_t n);  /* backend -> host */
	/* The allocator's cap on live bytes (0: none), and its counters: live and peak bytes
	 * since the last reset (reset_peak sets peak = live). */
	void (*set_mem_limit)(uint64_t bytes);
	void (*mem_stats)(uint64_t *live, uint64_t *peak);
	void (*reset_peak)(void);

	/* --- matmul (what a cuBLASLt GEMM offers) ---
	 * C (M, N) = alpha * op(A) op(B) + (accumulate ? C : 0), op(A) (M, K), op(B) (K, N);
	 * A is stored (M, K) or, when ta, (K, M); B is (K, N) or, when tb, (N, K). */
	void (*matmul)(void *c, const void *a, const void *b, int m, int n, int k, int ta, int tb,
		       double alpha, int accumulate);

	/* --- RMSNorm: y = x / sqrt(mean(x^2) + eps) * w, per row of (T, H) ---
	 * fused: one pass per row; saves rstd (T). */
	void (*rmsnorm_fwd)(void *y, void *rstd, const void *x, const void *w, int t, int h);
	/* dx += d/dx, dw += d/dw. */
	void (*rmsnorm_bwd)(void *dx, void *dw, const void *dy, const void *x, const void *w,
			    const void *rstd, int t, int h);
	/* unfused: the same function in separate passes, as an eager framework runs it:
	 * sq = x*x (T, H); ms = mean(sq) (T); rstd = rsqrt(ms + eps) (T); xhat = x*rstd
	 * (T, H); y = xhat*w. Saves xhat and rstd; sq and ms are scratch (T*H + T). */
	void (*rmsnorm_unfused_fwd)(void *y, void *xhat, void *rstd, void *scratch, const void *x,
				    const void *w, int t, int h);
	/* Separate passes: dxhat = dy*w; dw += sum_t dy*xhat; c = mean(dxhat*xhat) (T);
	 * dx += rstd*(dxhat - xhat*c). scratch: T*H + T elements. */
	void (*rmsnorm_unfused_bwd)(void *dx, void *dw, const void *dy, const void *xhat,
				    const void *w, const void *rstd, void *scratch, int t, int h);

	/* --- RoPE (Su et al. 2021), on the first nheads heads of each row of x (T, stride):
	 * pairs (2i, 2i+1) of each head rotated by angle pos * theta^(-2i/D), pos = t % S.
	 * cs: (S, D/2, 2) table of cos, sin (lb_ops_rope_table). In place.
	 * bwd rotates by the negative angle (the transpose). */
	void (*rope_fwd)(void *x, const void *cs, int t, int s, int stride, int nheads, int d);
	void (*rope_bwd)(void *dx, const void *cs, int t, int s, int stride, int nheads, int d);

	/* --- causal attention over qkv (T, (nh + 2*nkv)*D), out (T, nh*D), scale 1/sqrt(D) ---
	 * naive: scores (B, nh, S, S) materialized by one pass, scaled, masked and
	 *   normalized in separate passes into probs (B, nh, S, S); saves probs;
	 *   scratch: S*S elements.
	 * fused_softmax: the same scores, then scale+mask+softmax in one pass in place;
	 *   saves probs (B, nh, S, S).
	 * flash (Dao 2023): tiled over keys with an online softmax, never materializing
	 *   scores; saves the log-sum-exp lse (B, nh, S); backward recomputes the
	 *   probabilities. scratch: S elements per query row block.
	 * bwd: dqkv is overwritten (K and V parts summed over the query heads that share
	 * them); scratch sizes: lb_ops_attn_scratch(). */
	void (*attn_naive_fwd)(void *out, void *probs, void *scratch, const void *qkv, int b, int s,
			       int nh, int nkv, int d);
	void (*attn_fused_fwd)(void *out, void *probs, const void *qkv, int b, int s, int nh,
			       int nkv, int d);
	void (*attn_probs_bwd)(void *dqkv, void *scratch, const void *dout, const void *probs,
			       const void *qkv, int b, int s, int nh, int nkv, int d);
	void (*attn_flash_fwd)(void *out, void *lse, void *scratch, const void *qkv, int b, int s,
			       int nh, int nkv, int d);
	void (*attn_flash_bwd)(void *dqkv, void *scratch, const void *dout, const void *out,
			       const void *lse, const void *qkv, int b, int s, int nh, int nkv,
			       int d);

	/* --- SwiGLU (Shazeer 2020): out (T, F) = silu(g) * u, gu (T, 2F) = [g | u] --- */
	void (*swiglu_fwd)(void *out, const void *gu, int t, int f);
	void (*swiglu_bwd)(void *dgu, const void *dout, const void *gu, int t, int f);

	/* --- embedding, vocab-parallel: rows [v0, v0 + V) of the table live here; a token
	 * outside them gives a zero row (the tensor-parallel all-reduce sums the shards) --- */
	void (*embed_fwd)(void *out, const void *table, const int32_t *tokens, int t, int h, int v0,
			  int v);
	void (*embed_bwd)(void *dtable, const void *dout, const int32_t *tokens, int t, int h,
			  int v0, int v); /* dtable += */

	/* --- cross-entropy fused with the softmax over a vocab-parallel shard (T, V) of
	 * logits, in three passes so the shards can all-reduce between them:
	 * xent_max: rowmax (T) = max over the shard (all-reduce MAX);
	 * xent_sum: sumexp (T) = sum exp(logit - rowmax), tgt (T) = the target's logit or 0
	 *   when the target is not in the shard (all-reduce SUM both);
	 * xent_grad: losses (T) = log(sumexp) + rowmax - tgt, and the logits replaced in
	 *   place by dlogits = scale * (softmax - onehot(target)). */
	void (*xent_max)(void *rowmax, const void *logits, int t, int v);
	void (*xent_sum)(void *sumexp, void *tgt, const void *logits, const void *rowmax,
			 const int32_t *targets, int t, int v, int v0);
	void (*xent_grad)(void *logits, void *losses, const void *rowmax, const void *sumexp,
			  const void *tgt, const int32_t *targets, int t, int v, int v0,
			  double scale);

	/* --- AdamW (Loshchilov & Hutter 2019) on n elements: g = grad * grad_scale;
	 * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; master -= lr (mhat / (sqrt(vhat) + eps)
	 * + wd master), mhat = m / (1-b1^step), vhat = v / (1-b2^step); param = master
	 * (in the backend's weight type). step counts from 1. --- */
	void (*adamw)(void *param, void *master, const void *grad, void *m, void *v, size_t n,
		      double lr, double b1, double b2, double eps, double wd, int step,
		      double grad_scale);

	/* --- elementwise and reductions --- */
	void (*add)(void *out, const void *a, const void *b, size_t n); /* out = a + b */
	void (*acc)(void *y, const void *x, size_t n);			/* y += x */
	void (*scale)(void *x, double s, size_t n);			/* x *= s */
	double (*sum)(const void *x, size_t n);				/* in fp64 */
	double (*sum_sq)(const void *x, size_t n);			/* in fp64 */
};

/* The CPU reference tables (static; never freed). fp32 is the trainer's backend; fp64 is
 * the same code instantiated in double for gradient checks. Each table has its own
 * allocator counters and limit. */
const struct lb_ops *lb_ops_cpu(void);
const struct lb_ops *lb_ops_cpu_f64(void);

/* The RoPE cos/sin table for sequences of s tokens and head dim d, theta 10000 (Llama):
 * host array of s * d elements (s, d/2, [cos, sin]), angle pos * theta^(-2i/d) computed in
 * fp64. Caller frees with free(); NULL on allocation failure. */
double *lb_rope_table_host(int s, int d);

/* Scratch elements the attention variants need (fwd and bwd), for b, s, nh heads. */
size_t lb_ops_attn_scratch(int s);

#endif
