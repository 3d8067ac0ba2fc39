/*
 * The pipeline bubble the trainer's schedules model, checked exactly (no clock): for the
 * layouts the trainer runs (lb_schedule_for_layout: the lists its executor walks), the
 * simulator's idle time over busy time is (pp - 1) / n_micro for 1F1B and
 * (pp - 1) / (v n_micro) interleaved (Narayanan et al. 2021: the bubble shrinks by the
 * number of chunks per stage), over pp 2..8, v 1..4 and several micro-batch counts. And
 * the real trainer step runs both schedules at pp 4 over the shared-memory communicator
 * and records a bubble time on rank 0 (what the run log has as phases.bubble_s).
 * Whether the measured bubble falls as modelled is a wall-time question, which a loaded
 * machine moves: bench/bench_bubble.c measures it (make bench).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/model.h"
#include "common/util.h"
#include "harness/comm/comm_shm.h"
#include "harness/launch.h"
#include "harness/pipe.h"
#include "harness/train.h"

#define PP    4
#define STEPS 3 /* the first is warm-up */

struct shared {
	double bubble[STEPS];  /* rank 0's phases.bubble_s */
	double compute[STEPS]; /* its forward_s + backward_s */
	int failed;
	char err[1100];
};
static struct shared *sh;

static void layout_for(struct lb_train_opts *o, int pp, int v, int n_micro)
{
	lb_train_opts_init(o);
	assert_int_equal(lb_model_preset("tiny-deep", &o->layout.model), 0);
	o->layout.seq_len = 16;
	o->layout.global_batch = n_micro;
	o->layout.micro_batch = 1;
	o->layout.pp = pp;
	o->layout.gpus_per_node = pp;
	o->layout.virtual_stages = v;
	o->layout.steps = STEPS;
	o->layout.warmup = 1;
	o->quiet = 1;
	o->comm_timeout = 60;
}

static int rank_main(const struct lb_rank_env *env, void *arg)
{
	const struct lb_train_opts *o = arg;
	struct lb_trainer *t = calloc(1, sizeof(*t));
	struct lb_comm *w = NULL;
	struct lb_groups g;
	char err[256];
	int rc = 0;

	if (!t)
		return 2;
	if (lb_comm_shm_create(env->rdzv_name, env->rank, env->world_size, o->comm_timeout, &w, err,
			       sizeof(err)) ||
	    lb_comm_make_groups(w, o->layout.tp, o->layout.pp, o->layout.dp, &g))
		return 3;
	if ((rc = lb_trainer_init_par(t, o, lb_ops_cpu(), w, &g))) {
		snprintf(sh->err, sizeof(sh->err), "%s", t->err);
		sh->failed = 1;
		return 4;
	}
	for (int s = 0; s < STEPS; s++) {
		double loss;

		if ((rc = lb_trainer_step(t, s, &loss))) {
			snprintf(sh->err, sizeof(sh->err), "step %d: %s", s, t->err);
			sh->failed = 1;
			break;
		}
		if (env->rank == 0) { /* what the run log records for the step */
			sh->bubble[s] = t->phases.bubble_s;
			sh->compute[s] = t->phases.forward_s + t->phases.backward_s;
		}
	}
	lb_trainer_free(t);
	free(t);
	lb_groups_release(&g);
	w->ops->destroy(w);
	return rc ? 5 : 0;
}

/* The simulator's idle over busy time (summed over stages) of the trainer's own lists for
 * a pp-stage layout with v chunks per stage and n_micro micro-batches per step. */
static double modelled(int pp, int v, int n_micro)
{
	struct lb_train_opts o;
	struct lb_schedule st[LB_SCHED_MAX_PP];
	struct lb_sim_report rep;
	char err[256];
	double rel;

	layout_for(&o, pp, v, n_micro);
	for (int s = 0; s < pp; s++)
		assert_int_equal(
		    lb_schedule_for_layout(&o.layout, LB_SCHED_1F1B, s, &st[s], err, sizeof(err)),
		    0);
	assert_int_equal(lb_pipe_simulate(st, pp, &rep), 0);
	rel = rep.bubble_ratio;
	for (int s = 0; s < pp; s++)
		lb_schedule_release(&st[s]);
	return rel;
}

static void test_modelled_bubble_shrinks_by_the_chunks(void **state)
{
	int n = 0;

	(void)state;
	/* tiny-deep has 8 layers: pp * v chunks of at least one layer */
	for (int pp = 2; pp <= 8; pp *= 2)
		for (int v = 1; v <= 4 && pp * v <= 8; v *= 2)
			for (int k = 1; k <= 4; k *= 2) {
				int nm = k * pp; /* interleaving needs a multiple of pp */
				double want = (double)(pp - 1) / ((double)v * nm);

				assert_true(fabs(modelled(pp, v, nm) - want) < 1e-12);
				n++;
			}
	assert_int_equal(n, 18);
	/* the case the benchmark measures: pp 4, 8 micro-batches */
	assert_true(fabs(modelled(PP, 1, 8) - 3.0 / 8) < 1e-12);
	assert_true(fabs(modelled(PP, 2, 8) - 3.0 / 16) < 1e-12);
}

/* The trainer runs the schedule at pp 4, v chunks, 8 micro-batches, and rank 0 records a
 * bubble time for every step. */
static void run_records_bubble(int v)
{
	struct lb_train_opts o;
	struct lb_launch_result res;

	layout_for(&o, PP, v, 8);
	memset(sh, 0, sizeof(*sh));
	if (lb_launch(PP, rank_main, &o, NULL, &res) != 0 || sh->failed)
		fail_msg("pp=%d v=%d: %s %s", PP, v, res.message, sh->err);
	for (int s = 0; s < STEPS; s++) {
		assert_true(isfinite(sh->bubble[s]) && sh->bubble[s] >= 0);
		assert_true(sh->compute[s] > 0);
	}
}

static void test_trainer_runs_both_schedules(void **state)
{
	(void)state;
	run_records_bubble(1);
	run_records_bubble(2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_modelled_bubble_shrinks_by_the_chunks),
	    cmocka_unit_test(test_trainer_runs_both_schedules),
	};

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
