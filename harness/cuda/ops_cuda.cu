/*
 * The core of the CUDA backend: the ops table "cuda" (harness/ops.h) and what every op
 * shares: device set-up (one GPU per node-local rank, one non-blocking stream, one
 * cuBLASLt handle and workspace), a counting device allocator with a cap on live bytes
 * (--mem-limit), host <-> device transfers through pinned staging memory, events, the one
 * GEMM entry lbc_gemm (row-major over cuBLASLt, the fastest of the heuristic's candidates,
 * timed once per problem and cached), the elementwise ops and reductions, the fused AdamW,
 * and the benchmarks of cuda_bench.h. The per-operation kernels (norm, RoPE, attention,
 * SwiGLU, embedding, cross-entropy) live in their own files; this one only puts them in
 * the table. Element types: ACT bf16, F32 float, F64 double, I32 int32
 * (harness/cuda/cuda_common.cuh). Every op is enqueued on lbc_stream; only read, sum,
 * sum_sq, event_elapsed and sync wait, and lbc_gemm on the first call of each distinct
 * problem (the tuning; the first, warm-up step), which also briefly holds a scratch copy of
 * C outside the counting allocator (LAYOUTBENCH_GEMM_TUNE=0: no tuning, no wait). The
 * trainer drives the backend from one host thread: nothing here takes a lock. The table's
 * graph members are graph.cu's; the replay table they hand out is built here.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cuda/cuda_bench.h"
#include "harness/cuda/cuda_common.cuh"
#include "harness/rng.h"
extern "C" {
#include "harness/comm_cuda.h"
}

cudaStream_t lbc_stream;
cublasLtHandle_t lbc_lt;

#define THREADS	    256		/* threads per block of the elementwise kernels */
#define WORKSPACE_B (32u << 20) /* the cuBLASLt workspace, bytes */
#define STAGE_B	    (16u << 20) /* each of the two pinned buffers of write/read, bytes */
#define RING_N	    8		/* pinned chunks of write_i32 */
#define RING_MIN_B  (64u << 10) /* smallest chunk, bytes */
#define GEMM_ALGOS  16		/* heuristic candidates asked for by the benchmarks */
#define TUNE_ALGOS                                                                                 \
	16	    /* heuristic candidates lbc_gemm times on a new problem (all the               \
		     * benchmarks ask for: the ceiling is the best of the same list) */
#define TUNE_RUNS 3 /* timed runs of each candidate, after one warm-up */

static const size_t kind_size[LB_NKINDS] = {sizeof(act_t), sizeof(float), sizeof(double),
					    sizeof(int32_t)};

/* Set at init. */
static struct {
	int inited;
	int device;
	int sm_count;
	void *workspace; /* ws_bytes (at least WORKSPACE_B), counted by the allocator */
	size_t ws_bytes;
	double *red;	  /* one device double: sum / sum_sq accumulate here */
	double *red_host; /* one pinned double: its value read back */
} lbc;

static unsigned grid_for(size_t items)
{
	return lbc_blocks(items, THREADS);
}

/* Grid-stride loop bounds of the calling thread. */
#define GRID_START ((size_t)blockIdx.x * blockDim.x + threadIdx.x)
#define GRID_STEP  ((size_t)gridDim.x * blockDim.x)

static int aligned(const void *p, size_t bytes)
{
	return ((uintptr_t)p % bytes) == 0;
}

/* ------------------------------------------------------------------------------------------
 * Memory: a counting allocator. One cudaMalloc per buffer; the sizes live in an
 * open-addressing hash table keyed by pointer (linear probing, tombstones), because
 * free_ is given only the pointer. A limit breach or a failed cudaMalloc returns NULL
 * (the caller reports an out-of-memory); nothing here exits on a full device.
 * ------------------------------------------------------------------------------------------ */

#define SLOT_TOMB ((void *)1) /* a freed slot; cudaMalloc never returns 1 */

struct mem_slot {
	void *p; /* NULL: never used; SLOT_TOMB: freed */
	size_t bytes;
};

static struct {
	struct mem_slot *slot;
	size_t cap;  /* power of two (0 before the first allocation) */
	size_t used; /* live plus tombstone slots */
	size_t count;
	uint64_t limit, live, peak;
	uint64_t dev_peak; /* the device's used memory, most seen since reset_peak (bytes) */
} mem;

static size_t mem_hash(const void *p, size_t cap)
{
	/* cudaMalloc aligns to 256 bytes: drop the zero bits, then Fibonacci hashing */
	uint64_t h = ((uint64_t)(uintptr_t)p >> 8) * 0x9E3779B97F4A7C15ull;

	return (size_t)(h >> 20) & (cap - 1);
}

/* 1 when p took a never-used slot (not a tombstone). */
static int mem_put(struct mem_slot *slot, size_t cap, void *p, size_t bytes)
{
	size_t i = mem_hash(p, cap);
	int fresh;

	while (slot[i].p && slot[i].p != SLOT_TOMB)
		i = (i + 1) & (cap - 1);
	fresh = !slot[i].p;
	slot[i].p = p;
	slot[i].bytes = bytes;
	return fresh;
}

/* Room for one more entry: rehash (dropping tombstones) at half load. 0, or -1 when the
 * host table cannot grow. */
static int mem_reserve(void)
{
	struct mem_slot *ns;
	size_t ncap;

	if ((mem.used + 1) * 2 <= mem.cap)
		return 0;
	ncap = mem.cap ? mem.cap : 256;
	while ((mem.count + 1) * 4 > ncap)
		ncap *= 2;
	ns = (struct mem_slot *)calloc(ncap, sizeof(*ns));
	if (!ns)
		return -1;
	for (size_t i = 0; i < mem.cap; i++)
		if (mem.slot[i].p && mem.slot[i].p != SLOT_TOMB)
			mem_put(ns, ncap, mem.slot[i].p, mem.slot[i].bytes);
	free(mem.slot);
	mem.slot = ns;
	mem.cap = ncap;
	mem.used = mem.count;
	return 0;
}

static struct mem_slot *mem_find(const void *p)
{
	if (!mem.cap)
		return NULL;
	for (size_t i = mem_hash(p, mem.cap);; i = (i + 1) & (mem.cap - 1)) {
		if (!mem.slot[i].p)
			return NULL;
		if (mem.slot[i].p == p)
			return &mem.slot[i];
	}
}

/* bytes of zero-filled device memory (the fill is enqueued on lbc_stream), or NULL. */
static void mem_sample_device(void);

static void *mem_alloc_bytes(size_t bytes)
{
	void *p = NULL;

	if (mem.limit && mem.live + bytes > mem.limit)
		return NULL;
	if (mem_reserve())
		return NULL;
	if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess || !p) {
		cudaGetLastError(); /* clear the error: the caller reports the oom */
		return NULL;
	}
	if (bytes)
		LBC_CHECK(cudaMemsetAsync(p, 0, bytes, lbc_stream));
	mem.used += mem_put(mem.slot, mem.cap, p, bytes);
	mem.count++;
	mem.live += bytes;
	if (mem.live > mem.peak)
		mem.peak = mem.live;
	mem_sample_device();
	return p;
}

static void *cuda_alloc(size_t n, enum lb_kind k)
{
	size_t es;

	lbc_graph_guard("alloc");
	if ((unsigned)k >= LB_NKINDS)
		return NULL;
	es = kind_size[k];
	if (n > SIZE_MAX / es)
		return NULL;
	return mem_alloc_bytes(n * es);
}

static void cuda_free(void *p)
{
	struct mem_slot *s;

	if (!p)
		return;
	lbc_graph_guard("free");
	s = mem_find(p);
	if (!s)
		lb_fatal(__FILE__, __LINE__, "error", "free of %p, which the allocator never gave",
			 p);
	/* cudaFree waits for the device: work still reading p has finished; a graph that
	 * names p must not run again */
	LBC_CHECK(cudaFree(p));
	lbc_graph_invalidate();
	mem.live -= s->bytes;
	mem.count--;
	s->p = SLOT_TOMB;
	s->bytes = 0;
}

void *lbc_workspace(size_t bytes)
{
	void *p;

	if (bytes <= lbc.ws_bytes)
		return lbc.workspace;
	/* not inside a capture: the captured work is dropped and runs again, eagerly, where
	 * the workspace can grow (the graphs that name the old one are dropped then) */
	if (lbc_graph_abort("the shared workspace would have to grow"))
		return lbc.workspace;
	p = mem_alloc_bytes(bytes);
	if (!p)
		lb_fatal(__FILE__, __LINE__, "oom", "%zu bytes of workspace on CUDA device %d",
			 bytes, lbc.device);
	cuda_free(lbc.workspace); /* waits for the work that still reads it */
	lbc.workspace = p;
	lbc.ws_bytes = bytes;
	return p;
}

static void cuda_set_mem_limit(uint64_t bytes)
{
	mem.limit = bytes;
}

static void cuda_mem_stats(uint64_t *live, uint64_t *peak)
{
	if (live)
		*live = mem.live;
	if (peak)
		*peak = mem.peak;
}

static void cuda_reset_peak(void)
{
	mem.peak = mem.live;
	mem.dev_peak = 0;
	mem_sample_device();
}

/* The device's used memory now (total - free), folded into dev_peak. cudaMemGetInfo
 * neither synchronizes nor enqueues work; a failure leaves the reading as it was. */
static void mem_sample_device(void)
{
	size_t free_b = 0, total_b = 0;

	if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
		cudaGetLastError();
		return;
	}
	if (total_b >= free_b && total_b - free_b > mem.dev_peak)
		mem.dev_peak = total_b - free_b;
}

