/*
 * Unit tests of the CPU ops table: every op's backward against central finite
 * differences of L = sum(out * R) evaluated with the fp64 instantiation of the same code
 * (tight enough to catch a wrong index or a missing factor), the matmul against a naive
 * loop for all transposes, fused vs unfused RMSNorm and the three attention variants
 * against each other in fp32, AdamW against its formula, and the allocator's limit.
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

#define FD_EPS 1e-5
#define FD_TOL 1e-7

static uint64_t rng_state = 12345;

static double urand(void) /* [-1, 1) */
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return ((rng_state >> 11) / 9007199254740992.0) * 2.0 - 1.0;
}

static double *rand_vec(size_t n, double scale)
{
	double *v = malloc(n * sizeof(*v));

	assert_non_null(v);
	for (size_t i = 0; i < n; i++)
		v[i] = urand() * scale;
	return v;
}

static double *zeros(size_t n)
{
	double *v = calloc(n ? n : 1, sizeof(*v));

	assert_non_null(v);
	return v;
}

static double dot(const double *a, const double *b, size_t n)
{
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

/* Check analytic gradient g of loss() with respect to x[0..n) by central differences
 * (every element when n <= 600, else a stride). */
static void fd_check(const char *what, double *x, size_t n, const double *g, double (*loss)(void *),
		     void *ctx)
{
	size_t stride = n <= 600 ? 1 : n / 300;
	double worst = 0;

	for (size_t i = 0; i < n; i += stride) {
		double x0 = x[i], lp, lm, num, err;

		x[i] = x0 + FD_EPS;
		lp = loss(ctx);
		x[i] = x0 - FD_EPS;
		lm = loss(ctx);
		x[i] = x0;
		num = (lp - lm) / (2 * FD_EPS);
		err = fabs(num - g[i]) / (1.0 + fabs(num));
		if (err > worst)
			worst = err;
		if (err > FD_TOL) {
			fprintf(stderr, "%s: element %zu: analytic %.12g, numeric %.12g\n", what, i,
				g[i], num);
			fail();
		}
	}
	(void)worst;
}

/* --- matmul --- */

static void test_matmul_all_transposes(void **state)
{
	const struct lb_ops *o = lb_ops_cpu_f64();
	int m = 7, n = 9, k = 5;

	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++)
			for (int accum = 0; accum < 2; accum++) {
				double *a = rand_vec((size_t)m * k, 1),
				       *b = rand_vec((size_t)k * n, 1);
				double *c = rand_vec((size_t)m * n, 1), *ref = zeros((size_t)m * n);

				for (int i = 0; i < m; i++)
					for (int j = 0; j < n; j++) {
						double s = 0;

						for (int p = 0; p < k; p++)
							s += (ta ? a[p * m + i] : a[i * k + p]) *
							     (tb ? b[j * k + p] : b[p * n + j]);
						ref[i * n + j] =
						    0.5 * s + (accum ? c[i * n + j] : 0);
					}
				o->matmul(c, a, b, m, n, k, ta, tb, 0.5, accum, 0);
				for (int e = 0; e < m * n; e++)
					assert_true(fabs(c[e] - ref[e]) < 1e-12);
				free(a), free(b), free(c), free(ref);
			}
}

static void test_matmul_f32_blocks(void **state)
{
	/* the 4x4-blocked path with remainders, in fp32, against fp64 */
	const struct lb_ops *o = lb_ops_cpu();
	int m = 10, n = 11, k = 13;
	float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * n * k),
	      *c = calloc((size_t)m * n, sizeof(float));

	for (int i = 0; i < m * k; i++)
		a[i] = (float)urand();
	for (int i = 0; i < n * k; i++)
		b[i] = (float)urand();
	o->matmul(c, a, b, m, n, k, 0, 1, 1.0, 0, 0);
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++) {
			double s = 0;

			for (int p = 0; p < k; p++)
				s += (double)a[i * k + p] * b[j * k + p];
			assert_true(fabs(c[i * n + j] - s) < 1e-5);
		}
	free(a), free(b), free(c);
}

