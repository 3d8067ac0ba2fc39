/*
 * Unit tests of the CUDA backend of the ops table (harness/cuda/) against the CPU fp64
 * reference (lb_ops_cpu_f64): every op of the table on random inputs with fixed seeds, at
 * the tiny test-model shapes (hidden 64, heads of dim 8, 16, 64 and 128, sequences of 16 to
 * 256 tokens including lengths that are no tile multiple, grouped-query attention, vocab
 * shards with v0 > 0) and one medium shape (hidden 512, 512 tokens). Inputs are generated
 * in double and rounded on the host to the element type of the kind they enter (bf16 for
 * act, fp32 for f32), so both backends compute on the same values and the reference is
 * exact arithmetic on them; a GPU value passes when it lies within an error bound derived,
 * per op, from where the GPU may round (see "Tolerances" below). Every comparison prints
 * its max abs and max rel error. Backward ops are checked in isolation (the reference is
 * given the GPU's saved forward tensors) and, for attention, also end to end, where the
 * flash and naive paths must agree. The binary skips (exit 77, the reason on the last
 * line) in a build without the CUDA backend or on a machine without a usable GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/ops.h"
#include "harness/optim.h"
#ifdef LB_WITH_CUDA
#include "bench/cuda_bench.h"
#endif

/*
 * Tolerances. A GPU value g passes against the reference r (fp64 on the same rounded
 * inputs) when, elementwise,
 *	|g - r| <= atol + MARGIN * eps * mag + rtol * |r|
 * the brief's mixed |g - r| <= atol + rtol |r| with an atol that may vary per element:
 *  - rtol covers the rounding of the output itself: MARGIN * U for a bf16 output
 *    (U = 2^-8, the unit roundoff of bf16's 8 significant bits), a few E for fp32 ones
 *    (E = 2^-24), plus U for each bf16 intermediate the op may keep;
 *  - mag is a magnitude of the terms the op sums for that element, e.g. (|A| |B|)_ij for a
 *    matmul, and eps the relative error the GPU may commit on them before the final
 *    rounding: (K + 2) E for an fp32 sum of K terms in any order (Higham, Accuracy and
 *    Stability of Numerical Algorithms, 2nd ed. 2002, eq. 3.5 and sec. 4.2:
 *    |fl(sum x_i) - sum x_i| <= gamma_{K-1} sum |x_i|), plus U for each bf16 intermediate
 *    (a probability, a score, dS fed to a tensor-core product) since its rounding error
 *    U |term| is carried through the rest of the sum.
 * MARGIN = 2 covers the second-order terms the bounds drop. The bounds are worst cases; the
 * "err/tol" column printed by each check shows how much of the bound was used.
 */
#define U_BF16 0.00390625	     /* 2^-8 */
#define E_F32  5.9604644775390625e-8 /* 2^-24 */
#define MARGIN 2.0

static const struct lb_ops *G; /* the CUDA backend */
static const struct lb_ops *R; /* the fp64 CPU reference */

/* --- random numbers (fixed seeds) and bf16 rounding --- */

static uint64_t rng_state;

static void seed(uint64_t s)
{
	rng_state = s * 0x9E3779B97F4A7C15ULL + 12345;
}

static double urand(void) /* [-1, 1) */
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return ((rng_state >> 11) / 9007199254740992.0) * 2.0 - 1.0;
}

static int irand(int n) /* [0, n) */
{
	int r = (int)((urand() + 1.0) * 0.5 * n);

	return r < n ? r : n - 1;
}

#define BF16_MAX 0x1.fep127 /* (2 - 2^-7) 2^127 */

/* x rounded to the nearest bf16 (8 significant bits, fp32's exponent range), ties to even,
 * directly from double (no double rounding through float): the spacing of bf16 numbers
 * near x is q = 2^(e-7) for |x| in [2^e, 2^(e+1)), 2^-133 among the subnormals below
 * 2^-126, and x / q is exact, so nearbyint (the default mode: to nearest, ties to even)
 * rounds it correctly. What __double2bfloat16 and __float2bfloat16_rn compute. */
static double bf16_round(double x)
{
	int e;
	double q, r;

	if (x == 0 || !isfinite(x))
		return x;
	e = ilogb(x);
	q = ldexp(1.0, (e < -126 ? -126 : e) - 7);
	r = nearbyint(x / q) * q;
	return fabs(r) > BF16_MAX ? copysign(INFINITY, x) : r;
}

/* x as the backend under test stores it in a buffer of kind k (ACT, F32 or F64): bf16,
 * fp32 or fp64 by the kind's element size. */
static double round_kind(enum lb_kind k, double x)
{
	size_t es = G->esize[k];

	return es == 2 ? bf16_round(x) : es == 4 ? (double)(float)x : x;
}

static const char *kind_name(enum lb_kind k)
{
	return k == LB_K_ACT ? "act" : k == LB_K_F32 ? "f32" : k == LB_K_F64 ? "f64" : "i32";
}

/* --- memory held by a test case: host arrays and backend buffers, freed by release() --- */

#define HOLD_MAX 512

static struct {
	const struct lb_ops *o; /* NULL: host memory */
	void *p;
} held[HOLD_MAX];
static int nheld;

static void *hold(const struct lb_ops *o, void *p)
{
	assert_non_null(p);
	assert_true(nheld < HOLD_MAX);
	held[nheld].o = o;
	held[nheld].p = p;
	nheld++;
	return p;
}

static void release(void)
{
	while (nheld > 0) {
		nheld--;
		if (held[nheld].o)
			held[nheld].o->free_(held[nheld].p);
		else
			free(held[nheld].p);
	}
}

static double *hnew(size_t n)
{
	return hold(NULL, calloc(n ? n : 1, sizeof(double)));
}

/* n values uniform in [-scale, scale), rounded to kind k's type. */
static double *hrand(size_t n, double scale, enum lb_kind k)
{
	double *v = hnew(n);

	for (size_t i = 0; i < n; i++)
		v[i] = round_kind(k, urand() * scale);
	return v;
}

static double amax(const double *v, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++)
		m = fabs(v[i]) > m ? fabs(v[i]) : m;
	return m;
}

/* f * mag, elementwise (a per-element atol). */
static double *scaled(const double *mag, size_t n, double f)
{
	double *v = hnew(n);

	for (size_t i = 0; i < n; i++)
		v[i] = f * mag[i];
	return v;
}

/* A buffer allocated on both backends with the same kind and, when h, the same contents. */
struct bp {
	void *g, *r;
	size_t n;
	enum lb_kind k;
};

static struct bp bp_new(const double *h, size_t n, enum lb_kind k)
{
	struct bp b = {hold(G, G->alloc(n, k)), hold(R, R->alloc(n, k)), n, k};

	if (h) {
		G->write(b.g, h, n, k);
		R->write(b.r, h, n, k);
	}
	return b;
}

/* Token ids on both backends (i32 backend memory, written with write_i32). */
static struct bp bp_tok(const int32_t *tok, size_t n)
{
	struct bp b = {hold(G, G->alloc(n, LB_K_I32)), hold(R, R->alloc(n, LB_K_I32)), n, LB_K_I32};

	G->write_i32(b.g, tok, n);
	R->write_i32(b.r, tok, n);
	return b;
}

static double *bp_gpu(const struct bp *b)
{
	double *h = hnew(b->n);

	G->read(h, b->g, b->n, b->k);
	return h;
}

static double *bp_ref(const struct bp *b)
{
	double *h = hnew(b->n);

	R->read(h, b->r, b->n, b->k);
	return h;
}

/* The reference's copy := the GPU's values (so a backward is checked on its own). */
static void bp_g2r(const struct bp *b)
{
	R->write(b->r, bp_gpu(b), b->n, b->k);
}

/* A buffer of the reference alone, holding h. */
static void *ref_up(const double *h, size_t n)
{
	void *p = hold(R, R->alloc(n, LB_K_F32));

	R->write(p, h, n, LB_K_F32);
	return p;
}

/* --- the comparison --- */

static char label_buf[4][192];
static int label_next;

/* A printf-formatted label (four live at a time). */
static const char *say(const char *fmt, ...)
{
	char *s = label_buf[label_next++ % 4];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s, sizeof(label_buf[0]), fmt, ap);
	va_end(ap);
	return s;
}

/*
 * got against ref, n elements: pass when |got - ref| <= atol + atolv[e] + rtol |ref|
 * (atolv may be NULL; NaN fails). Prints one line: the max abs error, the max rel error
 * (over elements with |ref| >= 1e-3 max |ref|, so that near-zero ones do not swamp it)
 * and the largest error/tolerance ratio; on failure also the first few failing elements.
 * Returns 1 when some element failed, else 0.
 */
static int check(const char *what, const double *got, const double *ref, size_t n, double atol,
		 const double *atolv, double rtol)
{
	double big = amax(ref, n), maxabs = 0, maxrel = 0, worst = 0;
	size_t bad = 0;

	for (size_t e = 0; e < n; e++) {
		double d = fabs(got[e] - ref[e]);
		double tol = atol + (atolv ? atolv[e] : 0) + rtol * fabs(ref[e]);

		if (!(d <= maxabs))
			maxabs = d;
		if (fabs(ref[e]) > 0 && fabs(ref[e]) >= 1e-3 * big && !(d / fabs(ref[e]) <= maxrel))
			maxrel = d / fabs(ref[e]);
		if (tol > 0 && !(d / tol <= worst))
			worst = d / tol;
		if (!(d <= tol)) {
			if (bad < 4)
				print_message("    %s: element %zu: gpu %.9g, reference %.9g, "
					      "tolerance %.3g\n",
					      what, e, got[e], ref[e], tol);
			bad++;
		}
	}
	print_message("  %-54s n %8zu  max abs %.2e  max rel %.2e  err/tol %.3f%s\n", what, n,
		      maxabs, maxrel, worst, bad ? "  FAIL" : "");
	if (bad)
		print_message("    %s: %zu of %zu elements outside the tolerance\n", what, bad, n);
	return bad != 0;
}

