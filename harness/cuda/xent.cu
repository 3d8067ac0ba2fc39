/*
 * Cross-entropy fused with the softmax over a vocab-parallel shard of the logits on the GPU
 * (Megatron-LM, Shoeybi et al. 2019, sec. 3: each tensor-parallel rank holds V columns
 * [v0, v0 + V) of the (T, vocab) logits and the ranks all-reduce three per-row statistics
 * instead of gathering the logits), in three kernels so the model can all-reduce between them:
 *   xent_max:  rowmax[t] = max_j z[t, j]                       (then all-reduce MAX)
 *   xent_sum:  sumexp[t] = sum_j exp(z[t, j] - rowmax[t]),
 *              tgt[t] = z[t, targets[t] - v0] when the target is in the shard, else 0
 *                                                              (then all-reduce SUM both)
 *   xent_grad: losses[t] = log(sumexp[t]) + rowmax[t] - tgt[t]  (-log softmax of the target),
 *              z[t, j] := scale * (exp(z[t, j] - rowmax[t]) / sumexp[t] - [j == target]),
 * the gradient of scale * loss (softmax minus one-hot) replacing the logits in place; the
 * same functions as harness/ops_cpu_impl.h. Operands: logits act (bf16, T*V elements, up to
 * 2.1e9 at Llama-13B width: 64-bit offsets); rowmax, sumexp, tgt, losses f32 (T); targets
 * i32 device memory. Math in fp32 (expf in both the sum and the gradient, so the softmax sums
 * to one within rounding), each gradient rounded once to bf16. Decomposition: one block per
 * row (grid T), its threads striding over the row in 16-byte vectors (8 bf16) when V is a
 * multiple of 8 and the logits are 16-byte aligned, element by element otherwise; the max and
 * the sum are block reductions (warp shuffles, then one warp over the warps' partials).
 */
#include "harness/cuda/cuda_common.cuh"

#include <math.h>

#define XENT_MAX_THREADS 512

/* Reduction of v over the block (MAX: fmaxf, else +), returned to every thread. blockDim.x is
 * a multiple of 32 and every thread of the block calls it (full-mask shuffles). */
template <bool MAX> static __device__ __forceinline__ float block_reduce(float v)
{
	__shared__ float part[32];
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;

#pragma unroll
	for (int o = 16; o; o >>= 1) {
		float u = __shfl_xor_sync(0xffffffffu, v, o);

		v = MAX ? fmaxf(v, u) : v + u;
	}
	__syncthreads(); /* a previous call's readers are done with part[] */
	if (lane == 0)
		part[warp] = v;
	__syncthreads();
	v = lane < nwarps ? part[lane] : (MAX ? -INFINITY : 0.0f);
#pragma unroll
	for (int o = 16; o; o >>= 1) {
		float u = __shfl_xor_sync(0xffffffffu, v, o);

		v = MAX ? fmaxf(v, u) : v + u;
	}
	return v;
}

template <int VEC>
static __global__ void __launch_bounds__(XENT_MAX_THREADS)
    xent_max_kernel(float *__restrict__ rowmax, const act_t *__restrict__ logits, int v)
{
	const act_t *z = logits + (size_t)blockIdx.x * v;
	float m = -INFINITY;

	for (int j = threadIdx.x * VEC; j < v; j += blockDim.x * VEC) {
		float f[VEC];

		ld_act<VEC>(f, z + j);
#pragma unroll
		for (int k = 0; k < VEC; k++)
			m = fmaxf(m, f[k]);
	}
	m = block_reduce<true>(m);
	if (threadIdx.x == 0)
		rowmax[blockIdx.x] = m;
}

template <int VEC>
static __global__ void __launch_bounds__(XENT_MAX_THREADS)
    xent_sum_kernel(float *__restrict__ sumexp, float *__restrict__ tgt,
		    const act_t *__restrict__ logits, const float *__restrict__ rowmax,
		    const int32_t *__restrict__ targets, int v, int v0)
{
	const act_t *z = logits + (size_t)blockIdx.x * v;
	float m = rowmax[blockIdx.x], s = 0.0f;

	for (int j = threadIdx.x * VEC; j < v; j += blockDim.x * VEC) {
		float f[VEC];

		ld_act<VEC>(f, z + j);
#pragma unroll
		for (int k = 0; k < VEC; k++)
			s += expf(f[k] - m);
	}
	s = block_reduce<false>(s);
	if (threadIdx.x == 0) {
		int c = targets[blockIdx.x] - v0;

		sumexp[blockIdx.x] = s;
		tgt[blockIdx.x] = c >= 0 && c < v ? __bfloat162float(z[c]) : 0.0f;
	}
}

