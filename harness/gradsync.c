/*
 * The data-parallel gradient reduction: bucket plan, ZeRO slices, the backward hook that
 * reduces a bucket as soon as it is complete, and the waits that end it. See gradsync.h.
 */
#include "harness/gradsync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

int lb_grad_buckets(const struct lb_llama *m, int dp, int dp_rank, size_t target,
		    struct lb_bucket **out, int *n, int *n_layer)
{
	int nl = m->n_layers, k = 0;
	struct lb_bucket *b = calloc((size_t)nl + 2, sizeof(*b));
	size_t soff = 0, per = dp > 1 ? (size_t)dp : 1;

	*out = NULL;
	*n = *n_layer = 0;
	if (!b)
		return -1;
	for (int j = nl - 1; j >= 0;) { /* top first: the order the backward finishes them */
		int hi = j + 1, bottom = lb_llama_chunk_j0(m, j);

		/* a bucket stays within one model chunk: a chunk's layers are complete together
		 * (its last backward), and each backward runs one chunk */
		while (j >= bottom && (j + 1 == hi || m->lt[hi - 1].hi - m->lt[j + 1].lo < target))
			j--;
		b[k].layer_lo = j + 1;
		b[k].layer_hi = hi;
		b[k].lo = m->lt[j + 1].lo;
		b[k].hi = m->lt[hi - 1].hi;
		k++;
	}
	*n_layer = k;
	if (m->emb_hi > 0) {
		b[k].lo = 0;
		b[k].hi = m->emb_hi;
		b[k].layer_lo = b[k].layer_hi = -1;
		k++;
	}
	if (m->n_alloc > m->layers_hi) {
		b[k].lo = m->layers_hi;
		b[k].hi = m->n_alloc;
		b[k].layer_lo = b[k].layer_hi = -1;
		k++;
	}
	/* this rank's slices in the state layout, in flat order (the optimizer's ranges) */
	for (size_t at = 0; at < m->n_alloc;) {
		int i = 0;

		while (i < k && b[i].lo != at)
			i++;
		if (i == k) /* the blocks tile the buffer (model.c): not reached */
			break;
		b[i].soff = soff;
		soff += (b[i].hi - b[i].lo) / per;
		at = b[i].hi;
	}
	(void)dp_rank;
	*out = b;
	*n = k;
	return 0;
}

/* The first element of rank r's slice of bucket b. */
static size_t slice_lo(const struct lb_gradsync *g, const struct lb_bucket *b)
{
	return b->lo + (size_t)g->dp_rank * ((b->hi - b->lo) / (size_t)g->dp_size);
}

int lb_gradsync_init(struct lb_gradsync *g, const struct lb_ops *ops, struct lb_llama *m,
		     struct lb_comm *dp, int dp_rank, int zero, size_t target, int overlap, int tag)
{
	size_t max_len = 0;