/* --- RMSNorm --- */

struct norm_ctx {
	const struct lb_ops *o;
	int t, h, unfused;
	double *x, *w, *y, *r, *rstd, *xhat, *scratch;
};

static double norm_loss(void *p)
{
	struct norm_ctx *c = p;

	if (c->unfused)
		c->o->rmsnorm_unfused_fwd(c->y, c->xhat, c->rstd, c->scratch, c->x, c->w, c->t,
					  c->h);
	else
		c->o->rmsnorm_fwd(c->y, c->rstd, c->x, c->w, c->t, c->h);
	return dot(c->y, c->r, (size_t)c->t * c->h);
}

static void check_norm(int unfused)
{
	struct norm_ctx c = {.o = lb_ops_cpu_f64(), .t = 3, .h = 8, .unfused = unfused};
	size_t th = (size_t)c.t * c.h;
	double *dx, *dw;

	c.x = rand_vec(th, 2);
	c.w = rand_vec((size_t)c.h, 1);
	c.r = rand_vec(th, 1);
	c.y = zeros(th), c.rstd = zeros((size_t)c.t), c.xhat = zeros(th);
	c.scratch = zeros(th + c.t);
	dx = zeros(th), dw = zeros((size_t)c.h);
	norm_loss(&c);
	/* the function itself: y = x / rms(x) * w */
	for (int i = 0; i < c.t; i++) {
		double ss = 0;

		for (int j = 0; j < c.h; j++)
			ss += c.x[i * c.h + j] * c.x[i * c.h + j];
		for (int j = 0; j < c.h; j++)
			assert_true(fabs(c.y[i * c.h + j] -
					 c.x[i * c.h + j] / sqrt(ss / c.h + LB_RMS_EPS) * c.w[j]) <
				    1e-12);
	}
	if (unfused)
		c.o->rmsnorm_unfused_bwd(dx, dw, c.r, c.xhat, c.w, c.rstd, c.scratch, c.t, c.h);
	else
		c.o->rmsnorm_bwd(dx, dw, c.r, c.x, c.w, c.rstd, c.t, c.h);
	fd_check("rmsnorm dx", c.x, th, dx, norm_loss, &c);
	fd_check("rmsnorm dw", c.w, (size_t)c.h, dw, norm_loss, &c);
	free(c.x), free(c.w), free(c.r), free(c.y), free(c.rstd), free(c.xhat), free(c.scratch);
	free(dx), free(dw);
}

static void test_rmsnorm_fused_grad(void **state)
{
	check_norm(0);
}

static void test_rmsnorm_unfused_grad(void **state)
{
	check_norm(1);
}

static void test_rmsnorm_fused_matches_unfused_f32(void **state)
{
	const struct lb_ops *o = lb_ops_cpu();
	int t = 5, h = 64;
	size_t th = (size_t)t * h;
	float *x = malloc(th * 4), *w = malloc((size_t)h * 4), *dy = malloc(th * 4);
	float *y1 = calloc(th, 4), *y2 = calloc(th, 4), *r1 = calloc(t, 4), *r2 = calloc(t, 4);
	float *xhat = calloc(th, 4), *scr = calloc(th + t, 4);
	float *dx1 = calloc(th, 4), *dx2 = calloc(th, 4), *dw1 = calloc(h, 4), *dw2 = calloc(h, 4);

	for (size_t i = 0; i < th; i++)
		x[i] = (float)urand() * 3, dy[i] = (float)urand();
	for (int i = 0; i < h; i++)
		w[i] = 1 + (float)urand() * 0.1f;
	o->rmsnorm_fwd(y1, r1, x, w, t, h);
	o->rmsnorm_unfused_fwd(y2, xhat, r2, scr, x, w, t, h);
	o->rmsnorm_bwd(dx1, dw1, dy, x, w, r1, t, h);
	o->rmsnorm_unfused_bwd(dx2, dw2, dy, xhat, w, r2, scr, t, h);
	for (size_t i = 0; i < th; i++) {
		assert_true(fabs(y1[i] - y2[i]) <= 1e-6 * (1 + fabs(y1[i])));
		assert_true(fabs(dx1[i] - dx2[i]) <= 1e-5 * (1 + fabs(dx1[i])));
	}
	for (int i = 0; i < h; i++)
		assert_true(fabs(dw1[i] - dw2[i]) <= 1e-5 * (1 + fabs(dw1[i])));
	free(x), free(w), free(dy), free(y1), free(y2), free(r1), free(r2), free(xhat), free(scr);
	free(dx1), free(dx2), free(dw1), free(dw2);
}

