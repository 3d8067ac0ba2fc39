/*
 * The CPU reference ops, written once over a `REAL` element type and instantiated by
 * harness/ops_cpu.c in float (the trainer's CPU backend) and double (gradient checks in
 * the tests: the same code, tight enough to catch a wrong index). The includer defines
 * REAL, FN(name) (a name suffix per instantiation), EXP (expf or exp: the attention's
 * exponentials in the element type) and OPS_NAME. Every function is static;
 * the table at the end is FN(table). Reductions along a row (norms, softmax sums, dot
 * products of the attention) accumulate in double in both instantiations. No allocation
 * inside an op: scratch comes from the caller.
 */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* --- memory: a counting allocator with a cap on live bytes (--mem-limit) --- */

static struct {
	uint64_t limit, live, peak;
} FN(mem);

#define HDR 64 /* header holding the size; keeps 64-byte alignment of the data */

/* Bytes per element of each kind (ops.h's table): the reference type, doubles for the step
 * accumulators, int32 token ids. */
static const size_t FN(esz)[LB_NKINDS] = {sizeof(REAL), sizeof(REAL), sizeof(double),
					  sizeof(int32_t)};

static void *FN(alloc)(size_t n, enum lb_kind k)
{
	size_t es = FN(esz)[k], bytes = n * es;
	unsigned char *p;

	if (n && bytes / n != es)
		return NULL;
	if (FN(mem).limit && FN(mem).live + bytes > FN(mem).limit)
		return NULL;
	if (posix_memalign((void **)&p, HDR, bytes + HDR))
		return NULL;
	memset(p + HDR, 0, bytes);
	memcpy(p, &bytes, sizeof(bytes));
	FN(mem).live += bytes;
	if (FN(mem).live > FN(mem).peak)
		FN(mem).peak = FN(mem).live;
	return p + HDR;
}

static void FN(free_)(void *q)
{
	unsigned char *p = q;
	size_t bytes;

	if (!p)
		return;
	p -= HDR;
	memcpy(&bytes, p, sizeof(bytes));
	FN(mem).live -= bytes;
	free(p);
}

static void FN(zero)(void *p, size_t n, enum lb_kind k)
{
	memset(p, 0, n * FN(esz)[k]);
}

static void FN(copy)(void *dst, const void *src, size_t n, enum lb_kind k)
{
	memcpy(dst, src, n * FN(esz)[k]);
}

/* Element i of a buffer of kind k as a double (k: ACT, F32, F64 or I32). */
static double FN(get)(const void *p, size_t i, enum lb_kind k)
{
	if (k == LB_K_F64)
		return ((const double *)p)[i];
	if (k == LB_K_I32)
		return ((const int32_t *)p)[i];
	return ((const REAL *)p)[i];
}

static void FN(set)(void *p, size_t i, enum lb_kind k, double x)
{
	if (k == LB_K_F64)
		((double *)p)[i] = x;
	else if (k == LB_K_I32)
		((int32_t *)p)[i] = (int32_t)x;
	else
		((REAL *)p)[i] = (REAL)x;
}

static void FN(cast)(void *dst, enum lb_kind dk, const void *src, enum lb_kind sk, size_t n)
{
	for (size_t i = 0; i < n; i++)
		FN(set)(dst, i, dk, FN(get)(src, i, sk));
}

static void FN(write)(void *dst, const double *src, size_t n, enum lb_kind k)
{
	for (size_t i = 0; i < n; i++)
		FN(set)(dst, i, k, src[i]);
}

static void FN(read)(double *dst, const void *src, size_t n, enum lb_kind k)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = FN(get)(src, i, k);
}

static void FN(fill_normal)(void *p, size_t n, enum lb_kind k, uint64_t seed, int key, double std)
{
	for (size_t i = 0; i < n; i++)
		FN(set)(p, i, k, std * lb_normal_at(seed, key, i));
}

static void FN(write_i32)(int32_t *dst, const int32_t *src, size_t n)
{
	memcpy(dst, src, n * sizeof(*src));
}

static void FN(set_mem_limit)(uint64_t bytes)
{
	FN(mem).limit = bytes;
}

static void FN(mem_stats)(uint64_t *live, uint64_t *peak)
{
	if (live)
		*live = FN(mem).live;
	if (peak)
		*peak = FN(mem).peak;
}

static void FN(reset_peak)(void)
{
	FN(mem).peak = FN(mem).live;
}

/* --- matmul --- */

/* C += alpha * A B^T, A (M, K), B (N, K): B is transposed block by block into a stack
 * tile so the inner loop runs along C's rows (axpy, vectorizable) as in the NN case. */