	memset(g, 0, sizeof(*g));
	g->ops = ops;
	g->m = m;
	g->dp = dp && dp->size > 1 ? dp : NULL;
	g->dp_size = g->dp ? g->dp->size : 1;
	g->dp_rank = g->dp ? dp_rank : 0;
	g->zero = g->dp ? zero : 0;
	g->overlap = overlap && ops->side_stream() != NULL;
	g->tag = tag;
	if (lb_grad_buckets(m, g->dp_size, g->dp_rank, target ? target : 1, &g->b, &g->n_b,
			    &g->n_layer_b))
		return LB_E_OOM;
	if (!g->zero) { /* one range: the whole buffer, state layout = flat layout */
		g->r = calloc(1, sizeof(*g->r));
		if (!g->r)
			return LB_E_OOM;
		g->r[0].lo = 0;
		g->r[0].hi = m->n_alloc;
		g->n_r = 1;
		g->n_state = m->n_alloc;
	} else {
		g->r = calloc((size_t)g->n_b, sizeof(*g->r));
		if (!g->r)
			return LB_E_OOM;
		/* ascending flat order (the buckets are top layer first) */
		for (int i = 0; i < g->n_b; i++) {
			const struct lb_bucket *b = &g->b[i];
			size_t len = (b->hi - b->lo) / (size_t)g->dp_size;

			g->r[i].lo = slice_lo(g, b);
			g->r[i].hi = g->r[i].lo + len;
			g->r[i].soff = b->soff;
			g->n_state += len;
		}
		for (int i = 1; i < g->n_b; i++) /* insertion sort by lo: n_b is small */
			for (int j = i; j > 0 && g->r[j].lo < g->r[j - 1].lo; j--) {
				struct lb_range x = g->r[j];

				g->r[j] = g->r[j - 1];
				g->r[j - 1] = x;
			}
		g->n_r = g->n_b;
		if (!(g->gstate = ops->alloc(g->n_state ? g->n_state : 1, LB_K_F32)))
			return LB_E_OOM;
	}
	if (m->zero2 && g->zero) {
		for (int i = 0; i < g->n_layer_b; i++)
			if (g->b[i].hi - g->b[i].lo > max_len)
				max_len = g->b[i].hi - g->b[i].lo;
		for (int s = 0; s < 2; s++)
			if (!(g->slot[s] = ops->alloc(max_len ? max_len : 1, LB_K_F32)))
				return LB_E_OOM;
		if (!(g->rs_tmp = ops->alloc(max_len / (size_t)g->dp_size + 1, LB_K_F32)))
			return LB_E_OOM;
	}
	if (!(g->ev_ready = ops->event_create()) || !(g->ev_side = ops->event_create()) ||
	    !(g->ev_slot[0] = ops->event_create()) || !(g->ev_slot[1] = ops->event_create()))
		return LB_E_OOM;
	if (g->dp) {
		m->bwd_hook = NULL; /* armed per backward (lb_gradsync_backward) */
		m->bwd_hook_arg = g;
	}
	return 0;
}

void lb_gradsync_free(struct lb_gradsync *g)
{
	const struct lb_ops *o = g->ops;

	if (!o)
		return;
	if (g->gstate)
		o->free_(g->gstate);
	for (int s = 0; s < 2; s++) {
		if (g->slot[s])
			o->free_(g->slot[s]);
		if (g->ev_slot[s])
			o->event_destroy(g->ev_slot[s]);
	}
	if (g->rs_tmp)
		o->free_(g->rs_tmp);
	if (g->ev_ready)
		o->event_destroy(g->ev_ready);
	if (g->ev_side)
		o->event_destroy(g->ev_side);
	for (int i = 0; i < g->cap_stall; i++)
		if (g->ev_stall[i])
			o->event_destroy(g->ev_stall[i]);
	free(g->ev_stall);
	free(g->b);
	free(g->r);
	if (g->m && g->m->bwd_hook_arg == g) {
		g->m->bwd_hook = NULL;
		g->m->bwd_hook_arg = NULL;
	}
	memset(g, 0, sizeof(*g));
}

void *lb_gradsync_grads(struct lb_gradsync *g)
{
	return g->gstate ? g->gstate : g->m->grads;
}

/* --- the time the compute stream waits --- */

/* The compute stream waits for ev, between two events of the stall pool (a wait that
 * cannot be measured, the pool full and no event to be had, still waits). */
static void stall_wait(struct lb_gradsync *g, void *ev, int in_bwd)
{
	const struct lb_ops *o = g->ops;

	if (g->n_stall + 2 > g->cap_stall) {
		int cap = g->cap_stall ? 2 * g->cap_stall : 16;
		void **a = realloc(g->ev_stall, (size_t)cap * sizeof(*a));

		if (a) {
			for (int i = g->cap_stall; i < cap; i++)
				a[i] = o->event_create();
			g->ev_stall = a;
			g->cap_stall = cap;
		}
	}
	if (g->n_stall + 2 > g->cap_stall || !g->ev_stall[g->n_stall] ||
	    !g->ev_stall[g->n_stall + 1]) {
		o->wait_event(ev);
		return;
	}
	if (!in_bwd)
		g->fin_pair = g->n_stall;
	o->event_record(g->ev_stall[g->n_stall]);
	o->wait_event(ev);
	o->event_record(g->ev_stall[g->n_stall + 1]);
	g->n_stall += 2;
}

