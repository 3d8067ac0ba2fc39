/*
 * The pipeline's sends and receives on their own stream (harness/pipestream.h), checked
 * without a GPU: a recording ops table with two streams and events, and a recording
 * pipeline communicator, run one stage's list at a time through the executor the trainer
 * uses (lb_pipe_execute), with callbacks that call the module as the trainer's do
 * (harness/train_step.c) and touch the trainer's buffers (harness/model.h): a forward of
 * (chunk, slot) reads its input and writes its output, a backward reads the one received
 * gradient and the slot's activations and writes the one input gradient; send_act reads
 * the slot's output, recv_act writes its input, recv_grad the gradient buffer, send_grad
 * reads the input gradient.
 *
 * The fake models what a GPU would do with the calls: ops on one stream run in order; a
 * stream that waits for an event runs its later ops after the ops that preceded the
 * event's record on the other stream. Every access is checked against the other stream's
 * earlier conflicting accesses (write after read, read after write, write after write):
 * one that is not ordered behind them is a data race and fails the test. Also checked:
 * every send and receive on the p2p stream (on the compute stream with overlap 0, where
 * nothing is recorded or waited), the compute step after a receive ordered behind it, a
 * sent buffer not rewritten before its send is waited for, everything waited for at the
 * end, and that a send alone does hold the compute stream back (the overlap exists).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/pipestream.h"
#include "harness/pipe.h"

enum { S_COMPUTE = 0, S_P2P, NSTREAMS };

#define MAXV	 4
#define MAXSLOT	 32
#define MAXBUF	 (2 * MAXV * MAXSLOT + 2)
#define MAXEV	 4096
#define BUF_DOUT (2 * MAXV * MAXSLOT)
#define BUF_DRES (2 * MAXV * MAXSLOT + 1)

static int stream_tok[NSTREAMS];
static char mem[MAXBUF]; /* the buffers: one byte each, told apart by address */

struct fev {
	int live, recorded;
	int stream, seq; /* the stream it was last recorded on, and its op count then */
};

/* The recording backend and its stream model. */
static struct fake {
	int cur;		      /* current stream */
	int n_ops[NSTREAMS];	      /* ops issued on each stream */
	int seen[NSTREAMS][NSTREAMS]; /* seen[a][b]: ops of b that a's next op runs behind */
	int last_w[MAXBUF][NSTREAMS]; /* index of the last write / read, -1 none */
	int last_r[MAXBUF][NSTREAMS];
	struct fev ev[MAXEV];
	int n_ev;
	int n_use, n_wait, n_record; /* calls of the stream and event entries */
	int races;
	char race[256];
	/* the executor's side */
	int pp, stage, v, nm;
	int p2p_on_compute, p2p_on_p2p;	  /* sends/recvs by their stream argument */
	int last_recv;			  /* p2p index + 1 of the latest receive, 0 none */
	int compute_after_recv_unordered; /* compute ops issued before a receive's wait */
	int compute_with_send_in_flight;  /* compute ops while a send was not waited for */
	int last_send;			  /* p2p index + 1 of the latest send */
	struct lb_pipestream ps;
} F;

static void *f_stream(void)
{
	return &stream_tok[S_COMPUTE];
}

static void *f_p2p_stream(void)
{
	return &stream_tok[S_P2P];
}

static int stream_id(void *s)
{
	if (s == &stream_tok[S_COMPUTE])
		return S_COMPUTE;
	if (s == &stream_tok[S_P2P])
		return S_P2P;
	fail_msg("an unknown stream handle %p", s);
	return -1;
}

static void f_use_stream(void *s)
{
	F.n_use++;
	F.cur = s ? stream_id(s) : S_COMPUTE;
}

static void *f_event_create(void)
{
	if (F.n_ev == MAXEV)
		return NULL;
	F.ev[F.n_ev].live = 1;
	return &F.ev[F.n_ev++];
}

static void f_event_destroy(void *e)
{
	struct fev *x = e;

	assert_true(x->live);
	x->live = 0;
}

static void f_event_record(void *e)
{
	struct fev *x = e;

	F.n_record++;
	x->recorded = 1;
	x->stream = F.cur;
	x->seq = F.n_ops[F.cur];
}

static void f_wait_event(void *e)
{
	struct fev *x = e;

	F.n_wait++;
	assert_true(x->recorded); /* a wait for an event never recorded waits for nothing */
	if (x->stream != F.cur && x->seq > F.seen[F.cur][x->stream])
		F.seen[F.cur][x->stream] = x->seq;
}

