/*
 * Token embedding on the GPU, vocab-parallel (Megatron-LM, Shoeybi et al. 2019, sec. 3: the
 * table is split by rows and the shards' outputs are summed by the tensor-parallel
 * all-reduce), forward and backward: this shard holds rows [v0, v0 + V) of the table (V, H);
 *   out[t] = table[tokens[t] - v0]   when v0 <= tokens[t] < v0 + V, else a zero row,
 *   dtable[tokens[t] - v0] += dout[t]   for the tokens in the shard.
 * Operands: out, table, dout act (bf16); dtable f32 (main gradients, accumulated); tokens i32
 * device memory. Same semantics as harness/ops_cpu_impl.h. Decomposition: elementwise over
 * the (T, H) output, one thread per vector of columns of one token row, grid-striding with
 * 64-bit indices: the forward copies 16 bytes (8 bf16, no conversion) per thread when H is a
 * multiple of 8 and the buffers are 16-byte aligned, one element otherwise; the backward adds
 * 4 columns per thread with one float4 atomicAdd (sm_90) when H is a multiple of 4 and the
 * buffers are aligned, one float atomicAdd per element otherwise. Atomics because tokens
 * repeat within a micro-batch and no scratch is given to sort them: the order in which
 * repeated tokens' rows are added varies between runs, so dtable is nondeterministic in its
 * last bits (fp32 rounding), not in value beyond that.
 */
#include "harness/cuda/cuda_common.cuh"

template <int VEC>
static __global__ void embed_fwd_kernel(act_t *__restrict__ out, const act_t *__restrict__ table,
					const int32_t *__restrict__ tokens, int h, int v0, int v,
					size_t nv)
{
	for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < nv;
	     e += (size_t)gridDim.x * blockDim.x) {
		size_t idx = e * VEC, row = idx / h, col = idx - row * h;
		int r = tokens[row] - v0;
		int in = r >= 0 && r < v;

		if constexpr (VEC == 8) {
			uint4 z = make_uint4(0, 0, 0, 0);

			*reinterpret_cast<uint4 *>(out + idx) =
			    in ? *reinterpret_cast<const uint4 *>(table + (size_t)r * h + col) : z;
		} else {
			out[idx] = in ? table[(size_t)r * h + col] : __float2bfloat16_rn(0.0f);
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

#if __CUDA_ARCH__ >= 900
			atomicAdd(reinterpret_cast<float4 *>(dst), make_float4(a.x, a.y, b.x, b.y));
#else
			atomicAdd(dst, a.x);
			atomicAdd(dst + 1, a.y);
			atomicAdd(dst + 2, b.x);
			atomicAdd(dst + 3, b.y);
#endif
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
		embed_fwd_kernel<8><<<lbc_blocks(n / 8, 256), 256, 0, lbc_stream>>>(
		    (act_t *)out, (const act_t *)table, tokens, h, v0, v, n / 8);
	else
		embed_fwd_kernel<1><<<lbc_blocks(n, 256), 256, 0, lbc_stream>>>(
		    (act_t *)out, (const act_t *)table, tokens, h, v0, v, n);
	LBC_LAUNCHED();
}

void lbc_embed_bwd(void *dtable, const void *dout, const int32_t *tokens, int t, int h, int v0,
		   int v)
{
	size_t n = (size_t)t * h;

	if (t <= 0 || h <= 0 || v <= 0)
		return;
	if (h % 4 == 0 && aligned(dtable, 16) && aligned(dout, 8))
		embed_bwd_kernel<4><<<lbc_blocks(n / 4, 256), 256, 0, lbc_stream>>>(
		    (float *)dtable, (const act_t *)dout, tokens, h, v0, v, n / 4);
	else
		embed_bwd_kernel<1><<<lbc_blocks(n, 256), 256, 0, lbc_stream>>>(
		    (float *)dtable, (const act_t *)dout, tokens, h, v0, v, n);
	LBC_LAUNCHED();
}
