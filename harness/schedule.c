/*
 * Pipeline schedules as data, and their simulator (schedule.h). The 1F1B list follows
 * Megatron-LM's forward_backward_pipelining_without_interleaving: warm-up
 * (recv_forward, forward, send_forward) pp - stage - 1 times, then steady state
 * (forward, send_forward_recv_backward, backward, send_backward_recv_forward), then
 * cool-down (recv_backward, backward, send_backward). The simulator is pure; the
 * executor at the end walks a list over a communicator and callbacks.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/comm.h"
#include "harness/schedule.h"

const char *lb_sched_name(enum lb_sched_kind k)
{
	return k == LB_SCHED_GPIPE ? "gpipe" : k == LB_SCHED_1F1B ? "1f1b" : "unknown";
}

int lb_sched_parse(const char *s, enum lb_sched_kind *out)
{
	if (!strcmp(s, "1f1b"))
		*out = LB_SCHED_1F1B;
	else if (!strcmp(s, "gpipe"))
		*out = LB_SCHED_GPIPE;
	else
		return -1;
	return 0;
}

const char *lb_step_name(enum lb_step_kind k)
{
	static const char *const names[] = {"forward",	"backward",  "send_act",
					    "recv_act", "send_grad", "recv_grad"};

	return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "unknown";
}

/* ---- building ---- */

struct builder {
	struct lb_schedule *s;
	int cap;
	int next_group;
	int open; /* 1 while a group is being added */
	int failed;
};

static void add(struct builder *b, enum lb_step_kind kind, int micro, int peer)
{
	struct lb_step *st;

	if (b->failed)
		return;
	if (b->s->n_steps == b->cap) {
		int cap = b->cap ? b->cap * 2 : 16;
		struct lb_step *p = realloc(b->s->steps, sizeof(*p) * (size_t)cap);

		if (!p) {
			b->failed = 1;
			return;
		}
		b->s->steps = p;
		b->cap = cap;
	}
	st = &b->s->steps[b->s->n_steps++];
	st->kind = kind;
	st->micro = micro;
	st->peer = peer;
	st->group = -1;
	if (kind != LB_STEP_FORWARD && kind != LB_STEP_BACKWARD)
		st->group = b->open ? b->next_group : b->next_group++;
}

static void group_begin(struct builder *b)
{
	b->open = 1;
}

static void group_end(struct builder *b)
{
	int n = b->s->n_steps;

	b->open = 0;
	if (n > 0 && b->s->steps[n - 1].group == b->next_group)
		b->next_group++; /* the group got at least one step */
}

/* The communication helpers of Megatron's p2p_communication, skipping the missing
 * neighbour at either end. */
static void recv_forward(struct builder *b, int m)
{
	if (b->s->stage > 0)
		add(b, LB_STEP_RECV_ACT, m, b->s->stage - 1);
}

static void send_forward(struct builder *b, int m)
{
	if (b->s->stage < b->s->pp - 1)
		add(b, LB_STEP_SEND_ACT, m, b->s->stage + 1);
}

static void recv_backward(struct builder *b, int m)
{
	if (b->s->stage < b->s->pp - 1)
		add(b, LB_STEP_RECV_GRAD, m, b->s->stage + 1);
}

static void send_backward(struct builder *b, int m)
{
	if (b->s->stage > 0)
		add(b, LB_STEP_SEND_GRAD, m, b->s->stage - 1);
}

static void build_1f1b(struct builder *b)
{
	int pp = b->s->pp, stage = b->s->stage, nm = b->s->n_micro, i;
	int warmup = pp - stage - 1 < nm ? pp - stage - 1 : nm;
	int remaining = nm - warmup;

	for (i = 0; i < warmup; i++) {
		recv_forward(b, i);
		add(b, LB_STEP_FORWARD, i, -1);
		send_forward(b, i);
	}
	if (remaining > 0)
		recv_forward(b, warmup);
	for (i = 0; i < remaining; i++) {
		int fm = warmup + i, bm = i;

		add(b, LB_STEP_FORWARD, fm, -1);
		group_begin(b); /* send_forward_recv_backward */
		send_forward(b, fm);
		recv_backward(b, bm);
		group_end(b);
		add(b, LB_STEP_BACKWARD, bm, -1);
		if (i == remaining - 1) {
			send_backward(b, bm);
		} else {
			group_begin(b); /* send_backward_recv_forward */
			send_backward(b, bm);
			recv_forward(b, fm + 1);
			group_end(b);
		}
	}
	for (i = 0; i < warmup; i++) {
		int bm = remaining + i;

		recv_backward(b, bm);
		add(b, LB_STEP_BACKWARD, bm, -1);
		send_backward(b, bm);
	}
}

static void build_gpipe(struct builder *b)
{
	int nm = b->s->n_micro, i;

	for (i = 0; i < nm; i++) {
		recv_forward(b, i);
		add(b, LB_STEP_FORWARD, i, -1);
		send_forward(b, i);
	}
	for (i = 0; i < nm; i++) {
		recv_backward(b, i);
		add(b, LB_STEP_BACKWARD, i, -1);
		send_backward(b, i);
	}
}

