/*
 * The CUDA table's reductions (harness/ops.h sum_acc, sum_sq_acc, sum, sum_sq): a sum of
 * f32 elements, or of their squares, into one device double.
 */
#include "harness/cuda/core.cuh"

/* Set at init: the one device double sum and sum_sq accumulate into, and its pinned copy. */
static struct {
	double *red;	  /* one device double: sum / sum_sq accumulate here */
	double *red_host; /* one pinned double: its value read back */
} lbc;

/* ------------------------------------------------------------------------------------------
 * Reductions: acc (one device double) += sum of x or of x^2 (f32). Each thread and then
 * each block sums in fp32 (warp shuffles, then the block's warps); the blocks' partial
 * sums meet in fp64 through atomicAdd(double) (sm_60+). The order of the atomics varies,
 * so the last bits of the fp64 total may differ from run to run.
 * ------------------------------------------------------------------------------------------ */

template <int SQ> static __device__ __forceinline__ float red_term(float x)
{
	return SQ ? x * x : x;
}

template <int SQ>
static __global__ void sum_kernel(double *acc, const float *x, size_t n, size_t nvec)
{
	__shared__ float warp_sum[THREADS / 32];
	float s = 0.0f;

	for (size_t i = GRID_START; i < nvec; i += GRID_STEP) {
		float4 u = ((const float4 *)x)[i];

		s += (red_term<SQ>(u.x) + red_term<SQ>(u.y)) +
		     (red_term<SQ>(u.z) + red_term<SQ>(u.w));
	}
	for (size_t i = nvec * 4 + GRID_START; i < n; i += GRID_STEP)
		s += red_term<SQ>(x[i]);
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_down_sync(0xffffffffu, s, o);
	if ((threadIdx.x & 31) == 0)
		warp_sum[threadIdx.x >> 5] = s;
	__syncthreads();
	if (threadIdx.x < 32) {
		s = threadIdx.x < THREADS / 32 ? warp_sum[threadIdx.x] : 0.0f;
		for (int o = 16; o > 0; o >>= 1)
			s += __shfl_down_sync(0xffffffffu, s, o);
		if (threadIdx.x == 0)
			atomicAdd(acc, (double)s);
	}
}

static void sum_enqueue(double *acc, const void *x, size_t n, int sq)
{
	size_t nvec = aligned(x, 16) ? n / 4 : 0;
	unsigned blocks = grid_for(nvec + (n - nvec * 4));
	unsigned cap = (unsigned)(lbc_sm_count() > 0 ? lbc_sm_count() : 132) * 8;

	if (!n)
		return;
	if (blocks > cap) /* enough to fill the device; fewer atomics */
		blocks = cap;
	if (sq)
		sum_kernel<1><<<blocks, THREADS, 0, lbc_stream()>>>(acc, (const float *)x, n, nvec);
	else
		sum_kernel<0><<<blocks, THREADS, 0, lbc_stream()>>>(acc, (const float *)x, n, nvec);
	LBC_LAUNCHED();
}

void lbc_sum_acc(void *acc, const void *x, size_t n)
{
	sum_enqueue((double *)acc, x, n, 0);
}

void lbc_sum_sq_acc(void *acc, const void *x, size_t n)
{
	sum_enqueue((double *)acc, x, n, 1);
}

static double sum_now(const void *x, size_t n, int sq)
{
	lbc_graph_guard("sum");
	LBC_CHECK(cudaMemsetAsync(lbc.red, 0, sizeof(double), lbc_stream()));
	sum_enqueue(lbc.red, x, n, sq);
	LBC_CHECK(cudaMemcpyAsync(lbc.red_host, lbc.red, sizeof(double), cudaMemcpyDeviceToHost,
				  lbc_stream()));
	LBC_CHECK(cudaStreamSynchronize(lbc_stream()));
	return *lbc.red_host;
}

double lbc_sum(const void *x, size_t n)
{
	return sum_now(x, n, 0);
}

double lbc_sum_sq(const void *x, size_t n)
{
	return sum_now(x, n, 1);
}

int lbc_reduce_init_dev(void)
{
	lbc.red = (double *)lbc_mem_alloc_bytes(sizeof(double));
	return lbc.red ? 0 : -1;
}

int lbc_reduce_init_host(void)
{
	return cudaMallocHost((void **)&lbc.red_host, sizeof(double)) == cudaSuccess ? 0 : -1;
}
