/*
 * SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer", sec. 2; the bias-free FFN of
 * Llama) on the GPU, forward and backward: with each row of gu (T, 2F) holding [g | u],
 *   out = silu(g) * u = g * sig(g) * u,   sig(g) = 1 / (1 + exp(-g)),
 * and, differentiating (silu'(g) = sig(g) * (1 + g * (1 - sig(g)))),
 *   dg = dout * u * sig * (1 + g * (1 - sig)),   du = dout * g * sig,
 * written (overwriting) into dgu (T, 2F) as [dg | du]; the same function and order of
 * operations as harness/ops_cpu_impl.h. Operands: out, gu, dout, dgu act (bf16); math in fp32
 * (expf), rounded once per stored element. Decomposition: elementwise, one thread per vector of
 * 8 consecutive columns of a row (16-byte loads and stores) when F is a multiple of 8 and the
 * buffers are 16-byte aligned, one per element otherwise, grid-striding over T*F / VEC with
 * 64-bit indices (T*F reaches 9e8 at Llama-13B width).
 */
#include "harness/cuda/cuda_common.cuh"

static __device__ __forceinline__ float sigmoid(float g)
{
	return 1.0f / (1.0f + expf(-g));
}

template <int VEC>
static __global__ void swiglu_fwd_kernel(act_t *__restrict__ out, const act_t *__restrict__ gu,
					 int f, size_t nv)
{
	for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < nv;
	     e += (size_t)gridDim.x * blockDim.x) {
		size_t idx = e * VEC, row = idx / f;
		const act_t *g = gu + row * 2 * f + (idx - row * f);
		float gv[VEC], uv[VEC], o[VEC];

		ld_act<VEC>(gv, g);
		ld_act<VEC>(uv, g + f);
#pragma unroll
		for (int k = 0; k < VEC; k++)
			o[k] = gv[k] * sigmoid(gv[k]) * uv[k];
		st_act<VEC>(out + idx, o);
	}
}

template <int VEC>
static __global__ void swiglu_bwd_kernel(act_t *__restrict__ dgu, const act_t *__restrict__ dout,
					 const act_t *__restrict__ gu, int f, size_t nv)
{
	for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < nv;
	     e += (size_t)gridDim.x * blockDim.x) {
		size_t idx = e * VEC, row = idx / f;
		size_t off = row * 2 * f + (idx - row * f);
		float gv[VEC], uv[VEC], dy[VEC], dg[VEC], du[VEC];

		ld_act<VEC>(gv, gu + off);
		ld_act<VEC>(uv, gu + off + f);
		ld_act<VEC>(dy, dout + idx);
#pragma unroll
		for (int k = 0; k < VEC; k++) {
			float sig = sigmoid(gv[k]);

			dg[k] = dy[k] * uv[k] * sig * (1.0f + gv[k] * (1.0f - sig));
			du[k] = dy[k] * gv[k] * sig;
		}
		st_act<VEC>(dgu + off, dg);
		st_act<VEC>(dgu + off + f, du);
	}
}

static int aligned16(const void *p)
{
	return ((uintptr_t)p & 15u) == 0;
}

void lbc_swiglu_fwd(void *out, const void *gu, int t, int f)
{
	size_t n = (size_t)t * f;

	if (t <= 0 || f <= 0)
		return;
	if (f % 8 == 0 && aligned16(out) && aligned16(gu))
		swiglu_fwd_kernel<8><<<lbc_blocks(n / 8, 256), 256, 0, lbc_stream()>>>(
		    (act_t *)out, (const act_t *)gu, f, n / 8);
	else
		swiglu_fwd_kernel<1><<<lbc_blocks(n, 256), 256, 0, lbc_stream()>>>(
		    (act_t *)out, (const act_t *)gu, f, n);
	LBC_LAUNCHED();
}

void lbc_swiglu_bwd(void *dgu, const void *dout, const void *gu, int t, int f)
{
	size_t n = (size_t)t * f;

	if (t <= 0 || f <= 0)
		return;
	if (f % 8 == 0 && aligned16(dgu) && aligned16(dout) && aligned16(gu))
		swiglu_bwd_kernel<8><<<lbc_blocks(n / 8, 256), 256, 0, lbc_stream()>>>(
		    (act_t *)dgu, (const act_t *)dout, (const act_t *)gu, f, n / 8);
	else
		swiglu_bwd_kernel<1><<<lbc_blocks(n, 256), 256, 0, lbc_stream()>>>(
		    (act_t *)dgu, (const act_t *)dout, (const act_t *)gu, f, n);
	LBC_LAUNCHED();
}
