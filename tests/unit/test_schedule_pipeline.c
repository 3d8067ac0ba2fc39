/*
 * Unit tests of the pipeline schedules (common/pipeline.c) and their simulator
 * (harness/pipe.c): for pp 1..8 and 1..16 micro-batches, 1F1B and GPipe run without
 * deadlock, every message meets its partner, every micro-batch gets one forward and one
 * backward per stage (backward after forward), 1F1B holds at most pp - stage
 * micro-batches in flight (GPipe: all of them), and the simulated bubble is
 * (pp - 1) / (n_micro + pp - 1). The interleaved schedule, for pp 2..8, 2..4 chunks per
 * stage and every multiple of pp up to 4*pp micro-batches: the same checks through every
 * chunk, Megatron-LM's in-flight bound (2*(pp - stage - 1) + (chunks - 1)*pp + 1 chunk
 * passes, all of them when n_micro == pp) and the theory's bubble, (pp - 1) /
 * (chunks * n_micro) of the compute (Narayanan et al. 2021). Every list's activation
 * slots cover what it holds. Broken lists are caught. lb_schedule_slots, which builds at
 * most LB_SCHED_SLOTS_CAP * pp micro-batches of 1F1B and interleaved lists, gives the
 * whole list's slots for pp 1..16 and every micro-batch count up to 12 * pp (and some far
 * larger), and refuses what lb_schedule_build refuses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness/pipe.h"

#define PPMAX 8
#define NMMAX 16

static void build_v(enum lb_sched_kind kind, int pp, int v, int nm, struct lb_schedule *st)
{
	char err[256];

	for (int s = 0; s < pp; s++)
		if (lb_schedule_build(kind, pp, v, s, nm, &st[s], err, sizeof(err)))
			fail_msg("%s pp=%d v=%d n_micro=%d stage %d: %s", lb_sched_name(kind), pp,
				 v, nm, s, err);
}

static void build_all(enum lb_sched_kind kind, int pp, int nm, struct lb_schedule *st)
{
	build_v(kind, pp, 1, nm, st);
}

static void release_all(int pp, struct lb_schedule *st)
{
	for (int s = 0; s < pp; s++)
		lb_schedule_release(&st[s]);
}

/* Checks on the lists alone, independent of the simulator. */
static void check_lists(int pp, int nm, const struct lb_schedule *st)
{
	for (int s = 0; s < pp; s++) {
		int fwd_at[NMMAX], bwd_at[NMMAX], nsend[2] = {0, 0}, nrecv[2] = {0, 0};

		for (int m = 0; m < nm; m++)
			fwd_at[m] = bwd_at[m] = -1;
		for (int i = 0; i < st[s].n_steps; i++) {
			const struct lb_step *x = &st[s].steps[i];

			assert_true(x->micro >= 0 && x->micro < nm);
			switch (x->kind) {
			case LB_STEP_FORWARD:
				assert_int_equal(fwd_at[x->micro], -1);
				fwd_at[x->micro] = i;
				assert_int_equal(x->group, -1);
				break;
			case LB_STEP_BACKWARD:
				assert_int_equal(bwd_at[x->micro], -1);
				bwd_at[x->micro] = i;
				break;
			case LB_STEP_SEND_ACT:
				assert_int_equal(x->peer, s + 1);
				nsend[0]++;
				break;
			case LB_STEP_RECV_GRAD:
				assert_int_equal(x->peer, s + 1);
				nrecv[1]++;
				break;
			case LB_STEP_RECV_ACT:
				assert_int_equal(x->peer, s - 1);
				nrecv[0]++;
				break;
			case LB_STEP_SEND_GRAD:
				assert_int_equal(x->peer, s - 1);
				nsend[1]++;
				break;
			}
			if (x->kind != LB_STEP_FORWARD && x->kind != LB_STEP_BACKWARD)
				assert_true(x->group >= 0);
		}
		for (int m = 0; m < nm; m++) {
			assert_true(fwd_at[m] >= 0);
			assert_true(bwd_at[m] > fwd_at[m]);
		}
		/* every activation and gradient crosses each inner boundary once */
		assert_int_equal(nsend[0], s < pp - 1 ? nm : 0);
		assert_int_equal(nrecv[1], s < pp - 1 ? nm : 0);
		assert_int_equal(nrecv[0], s > 0 ? nm : 0);
		assert_int_equal(nsend[1], s > 0 ? nm : 0);
	}
}

