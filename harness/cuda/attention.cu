/*
 * Causal self-attention on the GPU, the entries of harness/ops.h, computing exactly the
 * functions of the CPU reference (harness/ops_cpu_impl.h) with the same index conventions:
 * qkv (T, (nh + 2*nkv)*D) bf16, row t = b*S + s holding [q heads | k heads | v heads], query
 * head h reading kv head h / (nh/nkv) (grouped-query attention), scale 1/sqrt(D), out
 * (T, nh*D) bf16, probs (B, nh, S, S) bf16, lse (B, nh, S) f32 (the natural log of
 * sum_j exp(scale * q.k_j), computed as max + log(sum exp(x - max))). Every backward
 * overwrites dqkv, its K and V parts summed over the query heads of a group. This file: the
 * naive and fused_softmax variants (attn_naive_fwd, attn_fused_fwd, attn_probs_bwd) and the
 * one scratch size of every variant (attn_scratch); flash is attention_flash.cu, cuDNN's
 * attention_cudnn.cu.
 *
 * The naive and fused_softmax variants run as an eager framework does: the scores come from
 * cuBLASLt batched GEMMs (lbc_gemm) straight into probs, then the softmax runs in place as
 * separate passes (naive: scale, mask, softmax) or one pass (fused), and out = P V is one
 * more GEMM per batch; their backward (attn_probs_bwd) is GEMMs around one softmax-backward
 * kernel, dS = P * (dP - rowsum(dP * P)) (the softmax Jacobian-vector product). All
 * arithmetic is fp32: bf16 is widened on load and rounded once when stored.
 */
#include "harness/cuda/attention.cuh"

#include <math.h>

/* ------------------------------------------------------------------------------------------
 * naive and fused_softmax: the score and P V GEMMs. For a fixed sequence bb and position
 * jj in [0, g) within a GQA group (g = nh/nkv), the query heads h = kvh*g + jj, kvh in
 * [0, nkv), are a constant-stride batch: Q (and dO, out) g*D apart, K and V D apart, the
 * (S, S) blocks of probs g*S*S apart. So each product is B*g batched GEMMs of nkv.
 * ------------------------------------------------------------------------------------------ */

/* probs[bb, h] (S, S) = Q_h K_kvh^T, bf16, every (i, j) (the upper triangle too). */
static void scores_gemm(act_t *probs, const act_t *qkv, int b, int s, int nh, int nkv, int d)
{
	int g = nh / nkv;
	long long ld = (long long)(nh + 2 * nkv) * d, ss = (long long)s * s;

	for (int bb = 0; bb < b; bb++)
		for (int jj = 0; jj < g; jj++) {
			const act_t *rows = qkv + (size_t)bb * s * ld;

			lbc_gemm(probs + ((size_t)bb * nh + jj) * ss, 0, rows + (size_t)jj * d,
				 rows + (size_t)nh * d, s, s, d, 0, 1, ld, ld, s, (long long)g * d,
				 d, (long long)g * ss, nkv, 1.0f, 0.0f);
		}
}

/* out rows (S, D) of head h = P_h (S, S) V_kvh (S, D). */
static void pv_gemm(act_t *out, const act_t *probs, const act_t *qkv, int b, int s, int nh, int nkv,
		    int d)
{
	int g = nh / nkv;
	long long ld = (long long)(nh + 2 * nkv) * d, ss = (long long)s * s;

	for (int bb = 0; bb < b; bb++)
		for (int jj = 0; jj < g; jj++)
			lbc_gemm(out + (size_t)bb * s * nh * d + (size_t)jj * d, 0,
				 probs + ((size_t)bb * nh + jj) * ss,
				 qkv + (size_t)bb * s * ld + (size_t)(nh + nkv) * d, s, d, s, 0, 0,
				 s, ld, (long long)nh * d, (long long)g * ss, d, (long long)g * d,
				 nkv, 1.0f, 0.0f);
}

/* --- the separate passes of the naive softmax: elementwise over the (B, nh, S, S) scores,
 * V elements a step (V = 8 when S % 8 == 0 and probs is 16-byte aligned: a step then never
 * crosses a row) --- */

