/*
 * Token embedding on the GPU, vocab-parallel (Megatron-LM, Shoeybi et al. 2019, sec. 3: the
 * table is split by rows and the shards' outputs are summed by the tensor-parallel
 * all-reduce), forward and backward: this shard holds rows [v0, v0 + V) of the table (V, H);
 *   out[t] = table[tokens[t] - v0]   when v0 <= tokens[t] < v0 + V, else a zero row,
 *   dtable[tokens[t] - v0] += dout[t]   for the tokens in the shard.
 * Operands: out, table, dout act (bf16); dtable f32 (main gradients, accumulated); tokens i32
 * device memory. Same semantics as harness/ops_cpu_impl.h. Decomposition of the forward: when H
 * is a multiple of 8 and the buffers are 16-byte aligned, one block per token row (grid T):
 * the block reads its token once and its threads copy the row in 16-byte vectors of 8 bf16,
 * two vectors per thread with both loads issued before the stores (no per-element index
 * arithmetic, two loads in flight per thread); otherwise one element per thread,
 * grid-striding with 64-bit indices. The backward, for T <= EMBED_SCAN_MAX_T with the same
 * widths and alignment, also takes one block per token row, which first scans the
 * micro-batch's tokens for another occurrence of its own: a token that occurs once owns its
 * table row, and the block adds dout into it with plain 16-byte loads, adds and stores (no
 * atomics); a repeated token's rows are added with 16-byte vector atomics
 * (red.global.add.v4.f32, sm_90; four float atomics each before). Measured on the H200 at
 * the Llama-13B width (H 5120), 77% of the copy bandwidth at T 2048 and 85% at T 8192
 * against 75% for atomics alone: a row of atomics costs more than the read of the row and
 * its store. The scan is O(T) per block, O(T^2) in all, so longer micro-batches (and
 * dout not so aligned) take the grid-stride kernel: 4 columns per thread with one 16-byte
 * atomic when H is a multiple of 4 and the buffers are aligned, one float atomic per element
 * otherwise. Atomics because tokens repeat within a micro-batch and no scratch is given to
 * sort them: the order in which repeated tokens' rows are added varies between runs, so the
 * rows of repeated tokens in dtable (all rows, above EMBED_SCAN_MAX_T) are nondeterministic
 * in their last bits (fp32 rounding), not in value beyond that; a token seen once in a
 * micro-batch of at most EMBED_SCAN_MAX_T is added deterministically.
 */
#include "harness/cuda/cuda_common.cuh"

/* 16-byte vectors per thread of the row kernels: their loads are all issued before use. */
#define EMBED_U 2

/* Threads of a row kernel's block: EMBED_U vectors of 8 each, whole warps, at most 1024
 * (wider rows loop). */
static unsigned embed_threads(int h)
{
	unsigned n = (unsigned)((h / 8 + EMBED_U - 1) / EMBED_U + 31) / 32 * 32;

	return n > 1024 ? 1024 : n;
}

/* Block = token row; thread j copies the vectors j + u * blockDim.x (u < EMBED_U). */
static __global__ void __launch_bounds__(1024)
    embed_fwd_row_kernel(act_t *__restrict__ out, const act_t *__restrict__ table,
			 const int32_t *__restrict__ tokens, int h, int v0, int v)
{
	int row = blockIdx.x, nv = h / 8, r = tokens[row] - v0;
	bool in = r >= 0 && r < v;
	const uint4 *src = reinterpret_cast<const uint4 *>(table + (size_t)(in ? r : 0) * h);
	uint4 *dst = reinterpret_cast<uint4 *>(out + (size_t)row * h);

	for (int q0 = threadIdx.x; q0 < nv; q0 += blockDim.x * EMBED_U) {
		uint4 a[EMBED_U];

#pragma unroll
		for (int u = 0; u < EMBED_U; u++) {
			int q = q0 + u * blockDim.x;

			a[u] = in && q < nv ? src[q] : make_uint4(0, 0, 0, 0);
		}
#pragma unroll
		for (int u = 0; u < EMBED_U; u++) {
			int q = q0 + u * blockDim.x;

			if (q < nv)
				dst[q] = a[u];
		}
	}
}

