/*
 * The CUDA table's memory (harness/ops.h alloc ... write_i32): a counting device allocator
 * with a cap on live bytes (--mem-limit) and the backend's shared workspace; zero, copy,
 * casts and the model's initialisation drawn on the device; host <-> device transfers
 * through pinned staging memory. Element types: ACT bf16, F32 float, F64 double, I32 int32
 * (cuda_common.cuh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cuda/core.cuh"
#include "harness/rng.h"

#define STAGE_B	   (16u << 20) /* each of the two pinned buffers of write/read, bytes */
#define RING_N	   8	       /* pinned chunks of write_i32 */
#define RING_MIN_B (64u << 10) /* smallest chunk, bytes */

static const size_t kind_size[LB_NKINDS] = {sizeof(act_t), sizeof(float), sizeof(double),
					    sizeof(int32_t)};

/* Set at init: the workspace. */
static struct {
	void *workspace; /* ws_bytes (at least WORKSPACE_B), counted by the allocator */
	size_t ws_bytes;
} lbc;

size_t lbc_kind_size(enum lb_kind k)
{
	return kind_size[k];
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

/* bytes of zero-filled device memory (the fill is enqueued on lbc_stream()), or NULL. */
static void mem_sample_device(void);

void *lbc_mem_alloc_bytes(size_t bytes)
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
		LBC_CHECK(cudaMemsetAsync(p, 0, bytes, lbc_stream()));
	mem.used += mem_put(mem.slot, mem.cap, p, bytes);
	mem.count++;
	mem.live += bytes;
	if (mem.live > mem.peak)
		mem.peak = mem.live;
	mem_sample_device();
	return p;
}

void *lbc_alloc(size_t n, enum lb_kind k)
{
	size_t es;

	lbc_graph_guard("alloc");
	if ((unsigned)k >= LB_NKINDS)
		return NULL;
	es = kind_size[k];
	if (n > SIZE_MAX / es)
		return NULL;
	return lbc_mem_alloc_bytes(n * es);
}

void lbc_free(void *p)
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
	p = lbc_mem_alloc_bytes(bytes);
	if (!p)
		lb_fatal(__FILE__, __LINE__, "oom", "%zu bytes of workspace on CUDA device %d",
			 bytes, lbc_device());
	lbc_free(lbc.workspace); /* waits for the work that still reads it */
	lbc.workspace = p;
	lbc.ws_bytes = bytes;
	return p;
}

void lbc_set_mem_limit(uint64_t bytes)
{
	mem.limit = bytes;
}

void lbc_mem_stats(uint64_t *live, uint64_t *peak)
{
	if (live)
		*live = mem.live;
	if (peak)
		*peak = mem.peak;
}

void lbc_reset_peak(void)
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

uint64_t lbc_device_mem_peak(void)
{
	mem_sample_device();
	return mem.dev_peak;
}

/* ------------------------------------------------------------------------------------------
 * Zero, copy, cast. A cast goes through double: every source type converts to double
 * exactly and the one conversion to the destination rounds once (to nearest even), so
 * any pair gives the correctly rounded value.
 * ------------------------------------------------------------------------------------------ */

void lbc_zero(void *p, size_t n, enum lb_kind k)
{
	if (n)
		LBC_CHECK(cudaMemsetAsync(p, 0, n * kind_size[k], lbc_stream()));
}

void lbc_copy(void *dst, const void *src, size_t n, enum lb_kind k)
{
	if (n)
		LBC_CHECK(cudaMemcpyAsync(dst, src, n * kind_size[k], cudaMemcpyDeviceToDevice,
					  lbc_stream()));
}

/* One element between a double and each kind's type, on the device (the casts, the
 * initialisation) and on the host (the staged transfers): to_d loads, put_d stores. */
#define LBC_HD static __host__ __device__ __forceinline__
LBC_HD double to_d(act_t x)
{
	return (double)__bfloat162float(x);
}
LBC_HD double to_d(float x)
{
	return (double)x;
}
LBC_HD double to_d(double x)
{
	return x;
}
LBC_HD double to_d(int32_t x)
{
	return (double)x;
}
LBC_HD void put_d(act_t *p, double x)
{
	*p = __double2bfloat16(x);
}
LBC_HD void put_d(float *p, double x)
{
	*p = (float)x;
}
LBC_HD void put_d(double *p, double x)
{
	*p = x;
}
LBC_HD void put_d(int32_t *p, double x)
{
	*p = (int32_t)x;
}
#undef LBC_HD

/* f(T()) with T the element type of kind k: act_t, float, double, or int32_t. */
template <typename F> static void on_kind(enum lb_kind k, F &&f)
{
	switch (k) {
	case LB_K_ACT:
		f(act_t());
		break;
	case LB_K_F32:
		f(0.0f);
		break;
	case LB_K_F64:
		f(0.0);
		break;
	default:
		f(int32_t());
		break;
	}
}

template <typename D, typename S> static __global__ void cast_kernel(D *dst, const S *src, size_t n)
{
	for (size_t i = GRID_START; i < n; i += GRID_STEP)
		put_d(&dst[i], to_d(src[i]));
}

template <typename D> static void cast_from(D *dst, const void *src, enum lb_kind sk, size_t n)
{
	on_kind(sk, [&](auto z) {
		cast_kernel<<<grid_for(n), THREADS, 0, lbc_stream()>>>(dst,
								       (const decltype(z) *)src, n);
	});
	LBC_LAUNCHED();
}

/* The model's initialisation (ops.h fill_normal): draws in fp64, as on the CPU. */
template <typename D>
static __global__ void fill_normal_kernel(D *p, size_t n, uint64_t seed, int key, double std)
{
	for (size_t i = GRID_START; i < n; i += GRID_STEP)
		put_d(&p[i], std * lb_normal_at(seed, key, (uint64_t)i));
}