static double f_event_elapsed(void *a, void *b)
{
	const struct fev *x = a, *y = b;

	assert_true(x->recorded && y->recorded);
	return 0.25;
}

static const struct lb_ops *fake_ops(void)
{
	static struct lb_ops o;

	memset(&o, 0, sizeof(o));
	o.name = "fake";
	o.stream = f_stream;
	o.p2p_stream = f_p2p_stream;
	o.use_stream = f_use_stream;
	o.wait_event = f_wait_event;
	o.event_create = f_event_create;
	o.event_destroy = f_event_destroy;
	o.event_record = f_event_record;
	o.event_elapsed = f_event_elapsed;
	return &o;
}

/* An op on stream s that reads r[0..nr) and writes w[0..nw) (buffer ids); every
 * conflicting earlier access of the other stream must be ordered before it. */
static void op(int s, const int *r, int nr, const int *w, int nw, const char *what)
{
	int o = !s, idx = F.n_ops[s];

	for (int i = 0; i < nr + nw; i++) {
		int b = i < nr ? r[i] : w[i - nr], writes = i >= nr;
		int need = F.last_w[b][o];

		if (writes && F.last_r[b][o] > need)
			need = F.last_r[b][o];
		if (need >= 0 && F.seen[s][o] <= need && !F.races++)
			snprintf(F.race, sizeof(F.race),
				 "stage %d of %d: %s %s buffer %d while op %d of the %s stream "
				 "may still %s it",
				 F.stage, F.pp, what, writes ? "writes" : "reads", b, need,
				 o == S_P2P ? "p2p" : "compute",
				 F.last_w[b][o] == need ? "write" : "read");
	}
	for (int i = 0; i < nr; i++)
		F.last_r[r[i]][s] = idx;
	for (int i = 0; i < nw; i++)
		F.last_w[w[i]][s] = idx;
	F.n_ops[s]++;
}

static int buf_in(int c, int slot)
{
	return c * MAXSLOT + slot;
}

static int buf_out(int c, int slot)
{
	return MAXV * MAXSLOT + c * MAXSLOT + slot;
}

/* --- the executor's callbacks, as harness/train_step.c's --- */

static void before_compute(void)
{
	if (F.last_recv && F.seen[S_COMPUTE][S_P2P] < F.last_recv)
		F.compute_after_recv_unordered++;
	F.last_recv = 0;
	if (F.last_send && F.seen[S_COMPUTE][S_P2P] < F.last_send)
		F.compute_with_send_in_flight++;
}

static int fwd(void *ctx, const struct lb_step *st)
{
	int k = st->chunk * F.pp + F.stage, r[1] = {buf_in(st->chunk, st->slot)},
	    w[1] = {buf_out(st->chunk, st->slot)};

	(void)ctx;
	lb_pipestream_compute(&F.ps, st);
	assert_int_equal(F.cur, S_COMPUTE);
	before_compute();
	if (k == 0) /* the model's first chunk embeds into its input */
		op(S_COMPUTE, NULL, 0, (int[]){r[0], w[0]}, 2, "forward");
	else
		op(S_COMPUTE, r, 1, w, 1, "forward");
	return 0;
}

static int bwd(void *ctx, const struct lb_step *st)
{
	int k = st->chunk * F.pp + F.stage, last = k == F.pp * F.v - 1;
	int r[3] = {buf_in(st->chunk, st->slot), buf_out(st->chunk, st->slot), BUF_DOUT},
	    w[1] = {BUF_DRES};

	(void)ctx;
	lb_pipestream_compute(&F.ps, st);
	assert_int_equal(F.cur, S_COMPUTE);
	before_compute();
	op(S_COMPUTE, r, last ? 2 : 3, w, 1, "backward");
	return 0;
}

static void *buffer(void *ctx, const struct lb_step *st, size_t *count, enum lb_dtype *t)
{
	(void)ctx;
	*count = 1;
	*t = LB_F32;
	lb_pipestream_note(&F.ps, st);
	switch (st->kind) {
	case LB_STEP_SEND_ACT:
	case LB_STEP_RECV_ACT:
		return &mem[st->kind == LB_STEP_SEND_ACT ? buf_out(st->chunk, st->slot)
							 : buf_in(st->chunk, st->slot)];
	case LB_STEP_SEND_GRAD:
		return &mem[BUF_DRES];
	case LB_STEP_RECV_GRAD:
		return &mem[BUF_DOUT];
	default:
		return NULL;
	}
}