/* check() of a buffer pair: the GPU's contents against the reference's. */
static int cmp(const char *what, const struct bp *b, double atol, const double *atolv, double rtol)
{
	return check(what, bp_gpu(b), bp_ref(b), b->n, atol, atolv, rtol);
}

/* --- the bf16 helper itself --- */

static void test_bf16_round(void **state)
{
	(void)state;
	assert_true(bf16_round(1.0) == 1.0);
	/* ties go to the even neighbour: 1 + 2^-8 to 1, 1 + 3 2^-8 to 1 + 2^-6 */
	assert_true(bf16_round(1.0 + ldexp(1, -8)) == 1.0);
	assert_true(bf16_round(1.0 + 3 * ldexp(1, -8)) == 1.0 + ldexp(1, -6));
	assert_true(bf16_round(1.0 + ldexp(1, -8) + ldexp(1, -30)) == 1.0 + ldexp(1, -7));
	assert_true(bf16_round(-3.14159) == -3.140625);
	assert_true(bf16_round(BF16_MAX) == BF16_MAX);
	assert_true(isinf(bf16_round(3.4e38)));
	/* subnormals: 2^-130 is exact, 0.75 and 0.25 of the spacing 2^-133 round to 1 and 0 */
	assert_true(bf16_round(ldexp(1, -130)) == ldexp(1, -130));
	assert_true(bf16_round(ldexp(3, -135)) == ldexp(1, -133));
	assert_true(bf16_round(ldexp(1, -135)) == 0);
}

/* --- memory: transfers, zero, copy, cast; the allocator's counters; events --- */

static void test_transfers_zero_copy(void **state)
{
	static const enum lb_kind kinds[] = {LB_K_ACT, LB_K_F32, LB_K_F64};
	struct lb_device_info info;
	size_t n = 1003;
	int bad = 0;

	(void)state;
	memset(&info, 0, sizeof(info));
	if (G->device_info) {
		G->device_info(&info);
		print_message("  device: %s, %d SMs, %.1f GiB, cc %d.%d, driver '%s', runtime "
			      "'%s', '%s'\n",
			      info.name, info.sm_count, info.mem_bytes / 1073741824.0,
			      info.cc_major, info.cc_minor, info.driver, info.runtime, info.libs);
	}
	seed(1);
	for (int i = 0; i < 3; i++) {
		enum lb_kind k = kinds[i];
		double *h = hrand(n, 3, k), *back = hnew(n), *z = hnew(n);
		void *p = hold(G, G->alloc(n, k)), *q = hold(G, G->alloc(n, k));

		/* values of the kind's type come back exactly */
		G->write(p, h, n, k);
		G->read(back, p, n, k);
		bad += check(say("write/read %s", kind_name(k)), back, h, n, 0, NULL, 0);
		G->copy(q, p, n, k);
		G->read(back, q, n, k);
		bad += check(say("copy %s", kind_name(k)), back, h, n, 0, NULL, 0);
		G->zero(p, n, k);
		G->read(back, p, n, k);
		bad += check(say("zero %s", kind_name(k)), back, z, n, 0, NULL, 0);
	}
	/* cast: exactly the rounding of round_kind (to nearest even); from f64 to act the
	 * rounding through fp32 (double rounding) is accepted as well */
	for (int si = 0; si < 3; si++)
		for (int di = 0; di < 3; di++) {
			enum lb_kind sk = kinds[si], dk = kinds[di];
			double *h = hrand(n, 3, sk), *want = hnew(n), *back = hnew(n);
			void *src = hold(G, G->alloc(n, sk)), *dst = hold(G, G->alloc(n, dk));

			G->write(src, h, n, sk);
			G->write(dst, hrand(n, 5, dk), n, dk);
			G->cast(dst, dk, src, sk, n);
			G->read(back, dst, n, dk);
			for (size_t e = 0; e < n; e++) {
				want[e] = round_kind(dk, h[e]);
				if (sk == LB_K_F64 && dk == LB_K_ACT &&
				    back[e] == bf16_round((double)(float)h[e]))
					want[e] = back[e];
			}
			bad += check(say("cast %s -> %s", kind_name(sk), kind_name(dk)), back, want,
				     n, 0, NULL, 0);
		}
	release();
	assert_int_equal(bad, 0);
}

static void test_allocator_counters(void **state)
{
	/* sizes in units of 2^20 elements of each kind */
	uint64_t live0, live, peak, sf = G->esize[LB_K_F32] << 20, sa = G->esize[LB_K_ACT] << 20;
	uint64_t sd = G->esize[LB_K_F64] << 20;
	void *p, *q, *r;

	(void)state;
	release();
	G->set_mem_limit(0);
	G->reset_peak();
	G->mem_stats(&live0, &peak);
	assert_true(peak == live0);
	print_message("  allocator: %llu bytes live at the start (the backend's own buffers)\n",
		      (unsigned long long)live0);
	p = G->alloc(1u << 20, LB_K_F32); /* 4 MiB on the GPU */
	assert_non_null(p);
	G->mem_stats(&live, &peak);
	assert_true(live == live0 + sf && peak == live);
	q = G->alloc(3u << 20, LB_K_ACT); /* 6 MiB */
	assert_non_null(q);
	G->free_(q);
	G->mem_stats(&live, &peak);
	assert_true(live == live0 + sf && peak == live0 + sf + 3 * sa);
	G->reset_peak();
	G->mem_stats(&live, &peak);
	assert_true(peak == live);

	/* a cap of one 2^20-element f64 buffer above what is live: more is refused and
	 * changes nothing, exactly that much is allowed (the limit is on going above it),
	 * then one more element is refused */
	G->set_mem_limit(live + sd);
	r = G->alloc((1u << 20) + 1, LB_K_F64);
	assert_null(r);
	G->mem_stats(&live, &peak);
	assert_true(live == live0 + sf && peak == live);
	r = G->alloc(1u << 20, LB_K_F64);
	assert_non_null(r);
	assert_null(G->alloc(1, LB_K_I32));
	G->free_(r);
	G->set_mem_limit(0);
	G->free_(p);
	G->mem_stats(&live, &peak);
	assert_true(live == live0 && peak == live0 + sf + sd);
	G->reset_peak();
}

/* The allocator's counters against the device's own account (cudaMemGetInfo): 1 GiB of
 * buffers in several sizes must move the device's used memory by their counted bytes,
 * within 64 MiB (cudaMalloc rounds each buffer up to its 2 MiB pages, and the driver may
 * reserve a little on the side). A counter that missed a buffer or counted one twice is
 * off by far more. Only where the device can be asked (the CUDA backend). */
static void test_allocator_vs_device(void **state)
{
#ifdef LB_WITH_CUDA
	uint64_t live0, live1, peak;
	double used0, used1, counted, seen;
	void *p[8];
	size_t sizes[8] = {128u << 20, 64u << 20, 32u << 20, 16u << 20,
			   8u << 20,   3u << 20,  1u << 20,  (1u << 20) + 12345};

	(void)state;
	if (strcmp(G->name, "cuda"))
		skip();
	release();
	G->sync();
	G->mem_stats(&live0, &peak);
	used0 = lb_cuda_mem_used();
	assert_true(used0 > 0);
	for (int i = 0; i < 8; i++) {
		p[i] = G->alloc(sizes[i], i % 2 ? LB_K_ACT : LB_K_F32);
		assert_non_null(p[i]);
	}
	G->sync();
	G->mem_stats(&live1, &peak);
	used1 = lb_cuda_mem_used();
	counted = (double)(live1 - live0);
	seen = used1 - used0;
	print_message("  allocator: %.1f MiB counted, %.1f MiB seen by the device\n",
		      counted / 1048576, seen / 1048576);
	assert_true(counted > 500.0 * 1048576);
	assert_true(fabs(seen - counted) <= 64.0 * 1048576);
	for (int i = 0; i < 8; i++)
		G->free_(p[i]);
	G->mem_stats(&live1, &peak);
	assert_true(live1 == live0);
#else
	(void)state;
	skip();
#endif
}

static void test_events(void **state)
{
	int n = 1024;
	void *a = G->event_create(), *b = G->event_create();
	struct bp x, y, c;
	double s;

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	seed(2);
	x = bp_new(hrand((size_t)n * n, 1, LB_K_ACT), (size_t)n * n, LB_K_ACT);
	y = bp_new(hrand((size_t)n * n, 1, LB_K_ACT), (size_t)n * n, LB_K_ACT);
	c = bp_new(NULL, (size_t)n * n, LB_K_ACT);
	G->matmul(c.g, x.g, y.g, n, n, n, 0, 1, 1.0, 0, 0); /* warm-up: the plan is made */
	G->event_record(a);
	G->matmul(c.g, x.g, y.g, n, n, n, 0, 1, 1.0, 0, 0);
	G->event_record(b);
	s = G->event_elapsed(a, b);
	print_message("  events: a 1024^3 matmul took %.1f us (%.1f TFLOP/s)\n", s * 1e6,
		      s > 0 ? 2.0 * n * n * n / s * 1e-12 : 0.0);
	assert_true(s > 0 && s < 10);
	G->sync();
	G->event_destroy(a);
	G->event_destroy(b);
	release();
}

/* --- matmul --- */

/* One matmul on both backends: A, B act, C (prefilled with random values, which must be
 * ignored unless accumulate) act or f32. Tolerance: an fp32 sum of k products of bf16
 * values (exact in fp32), alpha and the beta term: (k + 2) E on mag = |alpha| (|A| |B|) +
 * |C0|; then the rounding of C (U for bf16, E for f32). A bf16 C that is accumulated into
 * gets U |alpha A B| more: cuBLASLt rounds alpha op(A) op(B) to bf16 before it adds C (seen
 * on an H200 with CUDA 13.0 and cuBLASLt 13.1: every element was bf16(bf16(alpha A B) + C),
 * at 48x80x24 up to 1024x1024x64); the model accumulates only into f32 C. */
