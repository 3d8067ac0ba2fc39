/*
 * The schedules run for real through the executor the trainer uses
 * (lb_pipe_execute): a toy pipeline (model chunk k in pipeline order computes
 * y = a_k x + b_m forward and g_in = a_k g_out backward, the last chunk starts the
 * backward from g = y) over the shared-memory communicator, one process per stage
 * started by lb_launch, activations of 400 KB (larger than a channel, so unpaired
 * blocking sends would deadlock). 1F1B, GPipe and the interleaved schedule (2 and 3
 * chunks per stage, 2 to 4 stages: with 2 stages both directions of the ring share one
 * pair of channels). The first chunk's input gradients must equal a serial computation
 * bit for bit, and no stage may hold more chunk passes than the schedule promises.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "harness/comm/comm_shm.h"
#include "harness/comm/groups.h"
#include "harness/launch.h"
#include "harness/pipe.h"

#define L    100000 /* floats per activation */
#define MAXM 16
#define MAXV 3

struct shared {
	int max_in_flight[16];
	int bad[16];
};
static struct shared *sh;

struct job {
	enum lb_sched_kind kind;
	int pp, v, nm;
};

struct stage {
	int s, pp, v, nm, in_flight, max_in_flight;
	float *act_in[MAXV][MAXM], *act_out[MAXV][MAXM], *grad_out[MAXV][MAXM],
	    *grad_in[MAXV][MAXM];
};

static float a_of(int s)
{
	return 0.5f + 0.25f * (float)s;
}

static float input(int m, int i)
{
	return (float)((m * 31 + i) % 97) * 0.125f - 6.0f;
}

static int fwd(void *ctx, const struct lb_step *x)
{
	struct stage *st = ctx;
	int c = x->chunk, m = x->micro, k = c * st->pp + st->s;
	float a = a_of(k), b = 0.01f * (float)m;

	if (k == 0)
		for (int i = 0; i < L; i++)
			st->act_in[c][m][i] = input(m, i);
	for (int i = 0; i < L; i++)
		st->act_out[c][m][i] = st->act_in[c][m][i] * a + b;
	if (++st->in_flight > st->max_in_flight)
		st->max_in_flight = st->in_flight;
	return 0;
}

static int bwd(void *ctx, const struct lb_step *x)
{
	struct stage *st = ctx;
	int c = x->chunk, m = x->micro, k = c * st->pp + st->s;
	float a = a_of(k);
	const float *g = k == st->pp * st->v - 1 ? st->act_out[c][m] : st->grad_out[c][m];

	for (int i = 0; i < L; i++)
		st->grad_in[c][m][i] = g[i] * a;
	st->in_flight--;
	return 0;
}

static void *buffer(void *ctx, const struct lb_step *x, size_t *count, enum lb_dtype *t)
{
	struct stage *st = ctx;
	int c = x->chunk, m = x->micro;

	*count = L;
	*t = LB_F32;
	switch (x->kind) {
	case LB_STEP_SEND_ACT:
		return st->act_out[c][m];
	case LB_STEP_RECV_ACT:
		return st->act_in[c][m];
	case LB_STEP_SEND_GRAD:
		return st->grad_in[c][m];
	case LB_STEP_RECV_GRAD:
		return st->grad_out[c][m];
	default:
		return NULL;
	}
}

