/*
 * The ops table: every operation the trainer's model performs, behind function pointers,
 * so the model (harness/model.c) is written once and a backend fills the table. The CPU
 * reference backend (harness/ops_cpu.c) fills it with plain C in fp32 (and, for tests and
 * reference checks, in fp64); the CUDA backend (harness/cuda/) fills the same table with
 * device memory in the types of Megatron's mixed precision, cuBLASLt GEMMs and its own
 * kernels, every call enqueued on one stream. A backend is picked by name from the
 * registry (lb_ops_find); the model and the trainer never name one.
 *
 * Memory: buffers are opaque backend memory (`void *`: host memory on the CPU, device
 * memory on the GPU). Every buffer has a kind (enum lb_kind), fixed when it is allocated,
 * that says its role; the backend decides the element type of each kind (esize, dtype).
 * The model never dereferences a buffer and never does pointer arithmetic on one: it asks
 * lb_at(ops, p, off, kind). Host data enters and leaves through write/read (fp64 on the host side,
 * so a test sees backend values exactly) and token ids through write_i32.
 *
 * Which kind each operand of an op has is part of the op's contract: "act" operands are
 * LB_K_ACT (bf16 on the GPU), "f32" operands LB_K_F32, "i32" LB_K_I32. Unless a comment
 * says otherwise: parameters, activations and activation gradients are act; weight
 * gradients (the main gradients), master weights, AdamW moments and statistics (rstd,
 * lse, row max, sum-exp, target logits, losses) are f32; token ids are i32.
 *
 * Ordering: calls are ordered as issued (on the GPU, on the backend's stream); an op
 * returns before its work is done. Only read, sum, sum_sq, event_elapsed and sync wait
 * for the device; a training step waits once (it reads its loss and gradient norm).
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

#include "harness/comm/comm.h"

#define LB_RMS_EPS 1e-5

/* The role of a buffer; its element type is the backend's (esize[], dtype[]):
 *            cpu    cpu-f64  cuda
 *   ACT      f32    f64      bf16   parameters (compute copy), activations, their grads
 *   F32      f32    f64      f32    main gradients, master weights, moments, statistics
 *   F64      f64    f64      f64    step accumulators (loss sum, squared gradient norm)
 *   I32      i32    i32      i32    token ids */
enum lb_kind { LB_K_ACT = 0, LB_K_F32, LB_K_F64, LB_K_I32, LB_NKINDS };

/* What the run log says of the device (lb_ops.device_info). */
struct lb_device_info {
	char name[128];		/* product name ("NVIDIA H200"); "cpu" on the CPU */
	int sm_count;		/* multiprocessors; 0 on the CPU */
	uint64_t mem_bytes;	/* device memory; 0 on the CPU */
	char driver[32];	/* driver version ("580.159.04"), "" when unknown */
	char runtime[32];	/* CUDA runtime version ("13.0"), "" when unknown */
	char libs[128];		/* library versions ("cublasLt 13.1.0"), "" when none */
	int cc_major, cc_minor; /* compute capability; 0 on the CPU */
};

struct lb_ops {
	const char *name;		/* "cpu" (fp32), "cpu-f64", "cuda" */
	size_t esize[LB_NKINDS];	/* bytes per element of each kind */
	enum lb_dtype dtype[LB_NKINDS]; /* element type of each kind, for the comm table */

	/* --- set-up --- */
	/* Bind the backend to this process's device (local_rank: the node-local rank, picks
	 * the GPU) and create its stream and library handles. 0, or -1 with err set (no
	 * device, a driver older than the runtime, ...). Idempotent. NULL: nothing to do. */
	int (*init)(int local_rank, char *err, size_t errlen);
	/* The device this process runs on (after init). */
	void (*device_info)(struct lb_device_info *info);

