/*
 * What the attention files share (attention.cu: naive and fused_softmax; attention_flash.cu:
 * flash): warp reductions, bf16 vectors widened to fp32 and rounded back, the launch shape
 * of one warp per row.
 */
#ifndef LB_CUDA_ATTENTION_CUH
#define LB_CUDA_ATTENTION_CUH

#include "harness/cuda/cuda_common.cuh"

#define FULL_MASK 0xffffffffu

/* ------------------------------------------------------------------------------------------
 * Small helpers: warp reductions, bf16 vectors.
 * ------------------------------------------------------------------------------------------ */

static __device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
	for (int o = 16; o; o >>= 1)
		v += __shfl_xor_sync(FULL_MASK, v, o);
	return v;
}

static __device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
	for (int o = 16; o; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
	return v;
}

/* V consecutive bf16 at p widened to fp32 (V = 8: one 16-byte load, p 16-byte aligned). */
template <int V> static __device__ __forceinline__ void ld_bf(float (&f)[V], const act_t *p)
{
	if constexpr (V == 8) {
		uint4 u = *reinterpret_cast<const uint4 *>(p);
		const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);

#pragma unroll
		for (int k = 0; k < 4; k++) {
			float2 v = __bfloat1622float2(h[k]);

			f[2 * k] = v.x;
			f[2 * k + 1] = v.y;
		}
	} else {
#pragma unroll
		for (int k = 0; k < V; k++)
			f[k] = __bfloat162float(p[k]);
	}
}

template <int V> static __device__ __forceinline__ void st_bf(act_t *p, const float (&f)[V])
{
	if constexpr (V == 8) {
		uint4 u;
		__nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&u);

#pragma unroll
		for (int k = 0; k < 4; k++)
			h[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
		*reinterpret_cast<uint4 *>(p) = u;
	} else {
#pragma unroll
		for (int k = 0; k < V; k++)
			p[k] = __float2bfloat16_rn(f[k]);
	}
}

static inline int aligned16(const void *p)
{
	return ((uintptr_t)p & 15u) == 0;
}

/* Warps of 32 threads, WPB to a block, one per item: the grid for n items. */
static inline unsigned warp_grid(size_t n, int wpb)
{
	size_t blocks = (n + wpb - 1) / wpb;

	return blocks ? (unsigned)blocks : 1u;
}

#endif