/* One element per thread (rows not in 16-byte vectors). */
static __global__ void embed_fwd_kernel(act_t *__restrict__ out, const act_t *__restrict__ table,
					const int32_t *__restrict__ tokens, int h, int v0, int v,
					size_t n)
{
	for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
	     e += (size_t)gridDim.x * blockDim.x) {
		size_t row = e / h, col = e - row * h;
		int r = tokens[row] - v0;

		out[e] = r >= 0 && r < v ? table[(size_t)r * h + col] : __float2bfloat16_rn(0.0f);
	}
}

/*
 * Longest micro-batch (tokens) whose backward scans for repeated tokens: every block reads
 * all T tokens (16-byte loads from L1/L2), T^2 * 4 bytes in all; at 8192 that is 256 MiB
 * against the 420 MiB the rows move at H 5120 and the scan measured a net gain (85% of copy
 * against 75%), past it the scan grows as T^2 while the rows grow as T (at 65536 tokens, 16
 * GiB of token reads), and the grid-stride atomics, which need no scan, are faster.
 */
#define EMBED_SCAN_MAX_T 8192

/*
 * Block = token row; thread j adds the vectors j + u * blockDim.x (u < EMBED_U) of dout.
 * The block first scans tokens (int4 loads when vec_scan: t a multiple of 4 and tokens
 * 16-byte aligned) for another row with its token; with none, no other block writes the
 * table row, and it is updated with plain loads and stores, else with vector atomics.
 */
static __global__ void __launch_bounds__(1024)
    embed_bwd_row_kernel(float *__restrict__ dtable, const act_t *__restrict__ dout,
			 const int32_t *__restrict__ tokens, int t, int h, int v0, int v,
			 int vec_scan)
{
	int row = blockIdx.x, nv = h / 8, tok = tokens[row], r = tok - v0, dup = 0;

	if (r < 0 || r >= v) /* uniform over the block: no barrier below is skipped by part */
		return;
	if (vec_scan) {
		const int4 *t4 = reinterpret_cast<const int4 *>(tokens);

		for (int j = threadIdx.x; j < t / 4; j += blockDim.x) {
			int4 k = t4[j];
			int i = 4 * j - row; /* k.x is row row + i */

			dup |= (k.x == tok && i != 0) | (k.y == tok && i != -1) |
			       (k.z == tok && i != -2) | (k.w == tok && i != -3);
		}
	} else {
		for (int j = threadIdx.x; j < t; j += blockDim.x)
			dup |= tokens[j] == tok && j != row;
	}
	dup = __syncthreads_or(dup);

	const uint4 *src = reinterpret_cast<const uint4 *>(dout + (size_t)row * h);
	float *dst = dtable + (size_t)r * h;

	for (int q0 = threadIdx.x; q0 < nv; q0 += blockDim.x * EMBED_U) {
		uint4 a[EMBED_U];
		float4 d[EMBED_U][2];

#pragma unroll
		for (int u = 0; u < EMBED_U; u++) {
			int q = q0 + u * blockDim.x;

			if (q < nv) {
				a[u] = src[q];
				if (!dup) {
					d[u][0] =
					    *reinterpret_cast<const float4 *>(dst + (size_t)q * 8);
					d[u][1] = *reinterpret_cast<const float4 *>(
					    dst + (size_t)q * 8 + 4);
				}
			}
		}
#pragma unroll
		for (int u = 0; u < EMBED_U; u++) {
			int q = q0 + u * blockDim.x;
			const __nv_bfloat162 *b = reinterpret_cast<const __nv_bfloat162 *>(&a[u]);

			if (q >= nv)
				break;
			float2 f0 = __bfloat1622float2(b[0]), f1 = __bfloat1622float2(b[1]);
			float2 f2 = __bfloat1622float2(b[2]), f3 = __bfloat1622float2(b[3]);

			if (dup) {
				lbc_red_add4(dst + (size_t)q * 8, f0.x, f0.y, f1.x, f1.y);
				lbc_red_add4(dst + (size_t)q * 8 + 4, f2.x, f2.y, f3.x, f3.y);
			} else {
				d[u][0].x += f0.x, d[u][0].y += f0.y, d[u][0].z += f1.x;
				d[u][0].w += f1.y, d[u][1].x += f2.x, d[u][1].y += f2.y;
				d[u][1].z += f3.x, d[u][1].w += f3.y;
				*reinterpret_cast<float4 *>(dst + (size_t)q * 8) = d[u][0];
				*reinterpret_cast<float4 *>(dst + (size_t)q * 8 + 4) = d[u][1];
			}
		}
	}
}