static uint64_t cuda_device_mem_peak(void)
{
	mem_sample_device();
	return mem.dev_peak;
}

/* ------------------------------------------------------------------------------------------
 * Zero, copy, cast. A cast goes through double: every source type converts to double
 * exactly and the one conversion to the destination rounds once (to nearest even), so
 * any pair gives the correctly rounded value.
 * ------------------------------------------------------------------------------------------ */

static void cuda_zero(void *p, size_t n, enum lb_kind k)
{
	if (n)
		LBC_CHECK(cudaMemsetAsync(p, 0, n * kind_size[k], lbc_stream));
}

static void cuda_copy(void *dst, const void *src, size_t n, enum lb_kind k)
{
	if (n)
		LBC_CHECK(cudaMemcpyAsync(dst, src, n * kind_size[k], cudaMemcpyDeviceToDevice,
					  lbc_stream));
}

static __device__ __forceinline__ double to_d(act_t x)
{
	return (double)__bfloat162float(x);
}
static __device__ __forceinline__ double to_d(float x)
{
	return (double)x;
}
static __device__ __forceinline__ double to_d(double x)
{
	return x;
}
static __device__ __forceinline__ void put_d(act_t *p, double x)
{
	*p = __double2bfloat16(x);
}
static __device__ __forceinline__ void put_d(float *p, double x)
{
	*p = (float)x;
}
static __device__ __forceinline__ void put_d(double *p, double x)
{
	*p = x;
}

template <typename D, typename S> static __global__ void cast_kernel(D *dst, const S *src, size_t n)
{
	for (size_t i = GRID_START; i < n; i += GRID_STEP)
		put_d(&dst[i], to_d(src[i]));
}

template <typename D> static void cast_from(D *dst, const void *src, enum lb_kind sk, size_t n)
{
	switch (sk) {
	case LB_K_ACT:
		cast_kernel<<<grid_for(n), THREADS, 0, lbc_stream>>>(dst, (const act_t *)src, n);
		break;
	case LB_K_F32:
		cast_kernel<<<grid_for(n), THREADS, 0, lbc_stream>>>(dst, (const float *)src, n);
		break;
	default:
		cast_kernel<<<grid_for(n), THREADS, 0, lbc_stream>>>(dst, (const double *)src, n);
		break;
	}
	LBC_LAUNCHED();
}

/* The model's initialisation (ops.h fill_normal): draws in fp64, as on the CPU. */
template <typename D>
static __global__ void fill_normal_kernel(D *p, size_t n, uint64_t seed, int key, double std)
{
	for (size_t i = GRID_START; i < n; i += GRID_STEP)
		put_d(&p[i], std * lb_normal_at(seed, key, (uint64_t)i));
}

static void cuda_fill_normal(void *p, size_t n, enum lb_kind k, uint64_t seed, int key, double std)
{
	if (!n)
		return;
	switch (k) {
	case LB_K_ACT:
		fill_normal_kernel<<<grid_for(n), THREADS, 0, lbc_stream>>>((act_t *)p, n, seed,
									    key, std);
		break;
	case LB_K_F32:
		fill_normal_kernel<<<grid_for(n), THREADS, 0, lbc_stream>>>((float *)p, n, seed,
									    key, std);
		break;
	case LB_K_F64:
		fill_normal_kernel<<<grid_for(n), THREADS, 0, lbc_stream>>>((double *)p, n, seed,
									    key, std);
		break;
	default:
		lb_fatal(__FILE__, __LINE__, "error", "fill_normal into kind %d", (int)k);
	}
	LBC_LAUNCHED();
}

static void cuda_cast(void *dst, enum lb_kind dk, const void *src, enum lb_kind sk, size_t n)
{
	if (dk == LB_K_I32 || sk == LB_K_I32 || (unsigned)dk >= LB_NKINDS ||
	    (unsigned)sk >= LB_NKINDS)
		lb_fatal(__FILE__, __LINE__, "error",
			 "cast from kind %d to kind %d: only act, f32 and f64 convert", (int)sk,
			 (int)dk);
	if (!n)
		return;
	if (dk == sk) {
		cuda_copy(dst, src, n, dk);
		return;
	}
	switch (dk) {
	case LB_K_ACT:
		cast_from((act_t *)dst, src, sk, n);
		break;
	case LB_K_F32:
		cast_from((float *)dst, src, sk, n);
		break;
	default:
		cast_from((double *)dst, src, sk, n);
		break;
	}
}

/* ------------------------------------------------------------------------------------------
 * Host transfers. write and read convert on the host (double <-> the kind's type, bf16
 * rounded to nearest even by __double2bfloat16) in two pinned staging buffers used in
 * turn, so converting one chunk overlaps copying the other; both wait before returning
 * (init and tests only). write_i32 (token ids, every micro-batch) copies into a ring of
 * pinned chunks and records an event per chunk: it waits only when it comes back to a
 * chunk whose copy is still in flight, so the caller's array is free at once and no
 * micro-batch synchronises.
 * ------------------------------------------------------------------------------------------ */

static struct {
	void *buf[2]; /* STAGE_B bytes each, pinned */
	cudaEvent_t ev[2];
	int pending[2]; /* a copy from/to buf[i] may be in flight */
} stage;

static struct {
	int32_t *buf[RING_N]; /* pinned */
	size_t cap[RING_N];   /* elements */
	cudaEvent_t ev[RING_N];
	int pending[RING_N];
	int next;
} ring;

static void stage_init(void)
{
	if (stage.buf[0])
		return;
	for (int i = 0; i < 2; i++) {
		LBC_CHECK(cudaMallocHost(&stage.buf[i], STAGE_B));
		LBC_CHECK(cudaEventCreateWithFlags(&stage.ev[i], cudaEventDisableTiming));
	}
}

static void stage_wait(int i)
{
	if (stage.pending[i])
		LBC_CHECK(cudaEventSynchronize(stage.ev[i]));
	stage.pending[i] = 0;
}

static void host_to_kind(void *dst, const double *src, size_t n, enum lb_kind k)
{
	switch (k) {
	case LB_K_ACT:
		for (size_t i = 0; i < n; i++)
			((act_t *)dst)[i] = __double2bfloat16(src[i]);
		break;
	case LB_K_F32:
		for (size_t i = 0; i < n; i++)
			((float *)dst)[i] = (float)src[i];
		break;
	case LB_K_F64:
		memcpy(dst, src, n * sizeof(double));
		break;
	default:
		for (size_t i = 0; i < n; i++)
			((int32_t *)dst)[i] = (int32_t)src[i];
		break;
	}
}

static void kind_to_host(double *dst, const void *src, size_t n, enum lb_kind k)
{
	switch (k) {
	case LB_K_ACT:
		for (size_t i = 0; i < n; i++)
			dst[i] = (double)__bfloat162float(((const act_t *)src)[i]);
		break;
	case LB_K_F32:
		for (size_t i = 0; i < n; i++)
			dst[i] = (double)((const float *)src)[i];
		break;
	case LB_K_F64:
		memcpy(dst, src, n * sizeof(double));
		break;
	default:
		for (size_t i = 0; i < n; i++)
			dst[i] = (double)((const int32_t *)src)[i];
		break;
	}
}

static void cuda_write(void *dst, const double *src, size_t n, enum lb_kind k)
{
	size_t es = kind_size[k], chunk = STAGE_B / es;
	int b = 0;

	if (!n)
		return;
	lbc_graph_guard("write");
	stage_init();
	for (size_t off = 0; off < n; off += chunk, b ^= 1) {
		size_t cnt = n - off < chunk ? n - off : chunk;

		stage_wait(b);
		host_to_kind(stage.buf[b], src + off, cnt, k);
		LBC_CHECK(cudaMemcpyAsync((char *)dst + off * es, stage.buf[b], cnt * es,
					  cudaMemcpyHostToDevice, lbc_stream));
		LBC_CHECK(cudaEventRecord(stage.ev[b], lbc_stream));
		stage.pending[b] = 1;
	}
	stage_wait(0);
	stage_wait(1);
}

/* Enqueue the device -> host copy of chunk `off` of read into stage buffer b. */
static void read_enqueue(int b, const void *src, size_t off, size_t cnt, size_t es)
{
	LBC_CHECK(cudaMemcpyAsync(stage.buf[b], (const char *)src + off * es, cnt * es,
				  cudaMemcpyDeviceToHost, lbc_stream));
	LBC_CHECK(cudaEventRecord(stage.ev[b], lbc_stream));
	stage.pending[b] = 1;
}

static void cuda_read(double *dst, const void *src, size_t n, enum lb_kind k)
{
	size_t es = kind_size[k], chunk = STAGE_B / es;
	int b = 0;

	if (!n)
		return;
	lbc_graph_guard("read");
	stage_init();
	read_enqueue(0, src, 0, n < chunk ? n : chunk, es);
	for (size_t off = 0; off < n; off += chunk, b ^= 1) {
		size_t cnt = n - off < chunk ? n - off : chunk, next = off + chunk;

		if (next < n) /* the next chunk copies while this one converts */
			read_enqueue(b ^ 1, src, next, n - next < chunk ? n - next : chunk, es);
		stage_wait(b);
		kind_to_host(dst + off, stage.buf[b], cnt, k);
	}
}