int lb_schedule_build(enum lb_sched_kind kind, int pp, int stage, int n_micro,
		      struct lb_schedule *out, char *err, size_t errlen)
{
	struct builder b;

	memset(out, 0, sizeof(*out));
	if (pp < 1 || pp > LB_SCHED_MAX_PP) {
		snprintf(err, errlen, "pipeline of %d stages: expected 1 to %d", pp,
			 LB_SCHED_MAX_PP);
		return -1;
	}
	if (stage < 0 || stage >= pp) {
		snprintf(err, errlen, "stage %d is not in a pipeline of %d stages", stage, pp);
		return -1;
	}
	if (n_micro < 1 || n_micro > 1 << 20) {
		snprintf(err, errlen, "%d micro-batches: expected 1 to %d", n_micro, 1 << 20);
		return -1;
	}
	if (kind != LB_SCHED_1F1B && kind != LB_SCHED_GPIPE) {
		snprintf(err, errlen, "unknown pipeline schedule %d (1f1b or gpipe)", (int)kind);
		return -1;
	}
	out->kind = kind;
	out->pp = pp;
	out->stage = stage;
	out->n_micro = n_micro;
	memset(&b, 0, sizeof(b));
	b.s = out;
	if (kind == LB_SCHED_1F1B)
		build_1f1b(&b);
	else
		build_gpipe(&b);
	if (b.failed) {
		lb_schedule_release(out);
		snprintf(err, errlen, "pipeline schedule: out of memory");
		return -1;
	}
	return 0;
}

void lb_schedule_release(struct lb_schedule *s)
{
	free(s->steps);
	s->steps = NULL;
	s->n_steps = 0;
}

int lb_schedule_format(const struct lb_schedule *s, char *buf, size_t len)
{
	static const char *const abbr[] = {"F", "B", "sa", "ra", "sg", "rg"};
	size_t used = 0;
	int i, n;

	if (len)
		buf[0] = 0;
	for (i = 0; i < s->n_steps; i++) {
		const struct lb_step *st = &s->steps[i];
		int opens = st->group >= 0 && (i == 0 || s->steps[i - 1].group != st->group);
		int closes =
		    st->group >= 0 && (i == s->n_steps - 1 || s->steps[i + 1].group != st->group);
		int alone = opens && closes;

		n = snprintf(used < len ? buf + used : NULL, used < len ? len - used : 0,
			     "%s%s%s%d%s", i ? " " : "", opens && !alone ? "[" : "", abbr[st->kind],
			     st->micro, closes && !alone ? "]" : "");
		if (n < 0)
			return -1;
		used += (size_t)n;
	}
	return (int)used;
}

/* ---- simulation ---- */