	/* --- memory --- */
	/* n elements of kind k, zero-filled. NULL when the allocation fails or would take
	 * the allocator's live bytes above its limit (an out-of-memory). Free with free_. */
	void *(*alloc)(size_t n, enum lb_kind k);
	void (*free_)(void *p);
	void (*zero)(void *p, size_t n, enum lb_kind k);
	void (*copy)(void *dst, const void *src, size_t n, enum lb_kind k); /* no overlap */
	/* dst (kind dk) = src (kind sk) converted, n elements (ACT, F32 or F64 kinds). */
	void (*cast)(void *dst, enum lb_kind dk, const void *src, enum lb_kind sk, size_t n);
	void (*write)(void *dst, const double *src, size_t n, enum lb_kind k); /* host -> */
	void (*read)(double *dst, const void *src, size_t n, enum lb_kind k);  /* -> host; waits */
	/* p[i] = std * lb_normal_at(seed, key, i) (harness/rng.h) for i < n, in kind k: the
	 * model's initialisation drawn where the tensor lives. */
	void (*fill_normal)(void *p, size_t n, enum lb_kind k, uint64_t seed, int key, double std);
	/* host int32 -> an I32 buffer; the host array may be reused as soon as it returns */
	void (*write_i32)(int32_t *dst, const int32_t *src, size_t n);
	/* The allocator's cap on live bytes (0: none), and its counters: live and peak bytes
	 * since the last reset (reset_peak sets peak = live). */
	void (*set_mem_limit)(uint64_t bytes);
	void (*mem_stats)(uint64_t *live, uint64_t *peak);
	void (*reset_peak)(void);
	/* The device's own reading, beside the allocator's count: the most device memory seen
	 * in use (total - free, as cudaMemGetInfo and nvidia-smi report it: this process's
	 * buffers, its CUDA context, library workspaces and lazily loaded kernels, and any
	 * other process on the device) since reset_peak, sampled after every allocation and
	 * at each call. Optional: NULL where the device reports nothing (the CPU). */
	uint64_t (*device_mem_peak)(void);

	/* --- ordering and time --- */
	/* The stream handle given to comm calls (NULL on the CPU). */
	void *(*stream)(void);
	void (*sync)(void); /* wait for everything issued */
	/* Events mark a point of the stream; elapsed(a, b) waits for b and gives the seconds
	 * between the two (GPU time on the GPU, wall time on the CPU). NULL when create fails. */
	void *(*event_create)(void);
	void (*event_destroy)(void *ev);
	void (*event_record)(void *ev);
	double (*event_elapsed)(void *a, void *b);
	/* Overlap (the data-parallel gradient reduction beside the backward pass): a second
	 * stream (NULL on the CPU, where everything runs in order); use_stream(s) makes the
	 * following ops, events and stream() go to s, use_stream(NULL) back to the backend's
	 * own stream; wait_event(ev): the current stream waits, without blocking the host,
	 * for ev's last record (a no-op on the CPU). */
	void *(*side_stream)(void);
	/* The pipeline's sends and receives (harness/pipestream.h): a third stream, so that a
	 * send does not hold the compute stream until its peer receives, and never the side
	 * stream (two communicators' calls on one stream, in different orders across ranks,
	 * can deadlock). NULL on the CPU. */
	void *(*p2p_stream)(void);
	void (*use_stream)(void *s);
	void (*wait_event)(void *ev);

	/* Scratch elements (F32 kind) the attention variants need, forward and backward, for
	 * b sequences of s tokens and nh query heads of dim d; and the unfused norm passes
	 * for t rows of h. */
	size_t (*attn_scratch)(int b, int s, int nh, int d);
	size_t (*norm_scratch)(int t, int h);

