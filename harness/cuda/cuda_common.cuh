/*
 * What the CUDA backend's files share (the .cu files of harness/cuda): the stream every op is
 * enqueued on, the error checks, the element types of each buffer kind, the GEMM entry the
 * matmul and the attention share, and the declarations of every op, so ops_cuda.cu fills the
 * table (harness/ops.h) from functions defined in one file per section of the table
 * (memory.cu, gemm.cu, elementwise.cu, reduce.cu, adamw.cu) or per operation (norm.cu,
 * rope.cu, swiglu.cu, embed.cu, xent.cu, attention.cu, attention_cudnn.cu).
 *
 * Types: LB_K_ACT buffers hold bf16 (act_t), LB_K_F32 float, LB_K_F64 double, LB_K_I32
 * int32. Every kernel accumulates in fp32 (reductions across blocks in fp64 where a test
 * needs it). No op synchronises the host or allocates, with one exception: the first
 * lbc_gemm of a new problem times cuBLASLt's candidates on a transient output buffer
 * (once per shape, in the first step; LAYOUTBENCH_GEMM_TUNE=0 turns that off).
 *
 * Error regime (STYLE.md 3): a failed CUDA or cuBLASLt call has no safe recovery in the
 * trainer: LBC_CHECK prints file:line, host and rank, writes the failure class into the
 * run log (oom for an allocation failure, error otherwise) and exits.
 */
#ifndef LB_CUDA_COMMON_CUH
#define LB_CUDA_COMMON_CUH

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "harness/ops.h"
#include "harness/trainlog.h"
}

typedef __nv_bfloat16 act_t;

/*
 * CUDA graphs (graph.cu; the ops table's graph_begin ... graph_end, ops.h). What the other
 * files need of them:
 *  - lbc_graph_capturing: 1 while a segment is being captured outside a pause: what is
 *    enqueued now goes into a graph and runs only when that piece is launched. Work that
 *    must not be captured (a first call's tuning, which waits for the device) asks first.
 *  - lbc_graph_soft: a CUDA, cuBLASLt or cuDNN call failed (what, why). During a capture
 *    that nothing of has run yet the failure is noted and absorbed (1): the capture is
 *    dropped and its segment runs again without a graph. Otherwise 0 (after a line on
 *    stderr when it happened inside a capture): the caller's fatal error follows.
 *  - lbc_graph_abort: the same for a condition a capture cannot take (a plan that would
 *    have to be built and tuned now): 1 when absorbed (the caller enqueues nothing); it
 *    ends the run (naming --cuda-graphs 0) when a piece of the segment already ran.
 *  - lbc_graph_drop: the capture goes on, but its graphs are not kept (a GEMM with an
 *    untuned algorithm): the next time the segment runs eagerly and is captured again.
 *  - lbc_graph_invalidate: device memory a graph may name is freed or moved (the shared
 *    workspace grew, a buffer was freed): every graph is dropped (captured again later).
 *  - lbc_graph_guard: a call that cannot be part of a segment (a host transfer, a wait,
 *    a stream switch) ends the run when made inside one outside a pause.
 *  - lbc_graph_skip: 1 on a replay outside a pause: an op of the replay table does nothing.
 */
int lbc_graph_capturing(void);
int lbc_graph_soft(const char *what, const char *why);
int lbc_graph_abort(const char *why);
void lbc_graph_drop(const char *why);
void lbc_graph_invalidate(void);
void lbc_graph_guard(const char *what);
int lbc_graph_skip(void);
/* The table's members (graph.cu). */
const struct lb_ops *lbc_graph_begin(const void *key, size_t len);
int lbc_graph_pause(void);
void lbc_graph_resume(void);
int lbc_graph_end(int ok);
/* The table graph_begin returns on a replay (graph.cu): the cuda table's, with every
 * op that only enqueues device work doing nothing while lbc_graph_skip() says so. */
const struct lb_ops *lbc_replay_table(void);
/* The main stream (the one segments are captured on and replayed on). */
cudaStream_t lbc_main_stream(void);

/* The stream every op is enqueued on now (ops_cuda.cu; valid after init): the backend's
 * own, or the one use_stream switched to. */
cudaStream_t lbc_stream(void);

#define LBC_CHECK(call)                                                                            \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess && !lbc_graph_soft(#call, cudaGetErrorString(e_)))           \
			lb_fatal(__FILE__, __LINE__,                                               \
				 e_ == cudaErrorMemoryAllocation ? "oom" : "error", "%s: %s",      \
				 #call, cudaGetErrorString(e_));                                   \
	} while (0)
