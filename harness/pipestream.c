/*
 * The pipeline's sends and receives on the backend's p2p stream: the events, the table of
 * sends and receives the compute stream has not waited for, and the measured waits. See
 * pipestream.h and docs/parallelism.md ("Pipeline sends and receives on their own stream").
 */
#include "harness/pipestream.h"

#include <stdlib.h>
#include <string.h>

#include "harness/model.h"

/* Each of the n events of a pool made; -1 when one cannot be (events_free undoes it). */
static int events_create(const struct lb_ops *ops, void **evs, int n)
{
	for (int i = 0; i < n; i++)
		if (!(evs[i] = ops->event_create()))
			return -1;
	return 0;
}

/* A pool's events destroyed (those made), then its array freed. */
static void events_free(const struct lb_ops *o, void **evs, int n)
{
	for (int i = 0; o && evs && i < n; i++)
		if (evs[i])
			o->event_destroy(evs[i]);
	free(evs);
}

/* The pools are sized from the list: one done event per group, one send entry per send,
 * one wait (an event pair) per compute step and one for the drain. */
int lb_pipestream_init(struct lb_pipestream *p, const struct lb_ops *ops, int overlap,
		       const struct lb_schedule *s)
{
	int groups = 0, sends = 0, compute = 0;

	memset(p, 0, sizeof(*p));
	p->ops = ops;
	p->cur = -1;
	p->on = overlap && ops->p2p_stream && ops->p2p_stream() != NULL;
	if (!p->on)
		return 0;
	for (int i = 0; s && i < s->n_steps; i++) {
		const struct lb_step *st = &s->steps[i];

		if (lb_step_is_compute(st->kind)) {
			compute++;
			continue;
		}
		sends += lb_step_is_send(st->kind);
		groups += lb_schedule_group_last(s, i);
	}
	p->n_done = groups > 0 ? groups : 1;
	p->cap_send = sends > 0 ? sends : 1;
	p->cap_stall = 2 * (compute + 1);
	p->ev_done = calloc((size_t)p->n_done, sizeof(*p->ev_done));
	p->recv = calloc((size_t)p->n_done, sizeof(*p->recv));
	p->wait_ev = calloc((size_t)p->n_done, sizeof(*p->wait_ev));
	p->send = calloc((size_t)p->cap_send, sizeof(*p->send));
	p->ev_stall = calloc((size_t)p->cap_stall, sizeof(*p->ev_stall));
	if (!p->ev_done || !p->recv || !p->wait_ev || !p->send || !p->ev_stall ||
	    !(p->ev_ready = ops->event_create()) || events_create(ops, p->ev_done, p->n_done) ||
	    events_create(ops, p->ev_stall, p->cap_stall))
		goto oom;
	return 0;
oom:
	lb_pipestream_free(p);
	return LB_E_OOM;
}

void lb_pipestream_free(struct lb_pipestream *p)
{
	const struct lb_ops *o = p->ops;

	if (o && p->ev_ready)
		o->event_destroy(p->ev_ready);
	events_free(o, p->ev_done, p->n_done);
	events_free(o, p->ev_stall, p->cap_stall);
	free(p->recv);
	free(p->wait_ev);
	free(p->send);
	memset(p, 0, sizeof(*p));
	p->cur = -1;
}

void *lb_pipestream_stream(const struct lb_pipestream *p)
{
	return p->on ? p->ops->p2p_stream() : p->ops->stream();
}

void lb_pipestream_step_begin(struct lb_pipestream *p)
{
	p->n_stall = 0;
}

/* The compute stream (the current one) waits for the done events ev[0..n), between two
 * events of the stall pool when one is left (a wait that cannot be measured still
 * waits). */
static void wait_all(struct lb_pipestream *p, void **ev, int n)
{
	const struct lb_ops *o = p->ops;
	int timed = p->n_stall + 2 <= p->cap_stall;

	if (n == 0)
		return;
	if (timed)
		o->event_record(p->ev_stall[p->n_stall]);
	for (int i = 0; i < n; i++)
		o->wait_event(ev[i]);
	if (timed) {
		o->event_record(p->ev_stall[p->n_stall + 1]);
		p->n_stall += 2;
	}
}

