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

void lb_optim_runs(const struct lb_optim *o, const struct lb_tensor *tensors, int n_tensors,
		   int (*class_of)(void *ctx, int i),
		   void (*run)(void *ctx, size_t a, size_t b, size_t s, int cls), void *ctx)
{
	for (int k = 0; k < o->n_r; k++) {
		const struct lb_range *r = &o->r[k];
		size_t ra = 0, rb = 0;
		int rc = -1; /* the open run's class, -1: none open */

		for (int i = 0; i < n_tensors; i++) {
			size_t a = tensors[i].offset, b = a + tensors[i].count;
			int c = class_of(ctx, i);

			if (c < 0) { /* left out: it ends the open run */
				if (rc >= 0)
					run(ctx, ra, rb, r->soff + (ra - r->lo), rc);
				rc = -1;
				continue;
			}
			if (a < r->lo)
				a = r->lo;
			if (b > r->hi)
				b = r->hi;
			if (a >= b)
				continue;
			if (c == rc && a == rb) {
				rb = b;
				continue;
			}
			if (rc >= 0)
				run(ctx, ra, rb, r->soff + (ra - r->lo), rc);
			ra = a;
			rb = b;
			rc = c;
		}
		if (rc >= 0)
			run(ctx, ra, rb, r->soff + (ra - r->lo), rc);
	}
}

struct step_ctx {
	const struct lb_optim *o;
	const struct lb_ops *ops;
	const struct lb_tensor *tensors;
	void *params;
	const void *grads, *sc;
	double grad_scale;
	int dev; /* the scalars in backend memory (sc), not from the host */
};

/* A run's class for the AdamW calls: its weight decay flag. */
static int decay_class(void *ctx, int i)
{
	const struct step_ctx *c = ctx;

	return c->tensors[i].decay != 0;
}

/* One AdamW call on a run: with its scalars in backend memory (lb_optim_step_dev) or from
 * the host (the step count and grad_scale). */
static void run_adamw(void *ctx, size_t a, size_t b, size_t s, int decay)
{
	const struct step_ctx *c = ctx;
	const struct lb_optim *o = c->o;
	const struct lb_ops *ops = c->ops;
	void *p = lb_at(ops, c->params, a, LB_K_ACT), *w = lb_at(ops, o->master, s, LB_K_F32);
	void *g = lb_at(ops, (void *)c->grads, s, LB_K_F32), *m = lb_at(ops, o->m, s, LB_K_F32);
	void *v = lb_at(ops, o->v, s, LB_K_F32);
	double wd = decay ? o->weight_decay : 0.0;

	if (c->dev)
		ops->adamw_dev(p, w, g, m, v, b - a, o->lr, o->beta1, o->beta2, o->eps, wd, c->sc);
	else
		ops->adamw(p, w, g, m, v, b - a, o->lr, o->beta1, o->beta2, o->eps, wd, o->step,
			   c->grad_scale);
}

void lb_optim_step(struct lb_optim *o, void *params, const void *grads,
		   const struct lb_tensor *tensors, int n_tensors, double grad_scale)
{
	struct step_ctx c = {o, o->ops, tensors, params, grads, NULL, grad_scale, 0};

	o->step++;
	lb_optim_runs(o, tensors, n_tensors, decay_class, run_adamw, &c);
}

int lb_optim_next_step(struct lb_optim *o)
{
	return ++o->step;
}

void lb_optim_step_dev(const struct lb_optim *o, const struct lb_ops *ops, void *params,
		       const void *grads, const struct lb_tensor *tensors, int n_tensors,
		       const void *sc)
{
	struct step_ctx c = {o, ops, tensors, params, grads, sc, 0, 1};

	lb_optim_runs(o, tensors, n_tensors, decay_class, run_adamw, &c);
}

double lb_optim_clip_scale(double norm, double clip)
{
	if (clip <= 0 || !(norm > clip))
		return 1.0;
	return clip / norm;
}