static int mm_case(int m, int n, int k, int ta, int tb, int cf32, double alpha, int accum)
{
	enum lb_kind ck = cf32 ? LB_K_F32 : LB_K_ACT;
	size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
	double *a, *b, *c0, *aa, *ba, *mag, *at;
	struct bp pa, pb, pc;
	void *ma;
	int bad;

	seed(((uint64_t)m * 131 + n) * 131 + k + 7 * ta + 11 * tb + 13 * cf32 + 17 * accum);
	a = hrand(na, 1, LB_K_ACT);
	b = hrand(nb, 1, LB_K_ACT);
	c0 = hrand(nc, 2, ck);
	pa = bp_new(a, na, LB_K_ACT);
	pb = bp_new(b, nb, LB_K_ACT);
	pc = bp_new(c0, nc, ck);
	G->matmul(pc.g, pa.g, pb.g, m, n, k, ta, tb, alpha, accum, cf32);
	R->matmul(pc.r, pa.r, pb.r, m, n, k, ta, tb, alpha, accum, cf32);

	aa = scaled(a, na, 1);
	ba = scaled(b, nb, 1);
	for (size_t e = 0; e < na; e++)
		aa[e] = fabs(aa[e]);
	for (size_t e = 0; e < nb; e++)
		ba[e] = fabs(ba[e]);
	ma = ref_up(scaled(c0, nc, 0), nc);
	R->matmul(ma, ref_up(aa, na), ref_up(ba, nb), m, n, k, ta, tb, fabs(alpha), 0, cf32);
	mag = hnew(nc);
	R->read(mag, ma, nc, LB_K_F32);
	for (size_t e = 0; e < nc; e++)
		mag[e] += accum ? fabs(c0[e]) : 0;
	at = scaled(mag, nc, MARGIN * (k + 2) * E_F32);
	if (accum && !cf32) {
		double *ref = bp_ref(&pc);

		for (size_t e = 0; e < nc; e++)
			at[e] += MARGIN * U_BF16 * fabs(ref[e] - c0[e]);
	}
	bad = cmp(say("matmul %dx%dx%d %s%s %s acc%d alpha %g", m, n, k, ta ? "T" : "N",
		      tb ? "T" : "N", cf32 ? "f32" : "bf16", accum, alpha),
		  &pc, 0, at, MARGIN * (cf32 ? E_F32 : U_BF16));
	release();
	return bad;
}

/* matmul_add (the projection's GEMM adding the residual stream): out = op(A) op(B) + X, all
 * bf16, against the fp64 reference of the same values. Tolerance: matmul's (k + 2) E on
 * |A| |B| + |X|, the product's rounding to bf16 before the add (U |A B|, what cuBLASLt
 * does), and the result's rounding (U); out prefilled with garbage. Also printed: how many
 * elements differ from matmul then add (the model's path without it; expected none). */
static int mma_case(int m, int n, int k, int ta, int tb)
{
	size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n, same = 0;
	double *a, *b, *x, *aa, *ba, *mag, *at, *ref, *two;
	struct bp pa, pb, px, po, pt;
	void *ma;
	int bad;

	seed(((uint64_t)m * 137 + n) * 137 + k + 7 * ta + 11 * tb);
	a = hrand(na, 1, LB_K_ACT);
	b = hrand(nb, 1, LB_K_ACT);
	x = hrand(nc, 4, LB_K_ACT);
	pa = bp_new(a, na, LB_K_ACT);
	pb = bp_new(b, nb, LB_K_ACT);
	px = bp_new(x, nc, LB_K_ACT);
	po = bp_new(hrand(nc, 100, LB_K_ACT), nc, LB_K_ACT);
	pt = bp_new(NULL, nc, LB_K_ACT);
	G->matmul_add(po.g, pa.g, pb.g, px.g, m, n, k, ta, tb);
	R->matmul(po.r, pa.r, pb.r, m, n, k, ta, tb, 1.0, 0, 0);
	R->add(po.r, po.r, px.r, nc);
	G->matmul(pt.g, pa.g, pb.g, m, n, k, ta, tb, 1.0, 0, 0); /* the unfused path */
	G->add(pt.g, pt.g, px.g, nc);

	aa = scaled(a, na, 1);
	ba = scaled(b, nb, 1);
	for (size_t e = 0; e < na; e++)
		aa[e] = fabs(aa[e]);
	for (size_t e = 0; e < nb; e++)
		ba[e] = fabs(ba[e]);
	ma = ref_up(scaled(x, nc, 0), nc);
	R->matmul(ma, ref_up(aa, na), ref_up(ba, nb), m, n, k, ta, tb, 1.0, 0, 1);
	mag = hnew(nc);
	R->read(mag, ma, nc, LB_K_F32);
	ref = bp_ref(&po);
	at = hnew(nc);
	for (size_t e = 0; e < nc; e++)
		at[e] = MARGIN * (k + 2) * E_F32 * (mag[e] + fabs(x[e])) +
			MARGIN * U_BF16 * fabs(ref[e] - x[e]);
	bad = check(say("matmul_add %dx%dx%d %s%s", m, n, k, ta ? "T" : "N", tb ? "T" : "N"),
		    bp_gpu(&po), ref, nc, 0, at, MARGIN * U_BF16);
	two = bp_gpu(&pt);
	{
		double *one = bp_gpu(&po);

		for (size_t e = 0; e < nc; e++)
			same += one[e] == two[e];
	}
	print_message("    matmul_add vs matmul then add: %zu of %zu elements equal\n", same, nc);
	release();
	return bad;
}

static void test_matmul(void **state)
{
	int bad = 0;

	(void)state;
	/* every transpose, C type, accumulate flag and two alphas at a small non-square shape */
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++)
			for (int cf32 = 0; cf32 < 2; cf32++)
				for (int acc = 0; acc < 2; acc++) {
					bad += mm_case(48, 80, 24, ta, tb, cf32, 1.0, acc);
					bad += mm_case(48, 80, 24, ta, tb, cf32, -0.375, acc);
				}
	/* the tiny model's head (V = 1000) forward and its weight gradient */
	bad += mm_case(40, 1000, 64, 0, 1, 0, 1.0, 0);
	bad += mm_case(1000, 64, 40, 1, 0, 1, 1.0, 1);
	/* the medium model (H = 512, T = 512): QKV forward, its input and weight gradients */
	bad += mm_case(512, 1536, 512, 0, 1, 0, 1.0, 0);
	bad += mm_case(512, 512, 1536, 0, 0, 0, 1.0, 0);
	bad += mm_case(1536, 512, 512, 1, 0, 1, 1.0, 1);
	bad += mm_case(512, 1536, 512, 1, 1, 1, 0.5, 0);
	/* the fused residual add of the output and down projections (N, T: x W^T) */
	if (G->matmul_add) {
		bad += mma_case(48, 80, 24, 0, 1);
		bad += mma_case(512, 512, 1536, 0, 1);
		bad += mma_case(40, 64, 128, 0, 0);
	} else {
		print_message("  skip: backend %s has no matmul_add\n", G->name);
	}
	assert_int_equal(bad, 0);
}

/* --- RMSNorm --- */

/*
 * Forward, fused and unfused. All arithmetic is fp32 on bf16 inputs: rstd carries the fp32
 * sum of h squares and an rsqrt ((h + 8) E relative); y is rounded once (fused: U) or is
 * xhat rounded to bf16 by the contract, times w, rounded again (unfused: 2U); xhat: U.
 * Backward, each given the GPU's own saved rstd / xhat: dx = round(dx0 + inc),
 * inc = rstd (dxhat - xhat c) with a cancellation, so the fp32 error is taken on
 * mag = rstd (|dy w| + |xhat| mean |dy w xhat|) ((h + 8) E, and for the unfused passes one
 * possible bf16 rounding of inc before it is added: U), plus U |dx| for the final rounding;
 * dw (f32) = dw0 + an fp32 sum of t terms in any order (the blocks' atomics):
 * (t + 4) E on |dw0| + sum_t |dy xhat|.
 */