	/* --- matmul (what a cuBLASLt GEMM offers) ---
	 * C (M, N) = alpha * op(A) op(B) + (accumulate ? C : 0), op(A) (M, K), op(B) (K, N);
	 * A is stored (M, K) or, when ta, (K, M); B is (K, N) or, when tb, (N, K). A and B are
	 * act; C is f32 when c_f32 (a weight gradient into the main gradients), else act.
	 * Accumulation is in fp32 on every backend that has a narrower type. */
	void (*matmul)(void *c, const void *a, const void *b, int m, int n, int k, int ta, int tb,
		       double alpha, int accumulate, int c_f32);
	/* Optional (NULL: the model issues matmul, then add): out (M, N) = op(A) op(B) +
	 * addend, all act, the residual add done by the GEMM (its epilogue) instead of a pass
	 * of its own (cuBLASLt on the H200 rounds the product to bf16 before it adds: the bits
	 * of matmul then add). out must not alias a or b; addend may be out. */
	void (*matmul_add)(void *out, const void *a, const void *b, const void *addend, int m,
			   int n, int k, int ta, int tb);

	/* --- RMSNorm: y = x / sqrt(mean(x^2) + eps) * w, per row of (T, H) ---
	 * fused: one pass per row; saves rstd (T). */
	void (*rmsnorm_fwd)(void *y, void *rstd, const void *x, const void *w, int t, int h);
	/* dx += d/dx (act), dw += d/dw (f32). */
	void (*rmsnorm_bwd)(void *dx, void *dw, const void *dy, const void *x, const void *w,
			    const void *rstd, int t, int h);
	/* unfused: the same function in separate passes, as an eager framework runs it:
	 * sq = x*x (T, H); ms = mean(sq) (T); rstd = rsqrt(ms + eps) (T); xhat = x*rstd
	 * (T, H); y = xhat*w. Saves xhat (act) and rstd; scratch: norm_scratch(t, h). */
	void (*rmsnorm_unfused_fwd)(void *y, void *xhat, void *rstd, void *scratch, const void *x,
				    const void *w, int t, int h);
	/* Separate passes: dxhat = dy*w; dw += sum_t dy*xhat; c = mean(dxhat*xhat) (T);
	 * dx += rstd*(dxhat - xhat*c). scratch: norm_scratch(t, h). */
	void (*rmsnorm_unfused_bwd)(void *dx, void *dw, const void *dy, const void *xhat,
				    const void *w, const void *rstd, void *scratch, int t, int h);

	/* --- RoPE (Su et al. 2021), on the first nheads heads of each row of x (T, stride):
	 * pairs (2i, 2i+1) of each head rotated by angle pos * theta^(-2i/D), pos = t % S.
	 * cs: (S, D/2, 2) table of cos, sin (f32, lb_rope_table_host). In place.
	 * bwd rotates by the negative angle (the transpose). */
	void (*rope_fwd)(void *x, const void *cs, int t, int s, int stride, int nheads, int d);
	void (*rope_bwd)(void *dx, const void *cs, int t, int s, int stride, int nheads, int d);

	/* --- causal attention over qkv (T, (nh + 2*nkv)*D), out (T, nh*D), scale 1/sqrt(D) ---
	 * naive: scores (B, nh, S, S) materialized by one pass, scaled, masked and
	 *   normalized in separate passes into probs (B, nh, S, S, act); saves probs.
	 * fused_softmax: the same scores, then scale+mask+softmax in one pass in place;
	 *   saves probs (B, nh, S, S, act).
	 * flash (Dao 2023): tiled over keys with an online softmax, never materializing
	 *   scores; saves the log-sum-exp lse (B, nh, S, f32); backward recomputes the
	 *   probabilities.
	 * bwd: dqkv is overwritten (K and V parts summed over the query heads that share
	 * them); scratch: attn_scratch(b, s, nh, d) elements. */
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

	/* cudnn: cuDNN's fused flash attention (graph API; the GPU backend only, NULL on the
	 *   CPU): the same math and saved state as flash (lse (B, nh, S) f32), the same
	 *   scratch (the backward's fp32 dQ accumulator and its row sums of dout * out). */
	void (*attn_cudnn_fwd)(void *out, void *lse, void *scratch, const void *qkv, int b, int s,
			       int nh, int nkv, int d);
	void (*attn_cudnn_bwd)(void *dqkv, void *scratch, const void *dout, const void *out,
			       const void *lse, const void *qkv, int b, int s, int nh, int nkv,
			       int d);