static void sweep(enum lb_sched_kind kind)
{
	struct lb_schedule st[PPMAX];
	struct lb_sim_report rep;

	for (int pp = 1; pp <= PPMAX; pp++)
		for (int nm = 1; nm <= NMMAX; nm++) {
			build_all(kind, pp, nm, st);
			check_lists(pp, nm, st);
			if (lb_pipe_simulate(st, pp, &rep) != 0)
				fail_msg("%s pp=%d n_micro=%d: %s", lb_sched_name(kind), pp, nm,
					 rep.error);
			assert_int_equal(rep.deadlock, 0);
			assert_string_equal(rep.error, "");
			for (int s = 0; s < pp; s++) {
				int bound = kind == LB_SCHED_1F1B ? pp - s : nm;

				if (bound > nm)
					bound = nm;
				assert_int_equal(rep.busy[s], 2 * nm);
				if (kind == LB_SCHED_1F1B)
					assert_true(rep.max_in_flight[s] <= pp - s);
				assert_int_equal(rep.max_in_flight[s], bound);
				/* a slot per micro-batch in flight, one gradient buffer */
				assert_int_equal(st[s].n_slots[0], bound);
				assert_true(st[s].n_grad_bufs <= 1);
			}
			/* unit forward and backward: time 2 (nm + pp - 1) */
			assert_int_equal(rep.time, 2 * (nm + pp - 1));
			assert_true(fabs(rep.bubble - (double)(pp - 1) / (nm + pp - 1)) < 1e-12);
			assert_true(fabs(rep.bubble_ratio - (double)(pp - 1) / nm) < 1e-12);
			release_all(pp, st);
		}
}

static void test_1f1b_sweep(void **state)
{
	sweep(LB_SCHED_1F1B);
}

static void test_gpipe_sweep(void **state)
{
	sweep(LB_SCHED_GPIPE);
}

/* Checks on interleaved lists alone: every (chunk, micro-batch) one forward and one
 * backward after it, activations and gradients cross every boundary between chunks
 * once (the ring: stage pp - 1 feeds stage 0's next chunk), slots never shared. */
static void check_ring_lists(int pp, int v, int nm, const struct lb_schedule *st)
{
	for (int s = 0; s < pp; s++) {
		int fwd_at[4][4 * PPMAX], bwd_at[4][4 * PPMAX], sends[2] = {0, 0},
								recvs[2] = {0, 0};
		int holder[4][4 * PPMAX]; /* micro-batch holding each slot, -1 free */

		for (int c = 0; c < v; c++)
			for (int m = 0; m < nm; m++)
				fwd_at[c][m] = bwd_at[c][m] = holder[c][m] = -1;
		for (int i = 0; i < st[s].n_steps; i++) {
			const struct lb_step *x = &st[s].steps[i];
			int vs = x->chunk * pp + s;

			assert_true(x->chunk >= 0 && x->chunk < v && x->micro >= 0 &&
				    x->micro < nm);
			assert_true(x->slot >= 0 && x->slot < st[s].n_slots[x->chunk]);
			switch (x->kind) {
			case LB_STEP_FORWARD:
				assert_int_equal(fwd_at[x->chunk][x->micro], -1);
				fwd_at[x->chunk][x->micro] = i;
				break;
			case LB_STEP_BACKWARD:
				assert_int_equal(bwd_at[x->chunk][x->micro], -1);
				bwd_at[x->chunk][x->micro] = i;
				assert_int_equal(holder[x->chunk][x->slot], x->micro);
				holder[x->chunk][x->slot] = -1;
				break;
			case LB_STEP_SEND_ACT:
				assert_true(vs < pp * v - 1);
				assert_int_equal(x->peer, (s + 1) % pp);
				sends[0]++;
				break;
			case LB_STEP_RECV_GRAD:
				assert_true(vs < pp * v - 1);
				assert_int_equal(x->peer, (s + 1) % pp);
				recvs[1]++;
				break;
			case LB_STEP_RECV_ACT:
				assert_true(vs > 0);
				assert_int_equal(x->peer, (s + pp - 1) % pp);
				recvs[0]++;
				break;
			case LB_STEP_SEND_GRAD:
				assert_true(vs > 0);
				assert_int_equal(x->peer, (s + pp - 1) % pp);
				sends[1]++;
				break;
			}
			/* a slot is taken by the input's arrival (receive, or the forward of the
			 * first chunk) and held by no other micro-batch until the backward */
			if ((x->kind == LB_STEP_RECV_ACT || x->kind == LB_STEP_FORWARD) &&
			    holder[x->chunk][x->slot] != x->micro) {
				assert_int_equal(holder[x->chunk][x->slot], -1);
				holder[x->chunk][x->slot] = x->micro;
			}
		}
		for (int c = 0; c < v; c++)
			for (int m = 0; m < nm; m++) {
				assert_true(fwd_at[c][m] >= 0);
				assert_true(bwd_at[c][m] > fwd_at[c][m]);
			}
		/* every chunk but the model's last sends on; every chunk but the first receives */
		assert_int_equal(sends[0], nm * v - (s == pp - 1 ? nm : 0));
		assert_int_equal(recvs[1], nm * v - (s == pp - 1 ? nm : 0));
		assert_int_equal(recvs[0], nm * v - (s == 0 ? nm : 0));
		assert_int_equal(sends[1], nm * v - (s == 0 ? nm : 0));
	}
}

