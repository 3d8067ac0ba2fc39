/*
 * The ops table "cuda" (harness/ops.h) and what it is bound to: device set-up (one GPU per
 * node-local rank, one non-blocking stream beside a side stream and a p2p stream, the
 * cuBLASLt handle and workspace, the reductions' scratch), device information, the streams
 * and events, and the table itself, filled from the files of the backend, one section of
 * the table each: memory.cu (the counting allocator with its cap on live bytes, zero,
 * copy, casts, host transfers through pinned staging memory), gemm.cu (matmul over the one
 * GEMM entry lbc_gemm, its algorithm tuned once per problem), elementwise.cu, reduce.cu,
 * adamw.cu, graph.cu (the graph members; the replay table they hand out), the kernels of
 * one operation each (norm, RoPE, attention, SwiGLU, embedding, cross-entropy), and the
 * GPU communicator (comm_world, comm_cuda.cu). Element types: ACT bf16, F32 float, F64
 * double, I32 int32 (harness/cuda/cuda_common.cuh). Every op is enqueued on lbc_stream(); only
 * read, sum, sum_sq, event_elapsed and sync wait, and lbc_gemm on the first call of each
 * distinct problem (the tuning; the first, warm-up step), which also briefly holds a scratch
 * copy of C outside the counting allocator (LAYOUTBENCH_GEMM_TUNE=0: no tuning, no wait).
 * The trainer drives the backend from one host thread: nothing here takes a lock.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cuda/core.cuh"
extern "C" {
#include "harness/comm/comm_cuda.h"
}

/* The stream the following ops go to (ops.h use_stream): the backend's own, the side
 * stream or the p2p stream; the other files read it through lbc_stream(). */
static cudaStream_t cur;

cudaStream_t lbc_stream(void)
{
	return cur;
}

/* Set at init. */
static struct {
	int inited;
	int device;
	int sm_count;
} lbc;

int lbc_inited(void)
{
	return lbc.inited;
}

int lbc_device(void)
{
	return lbc.device;
}

int lbc_sm_count(void)
{
	return lbc.sm_count;
}

/* ------------------------------------------------------------------------------------------
 * Ordering and time: the one stream, and events recorded on it.
 * ------------------------------------------------------------------------------------------ */

static void *cuda_stream(void)
{
	return (void *)lbc_stream();
}

static void cuda_sync(void)
{
	lbc_graph_guard("sync");
	LBC_CHECK(cudaStreamSynchronize(lbc_stream()));
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
	LBC_CHECK(cudaEventRecord((cudaEvent_t)ev, lbc_stream()));
}

/* The side stream and the pipeline's p2p stream (created at init) and the backend's own:
 * lbc_stream() is whichever the following ops go to. */
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
	cur = s ? (cudaStream_t)s : main_stream;
}

static void cuda_wait_event(void *ev)
{
	lbc_graph_guard("wait_event");
	LBC_CHECK(cudaStreamWaitEvent(lbc_stream(), (cudaEvent_t)ev, 0));
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
	int drv = 0, rt = 0, ndev = 0, ws, red;
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
		e = cudaStreamCreateWithFlags(&cur, cudaStreamNonBlocking);
	if (e == cudaSuccess)
		e = cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
	if (e == cudaSuccess)
		e = cudaStreamCreateWithFlags(&p2p, cudaStreamNonBlocking);
	main_stream = cur;
	if (e != cudaSuccess) {
		cudaGetLastError();
		snprintf(err, errlen, "cannot use CUDA device %d (local rank %d): %s", lbc.device,
			 local_rank, cudaGetErrorString(e));
		return -1;
	}
	if (lbc_gemm_init()) {
		snprintf(err, errlen, "cublasLtCreate failed on CUDA device %d", lbc.device);
		return -1;
	}
	ws = lbc_workspace_init();
	red = lbc_reduce_init_dev();
	if (ws || red || lbc_reduce_init_host()) {
		cudaGetLastError();
		snprintf(err, errlen, "out of memory on CUDA device %d for the cuBLASLt workspace",
			 lbc.device);
		return -1;
	}
	LBC_CHECK(
	    cudaStreamSynchronize(lbc_stream())); /* the zero fills, before anyone uses them */
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
		t.esize[k] = lbc_kind_size((enum lb_kind)k);
	t.dtype[LB_K_ACT] = LB_BF16;
	t.dtype[LB_K_F32] = LB_F32;
	t.dtype[LB_K_F64] = LB_F64;
	t.dtype[LB_K_I32] = LB_I32;

	t.init = cuda_init;
	t.device_info = cuda_device_info;

	t.alloc = lbc_alloc;
	t.free_ = lbc_free;
	t.zero = lbc_zero;
	t.copy = lbc_copy;
	t.cast = lbc_cast;
	t.write = lbc_write;
	t.read = lbc_read;
	t.write_i32 = lbc_write_i32;
	t.fill_normal = lbc_fill_normal;
	t.set_mem_limit = lbc_set_mem_limit;
	t.mem_stats = lbc_mem_stats;
	t.reset_peak = lbc_reset_peak;
	t.device_mem_peak = lbc_device_mem_peak;

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

	t.matmul = lbc_matmul;
	t.matmul_add = lbc_matmul_add;

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

	t.adamw = lbc_adamw;
	t.add = lbc_add;
	t.acc = lbc_acc;
	t.scale = lbc_scale;
	t.sum_acc = lbc_sum_acc;
	t.sum_sq_acc = lbc_sum_sq_acc;
	t.sum = lbc_sum;
	t.sum_sq = lbc_sum_sq;

	t.adamw_scalars = lbc_adamw_scalars;
	t.clip_scale = lbc_clip_scale;
	t.adamw_dev = lbc_adamw_dev;

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
