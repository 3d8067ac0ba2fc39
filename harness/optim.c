/*
 * AdamW with master weights over ranges of the flat parameter buffer; see optim.h.
 */
#include "harness/optim.h"

#include <stdlib.h>
#include <string.h>

int lb_optim_init(struct lb_optim *o, const struct lb_ops *ops, const void *params,
		  const struct lb_range *r, int n, double lr, double weight_decay)
{
	size_t total = 0;

	*o = (struct lb_optim){.ops = ops,
			       .lr = lr,
			       .weight_decay = weight_decay,
			       .beta1 = LB_ADAM_BETA1,
			       .beta2 = LB_ADAM_BETA2,
			       .eps = LB_ADAM_EPS};
	o->r = calloc((size_t)(n > 0 ? n : 1), sizeof(*o->r));
	if (!o->r)
		return LB_E_OOM;
	for (int i = 0; i < n; i++) {
		o->r[i] = r[i];
		o->r[i].soff = total;
		total += r[i].hi - r[i].lo;
	}
	o->n_r = n;
	o->n_state = total;
	o->master = ops->alloc(total ? total : 1, LB_K_F32);
	o->m = ops->alloc(total ? total : 1, LB_K_F32);
	o->v = ops->alloc(total ? total : 1, LB_K_F32);
	if (!o->master || !o->m || !o->v) {
		lb_optim_free(o);
		return LB_E_OOM;
	}
	for (int i = 0; i < n; i++)
		ops->cast(lb_at(ops, o->master, o->r[i].soff, LB_K_F32), LB_K_F32,
			  lb_at(ops, (void *)params, o->r[i].lo, LB_K_ACT), LB_K_ACT,
			  o->r[i].hi - o->r[i].lo);
	return 0;
}

void lb_optim_free(struct lb_optim *o)
{
	if (!o->ops)
		return;
	if (o->master)
		o->ops->free_(o->master);
	if (o->m)
		o->ops->free_(o->m);
	if (o->v)
		o->ops->free_(o->v);
	free(o->r);
	memset(o, 0, sizeof(*o));
}

/* The AdamW calls of a step: per range, maximal runs of tensors that follow one another
 * in the flat buffer (no padding between them) with the same decay flag: run(ctx, flat
 * [a, b), state offset s, decay). */
static void adamw_runs(const struct lb_optim *o, const struct lb_tensor *tensors, int n_tensors,
		       void (*run)(void *ctx, size_t a, size_t b, size_t s, int decay), void *ctx)
{
	for (int k = 0; k < o->n_r; k++) {
		const struct lb_range *r = &o->r[k];
		size_t ra = 0, rb = 0;
		int rd = -1;

		for (int i = 0; i < n_tensors; i++) {
			size_t a = tensors[i].offset, b = a + tensors[i].count;
			int d = tensors[i].decay != 0;

			if (a < r->lo)
				a = r->lo;
			if (b > r->hi)
				b = r->hi;
			if (a >= b)
				continue;
			if (d == rd && a == rb) {
				rb = b;
				continue;
			}
			if (rd >= 0)
				run(ctx, ra, rb, r->soff + (ra - r->lo), rd);
			ra = a;
			rb = b;
			rd = d;
		}
		if (rd >= 0)
			run(ctx, ra, rb, r->soff + (ra - r->lo), rd);
	}
}

struct step_ctx {
	const struct lb_optim *o;
	const struct lb_ops *ops;
	void *params;
	const void *grads, *sc;
	double grad_scale;
};

static void run_host(void *ctx, size_t a, size_t b, size_t s, int decay)
{
	const struct step_ctx *c = ctx;
	const struct lb_optim *o = c->o;
	const struct lb_ops *ops = c->ops;

	ops->adamw(lb_at(ops, c->params, a, LB_K_ACT), lb_at(ops, o->master, s, LB_K_F32),
		   lb_at(ops, (void *)c->grads, s, LB_K_F32), lb_at(ops, o->m, s, LB_K_F32),
		   lb_at(ops, o->v, s, LB_K_F32), b - a, o->lr, o->beta1, o->beta2, o->eps,
		   decay ? o->weight_decay : 0.0, o->step, c->grad_scale);
}

static void run_dev(void *ctx, size_t a, size_t b, size_t s, int decay)
{
	const struct step_ctx *c = ctx;
	const struct lb_optim *o = c->o;
	const struct lb_ops *ops = c->ops;

	ops->adamw_dev(lb_at(ops, c->params, a, LB_K_ACT), lb_at(ops, o->master, s, LB_K_F32),
		       lb_at(ops, (void *)c->grads, s, LB_K_F32), lb_at(ops, o->m, s, LB_K_F32),
		       lb_at(ops, o->v, s, LB_K_F32), b - a, o->lr, o->beta1, o->beta2, o->eps,
		       decay ? o->weight_decay : 0.0, c->sc);
}

void lb_optim_step(struct lb_optim *o, void *params, const void *grads,
		   const struct lb_tensor *tensors, int n_tensors, double grad_scale)
{
	struct step_ctx c = {o, o->ops, params, grads, NULL, grad_scale};

	o->step++;
	adamw_runs(o, tensors, n_tensors, run_host, &c);
}

int lb_optim_next_step(struct lb_optim *o)
{
	return ++o->step;
}

void lb_optim_step_dev(const struct lb_optim *o, const struct lb_ops *ops, void *params,
		       const void *grads, const struct lb_tensor *tensors, int n_tensors,
		       const void *sc)
{
	struct step_ctx c = {o, ops, params, grads, sc, 0};

	adamw_runs(o, tensors, n_tensors, run_dev, &c);
}

double lb_optim_clip_scale(double norm, double clip)
{
	if (clip <= 0 || !(norm > clip))
		return 1.0;
	return clip / norm;
}
