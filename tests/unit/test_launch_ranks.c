/*
 * Unit tests of the launcher and rank discovery: ranks get their place and one
 * rendezvous name; a rank that exits with 3 makes the launcher stop the others and
 * report that rank and status; a rank killed by a signal; a rank that ignores SIGTERM is
 * killed after the grace period; a rank that fails through the shm communicator is
 * reported rather than the peer that noticed; SIGTERM to the launcher; Slurm variables;
 * the Megatron rank order and the groups built from it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness/comm/comm_shm.h"
#include "harness/comm/groups.h"
#include "harness/launch.h"

struct shared {
	int seen[16];
	int world[16];
	char names[16][128];
};
static struct shared *sh;

static int ok_main(const struct lb_rank_env *env, void *arg)
{
	sh->seen[env->rank] = 1;
	sh->world[env->rank] = env->world_size;
	snprintf(sh->names[env->rank], sizeof(sh->names[0]), "%s", env->rdzv_name);
	return 0;
}

static void test_all_ok(void **state)
{
	struct lb_launch_result res;

	memset(sh, 0, sizeof(*sh));
	assert_int_equal(lb_launch(4, ok_main, NULL, NULL, &res), 0);
	assert_int_equal(res.failed_rank, -1);
	assert_int_equal(res.status, 0);
	for (int r = 0; r < 4; r++) {
		assert_int_equal(sh->seen[r], 1);
		assert_int_equal(sh->world[r], 4);
		assert_string_equal(sh->names[r], res.rdzv_name);
	}
	assert_int_equal(strncmp(res.rdzv_name, "/lb-", 4), 0);
}

/* Rank 2 exits with 3; the others would run forever. */
static int exit3_main(const struct lb_rank_env *env, void *arg)
{
	if (env->rank == 2) {
		usleep(100000);
		return 3;
	}
	for (;;)
		pause();
}

static void test_rank_exits_3(void **state)
{
	struct lb_launch_opts o = LB_LAUNCH_OPTS_INIT;
	struct lb_launch_result res;

	o.grace_s = 1.0;
	assert_int_equal(lb_launch(4, exit3_main, NULL, &o, &res), 1);
	assert_int_equal(res.failed_rank, 2);
	assert_int_equal(res.exit_code, 3);
	assert_int_equal(res.signal, 0);
	assert_int_equal(res.status, 3);
	assert_int_equal(res.n_stopped, 3);
	assert_string_equal(res.message, "rank 2 exited with status 3");
	assert_true(res.elapsed_s < 5.0);
}

/* A rank killed by a signal; the others ignore SIGTERM and need SIGKILL. */
static int sig_main(const struct lb_rank_env *env, void *arg)
{
	if (env->rank == 1) {
		usleep(100000);
		raise(SIGKILL);
	}
	signal(SIGTERM, SIG_IGN);
	for (;;)
		pause();
	return 0;
}

static void test_rank_killed(void **state)
{
	struct lb_launch_opts o = LB_LAUNCH_OPTS_INIT;
	struct lb_launch_result res;

	o.grace_s = 0.5;
	assert_int_equal(lb_launch(3, sig_main, NULL, &o, &res), 1);
	assert_int_equal(res.failed_rank, 1);
	assert_int_equal(res.exit_code, -1);
	assert_int_equal(res.signal, SIGKILL);
	assert_int_equal(res.status, 128 + SIGKILL);
	assert_non_null(strstr(res.message, "rank 1 killed by signal 9"));
	assert_true(res.elapsed_s >= 0.5 && res.elapsed_s < 5.0);
}

/* Through the communicator: rank 1 fails (exit 3) after joining; rank 0 notices and
 * exits with the trainer's peer code 6. The launcher names rank 1. */
static int comm_main(const struct lb_rank_env *env, void *arg)
{
	struct lb_comm *c;
	char err[256];
	float x = 1;

	if (lb_comm_shm_create(env->rdzv_name, env->rank, env->world_size, 2.0, &c, err,
			       sizeof(err)))
		return 1;
	if (env->rank == 1)
		return 3;
	for (;;)
		if (c->ops->all_reduce(c, &x, &x, 1, LB_F32, LB_SUM, NULL))
			return 6;
}

static void test_root_cause_reported(void **state)
{
	struct lb_launch_result res;
	char path[200];

	assert_int_equal(lb_launch(3, comm_main, NULL, NULL, &res), 1);
	assert_int_equal(res.failed_rank, 1);
	assert_int_equal(res.status, 3);
	assert_true(res.elapsed_s < 5.0);
	snprintf(path, sizeof(path), "/dev/shm%s", res.rdzv_name);
	assert_int_not_equal(access(path, F_OK), 0); /* the segment is gone */
}

/* SIGTERM to the launcher stops the ranks. */
static int term_main(const struct lb_rank_env *env, void *arg)
{
	if (env->rank == 0) {
		usleep(100000);
		kill(getppid(), SIGTERM);
	}
	for (;;)
		pause();
	return 0;
}

static void test_launcher_terminated(void **state)
{
	struct lb_launch_result res;

	assert_int_equal(lb_launch(2, term_main, NULL, NULL, &res), 1);
	assert_int_equal(res.failed_rank, -1);
	assert_int_equal(res.status, 128 + SIGTERM);
	assert_non_null(strstr(res.message, "signal 15"));
	assert_int_equal(res.n_stopped, 2);
}

static void test_bad_nproc(void **state)
{
	struct lb_launch_result res;

	assert_int_equal(lb_launch(0, ok_main, NULL, NULL, &res), -1);
	assert_non_null(strstr(res.message, "--nproc-per-node 0"));
}