static int norm_case(int t, int h)
{
	size_t th = (size_t)t * h;
	double *x, *w, *dy, *rs, *xh, *magx, *magw;
	struct bp px, pw, py, prs, py2, pxh, prs2, pdy, pdx, pdw, pdx2, pdw2;
	void *scr_g, *scr_r;
	double ry = MARGIN * (U_BF16 + (h + 8) * E_F32), rr = MARGIN * (h + 8) * E_F32;
	int bad = 0;

	seed((uint64_t)t * 7919 + h);
	x = hrand(th, 2, LB_K_ACT);
	w = hnew(h);
	for (int j = 0; j < h; j++)
		w[j] = bf16_round(1 + 0.25 * urand());
	px = bp_new(x, th, LB_K_ACT);
	pw = bp_new(w, h, LB_K_ACT);
	py = bp_new(hrand(th, 5, LB_K_ACT), th, LB_K_ACT);
	prs = bp_new(hrand(t, 5, LB_K_F32), t, LB_K_F32);
	py2 = bp_new(hrand(th, 5, LB_K_ACT), th, LB_K_ACT);
	pxh = bp_new(hrand(th, 5, LB_K_ACT), th, LB_K_ACT);
	prs2 = bp_new(hrand(t, 5, LB_K_F32), t, LB_K_F32);
	scr_g = hold(G, G->alloc(G->norm_scratch(t, h), LB_K_F32));
	scr_r = hold(R, R->alloc(R->norm_scratch(t, h), LB_K_F32));

	G->rmsnorm_fwd(py.g, prs.g, px.g, pw.g, t, h);
	R->rmsnorm_fwd(py.r, prs.r, px.r, pw.r, t, h);
	bad += cmp(say("rmsnorm fused fwd y t%d h%d", t, h), &py, 0, NULL, ry);
	bad += cmp(say("rmsnorm fused fwd rstd t%d h%d", t, h), &prs, 0, NULL, rr);
	G->rmsnorm_unfused_fwd(py2.g, pxh.g, prs2.g, scr_g, px.g, pw.g, t, h);
	R->rmsnorm_unfused_fwd(py2.r, pxh.r, prs2.r, scr_r, px.r, pw.r, t, h);
	bad += cmp(say("rmsnorm unfused fwd y t%d h%d", t, h), &py2, 0, NULL, ry + MARGIN * U_BF16);
	bad += cmp(say("rmsnorm unfused fwd xhat t%d h%d", t, h), &pxh, 0, NULL, ry);
	bad += cmp(say("rmsnorm unfused fwd rstd t%d h%d", t, h), &prs2, 0, NULL, rr);

	/* backward: dx and dw accumulate into random contents */
	dy = hrand(th, 1, LB_K_ACT);
	pdy = bp_new(dy, th, LB_K_ACT);
	pdx = bp_new(hrand(th, 1, LB_K_ACT), th, LB_K_ACT);
	pdw = bp_new(hrand(h, 4, LB_K_F32), h, LB_K_F32);
	pdx2 = bp_new(bp_ref(&pdx), th, LB_K_ACT);
	pdw2 = bp_new(bp_ref(&pdw), h, LB_K_F32);
	bp_g2r(&prs);
	bp_g2r(&prs2);
	bp_g2r(&pxh);
	for (int unf = 0; unf < 2; unf++) {
		double *dw0 = bp_ref(unf ? &pdw2 : &pdw);

		rs = bp_ref(unf ? &prs2 : &prs);
		xh = unf ? bp_ref(&pxh) : hnew(th);
		magx = hnew(th);
		magw = hnew(h);
		for (int i = 0; i < t; i++) {
			double cabs = 0;

			for (int j = 0; j < h; j++) {
				size_t e = (size_t)i * h + j;

				if (!unf)
					xh[e] = x[e] * rs[i];
				cabs += fabs(dy[e] * w[j] * xh[e]) / h;
				magw[j] += fabs(dy[e] * xh[e]);
			}
			for (int j = 0; j < h; j++) {
				size_t e = (size_t)i * h + j;

				magx[e] = rs[i] * (fabs(dy[e] * w[j]) + fabs(xh[e]) * cabs);
			}
		}
		for (int j = 0; j < h; j++)
			magw[j] += fabs(dw0[j]);
		if (unf) {
			G->rmsnorm_unfused_bwd(pdx2.g, pdw2.g, pdy.g, pxh.g, pw.g, prs2.g, scr_g, t,
					       h);
			R->rmsnorm_unfused_bwd(pdx2.r, pdw2.r, pdy.r, pxh.r, pw.r, prs2.r, scr_r, t,
					       h);
		} else {
			G->rmsnorm_bwd(pdx.g, pdw.g, pdy.g, px.g, pw.g, prs.g, t, h);
			R->rmsnorm_bwd(pdx.r, pdw.r, pdy.r, px.r, pw.r, prs.r, t, h);
		}
		bad += cmp(say("rmsnorm %s bwd dx (+=) t%d h%d", unf ? "unfused" : "fused", t, h),
			   unf ? &pdx2 : &pdx, 0,
			   scaled(magx, th, MARGIN * ((unf ? U_BF16 : 0) + (h + 8) * E_F32)),
			   MARGIN * U_BF16);
		bad +=
		    cmp(say("rmsnorm %s bwd dw (+=, f32) t%d h%d", unf ? "unfused" : "fused", t, h),
			unf ? &pdw2 : &pdw, 0, scaled(magw, h, MARGIN * (t + 4) * E_F32), 0);
	}
	release();
	return bad;
}

static void test_rmsnorm(void **state)
{
	int bad = 0;

	(void)state;
	bad += norm_case(16, 64);
	bad += norm_case(400, 64);
	bad += norm_case(512, 512);
	bad += norm_case(3, 5120); /* Llama-13B width: many threads per row */
	bad += norm_case(5, 100);  /* a width that is no multiple of a vector */
	assert_int_equal(bad, 0);
}

/* --- RoPE --- */

/*
 * In place on the q and k heads of a qkv buffer (stride (nh + 2 nkv) D, the v heads left
 * alone). Each output a c - b s (or a s + b c) is an fp32 expression of bf16 inputs and f32
 * cos/sin, rounded once: U |r|, plus 4 E max |x| for the fp32 error where it cancels.
 * Forward then backward returns x up to the two roundings: 2 U of the pair's norm.
 */
static int rope_case(int b, int s, int nh, int nkv, int d)
{
	int stride = (nh + 2 * nkv) * d, nheads = nh + nkv, t = b * s;
	size_t n = (size_t)t * stride;
	double *x, *cs, *pairn, *back;
	struct bp px, pcs;
	double at;
	int bad = 0, vchanged = 0;

	seed((uint64_t)b * 1000003 + s * 1009 + nh * 31 + nkv * 7 + d);
	x = hrand(n, 1.5, LB_K_ACT);
	cs = lb_rope_table_host(s, d);
	assert_non_null(cs);
	hold(NULL, cs);
	for (size_t e = 0; e < (size_t)s * d; e++)
		cs[e] = round_kind(LB_K_F32, cs[e]);
	px = bp_new(x, n, LB_K_ACT);
	pcs = bp_new(cs, (size_t)s * d, LB_K_F32);
	at = MARGIN * 4 * E_F32 * amax(x, n);

	G->rope_fwd(px.g, pcs.g, t, s, stride, nheads, d);
	R->rope_fwd(px.r, pcs.r, t, s, stride, nheads, d);
	bad += cmp(say("rope fwd b%d s%d nh%d kv%d d%d", b, s, nh, nkv, d), &px, at, NULL,
		   MARGIN * U_BF16);
	back = bp_gpu(&px);
	for (int i = 0; i < t; i++) /* the v heads are not touched */
		for (int e = nheads * d; e < stride; e++)
			vchanged += back[(size_t)i * stride + e] != x[(size_t)i * stride + e];
	if (vchanged)
		print_message("    rope fwd: %d elements of the v heads changed\n", vchanged);
	bad += vchanged != 0;

	bp_g2r(&px); /* the backward on the GPU's rotated values */
	G->rope_bwd(px.g, pcs.g, t, s, stride, nheads, d);
	R->rope_bwd(px.r, pcs.r, t, s, stride, nheads, d);
	bad += cmp(say("rope bwd b%d s%d nh%d kv%d d%d", b, s, nh, nkv, d), &px, at, NULL,
		   MARGIN * U_BF16);
	pairn = hnew(n);
	for (int i = 0; i < t; i++)
		for (int e = 0; e < nheads * d; e += 2) {
			size_t o = (size_t)i * stride + e;
			double r = hypot(x[o], x[o + 1]);

			pairn[o] = pairn[o + 1] = MARGIN * 2 * U_BF16 * r;
		}
	bad += check(say("rope bwd(fwd(x)) = x b%d s%d nh%d kv%d d%d", b, s, nh, nkv, d),
		     bp_gpu(&px), x, n, 0, pairn, 0);
	release();
	return bad;
}

static void test_rope(void **state)
{
	int bad = 0;

	(void)state;
	bad += rope_case(1, 16, 4, 4, 16);
	bad += rope_case(2, 64, 8, 4, 8);
	bad += rope_case(2, 200, 4, 4, 16);
	bad += rope_case(1, 200, 8, 4, 64);
	bad += rope_case(1, 256, 8, 4, 128);
	bad += rope_case(2, 256, 8, 8, 64); /* medium: H 512, T 512 */
	assert_int_equal(bad, 0);
}

/* --- attention --- */

struct attn_case {
	int b, s, nh, nkv, d;
};

/*
 * The host model of causal attention behind the bounds, from the exact softmax in double:
 * returns smax = max |q.k| / sqrt(D) over causal pairs; fills mag_out (T, nh D) with
 * sum_j p_ij |v_j| and mag_dqkv (T, (nh + 2 nkv) D) with, for dQ, scale sum_j |dS|_ij |k_j|,
 * for dK, scale sum_i |dS|_ij |q_i| and for dV, sum_i p_ij |dO_i| (dK and dV summed over the
 * query heads of the group), where |dS|_ij = p_ij (|dO_i|.|v_j| + sum_l p_il |dO_i|.|v_l|)
 * bounds the terms of dS_ij = p_ij (dO_i.v_j - sum_l p_il dO_i.v_l).
 */
static double attn_mags(const struct attn_case *c, const double *qkv, const double *dout,
			double *mag_out, double *mag_dqkv)
{
	int s = c->s, d = c->d, nh = c->nh, nkv = c->nkv, w = (nh + 2 * nkv) * d;
	double scale = 1 / sqrt((double)d), smax = 0;
	double *p = hnew(s), *dpa = hnew(s);

	memset(mag_out, 0, (size_t)c->b * s * nh * d * sizeof(double));
	memset(mag_dqkv, 0, (size_t)c->b * s * w * sizeof(double));
	for (int bb = 0; bb < c->b; bb++)
		for (int hq = 0; hq < nh; hq++) {
			int hk = hq / (nh / nkv);

			for (int i = 0; i < s; i++) {
				size_t ri = (size_t)bb * s + i;
				const double *q = qkv + ri * w + (size_t)hq * d;
				const double *dO = dout + ri * nh * d + (size_t)hq * d;
				double *mo = mag_out + ri * nh * d + (size_t)hq * d;
				double *mq = mag_dqkv + ri * w + (size_t)hq * d;
				double mx = -INFINITY, z = 0, cabs = 0;

				for (int j = 0; j <= i; j++) {
					const double *k =
					    qkv + ((size_t)bb * s + j) * w + (size_t)(nh + hk) * d;
					double sc = 0;

					for (int e = 0; e < d; e++)
						sc += q[e] * k[e];
					p[j] = sc * scale;
					mx = p[j] > mx ? p[j] : mx;
					smax = fabs(p[j]) > smax ? fabs(p[j]) : smax;
				}
				for (int j = 0; j <= i; j++)
					z += p[j] = exp(p[j] - mx);
				for (int j = 0; j <= i; j++) {
					const double *v = qkv + ((size_t)bb * s + j) * w +
							  (size_t)(nh + nkv + hk) * d;

					p[j] /= z;
					dpa[j] = 0;
					for (int e = 0; e < d; e++)
						dpa[j] += fabs(dO[e] * v[e]);
					cabs += p[j] * dpa[j];
				}
				for (int j = 0; j <= i; j++) {
					size_t rj = (size_t)bb * s + j;
					const double *k = qkv + rj * w + (size_t)(nh + hk) * d;
					const double *v =
					    qkv + rj * w + (size_t)(nh + nkv + hk) * d;
					double *mk = mag_dqkv + rj * w + (size_t)(nh + hk) * d;
					double *mv =
					    mag_dqkv + rj * w + (size_t)(nh + nkv + hk) * d;
					double ds = scale * p[j] * (dpa[j] + cabs);

					for (int e = 0; e < d; e++) {
						mo[e] += p[j] * fabs(v[e]);
						mq[e] += ds * fabs(k[e]);
						mk[e] += ds * fabs(q[e]);
						mv[e] += p[j] * fabs(dO[e]);
					}
				}
			}
		}
	return smax;
}

