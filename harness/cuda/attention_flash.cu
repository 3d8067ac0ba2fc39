/*
 * Causal self-attention on the GPU, the flash variant (harness/ops.h attn_flash_fwd,
 * attn_flash_bwd; the conventions of every variant are attention.cu's): FlashAttention-2
 * (Dao 2023, "FlashAttention-2: Faster Attention with Better Parallelism and Work
 * Partitioning", Algorithms 1 and 2). The forward is tiled over keys with the online
 * softmax (Milakov & Gimelshein 2018) and never writes the scores, saving lse; the backward
 * recomputes P = exp(scale * q.k - lse) tile by tile, parallel over key blocks, with dQ
 * added into an fp32 accumulator. For D in {32, 64, 128} (with 16-byte aligned operands)
 * both run on tensor cores (mma.sync m16n8k16, bf16 in, fp32 out, tiles staged in shared
 * memory by cp.async); any other D <= 256 (the tiny test models' 8 and 16) takes a plain
 * fp32 kernel with one warp per query (or key) row. All arithmetic is fp32: bf16 is widened
 * on load and rounded once when stored (P and dS also once into bf16 as the tensor cores'
 * operands, as in FA2); the tensor-core kernels take exponentials as exp2 of scores
 * pre-multiplied by scale*log2(e) (the same function, ex2.approx). Checked on an H200
 * against the f64 CPU reference (relative error 2e-3 to 7e-3 on every output, D = 8 to 128,
 * S = 1 to 1000, GQA, B up to 3).
 */
#include "harness/cuda/attention.cuh"

#include <math.h>

#define LOG2E 1.4426950408889634f

/* ------------------------------------------------------------------------------------------
 * flash: shared pieces. The scratch of the backward holds the dQ accumulator dq_acc (T, nh*D)
 * f32 (tensor-core path) and then delta (B, nh, S) f32, delta_i = rowsum(dO_i * O_i), the
 * softmax-backward correction of FA2 Algorithm 2 line 4 (= sum_j P_ij dP_ij).
 * ------------------------------------------------------------------------------------------ */

/* One warp per (token t, head h) of dout/out (T, nh*D). */
template <int V>
static __global__ void __launch_bounds__(256)
    flash_delta_kernel(float *delta, const act_t *dout, const act_t *out, size_t rows, int s,
		       int nh, int d)
{
	size_t r = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	int lane = threadIdx.x & 31;

	if (r >= rows)
		return;
	size_t t = r / nh;
	int h = (int)(r % nh);
	size_t off = r * d; /* = t*nh*d + h*d */
	float acc = 0.0f;

	for (int e = lane * V; e < d; e += 32 * V) {
		float a[V], o[V];

		ld_act<V>(a, dout + off + e);
		ld_act<V>(o, out + off + e);
#pragma unroll
		for (int k = 0; k < V; k++)
			acc += a[k] * o[k];
	}
	acc = warp_sum(acc);
	if (lane == 0)
		delta[((t / s) * nh + h) * s + t % s] = acc;
}

static void flash_delta(float *delta, const act_t *dout, const act_t *out, int b, int s, int nh,
			int d)
{
	size_t rows = (size_t)b * s * nh;
	int v8 = d % 8 == 0 && aligned16(dout) && aligned16(out);

	warp_launch<8>(v8 ? flash_delta_kernel<8> : flash_delta_kernel<1>, rows, delta, dout, out,
		       rows, s, nh, d);
}

/* dqkv's Q part (T rows, ld apart, nh*D columns) = bf16(scale * dq_acc (T, nh*D)), in pairs
 * (nh*D is even on the tensor-core path). */
static __global__ void flash_dq_store_kernel(act_t *dqkv, const float *dq_acc, size_t npairs,
					     int hd, long long ld, float scale)
{
	for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < npairs;
	     p += (size_t)gridDim.x * blockDim.x) {
		size_t e = 2 * p, t = e / hd;
		int c = (int)(e - t * hd);
		float2 v = *reinterpret_cast<const float2 *>(dq_acc + e);

		*reinterpret_cast<__nv_bfloat162 *>(dqkv + t * ld + c) =
		    __floats2bfloat162_rn(v.x * scale, v.y * scale);
	}
}

/* ------------------------------------------------------------------------------------------
 * flash on tensor cores (D in {32, 64, 128}): PTX wrappers. Fragment layouts of
 * mma.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"), lane = 4*gq + tq:
 *   A (16x16, row): a0 (gq, 2tq..+1), a1 (gq+8, 2tq..), a2 (gq, 2tq+8..), a3 (gq+8, 2tq+8..)
 *   B (16x8, col):  b0 (k 2tq..+1, n gq), b1 (k 2tq+8..+9, n gq)
 *   C (16x8, f32):  c0, c1 (gq, 2tq..+1), c2, c3 (gq+8, 2tq..+1)
 * so the C of two adjacent n-tiles, rounded to bf16 pairs, is the A of the next product
 * (FA2's P stays in registers). ldmatrix.x4 loads four 8x8 bf16 blocks, lanes 8i..8i+7 giving
 * the row addresses of block i; each lane receives (row lane/4, cols 2*(lane%4)..+1) of
 * each block, or with .trans of each block's transpose.
 * ------------------------------------------------------------------------------------------ */

static __device__ __forceinline__ unsigned smem_u32(const void *p)
{
	return (unsigned)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, asynchronously; zeros when !ok (src then is any valid address). */
static __device__ __forceinline__ void cp_async16(void *dst, const void *src, bool ok)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)),
		     "l"(src), "r"(ok ? 16 : 0));
}

static __device__ __forceinline__ void cp_async4(void *dst, const void *src, bool ok)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)),
		     "l"(src), "r"(ok ? 4 : 0));
}

static __device__ __forceinline__ void cp_async_commit()
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

static __device__ __forceinline__ void cp_async_wait_all()
{
	asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

static __device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const act_t *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(smem_u32(p)));
}

