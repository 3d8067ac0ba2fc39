/*
 * AdamW with master weights over a range of the flat parameter buffer; see optim.h.
 */
#include "harness/optim.h"

#include <string.h>

int lb_optim_init(struct lb_optim *o, const struct lb_ops *ops, const void *params, size_t lo,
		  size_t hi, double lr, double weight_decay)
{
	size_t n = hi - lo;

	memset(o, 0, sizeof(*o));
	o->ops = ops;
	o->lo = lo;
	o->hi = hi;
	o->lr = lr;
	o->weight_decay = weight_decay;
	o->beta1 = LB_ADAM_BETA1;
	o->beta2 = LB_ADAM_BETA2;
	o->eps = LB_ADAM_EPS;
	o->master = ops->alloc(n ? n : 1, LB_K_F32);
	o->m = ops->alloc(n ? n : 1, LB_K_F32);
	o->v = ops->alloc(n ? n : 1, LB_K_F32);
	if (!o->master || !o->m || !o->v) {
		lb_optim_free(o);
		return LB_E_OOM;
	}
	ops->cast(o->master, LB_K_F32, lb_at(ops, (void *)params, lo, LB_K_ACT), LB_K_ACT, n);
	return 0;
}

void lb_optim_free(struct lb_optim *o)
{
	if (!o->ops)
		return;
	o->ops->free_(o->master);
	o->ops->free_(o->m);
	o->ops->free_(o->v);
	memset(o, 0, sizeof(*o));
}

void lb_optim_step(struct lb_optim *o, void *params, const void *grads,
		   const struct lb_tensor *tensors, int n_tensors, double grad_scale)
{
	const struct lb_ops *ops = o->ops;

	o->step++;
	for (int i = 0; i < n_tensors; i++) {
		size_t a = tensors[i].offset, b = a + tensors[i].count;

		if (a < o->lo)
			a = o->lo;
		if (b > o->hi)
			b = o->hi;
		if (a >= b)
			continue;
		ops->adamw(lb_at(ops, params, a, LB_K_ACT),
			   lb_at(ops, o->master, a - o->lo, LB_K_F32),
			   lb_at(ops, (void *)grads, a, LB_K_F32),
			   lb_at(ops, o->m, a - o->lo, LB_K_F32),
			   lb_at(ops, o->v, a - o->lo, LB_K_F32), b - a, o->lr, o->beta1, o->beta2,
			   o->eps, tensors[i].decay ? o->weight_decay : 0.0, o->step, grad_scale);
	}
}

double lb_optim_clip_scale(double norm, double clip)
{
	if (clip <= 0 || !(norm > clip))
		return 1.0;
	return clip / norm;
}
