/*
 * RMSNorm (Zhang & Sennrich 2019, eq. 4) on the GPU, forward and backward, fused and unfused:
 * per row of x (T, H), rstd = 1 / sqrt(mean(x^2) + eps), xhat = x * rstd, y = xhat * w; the
 * backward (differentiating the same formula; the CPU reference harness/ops_cpu_impl.h) is
 * c = mean(dy*w * xhat), dx += rstd * (dy*w - xhat * c), dw += sum over rows of dy * xhat.
 * Operands: x, y, w, xhat, dy, dx are act (bf16); rstd (T) and dw (H, the main gradient) f32;
 * the unfused passes keep their (T, H) and (T) intermediates in f32 scratch. All arithmetic is
 * fp32: bf16 loads are widened, each result is rounded once when stored (dx += is done in
 * fp32, then rounded). Decomposition: where a row is at most 4 * 512 vectors (H <= 16384 in
 * 16-byte vectors), the fused kernels hold rows in registers, each thread owning the same
 * columns of every row. A forward block normalises R rows: their x is read once and kept
 * packed across the block-wide fp32 reductions of sum x^2. The backward runs a persistent
 * grid (the blocks the device holds at once, each left at least BWD_MIN_ROWS rows), each
 * block taking groups of R rows, blockIdx.x, blockIdx.x + gridDim.x, ...: it issues the
 * loads of dy, x and dx of a whole group, so that 4 vectors of each operand per thread are
 * in flight, before one block reduction of the group's R dot products for c; every thread
 * keeps its partial sums of dw in registers. At the end (sm_90 code on a device with clusters)
 * the blocks of a thread-block cluster of BWD_CLUSTER add their partials through distributed
 * shared memory, each block a slice of the columns, and add the cluster's sums into dw with
 * 16-byte atomics (red.global.add.v4.f32): half the atomics into the same H addresses that
 * every block's own flush would send, for h floats of shared memory and two cluster barriers.
 * Measured on the H200 (Llama-13B width, H 5120), it raises the backward from 67% to 71% of
 * the copy bandwidth at T 2048 and from 86% to 90% at T 8192; clusters of 4 gain less, and
 * summing per-block partials in a second kernel (no atomics) lost at T 2048. Code compiled
 * for an earlier architecture, or a device without clusters, takes a plain launch in which
 * every block adds its own partials with atomics. The order in which clusters arrive makes dw
 * nondeterministic in its last bits. Wider rows fall back to one block per row (forward) and to dw
 * partials in shared memory (backward). The unfused variant runs each step of the formula as its
 * own kernel, one full pass over memory each, as an eager framework does (the cost the paper's
 * fused kernel removes). Rows are read in 16-byte vectors (8 bf16) when H is a multiple of 8 and
 * the operands are 16-byte aligned, element by element otherwise.
 *
 * Why one file: one operation, RMSNorm, in its two forms, forward and backward together (an
 * operation a file, as llm.c keeps them); the unfused passes share the fused kernels' vector
 * loads, block reductions, alignment test and launch-shape helpers, which a split would put
 * in a header of their own for a file of 200 lines.
 */
#include "harness/cuda/cuda_common.cuh"

#include <cooperative_groups.h>
#include <math.h>

#define NORM_MAX_THREADS 1024
/* Threads of a register-kernel block at most (rows wider than 4 vectors a thread fall back). */
#define REG_MAX_THREADS 512
/* Registers per thread of the register backward with C vectors per thread: left alone,
 * ptxas spends all 128 that 512 threads allow on widened copies, and one block of 320 (the
 * 13B width) then fills an SM; 96 lets two blocks share one. C = 4 holds 80 live values
 * of its own (packed operands, dw partials) and keeps the 128. */
#define BWD_REGS(c) ((c) == 4 ? 128 : 96)
/* Blocks of the backward's clusters (sm_90): they sum their dw partials before the atomics;
 * 2 measured ahead of 4 (fewer blocks waiting on the slowest of their cluster). */
#define BWD_CLUSTER 2

template <int VEC> static __device__ __forceinline__ void ld_f32(float (&f)[VEC], const float *p)
{
	if constexpr (VEC % 4 == 0) {
#pragma unroll
		for (int k = 0; k < VEC; k += 4) {
			float4 v = *reinterpret_cast<const float4 *>(p + k);

			f[k] = v.x;
			f[k + 1] = v.y;
			f[k + 2] = v.z;
			f[k + 3] = v.w;
		}
	} else {
#pragma unroll
		for (int k = 0; k < VEC; k++)
			f[k] = p[k];
	}
}

template <int VEC> static __device__ __forceinline__ void st_f32(float *p, const float (&f)[VEC])
{
	if constexpr (VEC % 4 == 0) {
#pragma unroll
		for (int k = 0; k < VEC; k += 4)
			*reinterpret_cast<float4 *>(p + k) =
			    make_float4(f[k], f[k + 1], f[k + 2], f[k + 3]);
	} else {
#pragma unroll
		for (int k = 0; k < VEC; k++)
			p[k] = f[k];
	}
}

/* Sum of v over the block, returned to every thread. blockDim.x is a multiple of 32 and every
 * thread of the block calls it (the shuffles use the full mask). Safe to call repeatedly. */
