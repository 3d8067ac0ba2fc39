/*
 * Rotary position embedding (Su et al. 2021, RoFormer, sec. 3.4.2) on the GPU, in place, forward
 * and backward: in each row t of x (T rows, `stride` elements apart) the first nheads heads of
 * D elements have each pair (2i, 2i+1) rotated by the angle pos * theta^(-2i/D), pos = t % S:
 *   x'[2i] = x[2i] cos - x[2i+1] sin,   x'[2i+1] = x[2i] sin + x[2i+1] cos,
 * with (cos, sin) read from the table cs (S, D/2, 2). The backward applies the transpose, the
 * rotation by the negative angle (sin negated), to the gradient. Operands: x / dx act (bf16),
 * cs f32; the rotation is computed in fp32 and rounded once. Decomposition: when the row
 * stride and D are multiples of 8 and x and cs are 16-byte aligned (D = 128 always is), a
 * thread takes 8 consecutive elements (4 pairs, never straddling a head) with one 16-byte
 * load and store and their (cos, sin) as two float4s of the table, the rows grid-striding
 * over the blocks and each thread's U vectors of a row loaded before any is stored; the
 * table (S * D floats) stays in L1/L2. Otherwise one thread per pair, grid-striding over
 * the T * nheads * D/2 pairs (64-bit indices); a pair is one 4-byte load and store (a
 * bf16x2) when the row stride and D are even and x is 4-byte aligned, two 2-byte ones
 * otherwise. Same indexing as harness/ops_cpu_impl.h (FN(rope)).
 */
#include "harness/cuda/cuda_common.cuh"

/* 16-byte vectors a thread issues together in the vector kernel. */
#define ROPE_U 4

/*
 * Rows blockIdx.x, blockIdx.x + gridDim.x, ...; in a row the nheads * D/8 vectors, thread j
 * taking j + k*blockDim.x (k < U) of each pass. Vector v holds elements 8v .. 8v+7 of the
 * row, pairs i .. i+3 of head 8v / D with 2i = 8v % D, so its table entries are the 8
 * floats from cs[pos*D + 8v % D] on.
 */
template <int U>
static __global__ void rope_vec_kernel(act_t *__restrict__ x, const float *__restrict__ cs, int t,
				       int s, int stride, int nheads, int d, float sign)
{
	int nvec = nheads * (d / 8);

	for (int row = blockIdx.x; row < t; row += gridDim.x) {
		act_t *xr = x + (size_t)row * stride;
		const float *cr = cs + (size_t)(row % s) * d;

		for (int base = 0; base < nvec; base += U * blockDim.x) {
			uint4 u[U];

#pragma unroll
			for (int k = 0; k < U; k++) {
				int v = base + threadIdx.x + k * blockDim.x;

				u[k] = v < nvec
					   ? *reinterpret_cast<const uint4 *>(xr + (size_t)v * 8)
					   : make_uint4(0u, 0u, 0u, 0u);
			}
#pragma unroll
			for (int k = 0; k < U; k++) {
				int v = base + threadIdx.x + k * blockDim.x;
				__nv_bfloat162 *pr = reinterpret_cast<__nv_bfloat162 *>(&u[k]);
				const float *c = cr + v * 8 % d;
				float4 c0, c1;

				if (v >= nvec)
					break;
				c0 = *reinterpret_cast<const float4 *>(c);
				c1 = *reinterpret_cast<const float4 *>(c + 4);
				float co[4] = {c0.x, c0.z, c1.x, c1.z};
				float si[4] = {sign * c0.y, sign * c0.w, sign * c1.y, sign * c1.w};

#pragma unroll
				for (int p = 0; p < 4; p++) {
					float2 f = __bfloat1622float2(pr[p]);
					float a = f.x, b = f.y;

					pr[p] = __floats2bfloat162_rn(a * co[p] - b * si[p],
								      a * si[p] + b * co[p]);
				}
				*reinterpret_cast<uint4 *>(xr + (size_t)v * 8) = u[k];
			}
		}
	}
}

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

static int aligned16(const void *p)
{
	return ((uintptr_t)p & 15u) == 0;
}

static void rope(void *x, const void *cs, int t, int s, int stride, int nheads, int d, float sign)
{
	size_t npairs = (size_t)t * nheads * (d / 2);
	unsigned blocks = lbc_blocks(npairs, 256);

	if (t <= 0 || s <= 0 || nheads <= 0 || d < 2)
		return;
	if (stride % 8 == 0 && d % 8 == 0 && aligned16(x) && aligned16(cs)) {
		/* a block per row (at most 65535 * 32, grid-striding past), threads to cover a
		 * row's vectors in one pass of U each where 1024 do */
		int nvec = nheads * (d / 8);
		unsigned threads = (unsigned)(((nvec + ROPE_U - 1) / ROPE_U + 31) / 32 * 32);

		if (threads > 1024)
			threads = 1024;
		blocks = t < 65535 * 32 ? (unsigned)t : 65535u * 32u;
		rope_vec_kernel<ROPE_U><<<blocks, threads, 0, lbc_stream()>>>(
		    (act_t *)x, (const float *)cs, t, s, stride, nheads, d, sign);
	} else if (stride % 2 == 0 && d % 2 == 0 && ((uintptr_t)x & 3u) == 0) {
		rope_kernel<true><<<blocks, 256, 0, lbc_stream()>>>(
		    (act_t *)x, (const float *)cs, s, stride, nheads, d, npairs, sign);
	} else {
		rope_kernel<false><<<blocks, 256, 0, lbc_stream()>>>(
		    (act_t *)x, (const float *)cs, s, stride, nheads, d, npairs, sign);
	}
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