static void test_interleaved_sweep(void **state)
{
	struct lb_schedule st[PPMAX];
	struct lb_sim_report rep;

	for (int pp = 2; pp <= PPMAX; pp++)
		for (int v = 2; v <= 4; v++)
			for (int nm = pp; nm <= 4 * pp; nm += pp) {
				build_v(LB_SCHED_INTERLEAVED, pp, v, nm, st);
				check_ring_lists(pp, v, nm, st);
				if (lb_pipe_simulate(st, pp, &rep) != 0)
					fail_msg("interleaved pp=%d v=%d n_micro=%d: %s", pp, v, nm,
						 rep.error);
				for (int s = 0; s < pp; s++) {
					int warm = 2 * (pp - s - 1) + (v - 1) * pp + 1;

					if (nm == pp || warm > nm * v)
						warm = nm * v;
					assert_int_equal(rep.busy[s], 2 * nm * v);
					assert_int_equal(rep.max_in_flight[s], warm);
					assert_true(st[s].n_grad_bufs <= 1);
				}
				/* the bubble shrinks by the chunk count: (pp - 1) / (v * nm) of the
				 * compute, time 2 (v nm + pp - 1) in chunk passes */
				assert_int_equal(rep.time, 2 * (v * nm + pp - 1));
				if (fabs(rep.bubble_ratio - (double)(pp - 1) / (v * nm)) > 1e-12)
					fail_msg(
					    "interleaved pp=%d v=%d n_micro=%d: bubble %g of the "
					    "compute, theory %g",
					    pp, v, nm, rep.bubble_ratio,
					    (double)(pp - 1) / (v * nm));
				release_all(pp, st);
			}
}