static __device__ __forceinline__ float block_sum(float v)
{
	__shared__ float part[32];
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;

#pragma unroll
	for (int o = 16; o; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	__syncthreads(); /* the previous call's readers are done with part[] */
	if (lane == 0)
		part[warp] = v;
	__syncthreads();
	v = lane < nwarps ? part[lane] : 0.0f;
#pragma unroll
	for (int o = 16; o; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/* --- VEC consecutive act elements kept exactly as loaded (packed bf16), unpacked at use --- */

template <int VEC> struct raw_act;
template <> struct raw_act<8> {
	uint4 u;
};
template <> struct raw_act<1> {
	unsigned short u;
};

template <int VEC> static __device__ __forceinline__ raw_act<VEC> raw_zero()
{
	raw_act<VEC> r;

	if constexpr (VEC == 8)
		r.u = make_uint4(0u, 0u, 0u, 0u);
	else
		r.u = 0; /* the bf16 bit pattern of +0 */
	return r;
}

template <int VEC> static __device__ __forceinline__ raw_act<VEC> raw_ld(const act_t *p)
{
	raw_act<VEC> r;

	if constexpr (VEC == 8)
		r.u = *reinterpret_cast<const uint4 *>(p);
	else
		r.u = __bfloat16_as_ushort(*p);
	return r;
}

template <int VEC> static __device__ __forceinline__ void raw_f32(float (&f)[VEC], raw_act<VEC> r)
{
	if constexpr (VEC == 8)
		act8_f32(f, r.u);
	else
		f[0] = __bfloat162float(__ushort_as_bfloat16(r.u));
}

/* The calling thread's C vectors j + i*blockDim.x (i < C) of a row of nv vectors at p, as
 * loaded; zero past the row's end. */
template <int VEC, int C>
static __device__ __forceinline__ void raw_ld_cols(raw_act<VEC> (&r)[C], const act_t *p, int nv)
{
#pragma unroll
	for (int i = 0; i < C; i++) {
		int q = threadIdx.x + i * blockDim.x;

		r[i] = q < nv ? raw_ld<VEC>(p + (size_t)q * VEC) : raw_zero<VEC>();
	}
}

/*
 * An empty asm that the compiler must assume rewrites r: after it, values derived from r
 * (the widened floats, dy*w, x*rstd) are recomputed from the packed registers instead of
 * being kept alive, widened, across a barrier (twice the registers). The recomputation is
 * the same fp32 arithmetic on the same bits, so results are unchanged.
 */
template <int VEC> static __device__ __forceinline__ void raw_opaque(raw_act<VEC> &r)
{
	if constexpr (VEC == 8)
		asm volatile("" : "+r"(r.u.x), "+r"(r.u.y), "+r"(r.u.z), "+r"(r.u.w));
	else
		asm volatile("" : "+h"(r.u));
}

/*
 * Sums each of v[0..R) over the block, in place, the result identical in every thread (the
 * same butterfly over the same operands). blockDim.x is a multiple of 32, every thread calls
 * it, and part (R * 32 floats of shared memory) is not in use by a call that some thread may
 * still be reading: callers alternate two buffers, so one barrier per call suffices.
 */
template <int R> static __device__ __forceinline__ void block_sum_n(float (&v)[R], float *part)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;

#pragma unroll
	for (int r = 0; r < R; r++)
#pragma unroll
		for (int o = 16; o; o >>= 1)
			v[r] += __shfl_xor_sync(0xffffffffu, v[r], o);
	if (lane == 0)
#pragma unroll
		for (int r = 0; r < R; r++)
			part[r * 32 + warp] = v[r];
	__syncthreads();
#pragma unroll
	for (int r = 0; r < R; r++) {
		float s = lane < nwarps ? part[r * 32 + lane] : 0.0f;

#pragma unroll
		for (int o = 16; o; o >>= 1)
			s += __shfl_xor_sync(0xffffffffu, s, o);
		v[r] = s;
	}
}

/* --- fused, row held in registers (h / VEC <= REG_MAX_THREADS * C) --- */

/*
 * Block g normalises rows g*R .. g*R + R-1 (grid ceil(t / R)); thread j owns the vectors
 * j, j + blockDim.x, ..., C of them (those past the row's end idle), so x is read once and
 * kept packed in registers across the reduction.
 */
template <int VEC, int C, int R>
static __global__ void __launch_bounds__(REG_MAX_THREADS)
    rmsnorm_fwd_reg_kernel(act_t *__restrict__ y, float *__restrict__ rstd,
			   const act_t *__restrict__ x, const act_t *__restrict__ w, int t, int h)
{
	__shared__ float part[R * 32];
	int nv = h / VEC;
	raw_act<VEC> xr[R][C], wr[C];
	float ss[R];

	raw_ld_cols<VEC, C>(wr, w, nv);
#pragma unroll
	for (int r = 0; r < R; r++) {
		int row = blockIdx.x * R + r;

#pragma unroll
		for (int i = 0; i < C; i++) {
			int q = threadIdx.x + i * blockDim.x;

			xr[r][i] = row < t && q < nv
				       ? raw_ld<VEC>(x + (size_t)row * h + (size_t)q * VEC)
				       : raw_zero<VEC>();
		}
	}
#pragma unroll
	for (int r = 0; r < R; r++) {
		ss[r] = 0.0f;
#pragma unroll
		for (int i = 0; i < C; i++) {
			float xv[VEC];

			raw_f32<VEC>(xv, xr[r][i]);
#pragma unroll
			for (int k = 0; k < VEC; k++)
				ss[r] += xv[k] * xv[k];
		}
	}
	block_sum_n<R>(ss, part);
#pragma unroll
	for (int r = 0; r < R; r++)
#pragma unroll
		for (int i = 0; i < C; i++)
			raw_opaque<VEC>(xr[r][i]);
#pragma unroll
	for (int i = 0; i < C; i++)
		raw_opaque<VEC>(wr[i]);
#pragma unroll
	for (int r = 0; r < R; r++) {
		int row = blockIdx.x * R + r;

		if (row >= t)
			break;
		float rr = 1.0f / sqrtf(ss[r] / (float)h + (float)LB_RMS_EPS);

#pragma unroll
		for (int i = 0; i < C; i++) {
			int q = threadIdx.x + i * blockDim.x;
			float xv[VEC], wv[VEC], yv[VEC];

			if (q >= nv)
				break;
			raw_f32<VEC>(xv, xr[r][i]);
			raw_f32<VEC>(wv, wr[i]);
#pragma unroll
			for (int k = 0; k < VEC; k++)
				yv[k] = xv[k] * rr * wv[k];
			st_act<VEC>(y + (size_t)row * h + (size_t)q * VEC, yv);
		}
		if (threadIdx.x == 0)
			rstd[row] = rr;
	}
}

/*
 * Row groups g = blockIdx.x, blockIdx.x + gridDim.x, ... of R rows each (rows g*R ..
 * g*R + R-1, those past t skipped); thread j owns the vectors j + i*blockDim.x (i < C) of
 * every row, keeps its partial sums of dw for those columns in registers (w is re-read, from
 * L1, for each group: registers are what limits two blocks per SM), and issues the loads of
 * dy, x and dx of all R rows before the one block reduction of the R dot products. At the
 * end (sm_90) each thread stores its partials into the block's dynamic shared memory (h
 * floats), block k of a cluster of cs sums slice k of the columns over the cluster's blocks
 * (distributed shared memory) and adds the sums into dw: 16-byte vector atomics where dw is
 * aligned (vec_atomics), one float at a time otherwise. Before sm_90 every thread adds its
 * own partials with float atomics.
 */
template <int VEC, int C, int R>
static __global__ void __maxnreg__(BWD_REGS(C))
    rmsnorm_bwd_reg_kernel(act_t *__restrict__ dx, float *__restrict__ dw,
			   const act_t *__restrict__ dy, const act_t *__restrict__ x,
			   const act_t *__restrict__ w, const float *__restrict__ rstd, int t,
			   int h, int vec_atomics)
{
	__shared__ float part[2][R * 32];
	int nv = h / VEC, ngroups = (t + R - 1) / R, buf = 0;
	float dwp[C][VEC];

#pragma unroll
	for (int i = 0; i < C; i++)
#pragma unroll
		for (int k = 0; k < VEC; k++)
			dwp[i][k] = 0.0f;
	for (int g = blockIdx.x; g < ngroups; g += gridDim.x, buf ^= 1) {
		raw_act<VEC> dyr[R][C], xr[R][C], dxr[R][C], wr[C];
		float rr[R], dot[R];

		raw_ld_cols<VEC, C>(wr, w, nv);

#pragma unroll
		for (int r = 0; r < R; r++) {
			int row = g * R + r;
			size_t off = (size_t)row * h;

			rr[r] = row < t ? rstd[row] : 0.0f;
#pragma unroll
			for (int i = 0; i < C; i++) {
				int q = threadIdx.x + i * blockDim.x;

				if (row < t && q < nv) {
					dyr[r][i] = raw_ld<VEC>(dy + off + q * VEC);
					xr[r][i] = raw_ld<VEC>(x + off + q * VEC);
					dxr[r][i] = raw_ld<VEC>(dx + off + q * VEC);
				} else { /* zeros: add nothing to dot or dw */
					dyr[r][i] = raw_zero<VEC>();
					xr[r][i] = raw_zero<VEC>();
					dxr[r][i] = raw_zero<VEC>();
				}
			}
		}
#pragma unroll
		for (int r = 0; r < R; r++) {
			dot[r] = 0.0f;
#pragma unroll
			for (int i = 0; i < C; i++) {
				float dyv[VEC], xv[VEC], wv[VEC];

				raw_f32<VEC>(dyv, dyr[r][i]);
				raw_f32<VEC>(xv, xr[r][i]);
				raw_f32<VEC>(wv, wr[i]);
#pragma unroll
				for (int k = 0; k < VEC; k++) {
					float xhat = xv[k] * rr[r];

					dot[r] += (dyv[k] * wv[k]) * xhat;
					dwp[i][k] += dyv[k] * xhat;
				}
			}
		}
		block_sum_n<R>(dot, part[buf]);
#pragma unroll
		for (int r = 0; r < R; r++)
#pragma unroll
			for (int i = 0; i < C; i++) {
				raw_opaque<VEC>(dyr[r][i]);
				raw_opaque<VEC>(xr[r][i]);
			}
#pragma unroll
		for (int r = 0; r < R; r++) {
			int row = g * R + r;
			float c = dot[r] / (float)h;

			if (row >= t)
				break;
#pragma unroll
			for (int i = 0; i < C; i++) {
				int q = threadIdx.x + i * blockDim.x;
				float dyv[VEC], xv[VEC], wv[VEC], dxv[VEC];

				if (q >= nv)
					break;
				raw_f32<VEC>(dyv, dyr[r][i]);
				raw_f32<VEC>(xv, xr[r][i]);
				raw_f32<VEC>(wv, raw_ld<VEC>(w + (size_t)q * VEC));
				raw_f32<VEC>(dxv, dxr[r][i]);
#pragma unroll
				for (int k = 0; k < VEC; k++)
					dxv[k] += rr[r] * (dyv[k] * wv[k] - xv[k] * rr[r] * c);
				st_act<VEC>(dx + (size_t)row * h + (size_t)q * VEC, dxv);
			}
		}
	}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	{
		extern __shared__ __align__(16) float dws[]; /* h floats: this block's partials */
		cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
		int cs = (int)cl.num_blocks(), rank = (int)cl.block_rank();

#pragma unroll
		for (int i = 0; i < C; i++) {
			int q = threadIdx.x + i * blockDim.x;

			if (q >= nv)
				break;
			st_f32<VEC>(dws + (size_t)q * VEC, dwp[i]);
		}
		cl.sync();
		if (vec_atomics) { /* float4 columns; h a multiple of 4, dw aligned */
			int h4 = h / 4, per = (h4 + cs - 1) / cs, f1 = (rank + 1) * per;

			for (int f = rank * per + threadIdx.x; f < f1 && f < h4; f += blockDim.x) {
				float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

				for (int k = 0; k < cs; k++) {
					float4 o = reinterpret_cast<const float4 *>(
					    cl.map_shared_rank(dws, k))[f];

					s.x += o.x, s.y += o.y, s.z += o.z, s.w += o.w;
				}
				lbc_red_add4(dw + 4 * f, s.x, s.y, s.z, s.w);
			}
		} else {
			int per = (h + cs - 1) / cs, e1 = (rank + 1) * per;

			for (int e = rank * per + threadIdx.x; e < e1 && e < h; e += blockDim.x) {
				float s = 0.0f;

				for (int k = 0; k < cs; k++)
					s += cl.map_shared_rank(dws, k)[e];
				atomicAdd(dw + e, s);
			}
		}
		cl.sync(); /* no block leaves while another reads its shared memory */
	}
#else
#pragma unroll
	for (int i = 0; i < C; i++) {
		int q = threadIdx.x + i * blockDim.x;

		if (q >= nv)
			break;
#pragma unroll
		for (int k = 0; k < VEC; k++)
			atomicAdd(dw + (size_t)q * VEC + k, dwp[i][k]);
	}
#endif
}

/* --- fused, any width: the fallbacks past the register kernels' widths --- */

/* One block per row (grid t). */
template <int VEC>
static __global__ void __launch_bounds__(NORM_MAX_THREADS)
    rmsnorm_fwd_kernel(act_t *__restrict__ y, float *__restrict__ rstd, const act_t *__restrict__ x,
		       const act_t *__restrict__ w, int h)
{
	size_t row = blockIdx.x;
	const act_t *xr = x + row * h;
	act_t *yr = y + row * h;
	float ss = 0.0f;

	for (int j = threadIdx.x * VEC; j < h; j += blockDim.x * VEC) {
		float xv[VEC];

		ld_act<VEC>(xv, xr + j);
#pragma unroll
		for (int k = 0; k < VEC; k++)
			ss += xv[k] * xv[k];
	}
	ss = block_sum(ss);
	float r = 1.0f / sqrtf(ss / (float)h + (float)LB_RMS_EPS);
	for (int j = threadIdx.x * VEC; j < h; j += blockDim.x * VEC) {
		float xv[VEC], wv[VEC], yv[VEC];

		ld_act<VEC>(xv, xr + j);
		ld_act<VEC>(wv, w + j);
#pragma unroll
		for (int k = 0; k < VEC; k++)
			yv[k] = xv[k] * r * wv[k];
		st_act<VEC>(yr + j, yv);
	}
	if (threadIdx.x == 0)
		rstd[row] = r;
}

/*
 * The block's dw partials of the shared-memory column reductions (rmsnorm_bwd_kernel,
 * unfused_colsum_kernel): h = nv * VEC floats of dynamic shared memory, stored transposed
 * (element k of vector q at k*nv + q) so a warp's accesses hit distinct banks; zeroed first,
 * added into dw with atomics at the end.
 */
template <int VEC> static __device__ __forceinline__ void dws_zero(float *dws, int nv)
{
	for (int q = threadIdx.x; q < nv; q += blockDim.x)
#pragma unroll
		for (int k = 0; k < VEC; k++)
			dws[k * nv + q] = 0.0f;
}

template <int VEC>
static __device__ __forceinline__ void dws_flush(float *dw, const float *dws, int nv)
{
	for (int q = threadIdx.x; q < nv; q += blockDim.x)
#pragma unroll
		for (int k = 0; k < VEC; k++)
			atomicAdd(dw + (size_t)q * VEC + k, dws[k * nv + q]);
}

/* The block's rows blockIdx.x + i*gridDim.x of t rows of h, each given to
 * row_fn(row, off = row * h, dws, nv) between the partials' zeroing and their flush into dw;
 * dynamic shared memory: h floats. */
template <int VEC, typename F>
static __device__ __forceinline__ void dws_rows(float *dw, int t, int h, F row_fn)
{
	extern __shared__ float dws[];
	int nv = h / VEC;

	dws_zero<VEC>(dws, nv);
	for (int row = blockIdx.x; row < t; row += gridDim.x)
		row_fn(row, (size_t)row * h, dws, nv);
	dws_flush<VEC>(dw, dws, nv);
}

/* Rows blockIdx.x + i*gridDim.x (dws_rows). */
template <int VEC>
static __global__ void __launch_bounds__(NORM_MAX_THREADS)
    rmsnorm_bwd_kernel(act_t *__restrict__ dx, float *__restrict__ dw, const act_t *__restrict__ dy,
		       const act_t *__restrict__ x, const act_t *__restrict__ w,
		       const float *__restrict__ rstd, int t, int h)
{
	dws_rows<VEC>(dw, t, h, [&](int row, size_t off, float *dws, int nv) {
		float r = rstd[row], dot = 0.0f;

		for (int q = threadIdx.x; q < nv; q += blockDim.x) {
			float dyv[VEC], xv[VEC], wv[VEC];

			ld_act<VEC>(dyv, dy + off + (size_t)q * VEC);
			ld_act<VEC>(xv, x + off + (size_t)q * VEC);
			ld_act<VEC>(wv, w + q * VEC);
#pragma unroll
			for (int k = 0; k < VEC; k++) {
				float xhat = xv[k] * r;

				dot += (dyv[k] * wv[k]) * xhat;
				dws[k * nv + q] += dyv[k] * xhat;
			}
		}
		dot = block_sum(dot);
		float c = dot / (float)h;
		for (int q = threadIdx.x; q < nv; q += blockDim.x) {
			float dyv[VEC], xv[VEC], wv[VEC], dxv[VEC];

			ld_act<VEC>(dyv, dy + off + (size_t)q * VEC);
			ld_act<VEC>(xv, x + off + (size_t)q * VEC);
			ld_act<VEC>(wv, w + q * VEC);
			ld_act<VEC>(dxv, dx + off + (size_t)q * VEC);
#pragma unroll
			for (int k = 0; k < VEC; k++)
				dxv[k] += r * (dyv[k] * wv[k] - xv[k] * r * c);
			st_act<VEC>(dx + off + (size_t)q * VEC, dxv);
		}
	});
}

/* --- unfused: one kernel per step, elementwise ones grid-striding over vectors --- */

#define GRID_STRIDE(e, n)                                                                          \
	for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < (n);                    \
	     e += (size_t)gridDim.x * blockDim.x)

/* sq = x * x (f32, T*H). */
template <int VEC>
static __global__ void unfused_sq_kernel(float *__restrict__ sq, const act_t *__restrict__ x,
					 size_t nv)
{
	GRID_STRIDE(e, nv)
	{
		float v[VEC];

		ld_act<VEC>(v, x + e * VEC);
#pragma unroll
		for (int k = 0; k < VEC; k++)
			v[k] = v[k] * v[k];
		st_f32<VEC>(sq + e * VEC, v);
	}
}

/* out[row] = mean over the row of a (f32), or of a times b (act) when MUL; a block a row. */
template <int VEC, bool MUL>
static __global__ void __launch_bounds__(NORM_MAX_THREADS)
    unfused_rowmean_kernel(float *__restrict__ out, const float *__restrict__ a,
			   const act_t *__restrict__ b, int h)
{
	size_t off = (size_t)blockIdx.x * h;
	float s = 0.0f;

	for (int j = threadIdx.x * VEC; j < h; j += blockDim.x * VEC) {
		float av[VEC];

		ld_f32<VEC>(av, a + off + j);
		if constexpr (MUL) {
			float bv[VEC];

			ld_act<VEC>(bv, b + off + j);
#pragma unroll
			for (int k = 0; k < VEC; k++)
				s += av[k] * bv[k];
		} else {
#pragma unroll
			for (int k = 0; k < VEC; k++)
				s += av[k];
		}
	}
	s = block_sum(s);
	if (threadIdx.x == 0)
		out[blockIdx.x] = s / (float)h;
}

/* rstd = 1 / sqrt(ms + eps) (T). */
static __global__ void unfused_rsqrt_kernel(float *__restrict__ rstd, const float *__restrict__ ms,
					    size_t t)
{
	GRID_STRIDE(i, t)
	{
		rstd[i] = 1.0f / sqrtf(ms[i] + (float)LB_RMS_EPS);
	}
}

/* xhat = x * rstd[row] (act). */
template <int VEC>
static __global__ void unfused_scale_kernel(act_t *__restrict__ xhat, const act_t *__restrict__ x,
					    const float *__restrict__ rstd, size_t nv, int h)
{
	GRID_STRIDE(e, nv)
	{
		float v[VEC];
		float r = rstd[(e * VEC) / h];

		ld_act<VEC>(v, x + e * VEC);
#pragma unroll
		for (int k = 0; k < VEC; k++)
			v[k] *= r;
		st_act<VEC>(xhat + e * VEC, v);
	}
}

/* Stores of VEC fp32 results into an act (rounded) or an f32 output. */
template <int VEC> static __device__ __forceinline__ void st_out(act_t *p, const float (&f)[VEC])
{
	st_act<VEC>(p, f);
}

template <int VEC> static __device__ __forceinline__ void st_out(float *p, const float (&f)[VEC])
{
	st_f32<VEC>(p, f);
}

/* out = a * w[col], out act or f32: the forward's y = xhat * w (act) and the backward's
 * dxhat = dy * w (f32, T*H). */
template <int VEC, typename OUT>
static __global__ void unfused_colmul_kernel(OUT *__restrict__ out, const act_t *__restrict__ a,
					     const act_t *__restrict__ w, size_t nv, int h)
{
	GRID_STRIDE(e, nv)
	{
		float v[VEC], wv[VEC];

		ld_act<VEC>(v, a + e * VEC);
		ld_act<VEC>(wv, w + (e * VEC) % h);
#pragma unroll
		for (int k = 0; k < VEC; k++)
			v[k] *= wv[k];
		st_out<VEC>(out + e * VEC, v);
	}
}

/* dw += sum over rows of dy * xhat: the fused backward's column reduction on its own. */
template <int VEC>
static __global__ void __launch_bounds__(NORM_MAX_THREADS)
    unfused_colsum_kernel(float *__restrict__ dw, const act_t *__restrict__ dy,
			  const act_t *__restrict__ xhat, int t, int h)
{
	dws_rows<VEC>(dw, t, h, [&](int, size_t off, float *dws, int nv) {
		for (int q = threadIdx.x; q < nv; q += blockDim.x) {
			float dyv[VEC], xv[VEC];

			ld_act<VEC>(dyv, dy + off + (size_t)q * VEC);
			ld_act<VEC>(xv, xhat + off + (size_t)q * VEC);
#pragma unroll
			for (int k = 0; k < VEC; k++)
				dws[k * nv + q] += dyv[k] * xv[k];
		}
	});
}

/* dx += rstd[row] * (dxhat - xhat * c[row]) (act, accumulated in fp32). */
template <int VEC>
static __global__ void unfused_dx_kernel(act_t *__restrict__ dx, const float *__restrict__ dxhat,
					 const act_t *__restrict__ xhat,
					 const float *__restrict__ rstd,
					 const float *__restrict__ c, size_t nv, int h)
{
	GRID_STRIDE(e, nv)
	{
		float dv[VEC], xv[VEC], o[VEC];
		size_t row = (e * VEC) / h;
		float r = rstd[row], cr = c[row];

		ld_f32<VEC>(dv, dxhat + e * VEC);
		ld_act<VEC>(xv, xhat + e * VEC);
		ld_act<VEC>(o, dx + e * VEC);
#pragma unroll
		for (int k = 0; k < VEC; k++)
			o[k] += r * (dv[k] - xv[k] * cr);
		st_act<VEC>(dx + e * VEC, o);
	}
}

/* --- host side --- */

static int aligned16(const void *p)
{
	return ((uintptr_t)p & 15u) == 0;
}

/* Threads for a block that walks a row of h elements VEC at a time: one vector per thread
 * up to NORM_MAX_THREADS, whole warps, at least one. */
static unsigned row_threads(int h, int vec)
{
	unsigned n = (unsigned)((h / vec + 31) / 32 * 32);

	if (n < 32)
		n = 32;
	return n > NORM_MAX_THREADS ? NORM_MAX_THREADS : n;
}

static int sm_count(void)
{
	static int n;

	if (!n) {
		int dev;

		LBC_CHECK(cudaGetDevice(&dev));
		LBC_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
	}
	return n;
}

/*
 * Blocks of kern (threads each, smem bytes of dynamic shared memory) that one SM holds at
 * once: asked of the runtime once per (kern, threads, smem) and remembered, so a call costs
 * no host-side query (single-threaded use, as the whole backend).
 */
static int occupancy(const void *kern, unsigned threads, size_t smem)
{
	static struct {
		const void *kern;
		unsigned threads;
		size_t smem;
		int occ;
	} memo[32];
	static int n;
	int occ = 0;

	for (int i = 0; i < n; i++)
		if (memo[i].kern == kern && memo[i].threads == threads && memo[i].smem == smem)
			return memo[i].occ;
	LBC_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, (int)threads, smem));
	if (occ < 1)
		occ = 1;
	if (n < 32) {
		memo[n].kern = kern;
		memo[n].threads = threads;
		memo[n].smem = smem;
		memo[n].occ = occ;
		n++;
	}
	return occ;
}