static void group(void *ctx, const struct lb_step *first, int done)
{
	(void)ctx;
	(void)first;
	if (!done)
		lb_pipestream_group_begin(&F.ps);
	else
		lb_pipestream_group_end(&F.ps);
}

/* --- the recording pipeline communicator --- */

static int c_p2p(void *buf, void *stream, int is_send)
{
	int s = stream_id(stream), b = (int)((char *)buf - mem);

	assert_true(b >= 0 && b < MAXBUF);
	if (s == S_P2P)
		F.p2p_on_p2p++;
	else
		F.p2p_on_compute++;
	if (is_send) {
		op(s, &b, 1, NULL, 0, "send");
		if (s == S_P2P)
			F.last_send = F.n_ops[S_P2P];
	} else {
		op(s, NULL, 0, &b, 1, "recv");
		if (s == S_P2P)
			F.last_recv = F.n_ops[S_P2P];
	}
	return 0;
}

static int c_send(struct lb_comm *c, const void *buf, size_t n, enum lb_dtype t, int peer,
		  void *stream)
{
	(void)c;
	(void)n;
	(void)t;
	(void)peer;
	return c_p2p((void *)buf, stream, 1);
}

static int c_recv(struct lb_comm *c, void *buf, size_t n, enum lb_dtype t, int peer, void *stream)
{
	(void)c;
	(void)n;
	(void)t;
	(void)peer;
	return c_p2p(buf, stream, 0);
}

static int c_group(struct lb_comm *c)
{
	(void)c;
	return 0;
}

static const struct lb_comm_ops comm_ops = {
    .name = "record", .send = c_send, .recv = c_recv, .group_start = c_group, .group_end = c_group};

/* --- a run --- */

struct run_case {
	enum lb_sched_kind kind;
	int pp, v, nm;
	int sized_nm; /* the list the pools are sized for (0: the same) */
	int steps;    /* optimizer steps (lists run) */
};

/* Run list s (its stage of its pp stages), `steps` times, with --pipe-overlap `overlap`;
 * the pools sized for list `sized`. */
static void run_list(const struct lb_schedule *s, const struct lb_schedule *sized, int steps,
		     int overlap)
{
	const struct lb_ops *o = fake_ops();
	struct lb_comm comm = {&comm_ops, s->stage, s->pp, NULL};
	struct lb_pipe_ops pops = {fwd, bwd, buffer, group, NULL, NULL};
	double waited = 0;

	memset(&F, 0, sizeof(F));
	memset(F.last_w, -1, sizeof(F.last_w));
	memset(F.last_r, -1, sizeof(F.last_r));
	F.pp = s->pp;
	F.stage = s->stage;
	F.v = s->chunks;
	F.nm = s->n_micro;
	assert_int_equal(lb_pipestream_init(&F.ps, o, overlap, sized), 0);
	assert_int_equal(F.ps.on, overlap);
	pops.stream = lb_pipestream_stream(&F.ps);
	assert_ptr_equal(pops.stream, overlap ? f_p2p_stream() : f_stream());
	for (int step = 0; step < steps; step++) {
		lb_pipestream_step_begin(&F.ps);
		assert_int_equal(lb_pipe_execute(s, &comm, &pops, NULL), 0);
		lb_pipestream_drain(&F.ps);
		assert_int_equal(F.cur, S_COMPUTE);
		/* the end: everything the p2p stream did is behind the compute stream */
		if (overlap)
			assert_int_equal(F.seen[S_COMPUTE][S_P2P], F.n_ops[S_P2P]);
		waited = lb_pipestream_wait_s(&F.ps);
	}
	if (F.races)
		fail_msg("%s (%d races; %s, pp %d, %d chunks, %d micro-batches, overlap %d)",
			 F.race, F.races, lb_sched_name(s->kind), s->pp, s->chunks, s->n_micro,
			 overlap);
	assert_int_equal(F.compute_after_recv_unordered, 0);
	if (overlap) {
		assert_int_equal(F.p2p_on_compute, 0);
		assert_true(F.p2p_on_p2p > 0);
		assert_true(waited > 0);
	} else {
		assert_int_equal(F.p2p_on_p2p, 0);
		assert_true(F.p2p_on_compute > 0);
		/* nothing recorded, waited for or switched: the compute stream alone */
		assert_int_equal(F.n_use + F.n_wait + F.n_record, 0);
		assert_true(waited == 0);
	}
	lb_pipestream_free(&F.ps);
	for (int i = 0; i < F.n_ev; i++)
		assert_false(F.ev[i].live); /* every event destroyed */
}

