/*
 * The schedules run for real: a toy pipeline (stage s computes y = a_s x + b_m forward and
 * g_in = a_s g_out backward, the last stage starts the backward from g = y) over the
 * shared-memory communicator, one process per stage started by lb_launch, activations of
 * 400 KB (larger than a channel, so unpaired blocking sends would deadlock). Stage 0's
 * input gradients must equal a serial computation bit for bit, and no stage may hold more
 * micro-batches than the schedule promises.
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

#include "harness/comm_shm.h"
#include "harness/launch.h"
#include "harness/schedule.h"

#define L    100000 /* floats per activation */
#define MAXM 16

struct shared {
	int max_in_flight[16];
	int bad[16];
};
static struct shared *sh;

struct job {
	enum lb_sched_kind kind;
	int pp, nm;
};

struct stage {
	int s, pp, nm, in_flight, max_in_flight;
	float *act_in[MAXM], *act_out[MAXM], *grad_out[MAXM], *grad_in[MAXM];
};

static float a_of(int s)
{
	return 0.5f + 0.25f * (float)s;
}

static float input(int m, int i)
{
	return (float)((m * 31 + i) % 97) * 0.125f - 6.0f;
}

static int fwd(void *ctx, int m)
{
	struct stage *st = ctx;
	float a = a_of(st->s), b = 0.01f * (float)m;

	if (st->s == 0)
		for (int i = 0; i < L; i++)
			st->act_in[m][i] = input(m, i);
	for (int i = 0; i < L; i++)
		st->act_out[m][i] = st->act_in[m][i] * a + b;
	if (++st->in_flight > st->max_in_flight)
		st->max_in_flight = st->in_flight;
	return 0;
}

static int bwd(void *ctx, int m)
{
	struct stage *st = ctx;
	float a = a_of(st->s);
	const float *g = st->s == st->pp - 1 ? st->act_out[m] : st->grad_out[m];

	for (int i = 0; i < L; i++)
		st->grad_in[m][i] = g[i] * a;
	st->in_flight--;
	return 0;
}

static void *buffer(void *ctx, enum lb_step_kind kind, int m, size_t *count, enum lb_dtype *t)
{
	struct stage *st = ctx;

	*count = L;
	*t = LB_F32;
	switch (kind) {
	case LB_STEP_SEND_ACT:
		return st->act_out[m];
	case LB_STEP_RECV_ACT:
		return st->act_in[m];
	case LB_STEP_SEND_GRAD:
		return st->grad_in[m];
	case LB_STEP_RECV_GRAD:
		return st->grad_out[m];
	default:
		return NULL;
	}
}

static int rank_main(const struct lb_rank_env *env, void *arg)
{
	const struct job *j = arg;
	const struct lb_pipe_ops ops = {fwd, bwd, buffer};
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
	st.nm = j->nm;
	for (int m = 0; m < j->nm; m++) {
		st.act_in[m] = calloc(L, sizeof(float));
		st.act_out[m] = calloc(L, sizeof(float));
		st.grad_out[m] = calloc(L, sizeof(float));
		st.grad_in[m] = calloc(L, sizeof(float));
		if (!st.act_in[m] || !st.act_out[m] || !st.grad_out[m] || !st.grad_in[m])
			return 4;
	}
	if (lb_schedule_build(j->kind, j->pp, st.s, j->nm, &sched, err, sizeof(err)))
		return 5;
	if (lb_schedule_execute(&sched, g.pp, &ops, &st)) {
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
			for (int s = 0; s < j->pp; s++)
				for (int i = 0; i < L; i++)
					y[i] = y[i] * a_of(s) + 0.01f * (float)m;
			for (int s = j->pp - 1; s >= 0; s--)
				for (int i = 0; i < L; i++)
					y[i] = y[i] * a_of(s);
			if (memcmp(y, st.grad_in[m], L * sizeof(float)))
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

static void run(enum lb_sched_kind kind, int pp, int nm)
{
	struct job j = {kind, pp, nm};
	struct lb_launch_result res;

	memset(sh, 0, sizeof(*sh));
	if (lb_launch(pp, rank_main, &j, NULL, &res) != 0)
		fail_msg("%s pp=%d n_micro=%d: %s", lb_sched_name(kind), pp, nm, res.message);
	for (int s = 0; s < pp; s++) {
		int bound = kind == LB_SCHED_1F1B ? pp - s : nm;

		assert_int_equal(sh->bad[s], 0);
		assert_int_equal(sh->max_in_flight[s], bound < nm ? bound : nm);
	}
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

static void test_wrong_comm(void **state)
{
	struct lb_schedule s;
	struct lb_comm *c = lb_comm_self();
	const struct lb_pipe_ops ops = {fwd, bwd, buffer};
	char err[128];

	assert_int_equal(lb_schedule_build(LB_SCHED_1F1B, 2, 1, 2, &s, err, sizeof(err)), 0);
	assert_int_equal(lb_schedule_execute(&s, c, &ops, NULL), LB_COMM_EFAIL);
	lb_schedule_release(&s);
	c->ops->destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_1f1b),
	    cmocka_unit_test(test_gpipe),
	    cmocka_unit_test(test_wrong_comm),
	};

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
