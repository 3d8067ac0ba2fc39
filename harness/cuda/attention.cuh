/*
 * What the attention files share (attention.cu: naive and fused_softmax; attention_flash.cu:
 * flash): warp reductions, the launch of one warp per row. Their bf16 vectors are
 * widened and rounded back with the backend's ld_act / st_act (cuda_common.cuh).
 */
#ifndef LB_CUDA_ATTENTION_CUH
#define LB_CUDA_ATTENTION_CUH

#include "harness/cuda/cuda_common.cuh"

#define FULL_MASK 0xffffffffu

/* ------------------------------------------------------------------------------------------
 * Small helpers: warp reductions.
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

/* Launch of kern (a kernel of that shape) with one warp per row of rows, WPB warps to a
 * block, then the launch check. */
template <int WPB, typename K, typename... A>
static void warp_launch(K kern, size_t rows, A... args)
{
	kern<<<warp_grid(rows, WPB), WPB * 32, 0, lbc_stream()>>>(args...);
	LBC_LAUNCHED();
}

#endif