static void cuda_write_i32(int32_t *dst, const int32_t *src, size_t n)
{
	int i = ring.next;

	if (!n)
		return;
	lbc_graph_guard("write_i32");
	ring.next = (ring.next + 1) % RING_N;
	if (!ring.ev[i])
		LBC_CHECK(cudaEventCreateWithFlags(&ring.ev[i], cudaEventDisableTiming));
	if (ring.pending[i])
		LBC_CHECK(cudaEventSynchronize(ring.ev[i]));
	ring.pending[i] = 0;
	if (ring.cap[i] < n) {
		size_t cap = ring.cap[i] ? ring.cap[i] : RING_MIN_B / sizeof(int32_t);

		while (cap < n)
			cap *= 2;
		if (ring.buf[i])
			LBC_CHECK(cudaFreeHost(ring.buf[i]));
		ring.buf[i] = NULL;
		ring.cap[i] = 0;
		LBC_CHECK(cudaMallocHost((void **)&ring.buf[i], cap * sizeof(int32_t)));
		ring.cap[i] = cap;
	}
	memcpy(ring.buf[i], src, n * sizeof(int32_t));
	LBC_CHECK(cudaMemcpyAsync(dst, ring.buf[i], n * sizeof(int32_t), cudaMemcpyHostToDevice,
				  lbc_stream));
	LBC_CHECK(cudaEventRecord(ring.ev[i], lbc_stream));
	ring.pending[i] = 1;
}

/* ------------------------------------------------------------------------------------------
 * Ordering and time: the one stream, and events recorded on it.
 * ------------------------------------------------------------------------------------------ */

static void *cuda_stream(void)
{
	return (void *)lbc_stream;
}

static void cuda_sync(void)
{
	lbc_graph_guard("sync");
	LBC_CHECK(cudaStreamSynchronize(lbc_stream));
}

static void *cuda_event_create(void)
{
	cudaEvent_t ev;

	if (cudaEventCreate(&ev) != cudaSuccess) {
		cudaGetLastError();
		return NULL;
	}
	return (void *)ev;
}

static void cuda_event_destroy(void *ev)
{
	if (ev)
		LBC_CHECK(cudaEventDestroy((cudaEvent_t)ev));
}

static void cuda_event_record(void *ev)
{
	lbc_graph_guard("event_record");
	LBC_CHECK(cudaEventRecord((cudaEvent_t)ev, lbc_stream));
}

/* The side stream and the pipeline's p2p stream (created at init) and the backend's own:
 * lbc_stream is whichever the following ops go to. */
static cudaStream_t main_stream, side, p2p;

cudaStream_t lbc_main_stream(void)
{
	return main_stream;
}

static void *cuda_side_stream(void)
{
	return (void *)side;
}

static void *cuda_p2p_stream(void)
{
	return (void *)p2p;
}

static void cuda_use_stream(void *s)
{
	lbc_graph_guard("use_stream");
	lbc_stream = s ? (cudaStream_t)s : main_stream;
}

static void cuda_wait_event(void *ev)
{
	lbc_graph_guard("wait_event");
	LBC_CHECK(cudaStreamWaitEvent(lbc_stream, (cudaEvent_t)ev, 0));
}

static double cuda_event_elapsed(void *a, void *b)
{
	float ms = 0;

	lbc_graph_guard("event_elapsed");
	LBC_CHECK(cudaEventSynchronize((cudaEvent_t)b));
	LBC_CHECK(cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b));
	return ms * 1e-3;
}

/* ------------------------------------------------------------------------------------------
 * GEMM (lbc_gemm, cuda_common.cuh). cuBLASLt is column-major; a row-major (r, c) matrix
 * with leading dim ld is the column-major (c, r) matrix with the same ld, its transpose.
 * So row-major C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T:
 * cuBLASLt's A is our B and its B is our A, m and n swap, and the transpose flags carry
 * over unchanged (ta applies to our A in either view). A plan (descriptors, layouts and
 * an algorithm) is made once per distinct problem and kept in an open-addressing hash
 * table for the life of the process. The key includes the operands' alignment (of the
 * pointers and, when batched, of the batch strides), because the heuristic only proposes
 * algorithms valid for the alignment it is told. The algorithm is the fastest of the
 * heuristic's first TUNE_ALGOS candidates, timed on the first call's operands (gemm_tune):
 * on the H200 the heuristic's first choice alone reaches only 75-95% of the best candidate
 * at the Llama shapes (82% for the f32 weight-gradient GEMM m=5120 n=13824 k=2048, TN).
 * ------------------------------------------------------------------------------------------ */

struct gemm_key {
	int m, n, k, ta, tb, batch, c_f32, beta_nz;
	int align_a, align_b, align_c; /* bytes, powers of two up to 256 */
	int c_in;		       /* 1: C read from its own buffer, D written to another */
	long long lda, ldb, ldc, sa, sb, sc;
};

struct gemm_plan {
	struct gemm_key key;
	int used;
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t la; /* cuBLASLt's A: our B */
	cublasLtMatrixLayout_t lb; /* cuBLASLt's B: our A */
	cublasLtMatrixLayout_t lc; /* C and D */
	cublasLtMatmulAlgo_t algo;
};

static struct {
	struct gemm_plan *slot;
	size_t cap, count; /* cap: power of two */
} plans;

/* Largest power of two (up to 256) dividing the address and, when batched, the stride. */
static int gemm_align(const void *p, long long stride, size_t es, int batch)
{
	uint64_t a = (uint64_t)(uintptr_t)p | 256;

	if (batch > 1)
		a |= (uint64_t)stride * es;
	return (int)(a & (~a + 1));
}

static uint64_t gemm_hash(const struct gemm_key *key)
{
	const unsigned char *p = (const unsigned char *)key;
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	for (size_t i = 0; i < sizeof(*key); i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static void gemm_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, long long rows, long long cols,
			long long ld, int batch, long long stride)
{
	LBC_CHECK_LT(cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld));
	if (batch > 1) {
		int32_t bc = batch;
		int64_t st = stride;

		LBC_CHECK_LT(cublasLtMatrixLayoutSetAttribute(
		    *l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof(bc)));
		LBC_CHECK_LT(cublasLtMatrixLayoutSetAttribute(
		    *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof(st)));
	}
}