/* Blocks for a column-reduction kernel (kern: h floats of dynamic shared memory): as many as
 * fit on the device at once, at most one per row. */
static unsigned colsum_blocks(const void *kern, unsigned threads, size_t smem, int t)
{
	long long n;

	if (smem > 40 * 1024) /* past the default 48 KB with block_sum's static part[] */
		LBC_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
					       (int)smem));
	n = (long long)sm_count() * occupancy(kern, threads, smem);
	return (unsigned)(n < t ? n : t);
}

/*
 * The register kernels' shape for rows of nv vectors: C vectors per thread, the fewest of
 * 1, 2, 4 that keeps a block within REG_MAX_THREADS (0: too wide, the fallback kernels
 * serve it), and whole warps of threads. Each C goes with R rows per block step so that a
 * thread holds 4 vectors of each operand in flight: R = 2 for C = 1 or 2, R = 1 for C = 4.
 */
static int reg_cols(int nv)
{
	for (int c = 1; c <= 4; c *= 2)
		if ((nv + c - 1) / c <= REG_MAX_THREADS)
			return c;
	return 0;
}

static unsigned reg_threads(int nv, int c)
{
	unsigned n = (unsigned)(((nv + c - 1) / c + 31) / 32 * 32);

	return n < 32 ? 32 : n;
}