/* --- RoPE --- */

struct rope_ctx {
	const struct lb_ops *o;
	int t, s, stride, nheads, d;
	double *x, *y, *r, *cs;
};

static double rope_loss(void *p)
{
	struct rope_ctx *c = p;
	size_t n = (size_t)c->t * c->stride;

	memcpy(c->y, c->x, n * sizeof(double));
	c->o->rope_fwd(c->y, c->cs, c->t, c->s, c->stride, c->nheads, c->d);
	return dot(c->y, c->r, n);
}

static void test_rope_grad(void **state)
{
	struct rope_ctx c = {.o = lb_ops_cpu_f64(), .t = 6, .s = 3, .nheads = 3, .d = 4};
	size_t n;
	double *g;

	c.stride = 4 * c.d; /* 3 rotated heads and one (v) left alone */
	n = (size_t)c.t * c.stride;
	c.x = rand_vec(n, 1), c.r = rand_vec(n, 1), c.y = zeros(n);
	c.cs = lb_rope_table_host(c.s, c.d);
	assert_non_null(c.cs);
	/* position 0 is the identity; pair (0, 1) of position 1 turns by 1 radian */
	rope_loss(&c);
	assert_true(fabs(c.y[0] - c.x[0]) < 1e-15);
	{
		double a = c.x[c.stride], b = c.x[c.stride + 1];

		assert_true(fabs(c.y[c.stride] - (a * cos(1.0) - b * sin(1.0))) < 1e-12);
	}
	assert_true(fabs(c.y[3 * c.d] - c.x[3 * c.d]) < 1e-15); /* 4th head untouched */
	g = zeros(n);
	memcpy(g, c.r, n * sizeof(double));
	c.o->rope_bwd(g, c.cs, c.t, c.s, c.stride, c.nheads, c.d);
	fd_check("rope", c.x, n, g, rope_loss, &c);
	free(c.x), free(c.r), free(c.y), free(c.cs), free(g);
}

/* --- attention --- */

struct attn_ctx {
	const struct lb_ops *o;
	int variant; /* 0 naive, 1 fused_softmax, 2 flash */
	int b, s, nh, nkv, d;
	double *qkv, *out, *saved, *scratch, *r;
};

static double attn_loss(void *p)
{
	struct attn_ctx *c = p;

	if (c->variant == 0)
		c->o->attn_naive_fwd(c->out, c->saved, c->scratch, c->qkv, c->b, c->s, c->nh,
				     c->nkv, c->d);
	else if (c->variant == 1)
		c->o->attn_fused_fwd(c->out, c->saved, c->qkv, c->b, c->s, c->nh, c->nkv, c->d);
	else
		c->o->attn_flash_fwd(c->out, c->saved, c->scratch, c->qkv, c->b, c->s, c->nh,
				     c->nkv, c->d);
	return dot(c->out, c->r, (size_t)c->b * c->s * c->nh * c->d);
}