/* The descriptors of key's problem (no algorithm yet). */
static void gemm_plan_init(struct gemm_plan *p, const struct gemm_key *key)
{
	const struct gemm_key *q = key;
	cublasOperation_t opa = q->tb ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's A = our B */
	cublasOperation_t opb = q->ta ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's B = our A */

	memset(p, 0, sizeof(*p));
	p->key = *key;
	LBC_CHECK_LT(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	LBC_CHECK_LT(
	    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
	LBC_CHECK_LT(
	    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
	/* our B, row-major (k, n) [or (n, k) when tb], is column-major (n, k) [(k, n)] */
	gemm_layout(&p->la, CUDA_R_16BF, q->tb ? q->k : q->n, q->tb ? q->n : q->k, q->ldb, q->batch,
		    q->sb);
	/* our A, row-major (m, k) [or (k, m) when ta], is column-major (k, m) [(m, k)] */
	gemm_layout(&p->lb, CUDA_R_16BF, q->ta ? q->m : q->k, q->ta ? q->k : q->m, q->lda, q->batch,
		    q->sa);
	/* C, row-major (m, n), is column-major (n, m) */
	gemm_layout(&p->lc, q->c_f32 ? CUDA_R_32F : CUDA_R_16BF, q->n, q->m, q->ldc, q->batch,
		    q->sc);
}

static void gemm_plan_release(struct gemm_plan *p)
{
	cublasLtMatrixLayoutDestroy(p->lc);
	cublasLtMatrixLayoutDestroy(p->lb);
	cublasLtMatrixLayoutDestroy(p->la);
	cublasLtMatmulDescDestroy(p->op);
}

/* Up to want candidates, best first (the heuristic's order); how many it gave. */
static int gemm_heuristics(const struct gemm_plan *p, cublasLtMatmulHeuristicResult_t *res,
			   int want)
{
	cublasLtMatmulPreference_t pref;
	uint64_t ws = WORKSPACE_B;
	uint32_t al_a = p->key.align_b, al_b = p->key.align_a, al_c = p->key.align_c;
	cublasStatus_t st;
	int got = 0;

	LBC_CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
	LBC_CHECK_LT(cublasLtMatmulPreferenceSetAttribute(
	    pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
	LBC_CHECK_LT(cublasLtMatmulPreferenceSetAttribute(
	    pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
	LBC_CHECK_LT(cublasLtMatmulPreferenceSetAttribute(
	    pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
	LBC_CHECK_LT(cublasLtMatmulPreferenceSetAttribute(
	    pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c)));
	LBC_CHECK_LT(cublasLtMatmulPreferenceSetAttribute(
	    pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof(al_c)));
	st = cublasLtMatmulAlgoGetHeuristic(lbc_lt, p->op, p->la, p->lb, p->lc, p->lc, pref, want,
					    res, &got);
	cublasLtMatmulPreferenceDestroy(pref);
	return st == CUBLAS_STATUS_SUCCESS ? got : 0;
}

static struct gemm_plan *gemm_put(struct gemm_plan *slot, size_t cap, const struct gemm_plan *p)
{
	size_t i = (size_t)gemm_hash(&p->key) & (cap - 1);

	while (slot[i].used)
		i = (i + 1) & (cap - 1);
	slot[i] = *p;
	slot[i].used = 1;
	return &slot[i];
}

/* 0 when the environment has LAYOUTBENCH_GEMM_TUNE=0 (read once): lbc_gemm then keeps the
 * heuristic's first choice, for comparison in benches; 1 (tune) otherwise. */
static int gemm_tune_on(void)
{
	static int on = -1;

	if (on < 0) {
		const char *v = getenv("LAYOUTBENCH_GEMM_TUNE");
		char *end;

		on = 1;
		if (v && *v && strtol(v, &end, 10) == 0 && !*end)
			on = 0;
	}
	return on;
}

/* Bytes from C's first element to one past its last (every batch, the gaps of ldc and of the
 * batch stride included): what a copy of C with C's layout must hold. 0 for a negative
 * stride or ldc < n, which such a copy cannot mirror (the caller then does not tune). */
static size_t gemm_c_extent(const struct gemm_key *q)
{
	long long e;

	if (q->sc < 0 || q->ldc < q->n)
		return 0;
	e = (long long)(q->m - 1) * q->ldc + q->n + (long long)(q->batch - 1) * q->sc;
	return (size_t)e * (q->c_f32 ? sizeof(float) : sizeof(act_t));
}

/* One tuning run of algo into the scratch sc (D; C too unless cin, the caller's C, which is
 * only read); 1 when cuBLASLt accepted it. */
static int tune_run(const struct gemm_plan *p, const cublasLtMatmulAlgo_t *algo, void *sc,
		    const void *cin, const void *a, const void *b, float alpha, float beta)
{
	return cublasLtMatmul(lbc_lt, p->op, &alpha, b, p->la, a, p->lb, &beta, cin ? cin : sc,
			      p->lc, sc, p->lc, algo, lbc.workspace, WORKSPACE_B,
			      lbc_stream) == CUBLAS_STATUS_SUCCESS;
}

/*
 * The index of the fastest of the heuristic's candidates res[0, n) for p's problem, timed on
 * the caller's operands: each candidate runs once to warm up, then TUNE_RUNS times between
 * two events; every run is enqueued on lbc_stream before one cudaEventSynchronize, and the
 * least mean time wins. A candidate that cublasLtMatmul refuses is left out.
 *
 * The runs read the real A and B (read-only) but write a scratch C, never the caller's C:
 * with beta != 0 the caller accumulates into C, so C must see exactly one product. The
 * scratch has C's layout and, offset within its allocation, C's address modulo 256, so the
 * alignment (part of the key) is the real one. With beta != 0 it starts as a copy of C: the
 * candidates then read the values the real call reads (cuBLASLt's kernels do not depend on
 * the values, so zeros would time the same; the copy costs one pass over C, once, and
 * leaves no doubt). With beta = 0, C is not read and the scratch is left unset.
 *
 * The scratch is transient (freed before returning) and taken with plain cudaMalloc, outside
 * the counting allocator: once per problem, in the first step, the device's momentary peak
 * exceeds the counted peak by at most this one buffer (C's extent + 256 bytes). cudaMalloc
 * rather than cudaMallocAsync because cudaFree hands the memory back at once, where a
 * stream-ordered pool may keep it reserved until a later synchronisation and starve the
 * trainer's next cudaMalloc.
 *
 * Tuning never fails the run: when the scratch or the events cannot be had (out of memory)
 * or no candidate runs, the CUDA error is cleared and 0, the heuristic's first, is returned.
 */
static int gemm_tune(const struct gemm_plan *p, const cublasLtMatmulHeuristicResult_t *res, int n,
		     const void *a, const void *b, const void *c, const void *cin, float alpha,
		     float beta)
{
	cudaEvent_t ev[2 * TUNE_ALGOS];
	int ran[TUNE_ALGOS];
	size_t bytes = gemm_c_extent(&p->key), off = (uintptr_t)c & 255;
	char *base = NULL;
	void *sc;
	float ms, best_ms = -1;
	int best = 0, last = -1, i, r;

	memset(ev, 0, sizeof(ev));
	memset(ran, 0, sizeof(ran));
	if (n > TUNE_ALGOS)
		n = TUNE_ALGOS;
	if (!bytes || cudaMalloc((void **)&base, bytes + off) != cudaSuccess || !base)
		goto out_clear;
	sc = base + off;
	if (beta != 0.0f && !cin &&
	    cudaMemcpyAsync(sc, c, bytes, cudaMemcpyDeviceToDevice, lbc_stream) != cudaSuccess)
		goto out_free;
	for (i = 0; i < n; i++) {
		if (cudaEventCreate(&ev[2 * i]) != cudaSuccess ||
		    cudaEventCreate(&ev[2 * i + 1]) != cudaSuccess)
			goto out_free;
		if (res[i].state != CUBLAS_STATUS_SUCCESS)
			continue;
		/* the warm-up: a refusal here (or below) marks the candidate unavailable */
		ran[i] = tune_run(p, &res[i].algo, sc, cin, a, b, alpha, beta);
		if (!ran[i])
			continue;
		if (cudaEventRecord(ev[2 * i], lbc_stream) != cudaSuccess)
			goto out_free;
		for (r = 0; r < TUNE_RUNS && ran[i]; r++)
			ran[i] = tune_run(p, &res[i].algo, sc, cin, a, b, alpha, beta);
		if (cudaEventRecord(ev[2 * i + 1], lbc_stream) != cudaSuccess)
			goto out_free;
		last = i;
	}
	/* the one wait, for the last event recorded: every timed run has finished after it */
	if (last >= 0 && cudaEventSynchronize(ev[2 * last + 1]) == cudaSuccess)
		for (i = 0; i < n; i++)
			if (ran[i] &&
			    cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]) == cudaSuccess &&
			    (best_ms < 0 || ms < best_ms)) {
				best_ms = ms;
				best = i;
			}
out_free:
	/* at once after the wait above; after an early exit, the scratch's last writer */
	cudaStreamSynchronize(lbc_stream);
	cudaFree(base);
	for (i = 0; i < 2 * n; i++)
		if (ev[i])
			cudaEventDestroy(ev[i]);
out_clear:
	cudaGetLastError(); /* a failed allocation or call here is no error of the run */
	return best;
}

/* The cached plan of key, or NULL. */
static const struct gemm_plan *gemm_plan_find(const struct gemm_key *key)
{
	if (plans.cap)
		for (size_t i = (size_t)gemm_hash(key) & (plans.cap - 1); plans.slot[i].used;
		     i = (i + 1) & (plans.cap - 1))
			if (!memcmp(&plans.slot[i].key, key, sizeof(*key)))
				return &plans.slot[i];
	return NULL;
}

static void gemm_no_algorithm(const struct gemm_key *key)
{
	lb_fatal(__FILE__, __LINE__, "error",
		 "cublasLt has no algorithm for gemm m=%d n=%d k=%d ta=%d tb=%d lda=%lld "
		 "ldb=%lld ldc=%lld batch=%d c_f32=%d align=%d/%d/%d",
		 key->m, key->n, key->k, key->ta, key->tb, key->lda, key->ldb, key->ldc, key->batch,
		 key->c_f32, key->align_a, key->align_b, key->align_c);
}

/* The cached plan of key, made (and its algorithm chosen) on first use. a, b, c, alpha and
 * beta are the first call's: the candidates are timed on them (gemm_tune, which writes a
 * scratch C, never c). */
static const struct gemm_plan *gemm_plan_get(const struct gemm_key *key, const void *a,
					     const void *b, const void *c, const void *cin,
					     float alpha, float beta)
{
	cublasLtMatmulHeuristicResult_t res[TUNE_ALGOS];
	struct gemm_plan p;
	const struct gemm_plan *hit = gemm_plan_find(key);
	size_t i;
	int got;

	if (hit)
		return hit;
	if ((plans.count + 1) * 2 > plans.cap) { /* grow at half load */
		size_t ncap = plans.cap ? plans.cap * 2 : 64;
		struct gemm_plan *ns = (struct gemm_plan *)calloc(ncap, sizeof(*ns));

		if (!ns)
			lb_fatal(__FILE__, __LINE__, "oom", "gemm plan cache: out of host memory");
		for (i = 0; i < plans.cap; i++)
			if (plans.slot[i].used)
				gemm_put(ns, ncap, &plans.slot[i]);
		free(plans.slot);
		plans.slot = ns;
		plans.cap = ncap;
	}
	gemm_plan_init(&p, key);
	memset(res, 0, sizeof(res));
	got = gemm_heuristics(&p, res, gemm_tune_on() ? TUNE_ALGOS : 1);
	if (got < 1)
		gemm_no_algorithm(key);
	p.algo = res[got > 1 ? gemm_tune(&p, res, got, a, b, c, cin, alpha, beta) : 0].algo;
	plans.count++;
	return gemm_put(plans.slot, plans.cap, &p);
}

static void gemm_key_make(struct gemm_key *key, int c_f32, const void *a, const void *b,
			  const void *c, int m, int n, int k, int ta, int tb, long long lda,
			  long long ldb, long long ldc, long long sa, long long sb, long long sc,
			  int batch, float beta)
{
	memset(key, 0, sizeof(*key)); /* the key is hashed and compared as bytes */
	key->m = m;
	key->n = n;
	key->k = k;
	key->ta = !!ta;
	key->tb = !!tb;
	key->batch = batch;
	key->c_f32 = !!c_f32;
	key->beta_nz = beta != 0.0f;
	key->lda = lda;
	key->ldb = ldb;
	key->ldc = ldc;
	if (batch > 1) { /* strides of one matrix mean nothing */
		key->sa = sa;
		key->sb = sb;
		key->sc = sc;
	}
	key->align_a = gemm_align(a, sa, sizeof(act_t), batch);
	key->align_b = gemm_align(b, sb, sizeof(act_t), batch);
	key->align_c = gemm_align(c, sc, c_f32 ? sizeof(float) : sizeof(act_t), batch);
}

/* C_i = beta * C_i (k = 0: an empty sum; cuBLASLt does not take k = 0). */
template <typename T>
static __global__ void gemm_beta_kernel(T *c, int m, int n, long long ldc, long long sc, int batch,
					float beta)
{
	size_t total = (size_t)batch * m * n;

	for (size_t e = GRID_START; e < total; e += GRID_STEP) {
		size_t j = e % n, i = (e / n) % m, bi = e / ((size_t)m * n);
		T *p = c + (long long)bi * sc + (long long)i * ldc + (long long)j;

		*p = beta == 0.0f ? (T)0.0f : (T)(beta * (float)*p);
	}
}

/*
 * The contract is in cuda_common.cuh. The first call of a distinct problem (the plan cache's
 * miss) chooses the algorithm by timing the heuristic's candidates (gemm_tune): that call
 * synchronises the host once and briefly allocates a scratch C outside the counting
 * allocator. The distinct problems all occur in the first (warm-up) step, so the steps that
 * are measured neither wait nor allocate. LAYOUTBENCH_GEMM_TUNE=0 keeps the heuristic's
 * first choice instead.
 */
/* lbc_gemm with C read from cin (NULL: from c itself) and the result written to c (cuBLASLt's
 * D): a GEMM whose epilogue adds another buffer. cin must not be c's alias in part. */
static void gemm_ex(void *c, const void *cin, int c_f32, const void *a, const void *b, int m, int n,
		    int k, int ta, int tb, long long lda, long long ldb, long long ldc,
		    long long stride_a, long long stride_b, long long stride_c, int batch,
		    float alpha, float beta)
{
	struct gemm_key key;
	const struct gemm_plan *p;
	const void *cr = cin ? cin : c;

	if (m <= 0 || n <= 0 || batch <= 0)
		return;
	if (k <= 0) {
		if (beta == 1.0f)
			return;
		if (c_f32)
			gemm_beta_kernel<<<grid_for((size_t)batch * m * n), THREADS, 0,
					   lbc_stream>>>((float *)c, m, n, ldc, stride_c, batch,
							 beta);
		else
			gemm_beta_kernel<<<grid_for((size_t)batch * m * n), THREADS, 0,
					   lbc_stream>>>((act_t *)c, m, n, ldc, stride_c, batch,
							 beta);
		LBC_LAUNCHED();
		return;
	}
	gemm_key_make(&key, c_f32, a, b, c, m, n, k, ta, tb, lda, ldb, ldc, stride_a, stride_b,
		      stride_c, batch, beta);
	key.c_in = cin != NULL;
	if (cin) /* the alignment the heuristic is told must hold for both */
		key.align_c = key.align_c < gemm_align(cin, stride_c, c_f32 ? 4 : 2, batch)
				  ? key.align_c
				  : gemm_align(cin, stride_c, c_f32 ? 4 : 2, batch);
	if (lbc_graph_capturing() && !gemm_plan_find(&key)) {
		/* a problem first seen inside a capture (the tuning waits for the device, which
		 * a capture cannot): the heuristic's first algorithm, not cached; the graph is
		 * right but not kept, so the segment runs eagerly (and tunes) the next time */
		struct gemm_plan tmp;
		cublasLtMatmulHeuristicResult_t res1;

		memset(&res1, 0, sizeof(res1));
		gemm_plan_init(&tmp, &key);
		if (gemm_heuristics(&tmp, &res1, 1) < 1)
			gemm_no_algorithm(&key);
		lbc_graph_drop("a GEMM problem first seen inside the capture");
		LBC_CHECK_LT(cublasLtMatmul(lbc_lt, tmp.op, &alpha, b, tmp.la, a, tmp.lb, &beta, cr,
					    tmp.lc, c, tmp.lc, &res1.algo, lbc.workspace,
					    WORKSPACE_B, lbc_stream));
		gemm_plan_release(&tmp);
		return;
	}
	p = gemm_plan_get(&key, a, b, c, cin, alpha, beta);
	/* swapped operands: column-major C^T = op(B)^T op(A)^T; C read from cr, D written to c */
	LBC_CHECK_LT(cublasLtMatmul(lbc_lt, p->op, &alpha, b, p->la, a, p->lb, &beta, cr, p->lc, c,
				    p->lc, &p->algo, lbc.workspace, WORKSPACE_B, lbc_stream));
}

void lbc_gemm(void *c, int c_f32, const void *a, const void *b, int m, int n, int k, int ta, int tb,
	      long long lda, long long ldb, long long ldc, long long stride_a, long long stride_b,
	      long long stride_c, int batch, float alpha, float beta)
{
	gemm_ex(c, NULL, c_f32, a, b, m, n, k, ta, tb, lda, ldb, ldc, stride_a, stride_b, stride_c,
		batch, alpha, beta);
}

/* The table's matmul: natural leading dims, one matrix, C overwritten or accumulated. */
static void cuda_matmul(void *c, const void *a, const void *b, int m, int n, int k, int ta, int tb,
			double alpha, int accumulate, int c_f32)
{
	lbc_gemm(c, c_f32, a, b, m, n, k, ta, tb, ta ? m : k, tb ? k : n, n, 0, 0, 0, 1,
		 (float)alpha, accumulate ? 1.0f : 0.0f);
}

/* The table's matmul_add: out = op(A) op(B) + addend (bf16), the addend read as cuBLASLt's
 * C and the result written as its D, so the residual add needs no pass of its own. */
static void cuda_matmul_add(void *out, const void *a, const void *b, const void *addend, int m,
			    int n, int k, int ta, int tb)
{
	gemm_ex(out, addend == out ? NULL : addend, 0, a, b, m, n, k, ta, tb, ta ? m : k,
		tb ? k : n, n, 0, 0, 0, 1, 1.0f, 1.0f);
}

/* ------------------------------------------------------------------------------------------
 * Elementwise ops. Each kernel does the vector part (16 bytes per access, when every
 * pointer is 16-byte aligned) and then the scalar tail in one grid-stride launch; when
 * a pointer is not aligned the vector part is empty and the tail is everything.
 * ------------------------------------------------------------------------------------------ */

struct alignas(16) bf16x8 {
	act_t v[8];
};
struct alignas(8) bf16x4 {
	act_t v[4];
};

/* out = a + b (bf16), summed in fp32 and rounded once. */
static __global__ void add_kernel(act_t *out, const act_t *a, const act_t *b, size_t n, size_t nvec)
{
	for (size_t i = GRID_START; i < nvec; i += GRID_STEP) {
		bf16x8 x = ((const bf16x8 *)a)[i], y = ((const bf16x8 *)b)[i], z;

#pragma unroll
		for (int j = 0; j < 8; j++)
			z.v[j] =
			    __float2bfloat16(__bfloat162float(x.v[j]) + __bfloat162float(y.v[j]));
		((bf16x8 *)out)[i] = z;
	}
	for (size_t i = nvec * 8 + GRID_START; i < n; i += GRID_STEP)
		out[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

static void cuda_add(void *out, const void *a, const void *b, size_t n)
{
	size_t nvec = aligned(out, 16) && aligned(a, 16) && aligned(b, 16) ? n / 8 : 0;

	if (!n)
		return;
	add_kernel<<<grid_for(nvec + (n - nvec * 8)), THREADS, 0, lbc_stream>>>(
	    (act_t *)out, (const act_t *)a, (const act_t *)b, n, nvec);
	LBC_LAUNCHED();
}

/* y += x (f32). */
static __global__ void acc_kernel(float *y, const float *x, size_t n, size_t nvec)
{
	for (size_t i = GRID_START; i < nvec; i += GRID_STEP) {
		float4 u = ((const float4 *)y)[i], v = ((const float4 *)x)[i];

		u.x += v.x;
		u.y += v.y;
		u.z += v.z;
		u.w += v.w;
		((float4 *)y)[i] = u;
	}
	for (size_t i = nvec * 4 + GRID_START; i < n; i += GRID_STEP)
		y[i] += x[i];
}

static void cuda_acc(void *y, const void *x, size_t n)
{
	size_t nvec = aligned(y, 16) && aligned(x, 16) ? n / 4 : 0;

	if (!n)
		return;
	acc_kernel<<<grid_for(nvec + (n - nvec * 4)), THREADS, 0, lbc_stream>>>(
	    (float *)y, (const float *)x, n, nvec);
	LBC_LAUNCHED();
}

/* x *= s (f32), the product in double and rounded once, as the CPU reference does. */
static __global__ void scale_kernel(float *x, double s, size_t n, size_t nvec)
{
	for (size_t i = GRID_START; i < nvec; i += GRID_STEP) {
		float4 u = ((const float4 *)x)[i];

		u.x = (float)(u.x * s);
		u.y = (float)(u.y * s);
		u.z = (float)(u.z * s);
		u.w = (float)(u.w * s);
		((float4 *)x)[i] = u;
	}
	for (size_t i = nvec * 4 + GRID_START; i < n; i += GRID_STEP)
		x[i] = (float)(x[i] * s);
}

static void cuda_scale(void *x, double s, size_t n)
{
	size_t nvec = aligned(x, 16) ? n / 4 : 0;

	if (!n)
		return;
	scale_kernel<<<grid_for(nvec + (n - nvec * 4)), THREADS, 0, lbc_stream>>>((float *)x, s, n,
										  nvec);
	LBC_LAUNCHED();
}

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
	unsigned cap = (unsigned)(lbc.sm_count > 0 ? lbc.sm_count : 132) * 8;

	if (!n)
		return;
	if (blocks > cap) /* enough to fill the device; fewer atomics */
		blocks = cap;
	if (sq)
		sum_kernel<1><<<blocks, THREADS, 0, lbc_stream>>>(acc, (const float *)x, n, nvec);
	else
		sum_kernel<0><<<blocks, THREADS, 0, lbc_stream>>>(acc, (const float *)x, n, nvec);
	LBC_LAUNCHED();
}

static void cuda_sum_acc(void *acc, const void *x, size_t n)
{
	sum_enqueue((double *)acc, x, n, 0);
}

static void cuda_sum_sq_acc(void *acc, const void *x, size_t n)
{
	sum_enqueue((double *)acc, x, n, 1);
}

static double sum_now(const void *x, size_t n, int sq)
{
	lbc_graph_guard("sum");
	LBC_CHECK(cudaMemsetAsync(lbc.red, 0, sizeof(double), lbc_stream));
	sum_enqueue(lbc.red, x, n, sq);
	LBC_CHECK(cudaMemcpyAsync(lbc.red_host, lbc.red, sizeof(double), cudaMemcpyDeviceToHost,
				  lbc_stream));
	LBC_CHECK(cudaStreamSynchronize(lbc_stream));
	return *lbc.red_host;
}

static double cuda_sum(const void *x, size_t n)
{
	return sum_now(x, n, 0);
}

static double cuda_sum_sq(const void *x, size_t n)
{
	return sum_now(x, n, 1);
}

/* ------------------------------------------------------------------------------------------
 * AdamW (Loshchilov & Hutter 2019, Algorithm 2, with Adam's bias corrections, Kingma &
 * Ba 2015, Algorithm 1): the CPU reference's formula (harness/ops_cpu_impl.h) in fp32,
 * fused into one pass over master, grad, m, v (f32) and param (bf16). The bias
 * corrections c1 = 1 - b1^step, c2 = 1 - b2^step are computed on the host in double.
 * ------------------------------------------------------------------------------------------ */

struct adamw_args {
	float lr, b1, b2, omb1, omb2, c1, c2, eps, wd, gs; /* omb1 = 1 - b1, omb2 = 1 - b2 */
};

/* One element: updates m, v; returns the new master weight. */
static __device__ __forceinline__ float adamw_elem(float &m, float &v, float w, float grad,
						   const adamw_args &a)
{
	float g = grad * a.gs;

	m = a.b1 * m + a.omb1 * g;
	v = a.b2 * v + a.omb2 * g * g;
	return w - a.lr * ((m / a.c1) / (sqrtf(v / a.c2) + a.eps) + a.wd * w);
}

/* DEV: c1, c2 and the gradient scale from sc (adamw_dev) instead of a. */
template <int DEV>
static __global__ void adamw_kernel(act_t *param, float *master, const float *grad, float *m,
				    float *v, size_t n, size_t nvec, adamw_args a, const double *sc)
{
	if (DEV) {
		a.c1 = (float)sc[0];
		a.c2 = (float)sc[1];
		a.gs = (float)sc[2];
	}
	for (size_t i = GRID_START; i < nvec; i += GRID_STEP) {
		float4 w = ((const float4 *)master)[i], g = ((const float4 *)grad)[i];
		float4 mi = ((const float4 *)m)[i], vi = ((const float4 *)v)[i];
		bf16x4 p;

		w.x = adamw_elem(mi.x, vi.x, w.x, g.x, a);
		w.y = adamw_elem(mi.y, vi.y, w.y, g.y, a);
		w.z = adamw_elem(mi.z, vi.z, w.z, g.z, a);
		w.w = adamw_elem(mi.w, vi.w, w.w, g.w, a);
		p.v[0] = __float2bfloat16(w.x);
		p.v[1] = __float2bfloat16(w.y);
		p.v[2] = __float2bfloat16(w.z);
		p.v[3] = __float2bfloat16(w.w);
		((float4 *)master)[i] = w;
		((float4 *)m)[i] = mi;
		((float4 *)v)[i] = vi;
		((bf16x4 *)param)[i] = p;
	}
	for (size_t i = nvec * 4 + GRID_START; i < n; i += GRID_STEP) {
		float mi = m[i], vi = v[i];
		float w = adamw_elem(mi, vi, master[i], grad[i], a);

		m[i] = mi;
		v[i] = vi;
		master[i] = w;
		param[i] = __float2bfloat16(w);
	}
}

/* The constant part of the arguments; c1, c2 and gs are the caller's. */
static adamw_args adamw_make(double lr, double b1, double b2, double eps, double wd)
{
	adamw_args a;

	memset(&a, 0, sizeof(a));
	a.lr = (float)lr;
	a.b1 = (float)b1;
	a.b2 = (float)b2;
	a.omb1 = (float)(1.0 - b1);
	a.omb2 = (float)(1.0 - b2);
	a.eps = (float)eps;
	a.wd = (float)wd;
	return a;
}

static size_t adamw_nvec(const void *param, const void *master, const void *grad, const void *m,
			 const void *v, size_t n)
{
	return aligned(master, 16) && aligned(grad, 16) && aligned(m, 16) && aligned(v, 16) &&
		       aligned(param, 8)
		   ? n / 4
		   : 0;
}

static void cuda_adamw(void *param, void *master, const void *grad, void *m, void *v, size_t n,
		       double lr, double b1, double b2, double eps, double wd, int step,
		       double grad_scale)
{
	adamw_args a = adamw_make(lr, b1, b2, eps, wd);
	size_t nvec = adamw_nvec(param, master, grad, m, v, n);

	if (!n)
		return;
	a.c1 = (float)(1.0 - pow(b1, step));
	a.c2 = (float)(1.0 - pow(b2, step));
	a.gs = (float)grad_scale;
	adamw_kernel<0><<<grid_for(nvec + (n - nvec * 4)), THREADS, 0, lbc_stream>>>(
	    (act_t *)param, (float *)master, (const float *)grad, (float *)m, (float *)v, n, nvec,
	    a, NULL);
	LBC_LAUNCHED();
}

/* AdamW's step scalars in device memory (ops.h adamw_scalars, clip_scale, adamw_dev): the
 * same values as cuda_adamw computes on the host (c1, c2 in double on the host, rounded to
 * float in the kernel; the clip factor in double), read by the kernel from sc, so a
 * captured optimizer serves every step and no step waits for its gradient norm. */
static __global__ void adamw_scalars_kernel(double *sc, double c1, double c2, double gs,
					    double step)
{
	sc[0] = c1;
	sc[1] = c2;
	if (gs >= 0)
		sc[2] = gs;
	sc[3] = step;
}

static void cuda_adamw_scalars(void *sc, int step, double b1, double b2, double grad_scale)
{
	adamw_scalars_kernel<<<1, 1, 0, lbc_stream>>>(
	    (double *)sc, 1.0 - pow(b1, step), 1.0 - pow(b2, step), grad_scale, (double)step);
	LBC_LAUNCHED();
}

/* lb_optim_clip_scale (harness/optim.c) on the device, in double: sqrt and the division
 * are correctly rounded there as on the host. */
static __global__ void clip_scale_kernel(double *sc, const double *sq, double clip)
{
	double norm = sqrt(sq[0]);

	sc[2] = (clip <= 0 || !(norm > clip)) ? 1.0 : clip / norm;
}

static void cuda_clip_scale(void *sc, const void *sq, double clip)
{
	clip_scale_kernel<<<1, 1, 0, lbc_stream>>>((double *)sc, (const double *)sq, clip);
	LBC_LAUNCHED();
}

static void cuda_adamw_dev(void *param, void *master, const void *grad, void *m, void *v, size_t n,
			   double lr, double b1, double b2, double eps, double wd, const void *sc)
{
	adamw_args a = adamw_make(lr, b1, b2, eps, wd);
	size_t nvec = adamw_nvec(param, master, grad, m, v, n);

	if (!n)
		return;
	adamw_kernel<1><<<grid_for(nvec + (n - nvec * 4)), THREADS, 0, lbc_stream>>>(
	    (act_t *)param, (float *)master, (const float *)grad, (float *)m, (float *)v, n, nvec,
	    a, (const double *)sc);
	LBC_LAUNCHED();
}

/* ------------------------------------------------------------------------------------------
 * Set-up and device information. init fails softly (-1 and a message) on what a user
 * can fix: no device, a driver older than the runtime, a full device.
 * ------------------------------------------------------------------------------------------ */

/* "13.0" from a CUDA version number (1000 * major + 10 * minor). */
static void cuda_version_text(char *buf, size_t len, int v)
{
	snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

static int cuda_init(int local_rank, char *err, size_t errlen)
{
	int drv = 0, rt = 0, ndev = 0;
	char dt[16], rtt[16];
	cudaError_t e;

	if (lbc.inited)
		return 0;
	cudaDriverGetVersion(&drv); /* 0 when no driver is installed */
	cudaRuntimeGetVersion(&rt);
	cuda_version_text(dt, sizeof(dt), drv);
	cuda_version_text(rtt, sizeof(rtt), rt);
	/* An older major version cannot work. An older minor version of the same major one
	 * can (CUDA minor version compatibility: the kernels are built for the GPU, nothing
	 * is JIT-compiled), so that case is left to the runtime, which reports an
	 * insufficient driver when it does not. */
	e = drv && drv / 1000 < rt / 1000 ? cudaErrorInsufficientDriver : cudaGetDeviceCount(&ndev);
	if (drv && (e == cudaErrorInsufficientDriver || e == cudaErrorCallRequiresNewerDriver)) {
		cudaGetLastError();
		snprintf(err, errlen,
			 "the NVIDIA driver supports CUDA %s but this build's runtime is CUDA %s: "
			 "update the driver",
			 dt, rtt);
		return -1;
	}
	if (!drv) { /* the runtime then says "driver version is insufficient": misleading */
		cudaGetLastError();
		snprintf(err, errlen,
			 "no CUDA device: no NVIDIA driver is loaded on this machine (run on a GPU "
			 "node, or use --device cpu)");
		return -1;
	}
	if (e != cudaSuccess || ndev <= 0) {
		cudaGetLastError();
		snprintf(err, errlen, "no CUDA device: %s (CUDA_VISIBLE_DEVICES=%s)",
			 cudaGetErrorString(e != cudaSuccess ? e : cudaErrorNoDevice),
			 getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "unset");
		return -1;
	}
	lbc.device = (local_rank < 0 ? 0 : local_rank) % ndev;
	e = cudaSetDevice(lbc.device);
	if (e == cudaSuccess)
		e = cudaDeviceGetAttribute(&lbc.sm_count, cudaDevAttrMultiProcessorCount,
					   lbc.device);
	if (e == cudaSuccess)
		e = cudaStreamCreateWithFlags(&lbc_stream, cudaStreamNonBlocking);
	if (e == cudaSuccess)
		e = cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
	if (e == cudaSuccess)
		e = cudaStreamCreateWithFlags(&p2p, cudaStreamNonBlocking);
	main_stream = lbc_stream;
	if (e != cudaSuccess) {
		cudaGetLastError();
		snprintf(err, errlen, "cannot use CUDA device %d (local rank %d): %s", lbc.device,
			 local_rank, cudaGetErrorString(e));
		return -1;
	}
	if (cublasLtCreate(&lbc_lt) != CUBLAS_STATUS_SUCCESS) {
		snprintf(err, errlen, "cublasLtCreate failed on CUDA device %d", lbc.device);
		return -1;
	}
	lbc.workspace = mem_alloc_bytes(WORKSPACE_B);
	lbc.ws_bytes = WORKSPACE_B;
	lbc.red = (double *)mem_alloc_bytes(sizeof(double));
	if (!lbc.workspace || !lbc.red ||
	    cudaMallocHost((void **)&lbc.red_host, sizeof(double)) != cudaSuccess) {
		cudaGetLastError();
		snprintf(err, errlen, "out of memory on CUDA device %d for the cuBLASLt workspace",
			 lbc.device);
		return -1;
	}
	LBC_CHECK(cudaStreamSynchronize(lbc_stream)); /* the zero fills, before anyone uses them */
	lbc.inited = 1;
	return 0;
}

/* The loaded kernel module's version ("580.159.04") from the first line of
 * /proc/driver/nvidia/version: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04
 * <date>", or "... Open Kernel Module for x86_64  580.159.04 Release Build ..." for the
 * open module: the first token after "Kernel Module" made of digits and dots. 0 or -1. */
static int driver_from_proc(char *out, size_t len)
{
	FILE *f = fopen("/proc/driver/nvidia/version", "r");
	char line[512], *p;

	if (!f)
		return -1;
	p = fgets(line, sizeof(line), f);
	fclose(f);
	if (!p || !(p = strstr(line, "Kernel Module")))
		return -1;
	p += strlen("Kernel Module");
	for (;;) {
		size_t tl;

		while (*p && isspace((unsigned char)*p))
			p++;
		if (!*p)
			return -1;
		tl = strcspn(p, " \t\r\n");
		if (isdigit((unsigned char)p[0]) && strspn(p, "0123456789.") == tl &&
		    memchr(p, '.', tl)) {
			snprintf(out, len, "%.*s", (int)tl, p);
			return 0;
		}
		p += tl;
	}
}

static void cuda_device_info(struct lb_device_info *info)
{
	cudaDeviceProp prop;
	size_t lt = cublasLtGetVersion(); /* 10000 * major + 100 * minor + patch */
	int dev = 0, v = 0;

	memset(info, 0, sizeof(*info));
	if (cudaGetDevice(&dev) == cudaSuccess &&
	    cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
		snprintf(info->name, sizeof(info->name), "%.*s", (int)sizeof(info->name) - 1,
			 prop.name);
		info->sm_count = prop.multiProcessorCount;
		info->mem_bytes = (uint64_t)prop.totalGlobalMem;
		info->cc_major = prop.major;
		info->cc_minor = prop.minor;
	} else {
		cudaGetLastError();
		snprintf(info->name, sizeof(info->name), "unknown CUDA device");
	}
	if (driver_from_proc(info->driver, sizeof(info->driver)) &&
	    cudaDriverGetVersion(&v) == cudaSuccess && v)
		cuda_version_text(info->driver, sizeof(info->driver), v);
	v = 0;
	if (cudaRuntimeGetVersion(&v) == cudaSuccess && v)
		cuda_version_text(info->runtime, sizeof(info->runtime), v);
	snprintf(info->libs, sizeof(info->libs), "cublasLt %zu.%zu.%zu", lt / 10000,
		 (lt / 100) % 100, lt % 100);
	cudaGetLastError();
}

/* ------------------------------------------------------------------------------------------
 * The table.
 * ------------------------------------------------------------------------------------------ */

static struct lb_ops cuda_table(void)
{
	struct lb_ops t;

	memset(&t, 0, sizeof(t));
	t.name = "cuda";
	for (int k = 0; k < LB_NKINDS; k++)
		t.esize[k] = kind_size[k];
	t.dtype[LB_K_ACT] = LB_BF16;
	t.dtype[LB_K_F32] = LB_F32;
	t.dtype[LB_K_F64] = LB_F64;
	t.dtype[LB_K_I32] = LB_I32;

	t.init = cuda_init;
	t.device_info = cuda_device_info;

	t.alloc = cuda_alloc;
	t.free_ = cuda_free;
	t.zero = cuda_zero;
	t.copy = cuda_copy;
	t.cast = cuda_cast;
	t.write = cuda_write;
	t.read = cuda_read;
	t.write_i32 = cuda_write_i32;
	t.fill_normal = cuda_fill_normal;
	t.set_mem_limit = cuda_set_mem_limit;
	t.mem_stats = cuda_mem_stats;
	t.reset_peak = cuda_reset_peak;
	t.device_mem_peak = cuda_device_mem_peak;

	t.stream = cuda_stream;
	t.sync = cuda_sync;
	t.event_create = cuda_event_create;
	t.event_destroy = cuda_event_destroy;
	t.event_record = cuda_event_record;
	t.event_elapsed = cuda_event_elapsed;
	t.side_stream = cuda_side_stream;
	t.p2p_stream = cuda_p2p_stream;
	t.use_stream = cuda_use_stream;
	t.wait_event = cuda_wait_event;

	t.attn_scratch = lbc_attn_scratch;
	t.norm_scratch = lbc_norm_scratch;

	t.matmul = cuda_matmul;
	t.matmul_add = cuda_matmul_add;

	t.rmsnorm_fwd = lbc_rmsnorm_fwd;
	t.rmsnorm_bwd = lbc_rmsnorm_bwd;
	t.rmsnorm_unfused_fwd = lbc_rmsnorm_unfused_fwd;
	t.rmsnorm_unfused_bwd = lbc_rmsnorm_unfused_bwd;
	t.rope_fwd = lbc_rope_fwd;
	t.rope_bwd = lbc_rope_bwd;
	t.attn_naive_fwd = lbc_attn_naive_fwd;
	t.attn_fused_fwd = lbc_attn_fused_fwd;
	t.attn_probs_bwd = lbc_attn_probs_bwd;
	t.attn_flash_fwd = lbc_attn_flash_fwd;
	t.attn_flash_bwd = lbc_attn_flash_bwd;
	t.attn_cudnn_fwd = lbc_attn_cudnn_fwd;
	t.attn_cudnn_bwd = lbc_attn_cudnn_bwd;
	t.swiglu_fwd = lbc_swiglu_fwd;
	t.swiglu_bwd = lbc_swiglu_bwd;
	t.embed_fwd = lbc_embed_fwd;
	t.embed_bwd = lbc_embed_bwd;
	t.xent_max = lbc_xent_max;
	t.xent_sum = lbc_xent_sum;
	t.xent_grad = lbc_xent_grad;

	t.adamw = cuda_adamw;
	t.add = cuda_add;
	t.acc = cuda_acc;
	t.scale = cuda_scale;
	t.sum_acc = cuda_sum_acc;
	t.sum_sq_acc = cuda_sum_sq_acc;
	t.sum = cuda_sum;
	t.sum_sq = cuda_sum_sq;

	t.adamw_scalars = cuda_adamw_scalars;
	t.clip_scale = cuda_clip_scale;
	t.adamw_dev = cuda_adamw_dev;

	t.graph_begin = lbc_graph_begin;
	t.graph_pause = lbc_graph_pause;
	t.graph_resume = lbc_graph_resume;
	t.graph_end = lbc_graph_end;

	t.comm_world = lb_comm_cuda_world;
	return t;
}

extern "C" const struct lb_ops *lb_ops_cuda(void)
{
	static const struct lb_ops table = cuda_table();

	return &table;
}

/*
 * The replay table (graph.cu): the cuda table with each member that only enqueues device
 * work replaced by a stub that calls the cuda table's member unless a segment is being
 * replayed outside its pauses, when the graphs already hold that work. The members that
 * return a value, wait, move host data or pick streams stay the cuda table's (each of
 * those refuses to run inside a segment outside a pause: lbc_graph_guard).
 */
template <typename T, T M> struct replay_stub;
template <typename... A, void (*lb_ops::*M)(A...)> struct replay_stub<void (*lb_ops::*)(A...), M> {
	static void fn(A... a)
	{
		if (!lbc_graph_skip())
			(lb_ops_cuda()->*M)(a...);
	}
};
#define REPLAY_STUB(t, name) ((t).name = replay_stub<decltype(&lb_ops::name), &lb_ops::name>::fn)

static struct lb_ops replay_table(void)
{
	struct lb_ops t = *lb_ops_cuda();

	REPLAY_STUB(t, zero);
	REPLAY_STUB(t, copy);
	REPLAY_STUB(t, cast);
	REPLAY_STUB(t, fill_normal);
	REPLAY_STUB(t, matmul);
	REPLAY_STUB(t, matmul_add);
	REPLAY_STUB(t, rmsnorm_fwd);
	REPLAY_STUB(t, rmsnorm_bwd);
	REPLAY_STUB(t, rmsnorm_unfused_fwd);
	REPLAY_STUB(t, rmsnorm_unfused_bwd);
	REPLAY_STUB(t, rope_fwd);
	REPLAY_STUB(t, rope_bwd);
	REPLAY_STUB(t, attn_naive_fwd);
	REPLAY_STUB(t, attn_fused_fwd);
	REPLAY_STUB(t, attn_probs_bwd);
	REPLAY_STUB(t, attn_flash_fwd);
	REPLAY_STUB(t, attn_flash_bwd);
	REPLAY_STUB(t, attn_cudnn_fwd);
	REPLAY_STUB(t, attn_cudnn_bwd);
	REPLAY_STUB(t, swiglu_fwd);
	REPLAY_STUB(t, swiglu_bwd);
	REPLAY_STUB(t, embed_fwd);
	REPLAY_STUB(t, embed_bwd);
	REPLAY_STUB(t, xent_max);
	REPLAY_STUB(t, xent_sum);
	REPLAY_STUB(t, xent_grad);
	REPLAY_STUB(t, adamw);
	REPLAY_STUB(t, add);
	REPLAY_STUB(t, acc);
	REPLAY_STUB(t, scale);
	REPLAY_STUB(t, sum_acc);
	REPLAY_STUB(t, sum_sq_acc);
	REPLAY_STUB(t, adamw_scalars);
	REPLAY_STUB(t, clip_scale);
	REPLAY_STUB(t, adamw_dev);
	return t;
}

const struct lb_ops *lbc_replay_table(void)
{
	static const struct lb_ops table = replay_table();

	return &table;
}

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
static int bench_call(const struct gemm_plan *p, const cublasLtMatmulAlgo_t *algo, const void *a,
		      const void *b, void *c, float alpha, float beta)
{
	const struct gemm_key *q = &p->key;

	if (!algo) {
		lbc_gemm(c, q->c_f32, a, b, q->m, q->n, q->k, q->ta, q->tb, q->lda, q->ldb, q->ldc,
			 0, 0, 0, 1, alpha, beta);
		return 0;
	}
	return cublasLtMatmul(lbc_lt, p->op, &alpha, b, p->la, a, p->lb, &beta, c, p->lc, c, p->lc,
			      algo, lbc.workspace, WORKSPACE_B, lbc_stream) == CUBLAS_STATUS_SUCCESS
		   ? 0
		   : -1;
}

/* Mean seconds per call of one plan (algo NULL: through lbc_gemm, with the algorithm it
 * caches and uses, tuned by gemm_tune in the first warm-up call when the problem is new)
 * on fresh random operands, over iters calls after 3 warm-ups; -1 on a failed allocation
 * or call, -2 when the product is wrong. */
static double bench_gemm(const struct gemm_plan *p, const cublasLtMatmulAlgo_t *algo, int iters)
{
	const struct gemm_key *q = &p->key;
	size_t na = (size_t)q->m * q->k, nb = (size_t)q->k * q->n, nc = (size_t)q->m * q->n;
	size_t ces = q->c_f32 ? sizeof(float) : sizeof(act_t);
	void *a = NULL, *b = NULL, *c = NULL;
	int *bad = NULL, nbad = -1;
	cudaEvent_t e0 = NULL, e1 = NULL;
	float alpha = 1.0f, beta = q->beta_nz ? 1.0f : 0.0f, ms = 0;
	double secs = -1;

	if (cudaMalloc(&a, na * sizeof(act_t)) != cudaSuccess ||
	    cudaMalloc(&b, nb * sizeof(act_t)) != cudaSuccess ||
	    cudaMalloc(&c, nc * ces) != cudaSuccess ||
	    cudaMalloc(&bad, sizeof(int)) != cudaSuccess || cudaEventCreate(&e0) != cudaSuccess ||
	    cudaEventCreate(&e1) != cudaSuccess)
		goto out_free;
	bench_fill_kernel<<<grid_for(na), THREADS, 0, lbc_stream>>>((act_t *)a, na, 1u);
	bench_fill_kernel<<<grid_for(nb), THREADS, 0, lbc_stream>>>((act_t *)b, nb, 2u);
	if (cudaMemsetAsync(c, 0, nc * ces, lbc_stream) != cudaSuccess ||
	    cudaMemsetAsync(bad, 0, sizeof(int), lbc_stream) != cudaSuccess)
		goto out_free;
	for (int it = -3; it < iters; it++) {
		if (it == 0 && cudaEventRecord(e0, lbc_stream) != cudaSuccess)
			goto out_free;
		if (bench_call(p, algo, a, b, c, alpha, beta))
			goto out_free;
	}
	if (cudaEventRecord(e1, lbc_stream) != cudaSuccess)
		goto out_free;
	/* accumulating (beta 1), C now holds the sum of every call: one more from zero */
	if (beta != 0.0f) {
		if (cudaMemsetAsync(c, 0, nc * ces, lbc_stream) != cudaSuccess)
			goto out_free;
		if (bench_call(p, algo, a, b, c, alpha, beta))
			goto out_free;
	}
	bench_check_kernel<<<grid_for(BENCH_SAMPLES), THREADS, 0, lbc_stream>>>(
	    bad, c, q->c_f32, (const act_t *)a, (const act_t *)b, q->m, q->n, q->k, q->ta, q->tb,
	    BENCH_SAMPLES);
	if (cudaMemcpyAsync(&nbad, bad, sizeof(int), cudaMemcpyDeviceToHost, lbc_stream) !=
		cudaSuccess ||
	    cudaStreamSynchronize(lbc_stream) != cudaSuccess ||
	    cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
		goto out_free;
	secs = nbad ? -2 : ms * 1e-3 / iters;
out_free:
	cudaStreamSynchronize(lbc_stream);
	cudaGetLastError();
	if (e1)
		cudaEventDestroy(e1);
	if (e0)
		cudaEventDestroy(e0);
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
static void bench_key(struct gemm_key *key, int m, int n, int k, int ta, int tb, int c_f32,
		      int accum)
{
	gemm_key_make(key, c_f32, NULL, NULL, NULL, m, n, k, ta, tb, ta ? m : k, tb ? k : n, n, 0,
		      0, 0, 1, accum ? 1.0f : 0.0f);
}

extern "C" int lb_cuda_gemm_n_algos(int m, int n, int k, int ta, int tb, int c_f32, int accum)
{
	cublasLtMatmulHeuristicResult_t res[GEMM_ALGOS];
	struct gemm_key key;
	struct gemm_plan p;
	int got;

	if (!lbc.inited || m <= 0 || n <= 0 || k <= 0)
		return -1;
	bench_key(&key, m, n, k, ta, tb, c_f32, accum);
	gemm_plan_init(&p, &key);
	got = gemm_heuristics(&p, res, GEMM_ALGOS);
	gemm_plan_release(&p);
	return got;
}

extern "C" double lb_cuda_gemm_seconds(int m, int n, int k, int ta, int tb, int c_f32, int accum,
				       int algo, int iters)
{
	cublasLtMatmulHeuristicResult_t res[GEMM_ALGOS];
	struct gemm_key key;
	struct gemm_plan p;
	double secs;

	if (!lbc.inited || m <= 0 || n <= 0 || k <= 0 || algo < -1 || algo >= GEMM_ALGOS)
		return -1;
	bench_key(&key, m, n, k, ta, tb, c_f32, accum);
	if (iters < 1)
		iters = 1;
	gemm_plan_init(&p, &key);
	if (algo < 0)
		secs = bench_gemm(&p, NULL, iters);
	else if (gemm_heuristics(&p, res, GEMM_ALGOS) > algo)
		secs = bench_gemm(&p, &res[algo].algo, iters);
	else
		secs = -1;
	gemm_plan_release(&p);
	return secs;
}

extern "C" double lb_cuda_copy_bandwidth(size_t bytes, int iters)
{
	void *src = NULL, *dst = NULL;
	cudaEvent_t e0 = NULL, e1 = NULL;
	double bw = -1;
	float ms = 0;

	if (!lbc.inited || !bytes)
		return -1;
	if (iters < 1)
		iters = 1;
	if (cudaMalloc(&src, bytes) != cudaSuccess || cudaMalloc(&dst, bytes) != cudaSuccess ||
	    cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess ||
	    cudaMemsetAsync(src, 1, bytes, lbc_stream) != cudaSuccess)
		goto out_free;
	for (int it = -1; it < iters; it++) {
		if (it == 0 && cudaEventRecord(e0, lbc_stream) != cudaSuccess)
			goto out_free;
		if (cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, lbc_stream) !=
		    cudaSuccess)
			goto out_free;
	}
	if (cudaEventRecord(e1, lbc_stream) != cudaSuccess ||
	    cudaEventSynchronize(e1) != cudaSuccess ||
	    cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess || ms <= 0)
		goto out_free;
	bw = 2.0 * (double)bytes * iters / (ms * 1e-3);
out_free:
	cudaStreamSynchronize(lbc_stream);
	cudaGetLastError();
	if (e1)
		cudaEventDestroy(e1);
	if (e0)
		cudaEventDestroy(e0);
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
	if (!lbc.inited || !(seconds > 0))
		return -1;
	stall_kernel<<<1, 1, 0, lbc_stream>>>((unsigned long long)(seconds * 1e9));
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