/* Fewest rows per backward block: its dw flush (h atomics) stays below 1/16 of the bytes its
 * rows move (8 h per row). */
#define BWD_MIN_ROWS 8

template <int VEC, int C, int R>
static void fused_fwd_reg(act_t *y, float *rstd, const act_t *x, const act_t *w, int t, int h)
{
	unsigned blocks = (unsigned)((t + R - 1) / R);

	rmsnorm_fwd_reg_kernel<VEC, C, R>
	    <<<blocks, reg_threads(h / VEC, C), 0, lbc_stream()>>>(y, rstd, x, w, t, h);
	LBC_LAUNCHED();
}

template <int VEC>
static void fused_fwd(act_t *y, float *rstd, const act_t *x, const act_t *w, int t, int h)
{
	switch (reg_cols(h / VEC)) {
	case 1:
		fused_fwd_reg<VEC, 1, 2>(y, rstd, x, w, t, h);
		break;
	case 2:
		fused_fwd_reg<VEC, 2, 2>(y, rstd, x, w, t, h);
		break;
	case 4:
		fused_fwd_reg<VEC, 4, 1>(y, rstd, x, w, t, h);
		break;
	default:
		rmsnorm_fwd_kernel<VEC>
		    <<<t, row_threads(h, VEC), 0, lbc_stream()>>>(y, rstd, x, w, h);
		LBC_LAUNCHED();
	}
}