#define MM_TILE 64

static void FN(mm_nt)(REAL *c, const REAL *a, const REAL *b, int m, int n, int k, REAL alpha)
{
	REAL bt[MM_TILE][MM_TILE]; /* (p, j) tile of B^T */

	for (int j0 = 0; j0 < n; j0 += MM_TILE) {
		int nj = n - j0 < MM_TILE ? n - j0 : MM_TILE;

		for (int p0 = 0; p0 < k; p0 += MM_TILE) {
			int np = k - p0 < MM_TILE ? k - p0 : MM_TILE;

			for (int jj = 0; jj < nj; jj++)
				for (int pp = 0; pp < np; pp++)
					bt[pp][jj] = b[(size_t)(j0 + jj) * k + p0 + pp];
			for (int i = 0; i < m; i++) {
				REAL *ci = c + (size_t)i * n + j0;
				const REAL *ai = a + (size_t)i * k + p0;

				for (int pp = 0; pp < np; pp++) {
					REAL x = alpha * ai[pp];
					const REAL *bp = bt[pp];

					for (int jj = 0; jj < nj; jj++)
						ci[jj] += x * bp[jj];
				}
			}
		}
	}
}
#undef MM_TILE

static void FN(matmul)(void *cv, const void *av, const void *bv, int m, int n, int k, int ta,
		       int tb, double alpha_d, int accumulate, int c_f32)
{
	REAL *c = cv;
	const REAL *a = av, *b = bv;
	REAL alpha = (REAL)alpha_d;

	if (!accumulate)
		memset(c, 0, (size_t)m * n * sizeof(REAL));
	if (!ta && tb) {
		FN(mm_nt)(c, a, b, m, n, k, alpha);
	} else if (!ta && !tb) { /* C[i,:] += A[i,p] B[p,:] */
		for (int i = 0; i < m; i++) {
			REAL *ci = c + (size_t)i * n;

			for (int p = 0; p < k; p++) {
				REAL x = alpha * a[(size_t)i * k + p];
				const REAL *bp = b + (size_t)p * n;

				for (int j = 0; j < n; j++)
					ci[j] += x * bp[j];
			}
		}
	} else if (ta && !tb) { /* C[i,:] += A[p,i] B[p,:] */
		for (int p = 0; p < k; p++) {
			const REAL *ap = a + (size_t)p * m, *bp = b + (size_t)p * n;

			for (int i = 0; i < m; i++) {
				REAL x = alpha * ap[i];
				REAL *ci = c + (size_t)i * n;

				for (int j = 0; j < n; j++)
					ci[j] += x * bp[j];
			}
		}
	} else { /* C[i,j] += A[p,i] B[j,p] */
		for (int i = 0; i < m; i++)
			for (int j = 0; j < n; j++) {
				REAL s = 0;

				for (int p = 0; p < k; p++)
					s += a[(size_t)p * m + i] * b[(size_t)j * k + p];
				c[(size_t)i * n + j] += alpha * s;
			}
	}
}

/* --- RMSNorm --- */

static void FN(rmsnorm_fwd)(void *yv, void *rstdv, const void *xv, const void *wv, int t, int h)
{
	REAL *y = yv, *rstd = rstdv;
	const REAL *x = xv, *w = wv;

	for (int i = 0; i < t; i++) {
		const REAL *xi = x + (size_t)i * h;
		REAL *yi = y + (size_t)i * h;
		double ss = 0;

		for (int j = 0; j < h; j++)
			ss += (double)xi[j] * xi[j];
		REAL r = (REAL)(1.0 / sqrt(ss / h + LB_RMS_EPS));
		for (int j = 0; j < h; j++)
			yi[j] = xi[j] * r * w[j];
		rstd[i] = r;
	}
}

static void FN(rmsnorm_bwd)(void *dxv, void *dwv, const void *dyv, const void *xv, const void *wv,
			    const void *rstdv, int t, int h)
{
	REAL *dx = dxv, *dw = dwv;
	const REAL *dy = dyv, *x = xv, *w = wv, *rstd = rstdv;

	for (int i = 0; i < t; i++) {
		const REAL *xi = x + (size_t)i * h, *dyi = dy + (size_t)i * h;
		REAL *dxi = dx + (size_t)i * h;
		REAL r = rstd[i];
		double dot = 0;

		for (int j = 0; j < h; j++) {
			REAL xhat = xi[j] * r;

			dot += (double)(dyi[j] * w[j]) * xhat;
			dw[j] += dyi[j] * xhat;
		}
		REAL c = (REAL)(dot / h);
		for (int j = 0; j < h; j++)
			dxi[j] += r * (dyi[j] * w[j] - xi[j] * r * c);
	}
}