/* Stage `stage`'s list of c, c->steps times. */
static void run_stage(const struct run_case *c, int stage, int overlap)
{
	struct lb_schedule s, sized;
	char err[256];

	assert_int_equal(
	    lb_schedule_build(c->kind, c->pp, c->v, stage, c->nm, &s, err, sizeof(err)), 0);
	assert_int_equal(lb_schedule_build(c->kind, c->pp, c->v, stage,
					   c->sized_nm ? c->sized_nm : c->nm, &sized, err,
					   sizeof(err)),
			 0);
	run_list(&s, &sized, c->steps, overlap);
	lb_schedule_release(&s);
	lb_schedule_release(&sized);
}

static void run_all(const struct run_case *c)
{
	int overlapped = 0;

	for (int stage = 0; stage < c->pp; stage++) {
		run_stage(c, stage, 0);
		run_stage(c, stage, 1);
		overlapped += F.compute_with_send_in_flight;
	}
	/* some compute step runs while a send has not completed: what the stream buys */
	assert_true(overlapped > 0);
}

static void test_1f1b(void **state)
{
	(void)state;
	run_all(&(struct run_case){LB_SCHED_1F1B, 2, 1, 4, 0, 2});
	run_all(&(struct run_case){LB_SCHED_1F1B, 4, 1, 8, 0, 2});
	run_all(&(struct run_case){LB_SCHED_1F1B, 4, 1, 3, 0, 1}); /* fewer than pp */
}

static void test_gpipe(void **state)
{
	(void)state;
	run_all(&(struct run_case){LB_SCHED_GPIPE, 2, 1, 4, 0, 2});
	run_all(&(struct run_case){LB_SCHED_GPIPE, 4, 1, 6, 0, 1});
}

static void test_interleaved(void **state)
{
	(void)state;
	run_all(&(struct run_case){LB_SCHED_INTERLEAVED, 2, 2, 4, 0, 2});
	run_all(&(struct run_case){LB_SCHED_INTERLEAVED, 4, 2, 8, 0, 1});
	run_all(&(struct run_case){LB_SCHED_INTERLEAVED, 2, 3, 4, 0, 1});
}

/* A list longer than the one the pools were sized for still runs without a race (it
 * waits earlier when the done events run out). */
static void test_longer_list(void **state)
{
	(void)state;
	run_all(&(struct run_case){LB_SCHED_1F1B, 4, 1, 8, 1, 2});
	run_all(&(struct run_case){LB_SCHED_GPIPE, 2, 1, 6, 1, 1});
}

/* The schedules free a slot only at a backward, behind a receive whose wait covers the
 * slot's send (the p2p stream runs in order); a list that reuses a slot with no receive
 * between needs the forward's own wait for the send of the output it rewrites. */
static void test_slot_reuse(void **state)
{
	struct lb_step st[] = {
	    {LB_STEP_FORWARD, 0, -1, -1, 0, 0},
	    {LB_STEP_SEND_ACT, 0, 1, 0, 0, 0},
	    {LB_STEP_FORWARD, 1, -1, -1, 0, 0},
	    {LB_STEP_SEND_ACT, 1, 1, 1, 0, 0},
	};
	struct lb_schedule s = {.kind = LB_SCHED_GPIPE,
				.pp = 2,
				.stage = 0,
				.n_micro = 2,
				.chunks = 1,
				.n_steps = 4,
				.steps = st,
				.n_slots = {1},
				.n_grad_bufs = 1};

	(void)state;
	run_list(&s, &s, 2, 1);
}

/* The CPU backend has no p2p stream: off whatever the option says. */
static void test_cpu_off(void **state)
{
	struct lb_pipestream p;

	(void)state;
	assert_int_equal(lb_pipestream_init(&p, lb_ops_cpu(), 1, NULL), 0);
	assert_int_equal(p.on, 0);
	assert_ptr_equal(lb_pipestream_stream(&p), lb_ops_cpu()->stream());
	lb_pipestream_step_begin(&p);
	lb_pipestream_group_begin(&p);
	lb_pipestream_group_end(&p);
	lb_pipestream_drain(&p);
	assert_true(lb_pipestream_wait_s(&p) == 0);
	lb_pipestream_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_1f1b),	cmocka_unit_test(test_gpipe),
	    cmocka_unit_test(test_interleaved), cmocka_unit_test(test_longer_list),
	    cmocka_unit_test(test_slot_reuse),	cmocka_unit_test(test_cpu_off),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