void lbc_rmsnorm_fwd(void *y, void *rstd, const void *x, const void *w, int t, int h)
{
	if (t <= 0 || h <= 0)
		return;
	if (h % 8 == 0 && aligned16(y) && aligned16(x) && aligned16(w))
		fused_fwd<8>((act_t *)y, (float *)rstd, (const act_t *)x, (const act_t *)w, t, h);
	else
		fused_fwd<1>((act_t *)y, (float *)rstd, (const act_t *)x, (const act_t *)w, t, h);
}

/*
 * Whether kern runs the cluster flush: the device launches thread-block clusters (compute
 * capability 9.0 on) and kern's code was compiled for it (binary version 90 on: a build for
 * -arch=sm_80 runs its sm_80 code, without clusters, on an H100/H200 as well). Asked once per
 * kernel and remembered by the caller.
 */
static int cluster_flush(const void *kern)
{
	static int dev_ok = -1;
	cudaFuncAttributes fa;

	if (dev_ok < 0) {
		int dev, major, launch;

		LBC_CHECK(cudaGetDevice(&dev));
		LBC_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
		LBC_CHECK(cudaDeviceGetAttribute(&launch, cudaDevAttrClusterLaunch, dev));
		dev_ok = major >= 9 && launch;
	}
	if (!dev_ok)
		return 0;
	LBC_CHECK(cudaFuncGetAttributes(&fa, kern));
	return fa.binaryVersion >= 90;
}