static void FN(rmsnorm_unfused_fwd)(void *yv, void *xhatv, void *rstdv, void *scratch,
				    const void *xv, const void *wv, int t, int h)
{
	REAL *y = yv, *xhat = xhatv, *rstd = rstdv;
	REAL *sq = scratch, *ms = sq + (size_t)t * h;
	const REAL *x = xv, *w = wv;
	size_t n = (size_t)t * h;

	for (size_t e = 0; e < n; e++) /* pass 1: square */
		sq[e] = x[e] * x[e];
	for (int i = 0; i < t; i++) { /* pass 2: mean */
		double s = 0;

		for (int j = 0; j < h; j++)
			s += sq[(size_t)i * h + j];
		ms[i] = (REAL)(s / h);
	}
	for (int i = 0; i < t; i++) /* pass 3: rsqrt */
		rstd[i] = (REAL)(1.0 / sqrt((double)ms[i] + LB_RMS_EPS));
	for (int i = 0; i < t; i++) /* pass 4: scale */
		for (int j = 0; j < h; j++)
			xhat[(size_t)i * h + j] = x[(size_t)i * h + j] * rstd[i];
	for (int i = 0; i < t; i++) /* pass 5: weight */
		for (int j = 0; j < h; j++)
			y[(size_t)i * h + j] = xhat[(size_t)i * h + j] * w[j];
}

static void FN(rmsnorm_unfused_bwd)(void *dxv, void *dwv, const void *dyv, const void *xhatv,
				    const void *wv, const void *rstdv, void *scratch, int t, int h)
{
	REAL *dx = dxv, *dw = dwv, *dxhat = scratch, *c = dxhat + (size_t)t * h;
	const REAL *dy = dyv, *xhat = xhatv, *w = wv, *rstd = rstdv;

	for (int i = 0; i < t; i++) /* pass 1: through the weight */
		for (int j = 0; j < h; j++)
			dxhat[(size_t)i * h + j] = dy[(size_t)i * h + j] * w[j];
	for (int i = 0; i < t; i++) /* pass 2: weight gradient */
		for (int j = 0; j < h; j++)
			dw[j] += dy[(size_t)i * h + j] * xhat[(size_t)i * h + j];
	for (int i = 0; i < t; i++) { /* pass 3: mean(dxhat * xhat) */
		double s = 0;

		for (int j = 0; j < h; j++)
			s += (double)dxhat[(size_t)i * h + j] * xhat[(size_t)i * h + j];
		c[i] = (REAL)(s / h);
	}
	for (int i = 0; i < t; i++) /* pass 4: input gradient */
		for (int j = 0; j < h; j++) {
			size_t e = (size_t)i * h + j;

			dx[e] += rstd[i] * (dxhat[e] - xhat[e] * c[i]);
		}
}

/* --- RoPE --- */

static void FN(rope)(void *xv, const void *csv, int t, int s, int stride, int nheads, int d,
		     REAL sign)
{
	REAL *x = xv;
	const REAL *cs = csv;

	for (int i = 0; i < t; i++) {
		const REAL *c = cs + (size_t)(i % s) * d;

		for (int hh = 0; hh < nheads; hh++) {
			REAL *v = x + (size_t)i * stride + (size_t)hh * d;

			for (int p = 0; p < d / 2; p++) {
				REAL co = c[2 * p], si = sign * c[2 * p + 1];
				REAL a = v[2 * p], b = v[2 * p + 1];

				v[2 * p] = a * co - b * si;
				v[2 * p + 1] = a * si + b * co;
			}
		}
	}
}

static void FN(rope_fwd)(void *x, const void *cs, int t, int s, int stride, int nheads, int d)
{
	FN(rope)(x, cs, t, s, stride, nheads, d, 1);
}

static void FN(rope_bwd)(void *dx, const void *cs, int t, int s, int stride, int nheads, int d)
{
	FN(rope)(dx, cs, t, s, stride, nheads, d, -1);
}

/* --- attention --- */

/* Dot product in double with four partial sums (a fixed order: deterministic; four
 * independent chains instead of one). */
static REAL FN(dot)(const REAL *a, const REAL *b, int d)
{
	double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	int i = 0;

	for (; i + 4 <= d; i += 4) {
		s0 += (double)a[i] * b[i];
		s1 += (double)a[i + 1] * b[i + 1];
		s2 += (double)a[i + 2] * b[i + 2];
		s3 += (double)a[i + 3] * b[i + 3];
	}
	for (; i < d; i++)
		s0 += (double)a[i] * b[i];
	return (REAL)((s0 + s1) + (s2 + s3));
}

