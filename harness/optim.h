/*
 * AdamW over the flat parameter buffer (harness/model.h): master weights and the two
 * moments in the F32 kind (fp32 beside bf16 parameters on the GPU; on the CPU reference
 * the parameters already have that type, fp32, or fp64 in the gradient-check build) for
 * the ranges of the flat buffer this rank updates: the whole buffer without ZeRO, this
 * rank's slice of every gradient bucket with ZeRO-1 and ZeRO-2 (harness/gradsync.h). The
 * state of the ranges is laid out one after the other (the "state layout"); the
 * gradients the step reads are in that layout too. Weight decay per tensor (matrices
 * only) from the tensor table. Gradient-norm clipping enters as a scale on the gradients
 * (lb_optim_clip_scale).
 */
#ifndef LB_OPTIM_H
#define LB_OPTIM_H

#include <stddef.h>

#include "harness/model.h"
#include "harness/ops.h"

/* Elements [lo, hi) of the flat buffer; their state starts at soff in the state layout. */
struct lb_range {
	size_t lo, hi, soff;
};

struct lb_optim {
	const struct lb_ops *ops;
	struct lb_range *r; /* n_r ranges, ascending, disjoint */
	int n_r;
	size_t n_state; /* elements of each state buffer: the ranges' total */
	void *master;	/* (n_state) f32 master weights */
	void *m, *v;	/* (n_state) f32 first and second moments */
	int step;	/* optimizer steps taken */
	double lr, beta1, beta2, eps, weight_decay;
};

/* Llama's AdamW settings (Touvron et al. 2023, section 2.2). */
#define LB_ADAM_BETA1 0.9
#define LB_ADAM_BETA2 0.95
#define LB_ADAM_EPS   1e-8

/* Allocate the state for the n ranges (copied; their soff must be the running total) and
 * copy the master weights from params (act). Returns 0 or LB_E_OOM. Release with
 * lb_optim_free. */
int lb_optim_init(struct lb_optim *o, const struct lb_ops *ops, const void *params,
		  const struct lb_range *r, int n, double lr, double weight_decay);
void lb_optim_free(struct lb_optim *o);

/* One AdamW step on the ranges: grads (f32, state layout) scaled by grad_scale; the
 * updated parameters written into params (flat); decay per tensor. One adamw call per
 * run of consecutive tensors of one range with the same decay (the arithmetic is per
 * element: the same values as a call per tensor, fewer launches). */
void lb_optim_step(struct lb_optim *o, void *params, const void *grads,
		   const struct lb_tensor *tensors, int n_tensors, double grad_scale);

/* The same step with its scalars in backend memory (ops.h adamw_scalars, adamw_dev): the
 * caller counts the step with lb_optim_next_step and enqueues adamw_scalars(sc, that
 * step, ...) itself (before a graph of this, which must not hold the step number), then
 * this issues the adamw_dev calls through ops (the segment's table). */
int lb_optim_next_step(struct lb_optim *o);
void lb_optim_step_dev(const struct lb_optim *o, const struct lb_ops *ops, void *params,
		       const void *grads, const struct lb_tensor *tensors, int n_tensors,
		       const void *sc);

/* The calls of a pass over the state, one per run: per range, the maximal runs of tensors
 * that follow one another in the flat buffer (no padding between them) with the same class,
 * class_of(ctx, i) of tensor i (AdamW: its decay flag); a tensor of class -1 is left out
 * and ends the run before it. run(ctx, flat [a, b), state offset s, class). */
void lb_optim_runs(const struct lb_optim *o, const struct lb_tensor *tensors, int n_tensors,
		   int (*class_of)(void *ctx, int i),
		   void (*run)(void *ctx, size_t a, size_t b, size_t s, int cls), void *ctx);

/* Gradient-norm clipping (Pascanu et al. 2013): the factor min(1, clip / norm); 1 when
 * clip <= 0. norm is the global L2 norm of the gradients. */
double lb_optim_clip_scale(double norm, double clip);

#endif
