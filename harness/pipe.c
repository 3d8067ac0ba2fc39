/*
 * The pipeline schedule simulator and the executor (pipe.h). The simulator is pure;
 * the executor walks a list over a communicator and callbacks.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/comm/comm.h"
#include "harness/pipe.h"

/* ---- simulation ---- */

struct sim {
	const struct lb_schedule *st;
	int pp, nm, v;
	int *pc;	   /* per stage: next step */
	unsigned char *ok; /* per stage, per step: the send/recv completed */
	int *ofs;	   /* per stage: offset of its steps in ok */
	/* per stage, chunk and micro-batch (cell): 1 once the step ran */
	unsigned char *fwd, *bwd, *got_act, *got_grad;
	int *in_flight;
	struct lb_sim_report *rep;
};

static int fail(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct sim *s, const char *fmt, ...)
{
	va_list ap;

	if (!s->rep->error[0]) {
		va_start(ap, fmt);
		vsnprintf(s->rep->error, sizeof(s->rep->error), fmt, ap);
		va_end(ap);
	}
	return -1;
}

static size_t cell(const struct sim *s, int stage, int chunk, int micro)
{
	return ((size_t)stage * (size_t)s->v + (size_t)chunk) * (size_t)s->nm + (size_t)micro;
}

/* The chunk's number in pipeline order (chunk * pp + stage). */
static int vstage(const struct sim *s, int stage, int chunk)
{
	return chunk * s->pp + stage;
}

/* End (exclusive) of the group starting at step i of stage st. */
static int group_stop(const struct lb_schedule *sc, int i)
{
	int g = sc->steps[i].group, j = i;

	while (j < sc->n_steps && sc->steps[j].group == g)
		j++;
	return j;
}

static int is_comm(const struct lb_step *st)
{
	return !lb_step_is_compute(st->kind);
}

static enum lb_step_kind partner_kind(enum lb_step_kind k)
{
	switch (k) {
	case LB_STEP_SEND_ACT:
		return LB_STEP_RECV_ACT;
	case LB_STEP_RECV_ACT:
		return LB_STEP_SEND_ACT;
	case LB_STEP_SEND_GRAD:
		return LB_STEP_RECV_GRAD;
	case LB_STEP_RECV_GRAD:
		return LB_STEP_SEND_GRAD;
	default:
		return k;
	}
}

/* The chunk (in pipeline order) a send/recv step talks to: the next for an activation
 * sent or a gradient received, the previous otherwise. */
static int target(const struct sim *s, int stage, const struct lb_step *st)
{
	int vs = vstage(s, stage, st->chunk);

	return st->kind == LB_STEP_SEND_ACT || st->kind == LB_STEP_RECV_GRAD ? vs + 1 : vs - 1;
}

/* A send/recv about to be posted: its peer and its data must be right. */
static int check_comm(struct sim *s, int stage, const struct lb_step *st)
{
	int t, want;

	if (st->micro < 0 || st->micro >= s->nm || st->chunk < 0 || st->chunk >= s->v)
		return fail(s, "stage %d: %s of micro-batch %d (chunk %d), which does not exist",
			    stage, lb_step_name(st->kind), st->micro, st->chunk);
	t = target(s, stage, st);
	want = t < 0 ? -1 : t % s->pp;
	if (st->peer != want || t < 0 || t >= s->pp * s->v) {
		if (s->v == 1)
			return fail(s,
				    "stage %d: %s of micro-batch %d with stage %d, which is not %s",
				    stage, lb_step_name(st->kind), st->micro, st->peer,
				    t < 0 || t >= s->pp ? "a stage" : "its neighbour");
		return fail(s,
			    "stage %d: %s of micro-batch %d, chunk %d, with stage %d, which does "
			    "not hold %s",
			    stage, lb_step_name(st->kind), st->micro, st->chunk, st->peer,
			    t < 0 || t >= s->pp * s->v ? "a chunk there"
						       : "the neighbouring chunk");
	}
	if (st->kind == LB_STEP_SEND_ACT && !s->fwd[cell(s, stage, st->chunk, st->micro)])
		return fail(s,
			    "stage %d: sends the activation of micro-batch %d before its forward",
			    stage, st->micro);
	if (st->kind == LB_STEP_SEND_GRAD && !s->bwd[cell(s, stage, st->chunk, st->micro)])
		return fail(s, "stage %d: sends the gradient of micro-batch %d before its backward",
			    stage, st->micro);
	return 0;
}