static void clear_slurm(void)
{
	const char *v[] = {"SLURM_PROCID",	   "SLURM_NTASKS",
			   "SLURM_LOCALID",	   "SLURM_NNODES",
			   "SLURM_JOB_ID",	   "SLURM_STEP_ID",
			   "SLURM_ARRAY_TASK_ID",  "SLURM_NTASKS_PER_NODE",
			   "SLURM_TASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE"};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		unsetenv(v[i]);
}

static void test_slurm_env(void **state)
{
	struct lb_rank_env env;
	char err[256];

	clear_slurm();
	memset(&env, 0x55, sizeof(env));
	assert_int_equal(lb_rank_env_from_slurm(&env, 1, err, sizeof(err)), 0);
	setenv("SLURM_PROCID", "2", 1);
	setenv("SLURM_NTASKS", "4", 1);
	setenv("SLURM_LOCALID", "2", 1);
	setenv("SLURM_NNODES", "1", 1);
	setenv("SLURM_JOB_ID", "123", 1);
	setenv("SLURM_STEP_ID", "0", 1);
	assert_int_equal(lb_rank_env_from_slurm(&env, 1, err, sizeof(err)), 1);
	assert_int_equal(env.rank, 2);
	assert_int_equal(env.world_size, 4);
	assert_int_equal(env.local_rank, 2);
	assert_int_equal(env.local_size, 4);
	assert_int_equal(env.under_slurm, 1);
	assert_string_equal(env.rdzv_name, "/lb-123-0");
	setenv("SLURM_ARRAY_TASK_ID", "7", 1);
	assert_int_equal(lb_rank_env_from_slurm(&env, 1, err, sizeof(err)), 1);
	assert_string_equal(env.rdzv_name, "/lb-123_7-0");
	assert_string_equal(env.job_id, "123_7");
	/* two nodes: refused for shm, with the fix named */
	setenv("SLURM_NNODES", "2", 1);
	setenv("SLURM_TASKS_PER_NODE", "2(x2)", 1);
	assert_int_equal(lb_rank_env_from_slurm(&env, 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "spans 2 nodes"));
	assert_non_null(strstr(err, "nccl"));
	assert_int_equal(lb_rank_env_from_slurm(&env, 0, err, sizeof(err)), 1);
	assert_int_equal(env.nnodes, 2);
	assert_int_equal(env.local_size, 2);
	/* numbers are checked */
	setenv("SLURM_PROCID", "4", 1);
	assert_int_equal(lb_rank_env_from_slurm(&env, 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "SLURM_PROCID='4'"));
	setenv("SLURM_PROCID", "two", 1);
	assert_int_equal(lb_rank_env_from_slurm(&env, 0, err, sizeof(err)), -1);
	clear_slurm();
	lb_rank_env_single(&env);
	assert_int_equal(env.world_size, 1);
	assert_int_equal(strncmp(env.rdzv_name, "/lb-", 4), 0);
}

static void test_coords(void **state)
{
	static const int shapes[][3] = {{1, 1, 1}, {2, 2, 2}, {4, 2, 3}, {8, 1, 1},
					{1, 8, 1}, {1, 1, 8}, {2, 4, 1}};
	struct lb_rank_coords c;

	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		int tp = shapes[k][0], pp = shapes[k][1], dp = shapes[k][2];

		for (int r = 0; r < tp * pp * dp; r++) {
			assert_int_equal(lb_groups_rank_to_coords(r, tp, pp, dp, &c), 0);
			assert_int_equal(lb_groups_coords_to_rank(&c, tp, pp, dp), r);
		}
		assert_int_equal(lb_groups_rank_to_coords(tp * pp * dp, tp, pp, dp, &c), -1);
	}
	/* Megatron order: tp adjacent, then dp, then pp */
	assert_int_equal(lb_groups_rank_to_coords(5, 2, 2, 2, &c), 0);
	assert_int_equal(c.tp_rank, 1);
	assert_int_equal(c.dp_rank, 0);
	assert_int_equal(c.pp_rank, 1);
	assert_int_equal(lb_groups_rank_to_coords(11, 4, 2, 3, &c), 0); /* tp 4, dp 3: 11 = 0*12+2*4+3 */
	assert_int_equal(c.tp_rank, 3);
	assert_int_equal(c.dp_rank, 2);
	assert_int_equal(c.pp_rank, 0);
	c.tp_rank = 2;
	assert_int_equal(lb_groups_coords_to_rank(&c, 2, 2, 2), -1);
	assert_int_equal(lb_groups_rank_to_coords(0, 0, 1, 1, &c), -1);
}

static void test_groups_self(void **state)
{
	struct lb_comm *w = lb_comm_self();
	struct lb_groups g;

	assert_int_equal(lb_comm_make_groups(w, 1, 1, 1, &g), 0);
	assert_int_equal(g.tp->size, 1);
	assert_int_equal(g.dp->size, 1);
	assert_int_equal(g.pp->size, 1);
	assert_int_equal(g.pp_prev, -1);
	assert_int_equal(g.pp_next, -1);
	lb_groups_release(&g);
	assert_int_equal(lb_comm_make_groups(w, 2, 1, 1, &g), LB_COMM_EFAIL);
	assert_null(g.tp);
	w->ops->destroy(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_all_ok),
	    cmocka_unit_test(test_rank_exits_3),
	    cmocka_unit_test(test_rank_killed),
	    cmocka_unit_test(test_root_cause_reported),
	    cmocka_unit_test(test_launcher_terminated),
	    cmocka_unit_test(test_bad_nproc),
	    cmocka_unit_test(test_slurm_env),
	    cmocka_unit_test(test_coords),
	    cmocka_unit_test(test_groups_self),
	};

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