	/* --- SwiGLU (Shazeer 2020): out (T, F) = silu(g) * u, gu (T, 2F) = [g | u] --- */
	void (*swiglu_fwd)(void *out, const void *gu, int t, int f);
	void (*swiglu_bwd)(void *dgu, const void *dout, const void *gu, int t, int f);

	/* --- embedding, vocab-parallel: rows [v0, v0 + V) of the table live here; a token
	 * outside them gives a zero row (the tensor-parallel all-reduce sums the shards).
	 * tokens: i32 backend memory; dtable: f32 (main gradients) --- */
	void (*embed_fwd)(void *out, const void *table, const int32_t *tokens, int t, int h, int v0,
			  int v);
	void (*embed_bwd)(void *dtable, const void *dout, const int32_t *tokens, int t, int h,
			  int v0, int v); /* dtable += */

	/* --- cross-entropy fused with the softmax over a vocab-parallel shard (T, V) of
	 * logits (act), in three passes so the shards can all-reduce between them (rowmax,
	 * sumexp, tgt, losses: f32; targets: i32 backend memory):
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
	 * (act). master, grad, m, v: f32. step counts from 1. --- */
	void (*adamw)(void *param, void *master, const void *grad, void *m, void *v, size_t n,
		      double lr, double b1, double b2, double eps, double wd, int step,
		      double grad_scale);

	/* --- elementwise and reductions --- */
	void (*add)(void *out, const void *a, const void *b, size_t n); /* act: out = a + b */
	void (*acc)(void *y, const void *x, size_t n);			/* f32: y += x */
	void (*scale)(void *x, double s, size_t n);			/* f32: x *= s */
	/* acc (one F64 element) += sum of x (f32) / of its squares, accumulated in fp64 in
	 * element order on the CPU (and in fp32 per block, fp64 across blocks on the GPU).
	 * Enqueued: nothing waits. */
	void (*sum_acc)(void *acc, const void *x, size_t n);
	void (*sum_sq_acc)(void *acc, const void *x, size_t n);
	/* The same, read back at once (tests and checks; waits for the device). */
	double (*sum)(const void *x, size_t n);
	double (*sum_sq)(const void *x, size_t n);

	/* --- AdamW with its per-step scalars in backend memory (optional: NULL on the CPU,
	 * whose trainer computes them on the host) ---
	 * So that the optimizer needs no host value computed from the step's gradients (no
	 * wait inside a step) and a captured graph of it serves every step. sc: LB_ADAMW_SC
	 * elements of the F64 kind, {1 - b1^step, 1 - b2^step, grad_scale, step}.
	 * adamw_scalars: enqueue sc = those values, computed on the host in double (as adamw
	 *   computes them), grad_scale < 0 leaving sc[2] as it is (clip_scale sets it).
	 * clip_scale: sc[2] = lb_optim_clip_scale(sqrt(sq[0]), clip) (optim.h), in double
	 *   on the device; sq: one F64 element (the squared global gradient norm).
	 * adamw_dev: adamw with c1, c2 and grad_scale read from sc: the same arithmetic. */
	void (*adamw_scalars)(void *sc, int step, double b1, double b2, double grad_scale);
	void (*clip_scale)(void *sc, const void *sq, double clip);
	void (*adamw_dev)(void *param, void *master, const void *grad, void *m, void *v, size_t n,
			  double lr, double b1, double b2, double eps, double wd, const void *sc);