#define QKV_Q(qkv, b, s, i, hq, nh, nkv, d)                                                        \
	((qkv) + ((size_t)(b) * (s) + (i)) * ((nh) + 2 * (nkv)) * (d) + (size_t)(hq) * (d))
#define QKV_K(qkv, b, s, j, hk, nh, nkv, d)                                                        \
	((qkv) + ((size_t)(b) * (s) + (j)) * ((nh) + 2 * (nkv)) * (d) + (size_t)((nh) + (hk)) * (d))
#define QKV_V(qkv, b, s, j, hk, nh, nkv, d)                                                        \
	((qkv) + ((size_t)(b) * (s) + (j)) * ((nh) + 2 * (nkv)) * (d) +                            \
	 (size_t)((nh) + (nkv) + (hk)) * (d))
#define OUT_ROW(out, b, s, i, hq, nh, d)                                                           \
	((out) + ((size_t)(b) * (s) + (i)) * (nh) * (d) + (size_t)(hq) * (d))

/* P V for one head: out_i = sum_j<=i P[i,j] v_j. */
static void FN(attn_pv)(REAL *out, const REAL *p, const REAL *qkv, int bb, int s, int hq, int nh,
			int nkv, int d)
{
	int hk = hq / (nh / nkv);

	for (int i = 0; i < s; i++) {
		REAL *o = OUT_ROW(out, bb, s, i, hq, nh, d);

		memset(o, 0, (size_t)d * sizeof(REAL));
		for (int j = 0; j <= i; j++) {
			const REAL *v = QKV_V(qkv, bb, s, j, hk, nh, nkv, d);
			REAL pij = p[(size_t)i * s + j];

			for (int e = 0; e < d; e++)
				o[e] += pij * v[e];
		}
	}
}

/* Raw scores q.k for one head, every (i, j) as an eager framework's batched GEMM. */
static void FN(attn_scores)(REAL *sc, const REAL *qkv, int bb, int s, int hq, int nh, int nkv,
			    int d)
{
	int hk = hq / (nh / nkv);

	for (int i = 0; i < s; i++)
		for (int j = 0; j < s; j++)
			sc[(size_t)i * s + j] = FN(dot)(QKV_Q(qkv, bb, s, i, hq, nh, nkv, d),
							QKV_K(qkv, bb, s, j, hk, nh, nkv, d), d);
}

static void FN(attn_naive_fwd)(void *outv, void *probsv, void *scratch, const void *qkvv, int b,
			       int s, int nh, int nkv, int d)
{
	REAL *out = outv, *probs = probsv, *sc = scratch;
	const REAL *qkv = qkvv;
	REAL scale = (REAL)(1.0 / sqrt((double)d));
	size_t ss = (size_t)s * s;

	for (int bb = 0; bb < b; bb++)
		for (int hq = 0; hq < nh; hq++) {
			REAL *p = probs + ((size_t)bb * nh + hq) * ss;

			FN(attn_scores)(sc, qkv, bb, s, hq, nh, nkv, d);
			for (size_t e = 0; e < ss; e++) /* pass: scale */
				sc[e] *= scale;
			for (int i = 0; i < s; i++) /* pass: causal mask */
				for (int j = i + 1; j < s; j++)
					sc[(size_t)i * s + j] = -INFINITY;
			for (int i = 0; i < s; i++) { /* pass: softmax into probs */
				const REAL *r = sc + (size_t)i * s;
				REAL mx = -INFINITY;
				double z = 0;

				for (int j = 0; j < s; j++)
					mx = r[j] > mx ? r[j] : mx;
				for (int j = 0; j < s; j++) {
					p[(size_t)i * s + j] = EXP(r[j] - mx);
					z += p[(size_t)i * s + j];
				}
				for (int j = 0; j < s; j++)
					p[(size_t)i * s + j] = (REAL)(p[(size_t)i * s + j] / z);
			}
			FN(attn_pv)(out, p, qkv, bb, s, hq, nh, nkv, d);
		}
}