double lb_gradsync_stall_s(struct lb_gradsync *g, double *in_backward)
{
	double all = 0, bwd = 0;

	for (int i = 0; i + 1 < g->n_stall; i += 2) {
		double dt = g->ops->event_elapsed(g->ev_stall[i], g->ev_stall[i + 1]);

		all += dt;
		if (i != g->fin_pair) /* ZeRO-2's slot waits, inside backward passes */
			bwd += dt;
	}
	if (in_backward)
		*in_backward = bwd;
	return all;
}

/* --- one step --- */

void lb_gradsync_step_begin(struct lb_gradsync *g)
{
	g->n_stall = 0;
	g->fin_pair = -1;
	g->side_busy = 0;
}

static int hook(void *arg, int j, int after);

void lb_gradsync_backward(struct lb_gradsync *g, int first, int last)
{
	struct lb_llama *m = g->m;

	g->first = first;
	if (!g->dp)
		return;
	m->grad_fresh = m->zero2;
	/* the reduction hooks into the chunk's last backward (every one with ZeRO-2) */
	m->bwd_hook = last || m->zero2 ? hook : NULL;
}

/* Tag the overlapped device calls (NCCL) so the trainer does not count them as exposed
 * (comm.h set_tag: on every communicator of the data-parallel group's world). */
static int set_tag(struct lb_gradsync *g, int tag)
{
	return lb_comm_set_tag(g->dp, tag);
}

/* A layer bucket's reduction, enqueued on the current stream: ZeRO 0 all-reduce in
 * place, ZeRO-1 reduce-scatter into this rank's slice, ZeRO-2 reduce-scatter out of the
 * slot (added into the slice after the first micro-batch). */
static int reduce_layer_bucket(struct lb_gradsync *g, const struct lb_bucket *b, void *src)
{
	const struct lb_ops *o = g->ops;
	struct lb_comm *c = g->dp;
	size_t len = b->hi - b->lo, part = len / (size_t)g->dp_size;
	void *dst = lb_at(o, g->gstate, b->soff, LB_K_F32);
	int rc;

	if (!g->zero)
		return c->ops->all_reduce(c, src, src, len, o->dtype[LB_K_F32], LB_SUM,
					  o->stream());
	if (!g->m->zero2 || g->first)
		return c->ops->reduce_scatter(c, src, dst, part, o->dtype[LB_K_F32], LB_SUM,
					      o->stream());
	rc = c->ops->reduce_scatter(c, src, g->rs_tmp, part, o->dtype[LB_K_F32], LB_SUM,
				    o->stream());
	if (rc == 0)
		o->acc(dst, g->rs_tmp, part);
	return rc;
}

/* The bucket whose top layer (after = 0) or bottom layer (after = 1) is j, or NULL. */
static const struct lb_bucket *bucket_at(const struct lb_gradsync *g, int j, int after)
{
	for (int i = 0; i < g->n_layer_b; i++)
		if ((after ? g->b[i].layer_lo : g->b[i].layer_hi - 1) == j)
			return &g->b[i];
	return NULL;
}

static int hook(void *arg, int j, int after)
{
	struct lb_gradsync *g = arg;
	struct lb_llama *m = g->m;
	const struct lb_ops *o = g->ops;
	const struct lb_bucket *b = bucket_at(g, j, after);
	double t0;
	int rc, s, old = -1;

	if (!b)
		return 0;
	if (!after) { /* ZeRO-2: a free slot for the bucket's gradients */
		if (!m->zero2)
			return 0;
		s = g->seq++ & 1;
		if (g->slot_used[s])
			stall_wait(g, g->ev_slot[s], 1);
		g->slot_used[s] = 1;
		for (int k = b->layer_lo; k < b->layer_hi; k++)
			m->gmap[k] = lb_at(o, g->slot[s], m->lt[k].lo - b->lo, LB_K_F32);
		return 0;
	}
	/* complete: with SP its norm gains summed over tp first (on the compute stream) */
	if ((rc = lb_llama_sync_sp_grads(m, b->layer_lo, b->layer_hi, 0)))
		return rc;
	s = (g->seq - 1) & 1;
	t0 = lb_now_s();
	if (g->overlap) {
		old = set_tag(g, g->tag);
		o->event_record(g->ev_ready);
		o->use_stream(o->side_stream());
		o->wait_event(g->ev_ready);
	}
	rc = reduce_layer_bucket(g, b, m->zero2 ? g->slot[s] : lb_at(o, m->grads, b->lo, LB_K_F32));
	if (m->zero2)
		o->event_record(g->ev_slot[s]);
	if (g->overlap) {
		o->event_record(g->ev_side);
		o->use_stream(NULL);
		g->side_busy = 1;
		set_tag(g, old);
	}
	m->comm_s += lb_now_s() - t0; /* host time: all of it on the CPU and when staged */
	if (rc) {
		snprintf(g->err, sizeof(g->err), "data-parallel gradient %s of layers %d-%d: %s",
			 g->zero ? "reduce-scatter" : "all-reduce", lb_llama_layer(m, b->layer_lo),
			 lb_llama_layer(m, b->layer_hi - 1), lb_comm_strerror(rc));
		return lb_comm_rc_status(rc);
	}
	return 0;
}