/* x *= scale. */
template <int V> static __global__ void attn_scale_kernel(act_t *p, size_t nsteps, float scale)
{
	for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < nsteps;
	     c += (size_t)gridDim.x * blockDim.x) {
		float x[V];

		ld_act<V>(x, p + c * V);
#pragma unroll
		for (int k = 0; k < V; k++)
			x[k] *= scale;
		st_act<V>(p + c * V, x);
	}
}

/* x[i, j] = -inf for j > i (the causal mask); the rest untouched. */
template <int V> static __global__ void attn_mask_kernel(act_t *p, size_t nsteps, int s)
{
	for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < nsteps;
	     c += (size_t)gridDim.x * blockDim.x) {
		size_t e = c * V, row = e / s;
		int j0 = (int)(e - row * s), i = (int)(row % s);
		float x[V];

		if (j0 + V - 1 <= i)
			continue; /* below the diagonal: nothing to mask */
		if (j0 > i) {
#pragma unroll
			for (int k = 0; k < V; k++)
				x[k] = -INFINITY;
		} else {
			ld_act<V>(x, p + e);
#pragma unroll
			for (int k = 0; k < V; k++)
				if (j0 + k > i)
					x[k] = -INFINITY;
		}
		st_act<V>(p + e, x);
	}
}

/*
 * Softmax of each row of probs in place, one warp per row (rows = B*nh*S, row i of its head
 * = row % S), V elements per lane a step. FUSED: the row holds raw scores; x = scale*raw for
 * j <= i, and 0 is written for j > i (scale + mask + softmax in one pass). Otherwise the row is
 * already scaled and masked (-inf) and every element takes part. Two reads (an online max and
 * sum per lane, merged across the warp, then the normalised write), fp32 throughout.
 */
template <bool FUSED, int V>
static __global__ void __launch_bounds__(256)
    attn_softmax_kernel(act_t *p, size_t rows, int s, float scale)
{
	size_t row = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	int lane = threadIdx.x & 31;

	if (row >= rows)
		return;
	act_t *r = p + row * s;
	int i = (int)(row % s), n = FUSED ? i + 1 : s; /* elements [0, n) take part */
	float m = -INFINITY, l = 0.0f;

	for (int j0 = lane * V; j0 < n; j0 += 32 * V) {
		float x[V], cm = -INFINITY;

		ld_act<V>(x, r + j0);
#pragma unroll
		for (int k = 0; k < V; k++) {
			x[k] = j0 + k < n ? (FUSED ? x[k] * scale : x[k]) : -INFINITY;
			cm = fmaxf(cm, x[k]);
		}
		if (cm == -INFINITY)
			continue;
		if (cm > m) {
			l *= expf(m - cm); /* m = -inf: l is 0 */
			m = cm;
		}
#pragma unroll
		for (int k = 0; k < V; k++)
			l += expf(x[k] - m);
	}
	float mx = warp_max(m);

	l = m == -INFINITY ? 0.0f : l * expf(m - mx);
	float inv = 1.0f / warp_sum(l);

	for (int j0 = lane * V; j0 < s; j0 += 32 * V) {
		float x[V];

		if (FUSED && j0 >= n) {
#pragma unroll
			for (int k = 0; k < V; k++)
				x[k] = 0.0f;
		} else {
			ld_act<V>(x, r + j0);
#pragma unroll
			for (int k = 0; k < V; k++)
				x[k] = j0 + k < n ? expf((FUSED ? x[k] * scale : x[k]) - mx) * inv
						  : 0.0f;
		}
		st_act<V>(r + j0, x);
	}
}

static int row_vec8(const void *p, int s)
{
	return s % 8 == 0 && aligned16(p);
}

template <int V>
static void softmax_rows_v(act_t *probs, size_t rows, int s, float scale, int fused)
{
	warp_launch<8>(fused ? attn_softmax_kernel<true, V> : attn_softmax_kernel<false, V>, rows,
		       probs, rows, s, scale);
}

static void softmax_rows(act_t *probs, size_t rows, int s, float scale, int fused)
{
	if (row_vec8(probs, s))
		softmax_rows_v<8>(probs, rows, s, scale, fused);
	else
		softmax_rows_v<1>(probs, rows, s, scale, fused);
}