static void FN(attn_fused_fwd)(void *outv, void *probsv, const void *qkvv, int b, int s, int nh,
			       int nkv, int d)
{
	REAL *out = outv, *probs = probsv;
	const REAL *qkv = qkvv;
	double scale = 1.0 / sqrt((double)d);
	size_t ss = (size_t)s * s;

	for (int bb = 0; bb < b; bb++)
		for (int hq = 0; hq < nh; hq++) {
			REAL *p = probs + ((size_t)bb * nh + hq) * ss;

			FN(attn_scores)(p, qkv, bb, s, hq, nh, nkv, d);
			for (int i = 0; i < s; i++) { /* one pass: scale, mask, softmax */
				REAL *r = p + (size_t)i * s;
				double mx = -INFINITY, z = 0;

				for (int j = 0; j <= i; j++)
					mx = r[j] * scale > mx ? r[j] * scale : mx;
				for (int j = 0; j <= i; j++) {
					r[j] = EXP((REAL)(r[j] * scale - mx));
					z += r[j];
				}
				for (int j = 0; j <= i; j++)
					r[j] = (REAL)(r[j] / z);
				for (int j = i + 1; j < s; j++)
					r[j] = 0;
			}
			FN(attn_pv)(out, p, qkv, bb, s, hq, nh, nkv, d);
		}
}

/* Backward through P V and the softmax from saved probabilities (naive, fused_softmax). */
static void FN(attn_probs_bwd)(void *dqkvv, void *scratch, const void *doutv, const void *probsv,
			       const void *qkvv, int b, int s, int nh, int nkv, int d)
{
	REAL *dqkv = dqkvv, *dp = scratch;
	const REAL *dout = doutv, *probs = probsv, *qkv = qkvv;
	REAL scale = (REAL)(1.0 / sqrt((double)d));
	size_t ss = (size_t)s * s;

	memset(dqkv, 0, (size_t)b * s * (nh + 2 * nkv) * d * sizeof(REAL));
	for (int bb = 0; bb < b; bb++)
		for (int hq = 0; hq < nh; hq++) {
			const REAL *p = probs + ((size_t)bb * nh + hq) * ss;
			int hk = hq / (nh / nkv);

			for (int i = 0; i < s; i++) { /* dP = dO V^T, dV += P^T dO */
				const REAL *doi = OUT_ROW(dout, bb, s, i, hq, nh, d);

				for (int j = 0; j <= i; j++) {
					REAL *dv = QKV_V(dqkv, bb, s, j, hk, nh, nkv, d);
					REAL pij = p[(size_t)i * s + j];

					dp[(size_t)i * s + j] =
					    FN(dot)(doi, QKV_V(qkv, bb, s, j, hk, nh, nkv, d), d);
					for (int e = 0; e < d; e++)
						dv[e] += pij * doi[e];
				}
			}
			for (int i = 0; i < s; i++) { /* softmax backward, then dQ, dK */
				REAL *dpi = dp + (size_t)i * s;
				const REAL *pi = p + (size_t)i * s;
				REAL *dq = QKV_Q(dqkv, bb, s, i, hq, nh, nkv, d);
				const REAL *q = QKV_Q(qkv, bb, s, i, hq, nh, nkv, d);
				double c = 0;

				for (int j = 0; j <= i; j++)
					c += (double)pi[j] * dpi[j];
				for (int j = 0; j <= i; j++) {
					REAL ds = pi[j] * (dpi[j] - (REAL)c) * scale;
					const REAL *k = QKV_K(qkv, bb, s, j, hk, nh, nkv, d);
					REAL *dk = QKV_K(dqkv, bb, s, j, hk, nh, nkv, d);

					for (int e = 0; e < d; e++) {
						dq[e] += ds * k[e];
						dk[e] += ds * q[e];
					}
				}
			}
		}
}

#define FLASH_BC 32 /* keys per tile */

static void FN(attn_flash_fwd)(void *outv, void *lsev, void *scratch, const void *qkvv, int b,
			       int s, int nh, int nkv, int d)
{
	REAL *out = outv, *lse = lsev, *sc = scratch;
	const REAL *qkv = qkvv;
	double scale = 1.0 / sqrt((double)d);

	for (int bb = 0; bb < b; bb++)
		for (int hq = 0; hq < nh; hq++) {
			int hk = hq / (nh / nkv);

			for (int i = 0; i < s; i++) {
				const REAL *q = QKV_Q(qkv, bb, s, i, hq, nh, nkv, d);
				REAL *o = OUT_ROW(out, bb, s, i, hq, nh, d);
				double m = -INFINITY, l = 0;

				memset(o, 0, (size_t)d * sizeof(REAL));
				for (int j0 = 0; j0 <= i; j0 += FLASH_BC) { /* key tiles */
					int j1 = j0 + FLASH_BC <= i + 1 ? j0 + FLASH_BC : i + 1;
					double mt = m;

					for (int j = j0; j < j1; j++) {
						sc[j - j0] = (REAL)(FN(dot)(q,
									    QKV_K(qkv, bb, s, j, hk,
										  nh, nkv, d),
									    d) *
								    scale);
						mt = sc[j - j0] > mt ? sc[j - j0] : mt;
					}
					REAL corr = EXP((REAL)(m - mt));
					l *= corr;
					for (int e = 0; e < d; e++)
						o[e] *= corr;
					for (int j = j0; j < j1; j++) {
						REAL p = EXP((REAL)(sc[j - j0] - mt));
						const REAL *v =
						    QKV_V(qkv, bb, s, j, hk, nh, nkv, d);

						l += p;
						for (int e = 0; e < d; e++)
							o[e] += p * v[e];
					}
					m = mt;
				}
				for (int e = 0; e < d; e++)
					o[e] = (REAL)(o[e] / l);
				lse[((size_t)bb * nh + hq) * s + i] = (REAL)(m + log(l));
			}
		}
}