static int rank_main(const struct lb_rank_env *env, void *arg)
{
	const struct job *j = arg;
	const struct lb_pipe_ops ops = {fwd, bwd, buffer, NULL, NULL, NULL};
	struct lb_comm *w;
	struct lb_groups g;
	struct lb_schedule sched;
	struct stage st;
	char err[256];
	int bad = 0;

	if (lb_comm_shm_create(env->rdzv_name, env->rank, env->world_size, 10.0, &w, err,
			       sizeof(err)))
		return 2;
	if (lb_comm_make_groups(w, 1, j->pp, 1, &g))
		return 3;
	memset(&st, 0, sizeof(st));
	st.s = g.me.pp_rank;
	st.pp = j->pp;
	st.v = j->v;
	st.nm = j->nm;
	for (int c = 0; c < j->v; c++)
		for (int m = 0; m < j->nm; m++) {
			st.act_in[c][m] = calloc(L, sizeof(float));
			st.act_out[c][m] = calloc(L, sizeof(float));
			st.grad_out[c][m] = calloc(L, sizeof(float));
			st.grad_in[c][m] = calloc(L, sizeof(float));
			if (!st.act_in[c][m] || !st.act_out[c][m] || !st.grad_out[c][m] ||
			    !st.grad_in[c][m])
				return 4;
		}
	if (lb_schedule_build(j->kind, j->pp, j->v, st.s, j->nm, &sched, err, sizeof(err)))
		return 5;
	if (lb_pipe_execute(&sched, g.pp, &ops, &st)) {
		lb_comm_shm_error(g.pp, NULL, err, sizeof(err));
		fprintf(stderr, "stage %d: %s\n", st.s, err);
		return 6;
	}
	sh->max_in_flight[st.s] = st.max_in_flight;
	if (st.s == 0) { /* the serial computation, in the same float operations */
		float *y = malloc(L * sizeof(float));

		if (!y)
			return 7;
		for (int m = 0; m < j->nm; m++) {
			for (int i = 0; i < L; i++)
				y[i] = input(m, i);
			for (int k = 0; k < j->pp * j->v; k++)
				for (int i = 0; i < L; i++)
					y[i] = y[i] * a_of(k) + 0.01f * (float)m;
			for (int k = j->pp * j->v - 1; k >= 0; k--)
				for (int i = 0; i < L; i++)
					y[i] = y[i] * a_of(k);
			if (memcmp(y, st.grad_in[0][m], L * sizeof(float)))
				bad++;
		}
		free(y);
	}
	sh->bad[st.s] = bad;
	lb_schedule_release(&sched);
	lb_groups_release(&g);
	w->ops->destroy(w);
	return bad ? 8 : 0;
}

static void run_v(enum lb_sched_kind kind, int pp, int v, int nm)
{
	struct job j = {kind, pp, v, nm};
	struct lb_launch_result res;

	memset(sh, 0, sizeof(*sh));
	if (lb_launch(pp, rank_main, &j, NULL, &res) != 0)
		fail_msg("%s pp=%d v=%d n_micro=%d: %s", lb_sched_name(kind), pp, v, nm,
			 res.message);
	for (int s = 0; s < pp; s++) {
		int bound = kind == LB_SCHED_1F1B ? pp - s : nm;

		if (kind == LB_SCHED_INTERLEAVED) /* Megatron-LM's warm-up, plus one */
			bound = nm == pp ? nm * v : 2 * (pp - s - 1) + (v - 1) * pp + 1;
		assert_int_equal(sh->bad[s], 0);
		assert_int_equal(sh->max_in_flight[s], bound < nm * v ? bound : nm * v);
	}
}

static void run(enum lb_sched_kind kind, int pp, int nm)
{
	run_v(kind, pp, 1, nm);
}

static void test_1f1b(void **state)
{
	run(LB_SCHED_1F1B, 4, 8);
	run(LB_SCHED_1F1B, 4, 2);
	run(LB_SCHED_1F1B, 2, 3);
	run(LB_SCHED_1F1B, 1, 2);
}

static void test_gpipe(void **state)
{
	run(LB_SCHED_GPIPE, 4, 8);
	run(LB_SCHED_GPIPE, 3, 1);
}

static void test_interleaved(void **state)
{
	run_v(LB_SCHED_INTERLEAVED, 2, 2, 2);
	run_v(LB_SCHED_INTERLEAVED, 2, 2, 6);
	run_v(LB_SCHED_INTERLEAVED, 2, 3, 4);
	run_v(LB_SCHED_INTERLEAVED, 4, 2, 8);
	run_v(LB_SCHED_INTERLEAVED, 3, 3, 6);
}

static void test_wrong_comm(void **state)
{
	struct lb_schedule s;
	struct lb_comm *c = lb_comm_self();
	const struct lb_pipe_ops ops = {fwd, bwd, buffer, NULL, NULL, NULL};
	char err[128];

	assert_int_equal(lb_schedule_build(LB_SCHED_1F1B, 2, 1, 1, 2, &s, err, sizeof(err)), 0);
	assert_int_equal(lb_pipe_execute(&s, c, &ops, NULL), LB_COMM_EFAIL);
	lb_schedule_release(&s);
	c->ops->destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_1f1b),
	    cmocka_unit_test(test_gpipe),
	    cmocka_unit_test(test_interleaved),
	    cmocka_unit_test(test_wrong_comm),
	};

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