/*
 * Blocks: as many as the device holds at once (a persistent grid), no more than leave each
 * at least BWD_MIN_ROWS rows, at least one. With the cluster flush: a multiple of
 * BWD_CLUSTER, launched in clusters of it, with h floats of dynamic shared memory each (the
 * partials summed in the cluster); otherwise a plain launch, no dynamic shared memory.
 */
template <int VEC, int C, int R>
static void fused_bwd_reg(act_t *dx, float *dw, const act_t *dy, const act_t *x, const act_t *w,
			  const float *rstd, int t, int h)
{
	static int use_cluster = -1;
	static int max_clusters; /* for the last (threads, smem) of this instantiation */
	static unsigned mc_threads;
	static size_t mc_smem;
	const void *kern = (const void *)rmsnorm_bwd_reg_kernel<VEC, C, R>;
	unsigned threads = reg_threads(h / VEC, C);
	long long cap = ((long long)t + BWD_MIN_ROWS - 1) / BWD_MIN_ROWS, n;
	int vec_atomics = VEC % 4 == 0 && aligned16(dw);
	size_t smem;
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[1];

	if (use_cluster < 0)
		use_cluster = cluster_flush(kern);
	if (!use_cluster) {
		n = (long long)sm_count() * occupancy(kern, threads, 0);
		if (n > cap)
			n = cap;
		rmsnorm_bwd_reg_kernel<VEC, C, R>
		    <<<(unsigned)(n > 0 ? n : 1), threads, 0, lbc_stream()>>>(
			dx, dw, dy, x, w, rstd, t, h, vec_atomics);
		LBC_LAUNCHED();
		return;
	}
	smem = (size_t)h * sizeof(float);
	if (smem > 48 * 1024)
		LBC_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
					       (int)smem));
	at[0].id = cudaLaunchAttributeClusterDimension;
	at[0].val.clusterDim.x = BWD_CLUSTER;
	at[0].val.clusterDim.y = 1;
	at[0].val.clusterDim.z = 1;
	cfg.blockDim = dim3(threads);
	cfg.dynamicSmemBytes = smem;
	cfg.stream = lbc_stream();
	cfg.attrs = at;
	cfg.numAttrs = 1;
	if (!max_clusters || mc_threads != threads || mc_smem != smem) {
		mc_threads = threads;
		mc_smem = smem;
		cfg.gridDim = dim3((unsigned)(BWD_CLUSTER * sm_count()));
		LBC_CHECK(cudaOccupancyMaxActiveClusters(&max_clusters,
							 rmsnorm_bwd_reg_kernel<VEC, C, R>, &cfg));
		if (max_clusters < 1)
			max_clusters = 1;
	}
	n = (long long)max_clusters * BWD_CLUSTER;
	if (n > cap)
		n = cap;
	n = n / BWD_CLUSTER * BWD_CLUSTER;
	if (n < BWD_CLUSTER)
		n = BWD_CLUSTER;
	cfg.gridDim = dim3((unsigned)n);
	LBC_CHECK(cudaLaunchKernelEx(&cfg, rmsnorm_bwd_reg_kernel<VEC, C, R>, dx, dw, dy, x, w,
				     rstd, t, h, vec_atomics));
}