void lbc_fill_normal(void *p, size_t n, enum lb_kind k, uint64_t seed, int key, double std)
{
	if (k == LB_K_I32 || (unsigned)k >= LB_NKINDS)
		lb_fatal(__FILE__, __LINE__, "error", "fill_normal into kind %d", (int)k);
	if (!n)
		return;
	on_kind(k, [&](auto z) {
		fill_normal_kernel<<<grid_for(n), THREADS, 0, lbc_stream()>>>((decltype(z) *)p, n,
									      seed, key, std);
	});
	LBC_LAUNCHED();
}

void lbc_cast(void *dst, enum lb_kind dk, const void *src, enum lb_kind sk, size_t n)
{
	if (dk == LB_K_I32 || sk == LB_K_I32 || (unsigned)dk >= LB_NKINDS ||
	    (unsigned)sk >= LB_NKINDS)
		lb_fatal(__FILE__, __LINE__, "error",
			 "cast from kind %d to kind %d: only act, f32 and f64 convert", (int)sk,
			 (int)dk);
	if (!n)
		return;
	if (dk == sk) {
		lbc_copy(dst, src, n, dk);
		return;
	}
	on_kind(dk, [&](auto z) { cast_from((decltype(z) *)dst, src, sk, n); });
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

/* The start of a staged transfer of n elements of kind k (what: the op, for the graph
 * guard: a capture cannot take a host transfer): the buffers, made on first use; *chunk =
 * the elements of k one buffer holds. 0 when there is nothing to transfer. */
static int stage_begin(const char *what, enum lb_kind k, size_t n, size_t *chunk)
{
	if (!n)
		return 0;
	lbc_graph_guard(what);
	stage_init();
	*chunk = STAGE_B / kind_size[k];
	return 1;
}

/* Elements of the chunk at off of a transfer of n in chunks of chunk (the last may be short). */
static size_t chunk_len(size_t n, size_t off, size_t chunk)
{
	return n - off < chunk ? n - off : chunk;
}

/* Enqueue a copy to or from a pinned buffer, then record ev after it and mark it pending:
 * the buffer is not reused before ev has passed. */
static void copy_recorded(void *dst, const void *src, size_t bytes, cudaMemcpyKind dir,
			  cudaEvent_t ev, int *pending)
{
	LBC_CHECK(cudaMemcpyAsync(dst, src, bytes, dir, lbc_stream()));
	LBC_CHECK(cudaEventRecord(ev, lbc_stream()));
	*pending = 1;
}

/* n elements between host doubles and a staging buffer in kind k's format: stage_from_host
 * fills the buffer, host_from_stage reads it. */
static void stage_from_host(void *buf, const double *host, size_t n, enum lb_kind k)
{
	on_kind(k, [&](auto z) {
		auto *b = (decltype(z) *)buf;

		for (size_t i = 0; i < n; i++)
			put_d(&b[i], host[i]);
	});
}

static void host_from_stage(double *host, const void *buf, size_t n, enum lb_kind k)
{
	on_kind(k, [&](auto z) {
		const auto *b = (const decltype(z) *)buf;

		for (size_t i = 0; i < n; i++)
			host[i] = to_d(b[i]);
	});
}

void lbc_write(void *dst, const double *src, size_t n, enum lb_kind k)
{
	size_t es = kind_size[k], chunk;

	if (!stage_begin("write", k, n, &chunk))
		return;
	for (size_t off = 0; off < n; off += chunk) {
		size_t cnt = chunk_len(n, off, chunk);
		int b = off / chunk % 2; /* the buffers alternate */

		stage_wait(b);
		stage_from_host(stage.buf[b], src + off, cnt, k);
		copy_recorded((char *)dst + off * es, stage.buf[b], cnt * es,
			      cudaMemcpyHostToDevice, stage.ev[b], &stage.pending[b]);
	}
	stage_wait(0);
	stage_wait(1);
}

/* Enqueue the device -> host copy of the chunk at off of read's n elements (es bytes each)
 * into stage buffer b. */
static void read_enqueue(int b, const void *src, size_t off, size_t n, size_t chunk, size_t es)
{
	copy_recorded(stage.buf[b], (const char *)src + off * es, chunk_len(n, off, chunk) * es,
		      cudaMemcpyDeviceToHost, stage.ev[b], &stage.pending[b]);
}

void lbc_read(double *dst, const void *src, size_t n, enum lb_kind k)
{
	size_t es = kind_size[k], chunk;

	if (!stage_begin("read", k, n, &chunk))
		return;
	read_enqueue(0, src, 0, n, chunk, es);
	for (size_t off = 0; off < n; off += chunk) {
		int b = off / chunk % 2; /* the buffers alternate */

		if (off + chunk < n) /* the next chunk copies while this one converts */
			read_enqueue(b ^ 1, src, off + chunk, n, chunk, es);
		stage_wait(b);
		host_from_stage(dst + off, stage.buf[b], chunk_len(n, off, chunk), k);
	}
}

void lbc_write_i32(int32_t *dst, const int32_t *src, size_t n)
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
	copy_recorded(dst, ring.buf[i], n * sizeof(int32_t), cudaMemcpyHostToDevice, ring.ev[i],
		      &ring.pending[i]);
}

/* The workspace's first WORKSPACE_B bytes (init). */
int lbc_workspace_init(void)
{
	lbc.workspace = lbc_mem_alloc_bytes(WORKSPACE_B);
	lbc.ws_bytes = WORKSPACE_B;
	return lbc.workspace ? 0 : -1;
}