/* Match the posted, unfinished operations of stage a's current group with their
 * partners in the peers' current groups. Messages from one stage to another form one
 * ordered channel whatever they carry (as NCCL's and the shared-memory communicator's
 * do): a send meets the peer's earliest unfinished receive from this stage, which must
 * be its partner. Returns the number matched, or -1. */
static int match_group(struct sim *s, int a)
{
	const struct lb_schedule *sa = &s->st[a];
	int start = s->pc[a], stop = group_stop(sa, start), i, j, matched = 0;

	for (i = start; i < stop; i++) {
		const struct lb_step *op = &sa->steps[i], *po = NULL;
		const struct lb_schedule *sb;
		int b = op->peer, bstart, bstop;

		if (s->ok[s->ofs[a] + i])
			continue;
		/* the earliest unfinished op of this direction to this peer goes first */
		for (j = start; j < i; j++)
			if (!s->ok[s->ofs[a] + j] &&
			    lb_step_is_send(sa->steps[j].kind) == lb_step_is_send(op->kind) &&
			    sa->steps[j].peer == b)
				break;
		if (j < i)
			continue;
		sb = &s->st[b];
		bstart = s->pc[b];
		if (bstart >= sb->n_steps || !is_comm(&sb->steps[bstart]))
			continue; /* the peer has not posted anything */
		bstop = group_stop(sb, bstart);
		for (j = bstart; j < bstop; j++) {
			const struct lb_step *x = &sb->steps[j];

			if (!s->ok[s->ofs[b] + j] && x->peer == a &&
			    lb_step_is_send(x->kind) != lb_step_is_send(op->kind)) {
				po = x;
				break;
			}
		}
		if (!po)
			continue;
		if (po->kind != partner_kind(op->kind) || po->micro != op->micro ||
		    vstage(s, b, po->chunk) != target(s, a, op)) {
			if (s->v == 1)
				return fail(s,
					    "stage %d: %s of micro-batch %d meets stage %d's %s of "
					    "micro-batch %d (messages between two stages must come "
					    "in the same order on both sides)",
					    a, lb_step_name(op->kind), op->micro, b,
					    lb_step_name(po->kind), po->micro);
			return fail(s,
				    "stage %d: %s of micro-batch %d, chunk %d, meets stage %d's "
				    "%s of micro-batch %d, chunk %d (messages between two stages "
				    "must come in the same order on both sides)",
				    a, lb_step_name(op->kind), op->micro, op->chunk, b,
				    lb_step_name(po->kind), po->micro, po->chunk);
		}
		s->ok[s->ofs[a] + i] = 1;
		s->ok[s->ofs[b] + j] = 1;
		if (op->kind == LB_STEP_RECV_ACT)
			s->got_act[cell(s, a, op->chunk, op->micro)] = 1;
		if (po->kind == LB_STEP_RECV_ACT)
			s->got_act[cell(s, b, po->chunk, po->micro)] = 1;
		if (op->kind == LB_STEP_RECV_GRAD)
			s->got_grad[cell(s, a, op->chunk, op->micro)] = 1;
		if (po->kind == LB_STEP_RECV_GRAD)
			s->got_grad[cell(s, b, po->chunk, po->micro)] = 1;
		matched++;
	}
	return matched;
}