template <int VEC>
static void fused_bwd(act_t *dx, float *dw, const act_t *dy, const act_t *x, const act_t *w,
		      const float *rstd, int t, int h)
{
	switch (reg_cols(h / VEC)) {
	case 1:
		fused_bwd_reg<VEC, 1, 2>(dx, dw, dy, x, w, rstd, t, h);
		break;
	case 2:
		fused_bwd_reg<VEC, 2, 2>(dx, dw, dy, x, w, rstd, t, h);
		break;
	case 4:
		fused_bwd_reg<VEC, 4, 1>(dx, dw, dy, x, w, rstd, t, h);
		break;
	default: {
		unsigned threads = row_threads(h, VEC);
		size_t smem = (size_t)h * sizeof(float);
		unsigned blocks =
		    colsum_blocks((const void *)rmsnorm_bwd_kernel<VEC>, threads, smem, t);

		rmsnorm_bwd_kernel<VEC>
		    <<<blocks, threads, smem, lbc_stream()>>>(dx, dw, dy, x, w, rstd, t, h);
		LBC_LAUNCHED();
	}
	}
}

void lbc_rmsnorm_bwd(void *dx, void *dw, const void *dy, const void *x, const void *w,
		     const void *rstd, int t, int h)
{
	if (t <= 0 || h <= 0)
		return;
	if (h % 8 == 0 && aligned16(dx) && aligned16(dy) && aligned16(x) && aligned16(w))
		fused_bwd<8>((act_t *)dx, (float *)dw, (const act_t *)dy, (const act_t *)x,
			     (const act_t *)w, (const float *)rstd, t, h);
	else
		fused_bwd<1>((act_t *)dx, (float *)dw, (const act_t *)dy, (const act_t *)x,
			     (const act_t *)w, (const float *)rstd, t, h);
}

