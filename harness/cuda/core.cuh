/*
 * What the files of the CUDA table's core share: ops_cuda.cu (set-up, streams, events, the
 * table), memory.cu (the allocator, casts, host transfers), gemm.cu (the GEMM and its
 * tuner), elementwise.cu, reduce.cu, adamw.cu, and the benchmarks of bench/cuda_bench.cu.
 * The launch shape of their grid-stride kernels, the cuBLASLt workspace's size, the bf16
 * vector types of their 16- and 8-byte accesses, and what each file's set-up gives the
 * others, through functions: no file writes another's state.
 */
#ifndef LB_CUDA_CORE_CUH
#define LB_CUDA_CORE_CUH

#include "harness/cuda/cuda_common.cuh"

#define THREADS	    256		/* threads per block of the elementwise kernels */
#define WORKSPACE_B (32u << 20) /* the cuBLASLt workspace, bytes */

static inline unsigned grid_for(size_t items)
{
	return lbc_blocks(items, THREADS);
}

/* Grid-stride loop bounds of the calling thread. */
#define GRID_START ((size_t)blockIdx.x * blockDim.x + threadIdx.x)
#define GRID_STEP  ((size_t)gridDim.x * blockDim.x)

static inline int aligned(const void *p, size_t bytes)
{
	return ((uintptr_t)p % bytes) == 0;
}

struct alignas(16) bf16x8 {
	act_t v[8];
};
struct alignas(8) bf16x4 {
	act_t v[4];
};

/* ops_cuda.cu: 1 once init succeeded; the device it bound (its ordinal) and the device's
 * multiprocessor count. */
int lbc_inited(void);
int lbc_device(void);
int lbc_sm_count(void);

/* memory.cu: bytes of device memory counted by the allocator, zero-filled (the fill is
 * enqueued on lbc_stream()), or NULL (a limit breach or a failed cudaMalloc); the workspace's
 * first WORKSPACE_B bytes (init; 0, or -1 when the device is full); the bytes per element
 * of each buffer kind. */
void *lbc_mem_alloc_bytes(size_t bytes);
int lbc_workspace_init(void);
size_t lbc_kind_size(enum lb_kind k);

/* gemm.cu: the cuBLASLt handle (init; 0, or -1 when cublasLtCreate fails). */
int lbc_gemm_init(void);

/* reduce.cu: the device double sum and sum_sq accumulate into, and the pinned one their
 * value is read back through (init; each 0, or -1 when the memory cannot be had). */
int lbc_reduce_init_dev(void);
int lbc_reduce_init_host(void);

#endif