	/* --- graphs (optional: NULL on the CPU, which has no launches to save) ---
	 * A segment is work the caller issues the same way each time it runs it (the same
	 * ops on the same buffers with the same scalars), named by a key (bytes compared as
	 * they are: zero the padding). Host-side work inside a segment (a collective that
	 * stages through the host, a hook that switches streams) is bracketed by graph_pause
	 * and graph_resume (they nest). The first time a key is seen its segment runs as
	 * usual (the first call's tuning happens there); the second time it is captured,
	 * piece by piece between the pauses, each piece launched as soon as it is captured
	 * (the host work that follows reads what it wrote); from then on it is replayed.
	 * graph_begin returns the table the caller issues the segment's ops through until
	 * graph_end: this one, or on a replay a table whose device work does nothing outside
	 * a pause (its work is in the graphs) while the host work between pauses runs as
	 * usual, each graph_pause and graph_end launching the next piece.
	 * graph_pause returns 0, or LB_GRAPH_RERUN when the capture failed before anything
	 * of the segment ran: the caller stops issuing, calls graph_end(0) and runs the
	 * segment again without graphs (ops = this table, no graph_begin). A capture that
	 * fails after a piece ran ends the run (LB_FATAL, naming --cuda-graphs 0).
	 * graph_end(ok): ok 0 abandons the segment (the caller's error, or a rerun); returns
	 * what happened (LB_GRAPH_*). */
	const struct lb_ops *(*graph_begin)(const void *key, size_t len);
	int (*graph_pause)(void);
	void (*graph_resume)(void);
	int (*graph_end)(int ok);

	/* --- the backend's own communicator (optional: NULL on the CPU, whose ranks meet in
	 * the host communicator alone) ---
	 * The world over host (this node's shared-memory world, or NULL across nodes; owned
	 * by the result from now on, also on failure), collective over the world, as o asks
	 * (comm.h). Returns 0, or a LB_COMM_E* code with err set; *out may be set on failure
	 * (destroy it). After init. Its communicators have the table's optional members
	 * (names, errors, tags, device times: comm.h). */
	int (*comm_world)(struct lb_comm *host, const struct lb_gpu_comm_opts *o,
			  struct lb_comm **out, char *err, size_t errlen);
};

#define LB_ADAMW_SC 4 /* elements of adamw_scalars' sc */

/* What graph_end says of a segment. */
enum lb_graph_run {
	LB_GRAPH_EAGER = 0, /* ran as usual (first seen, or graphs given up for its key) */
	LB_GRAPH_CAPTURED,  /* captured and launched; replayed from now on */
	LB_GRAPH_REPLAYED,  /* replayed */
	LB_GRAPH_RERUN,	    /* the capture failed before anything ran: run it again, eagerly */
	LB_GRAPH_NRUNS
};

/* The CPU reference tables (static; never freed). fp32 is the trainer's backend; fp64 is
 * the same code instantiated in double for gradient checks. Each table has its own
 * allocator counters and limit. */
const struct lb_ops *lb_ops_cpu(void);
const struct lb_ops *lb_ops_cpu_f64(void);
/* The CUDA table (harness/cuda/ops_cuda.cu); exists only in a build with nvcc. */
const struct lb_ops *lb_ops_cuda(void);

/* The registry (harness/registry.c: the one place that knows which backends this build
 * has): the backend named name ("cpu", "cpu-f64", "cuda"), or NULL when this build has
 * none of that name. */
const struct lb_ops *lb_ops_find(const char *name);
/* 1 when this build has the CUDA backend. */
int lb_ops_have_cuda(void);

/* The RoPE cos/sin table for sequences of s tokens and head dim d, theta 10000 (Llama):
 * host array of s * d elements (s, d/2, [cos, sin]), angle pos * theta^(-2i/d) computed in
 * fp64. Caller frees with free(); NULL on allocation failure. */
double *lb_rope_table_host(int s, int d);

/* p advanced by off elements of kind k (the table's at). */
static inline void *lb_at(const struct lb_ops *o, void *p, size_t off, enum lb_kind k)
{
	return (char *)p + off * o->esize[k];
}

#endif