void lbc_attn_naive_fwd(void *out, void *probs, void *scratch, const void *qkv, int b, int s,
			int nh, int nkv, int d)
{
	act_t *p = (act_t *)probs;
	size_t n = (size_t)b * nh * s * s;
	float scale = (float)(1.0 / sqrt((double)d));
	int v8 = row_vec8(p, s);

	(void)scratch; /* the scores are written into probs and normalised there */
	if (n == 0)
		return;
	scores_gemm(p, (const act_t *)qkv, b, s, nh, nkv, d);
	if (v8)
		attn_scale_kernel<8>
		    <<<lbc_blocks(n / 8, 256), 256, 0, lbc_stream()>>>(p, n / 8, scale);
	else
		attn_scale_kernel<1><<<lbc_blocks(n, 256), 256, 0, lbc_stream()>>>(p, n, scale);
	LBC_LAUNCHED();
	if (v8)
		attn_mask_kernel<8><<<lbc_blocks(n / 8, 256), 256, 0, lbc_stream()>>>(p, n / 8, s);
	else
		attn_mask_kernel<1><<<lbc_blocks(n, 256), 256, 0, lbc_stream()>>>(p, n, s);
	LBC_LAUNCHED();
	softmax_rows(p, (size_t)b * nh * s, s, 1.0f, 0);
	pv_gemm((act_t *)out, p, (const act_t *)qkv, b, s, nh, nkv, d);
}

void lbc_attn_fused_fwd(void *out, void *probs, const void *qkv, int b, int s, int nh, int nkv,
			int d)
{
	act_t *p = (act_t *)probs;

	if ((size_t)b * nh * s == 0)
		return;
	scores_gemm(p, (const act_t *)qkv, b, s, nh, nkv, d);
	softmax_rows(p, (size_t)b * nh * s, s, (float)(1.0 / sqrt((double)d)), 1);
	pv_gemm((act_t *)out, p, (const act_t *)qkv, b, s, nh, nkv, d);
}

/* ------------------------------------------------------------------------------------------
 * Backward from saved probabilities (naive, fused_softmax). Per sequence bb, group position
 * jj and chunk of kv heads [kv0, kv0 + nc) (query heads h = kvh*g + jj): dP = dO V^T into the
 * scratch (bf16, one (S, S) block per head), dS = P * (dP - rowsum(dP * P)) in place, then
 * dQ = scale * dS K, dK (+)= scale * dS^T Q, dV (+)= P^T dO straight into dqkv (beta = 0 for
 * jj = 0, 1 after: the sum over the group). nc is as many heads as the scratch holds.
 * ------------------------------------------------------------------------------------------ */

/*
 * One warp per row r of the dP blocks of a chunk (rows = nc*S; head kv0 + r/S, row i = r % S):
 * c = sum_{j<=i} P[i,j] dP[i,j], then dS[i,j] = P (dP - c) for j <= i and 0 above the diagonal
 * (where P is 0), written over dP. fp32 math; V as in the softmax.
 */
template <int V>
static __global__ void __launch_bounds__(256)
    attn_dsoftmax_kernel(act_t *dp, const act_t *probs, size_t rows, int s, int nh, int g, int bb,
			 int kv0, int jj)
{
	size_t r = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	int lane = threadIdx.x & 31;

	if (r >= rows)
		return;
	int hc = (int)(r / s), i = (int)(r % s), h = (kv0 + hc) * g + jj, n = i + 1;
	const act_t *pr = probs + (((size_t)bb * nh + h) * s + i) * s;
	act_t *dr = dp + r * s;
	float c = 0.0f;

	for (int j0 = lane * V; j0 < n; j0 += 32 * V) {
		float pv[V], dv[V];

		ld_act<V>(pv, pr + j0);
		ld_act<V>(dv, dr + j0);
#pragma unroll
		for (int k = 0; k < V; k++)
			if (j0 + k < n)
				c += pv[k] * dv[k];
	}
	c = warp_sum(c);
	for (int j0 = lane * V; j0 < s; j0 += 32 * V) {
		float pv[V], dv[V];

		if (j0 >= n) {
#pragma unroll
			for (int k = 0; k < V; k++)
				dv[k] = 0.0f;
		} else {
			ld_act<V>(pv, pr + j0);
			ld_act<V>(dv, dr + j0);
#pragma unroll
			for (int k = 0; k < V; k++)
				dv[k] = j0 + k < n ? pv[k] * (dv[k] - c) : 0.0f;
		}
		st_act<V>(dr + j0, dv);
	}
}

