/*
 * Rotary position embedding (Su et al. 2021, RoFormer, sec. 3.4.2) on the GPU, in place, forward
 * and backward: in each row t of x (T rows, `stride` elements apart) the first nheads heads of
 * D elements have each pair (2i, 2i+1) rotated by the angle pos * theta^(-2i/D), pos = t % S:
 *   x'[2i] = x[2i] cos - x[2i+1] sin,   x'[2i+1] = x[2i] sin + x[2i+1] cos,
 * with (cos, sin) read from the table cs (S, D/2, 2). The backward applies the transpose, the
 * rotation by the negative angle (sin negated), to the gradient. Operands: x / dx act (bf16),
 * cs f32; the rotation is computed in fp32 and rounded once. Decomposition: one thread per
 * pair, grid-striding over the T * nheads * D/2 pairs (64-bit indices); a pair is one 4-byte
 * load and store (a bf16x2) when the row stride and D are even and x is 4-byte aligned, two
 * 2-byte ones otherwise. Same indexing as harness/ops_cpu_impl.h (FN(rope)).
 */
#include "harness/cuda/cuda_common.cuh"

template <bool PAIR>
static __global__ void rope_kernel(act_t *__restrict__ x, const float *__restrict__ cs, int s,
				   int stride, int nheads, int d, size_t npairs, float sign)
{
	int half = d / 2;
	size_t per_row = (size_t)nheads * half;

	for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < npairs;
	     p += (size_t)gridDim.x * blockDim.x) {
		size_t row = p / per_row;
		int rem = (int)(p - row * per_row);
		int hh = rem / half, i = rem - hh * half;
		act_t *v = x + row * stride + (size_t)hh * d + 2 * i;
		const float *c = cs + (row % s) * d + 2 * i;
		float co = c[0], si = sign * c[1];
		float a, b;

		if constexpr (PAIR) {
			float2 f = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(v));

			a = f.x;
			b = f.y;
			*reinterpret_cast<__nv_bfloat162 *>(v) =
			    __floats2bfloat162_rn(a * co - b * si, a * si + b * co);
		} else {
			a = __bfloat162float(v[0]);
			b = __bfloat162float(v[1]);
			v[0] = __float2bfloat16_rn(a * co - b * si);
			v[1] = __float2bfloat16_rn(a * si + b * co);
		}
	}
}

static void rope(void *x, const void *cs, int t, int s, int stride, int nheads, int d, float sign)
{
	size_t npairs = (size_t)t * nheads * (d / 2);
	unsigned blocks = lbc_blocks(npairs, 256);

	if (t <= 0 || s <= 0 || nheads <= 0 || d < 2)
		return;
	if (stride % 2 == 0 && d % 2 == 0 && ((uintptr_t)x & 3u) == 0)
		rope_kernel<true><<<blocks, 256, 0, lbc_stream>>>((act_t *)x, (const float *)cs, s,
								  stride, nheads, d, npairs, sign);
	else
		rope_kernel<false><<<blocks, 256, 0, lbc_stream>>>((act_t *)x, (const float *)cs, s,
								   stride, nheads, d, npairs, sign);
	LBC_LAUNCHED();
}

void lbc_rope_fwd(void *x, const void *cs, int t, int s, int stride, int nheads, int d)
{
	rope(x, cs, t, s, stride, nheads, d, 1.0f);
}

void lbc_rope_bwd(void *dx, const void *cs, int t, int s, int stride, int nheads, int d)
{
	rope(dx, cs, t, s, stride, nheads, d, -1.0f);
}