static const char *const attn_name[4] = {"naive", "fused", "flash", "cudnn"};

/*
 * One shape, the four variants (naive and fused_softmax with the probs backward, flash
 * and cuDNN's fused attention with their own; cudnn against the reference's flash, the same
 * math, and only at head dims 64 and up, what its engines are built for), on qkv with q and k in
 * [-1.5, 1.5) (scaled scores of std 0.75, a softmax peaked enough that single keys matter) and v in
 * [-1, 1). Tolerances, with eps_p the relative error of a probability as the GPU uses it: U for its
 * bf16 rounding (the saved probs; flash's P fed to the tensor-core P V), plus, for naive and fused,
 * 2 U smax for scores rounded to bf16 before the softmax (fused keeps them in the act probs buffer
 * by contract; naive may): out: eps_p on sum_j p_ij |v_j| and U |out| (the output rounding); probs:
 * eps_p relative, exactly 0 above the diagonal (the buffer is prefilled with 0.5); lse (f32): (s +
 * d + 16) E (1 + smax). Backward, given the GPU's saved tensors: 3 U on the magnitudes of attn_mags
 * (dS rounded to bf16 for the dQ, dK products, dP and its row sum possibly so) and U |r|; end to
 * end against the fp64 chain, 2 eps_p more (the forward's error, through P and D_i = dO.O). Flash
 * and naive must agree within the sum of their end-to-end tolerances.
 */
static int attn_case_run(const struct attn_case *c)
{
	int b = c->b, s = c->s, nh = c->nh, nkv = c->nkv, d = c->d, w = (nh + 2 * nkv) * d;
	size_t t = (size_t)b * s, nq = t * w, no = t * nh * d, np = (size_t)b * nh * s * s;
	size_t nl = (size_t)b * nh * s;
	double *qkv, *dout, *mag_out, *mag_dq, *out_e2e, *dq_e2e, *got_out[4], *got_dq[4];
	double *tol_out[4], *tol_dq[4], smax;
	int nv = d >= 64 ? 4 : 3;
	struct bp pq, pdo;
	void *scr_g, *scr_r, *ref_out, *ref_p, *ref_dq;
	int bad = 0;

	seed((uint64_t)b * 1000003 + s * 1009 + nh * 31 + nkv * 7 + d + 99);
	qkv = hnew(nq);
	for (size_t r = 0; r < t; r++)
		for (int e = 0; e < w; e++)
			qkv[r * w + e] = bf16_round(urand() * (e < (nh + nkv) * d ? 1.5 : 1.0));
	dout = hrand(no, 1, LB_K_ACT);
	mag_out = hnew(no);
	mag_dq = hnew(nq);
	smax = attn_mags(c, qkv, dout, mag_out, mag_dq);
	print_message("  attention b%d s%d nh%d kv%d d%d: max |scaled score| %.2f\n", b, s, nh, nkv,
		      d, smax);
	pq = bp_new(qkv, nq, LB_K_ACT);
	pdo = bp_new(dout, no, LB_K_ACT);
	scr_g = hold(G, G->alloc(G->attn_scratch(b, s, nh, d), LB_K_F32));
	scr_r = hold(R, R->alloc(R->attn_scratch(b, s, nh, d), LB_K_F32));

	/* the fp64 chain end to end: naive forward, the probs backward on its own probs */
	ref_out = hold(R, R->alloc(no, LB_K_ACT));
	ref_p = hold(R, R->alloc(np, LB_K_ACT));
	ref_dq = hold(R, R->alloc(nq, LB_K_ACT));
	R->attn_naive_fwd(ref_out, ref_p, scr_r, pq.r, b, s, nh, nkv, d);
	R->attn_probs_bwd(ref_dq, scr_r, pdo.r, ref_p, pq.r, b, s, nh, nkv, d);
	out_e2e = hnew(no);
	dq_e2e = hnew(nq);
	R->read(out_e2e, ref_out, no, LB_K_ACT);
	R->read(dq_e2e, ref_dq, nq, LB_K_ACT);

	for (int v = 0; v < nv; v++) {
		double eps_p = v < 2 ? U_BF16 * (1 + 2 * smax) : U_BF16;
		struct bp po = bp_new(hrand(no, 5, LB_K_ACT), no, LB_K_ACT);
		struct bp pdq = bp_new(hrand(nq, 5, LB_K_ACT), nq, LB_K_ACT);
		struct bp psv;
		double *e2e_at;
		char tag[64];

		snprintf(tag, sizeof(tag), "b%d s%d nh%d kv%d d%d", b, s, nh, nkv, d);
		if (v < 2) {
			double *half = hnew(np);

			for (size_t e = 0; e < np; e++)
				half[e] = 0.5;
			psv = bp_new(half, np, LB_K_ACT);
		} else {
			psv = bp_new(hrand(nl, 5, LB_K_F32), nl, LB_K_F32);
		}
		if (v == 0) {
			G->attn_naive_fwd(po.g, psv.g, scr_g, pq.g, b, s, nh, nkv, d);
			R->attn_naive_fwd(po.r, psv.r, scr_r, pq.r, b, s, nh, nkv, d);
		} else if (v == 1) {
			G->attn_fused_fwd(po.g, psv.g, pq.g, b, s, nh, nkv, d);
			R->attn_fused_fwd(po.r, psv.r, pq.r, b, s, nh, nkv, d);
		} else if (v == 2) {
			G->attn_flash_fwd(po.g, psv.g, scr_g, pq.g, b, s, nh, nkv, d);
			R->attn_flash_fwd(po.r, psv.r, scr_r, pq.r, b, s, nh, nkv, d);
		} else {
			G->attn_cudnn_fwd(po.g, psv.g, scr_g, pq.g, b, s, nh, nkv, d);
			R->attn_flash_fwd(po.r, psv.r, scr_r, pq.r, b, s, nh, nkv, d);
		}
		tol_out[v] = scaled(mag_out, no, MARGIN * (eps_p + (s + d) * E_F32));
		bad += cmp(say("attn %s fwd out %s", attn_name[v], tag), &po, 0, tol_out[v],
			   MARGIN * U_BF16);
		if (v < 2)
			bad += cmp(
			    say("attn %s fwd probs (0 above the diagonal) %s", attn_name[v], tag),
			    &psv, 1e-12, NULL, MARGIN * eps_p);
		else
			bad += cmp(say("attn %s fwd lse %s", attn_name[v], tag), &psv,
				   MARGIN * (s + d + 16) * E_F32 * (1 + smax), NULL, 0);
		got_out[v] = bp_gpu(&po);

		/* the backward on its own: the reference is given the GPU's saved tensors */
		bp_g2r(&psv);
		if (v < 2) {
			G->attn_probs_bwd(pdq.g, scr_g, pdo.g, psv.g, pq.g, b, s, nh, nkv, d);
			R->attn_probs_bwd(pdq.r, scr_r, pdo.r, psv.r, pq.r, b, s, nh, nkv, d);
		} else {
			bp_g2r(&po);
			if (v == 2)
				G->attn_flash_bwd(pdq.g, scr_g, pdo.g, po.g, psv.g, pq.g, b, s, nh,
						  nkv, d);
			else
				G->attn_cudnn_bwd(pdq.g, scr_g, pdo.g, po.g, psv.g, pq.g, b, s, nh,
						  nkv, d);
			R->attn_flash_bwd(pdq.r, scr_r, pdo.r, po.r, psv.r, pq.r, b, s, nh, nkv, d);
		}
		bad += cmp(say("attn %s bwd dqkv %s", attn_name[v], tag), &pdq, 0,
			   scaled(mag_dq, nq, MARGIN * (3 * U_BF16 + (s + d) * E_F32)),
			   MARGIN * U_BF16);
		got_dq[v] = bp_gpu(&pdq);
		e2e_at = scaled(mag_dq, nq, MARGIN * (3 * U_BF16 + 2 * eps_p + (s + d) * E_F32));
		bad += check(say("attn %s fwd+bwd dqkv vs fp64 chain %s", attn_name[v], tag),
			     got_dq[v], dq_e2e, nq, 0, e2e_at, MARGIN * U_BF16);
		/* the whole tolerance of each variant, for the agreement below */
		tol_out[v] = scaled(tol_out[v], no, 1);
		for (size_t e = 0; e < no; e++)
			tol_out[v][e] += MARGIN * U_BF16 * fabs(out_e2e[e]);
		tol_dq[v] = e2e_at;
		for (size_t e = 0; e < nq; e++)
			tol_dq[v][e] += MARGIN * U_BF16 * fabs(dq_e2e[e]);
	}
	/* flash (and cudnn) and naive agree (each within its bound of the same exact values) */
	for (int v = 2; v < nv; v++) {
		for (size_t e = 0; e < no; e++)
			tol_out[v][e] += tol_out[0][e];
		for (size_t e = 0; e < nq; e++)
			tol_dq[v][e] += tol_dq[0][e];
		bad += check(say("attn %s vs naive out b%d s%d nh%d kv%d d%d", attn_name[v], b, s,
				 nh, nkv, d),
			     got_out[v], got_out[0], no, 0, tol_out[v], 0);
		bad += check(say("attn %s vs naive dqkv b%d s%d nh%d kv%d d%d", attn_name[v], b, s,
				 nh, nkv, d),
			     got_dq[v], got_dq[0], nq, 0, tol_dq[v], 0);
	}
	release();
	return bad;
}