/* dq += ds k; dk += ds q; dv += p dout: three disjoint rows (restrict: no alias checks). */
static void FN(axpy3)(REAL *restrict dq, REAL *restrict dk, REAL *restrict dv,
		      const REAL *restrict k, const REAL *restrict q, const REAL *restrict dout,
		      REAL ds, REAL p, int d)
{
	for (int e = 0; e < d; e++) {
		dq[e] += ds * k[e];
		dk[e] += ds * q[e];
		dv[e] += p * dout[e];
	}
}

static void FN(attn_flash_bwd)(void *dqkvv, void *scratch, const void *doutv, const void *outv,
			       const void *lsev, const void *qkvv, int b, int s, int nh, int nkv,
			       int d)
{
	REAL *dqkv = dqkvv;
	const REAL *dout = doutv, *out = outv, *lse = lsev, *qkv = qkvv;
	double scale = 1.0 / sqrt((double)d);

	memset(dqkv, 0, (size_t)b * s * (nh + 2 * nkv) * d * sizeof(REAL));
	for (int bb = 0; bb < b; bb++)
		for (int hq = 0; hq < nh; hq++) {
			int hk = hq / (nh / nkv);

			for (int i = 0; i < s; i++) {
				const REAL *q = QKV_Q(qkv, bb, s, i, hq, nh, nkv, d);
				const REAL *doi = OUT_ROW(dout, bb, s, i, hq, nh, d);
				REAL *dq = QKV_Q(dqkv, bb, s, i, hq, nh, nkv, d);
				REAL di = FN(dot)(doi, OUT_ROW(out, bb, s, i, hq, nh, d), d);
				double l = lse[((size_t)bb * nh + hq) * s + i];

				for (int j = 0; j <= i; j++) { /* recompute p from the lse */
					const REAL *k = QKV_K(qkv, bb, s, j, hk, nh, nkv, d);
					const REAL *v = QKV_V(qkv, bb, s, j, hk, nh, nkv, d);
					REAL *dk = QKV_K(dqkv, bb, s, j, hk, nh, nkv, d);
					REAL *dv = QKV_V(dqkv, bb, s, j, hk, nh, nkv, d);
					REAL p = EXP((REAL)(FN(dot)(q, k, d) * scale - l));
					REAL ds = p * (FN(dot)(doi, v, d) - di) * (REAL)scale;

					FN(axpy3)(dq, dk, dv, k, q, doi, ds, p, d);
				}
			}
		}
}

/* --- SwiGLU --- */

static void FN(swiglu_fwd)(void *outv, const void *guv, int t, int f)
{
	REAL *out = outv;
	const REAL *gu = guv;

	for (int i = 0; i < t; i++)
		for (int j = 0; j < f; j++) {
			REAL g = gu[(size_t)i * 2 * f + j], u = gu[(size_t)i * 2 * f + f + j];
			REAL sig = (REAL)(1.0 / (1.0 + exp(-(double)g)));

			out[(size_t)i * f + j] = g * sig * u;
		}
}

static void FN(swiglu_bwd)(void *dguv, const void *doutv, const void *guv, int t, int f)
{
	REAL *dgu = dguv;
	const REAL *dout = doutv, *gu = guv;

	for (int i = 0; i < t; i++)
		for (int j = 0; j < f; j++) {
			REAL g = gu[(size_t)i * 2 * f + j], u = gu[(size_t)i * 2 * f + f + j];
			REAL sig = (REAL)(1.0 / (1.0 + exp(-(double)g)));
			REAL dy = dout[(size_t)i * f + j];

			dgu[(size_t)i * 2 * f + j] = dy * u * sig * (1 + g * (1 - sig));
			dgu[(size_t)i * 2 * f + f + j] = dy * g * sig;
		}
}

/* --- embedding --- */