static void check_attn(int variant, int s)
{
	struct attn_ctx c = {
	    .o = lb_ops_cpu_f64(), .variant = variant, .b = 2, .s = s, .nh = 4, .nkv = 2, .d = 4};
	size_t nq = (size_t)c.b * c.s * (c.nh + 2 * c.nkv) * c.d,
	       no = (size_t)c.b * c.s * c.nh * c.d;
	double *dqkv = zeros(nq);

	c.qkv = rand_vec(nq, 1.5), c.r = rand_vec(no, 1), c.out = zeros(no);
	c.saved = zeros((size_t)c.b * c.nh * c.s * c.s);
	c.scratch = zeros(c.o->attn_scratch(c.b, c.s, c.nh, c.d));
	attn_loss(&c);
	if (variant == 2)
		c.o->attn_flash_bwd(dqkv, c.scratch, c.r, c.out, c.saved, c.qkv, c.b, c.s, c.nh,
				    c.nkv, c.d);
	else
		c.o->attn_probs_bwd(dqkv, c.scratch, c.r, c.saved, c.qkv, c.b, c.s, c.nh, c.nkv,
				    c.d);
	fd_check(variant == 0	? "attn naive"
		 : variant == 1 ? "attn fused"
				: "attn flash",
		 c.qkv, nq, dqkv, attn_loss, &c);
	/* causality: the first token's output is its own value vector */
	for (int e = 0; e < c.d; e++)
		assert_true(fabs(c.out[e] - c.qkv[(c.nh + c.nkv) * c.d + e]) < 1e-12);
	free(c.qkv), free(c.r), free(c.out), free(c.saved), free(c.scratch), free(dqkv);
}

static void test_attn_naive_grad(void **state)
{
	check_attn(0, 5);
}

static void test_attn_fused_grad(void **state)
{
	check_attn(1, 5);
}

static void test_attn_flash_grad(void **state)
{
	check_attn(2, 5);
	check_attn(2, 37); /* more than one key tile */
}

static void test_attn_variants_agree_f32(void **state)
{
	const struct lb_ops *o = lb_ops_cpu();
	int b = 2, s = 70, nh = 4, nkv = 2, d = 8;
	size_t nq = (size_t)b * s * (nh + 2 * nkv) * d, no = (size_t)b * s * nh * d;
	size_t np = (size_t)b * nh * s * s;
	float *qkv = malloc(nq * 4), *dout = malloc(no * 4), *out[3], *dq[3];
	float *saved = calloc(np, 4), *scr = calloc(lb_ops_cpu()->attn_scratch(b, s, nh, d), 4);

	for (size_t i = 0; i < nq; i++)
		qkv[i] = (float)urand() * 2;
	for (size_t i = 0; i < no; i++)
		dout[i] = (float)urand();
	for (int v = 0; v < 3; v++) {
		out[v] = calloc(no, 4), dq[v] = calloc(nq, 4);
		if (v == 0) {
			o->attn_naive_fwd(out[v], saved, scr, qkv, b, s, nh, nkv, d);
			o->attn_probs_bwd(dq[v], scr, dout, saved, qkv, b, s, nh, nkv, d);
		} else if (v == 1) {
			o->attn_fused_fwd(out[v], saved, qkv, b, s, nh, nkv, d);
			o->attn_probs_bwd(dq[v], scr, dout, saved, qkv, b, s, nh, nkv, d);
		} else {
			o->attn_flash_fwd(out[v], saved, scr, qkv, b, s, nh, nkv, d);
			o->attn_flash_bwd(dq[v], scr, dout, out[v], saved, qkv, b, s, nh, nkv, d);
		}
	}
	for (int v = 1; v < 3; v++) {
		for (size_t i = 0; i < no; i++)
			assert_true(fabs(out[v][i] - out[0][i]) <= 1e-5 * (1 + fabs(out[0][i])));
		for (size_t i = 0; i < nq; i++)
			assert_true(fabs(dq[v][i] - dq[0][i]) <= 1e-5 * (1 + fabs(dq[0][i])));
	}
	for (int v = 0; v < 3; v++)
		free(out[v]), free(dq[v]);
	free(qkv), free(dout), free(saved), free(scr);
}

/* --- SwiGLU --- */

struct swiglu_ctx {
	const struct lb_ops *o;
	int t, f;
	double *gu, *out, *r;
};

static double swiglu_loss(void *p)
{
	struct swiglu_ctx *c = p;

	c->o->swiglu_fwd(c->out, c->gu, c->t, c->f);
	return dot(c->out, c->r, (size_t)c->t * c->f);
}