struct sim {
	const struct lb_schedule *st;
	int pp, nm;
	int *pc;	   /* per stage: next step */
	unsigned char *ok; /* per stage, per step: the send/recv completed */
	int *ofs;	   /* per stage: offset of its steps in ok */
	/* per stage, per micro-batch: 1 once the step ran */
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
	return st->kind != LB_STEP_FORWARD && st->kind != LB_STEP_BACKWARD;
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

/* A send/recv about to be posted: its peer and its data must be right. */
static int check_comm(struct sim *s, int stage, const struct lb_step *st)
{
	int want =
	    st->kind == LB_STEP_SEND_ACT || st->kind == LB_STEP_RECV_GRAD ? stage + 1 : stage - 1;
	size_t k = (size_t)stage * (size_t)s->nm + (size_t)st->micro;

	if (st->micro < 0 || st->micro >= s->nm)
		return fail(s, "stage %d: %s of micro-batch %d, which does not exist", stage,
			    lb_step_name(st->kind), st->micro);
	if (st->peer != want || want < 0 || want >= s->pp)
		return fail(s, "stage %d: %s of micro-batch %d with stage %d, which is not %s",
			    stage, lb_step_name(st->kind), st->micro, st->peer,
			    want < 0 || want >= s->pp ? "a stage" : "its neighbour");
	if (st->kind == LB_STEP_SEND_ACT && !s->fwd[k])
		return fail(s,
			    "stage %d: sends the activation of micro-batch %d before its forward",
			    stage, st->micro);
	if (st->kind == LB_STEP_SEND_GRAD && !s->bwd[k])
		return fail(s, "stage %d: sends the gradient of micro-batch %d before its backward",
			    stage, st->micro);
	return 0;
}

/* Match the posted, unfinished operations of stage a's current group with their
 * partners in the peers' current groups. Returns the number matched, or -1. */
static int match_group(struct sim *s, int a)
{
	const struct lb_schedule *sa = &s->st[a];
	int start = s->pc[a], stop = group_stop(sa, start), i, j, matched = 0;

	for (i = start; i < stop; i++) {
		const struct lb_step *op = &sa->steps[i];
		const struct lb_schedule *sb;
		int b = op->peer, bstart, bstop;

		if (s->ok[s->ofs[a] + i])
			continue;
		/* the earliest unfinished op of this kind to this peer goes first (FIFO) */
		for (j = start; j < i; j++)
			if (!s->ok[s->ofs[a] + j] && sa->steps[j].kind == op->kind &&
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
			const struct lb_step *po = &sb->steps[j];

			if (s->ok[s->ofs[b] + j] || po->kind != partner_kind(op->kind) ||
			    po->peer != a)
				continue;
			if (po->micro != op->micro)
				return fail(s,
					    "stage %d: %s of micro-batch %d meets stage %d's %s of "
					    "micro-batch %d (messages between two stages must come "
					    "in the same order on both sides)",
					    a, lb_step_name(op->kind), op->micro, b,
					    lb_step_name(po->kind), po->micro);
			s->ok[s->ofs[a] + i] = 1;
			s->ok[s->ofs[b] + j] = 1;
			if (op->kind == LB_STEP_RECV_ACT || po->kind == LB_STEP_RECV_ACT)
				s->got_act[(size_t)(op->kind == LB_STEP_RECV_ACT ? a : b) * s->nm +
					   op->micro] = 1;
			if (op->kind == LB_STEP_RECV_GRAD || po->kind == LB_STEP_RECV_GRAD)
				s->got_grad[(size_t)(op->kind == LB_STEP_RECV_GRAD ? a : b) *
						s->nm +
					    op->micro] = 1;
			matched++;
			break;
		}
	}
	return matched;
}

static int run_compute(struct sim *s, int a)
{
	const struct lb_step *st = &s->st[a].steps[s->pc[a]];
	size_t k = (size_t)a * (size_t)s->nm + (size_t)st->micro;

	if (st->micro < 0 || st->micro >= s->nm)
		return fail(s, "stage %d: %s of micro-batch %d, which does not exist", a,
			    lb_step_name(st->kind), st->micro);
	if (st->kind == LB_STEP_FORWARD) {
		if (s->fwd[k])
			return fail(s, "stage %d: second forward of micro-batch %d", a, st->micro);
		if (a > 0 && !s->got_act[k])
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
		if (a < s->pp - 1 && !s->got_grad[k])
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
		for (i = 0; i < s->nm; i++) {
			size_t k = (size_t)a * (size_t)s->nm + (size_t)i;

			if (!s->fwd[k] || !s->bwd[k])
				return fail(s, "stage %d: micro-batch %d has no %s", a, i,
					    s->fwd[k] ? "backward" : "forward");
		}
	return 0;
}

int lb_schedule_simulate(const struct lb_schedule *stages, int pp, struct lb_sim_report *rep)
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
		    stages[a].n_micro != stages[0].n_micro) {
			snprintf(rep->error, sizeof(rep->error),
				 "list %d is for stage %d of %d with %d micro-batches; expected "
				 "stage %d of %d with %d",
				 a, stages[a].stage, stages[a].pp, stages[a].n_micro, a, pp,
				 stages[0].n_micro);
			return -1;
		}
		total += (size_t)stages[a].n_steps;
	}
	memset(&s, 0, sizeof(s));
	s.st = stages;
	s.pp = pp;
	s.nm = stages[0].n_micro;
	s.rep = rep;
	cells = (size_t)pp * (size_t)s.nm;
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

int lb_schedule_execute(const struct lb_schedule *s, struct lb_comm *pp,
			const struct lb_pipe_ops *ops, void *ctx)
{
	int i = 0, rc;

	if (!pp || pp->rank != s->stage || pp->size != s->pp)
		return LB_COMM_EFAIL;
	while (i < s->n_steps) {
		const struct lb_step *st = &s->steps[i];
		int g = st->group;

		if (g < 0) {
			rc = st->kind == LB_STEP_FORWARD ? ops->forward(ctx, st->micro)
							 : ops->backward(ctx, st->micro);
			if (rc)
				return rc;
			i++;
			continue;
		}
		if ((rc = pp->ops->group_start(pp)))
			return rc;
		for (; i < s->n_steps && s->steps[i].group == g; i++) {
			const struct lb_step *x = &s->steps[i];
			size_t count = 0;
			enum lb_dtype dtype = LB_F32;
			void *buf = ops->buffer(ctx, x->kind, x->micro, &count, &dtype);

			if (!buf) {
				pp->ops->group_end(pp);
				return LB_COMM_EFAIL;
			}
			if (x->kind == LB_STEP_SEND_ACT || x->kind == LB_STEP_SEND_GRAD)
				rc = pp->ops->send(pp, buf, count, dtype, x->peer, NULL);
			else
				rc = pp->ops->recv(pp, buf, count, dtype, x->peer, NULL);
			if (rc) {
				pp->ops->group_end(pp);
				return rc;
			}
		}
		if ((rc = pp->ops->group_end(pp)))
			return rc;
	}
	return 0;
}