template <int VEC>
static __global__ void embed_bwd_kernel(float *__restrict__ dtable, const act_t *__restrict__ dout,
					const int32_t *__restrict__ tokens, int h, int v0, int v,
					size_t nv)
{
	for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < nv;
	     e += (size_t)gridDim.x * blockDim.x) {
		size_t idx = e * VEC, row = idx / h, col = idx - row * h;
		int r = tokens[row] - v0;
		float *dst;

		if (r < 0 || r >= v)
			continue;
		dst = dtable + (size_t)r * h + col;
		if constexpr (VEC == 4) {
			uint2 u = *reinterpret_cast<const uint2 *>(dout + idx);
			float2 a =
			    __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u.x));
			float2 b =
			    __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u.y));

			lbc_red_add4(dst, a.x, a.y, b.x, b.y);
		} else {
			atomicAdd(dst, __bfloat162float(dout[idx]));
		}
	}
}

static int aligned(const void *p, unsigned bytes)
{
	return ((uintptr_t)p & (bytes - 1)) == 0;
}

void lbc_embed_fwd(void *out, const void *table, const int32_t *tokens, int t, int h, int v0, int v)
{
	size_t n = (size_t)t * h;

	if (t <= 0 || h <= 0)
		return;
	if (h % 8 == 0 && aligned(out, 16) && aligned(table, 16))
		embed_fwd_row_kernel<<<t, embed_threads(h), 0, lbc_stream()>>>(
		    (act_t *)out, (const act_t *)table, tokens, h, v0, v);
	else
		embed_fwd_kernel<<<lbc_blocks(n, 256), 256, 0, lbc_stream()>>>(
		    (act_t *)out, (const act_t *)table, tokens, h, v0, v, n);
	LBC_LAUNCHED();
}

void lbc_embed_bwd(void *dtable, const void *dout, const int32_t *tokens, int t, int h, int v0,
		   int v)
{
	size_t n = (size_t)t * h;

	if (t <= 0 || h <= 0 || v <= 0)
		return;
	if (t <= EMBED_SCAN_MAX_T && h % 8 == 0 && aligned(dtable, 16) && aligned(dout, 16))
		embed_bwd_row_kernel<<<t, embed_threads(h), 0, lbc_stream()>>>(
		    (float *)dtable, (const act_t *)dout, tokens, t, h, v0, v,
		    t % 4 == 0 && aligned(tokens, 16));
	else if (h % 4 == 0 && aligned(dtable, 16) && aligned(dout, 8))
		embed_bwd_kernel<4><<<lbc_blocks(n / 4, 256), 256, 0, lbc_stream()>>>(
		    (float *)dtable, (const act_t *)dout, tokens, h, v0, v, n / 4);
	else
		embed_bwd_kernel<1><<<lbc_blocks(n, 256), 256, 0, lbc_stream()>>>(
		    (float *)dtable, (const act_t *)dout, tokens, h, v0, v, n);
	LBC_LAUNCHED();
}