/* ev[0..*n) gets e unless it holds it already. */
static void add_once(void **ev, int *n, void *e)
{
	for (int i = 0; i < *n; i++)
		if (ev[i] == e)
			return;
	ev[(*n)++] = e;
}

/* Before compute step st: the compute stream waits for the pending receives, and for
 * the pending sends whose buffer st overwrites (a forward of (chunk, slot): send_act of
 * the same; a backward: send_grad). */
static void wait_for(struct lb_pipestream *p, const struct lb_step *st)
{
	int n = 0, k = 0;

	for (int i = 0; i < p->n_recv; i++)
		add_once(p->wait_ev, &n, p->ev_done[p->recv[i]]);
	p->n_recv = 0;
	for (int i = 0; i < p->n_send; i++) {
		const struct lb_pipe_send *x = &p->send[i];

		if ((st->kind == LB_STEP_FORWARD && x->kind == LB_STEP_SEND_ACT &&
		     x->chunk == st->chunk && x->slot == st->slot) ||
		    (st->kind == LB_STEP_BACKWARD && x->kind == LB_STEP_SEND_GRAD))
			add_once(p->wait_ev, &n, p->ev_done[x->done]);
		else
			p->send[k++] = *x;
	}
	p->n_send = k;
	wait_all(p, p->wait_ev, n);
}

/* The compute stream waits for every group issued (the p2p stream runs them in order,
 * so the last one's done event covers them all). */
static void wait_every(struct lb_pipestream *p)
{
	if (p->used == 0)
		return;
	wait_all(p, &p->ev_done[p->used - 1], 1);
	p->n_recv = p->n_send = p->lost = 0;
	p->used = 0;
}

void lb_pipestream_group_begin(struct lb_pipestream *p)
{
	const struct lb_ops *o = p->ops;

	if (!p->on)
		return;
	/* every done event is taken (a list longer than the one the pools were sized for):
	 * wait for them all, then start over */
	if (p->used == p->n_done)
		wait_every(p);
	p->cur = p->used++;
	p->cur_recv = 0;
	o->event_record(p->ev_ready);
	o->use_stream(o->p2p_stream());
	o->wait_event(p->ev_ready);
}

void lb_pipestream_note(struct lb_pipestream *p, const struct lb_step *st)
{
	if (!p->on || p->cur < 0)
		return;
	if (st->kind == LB_STEP_RECV_ACT || st->kind == LB_STEP_RECV_GRAD) {
		p->cur_recv = 1;
		return;
	}
	if (!lb_step_is_send(st->kind))
		return;
	if (p->n_send == p->cap_send) { /* more sends pending than the list had */
		struct lb_pipe_send *a = realloc(p->send, (size_t)(2 * p->cap_send) * sizeof(*a));

		if (!a) { /* the next compute step waits for every group */
			p->lost = 1;
			return;
		}
		p->send = a;
		p->cap_send *= 2;
	}
	p->send[p->n_send].kind = st->kind;
	p->send[p->n_send].chunk = st->chunk;
	p->send[p->n_send].slot = st->slot;
	p->send[p->n_send++].done = p->cur;
}

void lb_pipestream_group_end(struct lb_pipestream *p)
{
	const struct lb_ops *o = p->ops;

	if (!p->on || p->cur < 0)
		return;
	o->event_record(p->ev_done[p->cur]); /* on the p2p stream */
	o->use_stream(NULL);
	if (p->cur_recv)
		p->recv[p->n_recv++] = p->cur;
	p->cur = -1;
}

void lb_pipestream_compute(struct lb_pipestream *p, const struct lb_step *st)
{
	if (p->on && p->lost)
		wait_every(p);
	else if (p->on)
		wait_for(p, st);
	p->lost = 0;
}

void lb_pipestream_drain(struct lb_pipestream *p)
{
	if (p->on)
		wait_every(p);
}

double lb_pipestream_wait_s(struct lb_pipestream *p)
{
	double s = 0;

	for (int i = 0; i + 1 < p->n_stall; i += 2)
		s += p->ops->event_elapsed(p->ev_stall[i], p->ev_stall[i + 1]);
	return s;
}
