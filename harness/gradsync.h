/*
 * The data-parallel gradient reduction: buckets, ZeRO's slices, overlap with the backward.
 *
 * The flat gradient buffer (harness/model.h) is cut into buckets at block boundaries, each
 * block padded to a multiple of dp: layer buckets of consecutive layers of one model
 * chunk, the top layers first (the order in which the backward pass finishes them), each
 * at least `target` elements where the chunk's layers allow; and the edge buckets (the embedding
 * block; the tail: final norm and head), whose gradients are final only after the whole backward
 * (the embedding's last, a tied embedding's two copies summed between the first and last pipeline
 * stage after that).
 *
 * A layer bucket is reduced as soon as the backward has finished it: on its chunk's last
 * micro-batch of the step with ZeRO 0 and 1 (the gradients accumulate over the micro-batches in the
 * flat buffer), on every micro-batch with ZeRO-2. The reduction is enqueued on the
 * backend's side stream behind an event of the compute stream, so that it runs while the
 * backward of the layers below goes on (PyTorch DDP, Li et al. 2020; Megatron-LM's
 * overlapped gradient reduction); the compute stream waits for it once, before the
 * optimizer. Edge buckets are reduced after the backward, behind the layer buckets on the
 * same stream (all of the data-parallel group's calls on one stream, in issue order).
 *
 *  - ZeRO 0: each bucket all-reduced in place; every rank updates the whole buffer.
 *  - ZeRO-1 (Rajbhandari et al. 2020): each bucket reduce-scattered: rank r receives
 *    slice r of it (len / dp elements) in its state-layout gradient buffer (optim.h) and
 *    updates only its slices; the updated parameters are all-gathered bucket by bucket.
 *  - ZeRO-2: as ZeRO-1, and the layers' gradients are never whole: each micro-batch's
 *    gradients of a layer bucket are written (not accumulated) into one of two
 *    bucket-sized slots, reduce-scattered at once and added into this rank's slices; a
 *    slot is reused when its last reduction has finished. Only the embedding and tail
 *    blocks keep whole gradients. More communication than ZeRO-1 (one reduce-scatter per
 *    micro-batch), much less memory (harness/gradsync.c, common/memory_trainer.c).
 *
 * Without a data-parallel group there is one range (the whole buffer) and nothing to
 * reduce. On the CPU backend (no side stream) everything runs in order: the same buckets,
 * the same arithmetic, no overlap.
 */
#ifndef LB_GRADSYNC_H
#define LB_GRADSYNC_H

#include <stddef.h>

#include "common/model.h"
#include "harness/comm/comm.h"
#include "harness/model.h"
#include "harness/ops.h"
#include "harness/optim.h"

struct lb_bucket {
	size_t lo, hi;		/* flat elements [lo, hi); (hi - lo) % dp == 0 */
	int layer_lo, layer_hi; /* local layers [layer_lo, layer_hi); both -1 for an edge */
	size_t soff;		/* this rank's slice in the state layout */
};

struct lb_gradsync {
	const struct lb_ops *ops;
	struct lb_llama *m;
	struct lb_comm *dp; /* NULL: one data-parallel rank */
	int dp_rank, dp_size, zero;
	int overlap;	     /* 1: layer buckets on the side stream (when the backend has one) */
	int tag;	     /* device time tag of the overlapped calls (comm.h) */
	struct lb_bucket *b; /* n_layer_b layer buckets (top first), then the edge buckets */
	int n_b, n_layer_b;
	struct lb_range *r; /* the optimizer's ranges (this rank's slices), n_r */
	int n_r;
	size_t n_state;	  /* elements of the state layout */
	void *gstate;	  /* ZeRO >= 1: (n_state) f32 reduced gradients of this rank's slices */
	void *slot[2];	  /* ZeRO-2: (max layer-bucket length) f32 each */
	void *rs_tmp;	  /* ZeRO-2: (max layer-bucket length / dp) f32 */
	void *ev_ready;	  /* compute stream: a bucket's gradients are complete */
	void *ev_side;	  /* side stream: its last reduction */
	void *ev_slot[2]; /* side stream: the last reduction out of each slot */
	int slot_used[2];
	void **ev_stall; /* pairs around the compute stream's waits of this step */
	int n_stall, cap_stall;
	int fin_pair;  /* the pair of the wait before the optimizer, or -1 */
	int seq;       /* ZeRO-2: slot assignments so far */
	int first;     /* 1: this backward is its chunk's first of the step */
	int side_busy; /* 1: something was enqueued on the side stream this step */
	char err[256];
};

/*
 * Plan the buckets of model m for dp ranks (pure; no allocation on the backend): the
 * layer buckets top first, then the edge buckets that are not empty. *out (caller frees)
 * gets n entries; the soff of rank dp_rank's slices are filled in, and with dp = 1 the
 * buckets are the whole blocks. Returns 0 or -1 (out of memory).
 */
int lb_grad_buckets(const struct lb_llama *m, int dp, int dp_rank, size_t target,
		    struct lb_bucket **out, int *n, int *n_layer);

/*
 * Set up the reduction for model m (its buffers laid out for layout.dp; m->zero2 set for
 * ZeRO-2) over dp (NULL: none). Allocates the ZeRO state-layout gradients and the ZeRO-2
 * slots through ops, and arms m's backward hook. 0, or LB_E_OOM. Release with
 * lb_gradsync_free.
 */
int lb_gradsync_init(struct lb_gradsync *g, const struct lb_ops *ops, struct lb_llama *m,
		     struct lb_comm *dp, int dp_rank, int zero, size_t target, int overlap,
		     int tag);
void lb_gradsync_free(struct lb_gradsync *g);

/* The gradients the optimizer reads, in the state layout of g->r (f32). */
void *lb_gradsync_grads(struct lb_gradsync *g);

/* Before the step's first micro-batch. */
void lb_gradsync_step_begin(struct lb_gradsync *g);
/* Before each backward: first / last = 1 for the step's first / last one through the
 * model chunk it runs (with one chunk per stage, the rank's first and last). */
void lb_gradsync_backward(struct lb_gradsync *g, int first, int last);

/* After the last backward: with sequence parallelism, the norm-gain gradients that no
 * bucket has summed over tp yet (all of them without dp; the final norm's with dp).
 * 0 or an LB_E_* code. */
int lb_gradsync_sp_rest(struct lb_gradsync *g);
/* Then (after the tied-embedding exchange): the edge buckets (on the side stream when
 * overlapping), and the compute stream waits for the side stream. 0 or an LB_COMM_E*
 * code (g->err). */
int lb_gradsync_finish(struct lb_gradsync *g);
/* After the optimizer (ZeRO >= 1): every rank gets the updated slices. 0 or LB_COMM_E*. */
int lb_gradsync_gather_params(struct lb_gradsync *g);

/* After the step's end is synchronised: seconds the compute stream waited for the side
 * stream (all of them; *in_backward the part inside backward passes, ZeRO-2's slots). */
double lb_gradsync_stall_s(struct lb_gradsync *g, double *in_backward);

#endif