static void FN(embed_fwd)(void *outv, const void *tablev, const int32_t *tokens, int t, int h,
			  int v0, int v)
{
	REAL *out = outv;
	const REAL *table = tablev;

	memset(out, 0, (size_t)t * h * sizeof(REAL)); /* the rows of other shards' tokens */
	for (int i = 0; i < t; i++) {
		int r = tokens[i] - v0;

		if (r >= 0 && r < v)
			memcpy(out + (size_t)i * h, table + (size_t)r * h,
			       (size_t)h * sizeof(REAL));
	}
}

static void FN(embed_bwd)(void *dtablev, const void *doutv, const int32_t *tokens, int t, int h,
			  int v0, int v)
{
	REAL *dtable = dtablev;
	const REAL *dout = doutv;

	for (int i = 0; i < t; i++) {
		int r = tokens[i] - v0;

		if (r < 0 || r >= v)
			continue;
		for (int j = 0; j < h; j++)
			dtable[(size_t)r * h + j] += dout[(size_t)i * h + j];
	}
}

/* --- cross-entropy --- */

static void FN(xent_max)(void *rowmaxv, const void *logitsv, int t, int v)
{
	REAL *rowmax = rowmaxv;
	const REAL *logits = logitsv;

	for (int i = 0; i < t; i++) {
		REAL mx = -INFINITY;

		for (int j = 0; j < v; j++)
			mx = logits[(size_t)i * v + j] > mx ? logits[(size_t)i * v + j] : mx;
		rowmax[i] = mx;
	}
}

static void FN(xent_sum)(void *sumexpv, void *tgtv, const void *logitsv, const void *rowmaxv,
			 const int32_t *targets, int t, int v, int v0)
{
	REAL *sumexp = sumexpv, *tgt = tgtv;
	const REAL *logits = logitsv, *rowmax = rowmaxv;

	for (int i = 0; i < t; i++) {
		const REAL *r = logits + (size_t)i * v;
		double z = 0;
		int c = targets[i] - v0;

		for (int j = 0; j < v; j++)
			z += exp((double)(r[j] - rowmax[i]));
		sumexp[i] = (REAL)z;
		tgt[i] = (c >= 0 && c < v) ? r[c] : 0;
	}
}

static void FN(xent_grad)(void *logitsv, void *lossesv, const void *rowmaxv, const void *sumexpv,
			  const void *tgtv, const int32_t *targets, int t, int v, int v0,
			  double scale)
{
	REAL *logits = logitsv, *losses = lossesv;
	const REAL *rowmax = rowmaxv, *sumexp = sumexpv, *tgt = tgtv;

	for (int i = 0; i < t; i++) {
		REAL *r = logits + (size_t)i * v;
		double z = sumexp[i];
		int c = targets[i] - v0;

		losses[i] = (REAL)(log(z) + rowmax[i] - tgt[i]);
		for (int j = 0; j < v; j++)
			r[j] = (REAL)(scale * (exp((double)(r[j] - rowmax[i])) / z - (j == c)));
	}
}

/* --- AdamW --- */

static void FN(adamw)(void *paramv, void *masterv, const void *gradv, void *mv, void *vv, size_t n,
		      double lr, double b1, double b2, double eps, double wd, int step,
		      double grad_scale)
{
	REAL *param = paramv, *master = masterv, *m = mv, *v = vv;
	const REAL *grad = gradv;
	double c1 = 1.0 - pow(b1, step), c2 = 1.0 - pow(b2, step);

	for (size_t i = 0; i < n; i++) {
		double g = (double)grad[i] * grad_scale;
		double mi = b1 * m[i] + (1 - b1) * g, vi = b2 * v[i] + (1 - b2) * g * g;
		double w = master[i];

		w -= lr * ((mi / c1) / (sqrt(vi / c2) + eps) + wd * w);
		m[i] = (REAL)mi;
		v[i] = (REAL)vi;
		master[i] = (REAL)w;
		param[i] = (REAL)w;
	}
}

/* --- elementwise and reductions --- */

static void FN(add)(void *outv, const void *av, const void *bv, size_t n)
{
	REAL *out = outv;
	const REAL *a = av, *b = bv;

	for (size_t i = 0; i < n; i++)
		out[i] = a[i] + b[i];
}

static void FN(acc)(void *yv, const void *xv, size_t n)
{
	REAL *y = yv;
	const REAL *x = xv;

	for (size_t i = 0; i < n; i++)
		y[i] += x[i];
}

static void FN(scale)(void *xv, double s, size_t n)
{
	REAL *x = xv;

	for (size_t i = 0; i < n; i++)
		x[i] = (REAL)(x[i] * s);
}

