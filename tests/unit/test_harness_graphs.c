/*
 * Unit tests of the graph segments (ops.h graph_begin ... graph_end) and the optimizer's
 * device scalars (adamw_scalars, clip_scale, adamw_dev) as the model and the trainer use
 * them, on the CPU: a fake backend wraps the CPU table with graph members that follow the
 * CUDA backend's rules (first run as usual, second captured, then replayed) and, instead
 * of graphs, record each piece's signature (how many ops, which, in order) between the
 * pauses. Its checks:
 *  - every collective and every backward hook inside a segment runs inside a pause;
 *  - a replay issues the same ops between the same pauses as its capture, and only
 *    through the table graph_begin returned (an op through the backend's own table on a
 *    replay would run twice on a GPU);
 *  - a capture that fails (at its first pause or at its end, before anything ran: the
 *    fake skips the captured ops as a discarded graph would) is run again by the caller,
 *    with the same numbers as a run without graphs;
 *  - the trainer with graphs and the device-side AdamW scalars trains bit for bit as the
 *    plain CPU trainer does;
 *  - the CPU table has none of these members.
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

#include "harness/model.h"
#include "harness/optim.h"
#include "harness/train.h"

enum { F_IDLE, F_EAGER, F_CAPTURE, F_REPLAY };

#define MAXKEYS	  64
#define MAXPIECES 512

struct sig {
	long n;
	uint64_t h;
};

static struct {
	struct {
		unsigned char key[128];
		size_t len;
		int seen, ready, n, failed_once;
		struct sig piece[MAXPIECES];
	} k[MAXKEYS];
	int nk;
	int mode, cur, depth, next, pauses;
	int doomed; /* this capture fails: its ops do not run (a discarded graph) */
	int broken;
	struct sig acc;
	int fail_end, fail_pause; /* the first capture of each key fails there */
	long violations, mismatches, comm_outside, hook_outside, max_pieces;
	long runs[LB_GRAPH_NRUNS];
} F;

static struct lb_ops base, rtab;

static const struct lb_ops *cpu(void)
{
	return lb_ops_cpu();
}

static void fake_reset(void)
{
	memset(&F, 0, sizeof(F));
}