void lbc_attn_probs_bwd(void *dqkv, void *scratch, const void *dout, const void *probs,
			const void *qkv, int b, int s, int nh, int nkv, int d)
{
	act_t *dq = (act_t *)dqkv, *dp = (act_t *)scratch;
	const act_t *dO = (const act_t *)dout, *p = (const act_t *)probs, *x = (const act_t *)qkv;
	int g = nh / nkv;
	long long ld = (long long)(nh + 2 * nkv) * d, ldo = (long long)nh * d,
		  ss = (long long)s * s;
	float scale = (float)(1.0 / sqrt((double)d));
	/* heads whose (S, S) bf16 dP block fits in the scratch (lbc_attn_scratch: at least 1) */
	size_t cap = lbc_attn_scratch(b, s, nh, d) * 2 / (size_t)ss;
	int nc = cap < (size_t)nkv ? (int)cap : nkv;
	int v8 = s % 8 == 0 && aligned16(dp) && aligned16(p);

	if ((size_t)b * nh * s == 0)
		return;
	for (int bb = 0; bb < b; bb++) {
		const act_t *xr = x + (size_t)bb * s * ld, *dOr = dO + (size_t)bb * s * ldo;
		act_t *dqr = dq + (size_t)bb * s * ld;

		for (int jj = 0; jj < g; jj++) {
			float beta = jj ? 1.0f : 0.0f;

			for (int kv0 = 0; kv0 < nkv; kv0 += nc) {
				int n = nkv - kv0 < nc ? nkv - kv0 : nc, h0 = kv0 * g + jj;
				size_t rows = (size_t)n * s;
				const act_t *pr = p + ((size_t)bb * nh + h0) * ss;

				/* dP_h (S, S) = dO_h (S, D) V_kvh^T */
				lbc_gemm(dp, 0, dOr + (size_t)h0 * d,
					 xr + (size_t)(nh + nkv + kv0) * d, s, s, d, 0, 1, ldo, ld,
					 s, (long long)g * d, d, ss, n, 1.0f, 0.0f);
				warp_launch<8>(v8 ? attn_dsoftmax_kernel<8>
						  : attn_dsoftmax_kernel<1>,
					       rows, dp, p, rows, s, nh, g, bb, kv0, jj);
				/* dQ_h = scale * dS_h K_kvh (each query head once: beta 0) */
				lbc_gemm(dqr + (size_t)h0 * d, 0, dp, xr + (size_t)(nh + kv0) * d,
					 s, d, s, 0, 0, s, ld, ld, ss, d, (long long)g * d, n,
					 scale, 0.0f);
				/* dK_kvh (+)= scale * dS_h^T Q_h */
				lbc_gemm(dqr + (size_t)(nh + kv0) * d, 0, dp, xr + (size_t)h0 * d,
					 s, d, s, 1, 0, s, ld, ld, ss, (long long)g * d, d, n,
					 scale, beta);
				/* dV_kvh (+)= P_h^T dO_h */
				lbc_gemm(dqr + (size_t)(nh + nkv + kv0) * d, 0, pr,
					 dOr + (size_t)h0 * d, s, d, s, 1, 0, s, ldo, ld,
					 (long long)g * ss, (long long)g * d, d, n, 1.0f, beta);
			}
		}
	}
}


/*
 * Scratch floats, one size for every variant (the model allocates one buffer per shape):
 *   flash backward: dq_acc, B*S*nh*D (the fp32 dQ accumulator), then delta, B*nh*S;
 *   probs backward: dP / dS of a chunk of heads as bf16, (S, S) per head; a chunk holds
 *     min(nkv, floor(2 * size / (S*S))) heads, and the size is at least ceil(S*S/2) (one);
 *   forwards: none.
 * size = max(B*S*nh*D + B*nh*S, ceil(S*S/2)): a flash run carries no (B, nh, S, S) buffer,
 * and the probs backward batches as many heads per GEMM as that room allows (at S = 2048,
 * nh = 40, D = 128: 5 heads at B = 1, all 40 from B = 8).
 */
size_t lbc_attn_scratch(int b, int s, int nh, int d)
{
	size_t flash = (size_t)b * s * nh * d + (size_t)b * nh * s;
	size_t dp = ((size_t)s * s + 1) / 2;

	return flash > dp ? flash : dp;
}