static double FN(sum)(const void *xv, size_t n)
{
	const REAL *x = xv;
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += x[i];
	return s;
}

static double FN(sum_sq)(const void *xv, size_t n)
{
	const REAL *x = xv;
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += (double)x[i] * x[i];
	return s;
}

static void FN(sum_acc)(void *acc, const void *x, size_t n)
{
	*(double *)acc += FN(sum)(x, n);
}

static void FN(sum_sq_acc)(void *acc, const void *x, size_t n)
{
	*(double *)acc += FN(sum_sq)(x, n);
}

/* --- ordering and time: the CPU runs each op to its end, so events are timestamps --- */

static void *FN(stream)(void)
{
	return NULL;
}

static void FN(sync)(void) {}

static void *FN(event_create)(void)
{
	return calloc(1, sizeof(double));
}

static void FN(event_destroy)(void *ev)
{
	free(ev);
}

static void FN(event_record)(void *ev)
{
	*(double *)ev = lb_now_s();
}

/* one stream: the side and p2p streams are the same (NULL), waits are no-ops */
static void *FN(side_stream)(void)
{
	return NULL;
}

static void *FN(p2p_stream)(void)
{
	return NULL;
}

static void FN(use_stream)(void *s)
{
	(void)s;
}

static void FN(wait_event)(void *ev)
{
	(void)ev;
}

static double FN(event_elapsed)(void *a, void *b)
{
	return *(double *)b - *(double *)a;
}

static size_t FN(attn_scratch)(int b, int s, int nh, int d)
{
	return (size_t)s * s;
}

static size_t FN(norm_scratch)(int t, int h)
{
	return (size_t)t * h + t;
}

static void FN(device_info)(struct lb_device_info *info)
{
	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "cpu");
}

static const struct lb_ops FN(table) = {
    .name = OPS_NAME,
    .esize = {sizeof(REAL), sizeof(REAL), sizeof(double), sizeof(int32_t)},
    .dtype = {OPS_DTYPE, OPS_DTYPE, LB_F64, LB_I32},
    .init = NULL,
    .device_info = FN(device_info),
    .alloc = FN(alloc),
    .free_ = FN(free_),
    .zero = FN(zero),
    .copy = FN(copy),
    .cast = FN(cast),
    .write = FN(write),
    .read = FN(read),
    .write_i32 = FN(write_i32),
    .fill_normal = FN(fill_normal),
    .stream = FN(stream),
    .sync = FN(sync),
    .event_create = FN(event_create),
    .event_destroy = FN(event_destroy),
    .event_record = FN(event_record),
    .event_elapsed = FN(event_elapsed),
    .side_stream = FN(side_stream),
    .p2p_stream = FN(p2p_stream),
    .use_stream = FN(use_stream),
    .wait_event = FN(wait_event),
    .attn_scratch = FN(attn_scratch),
    .norm_scratch = FN(norm_scratch),
    .set_mem_limit = FN(set_mem_limit),
    .mem_stats = FN(mem_stats),
    .reset_peak = FN(reset_peak),
    .matmul = FN(matmul),
    .rmsnorm_fwd = FN(rmsnorm_fwd),
    .rmsnorm_bwd = FN(rmsnorm_bwd),
    .rmsnorm_unfused_fwd = FN(rmsnorm_unfused_fwd),
    .rmsnorm_unfused_bwd = FN(rmsnorm_unfused_bwd),
    .rope_fwd = FN(rope_fwd),
    .rope_bwd = FN(rope_bwd),
    .attn_naive_fwd = FN(attn_naive_fwd),
    .attn_fused_fwd = FN(attn_fused_fwd),
    .attn_probs_bwd = FN(attn_probs_bwd),
    .attn_flash_fwd = FN(attn_flash_fwd),
    .attn_flash_bwd = FN(attn_flash_bwd),
    .swiglu_fwd = FN(swiglu_fwd),
    .swiglu_bwd = FN(swiglu_bwd),
    .embed_fwd = FN(embed_fwd),
    .embed_bwd = FN(embed_bwd),
    .xent_max = FN(xent_max),
    .xent_sum = FN(xent_sum),
    .xent_grad = FN(xent_grad),
    .adamw = FN(adamw),
    .add = FN(add),
    .acc = FN(acc),
    .scale = FN(scale),
    .sum_acc = FN(sum_acc),
    .sum_sq_acc = FN(sum_sq_acc),
    .sum = FN(sum),
    .sum_sq = FN(sum_sq),
};

#undef HDR
#undef QKV_Q
#undef QKV_K
#undef QKV_V
#undef OUT_ROW
#undef FLASH_BC