template <int VEC>
static __global__ void __launch_bounds__(XENT_MAX_THREADS)
    xent_grad_kernel(act_t *__restrict__ logits, float *__restrict__ losses,
		     const float *__restrict__ rowmax, const float *__restrict__ sumexp,
		     const float *__restrict__ tgt, const int32_t *__restrict__ targets, int v,
		     int v0, float scale)
{
	act_t *z = logits + (size_t)blockIdx.x * v;
	float m = rowmax[blockIdx.x], se = sumexp[blockIdx.x];
	float inv = 1.0f / se;
	int c = targets[blockIdx.x] - v0; /* outside [0, v): no one-hot term in this shard */

	if (threadIdx.x == 0)
		losses[blockIdx.x] = logf(se) + m - tgt[blockIdx.x];
	for (int j = threadIdx.x * VEC; j < v; j += blockDim.x * VEC) {
		float f[VEC];

		ld_act<VEC>(f, z + j);
#pragma unroll
		for (int k = 0; k < VEC; k++)
			f[k] = scale * (expf(f[k] - m) * inv - (j + k == c ? 1.0f : 0.0f));
		st_act<VEC>(z + j, f);
	}
}

static int vec8(const void *logits, int v)
{
	return v % 8 == 0 && ((uintptr_t)logits & 15u) == 0;
}

/* Whole warps, one vector per thread up to XENT_MAX_THREADS. */
static unsigned row_threads(int v, int vec)
{
	unsigned n = (unsigned)((v / vec + 31) / 32 * 32);

	if (n < 32)
		n = 32;
	return n > XENT_MAX_THREADS ? XENT_MAX_THREADS : n;
}

void lbc_xent_max(void *rowmax, const void *logits, int t, int v)
{
	if (t <= 0 || v <= 0)
		return;
	if (vec8(logits, v))
		xent_max_kernel<8><<<t, row_threads(v, 8), 0, lbc_stream()>>>(
		    (float *)rowmax, (const act_t *)logits, v);
	else
		xent_max_kernel<1><<<t, row_threads(v, 1), 0, lbc_stream()>>>(
		    (float *)rowmax, (const act_t *)logits, v);
	LBC_LAUNCHED();
}

void lbc_xent_sum(void *sumexp, void *tgt, const void *logits, const void *rowmax,
		  const int32_t *targets, int t, int v, int v0)
{
	if (t <= 0 || v <= 0)
		return;
	if (vec8(logits, v))
		xent_sum_kernel<8><<<t, row_threads(v, 8), 0, lbc_stream()>>>(
		    (float *)sumexp, (float *)tgt, (const act_t *)logits, (const float *)rowmax,
		    targets, v, v0);
	else
		xent_sum_kernel<1><<<t, row_threads(v, 1), 0, lbc_stream()>>>(
		    (float *)sumexp, (float *)tgt, (const act_t *)logits, (const float *)rowmax,
		    targets, v, v0);
	LBC_LAUNCHED();
}

void lbc_xent_grad(void *logits, void *losses, const void *rowmax, const void *sumexp,
		   const void *tgt, const int32_t *targets, int t, int v, int v0, double scale)
{
	if (t <= 0 || v <= 0)
		return;
	if (vec8(logits, v))
		xent_grad_kernel<8><<<t, row_threads(v, 8), 0, lbc_stream()>>>(
		    (act_t *)logits, (float *)losses, (const float *)rowmax, (const float *)sumexp,
		    (const float *)tgt, targets, v, v0, (float)scale);
	else
		xent_grad_kernel<1><<<t, row_threads(v, 1), 0, lbc_stream()>>>(
		    (act_t *)logits, (float *)losses, (const float *)rowmax, (const float *)sumexp,
		    (const float *)tgt, targets, v, v0, (float)scale);
	LBC_LAUNCHED();
}