/* What the interleaved schedule refuses, and an interleaved list as text. */
static void test_interleaved_rules(void **state)
{
	struct lb_schedule st[4];
	struct lb_layout l;
	char err[256], buf[1024];

	assert_int_equal(lb_schedule_build(LB_SCHED_INTERLEAVED, 4, 2, 0, 6, st, err, sizeof(err)),
			 -1);
	assert_string_equal(err, "the interleaved schedule needs the micro-batches (6) to be a "
				 "multiple of pp=4");
	assert_int_equal(lb_schedule_build(LB_SCHED_INTERLEAVED, 4, 1, 0, 8, st, err, sizeof(err)),
			 -1);
	assert_int_equal(lb_schedule_build(LB_SCHED_1F1B, 4, 2, 0, 8, st, err, sizeof(err)), -1);
	assert_string_equal(err, "the 1f1b schedule runs one model chunk per stage, got 2");

	/* pp=2, 2 chunks, 2 micro-batches: every pass is warm-up (n_micro == pp) */
	build_v(LB_SCHED_INTERLEAVED, 2, 2, 2, st);
	lb_schedule_format(&st[0], buf, sizeof(buf));
	assert_string_equal(buf, "F0.0 sa0.0 F1.0 [sa1.0 ra0.1] F0.1 [sa0.1 ra1.1] F1.1 sa1.1 "
				 "rg0.1 B0.1 [sg0.1 rg1.1] B1.1 [sg1.1 rg0.0] B0.0 rg1.0 B1.0");
	lb_schedule_format(&st[1], buf, sizeof(buf));
	assert_string_equal(buf, "ra0.0 F0.0 [sa0.0 ra1.0] F1.0 [sa1.0 ra0.1] F0.1 ra1.1 F1.1 "
				 "B0.1 sg0.1 B1.1 [sg1.1 rg0.0] B0.0 [sg0.0 rg1.0] B1.0 sg1.0");
	release_all(2, st);

	/* the layout decides: virtual stages run interleaved, one stage runs 1F1B */
	lb_layout_init(&l);
	l.model.n_layers = 8;
	l.pp = 4;
	l.virtual_stages = 2;
	l.global_batch = 8;
	assert_int_equal(lb_schedule_effective(&l, LB_SCHED_1F1B), LB_SCHED_INTERLEAVED);
	assert_int_equal(lb_schedule_for_layout(&l, LB_SCHED_1F1B, 3, st, err, sizeof(err)), 0);
	assert_int_equal(st[0].chunks, 2);
	assert_int_equal(st[0].n_micro, 8);
	lb_schedule_release(st);
	l.virtual_stages = 1;
	assert_int_equal(lb_schedule_effective(&l, LB_SCHED_GPIPE), LB_SCHED_GPIPE);
	l.pp = 1;
	assert_int_equal(lb_schedule_effective(&l, LB_SCHED_GPIPE), LB_SCHED_1F1B);
}

/* The lists themselves, as text (golden). */
static void test_format(void **state)
{
	struct lb_schedule st[4];
	char buf[512];

	build_all(LB_SCHED_1F1B, 4, 4, st);
	lb_schedule_format(&st[0], buf, sizeof(buf));
	assert_string_equal(buf, "F0 sa0 F1 sa1 F2 sa2 F3 [sa3 rg0] B0 rg1 B1 rg2 B2 rg3 B3");
	lb_schedule_format(&st[1], buf, sizeof(buf));
	assert_string_equal(buf, "ra0 F0 sa0 ra1 F1 sa1 ra2 F2 [sa2 rg0] B0 [sg0 ra3] F3 "
				 "[sa3 rg1] B1 sg1 rg2 B2 sg2 rg3 B3 sg3");
	lb_schedule_format(&st[3], buf, sizeof(buf));
	assert_string_equal(buf, "ra0 F0 B0 [sg0 ra1] F1 B1 [sg1 ra2] F2 B2 [sg2 ra3] F3 B3 sg3");
	release_all(4, st);
	build_all(LB_SCHED_GPIPE, 2, 2, st);
	lb_schedule_format(&st[1], buf, sizeof(buf));
	assert_string_equal(buf, "ra0 F0 ra1 F1 B0 sg0 B1 sg1");
	release_all(2, st);
	build_all(LB_SCHED_1F1B, 1, 2, st);
	lb_schedule_format(&st[0], buf, sizeof(buf));
	assert_string_equal(buf, "F0 B0 F1 B1");
	release_all(1, st);
}

