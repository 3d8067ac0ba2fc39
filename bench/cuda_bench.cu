/*
 * The benchmarks of the CUDA backend (bench/cuda_bench.h): the GEMM of the ops table timed
 * as the trainer runs it or with any one of cuBLASLt's candidates, the device-to-device
 * copy bandwidth, the device's memory in use, and a kernel that stalls the stream. Linked
 * into the benchmarks and the tests, never into the trainer.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/cuda_bench.h"
#include "harness/cuda/core.cuh"
#include "harness/cuda/gemm.cuh"

#define GEMM_ALGOS 16 /* heuristic candidates asked for by the benchmarks */

/* ------------------------------------------------------------------------------------------
 * Benchmarks (cuda_bench.h). They allocate with cudaMalloc directly, outside the
 * counting allocator, so a bench leaves the trainer's counters alone.
 * ------------------------------------------------------------------------------------------ */

static __device__ __forceinline__ uint32_t bench_mix(uint32_t h)
{
	h ^= h >> 16; /* the murmur3 finaliser */
	h *= 0x85EBCA6Bu;
	h ^= h >> 13;
	h *= 0xC2B2AE35u;
	h ^= h >> 16;
	return h;
}

/* Uniform bf16 in [-1, 1) from a hash of the index (reproducible, no library). */
static __global__ void bench_fill_kernel(act_t *x, size_t n, uint32_t seed)
{
	for (size_t i = GRID_START; i < n; i += GRID_STEP) {
		uint32_t h = bench_mix((uint32_t)i * 0x9E3779B1u ^ (uint32_t)(i >> 32) ^ seed);

		x[i] = __float2bfloat16((float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
	}
}

/* Entries of the benchmark's C checked against a direct fp32 dot product at `samples`
 * points (the two corners, then hashed ones): *bad counts those off by more than the bf16
 * rounding of a result (2^-7 |ref|, four times the half-ulp) plus an allowance for the
 * summation order (1e-4 sum |a b|); a wrong layout or transpose is off by about |ref|. */
static __global__ void bench_check_kernel(int *bad, const void *c, int c_f32, const act_t *a,
					  const act_t *b, int m, int n, int k, int ta, int tb,
					  int samples)
{
	for (size_t s = GRID_START; s < (size_t)samples; s += GRID_STEP) {
		uint32_t h = bench_mix((uint32_t)s * 0x9E3779B1u + 7u);
		int i = s == 0 ? 0 : s == 1 ? m - 1 : (int)(h % (uint32_t)m);
		int j = s == 0 ? 0 : s == 1 ? n - 1 : (int)(bench_mix(h) % (uint32_t)n);
		size_t e = (size_t)i * n + j;
		float ref = 0.0f, mag = 0.0f, got;

		for (int p = 0; p < k; p++) {
			float x =
			    __bfloat162float(ta ? a[(size_t)p * m + i] : a[(size_t)i * k + p]);
			float y =
			    __bfloat162float(tb ? b[(size_t)j * k + p] : b[(size_t)p * n + j]);

			ref += x * y;
			mag += fabsf(x * y);
		}
		got = c_f32 ? ((const float *)c)[e] : __bfloat162float(((const act_t *)c)[e]);
		if (!(fabsf(got - ref) <= 0x1p-7f * fabsf(ref) + 1e-4f * mag))
			atomicAdd(bad, 1);
	}
}

#define BENCH_SAMPLES 256

/* One call of the benchmarks' GEMM: through lbc_gemm (algo NULL) or with algo; 0, or -1
 * when cuBLASLt refused it. */
static int bench_call(const struct lbc_gemm_plan *p, const cublasLtMatmulAlgo_t *algo,
		      const void *a, const void *b, void *c, float alpha, float beta)
{
	const struct lbc_gemm_key *q = &p->key;

	if (!algo) {
		lbc_gemm(c, q->c_f32, a, b, q->m, q->n, q->k, q->ta, q->tb, q->lda, q->ldb, q->ldc,
			 0, 0, 0, 1, alpha, beta);
		return 0;
	}
	return lbc_gemm_run(p, algo, c, NULL, a, b, alpha, beta) ? 0 : -1;
}

/* Mean seconds per call of one plan (algo NULL: through lbc_gemm, with the algorithm it
 * caches and uses, tuned by gemm_tune in the first warm-up call when the problem is new)
 * on fresh random operands, over iters calls after 3 warm-ups; -1 on a failed allocation
 * or call, -2 when the product is wrong. */
static double bench_gemm(const struct lbc_gemm_plan *p, const cublasLtMatmulAlgo_t *algo, int iters)
{
	const struct lbc_gemm_key *q = &p->key;
	size_t na = (size_t)q->m * q->k, nb = (size_t)q->k * q->n, nc = (size_t)q->m * q->n;
	size_t ces = q->c_f32 ? sizeof(float) : sizeof(act_t);
	void *a = NULL, *b = NULL, *c = NULL;
	int *bad = NULL, nbad = -1;
	cudaEvent_t ev[2] = {NULL, NULL};
	float alpha = 1.0f, beta = q->beta_nz ? 1.0f : 0.0f, ms = 0;
	double secs = -1;

	if (cudaMalloc(&a, na * sizeof(act_t)) != cudaSuccess ||
	    cudaMalloc(&b, nb * sizeof(act_t)) != cudaSuccess ||
	    cudaMalloc(&c, nc * ces) != cudaSuccess ||
	    cudaMalloc(&bad, sizeof(int)) != cudaSuccess ||
	    cudaEventCreate(&ev[0]) != cudaSuccess || cudaEventCreate(&ev[1]) != cudaSuccess)
		goto out_free;
	bench_fill_kernel<<<grid_for(na), THREADS, 0, lbc_stream()>>>((act_t *)a, na, 1u);
	bench_fill_kernel<<<grid_for(nb), THREADS, 0, lbc_stream()>>>((act_t *)b, nb, 2u);
	if (cudaMemsetAsync(c, 0, nc * ces, lbc_stream()) != cudaSuccess ||
	    cudaMemsetAsync(bad, 0, sizeof(int), lbc_stream()) != cudaSuccess)
		goto out_free;
	for (int it = -3; it < iters; it++) {
		if (it == 0 && cudaEventRecord(ev[0], lbc_stream()) != cudaSuccess)
			goto out_free;
		if (bench_call(p, algo, a, b, c, alpha, beta))
			goto out_free;
	}
	if (cudaEventRecord(ev[1], lbc_stream()) != cudaSuccess)
		goto out_free;
	/* accumulating (beta 1), C now holds the sum of every call: one more from zero */
	if (beta != 0.0f) {
		if (cudaMemsetAsync(c, 0, nc * ces, lbc_stream()) != cudaSuccess)
			goto out_free;
		if (bench_call(p, algo, a, b, c, alpha, beta))
			goto out_free;
	}
	bench_check_kernel<<<grid_for(BENCH_SAMPLES), THREADS, 0, lbc_stream()>>>(
	    bad, c, q->c_f32, (const act_t *)a, (const act_t *)b, q->m, q->n, q->k, q->ta, q->tb,
	    BENCH_SAMPLES);
	if (cudaMemcpyAsync(&nbad, bad, sizeof(int), cudaMemcpyDeviceToHost, lbc_stream()) !=
		cudaSuccess ||
	    cudaStreamSynchronize(lbc_stream()) != cudaSuccess ||
	    cudaEventElapsedTime(&ms, ev[0], ev[1]) != cudaSuccess)
		goto out_free;
	secs = nbad ? -2 : ms * 1e-3 / iters;
out_free:
	lbc_timing_end(ev, 2);
	cudaFree(bad);
	cudaFree(c);
	cudaFree(b);
	cudaFree(a);
	cudaGetLastError();
	return secs;
}

/* The plan of the benchmarks' problem: natural leading dims, batch 1, operands as
 * cudaMalloc aligns them (256 bytes); beta 1 when accum (C += A B, as the model's
 * weight-gradient GEMMs run), else 0. */
static void bench_key(struct lbc_gemm_key *key, int m, int n, int k, int ta, int tb, int c_f32,
		      int accum)
{
	lbc_gemm_key_make(key, c_f32, NULL, NULL, NULL, m, n, k, ta, tb, ta ? m : k, tb ? k : n, n,
			  0, 0, 0, 1, accum ? 1.0f : 0.0f);
}

extern "C" int lb_cuda_gemm_n_algos(int m, int n, int k, int ta, int tb, int c_f32, int accum)
{
	cublasLtMatmulHeuristicResult_t res[GEMM_ALGOS];
	struct lbc_gemm_key key;
	struct lbc_gemm_plan p;
	int got;

	if (!lbc_inited() || m <= 0 || n <= 0 || k <= 0)
		return -1;
	bench_key(&key, m, n, k, ta, tb, c_f32, accum);
	lbc_gemm_plan_init(&p, &key);
	got = lbc_gemm_heuristics(&p, res, GEMM_ALGOS);
	lbc_gemm_plan_release(&p);
	return got;
}

extern "C" double lb_cuda_gemm_seconds(int m, int n, int k, int ta, int tb, int c_f32, int accum,
				       int algo, int iters)
{
	cublasLtMatmulHeuristicResult_t res[GEMM_ALGOS];
	struct lbc_gemm_key key;
	struct lbc_gemm_plan p;
	double secs;

	if (!lbc_inited() || m <= 0 || n <= 0 || k <= 0 || algo < -1 || algo >= GEMM_ALGOS)
		return -1;
	bench_key(&key, m, n, k, ta, tb, c_f32, accum);
	if (iters < 1)
		iters = 1;
	lbc_gemm_plan_init(&p, &key);
	if (algo < 0)
		secs = bench_gemm(&p, NULL, iters);
	else if (lbc_gemm_heuristics(&p, res, GEMM_ALGOS) > algo)
		secs = bench_gemm(&p, &res[algo].algo, iters);
	else
		secs = -1;
	lbc_gemm_plan_release(&p);
	return secs;
}

extern "C" double lb_cuda_copy_bandwidth(size_t bytes, int iters)
{
	void *src = NULL, *dst = NULL;
	cudaEvent_t ev[2] = {NULL, NULL};
	double bw = -1;
	float ms = 0;

	if (!lbc_inited() || !bytes)
		return -1;
	if (iters < 1)
		iters = 1;
	if (cudaMalloc(&src, bytes) != cudaSuccess || cudaMalloc(&dst, bytes) != cudaSuccess ||
	    cudaEventCreate(&ev[0]) != cudaSuccess || cudaEventCreate(&ev[1]) != cudaSuccess ||
	    cudaMemsetAsync(src, 1, bytes, lbc_stream()) != cudaSuccess)
		goto out_free;
	for (int it = -1; it < iters; it++) {
		if (it == 0 && cudaEventRecord(ev[0], lbc_stream()) != cudaSuccess)
			goto out_free;
		if (cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, lbc_stream()) !=
		    cudaSuccess)
			goto out_free;
	}
	if (cudaEventRecord(ev[1], lbc_stream()) != cudaSuccess ||
	    cudaEventSynchronize(ev[1]) != cudaSuccess ||
	    cudaEventElapsedTime(&ms, ev[0], ev[1]) != cudaSuccess || ms <= 0)
		goto out_free;
	bw = 2.0 * (double)bytes * iters / (ms * 1e-3);
out_free:
	lbc_timing_end(ev, 2);
	cudaFree(dst);
	cudaFree(src);
	cudaGetLastError();
	return bw;
}

extern "C" double lb_cuda_mem_used(void)
{
	size_t free_b = 0, total_b = 0;

	if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
		cudaGetLastError();
		return -1;
	}
	return (double)(total_b - free_b);
}

static __global__ void stall_kernel(unsigned long long ns)
{
	unsigned long long t0, t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do {
		__nanosleep(100000);
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	} while (t - t0 < ns);
}

extern "C" int lb_cuda_stall(double seconds)
{
	if (!lbc_inited() || !(seconds > 0))
		return -1;
	stall_kernel<<<1, 1, 0, lbc_stream()>>>((unsigned long long)(seconds * 1e9));
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