/* --- the end of the backward --- */

int lb_gradsync_sp_rest(struct lb_gradsync *g)
{
	struct lb_llama *m = g->m;

	if (g->dp) /* the layers' were summed as their buckets completed */
		return lb_llama_sync_sp_grads(m, 0, 0, 1);
	return lb_llama_sync_sp_grads(m, 0, m->n_layers, 1);
}

int lb_gradsync_finish(struct lb_gradsync *g)
{
	const struct lb_ops *o = g->ops;
	struct lb_llama *m = g->m;
	struct lb_comm *c = g->dp;
	int rc = 0, old = -1;

	m->bwd_hook = NULL;
	m->grad_fresh = 0;
	if (!c)
		return 0;
	/* behind the layer buckets on the second stream: NCCL orders the calls of one
	 * communicator as they are issued, so they all go on one stream */
	if (g->overlap) {
		old = set_tag(g, g->tag); /* counted as the compute stream's wait below */
		o->event_record(g->ev_ready);
		o->use_stream(o->side_stream());
		o->wait_event(g->ev_ready);
	}
	for (int i = g->n_layer_b; rc == 0 && i < g->n_b; i++) {
		const struct lb_bucket *b = &g->b[i];
		size_t len = b->hi - b->lo;
		void *src = lb_llama_grad_at(m, b->lo);

		if (!g->zero)
			rc = c->ops->all_reduce(c, src, src, len, o->dtype[LB_K_F32], LB_SUM,
						o->stream());
		else
			rc = c->ops->reduce_scatter(c, src, lb_at(o, g->gstate, b->soff, LB_K_F32),
						    len / (size_t)g->dp_size, o->dtype[LB_K_F32],
						    LB_SUM, o->stream());
		if (rc)
			snprintf(g->err, sizeof(g->err), "data-parallel gradient %s of the %s: %s",
				 g->zero ? "reduce-scatter" : "all-reduce",
				 b->lo == 0 ? "embedding" : "final norm and head",
				 lb_comm_strerror(rc));
	}
	if (g->overlap) {
		o->event_record(g->ev_side);
		o->use_stream(NULL);
		set_tag(g, old);
		g->side_busy = 1;
	}
	if (g->side_busy) /* the reductions, before the optimizer reads them */
		stall_wait(g, g->ev_side, 0);
	g->slot_used[0] = g->slot_used[1] = 0; /* the wait covered every slot's reduction */
	return rc;
}

int lb_gradsync_gather_params(struct lb_gradsync *g)
{
	const struct lb_ops *o = g->ops;
	struct lb_comm *c = g->dp;

	if (!c || !g->zero)
		return 0;
	for (int i = 0; i < g->n_b; i++) {
		const struct lb_bucket *b = &g->b[i];
		size_t part = (b->hi - b->lo) / (size_t)g->dp_size;
		int rc = c->ops->all_gather(c, lb_at(o, g->m->params, slice_lo(g, b), LB_K_ACT),
					    lb_at(o, g->m->params, b->lo, LB_K_ACT), part,
					    o->dtype[LB_K_ACT], o->stream());

		if (rc) {
			snprintf(g->err, sizeof(g->err),
				 "data-parallel parameter all-gather of bucket %d: %s", i,
				 lb_comm_strerror(rc));
			return rc;
		}
	}
	return 0;
}