/* The unfused passes keep a (T, H) array and a (T) array in scratch. */
size_t lbc_norm_scratch(int t, int h)
{
	return (size_t)t * h + t;
}

template <int VEC>
static void unfused_fwd(act_t *y, act_t *xhat, float *rstd, float *scratch, const act_t *x,
			const act_t *w, int t, int h)
{
	size_t n = (size_t)t * h, nv = n / VEC;
	float *sq = scratch, *ms = scratch + n;

	unfused_sq_kernel<VEC><<<lbc_blocks(nv, 256), 256, 0, lbc_stream()>>>(sq, x, nv);
	LBC_LAUNCHED();
	unfused_rowmean_kernel<VEC, false>
	    <<<t, row_threads(h, VEC), 0, lbc_stream()>>>(ms, sq, NULL, h);
	LBC_LAUNCHED();
	unfused_rsqrt_kernel<<<lbc_blocks(t, 256), 256, 0, lbc_stream()>>>(rstd, ms, (size_t)t);
	LBC_LAUNCHED();
	unfused_scale_kernel<VEC>
	    <<<lbc_blocks(nv, 256), 256, 0, lbc_stream()>>>(xhat, x, rstd, nv, h);
	LBC_LAUNCHED();
	unfused_colmul_kernel<VEC>
	    <<<lbc_blocks(nv, 256), 256, 0, lbc_stream()>>>(y, xhat, w, nv, h);
	LBC_LAUNCHED();
}

void lbc_rmsnorm_unfused_fwd(void *y, void *xhat, void *rstd, void *scratch, const void *x,
			     const void *w, int t, int h)
{
	if (t <= 0 || h <= 0)
		return;
	if (h % 8 == 0 && aligned16(y) && aligned16(xhat) && aligned16(scratch) && aligned16(x) &&
	    aligned16(w))
		unfused_fwd<8>((act_t *)y, (act_t *)xhat, (float *)rstd, (float *)scratch,
			       (const act_t *)x, (const act_t *)w, t, h);
	else
		unfused_fwd<1>((act_t *)y, (act_t *)xhat, (float *)rstd, (float *)scratch,
			       (const act_t *)x, (const act_t *)w, t, h);
}

template <int VEC>
static void unfused_bwd(act_t *dx, float *dw, const act_t *dy, const act_t *xhat, const act_t *w,
			const float *rstd, float *scratch, int t, int h)
{
	size_t n = (size_t)t * h, nv = n / VEC;
	float *dxhat = scratch, *c = scratch + n;
	unsigned threads = row_threads(h, VEC);
	size_t smem = (size_t)h * sizeof(float);

	unfused_colmul_kernel<VEC>
	    <<<lbc_blocks(nv, 256), 256, 0, lbc_stream()>>>(dxhat, dy, w, nv, h);
	LBC_LAUNCHED();
	unfused_colsum_kernel<VEC>
	    <<<colsum_blocks((const void *)unfused_colsum_kernel<VEC>, threads, smem, t), threads,
	       smem, lbc_stream()>>>(dw, dy, xhat, t, h);
	LBC_LAUNCHED();
	unfused_rowmean_kernel<VEC, true><<<t, threads, 0, lbc_stream()>>>(c, dxhat, xhat, h);
	LBC_LAUNCHED();
	unfused_dx_kernel<VEC>
	    <<<lbc_blocks(nv, 256), 256, 0, lbc_stream()>>>(dx, dxhat, xhat, rstd, c, nv, h);
	LBC_LAUNCHED();
}

void lbc_rmsnorm_unfused_bwd(void *dx, void *dw, const void *dy, const void *xhat, const void *w,
			     const void *rstd, void *scratch, int t, int h)
{
	if (t <= 0 || h <= 0)
		return;
	if (h % 8 == 0 && aligned16(dx) && aligned16(dy) && aligned16(xhat) && aligned16(w) &&
	    aligned16(scratch))
		unfused_bwd<8>((act_t *)dx, (float *)dw, (const act_t *)dy, (const act_t *)xhat,
			       (const act_t *)w, (const float *)rstd, (float *)scratch, t, h);
	else
		unfused_bwd<1>((act_t *)dx, (float *)dw, (const act_t *)dy, (const act_t *)xhat,
			       (const act_t *)w, (const float *)rstd, (float *)scratch, t, h);
}