#define LBC_CHECK_LT(call)                                                                         \
	do {                                                                                       \
		cublasStatus_t s_ = (call);                                                        \
		if (s_ != CUBLAS_STATUS_SUCCESS && !lbc_graph_soft(#call, "a cuBLASLt error"))     \
			lb_fatal(__FILE__, __LINE__,                                               \
				 s_ == CUBLAS_STATUS_ALLOC_FAILED ? "oom" : "error",               \
				 "%s: cublas status %d", #call, (int)s_);                          \
	} while (0)
/* After a kernel launch: a bad configuration is caught here, not at the next sync. */
#define LBC_LAUNCHED() LBC_CHECK(cudaGetLastError())

/* The end of a timing made on the side of the run (a tuner's, a benchmark's), whatever
 * failed on the way: the stream drained, the error it left cleared (no error of the run),
 * the n events destroyed (NULL ones were never made). */
static inline void lbc_timing_end(cudaEvent_t *ev, int n)
{
	cudaStreamSynchronize(lbc_stream());
	cudaGetLastError();
	for (int i = 0; i < n; i++)
		if (ev[i])
			cudaEventDestroy(ev[i]);
}

/* dst[0..3] += (a, b, c, d): one 16-byte vector atomic where the device has it (sm_90),
 * without the returned value; four float atomics otherwise. dst 16-byte aligned. */
static __device__ __forceinline__ void lbc_red_add4(float *dst, float a, float b, float c, float d)
{
#if __CUDA_ARCH__ >= 900
	asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};"
		     :
		     : "l"(dst), "f"(a), "f"(b), "f"(c), "f"(d)
		     : "memory");
#else
	atomicAdd(dst, a);
	atomicAdd(dst + 1, b);
	atomicAdd(dst + 2, c);
	atomicAdd(dst + 3, d);
#endif
}

/* dst[0..1] += (a, b): one 8-byte vector atomic where the device has it (sm_90), two float
 * atomics otherwise. dst 8-byte aligned. */
static __device__ __forceinline__ void lbc_atomic_add2(float *dst, float a, float b)
{
#if __CUDA_ARCH__ >= 900
	atomicAdd(reinterpret_cast<float2 *>(dst), make_float2(a, b));
#else
	atomicAdd(dst, a);
	atomicAdd(dst + 1, b);
#endif
}

/* Blocks of `threads` covering n items (at most 65535 * 32 blocks; kernels grid-stride). */
static inline unsigned lbc_blocks(size_t n, unsigned threads)
{
	size_t b = (n + threads - 1) / threads;

	if (b > 65535u * 32u)
		b = 65535u * 32u;
	return b ? (unsigned)b : 1u;
}

/* The 8 bf16 packed in u (one 16-byte load's worth) widened to fp32, in order. */
static __device__ __forceinline__ void act8_f32(float (&f)[8], uint4 u)
{
	const __nv_bfloat162 *b = reinterpret_cast<const __nv_bfloat162 *>(&u);

#pragma unroll
	for (int k = 0; k < 4; k++) {
		float2 v = __bfloat1622float2(b[k]);

		f[2 * k] = v.x;
		f[2 * k + 1] = v.y;
	}
}

/* Loads and stores of VEC consecutive act elements widened to / rounded from fp32 (VEC 8:
 * one 16-byte access, p 16-byte aligned; else element by element). */
template <int VEC> static __device__ __forceinline__ void ld_act(float (&f)[VEC], const act_t *p)
{
	if constexpr (VEC == 8) {
		act8_f32(f, *reinterpret_cast<const uint4 *>(p));
	} else {
#pragma unroll
		for (int k = 0; k < VEC; k++)
			f[k] = __bfloat162float(p[k]);
	}
}

template <int VEC> static __device__ __forceinline__ void st_act(act_t *p, const float (&f)[VEC])
{
	if constexpr (VEC == 8) {
		uint4 u;
		__nv_bfloat162 *b = reinterpret_cast<__nv_bfloat162 *>(&u);

#pragma unroll
		for (int k = 0; k < 4; k++)
			b[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
		*reinterpret_cast<uint4 *>(p) = u;
	} else {
#pragma unroll
		for (int k = 0; k < VEC; k++)
			p[k] = __float2bfloat16_rn(f[k]);
	}
}

/*
 * The one GEMM entry (cuBLASLt; gemm.cu): for i < batch,
 *   C_i (m, n) = alpha * op(A_i) op(B_i) + beta * C_i
 * row-major, A_i = a + i*stride_a elements, op(A) (m, k) stored (m, k) with leading dim lda
 * or, when ta, (k, m); B likewise (k, n) or, when tb, (n, k). A and B bf16; C bf16 or,
 * when c_f32, float; fp32 accumulation. The algorithm is chosen once per distinct
 * problem and cached; one workspace serves every call.
 */
void lbc_gemm(void *c, int c_f32, const void *a, const void *b, int m, int n, int k, int ta, int tb,
	      long long lda, long long ldb, long long ldc, long long stride_a, long long stride_b,
	      long long stride_c, int batch, float alpha, float beta);

/* --- the table's sections and ops, one file each (signatures exactly as struct lb_ops) --- */

/* memory.cu */
void *lbc_alloc(size_t n, enum lb_kind k);
void lbc_free(void *p);
void lbc_set_mem_limit(uint64_t bytes);
void lbc_mem_stats(uint64_t *live, uint64_t *peak);
void lbc_reset_peak(void);
uint64_t lbc_device_mem_peak(void);
void lbc_zero(void *p, size_t n, enum lb_kind k);
void lbc_copy(void *dst, const void *src, size_t n, enum lb_kind k);
void lbc_cast(void *dst, enum lb_kind dk, const void *src, enum lb_kind sk, size_t n);
void lbc_fill_normal(void *p, size_t n, enum lb_kind k, uint64_t seed, int key, double std);
void lbc_write(void *dst, const double *src, size_t n, enum lb_kind k);
void lbc_read(double *dst, const void *src, size_t n, enum lb_kind k);
void lbc_write_i32(int32_t *dst, const int32_t *src, size_t n);
/* gemm.cu */
void lbc_matmul(void *c, const void *a, const void *b, int m, int n, int k, int ta, int tb,
		double alpha, int accumulate, int c_f32);
void lbc_matmul_add(void *out, const void *a, const void *b, const void *addend, int m, int n,
		    int k, int ta, int tb);
/* elementwise.cu */
void lbc_add(void *out, const void *a, const void *b, size_t n);
void lbc_acc(void *y, const void *x, size_t n);
void lbc_scale(void *x, double s, size_t n);
/* reduce.cu */
void lbc_sum_acc(void *acc, const void *x, size_t n);
void lbc_sum_sq_acc(void *acc, const void *x, size_t n);
double lbc_sum(const void *x, size_t n);
double lbc_sum_sq(const void *x, size_t n);
/* adamw.cu */
void lbc_adamw(void *param, void *master, const void *grad, void *m, void *v, size_t n, double lr,
	       double b1, double b2, double eps, double wd, int step, double grad_scale);
void lbc_adamw_scalars(void *sc, int step, double b1, double b2, double grad_scale);
void lbc_clip_scale(void *sc, const void *sq, double clip);
void lbc_adamw_dev(void *param, void *master, const void *grad, void *m, void *v, size_t n,
		   double lr, double b1, double b2, double eps, double wd, const void *sc);

/* norm.cu */
void lbc_rmsnorm_fwd(void *y, void *rstd, const void *x, const void *w, int t, int h);
void lbc_rmsnorm_bwd(void *dx, void *dw, const void *dy, const void *x, const void *w,
		     const void *rstd, int t, int h);
void lbc_rmsnorm_unfused_fwd(void *y, void *xhat, void *rstd, void *scratch, const void *x,
			     const void *w, int t, int h);
void lbc_rmsnorm_unfused_bwd(void *dx, void *dw, const void *dy, const void *xhat, const void *w,
			     const void *rstd, void *scratch, int t, int h);
size_t lbc_norm_scratch(int t, int h);
/* rope.cu */
void lbc_rope_fwd(void *x, const void *cs, int t, int s, int stride, int nheads, int d);
void lbc_rope_bwd(void *dx, const void *cs, int t, int s, int stride, int nheads, int d);
/* swiglu.cu */
void lbc_swiglu_fwd(void *out, const void *gu, int t, int f);
void lbc_swiglu_bwd(void *dgu, const void *dout, const void *gu, int t, int f);
/* embed.cu */
void lbc_embed_fwd(void *out, const void *table, const int32_t *tokens, int t, int h, int v0,
		   int v);
void lbc_embed_bwd(void *dtable, const void *dout, const int32_t *tokens, int t, int h, int v0,
		   int v);
/* xent.cu */
void lbc_xent_max(void *rowmax, const void *logits, int t, int v);
void lbc_xent_sum(void *sumexp, void *tgt, const void *logits, const void *rowmax,
		  const int32_t *targets, int t, int v, int v0);
void lbc_xent_grad(void *logits, void *losses, const void *rowmax, const void *sumexp,
		   const void *tgt, const int32_t *targets, int t, int v, int v0, double scale);
/* attention.cu */
void lbc_attn_naive_fwd(void *out, void *probs, void *scratch, const void *qkv, int b, int s,
			int nh, int nkv, int d);
void lbc_attn_fused_fwd(void *out, void *probs, const void *qkv, int b, int s, int nh, int nkv,
			int d);
void lbc_attn_probs_bwd(void *dqkv, void *scratch, const void *dout, const void *probs,
			const void *qkv, int b, int s, int nh, int nkv, int d);
void lbc_attn_flash_fwd(void *out, void *lse, void *scratch, const void *qkv, int b, int s, int nh,
			int nkv, int d);
void lbc_attn_flash_bwd(void *dqkv, void *scratch, const void *dout, const void *out,
			const void *lse, const void *qkv, int b, int s, int nh, int nkv, int d);
size_t lbc_attn_scratch(int b, int s, int nh, int d);
/* attention_cudnn.cu: cuDNN's fused attention (the `cudnn` kernel) */
void lbc_attn_cudnn_fwd(void *out, void *lse, void *scratch, const void *qkv, int b, int s, int nh,
			int nkv, int d);
void lbc_attn_cudnn_bwd(void *dqkv, void *scratch, const void *dout, const void *out,
			const void *lse, const void *qkv, int b, int s, int nh, int nkv, int d);
/* The backend's shared workspace (the GEMMs' and cuDNN's plans', on the one stream), grown to
 * at least bytes if it is smaller (memory.cu; counted by the allocator). */
void *lbc_workspace(size_t bytes);

#endif