/* The simulator finds what is wrong. */
static void test_broken(void **state)
{
	struct lb_schedule st[2];
	struct lb_sim_report rep;
	struct lb_step tmp;

	/* stage 1 receives before sending, stage 0 too, without a group: with rendezvous
	 * messaging both wait forever */
	build_all(LB_SCHED_1F1B, 2, 2, st);
	/* stage 0: F0 [sa0 rg0]... swap into "rg0 before sa0" as separate groups */
	for (int i = 0; i < st[0].n_steps; i++)
		if (st[0].steps[i].kind == LB_STEP_SEND_ACT && st[0].steps[i].micro == 1) {
			/* split the pair: recv first, alone; then send alone */
			tmp = st[0].steps[i];
			st[0].steps[i] = st[0].steps[i + 1];
			st[0].steps[i + 1] = tmp;
			st[0].steps[i].group = 100;
			st[0].steps[i + 1].group = 101;
			break;
		}
	/* still fine: stage 1 issues [sg0 ra1] together */
	assert_int_equal(lb_pipe_simulate(st, 2, &rep), 0);
	/* stage 1 receives ra1 first, alone, then sends sg0: each waits for the other */
	for (int i = 0; i < st[1].n_steps; i++)
		if (st[1].steps[i].kind == LB_STEP_SEND_GRAD && st[1].steps[i].micro == 0) {
			tmp = st[1].steps[i];
			st[1].steps[i] = st[1].steps[i + 1];
			st[1].steps[i + 1] = tmp;
			st[1].steps[i].group = 100;
			st[1].steps[i + 1].group = 101;
			break;
		}
	assert_int_equal(lb_pipe_simulate(st, 2, &rep), -1);
	assert_int_equal(rep.deadlock, 1);
	assert_non_null(strstr(rep.error, "deadlock"));
	release_all(2, st);

	/* a forward dropped */
	build_all(LB_SCHED_GPIPE, 2, 3, st);
	for (int i = 0; i < st[1].n_steps; i++)
		if (st[1].steps[i].kind == LB_STEP_FORWARD && st[1].steps[i].micro == 2) {
			memmove(&st[1].steps[i], &st[1].steps[i + 1],
				sizeof(tmp) * (size_t)(st[1].n_steps - i - 1));
			st[1].n_steps--;
			break;
		}
	assert_int_equal(lb_pipe_simulate(st, 2, &rep), -1);
	assert_non_null(strstr(rep.error, "micro-batch 2"));
	release_all(2, st);

	/* messages out of order */
	build_all(LB_SCHED_GPIPE, 2, 3, st);
	for (int i = 0; i < st[1].n_steps; i++)
		if (st[1].steps[i].kind == LB_STEP_RECV_ACT) {
			st[1].steps[i].micro = 1;
			break;
		}
	assert_int_equal(lb_pipe_simulate(st, 2, &rep), -1);
	assert_non_null(strstr(rep.error, "same order"));
	release_all(2, st);

	/* two stages exchanging both ways (the interleaved ring on pp = 2): one channel per
	 * direction carries activations and gradients, so both sides must post them in the
	 * same order; sending the gradient first breaks it */
	build_v(LB_SCHED_INTERLEAVED, 2, 2, 4, st);
	for (int i = 0; i + 1 < st[0].n_steps; i++)
		if (st[0].steps[i].kind == LB_STEP_SEND_ACT &&
		    st[0].steps[i + 1].kind == LB_STEP_SEND_GRAD &&
		    st[0].steps[i].group == st[0].steps[i + 1].group) {
			tmp = st[0].steps[i];
			st[0].steps[i] = st[0].steps[i + 1];
			st[0].steps[i + 1] = tmp;
			break;
		}
	assert_int_equal(lb_pipe_simulate(st, 2, &rep), -1);
	assert_non_null(strstr(rep.error, "same order"));
	assert_non_null(strstr(rep.error, "chunk"));
	release_all(2, st);

	/* a send to a stage that does not exist */
	build_all(LB_SCHED_GPIPE, 2, 1, st);
	st[1].steps[0].kind = LB_STEP_SEND_ACT; /* ra0 -> sa0 to stage 0 */
	assert_int_equal(lb_pipe_simulate(st, 2, &rep), -1);
	assert_string_not_equal(rep.error, "");
	release_all(2, st);
}

static void test_bad_args(void **state)
{
	struct lb_schedule s;
	enum lb_sched_kind k;
	char err[256];

	assert_int_equal(lb_schedule_build(LB_SCHED_1F1B, 0, 1, 0, 1, &s, err, sizeof(err)), -1);
	assert_int_equal(lb_schedule_build(LB_SCHED_1F1B, 4, 1, 4, 1, &s, err, sizeof(err)), -1);
	assert_string_equal(err, "stage 4 is not in a pipeline of 4 stages");
	assert_int_equal(lb_schedule_build(LB_SCHED_1F1B, 4, 1, 0, 0, &s, err, sizeof(err)), -1);
	assert_int_equal(lb_sched_parse("gpipe", &k), 0);
	assert_int_equal(k, LB_SCHED_GPIPE);
	assert_int_equal(lb_sched_parse("1f1b", &k), 0);
	assert_int_equal(k, LB_SCHED_1F1B);
	assert_int_equal(lb_sched_parse("interleaved", &k), 0);
	assert_int_equal(k, LB_SCHED_INTERLEAVED);
	assert_int_equal(lb_sched_parse("zb", &k), -1);
	assert_string_equal(lb_step_name(LB_STEP_RECV_GRAD), "recv_grad");
}