static __device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const act_t *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(smem_u32(p)));
}

/* c += a b (16x8x16, bf16 in, f32 accumulate); b = {b0, b1}. */
static __device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
						uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
		     "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* c[0..1] += a b for a 16x16 tile of b loaded from shared memory at p (TRANS: with
 * ldmatrix's transpose): the two 16x8x16 products of one fragment of a. */
template <bool TRANS>
static __device__ __forceinline__ void mma_16x16(float (*c)[4], const uint32_t (&a)[4],
						 const act_t *p)
{
	uint32_t bf[4];

	if (TRANS)
		ldsm_x4_t(bf, p);
	else
		ldsm_x4(bf, p);
	mma_bf16(c[0], a, bf[0], bf[1]);
	mma_bf16(c[1], a, bf[2], bf[3]);
}

static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
	__nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);

	return *reinterpret_cast<uint32_t *>(&v);
}

static __device__ __forceinline__ float ex2(float x)
{
	float y;

	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
}

/*
 * Lane offsets (in elements, row stride ld) of the ldmatrix.x4 address patterns used below,
 * for a 16x16 block at (r0, c0) of a row-major shared tile:
 *   A operand, block stored as A (m rows, k cols):  row r0 + lane%16, col c0 + 8*(lane/16)
 *   B operand, stored as B^T (n rows, k cols), giving n-tiles c0.. and c0+8.. of rows:
 *     row r0 + lane%8 + 8*(lane/16), col c0 + 8*((lane/8)%2)      -> {b0, b1} x 2 n-tiles
 *   B operand, stored as B (k rows, n cols), .trans:
 *     row r0 + lane%8 + 8*((lane/8)%2), col c0 + 8*(lane/16)      -> {b0, b1} x 2 n-tiles
 *   A operand, stored as A^T (k rows, m cols), .trans:
 *     row r0 + lane%8 + 8*(lane/16), col c0 + 8*((lane/8)%2)
 */
static __device__ __forceinline__ int lm_a(int lane, int ld)
{
	return (lane & 15) * ld + ((lane >> 4) << 3);
}

static __device__ __forceinline__ int lm_bt(int lane, int ld)
{
	return ((lane & 7) + ((lane >> 4) << 3)) * ld + (((lane >> 3) & 1) << 3);
}

static __device__ __forceinline__ int lm_b(int lane, int ld)
{
	return ((lane & 7) + (((lane >> 3) & 1) << 3)) * ld + ((lane >> 4) << 3);
}

/* A^T storage with .trans has the same lane pattern as lm_bt. */
#define lm_at lm_bt

#define FA_THREADS 256 /* 8 warps per block, both kernels */

/* ROWS rows of D bf16 (global rows r0.., ld apart, from g) into a shared tile of row stride
 * D + 8; rows at or past s are zero-filled. 16-byte chunks, FA_THREADS threads. */
template <int D, int ROWS>
static __device__ __forceinline__ void load_rows(act_t *sm, const act_t *g, long long ld, int r0,
						 int s, int tid)
{
	constexpr int CPR = D / 8, LDS = D + 8;

#pragma unroll
	for (int c = tid; c < ROWS * CPR; c += FA_THREADS) {
		int r = c / CPR, k = c - r * CPR;
		bool ok = r0 + r < s;

		cp_async16(sm + r * LDS + k * 8, ok ? g + (size_t)(r0 + r) * ld + k * 8 : g, ok);
	}
}

/*
 * Forward (FA2 Algorithm 1). Block: FWD_BR = 128 queries of one (sequence, head), 8 warps of
 * 16 query rows each; key/value tiles of FWD_BC = 64 rows, double-buffered in shared memory
 * (tile j+1 is fetched by cp.async while tile j is computed). Why these sizes: 128 query rows
 * per block halve the K/V traffic from L2 against 64 (at S = 8192 that traffic would otherwise
 * approach the L2 bandwidth); 16 rows per warp keep the warp's Q fragments (D/16 x 4
 * registers), its O accumulator (D/2 f32) and its 16x64 score tile (32 f32) in registers
 * (194 at D = 128, no spills); rows are padded by 8 bf16 (16 bytes) so the 8 row
 * addresses of each ldmatrix fall in distinct banks. Shared memory: (128 + 4*64) * (D + 8) * 2
 * bytes (104 KB at D = 128). Causal: a block visits key tiles 0 .. (q0 + 127)/64 only, a warp
 * skips the tiles (and, in P V, the 16-key steps) that lie wholly above its rows, and the mask
 * is applied only in tiles that cross the diagonal or the end of the sequence. Blocks are
 * numbered heaviest first (last query block first) for the tail of the wave. The online
 * softmax runs in the exp2 domain on raw scores: m is the running max of q.k,
 * p = 2^(q.k*scale*log2e - m*scale*log2e), and a row whose running max is still -inf uses 0
 * as reference (no inf - inf).
 * Bound: each mma's B fragment (K, V) is one 256-byte ldmatrix per 16-row warp, so shared
 * memory bandwidth roughly matches the mma rate; warps of 32 rows (FA2's layout, about 255
 * registers) would halve that and are the next step if this kernel is the bottleneck.
 */
#define FWD_BR 128
#define FWD_BC 64

template <int D> static constexpr size_t fwd_smem()
{
	return (size_t)(FWD_BR + 4 * FWD_BC) * (D + 8) * sizeof(act_t);
}