static void test_attention(void **state)
{
	static const struct attn_case cases[] = {
	    {1, 16, 4, 4, 16},	 /* the tiny model, one tile */
	    {2, 64, 8, 4, 8},	 /* grouped-query, head dim 8 */
	    {2, 200, 4, 4, 16},	 /* no tile multiple */
	    {1, 200, 8, 4, 64},	 /* grouped-query, no tile multiple, head dim 64 */
	    {1, 256, 8, 4, 128}, /* head dim 128 (Llama-13B's), grouped-query */
	    {2, 200, 4, 4, 128}, /* head dim 128, no tile multiple */
	    {2, 256, 8, 8, 64},	 /* medium: H 512, T 512 */
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		bad += attn_case_run(&cases[i]);
	assert_int_equal(bad, 0);
}

/* --- SwiGLU --- */

/*
 * out = silu(g) u: a product, fp32, rounded once; one bf16 intermediate (silu(g)) is
 * allowed: 2 U relative. Backward (given the same gu, dout): du = dy g sig, a product
 * (U + 16 E relative to its magnitude); dg = dy u sig (1 + g (1 - sig)) cancels where
 * g (1 - sig) = -1, so its error is taken on mag = |dy u| sig (1 + |g| (1 - sig)): one
 * possible bf16 intermediate and the fp32 exp/divide, (U + 16 E) mag, plus U |r| for the
 * output rounding.
 */
static int swiglu_case(int t, int f)
{
	size_t n2 = (size_t)t * 2 * f, n = (size_t)t * f;
	double *gu, *dy, *mag;
	struct bp pgu, pout, pdy, pdgu;
	int bad = 0;

	seed((uint64_t)t * 31337 + f);
	gu = hrand(n2, 3, LB_K_ACT);
	dy = hrand(n, 1, LB_K_ACT);
	pgu = bp_new(gu, n2, LB_K_ACT);
	pout = bp_new(hrand(n, 5, LB_K_ACT), n, LB_K_ACT);
	pdy = bp_new(dy, n, LB_K_ACT);
	pdgu = bp_new(hrand(n2, 5, LB_K_ACT), n2, LB_K_ACT);
	G->swiglu_fwd(pout.g, pgu.g, t, f);
	R->swiglu_fwd(pout.r, pgu.r, t, f);
	bad += cmp(say("swiglu fwd t%d f%d", t, f), &pout, 0, NULL,
		   MARGIN * (2 * U_BF16 + 16 * E_F32));
	G->swiglu_bwd(pdgu.g, pdy.g, pgu.g, t, f);
	R->swiglu_bwd(pdgu.r, pdy.r, pgu.r, t, f);
	mag = hnew(n2);
	for (int i = 0; i < t; i++)
		for (int j = 0; j < f; j++) {
			size_t o = (size_t)i * 2 * f + j;
			double g = gu[o], u = gu[o + f], y = dy[(size_t)i * f + j];
			double sig = 1 / (1 + exp(-g));

			mag[o] = fabs(y * u) * sig * (1 + fabs(g) * (1 - sig));
			mag[o + f] = fabs(y * g) * sig;
		}
	bad += cmp(say("swiglu bwd dgu t%d f%d", t, f), &pdgu, 0,
		   scaled(mag, n2, MARGIN * (U_BF16 + 16 * E_F32)), MARGIN * U_BF16);
	release();
	return bad;
}

static void test_swiglu(void **state)
{
	int bad = 0;

	(void)state;
	bad += swiglu_case(16, 128);
	bad += swiglu_case(400, 128);
	bad += swiglu_case(512, 1376); /* medium */
	bad += swiglu_case(7, 100);    /* no multiple of a vector */
	assert_int_equal(bad, 0);
}

/* --- embedding --- */

/*
 * A vocab shard [v0, v0 + v) with v0 > 0 and tokens below and above it (zero rows).
 * Forward: a copy, exact (the output is prefilled with random values). Backward: dtable
 * (f32) += the rows of dout, duplicates summed in fp32 in any order: (c + 1) E on
 * |dtable0| + sum |dout| for a row hit c times (c <= the most hits of any row).
 */
static int embed_case(int t, int h, int v0, int v)
{
	size_t nt = (size_t)v * h, no = (size_t)t * h;
	int32_t *tok = hold(NULL, calloc((size_t)t, sizeof(int32_t)));
	int *hits = hold(NULL, calloc((size_t)v, sizeof(int)));
	double *dt0, *dout, *mag;
	struct bp ptab, pout, ptok, pdo, pdt;
	int bad = 0, inside = 0, cmax = 0;

	seed((uint64_t)t * 7 + h * 131 + v0 * 17 + v);
	for (int i = 0; i < t; i++)
		tok[i] = irand(v0 + v + 50);
	/* the shard's edges, and one token past it and (v0 > 0) one before it */
	tok[0] = v0, tok[1] = v0 + v - 1, tok[2] = v0 + v, tok[3] = v0 > 0 ? v0 - 1 : v0 + 2 * v;
	for (int i = 0; i < t; i++) {
		if (tok[i] >= v0 && tok[i] < v0 + v) {
			inside++;
			hits[tok[i] - v0]++;
			cmax = hits[tok[i] - v0] > cmax ? hits[tok[i] - v0] : cmax;
		}
	}
	assert_true(inside > 0 && inside < t);
	ptab = bp_new(hrand(nt, 1, LB_K_ACT), nt, LB_K_ACT);
	pout = bp_new(hrand(no, 5, LB_K_ACT), no, LB_K_ACT);
	ptok = bp_tok(tok, (size_t)t);
	G->embed_fwd(pout.g, ptab.g, ptok.g, t, h, v0, v);
	R->embed_fwd(pout.r, ptab.r, ptok.r, t, h, v0, v);
	bad += cmp(
	    say("embed fwd t%d h%d v0 %d v%d (%d of the tokens in the shard)", t, h, v0, v, inside),
	    &pout, 0, NULL, 0);

	dt0 = hrand(nt, 2, LB_K_F32);
	dout = hrand(no, 1, LB_K_ACT);
	pdo = bp_new(dout, no, LB_K_ACT);
	pdt = bp_new(dt0, nt, LB_K_F32);
	G->embed_bwd(pdt.g, pdo.g, ptok.g, t, h, v0, v);
	R->embed_bwd(pdt.r, pdo.r, ptok.r, t, h, v0, v);
	mag = hnew(nt);
	for (size_t e = 0; e < nt; e++)
		mag[e] = fabs(dt0[e]);
	for (int i = 0; i < t; i++)
		if (tok[i] >= v0 && tok[i] < v0 + v)
			for (int j = 0; j < h; j++)
				mag[(size_t)(tok[i] - v0) * h + j] += fabs(dout[(size_t)i * h + j]);
	bad += cmp(say("embed bwd dtable (+=, f32) t%d h%d v0 %d v%d (a row hit up to %d times)", t,
		       h, v0, v, cmax),
		   &pdt, 0, scaled(mag, nt, MARGIN * (cmax + 1) * E_F32), 0);
	release();
	return bad;
}

static void test_embed(void **state)
{
	int bad = 0;

	(void)state;
	bad += embed_case(400, 64, 100, 256);
	bad += embed_case(16, 64, 3, 256);
	bad += embed_case(512, 512, 37, 1000); /* medium */
	/* past the backward's scan limit (8192 tokens): the grid-stride atomics */
	bad += embed_case(8200, 64, 5, 3000);
	assert_int_equal(bad, 0);
}

/* --- cross-entropy --- */

/*
 * A vocab shard [v0, v0 + v), v0 > 0 where given, targets below, inside and above it.
 * rowmax and the target logit are bf16 values carried into f32: exact. sumexp (f32): a sum
 * of v positive terms, each an fp32 exp: (v + 64) E relative. xent_grad, given the GPU's
 * statistics: losses = log(z) + m - tgt, 16 E on |log z| + |m| + |tgt|; dlogits (bf16,
 * in place) = scale (p - onehot), p an fp32 quotient of an exp (64 E absolute, p <= 1) and
 * rounded: U |r|.
 */
static int xent_case(int t, int v, int v0)
{
	size_t n = (size_t)t * v;
	int32_t *tg = hold(NULL, calloc((size_t)t, sizeof(int32_t)));
	double scale = 0.37, *lat, *se, *mx, *tl;
	struct bp plg, ptg, pmx, pse, ptl, pls;
	int bad = 0, inside = 0;
	char tag[96];

	seed((uint64_t)t * 7 + v * 131 + v0);
	for (int i = 0; i < t; i++)
		tg[i] = irand(v0 + v + v / 4);
	/* the shard's edges, and one target past it and (v0 > 0) one before it */
	tg[0] = v0, tg[1] = v0 + v - 1, tg[2] = v0 + v, tg[3] = v0 > 0 ? v0 - 1 : v0 + 2 * v;
	for (int i = 0; i < t; i++)
		inside += tg[i] >= v0 && tg[i] < v0 + v;
	snprintf(tag, sizeof(tag), "t%d v%d v0 %d (%d targets in the shard)", t, v, v0, inside);
	plg = bp_new(hrand(n, 4, LB_K_ACT), n, LB_K_ACT);
	ptg = bp_tok(tg, (size_t)t);
	pmx = bp_new(hrand(t, 5, LB_K_F32), t, LB_K_F32);
	pse = bp_new(hrand(t, 5, LB_K_F32), t, LB_K_F32);
	ptl = bp_new(hrand(t, 5, LB_K_F32), t, LB_K_F32);
	pls = bp_new(hrand(t, 5, LB_K_F32), t, LB_K_F32);

	G->xent_max(pmx.g, plg.g, t, v);
	R->xent_max(pmx.r, plg.r, t, v);
	bad += cmp(say("xent max %s", tag), &pmx, 0, NULL, 0);
	bp_g2r(&pmx);
	G->xent_sum(pse.g, ptl.g, plg.g, pmx.g, ptg.g, t, v, v0);
	R->xent_sum(pse.r, ptl.r, plg.r, pmx.r, ptg.r, t, v, v0);
	bad += cmp(say("xent sum sumexp %s", tag), &pse, 0, NULL, MARGIN * (v + 64) * E_F32);
	bad += cmp(say("xent sum target logit %s", tag), &ptl, 0, NULL, 0);
	bp_g2r(&pse);
	bp_g2r(&ptl);
	G->xent_grad(plg.g, pls.g, pmx.g, pse.g, ptl.g, ptg.g, t, v, v0, scale);
	R->xent_grad(plg.r, pls.r, pmx.r, pse.r, ptl.r, ptg.r, t, v, v0, scale);
	se = bp_ref(&pse);
	mx = bp_ref(&pmx);
	tl = bp_ref(&ptl);
	lat = hnew(t);
	for (int i = 0; i < t; i++)
		lat[i] = MARGIN * 16 * E_F32 * (fabs(log(se[i])) + fabs(mx[i]) + fabs(tl[i]));
	bad += cmp(say("xent grad losses %s", tag), &pls, 0, lat, 0);
	bad += cmp(say("xent grad dlogits %s", tag), &plg, MARGIN * 64 * E_F32 * scale, NULL,
		   MARGIN * U_BF16);
	release();
	return bad;
}

static void test_xent(void **state)
{
	int bad = 0;

	(void)state;
	bad += xent_case(400, 256, 100);
	bad += xent_case(64, 1000, 500);
	bad += xent_case(16, 256, 0);
	bad += xent_case(512, 256, 300); /* medium */
	assert_int_equal(bad, 0);
}

/* --- AdamW --- */

/*
 * Three steps (1, 2, 3) with new gradients each step. Per step and element the GPU does
 * a few fp32 operations: m, v within 4 E of their terms' magnitudes (gs |g| and (gs g)^2),
 * three steps: 12 E of those; master within 2 E |w| plus lr times the update's error
 * (mhat / (sqrt(vhat) + eps) is of order 1; 256 E of it, and its wd term), per step;
 * param = master rounded to bf16: U |r| besides.
 */
static void test_adamw(void **state)
{
	size_t n = 100003;
	double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, gs = 0.5, gmax = 0.02;
	double *master, at_master;
	struct bp pp, pmaster, pg, pm, pv;
	int bad = 0;

	(void)state;
	seed(77);
	master = hrand(n, 1, LB_K_F32);
	pp = bp_new(hrand(n, 5, LB_K_ACT), n, LB_K_ACT);
	pmaster = bp_new(master, n, LB_K_F32);
	pg = bp_new(NULL, n, LB_K_F32);
	pm = bp_new(NULL, n, LB_K_F32);
	pv = bp_new(NULL, n, LB_K_F32);
	for (int step = 1; step <= 3; step++) {
		double *g = hrand(n, gmax, LB_K_F32);

		G->write(pg.g, g, n, LB_K_F32);
		R->write(pg.r, g, n, LB_K_F32);
		G->adamw(pp.g, pmaster.g, pg.g, pm.g, pv.g, n, lr, b1, b2, eps, wd, step, gs);
		R->adamw(pp.r, pmaster.r, pg.r, pm.r, pv.r, n, lr, b1, b2, eps, wd, step, gs);
	}
	at_master = MARGIN * 3 * (2 * E_F32 * 1.1 + lr * (256 * E_F32 + wd * E_F32 * 1.1));
	bad += cmp("adamw 3 steps m", &pm, MARGIN * 12 * E_F32 * gs * gmax, NULL, 0);
	bad += cmp("adamw 3 steps v", &pv, MARGIN * 12 * E_F32 * gs * gmax * gs * gmax, NULL, 0);
	bad += cmp("adamw 3 steps master", &pmaster, at_master, NULL, 0);
	bad += check("adamw 3 steps param (bf16 of master)", bp_gpu(&pp), bp_ref(&pmaster), n,
		     at_master, NULL, MARGIN * U_BF16);
	release();
	assert_int_equal(bad, 0);
}

/*
 * AdamW with its scalars in device memory (adamw_scalars, clip_scale, adamw_dev): the same
 * bits as adamw given the same step and scale (the trainer relies on it: a step with the
 * scalars on the device equals one with them on the host), and the clip factor exactly
 * lb_optim_clip_scale's (double on both sides). Skipped where the backend has none.
 */
static void test_adamw_device_scalars(void **state)
{
	static const double sqs[] = {0, 1e-12, 0.25, 1, 1.0000001, 4, 2.5e-3, 7.3e5};
	static const double clips[] = {0, 0.5, 1, 3};
	size_t n = 100003;
	double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, sc[LB_ADAMW_SC];
	struct bp pp, pmaster, pg, pm, pv, qp, qmaster, qm, qv;
	void *dsc, *dsq;
	int bad = 0;

	(void)state;
	if (!G->adamw_dev || !G->adamw_scalars || !G->clip_scale) {
		print_message("  skip: backend %s keeps AdamW's scalars on the host\n", G->name);
		return;
	}
	seed(78);
	{
		double *p0 = hrand(n, 5, LB_K_ACT), *m0 = hrand(n, 1, LB_K_F32);

		pp = bp_new(p0, n, LB_K_ACT);
		qp = bp_new(p0, n, LB_K_ACT);
		pmaster = bp_new(m0, n, LB_K_F32);
		qmaster = bp_new(m0, n, LB_K_F32);
	}
	pg = bp_new(NULL, n, LB_K_F32);
	pm = bp_new(NULL, n, LB_K_F32);
	pv = bp_new(NULL, n, LB_K_F32);
	qm = bp_new(NULL, n, LB_K_F32);
	qv = bp_new(NULL, n, LB_K_F32);
	dsc = hold(G, G->alloc(LB_ADAMW_SC, LB_K_F64));
	dsq = hold(G, G->alloc(1, LB_K_F64));
	for (int step = 1; step <= 3; step++) {
		double gs = step == 2 ? 0.37 : 1.0;

		G->write(pg.g, hrand(n, 0.02, LB_K_F32), n, LB_K_F32);
		G->adamw(pp.g, pmaster.g, pg.g, pm.g, pv.g, n, lr, b1, b2, eps, wd, step, gs);
		G->adamw_scalars(dsc, step, b1, b2, gs);
		G->adamw_dev(qp.g, qmaster.g, pg.g, qm.g, qv.g, n, lr, b1, b2, eps, wd, dsc);
	}
	bad += check("adamw_dev vs adamw: param", bp_gpu(&qp), bp_gpu(&pp), n, 0, NULL, 0);
	bad +=
	    check("adamw_dev vs adamw: master", bp_gpu(&qmaster), bp_gpu(&pmaster), n, 0, NULL, 0);
	bad += check("adamw_dev vs adamw: m", bp_gpu(&qm), bp_gpu(&pm), n, 0, NULL, 0);
	bad += check("adamw_dev vs adamw: v", bp_gpu(&qv), bp_gpu(&pv), n, 0, NULL, 0);
	/* the scalars: c1, c2 and step as the host computes them; gs < 0 keeps sc[2] */
	G->adamw_scalars(dsc, 7, b1, b2, 0.625);
	G->adamw_scalars(dsc, 9, b1, b2, -1);
	G->read(sc, dsc, LB_ADAMW_SC, LB_K_F64);
	if (sc[0] != 1.0 - pow(b1, 9) || sc[1] != 1.0 - pow(b2, 9) || sc[2] != 0.625 ||
	    sc[3] != 9) {
		print_message("    adamw_scalars: %.17g %.17g %.17g %.17g  FAIL\n", sc[0], sc[1],
			      sc[2], sc[3]);
		bad++;
	}
	for (size_t i = 0; i < sizeof(sqs) / sizeof(sqs[0]); i++)
		for (size_t c = 0; c < sizeof(clips) / sizeof(clips[0]); c++) {
			double want = lb_optim_clip_scale(sqrt(sqs[i]), clips[c]);

			G->write(dsq, &sqs[i], 1, LB_K_F64);
			G->clip_scale(dsc, dsq, clips[c]);
			G->read(sc, dsc, LB_ADAMW_SC, LB_K_F64);
			if (sc[2] != want) {
				print_message("    clip_scale sq %.17g clip %g: %.17g, want %.17g  "
					      "FAIL\n",
					      sqs[i], clips[c], sc[2], want);
				bad++;
			}
		}
	print_message("  %-54s exact\n", "adamw_dev, adamw_scalars, clip_scale");
	release();
	assert_int_equal(bad, 0);
}

/*
 * Graph segments (graph_begin ... graph_end): a segment of adds with a pause in the middle
 * (host work there reads what the first piece wrote) and a GEMM after it, run five times
 * on new inputs each time: run as usual, captured, then replayed, and every time the same
 * values as the same ops issued without graphs; a freed buffer drops the graphs (the next
 * run captures again); a second key keeps its own graphs. Skipped where the backend has
 * no graphs.
 */
static void test_graphs(void **state)
{
	static const int want[] = {LB_GRAPH_EAGER, LB_GRAPH_CAPTURED, LB_GRAPH_REPLAYED,
				   LB_GRAPH_REPLAYED, LB_GRAPH_REPLAYED};
	char key[32] = "test segment", key2[32] = "test segment 2";
	int m = 48, k = 64, nn = 40, bad = 0;
	size_t n = (size_t)m * k;
	void *x, *y, *z, *w, *c, *c2, *spare;
	double *hx, *hy, *hz, *hc, *hc2;

	(void)state;
	if (!G->graph_begin) {
		print_message("  skip: backend %s has no graphs\n", G->name);
		return;
	}
	x = hold(G, G->alloc(n, LB_K_ACT));
	y = hold(G, G->alloc(n, LB_K_ACT));
	z = hold(G, G->alloc(n, LB_K_ACT));
	w = hold(G, G->alloc((size_t)k * nn, LB_K_ACT));
	c = hold(G, G->alloc((size_t)m * nn, LB_K_ACT));
	c2 = hold(G, G->alloc((size_t)m * nn, LB_K_ACT));
	spare = G->alloc(16, LB_K_F32);
	hy = hnew(n);
	hz = hnew(n);
	hc = hnew((size_t)m * nn);
	hc2 = hnew((size_t)m * nn);
	seed(99);
	G->write(w, hrand((size_t)k * nn, 1, LB_K_ACT), (size_t)k * nn, LB_K_ACT);
	for (int run = 0; run < 7; run++) {
		const struct lb_ops *o;
		int st, got_mid = 1;

		if (run == 5) { /* freed memory drops every graph */
			G->free_(spare);
			spare = NULL;
		}
		hx = hnew(n);
		for (size_t e = 0; e < n; e++)
			hx[e] = (irand(33) - 16) / 8.0; /* sums of these are exact in bf16 */
		G->write(x, hx, n, LB_K_ACT);
		/* the reference: the same ops, outside any segment */
		G->add(y, x, x, n);
		G->add(z, y, x, n);
		G->matmul(c2, z, w, m, nn, k, 0, 0, 1.0, 0, 0);
		G->read(hc2, c2, (size_t)m * nn, LB_K_ACT);
		G->zero(y, n, LB_K_ACT);
		G->zero(z, n, LB_K_ACT);
		G->zero(c, (size_t)m * nn, LB_K_ACT);

		o = G->graph_begin(key, sizeof(key));
		o->add(y, x, x, n);
		if (G->graph_pause() != 0) {
			print_message("    graph_pause: a rerun asked for  FAIL\n");
			bad++;
		}
		G->read(hy, y, n, LB_K_ACT); /* host work reads what the first piece wrote */
		for (size_t e = 0; e < n; e++)
			got_mid &= hy[e] == 2 * hx[e];
		G->graph_resume();
		o->add(z, y, x, n);
		o->matmul(c, z, w, m, nn, k, 0, 0, 1.0, 0, 0);
		st = G->graph_end(1);
		G->read(hz, z, n, LB_K_ACT);
		G->read(hc, c, (size_t)m * nn, LB_K_ACT);
		if (!got_mid || st != (run < 5 ? want[run] : want[run - 4])) {
			print_message(
			    "    run %d: graph_end said %d (want %d), the pause saw %s  FAIL\n",
			    run, st, run < 5 ? want[run] : want[run - 4],
			    got_mid ? "the first piece's values" : "stale values");
			bad++;
		}
		bad += check(say("graph segment run %d: z = 3x", run), hz, scaled(hx, n, 3), n, 0,
			     NULL, 0);
		/* the same algorithm on the same values; a split-K one may add in another
		 * order: one bf16 rounding apart at most */
		bad += check(say("graph segment run %d: gemm as without graphs", run), hc, hc2,
			     (size_t)m * nn, 1e-3, NULL, MARGIN * U_BF16);
		/* a second key, without pauses: its own graphs */
		o = G->graph_begin(key2, sizeof(key2));
		o->add(z, x, x, n);
		st = G->graph_end(1);
		G->read(hz, z, n, LB_K_ACT);
		bad += check(say("graph segment 2 run %d: z = 2x", run), hz, scaled(hx, n, 2), n, 0,
			     NULL, 0);
		if (st != (run < 5 ? want[run] : want[run - 4])) {
			print_message("    segment 2 run %d: graph_end said %d  FAIL\n", run, st);
			bad++;
		}
	}
	if (spare)
		G->free_(spare);
	release();
	assert_int_equal(bad, 0);
}

/* --- elementwise and reductions --- */

/*
 * add (bf16): the fp32 sum of two bf16 values (exact, or within E where their exponents
 * differ by more than 16) rounded once: (U + 2 E) relative, no margin: the op has one
 * rounding. acc (f32): one fp32 rounding, 2 E. scale (f32): s in fp32 and the product, 3 E.
 * sum_acc / sum_sq_acc / sum / sum_sq on values k/4, |k| <= 6: every partial sum and
 * square sum of up to 200003 of them is a multiple of 2^-4 below 2^19, exact in fp32
 * (23 bits), so whatever the GPU's order and blocking, the result must be exact: this
 * checks that every element is counted once; the F64 accumulator adds to what it holds.
 */
static void test_elementwise_and_reductions(void **state)
{
	static const size_t sizes[] = {1, 7, 1000, 100003, 200003};
	int bad = 0;

	(void)state;
	for (size_t si = 0; si < 5; si++) {
		size_t n = sizes[si];
		double *a, *x, *y, *q, sum = 0, sq = 0, acc0 = 0.25, got[2];
		struct bp pa, pb, po, px, py, pq;
		void *acc1, *acc2;

		seed(1000 + n);
		a = hrand(n, 8, LB_K_ACT);
		pa = bp_new(a, n, LB_K_ACT);
		pb = bp_new(hrand(n, 8, LB_K_ACT), n, LB_K_ACT);
		po = bp_new(hrand(n, 5, LB_K_ACT), n, LB_K_ACT);
		G->add(po.g, pa.g, pb.g, n);
		R->add(po.r, pa.r, pb.r, n);
		bad += cmp(say("add n %zu", n), &po, 0, NULL, U_BF16 + 2 * E_F32);

		x = hrand(n, 3, LB_K_F32);
		y = hrand(n, 3, LB_K_F32);
		px = bp_new(x, n, LB_K_F32);
		py = bp_new(y, n, LB_K_F32);
		G->acc(py.g, px.g, n);
		R->acc(py.r, px.r, n);
		bad += cmp(say("acc n %zu", n), &py, 0, NULL, 2 * E_F32);
		G->scale(px.g, 0.37, n);
		R->scale(px.r, 0.37, n);
		bad += cmp(say("scale n %zu", n), &px, 0, NULL, 3 * E_F32);

		q = hnew(n);
		for (size_t e = 0; e < n; e++) {
			q[e] = (irand(13) - 6) / 4.0;
			sum += q[e];
			sq += q[e] * q[e];
		}
		pq = bp_new(q, n, LB_K_F32);
		acc1 = hold(G, G->alloc(1, LB_K_F64));
		acc2 = hold(G, G->alloc(1, LB_K_F64));
		G->write(acc1, &acc0, 1, LB_K_F64);
		G->write(acc2, &acc0, 1, LB_K_F64);
		G->sum_acc(acc1, pq.g, n);
		G->sum_acc(acc1, pq.g, n);
		G->sum_sq_acc(acc2, pq.g, n);
		G->read(&got[0], acc1, 1, LB_K_F64);
		G->read(&got[1], acc2, 1, LB_K_F64);
		if (got[0] != acc0 + 2 * sum || got[1] != acc0 + sq || G->sum(pq.g, n) != sum ||
		    G->sum_sq(pq.g, n) != sq || R->sum(pq.r, n) != sum ||
		    R->sum_sq(pq.r, n) != sq) {
			print_message("    sums n %zu: sum_acc x2 %.17g (want %.17g), sum_sq_acc "
				      "%.17g (want %.17g), sum %.17g (want %.17g), sum_sq %.17g "
				      "(want %.17g)  FAIL\n",
				      n, got[0], acc0 + 2 * sum, got[1], acc0 + sq, G->sum(pq.g, n),
				      sum, G->sum_sq(pq.g, n), sq);
			bad++;
		} else {
			print_message("  %-54s n %8zu  exact\n", "sum_acc, sum_sq_acc, sum, sum_sq",
				      n);
		}
		release();
	}
	assert_int_equal(bad, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bf16_round),
	    cmocka_unit_test(test_transfers_zero_copy),
	    cmocka_unit_test(test_allocator_counters),
	    cmocka_unit_test(test_allocator_vs_device),
	    cmocka_unit_test(test_events),
	    cmocka_unit_test(test_matmul),
	    cmocka_unit_test(test_rmsnorm),
	    cmocka_unit_test(test_rope),
	    cmocka_unit_test(test_attention),
	    cmocka_unit_test(test_swiglu),
	    cmocka_unit_test(test_embed),
	    cmocka_unit_test(test_xent),
	    cmocka_unit_test(test_adamw),
	    cmocka_unit_test(test_adamw_device_scalars),
	    cmocka_unit_test(test_graphs),
	    cmocka_unit_test(test_elementwise_and_reductions),
	};
	const char *name = getenv("LB_GPU_OPS_BACKEND");
	char err[256] = "";

	/* LB_GPU_OPS_BACKEND=cpu runs the same checks on the fp32 CPU backend: a check of
	 * this test itself, on a machine without a GPU (its bounds are loose for fp32) */
	name = name && *name ? name : "cuda";
	G = lb_ops_find(name);
	if (!G && !strcmp(name, "cuda")) {
		printf("skip: built without the CUDA backend (nvcc not found at build time)\n");
		return 77;
	}
	if (!G) {
		printf("error: no backend '%s' in this build\n", name);
		return 1;
	}
	if (G->init && G->init(0, err, sizeof(err))) {
		printf("skip: %s\n", err); /* err says what is missing */
		return 77;
	}
	R = lb_ops_cpu_f64();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