static void test_swiglu_grad(void **state)
{
	struct swiglu_ctx c = {.o = lb_ops_cpu_f64(), .t = 4, .f = 6};
	size_t n = (size_t)c.t * 2 * c.f;
	double *dgu = zeros(n);

	c.gu = rand_vec(n, 3), c.r = rand_vec((size_t)c.t * c.f, 1),
	c.out = zeros((size_t)c.t * c.f);
	swiglu_loss(&c);
	/* out = g * sigmoid(g) * u with g first, u second in each row */
	assert_true(fabs(c.out[1] - c.gu[1] / (1 + exp(-c.gu[1])) * c.gu[c.f + 1]) < 1e-12);
	c.o->swiglu_bwd(dgu, c.r, c.gu, c.t, c.f);
	fd_check("swiglu", c.gu, n, dgu, swiglu_loss, &c);
	free(c.gu), free(c.r), free(c.out), free(dgu);
}

/* --- embedding --- */

struct embed_ctx {
	const struct lb_ops *o;
	int t, h, v0, v;
	const int32_t *tok;
	double *table, *out, *r;
};

static double embed_loss(void *p)
{
	struct embed_ctx *c = p;

	c->o->embed_fwd(c->out, c->table, c->tok, c->t, c->h, c->v0, c->v);
	return dot(c->out, c->r, (size_t)c->t * c->h);
}

static void test_embedding_grad(void **state)
{
	/* a vocab shard [4, 10): token 2 and 11 are elsewhere and give zero rows */
	const int32_t tok[] = {5, 2, 5, 9, 11};
	struct embed_ctx c = {.o = lb_ops_cpu_f64(), .t = 5, .h = 3, .v0 = 4, .v = 6, .tok = tok};
	double *dt = zeros((size_t)c.v * c.h);

	c.table = rand_vec((size_t)c.v * c.h, 1), c.r = rand_vec((size_t)c.t * c.h, 1);
	c.out = zeros((size_t)c.t * c.h);
	embed_loss(&c);
	assert_true(c.out[0] == c.table[1 * c.h]);
	assert_true(c.out[c.h] == 0 && c.out[4 * c.h + 2] == 0);
	c.o->embed_bwd(dt, c.r, tok, c.t, c.h, c.v0, c.v);
	fd_check("embedding", c.table, (size_t)c.v * c.h, dt, embed_loss, &c);
	free(c.table), free(c.r), free(c.out), free(dt);
}

/* --- cross-entropy --- */

struct xent_ctx {
	const struct lb_ops *o;
	int t, v;
	const int32_t *tgt;
	double *logits, *work, *losses, *mx, *se, *tl, scale;
};

static double xent_loss(void *p)
{
	struct xent_ctx *c = p;

	memcpy(c->work, c->logits, (size_t)c->t * c->v * sizeof(double));
	c->o->xent_max(c->mx, c->work, c->t, c->v);
	c->o->xent_sum(c->se, c->tl, c->work, c->mx, c->tgt, c->t, c->v, 0);
	c->o->xent_grad(c->work, c->losses, c->mx, c->se, c->tl, c->tgt, c->t, c->v, 0, c->scale);
	return c->scale * c->o->sum(c->losses, (size_t)c->t);
}

static void test_xent_grad(void **state)
{
	const int32_t tgt[] = {3, 0, 6, 6};
	struct xent_ctx c = {.o = lb_ops_cpu_f64(), .t = 4, .v = 7, .tgt = tgt, .scale = 0.25};
	size_t n = (size_t)c.t * c.v;
	double *g = zeros(n), l0, z = 0;

	c.logits = rand_vec(n, 4), c.work = zeros(n), c.losses = zeros((size_t)c.t);
	c.mx = zeros((size_t)c.t), c.se = zeros((size_t)c.t), c.tl = zeros((size_t)c.t);
	l0 = xent_loss(&c);
	memcpy(g, c.work, n * sizeof(double)); /* dlogits, written in place */
	for (int j = 0; j < c.v; j++)
		z += exp(c.logits[j]);
	assert_true(fabs(c.losses[0] - (log(z) - c.logits[3])) < 1e-12);
	assert_true(l0 > 0);
	fd_check("cross-entropy", c.logits, n, g, xent_loss, &c);
	free(c.logits), free(c.work), free(c.losses), free(c.mx), free(c.se), free(c.tl), free(g);
}