/* Larger pipelines keep the bounds (a quick look beyond the exhaustive sweep). */
static void test_large(void **state)
{
	static struct lb_schedule st[32];
	struct lb_sim_report rep;

	build_all(LB_SCHED_1F1B, 32, 128, st);
	assert_int_equal(lb_pipe_simulate(st, 32, &rep), 0);
	assert_int_equal(rep.max_in_flight[0], 32);
	assert_int_equal(rep.max_in_flight[31], 1);
	assert_true(fabs(rep.bubble - 31.0 / 159.0) < 1e-12);
	release_all(32, st);
	/* the interleaved schedule on 16 stages, 4 chunks, 64 micro-batches */
	build_v(LB_SCHED_INTERLEAVED, 16, 4, 64, st);
	assert_int_equal(lb_pipe_simulate(st, 16, &rep), 0);
	assert_int_equal(rep.max_in_flight[0], 2 * 15 + 3 * 16 + 1);
	assert_true(fabs(rep.bubble_ratio - 15.0 / 256.0) < 1e-12);
	release_all(16, st);
}

/* The slots without the whole list equal the whole list's, past the cap and below it. */
static void expect_slots(enum lb_sched_kind kind, int pp, int v, int s, int nm)
{
	struct lb_schedule whole;
	int got[LB_MAX_VIRTUAL_STAGES];
	char err[256];

	if (lb_schedule_build(kind, pp, v, s, nm, &whole, err, sizeof(err)))
		fail_msg("build %s pp=%d v=%d stage %d n_micro=%d: %s", lb_sched_name(kind), pp, v,
			 s, nm, err);
	if (lb_schedule_slots(kind, pp, v, s, nm, got, err, sizeof(err)))
		fail_msg("slots %s pp=%d v=%d stage %d n_micro=%d: %s", lb_sched_name(kind), pp, v,
			 s, nm, err);
	for (int c = 0; c < LB_MAX_VIRTUAL_STAGES; c++)
		if (got[c] != whole.n_slots[c])
			fail_msg("%s pp=%d v=%d stage %d n_micro=%d chunk %d: %d slots, the whole "
				 "list holds %d",
				 lb_sched_name(kind), pp, v, s, nm, c, got[c], whole.n_slots[c]);
	lb_schedule_release(&whole);
}

static void test_slots_capped(void **state)
{
	int got[LB_MAX_VIRTUAL_STAGES];
	char err[256];

	(void)state;
	for (int pp = 1; pp <= 16; pp++)
		for (int s = 0; s < pp; s++) {
			for (int nm = 1; nm <= 12 * pp; nm++)
				expect_slots(LB_SCHED_1F1B, pp, 1, s, nm);
			expect_slots(LB_SCHED_1F1B, pp, 1, s, 1000 * pp + 7);
			for (int nm = 1; nm <= 3 * pp + 1; nm++)
				expect_slots(LB_SCHED_GPIPE, pp, 1, s, nm);
			if (pp < 2)
				continue;
			for (int v = 2; v <= 4; v++) {
				for (int nm = pp; nm <= 12 * pp; nm += pp)
					expect_slots(LB_SCHED_INTERLEAVED, pp, v, s, nm);
				expect_slots(LB_SCHED_INTERLEAVED, pp, v, s, 500 * pp);
			}
		}
	/* refused as the whole list would be, however far past the cap */
	assert_int_equal(lb_schedule_slots(LB_SCHED_INTERLEAVED, 4, 2, 0, 4001, got, err,
					   sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "multiple of pp=4"));
	assert_int_equal(lb_schedule_slots(LB_SCHED_1F1B, 4, 1, 0, (1 << 20) + 1, got, err,
					   sizeof(err)),
			 -1);
	assert_int_equal(lb_schedule_slots(LB_SCHED_1F1B, 4, 1, 4, 8, got, err, sizeof(err)), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_args),
	    cmocka_unit_test(test_format),
	    cmocka_unit_test(test_1f1b_sweep),
	    cmocka_unit_test(test_gpipe_sweep),
	    cmocka_unit_test(test_broken),
	    cmocka_unit_test(test_large),
	    cmocka_unit_test(test_interleaved_sweep),
	    cmocka_unit_test(test_interleaved_rules),
	    cmocka_unit_test(test_slots_capped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