static int run_compute(struct sim *s, int a)
{
	const struct lb_step *st = &s->st[a].steps[s->pc[a]];
	int vs;
	size_t k;

	if (st->micro < 0 || st->micro >= s->nm || st->chunk < 0 || st->chunk >= s->v)
		return fail(s, "stage %d: %s of micro-batch %d (chunk %d), which does not exist", a,
			    lb_step_name(st->kind), st->micro, st->chunk);
	vs = vstage(s, a, st->chunk);
	k = cell(s, a, st->chunk, st->micro);
	if (st->kind == LB_STEP_FORWARD) {
		if (s->fwd[k])
			return fail(s, "stage %d: second forward of micro-batch %d", a, st->micro);
		if (vs > 0 && !s->got_act[k])
			return fail(s,
				    "stage %d: forward of micro-batch %d before its activation "
				    "arrived",
				    a, st->micro);
		s->fwd[k] = 1;
		s->in_flight[a]++;
		if (s->in_flight[a] > s->rep->max_in_flight[a])
			s->rep->max_in_flight[a] = s->in_flight[a];
	} else {
		if (!s->fwd[k])
			return fail(s, "stage %d: backward of micro-batch %d before its forward", a,
				    st->micro);
		if (s->bwd[k])
			return fail(s, "stage %d: second backward of micro-batch %d", a, st->micro);
		if (vs < s->pp * s->v - 1 && !s->got_grad[k])
			return fail(s,
				    "stage %d: backward of micro-batch %d before its gradient "
				    "arrived",
				    a, st->micro);
		s->bwd[k] = 1;
		s->in_flight[a]--;
	}
	s->rep->busy[a]++;
	s->pc[a]++;
	return 0;
}

static int simulate(struct sim *s)
{
	int pp = s->pp, a, i, changed;

	for (;;) {
		int ran = 0, left = 0;

		/* messages complete in zero time: settle every group that can */
		do {
			changed = 0;
			for (a = 0; a < pp; a++) {
				const struct lb_schedule *sa = &s->st[a];
				int stop, m;

				if (s->pc[a] >= sa->n_steps || !is_comm(&sa->steps[s->pc[a]]))
					continue;
				stop = group_stop(sa, s->pc[a]);
				for (i = s->pc[a]; i < stop; i++)
					if (check_comm(s, a, &sa->steps[i]))
						return -1;
				if ((m = match_group(s, a)) < 0)
					return -1;
				if (m)
					changed = 1;
				for (i = s->pc[a]; i < stop && s->ok[s->ofs[a] + i]; i++)
					;
				if (i == stop) {
					s->pc[a] = stop;
					changed = 1;
				}
			}
		} while (changed);
		/* one unit of compute on every stage that can */
		for (a = 0; a < pp; a++) {
			const struct lb_schedule *sa = &s->st[a];

			if (s->pc[a] >= sa->n_steps)
				continue;
			left = 1;
			if (is_comm(&sa->steps[s->pc[a]]))
				continue;
			if (run_compute(s, a))
				return -1;
			ran = 1;
		}
		if (ran) {
			s->rep->time++;
			continue;
		}
		if (!left)
			break;
		s->rep->deadlock = 1;
		for (a = 0; a < pp; a++) {
			const struct lb_schedule *sa = &s->st[a];

			if (s->pc[a] < sa->n_steps) {
				const struct lb_step *st = &sa->steps[s->pc[a]];

				return fail(s,
					    "deadlock: stage %d waits in %s of micro-batch %d with "
					    "stage %d (step %d of %d)",
					    a, lb_step_name(st->kind), st->micro, st->peer,
					    s->pc[a], sa->n_steps);
			}
		}
	}
	for (a = 0; a < pp; a++)
		for (int c = 0; c < s->v; c++)
			for (i = 0; i < s->nm; i++) {
				size_t k = cell(s, a, c, i);

				if (!s->fwd[k] || !s->bwd[k]) {
					if (s->v == 1)
						return fail(s, "stage %d: micro-batch %d has no %s",
							    a, i,
							    s->fwd[k] ? "backward" : "forward");
					return fail(s,
						    "stage %d: micro-batch %d has no %s through "
						    "chunk %d",
						    a, i, s->fwd[k] ? "backward" : "forward", c);
				}
			}
	return 0;
}