/* --- AdamW, elementwise, reductions, allocator --- */

static void test_adamw_formula(void **state)
{
	const struct lb_ops *o = lb_ops_cpu_f64();
	double p[2] = {1.0, -2.0}, master[2] = {1.0, -2.0}, m[2] = {0}, v[2] = {0};
	double g[2] = {0.5, -4.0};
	double lr = 0.1, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.01;

	o->adamw(p, master, g, m, v, 2, lr, b1, b2, eps, wd, 1, 0.5);
	for (int i = 0; i < 2; i++) {
		double gi = g[i] * 0.5, w0 = i ? -2.0 : 1.0;
		double mi = (1 - b1) * gi, vi = (1 - b2) * gi * gi;
		double w = w0 - lr * ((mi / (1 - b1)) / (sqrt(vi / (1 - b2)) + eps) + wd * w0);

		assert_true(fabs(m[i] - mi) < 1e-15 && fabs(v[i] - vi) < 1e-15);
		assert_true(fabs(master[i] - w) < 1e-12 && p[i] == master[i]);
	}
	/* the first step moves each weight by about lr (Adam's sign-like first update) */
	assert_true(fabs(master[0] - (1.0 - 0.1 - 0.001)) < 1e-6);
}

static void test_elementwise_and_reductions(void **state)
{
	const struct lb_ops *o = lb_ops_cpu();
	float a[5] = {1, 2, 3, 4, 5}, b[5] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f}, c[5];

	o->add(c, a, b, 5);
	assert_true(c[4] == 5.5f);
	o->acc(c, b, 5);
	assert_true(c[0] == 2.0f);
	o->scale(c, 2.0, 5);
	assert_true(c[1] == 6.0f);
	assert_true(o->sum(a, 5) == 15.0);
	assert_true(o->sum_sq(a, 5) == 55.0);
}

static void test_allocator_limit_and_peak(void **state)
{
	const struct lb_ops *o = lb_ops_cpu();
	uint64_t live0, live, peak;
	void *p, *q;
	double back[3], in[3] = {1.5, -2.25, 3.0};

	o->mem_stats(&live0, NULL);
	o->reset_peak();
	p = o->alloc(1000, LB_K_F32);
	assert_non_null(p);
	o->write(p, in, 3, LB_K_F32);
	o->read(back, p, 3, LB_K_F32);
	assert_memory_equal(back, in, sizeof(in));
	o->mem_stats(&live, &peak);
	assert_true(live == live0 + 4000 && peak == live);
	o->set_mem_limit(live + 2000);
	q = o->alloc(1000, LB_K_F32); /* 4000 bytes over a 2000-byte headroom: refused */
	assert_null(q);
	q = o->alloc(100, LB_K_F32);
	assert_non_null(q);
	o->free_(q);
	o->free_(p);
	o->set_mem_limit(0);
	o->mem_stats(&live, &peak);
	assert_true(live == live0 && peak == live0 + 4400);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_matmul_all_transposes),
	    cmocka_unit_test(test_matmul_f32_blocks),
	    cmocka_unit_test(test_rmsnorm_fused_grad),
	    cmocka_unit_test(test_rmsnorm_unfused_grad),
	    cmocka_unit_test(test_rmsnorm_fused_matches_unfused_f32),
	    cmocka_unit_test(test_rope_grad),
	    cmocka_unit_test(test_attn_naive_grad),
	    cmocka_unit_test(test_attn_fused_grad),
	    cmocka_unit_test(test_attn_flash_grad),
	    cmocka_unit_test(test_attn_variants_agree_f32),
	    cmocka_unit_test(test_swiglu_grad),
	    cmocka_unit_test(test_embedding_grad),
	    cmocka_unit_test(test_xent_grad),
	    cmocka_unit_test(test_adamw_formula),
	    cmocka_unit_test(test_elementwise_and_reductions),
	    cmocka_unit_test(test_allocator_limit_and_peak),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