template <int D>
static __global__ void __launch_bounds__(FA_THREADS, 1)
    flash_fwd_tc_kernel(act_t *__restrict__ out, float *__restrict__ lse,
			const act_t *__restrict__ qkv, int b, int s, int nh, int nkv, float scale)
{
	constexpr int LDS = D + 8, KS = D / 16, NT = FWD_BC / 8, DT = D / 8;
	extern __shared__ __align__(16) unsigned char smem[];
	act_t *qs = reinterpret_cast<act_t *>(smem);
	act_t *ks = qs + FWD_BR * LDS; /* [2][FWD_BC][LDS] */
	act_t *vs = ks + 2 * FWD_BC * LDS;
	int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;
	int nqb = (s + FWD_BR - 1) / FWD_BR, per = nh * b;
	int qb = nqb - 1 - (int)(blockIdx.x / per), rem = (int)(blockIdx.x % per);
	int h = rem % nh, bb = rem / nh, kvh = h / (nh / nkv);
	long long ld = (long long)(nh + 2 * nkv) * D;
	const act_t *rows = qkv + (size_t)bb * s * ld;
	const act_t *kg = rows + (size_t)(nh + kvh) * D, *vg = rows + (size_t)(nh + nkv + kvh) * D;
	int q0 = qb * FWD_BR, rw = q0 + 16 * warp; /* first query row of the block, of the warp */
	int kend = s < q0 + FWD_BR ? s : q0 + FWD_BR;
	int ntiles = (kend + FWD_BC - 1) / FWD_BC;
	float sl2 = scale * LOG2E;

	load_rows<D, FWD_BR>(qs, rows + (size_t)h * D, ld, q0, s, tid);
	load_rows<D, FWD_BC>(ks, kg, ld, 0, s, tid);
	load_rows<D, FWD_BC>(vs, vg, ld, 0, s, tid);
	cp_async_commit();

	uint32_t qf[KS][4];
	float o[DT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

#pragma unroll
	for (int n = 0; n < DT; n++)
		o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
	for (int kt = 0; kt < ntiles; kt++) {
		int st = kt & 1, k0 = kt * FWD_BC;
		const act_t *kst = ks + st * FWD_BC * LDS, *vst = vs + st * FWD_BC * LDS;

		cp_async_wait_all();
		__syncthreads(); /* tile kt landed; every warp is done with tile kt-1's buffer */
		if (kt == 0) {
#pragma unroll
			for (int kk = 0; kk < KS; kk++)
				ldsm_x4(qf[kk], qs + 16 * warp * LDS + 16 * kk + lm_a(lane, LDS));
		}
		if (kt + 1 < ntiles) {
			load_rows<D, FWD_BC>(ks + (st ^ 1) * FWD_BC * LDS, kg, ld, k0 + FWD_BC, s,
					     tid);
			load_rows<D, FWD_BC>(vs + (st ^ 1) * FWD_BC * LDS, vg, ld, k0 + FWD_BC, s,
					     tid);
		}
		cp_async_commit();
		if (k0 > rw + 15)
			continue; /* every key of the tile is above this warp's rows */

		/* S = Q K^T (16 x 64 per warp): k-steps outer, so each step issues 8 independent
		 * mma (one per 8-key n-tile) rather than a chain of dependent ones */
		float sc[NT][4];

#pragma unroll
		for (int n = 0; n < NT; n++)
			sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
		for (int kk = 0; kk < KS; kk++)
#pragma unroll
			for (int np = 0; np < NT / 2; np++)
				mma_16x16<false>(sc + 2 * np, qf[kk],
						 kst + 16 * np * LDS + 16 * kk + lm_bt(lane, LDS));
		if (k0 + FWD_BC - 1 > rw || k0 + FWD_BC > s) {
#pragma unroll
			for (int n = 0; n < NT; n++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					int key = k0 + 8 * n + 2 * tq + (e & 1);
					int row = rw + gq + 8 * (e >> 1);

					if (key > row || key >= s)
						sc[n][e] = -INFINITY;
				}
		}

		/* online softmax on rows gq (r = 0), gq + 8 (r = 1); a quad shares a row */
		float mx[2] = {m[0], m[1]}, ref[2], corr[2], rs[2] = {0.0f, 0.0f};

#pragma unroll
		for (int n = 0; n < NT; n++) {
			mx[0] = fmaxf(mx[0], fmaxf(sc[n][0], sc[n][1]));
			mx[1] = fmaxf(mx[1], fmaxf(sc[n][2], sc[n][3]));
		}
#pragma unroll
		for (int r = 0; r < 2; r++) {
			mx[r] = fmaxf(mx[r], __shfl_xor_sync(FULL_MASK, mx[r], 1));
			mx[r] = fmaxf(mx[r], __shfl_xor_sync(FULL_MASK, mx[r], 2));
			ref[r] = mx[r] == -INFINITY ? 0.0f : mx[r] * sl2;
			corr[r] = ex2(m[r] * sl2 - ref[r]); /* m = -inf: 0 */
			m[r] = mx[r];
		}
#pragma unroll
		for (int n = 0; n < NT; n++) {
#pragma unroll
			for (int e = 0; e < 4; e++)
				sc[n][e] = ex2(fmaf(sc[n][e], sl2, -ref[e >> 1]));
			rs[0] += sc[n][0] + sc[n][1];
			rs[1] += sc[n][2] + sc[n][3];
		}
		/* l: per-lane partial sums (corr is quad-uniform), quad-summed at the end */
#pragma unroll
		for (int r = 0; r < 2; r++)
			l[r] = l[r] * corr[r] + rs[r];
#pragma unroll
		for (int n = 0; n < DT; n++) {
			o[n][0] *= corr[0];
			o[n][1] *= corr[0];
			o[n][2] *= corr[1];
			o[n][3] *= corr[1];
		}

		/* O += P V: P (16 x 64) from registers as A, V tile by ldmatrix.trans as B */
#pragma unroll
		for (int kk = 0; kk < FWD_BC / 16; kk++) {
			if (k0 + 16 * kk > rw + 15)
				break; /* those P are 0 */
			uint32_t pa[4] = {pack_bf16(sc[2 * kk][0], sc[2 * kk][1]),
					  pack_bf16(sc[2 * kk][2], sc[2 * kk][3]),
					  pack_bf16(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),
					  pack_bf16(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};

#pragma unroll
			for (int dp = 0; dp < D / 16; dp++)
				mma_16x16<true>(o + 2 * dp, pa,
						vst + 16 * kk * LDS + 16 * dp + lm_b(lane, LDS));
		}
	}

#pragma unroll
	for (int r = 0; r < 2; r++) {
		l[r] += __shfl_xor_sync(FULL_MASK, l[r], 1);
		l[r] += __shfl_xor_sync(FULL_MASK, l[r], 2);
	}
#pragma unroll
	for (int r = 0; r < 2; r++) {
		int row = rw + gq + 8 * r;
		float inv = 1.0f / l[r];

		if (row >= s)
			continue;
		act_t *op = out + ((size_t)bb * s + row) * nh * D + (size_t)h * D + 2 * tq;

#pragma unroll
		for (int n = 0; n < DT; n++)
			*reinterpret_cast<__nv_bfloat162 *>(op + 8 * n) =
			    __floats2bfloat162_rn(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
		if (tq == 0)
			lse[((size_t)bb * nh + h) * s + row] = m[r] * scale + logf(l[r]);
	}
}

/*
 * Backward (FA2 Algorithm 2). Block: BWD_BC = 64 keys of one (sequence, kv head), 8 warps;
 * K and V of those keys stay in shared memory while the block walks the query heads of the
 * group (so dK, dV sum over them in registers, deterministic) and, for each, the query tiles
 * of BWD_BR = 64 rows from the diagonal on (causal: earlier queries see none of these keys);
 * Q, dO, lse and delta of tile i+1 are fetched by cp.async while tile i is computed. One
 * query tile is three phases (barrier between 1 and 2):
 *   1. warp (kw = 16*(w%4) keys, qw = 32*(w/4) queries): S^T = K Q^T and dP^T = V dO^T,
 *      P^T = exp2(S^T*scale*log2e - lse*log2e) (0 where key > query or query >= S),
 *      dS^T = P^T (dP^T - delta); both rounded to bf16 into shared memory (keys x queries).
 *   2. warp (keys kw, head-dim half dw = (D/2)*(w/4)): dV += P^T dO, dK += dS^T Q, fp32
 *      accumulators in registers (2 x 16 x D/2 per warp: 64 registers at D = 128).
 *   3. warp (queries 16*(w%4), half dw): dQ_tile = dS K, added into dq_acc (f32, float2
 *      atomics: other key blocks add to the same rows).
 * At D = 128 phases 1 and 2 are 64 mma per warp, phase 3 is 32, the same for every warp. The
 * softmax scale is applied once at the end (dK here, dQ in flash_dq_store_kernel). Why these
 * sizes: 64 x 64 tiles keep the accumulators, the 16 x 32 S and dP subtiles and the fragments
 * in 219 registers at D = 128 (no spills); 64 keys per block give S/64 * nkv * B blocks (1280 at
 * S = 2048, 40 heads), heaviest (first key blocks: most query tiles) numbered first.
 * Shared memory: (6*64*(D + 8) + 2*64*72) * 2 + 1024 bytes (121 KB at D = 128).
 */
#define BWD_BR	64
#define BWD_BC	64
#define BWD_LDP (BWD_BR + 8) /* row stride of the P^T and dS^T tiles */

template <int D> static constexpr size_t bwd_smem()
{
	return (size_t)(2 * BWD_BC + 4 * BWD_BR) * (D + 8) * sizeof(act_t) +
	       (size_t)2 * BWD_BC * BWD_LDP * sizeof(act_t) + 4 * BWD_BR * sizeof(float);
}

template <int D>
static __global__ void __launch_bounds__(FA_THREADS, 1)
    flash_bwd_tc_kernel(act_t *__restrict__ dqkv, float *__restrict__ dq_acc,
			const act_t *__restrict__ dout, const float *__restrict__ lse,
			const float *__restrict__ delta, const act_t *__restrict__ qkv, int b,
			int s, int nh, int nkv, float scale)
{
	static_assert(BWD_BR == BWD_BC, "query tiles start at the key block's diagonal");
	constexpr int LDS = D + 8, KS = D / 16, DH = D / 2, HT = DH / 8;
	extern __shared__ __align__(16) unsigned char smem[];
	act_t *ks = reinterpret_cast<act_t *>(smem);
	act_t *vs = ks + BWD_BC * LDS;
	act_t *qs = vs + BWD_BC * LDS;	    /* [2][BWD_BR][LDS] */
	act_t *dos = qs + 2 * BWD_BR * LDS; /* [2][BWD_BR][LDS] */
	act_t *ps = dos + 2 * BWD_BR * LDS; /* P^T [BWD_BC][BWD_LDP] */
	act_t *dss = ps + BWD_BC * BWD_LDP; /* dS^T [BWD_BC][BWD_LDP] */
	float *lse_s = reinterpret_cast<float *>(dss + BWD_BC * BWD_LDP); /* [2][BWD_BR] */
	float *dl_s = lse_s + 2 * BWD_BR;				  /* [2][BWD_BR] */
	int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;
	int per = nkv * b, kb = (int)(blockIdx.x / per), rem = (int)(blockIdx.x % per);
	int kvh = rem % nkv, bb = rem / nkv, g = nh / nkv;
	int k0 = kb * BWD_BC, nqb = (s + BWD_BR - 1) / BWD_BR, nper = nqb - kb, total = g * nper;
	long long ld = (long long)(nh + 2 * nkv) * D, ldo = (long long)nh * D;
	const act_t *rows = qkv + (size_t)bb * s * ld, *orows = dout + (size_t)bb * s * ldo;
	float sl2 = scale * LOG2E;

	/* tile `it` (head kvh*g + it/nper, queries from (kb + it%nper)*BWD_BR) into stage st */
	auto fetch = [&](int it, int st) {
		int h = kvh * g + it / nper, q0 = (kb + it % nper) * BWD_BR;

		load_rows<D, BWD_BR>(qs + st * BWD_BR * LDS, rows + (size_t)h * D, ld, q0, s, tid);
		load_rows<D, BWD_BR>(dos + st * BWD_BR * LDS, orows + (size_t)h * D, ldo, q0, s,
				     tid);
		if (tid < 2 * BWD_BR) {
			int r = tid % BWD_BR;
			bool ok = q0 + r < s;
			const float *src = tid < BWD_BR ? lse : delta;
			float *dst = tid < BWD_BR ? lse_s : dl_s;

			cp_async4(dst + st * BWD_BR + r,
				  ok ? src + ((size_t)bb * nh + h) * s + q0 + r : src, ok);
		}
	};

	load_rows<D, BWD_BC>(ks, rows + (size_t)(nh + kvh) * D, ld, k0, s, tid);
	load_rows<D, BWD_BC>(vs, rows + (size_t)(nh + nkv + kvh) * D, ld, k0, s, tid);
	fetch(0, 0);
	cp_async_commit();

	float dk[HT][4], dv[HT][4];

#pragma unroll
	for (int n = 0; n < HT; n++)
#pragma unroll
		for (int e = 0; e < 4; e++)
			dk[n][e] = dv[n][e] = 0.0f;
	for (int it = 0; it < total; it++) {
		int st = it & 1, h = kvh * g + it / nper, q0 = (kb + it % nper) * BWD_BR;
		const act_t *qst = qs + st * BWD_BR * LDS, *dost = dos + st * BWD_BR * LDS;
		const float *lst = lse_s + st * BWD_BR, *dlt = dl_s + st * BWD_BR;

		cp_async_wait_all();
		__syncthreads(); /* tile it landed; phases 2-3 of tile it-1 are done everywhere */
		if (it + 1 < total)
			fetch(it + 1, st ^ 1);
		cp_async_commit();

		/* phase 1: S^T, dP^T (16 keys x 32 queries per warp) -> P^T, dS^T in shared */
		{
			int kw = 16 * (warp & 3), qw = 32 * (warp >> 2);
			float sa[4][4], pa[4][4];

#pragma unroll
			for (int n = 0; n < 4; n++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					sa[n][e] = pa[n][e] = 0.0f;
#pragma unroll
			for (int kk = 0; kk < KS; kk++) {
				uint32_t ka[4], va[4];

				ldsm_x4(ka, ks + kw * LDS + 16 * kk + lm_a(lane, LDS));
				ldsm_x4(va, vs + kw * LDS + 16 * kk + lm_a(lane, LDS));
#pragma unroll
				for (int np = 0; np < 2; np++) {
					int off = (qw + 16 * np) * LDS + 16 * kk + lm_bt(lane, LDS);

					mma_16x16<false>(sa + 2 * np, ka, qst + off);
					mma_16x16<false>(pa + 2 * np, va, dost + off);
				}
			}
#pragma unroll
			for (int n = 0; n < 4; n++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					int kl = kw + gq + 8 * (e >> 1),
					    ql = qw + 8 * n + 2 * tq + (e & 1);
					int key = k0 + kl, q = q0 + ql;
					float p = 0.0f, ds = 0.0f;

					if (q < s && key <= q) {
						p = ex2(fmaf(sa[n][e], sl2, -lst[ql] * LOG2E));
						ds = p * (pa[n][e] - dlt[ql]);
					}
					sa[n][e] = p;
					pa[n][e] = ds;
				}
#pragma unroll
			for (int n = 0; n < 4; n++)
#pragma unroll
				for (int r = 0; r < 2; r++) {
					int off = (kw + gq + 8 * r) * BWD_LDP + qw + 8 * n + 2 * tq;

					*reinterpret_cast<__nv_bfloat162 *>(ps + off) =
					    __floats2bfloat162_rn(sa[n][2 * r], sa[n][2 * r + 1]);
					*reinterpret_cast<__nv_bfloat162 *>(dss + off) =
					    __floats2bfloat162_rn(pa[n][2 * r], pa[n][2 * r + 1]);
				}
		}
		__syncthreads(); /* P^T and dS^T complete */

		/* phase 2: dV += P^T dO, dK += dS^T Q (16 keys x D/2 per warp) */
		{
			int kw = 16 * (warp & 3), dw = DH * (warp >> 2);

#pragma unroll
			for (int kk = 0; kk < BWD_BR / 16; kk++) {
				uint32_t pf[4], sf[4];

				ldsm_x4(pf, ps + kw * BWD_LDP + 16 * kk + lm_a(lane, BWD_LDP));
				ldsm_x4(sf, dss + kw * BWD_LDP + 16 * kk + lm_a(lane, BWD_LDP));
#pragma unroll
				for (int dp = 0; dp < DH / 16; dp++) {
					int off = 16 * kk * LDS + dw + 16 * dp + lm_b(lane, LDS);

					mma_16x16<true>(dv + 2 * dp, pf, dost + off);
					mma_16x16<true>(dk + 2 * dp, sf, qst + off);
				}
			}
		}

		/* phase 3: dQ (16 queries x D/2 per warp) = dS K, A = dS from the dS^T tile */
		{
			int qw = 16 * (warp & 3), dw = DH * (warp >> 2);
			float dq[HT][4];

#pragma unroll
			for (int n = 0; n < HT; n++)
				dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
#pragma unroll
			for (int kk = 0; kk < BWD_BC / 16; kk++) {
				uint32_t af[4];

				ldsm_x4_t(af, dss + 16 * kk * BWD_LDP + qw + lm_at(lane, BWD_LDP));
#pragma unroll
				for (int dp = 0; dp < DH / 16; dp++)
					mma_16x16<true>(dq + 2 * dp, af,
							ks + 16 * kk * LDS + dw + 16 * dp +
							    lm_b(lane, LDS));
			}
#pragma unroll
			for (int r = 0; r < 2; r++) {
				int q = q0 + qw + gq + 8 * r;

				if (q >= s)
					continue;
				float *dst = dq_acc + ((size_t)bb * s + q) * nh * D +
					     (size_t)h * D + dw + 2 * tq;

#pragma unroll
				for (int n = 0; n < HT; n++)
					lbc_atomic_add2(dst + 8 * n, dq[n][2 * r],
							dq[n][2 * r + 1]);
			}
		}
	}

	/* dK (scaled), dV of this warp's keys and head-dim half into dqkv */
	int kw = 16 * (warp & 3), dw = DH * (warp >> 2);

#pragma unroll
	for (int r = 0; r < 2; r++) {
		int key = k0 + kw + gq + 8 * r;

		if (key >= s)
			continue;
		act_t *kp =
		    dqkv + ((size_t)bb * s + key) * ld + (size_t)(nh + kvh) * D + dw + 2 * tq;
		act_t *vp = kp + (size_t)nkv * D;

#pragma unroll
		for (int n = 0; n < HT; n++) {
			*reinterpret_cast<__nv_bfloat162 *>(kp + 8 * n) =
			    __floats2bfloat162_rn(dk[n][2 * r] * scale, dk[n][2 * r + 1] * scale);
			*reinterpret_cast<__nv_bfloat162 *>(vp + 8 * n) =
			    __floats2bfloat162_rn(dv[n][2 * r], dv[n][2 * r + 1]);
		}
	}
}

/* ------------------------------------------------------------------------------------------
 * flash, generic fp32 path (any D <= GEN_DMAX; the tiny models' D = 8, 16): one warp per
 * query row (forward, dQ) or key row (dK, dV). The warp's fixed row lives in shared memory
 * (fp32); per step 32 keys (or queries), one per lane, give 32 scores by per-lane dot products,
 * then the lanes, one head-dim element each (GEN_DMAX/32 registers), accumulate the 32 rows
 * weighted by the scores shuffled across. The same online softmax as the CPU reference (tiles
 * of 32 keys), in natural exp.
 * ------------------------------------------------------------------------------------------ */

#define GEN_DMAX  256
#define GEN_WARPS 4
#define GEN_ACC	  (GEN_DMAX / 32)

static __device__ __forceinline__ float dot_row(const float *x, const act_t *y, int d)
{
	float acc = 0.0f;

	for (int e = 0; e < d; e++)
		acc += x[e] * __bfloat162float(y[e]);
	return acc;
}

/* The query row of the calling warp in the generic forward and dQ kernels (one warp a row
 * (bb, h, i) of B * nh * S, GEN_WARPS warps to a block; row = (bb*nh + h)*s + i) and where
 * its operands are: ld, the stride of the qkv rows; rows, sequence bb's qkv rows; kb and vb,
 * the K and V columns of h's key-value head in them. */
struct gen_q {
	int warp, lane;
	size_t row;
	int i, h, bb;
	long long ld;
	const act_t *rows, *kb, *vb;
};

/* Fills w for the calling warp; false when the warp is past the last row (nothing to do). */
static __device__ __forceinline__ bool gen_q_row(gen_q &w, const act_t *qkv, int b, int s, int nh,
						 int nkv, int d)
{
	w.warp = threadIdx.x >> 5, w.lane = threadIdx.x & 31;
	w.row = (size_t)blockIdx.x * GEN_WARPS + w.warp;
	if (w.row >= (size_t)b * nh * s)
		return false;
	w.i = (int)(w.row % s), w.h = (int)(w.row / s % nh), w.bb = (int)(w.row / s / nh);
	w.ld = (long long)(nh + 2 * nkv) * d;
	w.rows = qkv + (size_t)w.bb * s * w.ld;
	w.kb = w.rows + (size_t)(nh + w.h / (nh / nkv)) * d, w.vb = w.kb + (size_t)nkv * d;
	return true;
}

/* The lanes' accumulators (head-dim element lane + 32 c each) += w_jj * row_jj over the nj
 * rows base + (j0 + jj) * ld, w_jj the weight lane jj holds. */
static __device__ __forceinline__ void gen_acc_rows(float (&acc)[GEN_ACC], float w,
						    const act_t *base, int j0, int nj, long long ld,
						    int lane, int d)
{
	for (int jj = 0; jj < nj; jj++) {
		float wj = __shfl_sync(FULL_MASK, w, jj);
		const act_t *r = base + (size_t)(j0 + jj) * ld;

#pragma unroll
		for (int c = 0; c < GEN_ACC; c++)
			if (lane + 32 * c < d)
				acc[c] += wj * __bfloat162float(r[lane + 32 * c]);
	}
}

/* acc = 0 (a warp's row accumulator, lane + 32c). */
static __device__ __forceinline__ void gen_acc_zero(float (&acc)[GEN_ACC])
{
#pragma unroll
	for (int c = 0; c < GEN_ACC; c++)
		acc[c] = 0.0f;
}

/* o[0..d) = acc * mul in bf16, each lane its columns lane + 32c. */
static __device__ __forceinline__ void gen_store_row(act_t *o, const float (&acc)[GEN_ACC],
						     float mul, int lane, int d)
{
#pragma unroll
	for (int c = 0; c < GEN_ACC; c++)
		if (lane + 32 * c < d)
			o[lane + 32 * c] = __float2bfloat16_rn(acc[c] * mul);
}

static __global__ void __launch_bounds__(GEN_WARPS * 32)
    flash_fwd_gen_kernel(act_t *__restrict__ out, float *__restrict__ lse,
			 const act_t *__restrict__ qkv, int b, int s, int nh, int nkv, int d,
			 float scale)
{
	__shared__ float qsh[GEN_WARPS][GEN_DMAX];
	gen_q w;

	if (!gen_q_row(w, qkv, b, s, nh, nkv, d))
		return;
	auto &[warp, lane, row, i, h, bb, ld, rows, kb, vb] = w;
	float *q = qsh[warp], acc[GEN_ACC], m = -INFINITY, l = 0.0f;

	for (int e = lane; e < d; e += 32)
		q[e] = __bfloat162float(rows[(size_t)i * ld + (size_t)h * d + e]);
	__syncwarp();
	gen_acc_zero(acc);
	for (int j0 = 0; j0 <= i; j0 += 32) {
		int j = j0 + lane, nj = i - j0 + 1 < 32 ? i - j0 + 1 : 32;
		float sj = j <= i ? dot_row(q, kb + (size_t)j * ld, d) * scale : -INFINITY;
		float mn = fmaxf(m, warp_max(sj)); /* finite: key j0 <= i is in the tile */
		float corr = expf(m - mn), p = j <= i ? expf(sj - mn) : 0.0f;

		l = l * corr + warp_sum(p);
#pragma unroll
		for (int c = 0; c < GEN_ACC; c++)
			acc[c] *= corr;
		gen_acc_rows(acc, p, vb, j0, nj, ld, lane, d);
		m = mn;
	}
	act_t *o = out + ((size_t)bb * s + i) * nh * d + (size_t)h * d;
	float inv = 1.0f / l;

	gen_store_row(o, acc, inv, lane, d);
	if (lane == 0)
		lse[((size_t)bb * nh + h) * s + i] = m + logf(l);
}

/* The general backward's operands: the gradient dqkv (b, s, (nh + 2 nkv) d) written, dO
 * (b, s, nh d), the forward's lse and delta = rowsum(dO * O) (b, nh, s), qkv as dqkv. */
struct gen_bwd {
	act_t *dqkv;
	const act_t *dout;
	const float *lse, *delta;
	const act_t *qkv;
	int b, s, nh, nkv, d;
	float scale;
};

/* dQ_i = scale * sum_{j<=i} P_ij (dO_i.v_j - delta_i) k_j, one warp per query row. */
static __global__ void __launch_bounds__(GEN_WARPS * 32) flash_bwd_dq_gen_kernel(const gen_bwd a)
{
	auto [dqkv, dout, lse, delta, qkv, b, s, nh, nkv, d, scale] = a;
	__shared__ float sh[GEN_WARPS][2][GEN_DMAX];
	gen_q w;

	if (!gen_q_row(w, qkv, b, s, nh, nkv, d))
		return;
	auto &[warp, lane, row, i, h, bb, ld, rows, kb, vb] = w;
	const act_t *dor = dout + ((size_t)bb * s + i) * nh * d + (size_t)h * d;
	float *q = sh[warp][0], *dov = sh[warp][1], acc[GEN_ACC];
	float li = lse[row], di = delta[row]; /* row = (bb*nh + h)*s + i */

	for (int e = lane; e < d; e += 32) {
		q[e] = __bfloat162float(rows[(size_t)i * ld + (size_t)h * d + e]);
		dov[e] = __bfloat162float(dor[e]);
	}
	__syncwarp();
	gen_acc_zero(acc);
	for (int j0 = 0; j0 <= i; j0 += 32) {
		int j = j0 + lane, nj = i - j0 + 1 < 32 ? i - j0 + 1 : 32;
		float ds = 0.0f;

		if (j <= i) {
			float p = expf(dot_row(q, kb + (size_t)j * ld, d) * scale - li);

			ds = p * (dot_row(dov, vb + (size_t)j * ld, d) - di) * scale;
		}
		gen_acc_rows(acc, ds, kb, j0, nj, ld, lane, d);
	}
	gen_store_row(dqkv + ((size_t)bb * s + i) * ld + (size_t)h * d, acc, 1.0f, lane, d);
}

/* dK_j = scale * sum_h sum_{i>=j} dS_ij q_i, dV_j = sum_h sum_{i>=j} P_ij dO_i over the query
 * heads h of kv head kvh; one warp per key row (b, kvh, j). */
static __global__ void __launch_bounds__(GEN_WARPS * 32) flash_bwd_dkv_gen_kernel(const gen_bwd a)
{
	auto [dqkv, dout, lse, delta, qkv, b, s, nh, nkv, d, scale] = a;
	__shared__ float sh[GEN_WARPS][2][GEN_DMAX];
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = nh / nkv;
	size_t row = (size_t)blockIdx.x * GEN_WARPS + warp;

	if (row >= (size_t)b * nkv * s)
		return;
	int j = (int)(row % s), kvh = (int)(row / s % nkv), bb = (int)(row / s / nkv);
	long long ld = (long long)(nh + 2 * nkv) * d, ldo = (long long)nh * d;
	const act_t *rows = qkv + (size_t)bb * s * ld, *orows = dout + (size_t)bb * s * ldo;
	const act_t *kr = rows + (size_t)j * ld + (size_t)(nh + kvh) * d;
	float *k = sh[warp][0], *v = sh[warp][1], acck[GEN_ACC], accv[GEN_ACC];

	for (int e = lane; e < d; e += 32) {
		k[e] = __bfloat162float(kr[e]);
		v[e] = __bfloat162float(kr[(size_t)nkv * d + e]);
	}
	__syncwarp();
	gen_acc_zero(acck);
	gen_acc_zero(accv);
	for (int hh = 0; hh < g; hh++) {
		int h = kvh * g + hh;
		const act_t *qb = rows + (size_t)h * d, *ob = orows + (size_t)h * d;
		const float *lh = lse + ((size_t)bb * nh + h) * s,
			    *dh = delta + ((size_t)bb * nh + h) * s;

		for (int i0 = j; i0 < s; i0 += 32) {
			int i = i0 + lane, ni = s - i0 < 32 ? s - i0 : 32;
			float p = 0.0f, ds = 0.0f;

			if (i < s) {
				float sc = 0.0f, dp = 0.0f;
				const act_t *qi = qb + (size_t)i * ld, *oi = ob + (size_t)i * ldo;

				for (int e = 0; e < d; e++) {
					sc += __bfloat162float(qi[e]) * k[e];
					dp += __bfloat162float(oi[e]) * v[e];
				}
				p = expf(sc * scale - lh[i]);
				ds = p * (dp - dh[i]) * scale;
			}
			for (int ii = 0; ii < ni; ii++) {
				float pi = __shfl_sync(FULL_MASK, p, ii);
				float dsi = __shfl_sync(FULL_MASK, ds, ii);
				const act_t *qi = qb + (size_t)(i0 + ii) * ld;
				const act_t *oi = ob + (size_t)(i0 + ii) * ldo;

#pragma unroll
				for (int c = 0; c < GEN_ACC; c++)
					if (lane + 32 * c < d) {
						accv[c] += pi * __bfloat162float(oi[lane + 32 * c]);
						acck[c] +=
						    dsi * __bfloat162float(qi[lane + 32 * c]);
					}
			}
		}
	}
	act_t *dk = dqkv + ((size_t)bb * s + j) * ld + (size_t)(nh + kvh) * d;

	gen_store_row(dk, acck, 1.0f, lane, d);
	gen_store_row(dk + (size_t)nkv * d, accv, 1.0f, lane, d);
}

/* ------------------------------------------------------------------------------------------
 * flash: host side.
 * ------------------------------------------------------------------------------------------ */

/* The tensor-core kernels' conditions: their D, and 16-byte aligned operands (cp.async). */
static int flash_tc(int d, const void *a, const void *b, const void *c, const void *e)
{
	return (d == 32 || d == 64 || d == 128) && aligned16(a) && aligned16(b) && aligned16(c) &&
	       aligned16(e);
}

static void flash_check(int d)
{
	if (d > GEN_DMAX)
		LB_FATAL("error", "flash attention: head dim %d over the supported %d", d,
			 GEN_DMAX);
}

/*
 * Launch of a tensor-core kernel (kern: one instantiation, its static opted set once it has
 * been given the smem bytes of dynamic shared memory it needs, past the 48 KB default) on
 * blocks blocks of FA_THREADS.
 */
template <typename K, typename... A>
static void tc_launch(K kern, bool &opted, size_t smem, size_t blocks, A... args)
{
	if (!opted) {
		LBC_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
					       (int)smem));
		opted = true;
	}
	kern<<<(unsigned)blocks, FA_THREADS, smem, lbc_stream()>>>(args...);
	LBC_LAUNCHED();
}

template <int D>
static void fwd_tc(act_t *out, float *lse, const act_t *qkv, int b, int s, int nh, int nkv,
		   float scale)
{
	static bool attr;

	tc_launch(flash_fwd_tc_kernel<D>, attr, fwd_smem<D>(),
		  (size_t)((s + FWD_BR - 1) / FWD_BR) * nh * b, out, lse, qkv, b, s, nh, nkv,
		  scale);
}

template <int D>
static void bwd_tc(act_t *dqkv, float *dq_acc, const act_t *dout, const float *lse,
		   const float *delta, const act_t *qkv, int b, int s, int nh, int nkv, float scale)
{
	static bool attr;

	tc_launch(flash_bwd_tc_kernel<D>, attr, bwd_smem<D>(),
		  (size_t)((s + BWD_BC - 1) / BWD_BC) * nkv * b, dqkv, dq_acc, dout, lse, delta,
		  qkv, b, s, nh, nkv, scale);
}

void lbc_attn_flash_fwd(void *out, void *lse, void *scratch, const void *qkv, int b, int s, int nh,
			int nkv, int d)
{
	act_t *o = (act_t *)out;
	float *l = (float *)lse, scale = (float)(1.0 / sqrt((double)d));
	const act_t *x = (const act_t *)qkv;
	size_t rows = (size_t)b * nh * s;

	(void)scratch; /* the forward keeps everything on chip */
	if (rows == 0)
		return;
	if (flash_tc(d, out, qkv, out, qkv)) {
		if (d == 128)
			fwd_tc<128>(o, l, x, b, s, nh, nkv, scale);
		else if (d == 64)
			fwd_tc<64>(o, l, x, b, s, nh, nkv, scale);
		else
			fwd_tc<32>(o, l, x, b, s, nh, nkv, scale);
		return;
	}
	flash_check(d);
	warp_launch<GEN_WARPS>(flash_fwd_gen_kernel, rows, o, l, x, b, s, nh, nkv, d, scale);
}

void lbc_attn_flash_bwd(void *dqkv, void *scratch, const void *dout, const void *out,
			const void *lse, const void *qkv, int b, int s, int nh, int nkv, int d)
{
	act_t *dx = (act_t *)dqkv;
	const act_t *x = (const act_t *)qkv, *dO = (const act_t *)dout;
	const float *l = (const float *)lse;
	float scale = (float)(1.0 / sqrt((double)d));
	size_t nq = (size_t)b * s * nh * d; /* dq_acc elements */
	float *dq_acc = (float *)scratch, *delta = dq_acc + nq;
	long long ld = (long long)(nh + 2 * nkv) * d;

	if ((size_t)b * nh * s == 0)
		return;
	flash_delta(delta, dO, (const act_t *)out, b, s, nh, d);
	if (flash_tc(d, dqkv, dout, qkv, scratch)) {
		LBC_CHECK(cudaMemsetAsync(dq_acc, 0, nq * sizeof(float), lbc_stream()));
		if (d == 128)
			bwd_tc<128>(dx, dq_acc, dO, l, delta, x, b, s, nh, nkv, scale);
		else if (d == 64)
			bwd_tc<64>(dx, dq_acc, dO, l, delta, x, b, s, nh, nkv, scale);
		else
			bwd_tc<32>(dx, dq_acc, dO, l, delta, x, b, s, nh, nkv, scale);
		flash_dq_store_kernel<<<lbc_blocks(nq / 2, 256), 256, 0, lbc_stream()>>>(
		    dx, dq_acc, nq / 2, nh * d, ld, scale);
		LBC_LAUNCHED();
		return;
	}
	flash_check(d);
	const gen_bwd a = {dx, dO, l, delta, x, b, s, nh, nkv, d, scale};

	warp_launch<GEN_WARPS>(flash_bwd_dq_gen_kernel, (size_t)b * nh * s, a);
	warp_launch<GEN_WARPS>(flash_bwd_dkv_gen_kernel, (size_t)b * nkv * s, a);
}