int lb_pipe_simulate(const struct lb_schedule *stages, int pp, struct lb_sim_report *rep)
{
	struct sim s;
	size_t total = 0, cells;
	long busy = 0;
	int a, rc;

	memset(rep, 0, sizeof(*rep));
	if (pp < 1 || pp > LB_SCHED_MAX_PP) {
		snprintf(rep->error, sizeof(rep->error), "pipeline of %d stages: expected 1 to %d",
			 pp, LB_SCHED_MAX_PP);
		return -1;
	}
	for (a = 0; a < pp; a++) {
		if (stages[a].stage != a || stages[a].pp != pp ||
		    stages[a].n_micro != stages[0].n_micro ||
		    stages[a].chunks != stages[0].chunks || stages[a].chunks < 1) {
			snprintf(rep->error, sizeof(rep->error),
				 "list %d is for stage %d of %d with %d micro-batches and %d "
				 "chunks; expected stage %d of %d with %d and %d",
				 a, stages[a].stage, stages[a].pp, stages[a].n_micro,
				 stages[a].chunks, a, pp, stages[0].n_micro, stages[0].chunks);
			return -1;
		}
		total += (size_t)stages[a].n_steps;
	}
	memset(&s, 0, sizeof(s));
	s.st = stages;
	s.pp = pp;
	s.nm = stages[0].n_micro;
	s.v = stages[0].chunks;
	s.rep = rep;
	cells = (size_t)pp * (size_t)s.v * (size_t)s.nm;
	s.pc = calloc((size_t)pp, sizeof(int));
	s.ofs = calloc((size_t)pp, sizeof(int));
	s.in_flight = calloc((size_t)pp, sizeof(int));
	s.ok = calloc(total + 1, 1);
	s.fwd = calloc(cells, 1);
	s.bwd = calloc(cells, 1);
	s.got_act = calloc(cells, 1);
	s.got_grad = calloc(cells, 1);
	if (!s.pc || !s.ofs || !s.in_flight || !s.ok || !s.fwd || !s.bwd || !s.got_act ||
	    !s.got_grad) {
		snprintf(rep->error, sizeof(rep->error), "pipeline simulation: out of memory");
		rc = -1;
		goto out;
	}
	for (a = 1; a < pp; a++)
		s.ofs[a] = s.ofs[a - 1] + stages[a - 1].n_steps;
	rc = simulate(&s);
	for (a = 0; a < pp; a++)
		busy += rep->busy[a];
	rep->bubble = rep->time ? 1.0 - (double)busy / ((double)pp * rep->time) : 0.0;
	rep->bubble_ratio = busy ? ((double)pp * rep->time - (double)busy) / (double)busy : 0.0;
out:
	free(s.pc);
	free(s.ofs);
	free(s.in_flight);
	free(s.ok);
	free(s.fwd);
	free(s.bwd);
	free(s.got_act);
	free(s.got_grad);
	return rc;
}

/* ---- execution ---- */

static int comm_fail(const struct lb_pipe_ops *ops, void *ctx, const struct lb_step *st, int rc)
{
	return ops->comm_failed ? ops->comm_failed(ctx, st, rc) : rc;
}

int lb_pipe_execute(const struct lb_schedule *s, struct lb_comm *pp,
			const struct lb_pipe_ops *ops, void *ctx)
{
	const struct lb_step *at;
	int i = 0, rc;

	if (pp && (pp->rank != s->stage || pp->size != s->pp))
		return comm_fail(ops, ctx, NULL, LB_COMM_EFAIL);
	while (i < s->n_steps) {
		const struct lb_step *st = &s->steps[i];

		if (lb_step_is_compute(st->kind)) {
			rc = st->kind == LB_STEP_FORWARD ? ops->forward(ctx, st)
							 : ops->backward(ctx, st);
			if (rc)
				return rc;
			i++;
			continue;
		}
		if (!pp)
			return comm_fail(ops, ctx, st, LB_COMM_EFAIL);
		if (ops->group)
			ops->group(ctx, st, 0);
		at = st;
		rc = pp->ops->group_start(pp);
		while (rc == 0) { /* the group: lb_schedule_group_last says where it ends */
			const struct lb_step *x = &s->steps[i];
			size_t count = 0;
			enum lb_dtype dtype = LB_F32;
			void *buf = ops->buffer(ctx, x, &count, &dtype);

			at = x;
			if (!buf)
				rc = LB_COMM_EFAIL;
			else if (lb_step_is_send(x->kind))
				rc = pp->ops->send(pp, buf, count, dtype, x->peer, ops->stream);
			else
				rc = pp->ops->recv(pp, buf, count, dtype, x->peer, ops->stream);
			if (rc) {
				pp->ops->group_end(pp);
				break;
			}
			if (lb_schedule_group_last(s, i++)) {
				at = st;
				rc = pp->ops->group_end(pp);
				break;
			}
		}
		if (ops->group)
			ops->group(ctx, st, 1);
		if (rc)
			return comm_fail(ops, ctx, at, rc);
	}
	return 0;
}