/* An op issued outside a pause of a capture or replay: its signature; 1 when it runs. */
static int trace(const char *name, int via_replay)
{
	uint64_t h = 1469598103934665603ull;

	if ((F.mode != F_CAPTURE && F.mode != F_REPLAY) || F.depth)
		return 1;
	if (via_replay != (F.mode == F_REPLAY))
		F.violations++;
	for (const char *p = name; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	F.acc.n++;
	F.acc.h = (F.acc.h ^ h) * 1099511628211ull;
	return !(F.mode == F_CAPTURE && F.doomed);
}

/* A call that must not be part of a segment (a transfer, a wait, a stream switch). */
static void outside(void)
{
	if ((F.mode == F_CAPTURE || F.mode == F_REPLAY) && F.depth == 0)
		F.violations++;
}

/* --- the device-side AdamW scalars, as the CUDA backend computes them --- */

static void fk_adamw_scalars(void *sc, int step, double b1, double b2, double gs)
{
	double *d = sc;

	d[0] = 1.0 - pow(b1, step);
	d[1] = 1.0 - pow(b2, step);
	if (gs >= 0)
		d[2] = gs;
	d[3] = step;
}

static void fk_clip_scale(void *sc, const void *sq, double clip)
{
	((double *)sc)[2] = lb_optim_clip_scale(sqrt(*(const double *)sq), clip);
}

static void fk_adamw_dev(void *param, void *master, const void *grad, void *m, void *v, size_t n,
			 double lr, double b1, double b2, double eps, double wd, const void *sc)
{
	const double *d = sc;

	cpu()->adamw(param, master, grad, m, v, n, lr, b1, b2, eps, wd, (int)d[3], d[2]);
}

/* Each enqueueing op twice: b_ in the backend's own table, r_ in the replay table. */
#define WRAP_TO(name, real, params, args)                                                          \
	static void b_##name params                                                                \
	{                                                                                          \
		if (trace(#name, 0))                                                               \
			real args;                                                                 \
	}                                                                                          \
	static void r_##name params                                                                \
	{                                                                                          \
		if (trace(#name, 1))                                                               \
			real args;                                                                 \
	}
#define WRAP(name, params, args) WRAP_TO(name, cpu()->name, params, args)

WRAP(zero, (void *p, size_t n, enum lb_kind k), (p, n, k))
WRAP(copy, (void *d, const void *s, size_t n, enum lb_kind k), (d, s, n, k))
WRAP(cast, (void *d, enum lb_kind dk, const void *s, enum lb_kind sk, size_t n), (d, dk, s, sk, n))
WRAP(matmul,
     (void *c, const void *a, const void *b, int m, int n, int k, int ta, int tb, double al,
      int acc, int f32),
     (c, a, b, m, n, k, ta, tb, al, acc, f32))
WRAP(rmsnorm_fwd, (void *y, void *r, const void *x, const void *w, int t, int h),
     (y, r, x, w, t, h))
WRAP(rmsnorm_bwd,
     (void *dx, void *dw, const void *dy, const void *x, const void *w, const void *r, int t,
      int h),
     (dx, dw, dy, x, w, r, t, h))
WRAP(rmsnorm_unfused_fwd,
     (void *y, void *xh, void *r, void *sc, const void *x, const void *w, int t, int h),
     (y, xh, r, sc, x, w, t, h))
WRAP(rmsnorm_unfused_bwd,
     (void *dx, void *dw, const void *dy, const void *xh, const void *w, const void *r, void *sc,
      int t, int h),
     (dx, dw, dy, xh, w, r, sc, t, h))
WRAP(rope_fwd, (void *x, const void *cs, int t, int s, int st, int nh, int d),
     (x, cs, t, s, st, nh, d))
WRAP(rope_bwd, (void *x, const void *cs, int t, int s, int st, int nh, int d),
     (x, cs, t, s, st, nh, d))
WRAP(attn_naive_fwd,
     (void *o, void *p, void *sc, const void *q, int b, int s, int nh, int nkv, int d),
     (o, p, sc, q, b, s, nh, nkv, d))
WRAP(attn_fused_fwd, (void *o, void *p, const void *q, int b, int s, int nh, int nkv, int d),
     (o, p, q, b, s, nh, nkv, d))
WRAP(attn_probs_bwd,
     (void *dq, void *sc, const void *dout, const void *p, const void *q, int b, int s, int nh,
      int nkv, int d),
     (dq, sc, dout, p, q, b, s, nh, nkv, d))
WRAP(attn_flash_fwd,
     (void *o, void *l, void *sc, const void *q, int b, int s, int nh, int nkv, int d),
     (o, l, sc, q, b, s, nh, nkv, d))
WRAP(attn_flash_bwd,
     (void *dq, void *sc, const void *dout, const void *out, const void *l, const void *q, int b,
      int s, int nh, int nkv, int d),
     (dq, sc, dout, out, l, q, b, s, nh, nkv, d))
WRAP(swiglu_fwd, (void *o, const void *gu, int t, int f), (o, gu, t, f))
WRAP(swiglu_bwd, (void *d, const void *dout, const void *gu, int t, int f), (d, dout, gu, t, f))
WRAP(embed_fwd, (void *o, const void *tb, const int32_t *tok, int t, int h, int v0, int v),
     (o, tb, tok, t, h, v0, v))
WRAP(embed_bwd, (void *d, const void *dout, const int32_t *tok, int t, int h, int v0, int v),
     (d, dout, tok, t, h, v0, v))
WRAP(xent_max, (void *r, const void *l, int t, int v), (r, l, t, v))
WRAP(xent_sum,
     (void *se, void *tg, const void *l, const void *r, const int32_t *ta, int t, int v, int v0),
     (se, tg, l, r, ta, t, v, v0))
WRAP(xent_grad,
     (void *l, void *lo, const void *r, const void *se, const void *tg, const int32_t *ta, int t,
      int v, int v0, double s),
     (l, lo, r, se, tg, ta, t, v, v0, s))
WRAP(adamw,
     (void *p, void *ms, const void *g, void *m, void *v, size_t n, double lr, double b1, double b2,
      double eps, double wd, int step, double gs),
     (p, ms, g, m, v, n, lr, b1, b2, eps, wd, step, gs))
WRAP(add, (void *o, const void *a, const void *b, size_t n), (o, a, b, n))
WRAP(acc, (void *y, const void *x, size_t n), (y, x, n))
WRAP(scale, (void *x, double s, size_t n), (x, s, n))
WRAP(sum_acc, (void *a, const void *x, size_t n), (a, x, n))
WRAP(sum_sq_acc, (void *a, const void *x, size_t n), (a, x, n))
WRAP_TO(adamw_scalars, fk_adamw_scalars, (void *sc, int step, double b1, double b2, double gs),
	(sc, step, b1, b2, gs))
WRAP_TO(clip_scale, fk_clip_scale, (void *sc, const void *sq, double clip), (sc, sq, clip))
WRAP_TO(adamw_dev, fk_adamw_dev,
	(void *p, void *ms, const void *g, void *m, void *v, size_t n, double lr, double b1,
	 double b2, double eps, double wd, const void *sc),
	(p, ms, g, m, v, n, lr, b1, b2, eps, wd, sc))

static void g_write_i32(int32_t *d, const int32_t *s, size_t n)
{
	outside();
	cpu()->write_i32(d, s, n);
}

static void g_read(double *d, const void *s, size_t n, enum lb_kind k)
{
	outside();
	cpu()->read(d, s, n, k);
}

static double g_sum(const void *x, size_t n)
{
	outside();
	return cpu()->sum(x, n);
}

static void g_event_record(void *ev)
{
	outside();
	cpu()->event_record(ev);
}

/* --- the fake graph members --- */

static const struct lb_ops *f_begin(const void *key, size_t len)
{
	int i;

	assert_int_equal(F.mode, F_IDLE);
	assert_true(len > 0 && len <= sizeof(F.k[0].key));
	assert_true(strlen((const char *)key) < len); /* it begins with its name */
	for (i = 0; i < F.nk; i++)
		if (F.k[i].len == len && !memcmp(F.k[i].key, key, len))
			break;
	if (i == F.nk) {
		assert_true(F.nk < MAXKEYS);
		memcpy(F.k[i].key, key, len);
		F.k[i].len = len;
		F.nk++;
	}
	F.cur = i;
	F.depth = F.next = F.pauses = F.broken = F.doomed = 0;
	memset(&F.acc, 0, sizeof(F.acc));
	if (F.k[i].ready) {
		F.mode = F_REPLAY;
		return &rtab;
	}
	if (++F.k[i].seen < 2) {
		F.mode = F_EAGER;
		return &base;
	}
	F.mode = F_CAPTURE;
	F.k[i].n = 0;
	F.doomed = (F.fail_end || F.fail_pause) && !F.k[i].failed_once;
	return &base;
}

static int f_pause(void)
{
	if (F.mode == F_IDLE || F.depth++ > 0)
		return 0;
	if (F.mode == F_CAPTURE) {
		if (F.doomed && F.fail_pause) {
			assert_int_equal(F.pauses, 0);
			F.depth = 0;
			F.broken = 1;
			return LB_GRAPH_RERUN;
		}
		assert_true(F.k[F.cur].n < MAXPIECES);
		F.k[F.cur].piece[F.k[F.cur].n++] = F.acc;
		F.pauses++;
	} else if (F.mode == F_REPLAY) {
		if (F.next >= F.k[F.cur].n - 1 ||
		    memcmp(&F.k[F.cur].piece[F.next], &F.acc, sizeof(F.acc)))
			F.mismatches++;
		F.next++;
	}
	memset(&F.acc, 0, sizeof(F.acc));
	return 0;
}

static void f_resume(void)
{
	if (F.mode != F_IDLE && F.depth > 0)
		F.depth--;
}

static int f_end(int ok)
{
	int mode = F.mode, i = F.cur, r = LB_GRAPH_EAGER;

	F.mode = F_IDLE;
	assert_true(!ok || F.depth == 0);
	if (mode == F_CAPTURE) {
		if (!ok || F.doomed) {
			F.k[i].seen = 1;
			if (F.doomed) {
				F.k[i].failed_once = 1;
				r = LB_GRAPH_RERUN;
			}
		} else {
			F.k[i].piece[F.k[i].n++] = F.acc;
			if (F.k[i].n > F.max_pieces)
				F.max_pieces = F.k[i].n;
			F.k[i].ready = 1;
			r = LB_GRAPH_CAPTURED;
		}
	} else if (mode == F_REPLAY && ok) {
		if (F.next != F.k[i].n - 1 || memcmp(&F.k[i].piece[F.next], &F.acc, sizeof(F.acc)))
			F.mismatches++;
		r = LB_GRAPH_REPLAYED;
	}
	F.runs[r]++;
	return r;
}

#define SET(t, name, prefix) ((t).name = prefix##_##name)
#define BOTH(name)                                                                                 \
	do {                                                                                       \
		SET(base, name, b);                                                                \
		SET(rtab, name, r);                                                                \
	} while (0)

static void fake_init(void)
{
	base = *cpu();
	BOTH(zero);
	BOTH(copy);
	BOTH(cast);
	BOTH(matmul);
	BOTH(rmsnorm_fwd);
	BOTH(rmsnorm_bwd);
	BOTH(rmsnorm_unfused_fwd);
	BOTH(rmsnorm_unfused_bwd);
	BOTH(rope_fwd);
	BOTH(rope_bwd);
	BOTH(attn_naive_fwd);
	BOTH(attn_fused_fwd);
	BOTH(attn_probs_bwd);
	BOTH(attn_flash_fwd);
	BOTH(attn_flash_bwd);
	BOTH(swiglu_fwd);
	BOTH(swiglu_bwd);
	BOTH(embed_fwd);
	BOTH(embed_bwd);
	BOTH(xent_max);
	BOTH(xent_sum);
	BOTH(xent_grad);
	BOTH(adamw);
	BOTH(add);
	BOTH(acc);
	BOTH(scale);
	BOTH(sum_acc);
	BOTH(sum_sq_acc);
	BOTH(adamw_scalars);
	BOTH(clip_scale);
	BOTH(adamw_dev);
	base.name = "fake-graphs";
	base.write_i32 = g_write_i32;
	base.read = g_read;
	base.sum = g_sum;
	base.event_record = g_event_record;
	base.graph_begin = f_begin;
	base.graph_pause = f_pause;
	base.graph_resume = f_resume;
	base.graph_end = f_end;
	/* the replay table: the same, with the r_ ops */
	{
		struct lb_ops r = base;

		r.zero = rtab.zero;
		r.copy = rtab.copy;
		r.cast = rtab.cast;
		r.matmul = rtab.matmul;
		r.rmsnorm_fwd = rtab.rmsnorm_fwd;
		r.rmsnorm_bwd = rtab.rmsnorm_bwd;
		r.rmsnorm_unfused_fwd = rtab.rmsnorm_unfused_fwd;
		r.rmsnorm_unfused_bwd = rtab.rmsnorm_unfused_bwd;
		r.rope_fwd = rtab.rope_fwd;
		r.rope_bwd = rtab.rope_bwd;
		r.attn_naive_fwd = rtab.attn_naive_fwd;
		r.attn_fused_fwd = rtab.attn_fused_fwd;
		r.attn_probs_bwd = rtab.attn_probs_bwd;
		r.attn_flash_fwd = rtab.attn_flash_fwd;
		r.attn_flash_bwd = rtab.attn_flash_bwd;
		r.swiglu_fwd = rtab.swiglu_fwd;
		r.swiglu_bwd = rtab.swiglu_bwd;
		r.embed_fwd = rtab.embed_fwd;
		r.embed_bwd = rtab.embed_bwd;
		r.xent_max = rtab.xent_max;
		r.xent_sum = rtab.xent_sum;
		r.xent_grad = rtab.xent_grad;
		r.adamw = rtab.adamw;
		r.add = rtab.add;
		r.acc = rtab.acc;
		r.scale = rtab.scale;
		r.sum_acc = rtab.sum_acc;
		r.sum_sq_acc = rtab.sum_sq_acc;
		r.adamw_scalars = rtab.adamw_scalars;
		r.clip_scale = rtab.clip_scale;
		r.adamw_dev = rtab.adamw_dev;
		rtab = r;
	}
}

/* --- a fake tensor-parallel group of two (this is rank 0): it checks where it is called
 * and moves the right amount of data, with the values of one rank (the numbers mean
 * nothing; the test is about when collectives happen) --- */

static void comm_where(void)
{
	if (F.mode != F_IDLE && F.depth == 0)
		F.comm_outside++;
}

static int fc_all_reduce(struct lb_comm *c, const void *in, void *out, size_t count,
			 enum lb_dtype t, enum lb_redop op, void *stream)
{
	comm_where();
	if (in != out)
		memcpy(out, in, count * lb_dtype_size(t));
	return 0;
}

static int fc_reduce_scatter(struct lb_comm *c, const void *in, void *out, size_t count,
			     enum lb_dtype t, enum lb_redop op, void *stream)
{
	comm_where();
	memcpy(out, in, count * lb_dtype_size(t));
	return 0;
}

static int fc_all_gather(struct lb_comm *c, const void *in, void *out, size_t count,
			 enum lb_dtype t, void *stream)
{
	size_t b = count * lb_dtype_size(t);

	comm_where();
	memcpy(out, in, b);
	memcpy((char *)out + b, in, b);
	return 0;
}

static const struct lb_comm_ops fake_comm_ops = {.name = "fake-tp2",
						 .all_reduce = fc_all_reduce,
						 .reduce_scatter = fc_reduce_scatter,
						 .all_gather = fc_all_gather};

static int hook_calls;

static int check_hook(void *arg, int j, int after)
{
	hook_calls++;
	if (F.mode != F_IDLE && F.depth == 0)
		F.hook_outside++;
	return 0;
}

/* --- the tests --- */

static void test_cpu_has_no_graphs(void **state)
{
	const struct lb_ops *o = lb_ops_cpu();

	assert_null(o->graph_begin);
	assert_null(o->graph_pause);
	assert_null(o->graph_resume);
	assert_null(o->graph_end);
	assert_null(o->adamw_scalars);
	assert_null(o->clip_scale);
	assert_null(o->adamw_dev);
	assert_null(lb_ops_cpu_f64()->graph_begin);
}

/* tp 2 (with and without sequence parallelism) over the fake group: three forwards and
 * backwards (eager, captured, replayed twice ...), with a backward hook; with failing
 * captures the same loss sums as without graphs. */
static void run_tp(int sp, int graphs, int fail_pause, double *loss)
{
	struct lb_comm comm = {&fake_comm_ops, 0, 2, NULL};
	struct lb_layout l;
	struct lb_llama m;
	int32_t tok[64], tgt[64];

	lb_layout_init(&l);
	l.tp = 2;
	l.gpus_per_node = 2;
	l.sequence_parallel = sp;
	l.seq_len = 16;
	l.micro_batch = 2;
	l.global_batch = 2;
	for (int i = 0; i < 32; i++) {
		tok[i] = (i * 7) % l.model.vocab;
		tgt[i] = (i * 11 + 3) % l.model.vocab;
	}
	fake_reset();
	F.fail_pause = fail_pause;
	assert_int_equal(lb_llama_init(&m, &base, &comm, &l, 0, 1), 0);
	m.graphs = graphs;
	for (int it = 0; it < 4; it++) {
		lb_llama_zero_grads(&m);
		assert_int_equal(lb_llama_forward(&m, 0, 0, tok, tgt, NULL, 1.0 / 32, &loss[it]),
				 0);
		m.bwd_hook = check_hook;
		m.bwd_hook_arg = NULL;
		assert_int_equal(lb_llama_backward(&m, 0, 0, NULL), 0);
		m.bwd_hook = NULL;
		loss[4 + it] = base.sum(m.grads, m.n_grads);
	}
	lb_llama_free(&m);
	assert_int_equal(F.comm_outside, 0);
	assert_int_equal(F.hook_outside, 0);
	assert_int_equal(F.violations, 0);
	assert_int_equal(F.mismatches, 0);
}

static void test_tp_collectives_and_hooks_pause(void **state)
{
	for (int sp = 0; sp <= 1; sp++) {
		double plain[8], on[8], failing[8];

		run_tp(sp, 0, 0, plain);
		assert_int_equal(F.runs[LB_GRAPH_CAPTURED] + F.runs[LB_GRAPH_REPLAYED], 0);
		run_tp(sp, 1, 0, on);
		/* forward and backward each: eager, captured, replayed twice */
		assert_int_equal(F.runs[LB_GRAPH_EAGER], 2);
		assert_int_equal(F.runs[LB_GRAPH_CAPTURED], 2);
		assert_int_equal(F.runs[LB_GRAPH_REPLAYED], 4);
		assert_true(F.max_pieces > 8); /* cut at every collective and hook */
		assert_memory_equal(plain, on, sizeof(plain));
		run_tp(sp, 1, 1, failing); /* every first capture fails at its first pause */
		assert_int_equal(F.runs[LB_GRAPH_RERUN], 2);
		assert_int_equal(F.runs[LB_GRAPH_CAPTURED], 2);
		assert_int_equal(F.runs[LB_GRAPH_REPLAYED], 2);
		assert_memory_equal(plain, failing, sizeof(plain));
	}
	assert_true(hook_calls > 0);
}

static void tiny(struct lb_train_opts *o, int graphs)
{
	lb_train_opts_init(o);
	o->layout.seq_len = 32;
	o->layout.global_batch = 8;
	o->layout.micro_batch = 2;
	o->layout.steps = 5;
	o->quiet = 1;
	o->cuda_graphs = graphs;
}

/* n steps of the tiny model on ops; the losses, gradient norms and final parameters */
static void train(const struct lb_ops *ops, int graphs, int tied, double *loss, double *norm,
		  double **params, size_t *np)
{
	struct lb_train_opts o;
	struct lb_trainer t;

	tiny(&o, graphs);
	if (tied)
		assert_int_equal(lb_model_preset("tiny-tied", &o.layout.model), 0);
	assert_int_equal(lb_trainer_init(&t, &o, ops, NULL), 0);
	assert_int_equal(t.sc != NULL, ops->adamw_dev != NULL);
	for (int s = 0; s < 5; s++) {
		assert_int_equal(lb_trainer_step(&t, s, &loss[s]), 0);
		norm[s] = t.grad_norm;
	}
	*np = t.model.n_params;
	*params = malloc(*np * sizeof(double));
	assert_non_null(*params);
	cpu()->read(*params, t.model.params, *np, LB_K_ACT);
	lb_trainer_free(&t);
}

static void test_trainer_with_graphs_bitwise(void **state)
{
	for (int tied = 0; tied <= 1; tied++) {
		double la[5], lb[5], na[5], nb[5], *pa, *pb;
		size_t n, n2;

		fake_reset();
		train(cpu(), 0, tied, la, na, &pa, &n);
		fake_reset();
		train(&base, 1, tied, lb, nb, &pb, &n2);
		/* forward, first backward, the other backwards, the optimizer: each captured
		 * once and replayed from then on */
		assert_int_equal(F.runs[LB_GRAPH_CAPTURED], 4);
		assert_true(F.runs[LB_GRAPH_REPLAYED] > 20);
		assert_int_equal(F.violations, 0);
		assert_int_equal(F.mismatches, 0);
		assert_int_equal(n, n2);
		assert_memory_equal(la, lb, sizeof(la));
		assert_memory_equal(na, nb, sizeof(na));
		assert_memory_equal(pa, pb, n * sizeof(double));
		free(pb);
		/* every first capture fails at its end: run again, the same numbers */
		fake_reset();
		F.fail_end = 1;
		train(&base, 1, tied, lb, nb, &pb, &n2);
		assert_int_equal(F.runs[LB_GRAPH_RERUN], 4);
		assert_int_equal(F.runs[LB_GRAPH_CAPTURED], 4);
		assert_int_equal(F.violations, 0);
		assert_int_equal(F.mismatches, 0);
		assert_memory_equal(la, lb, sizeof(la));
		assert_memory_equal(pa, pb, n * sizeof(double));
		free(pa);
		free(pb);
	}
}

/* The device-side scalars without graphs: the same step as the host's. */
static void test_device_scalars_bitwise(void **state)
{
	double la[5], lb[5], na[5], nb[5], *pa, *pb;
	size_t n, n2;

	fake_reset();
	train(cpu(), 0, 0, la, na, &pa, &n);
	train(&base, 0, 0, lb, nb, &pb, &n2);
	assert_int_equal(F.runs[LB_GRAPH_CAPTURED] + F.runs[LB_GRAPH_REPLAYED], 0);
	assert_memory_equal(la, lb, sizeof(la));
	assert_memory_equal(na, nb, sizeof(na));
	assert_memory_equal(pa, pb, n * sizeof(double));
	free(pa);
	free(pb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cpu_has_no_graphs),
	    cmocka_unit_test(test_tp_collectives_and_hooks_pause),
	    cmocka_unit_test(test_trainer_with_graphs_bitwise),
	    cmocka_unit_test(test_device_scalars_bitwise),
	};

	fake_init();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
