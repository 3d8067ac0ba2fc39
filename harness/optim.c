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

void lb_optim_step(struct lb_optim *o, void *params, const void *grads,
		   const struct lb_tensor *tensors, int n_tensors, double grad_scale)
{
	const struct lb_ops *ops = o->ops;

	o->step++;
	for (int k = 0; k < o->n_r; k++) {
		const struct lb_range *r = &o->r[k];

		for (int i = 0; i < n_tensors; i++) {
			size_t a = tensors[i].offset, b = a + tensors[i].count, s;

			if (a < r->lo)
				a = r->lo;
			if (b > r->hi)
				b = r->hi;
			if (a >= b)
				continue;
			s = r->soff + (a - r->lo);
			ops->adamw(
			    lb_at(ops, params, a, LB_K_ACT), lb_at(ops, o->master, s, LB_K_F32),
			    lb_at(ops, (void *)grads, s, LB_K_F32), lb_at(ops, o->m, s, LB_K_F32),
			    lb_at(ops, o->v, s, LB_K_F32), b - a, o->lr, o->beta1, o->beta2, o->eps,
			    tensors[i].decay ? o->weight_decay : 0.0, o->step, grad_scale);
		}
	}
}

double lb_optim_clip_scale(double norm, double clip)
{
	if (clip <= 0 || !(norm > clip))
		return 1.0;
	return clip / norm;
}
