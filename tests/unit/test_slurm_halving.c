/*
 * Successive halving (slurm/halving.h) and its rank test (common/ranktest.h):
 *  - the test's exact p against an enumeration of every split of the pooled sample, the
 *    published critical values, the normal approximation beside the exact p, ties;
 *  - the schedule (the H200 grid's rungs; the faults named);
 *  - the decision of a rung: known speeds keep the fastest and drop the slow, equal
 *    layouts are cut at most as often as the level says (and never with the margin),
 *    failures are dropped with their class, the last rung says what differs;
 *  - the whole policy through the database with an executor of the test's own that
 *    "runs" each job by writing its run and steps (the path every executor shares):
 *    the fastest layout wins, an oom layout is dropped as oom, a lost job (node_fail)
 *    gets one more, a halving interrupted after its jobs were submitted but before they
 *    were tied to its rung adopts them instead of submitting twice, a new process (a
 *    fresh handle and executor set) resumes it, a cancelled job ends it as cancelled.
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
#include <time.h>
#include <unistd.h>

#include "common/ranktest.h"
#include "results/collect.h"
#include "results/jobs.h"
#include "slurm/halving.h"
#include "slurm/submit.h"
#include "slurm/track.h"
#include "sweeps/sweep.h"

/* ------------------------------------------------------------------ the rank test */

/* P(U >= u) by enumerating every way to pick which na of the pooled values are a's:
 * the definition of the exact null distribution, independent of the recursion. */
static double brute_p(const double *a, size_t na, const double *b, size_t nb, double margin)
{
	size_t n = na + nb, hits = 0, total = 0;
	double pool[16], u_obs = 0;

	assert_true(n <= 16);
	for (size_t i = 0; i < na; i++)
		pool[i] = a[i] * (1 + margin);
	for (size_t j = 0; j < nb; j++)
		pool[na + j] = b[j];
	for (size_t i = 0; i < na; i++)
		for (size_t j = 0; j < nb; j++)
			u_obs += b[j] > pool[i] ? 1 : b[j] == pool[i] ? 0.5 : 0;
	for (unsigned mask = 0; mask < (1u << n); mask++) {
		if ((size_t)__builtin_popcount(mask) != na)
			continue;
		double u = 0;
		for (size_t i = 0; i < n; i++)
			if (mask & (1u << i))
				for (size_t j = 0; j < n; j++)
					if (!(mask & (1u << j)))
						u += pool[j] > pool[i] ? 1 : 0;
		total++;
		hits += u >= u_obs - 1e-9;
	}
	return (double)hits / (double)total;
}

static uint64_t rng_state = 88172645463325252ull;
static double uniform(void) /* [0, 1) */
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (double)(rng_state >> 11) / 9007199254740992.0;
}
static double normal(void)
{
	double u = uniform() + 1e-300, v = uniform();
	return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

static void test_rank_exact(void **state)
{
	struct lb_rank_test t;
	/* every b above every a: 1 / C(8, 4) = 1/70 */
	double a4[] = {1.0, 1.1, 1.2, 1.3}, b4[] = {2.0, 2.1, 2.2, 2.3};
	assert_int_equal(lb_ranktest_slower(a4, 4, b4, 4, 0, &t), 0);
	assert_true(t.exact);
	assert_float_equal(t.u, 16, 0);
	assert_float_equal(t.p, 1.0 / 70, 1e-12);
	assert_float_equal(lb_ranktest_min_p(4, 4), 1.0 / 70, 1e-12);
	assert_float_equal(lb_ranktest_min_p(3, 3), 0.05, 1e-12);
	/* the other way round: no evidence at all */
	assert_int_equal(lb_ranktest_slower(b4, 4, a4, 4, 0, &t), 0);
	assert_float_equal(t.p, 1.0, 1e-12);
	/* the margin: b is 2x a, which is not slower than a x 3 */
	assert_int_equal(lb_ranktest_slower(a4, 4, b4, 4, 2.0, &t), 0);
	assert_float_equal(t.u, 0, 0);
	assert_float_equal(t.p, 1.0, 1e-12);
	/* published critical value: n1 = n2 = 5, one-sided 0.05: P(U <= 4) = 12/252 */
	double a5[] = {1, 2, 3, 4, 5}, b5b[] = {2.5, 4.5, 6, 7, 8}; /* U = 2 + 4 + 15 */
	assert_int_equal(lb_ranktest_slower(a5, 5, b5b, 5, 0, &t), 0);
	assert_float_equal(t.u, 21, 0);
	assert_float_equal(t.p, 12.0 / 252, 1e-12);
	/* random samples of unequal sizes, with and without a margin: the enumeration */
	for (int trial = 0; trial < 200; trial++) {
		size_t na = 1 + (size_t)(uniform() * 7), nb = 1 + (size_t)(uniform() * 7);
		double a[8], b[8], margin = trial % 3 ? 0 : 0.05;
		for (size_t i = 0; i < na; i++)
			a[i] = 1 + 0.1 * normal();
		for (size_t j = 0; j < nb; j++)
			b[j] = 1 + 0.1 * normal() + (trial % 2 ? 0.1 : 0);
		assert_int_equal(lb_ranktest_slower(a, na, b, nb, margin, &t), 0);
		assert_true(t.exact);
		assert_float_equal(t.p, brute_p(a, na, b, nb, margin), 1e-9);
	}
	/* empty samples and a bad margin are refused */
	assert_int_equal(lb_ranktest_slower(a4, 0, b4, 4, 0, &t), -1);
	assert_int_equal(lb_ranktest_slower(a4, 4, b4, 0, 0, &t), -1);
	assert_int_equal(lb_ranktest_slower(a4, 4, b4, 4, -0.1, &t), -1);
	assert_int_equal(lb_ranktest_slower(a4, 4, b4, 4, NAN, &t), -1);
}

static void test_rank_normal(void **state)
{
	struct lb_rank_test t;
	double a[120], b[120], c[120];

	/* ties force the normal approximation; every value equal: no evidence */
	for (int i = 0; i < 10; i++)
		a[i] = b[i] = 1.0;
	assert_int_equal(lb_ranktest_slower(a, 10, b, 10, 0, &t), 0);
	assert_false(t.exact);
	assert_float_equal(t.p, 1.0, 1e-12);
	/* a shift of one standard deviation over 100 values a side: clearly slower */
	for (int i = 0; i < 100; i++) {
		a[i] = 1 + 0.01 * normal();
		b[i] = 1.01 + 0.01 * normal();
		c[i] = 1 + 0.01 * normal();
	}
	assert_int_equal(lb_ranktest_slower(a, 100, b, 100, 0, &t), 0);
	assert_false(t.exact);
	assert_true(t.p < 1e-6);
	/* the same distribution: no evidence */
	assert_int_equal(lb_ranktest_slower(a, 100, c, 100, 0, &t), 0);
	assert_true(t.p > 0.001);
	/* the approximation beside the exact p over the range of U, 10 to 50 values a side */
	for (size_t k = 10; k <= 50; k += 20) {
		double worst = 0;
		for (size_t u = 0; u <= k * k; u += k / 10) { /* every U at 10 a side */
			double d = fabs(lb_ranktest_p_exact(k, k, (double)u) -
					lb_ranktest_p_normal(k, k, (double)u, 0));
			worst = d > worst ? d : worst;
		}
		printf("normal approximation, %zu a side: at most %.4f from the exact p\n", k,
		       worst);
		assert_true(worst < (k == 10 ? 0.01 : 0.002));
	}
	/* and beside the exact p in the tail where cuts are made (p < 0.1) */
	for (size_t u = 0; u <= 400; u++) {
		double pe = lb_ranktest_p_exact(20, 20, (double)u);
		if (pe < 0.1)
			assert_true(fabs(pe - lb_ranktest_p_normal(20, 20, (double)u, 0)) <
				    0.1 * pe + 1e-3);
	}
	/* the median */
	double m[] = {3, 1, 2, 10};
	assert_float_equal(lb_ranktest_median(m, 4), 2.5, 1e-12);
	assert_float_equal(lb_ranktest_median(m, 3), 2, 1e-12);
	assert_float_equal(m[0], 3, 0); /* left as it was */
	assert_true(isnan(lb_ranktest_median(m, 0)));
}

/* ------------------------------------------------------------------ the schedule */

static void test_schedule(void **state)
{
	struct halving_params hp = {.eta = 4, .full_steps = 21, .warmup = 1};
	int steps[HALVING_MAX_RUNGS];
	char err[512];

	/* the H200 grid: 96 layouts in its largest group */
	assert_int_equal(halving_schedule(&hp, 96, steps, err, sizeof(err)), 0);
	assert_int_equal(hp.n_rungs, 4);
	assert_int_equal(steps[0], 5);
	assert_int_equal(steps[1], 8);
	assert_int_equal(steps[2], 13);
	assert_int_equal(steps[3], 21);
	assert_int_equal(hp.min_steps, 5);
	/* more rungs than distinct lengths: 2 steady steps at rung 0, 4 at the last */
	struct halving_params small = {.eta = 2, .full_steps = 6, .warmup = 2, .min_steps = 4};
	assert_int_equal(halving_schedule(&small, 64, steps, err, sizeof(err)), 0);
	assert_int_equal(small.n_rungs, 3); /* 4, 5, 6 */
	assert_int_equal(steps[0], 4);
	assert_int_equal(steps[1], 5);
	assert_int_equal(steps[2], 6);
	small.n_rungs = 4;
	assert_int_equal(halving_schedule(&small, 64, steps, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--rungs 4"));
	/* strictly growing even where the geometric values round alike */
	struct halving_params many = {.eta = 2, .full_steps = 12, .warmup = 2, .n_rungs = 6};
	assert_int_equal(halving_schedule(&many, 8, steps, err, sizeof(err)), 0);
	for (int r = 1; r < 6; r++)
		assert_true(steps[r] > steps[r - 1]);
	assert_int_equal(steps[5], 12);
	/* the faults, each named with its fix */
	struct halving_params bad = {.eta = 1, .full_steps = 21, .warmup = 1};
	assert_int_equal(halving_schedule(&bad, 8, steps, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "at least 2"));
	bad.eta = 2;
	bad.min_steps = 1;
	assert_int_equal(halving_schedule(&bad, 8, steps, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--min-steps 1"));
	bad.min_steps = 21;
	assert_int_equal(halving_schedule(&bad, 8, steps, err, sizeof(err)), -1);
	bad.min_steps = 0;
	bad.full_steps = 2;
	assert_int_equal(halving_schedule(&bad, 8, steps, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "raise run.steps"));
}

/* ------------------------------------------------------------------ the decision */

/* Members of one group whose times are base[i] x (1 + noise x normal). */
static void make_members(struct halving_member *m, double (*t)[64], size_t n, const double *base,
			 size_t steps, double noise)
{
	for (size_t i = 0; i < n; i++) {
		memset(&m[i], 0, sizeof(m[i]));
		snprintf(m[i].layout_id, sizeof(m[i].layout_id), "%016zx", i);
		for (size_t s = 0; s < steps; s++)
			t[i][s] = base[i] * (1 + noise * normal());
		m[i].times = t[i];
		m[i].n_times = steps;
	}
}

static void test_decide_known(void **state)
{
	struct halving_member m[8];
	double t[8][64];
	const double base[8] = {2.0, 1.0, 3.0, 2.5, 1.8, 4.0, 1.9, 2.2}; /* 1 fastest */

	make_members(m, t, 8, base, 6, 0.02);
	snprintf(m[5].failure_class, sizeof(m[5].failure_class), "oom");
	assert_int_equal(halving_decide(m, 8, 2, 0.05, 0.02, 0), 0);
	/* ceil(8/2) = 4 kept: 1.0, 1.8, 1.9, 2.0; the cut is 2.0 */
	assert_int_equal(m[1].verdict, HALVING_KEPT);
	assert_int_equal(m[1].rank, 1);
	assert_int_equal(m[4].verdict, HALVING_KEPT);
	assert_int_equal(m[6].verdict, HALVING_KEPT);
	assert_int_equal(m[0].verdict, HALVING_KEPT);
	assert_int_equal(m[0].rank, 4);
	/* 2.2, 2.5, 3.0 against the cut 2.0, 6 steps a side: beyond noise */
	assert_int_equal(m[7].verdict, HALVING_DROPPED);
	assert_int_equal(m[3].verdict, HALVING_DROPPED);
	assert_int_equal(m[2].verdict, HALVING_DROPPED);
	assert_int_equal(m[2].cut, 0);
	assert_true(m[2].p < 0.05);
	assert_non_null(strstr(m[2].reason, "against the cut 0000000000000000"));
	/* the oom is dropped with its class, not ranked */
	assert_int_equal(m[5].verdict, HALVING_FAILED);
	assert_int_equal(m[5].rank, 0);
	assert_non_null(strstr(m[5].reason, "oom"));

	/* the last rung: every measured layout final, compared with the fastest */
	make_members(m, t, 3, (const double[]){1.0, 1.005, 1.5}, 10, 0.01);
	assert_int_equal(halving_decide(m, 3, 2, 0.05, 0.02, 1), 0);
	assert_int_equal(m[0].verdict, HALVING_FINAL);
	assert_int_equal(m[0].rank, 1);
	assert_int_equal(m[0].significant, -1);
	assert_int_equal(m[1].verdict, HALVING_FINAL);
	assert_int_equal(m[1].significant, 0); /* 0.5% apart: within the 2% margin */
	assert_int_equal(m[2].significant, 1);
	assert_non_null(strstr(m[2].reason, "slower beyond noise"));

	/* a run without a steady-state step is dropped as unmeasured */
	make_members(m, t, 2, (const double[]){1.0, 1.0}, 4, 0.01);
	m[1].n_times = 0;
	assert_int_equal(halving_decide(m, 2, 2, 0.05, 0.02, 0), 0);
	assert_int_equal(m[1].verdict, HALVING_FAILED);
	assert_string_equal(m[1].failure_class, "unmeasured");
}

/* Groups compete apart: a slow group's layouts are not cut by a fast group's. */
static void test_decide_groups(void **state)
{
	struct halving_member m[4];
	double t[4][64];

	make_members(m, t, 4, (const double[]){1.0, 1.5, 10.0, 15.0}, 6, 0.01);
	m[2].group = m[3].group = 1;
	assert_int_equal(halving_decide(m, 4, 2, 0.05, 0.02, 0), 0);
	assert_int_equal(m[0].verdict, HALVING_KEPT);
	assert_int_equal(m[1].verdict, HALVING_DROPPED);
	assert_int_equal(m[2].verdict, HALVING_KEPT);
	assert_int_equal(m[2].rank, 1);
	assert_int_equal(m[3].verdict, HALVING_DROPPED);
	assert_int_equal(m[3].cut, 2);
}

/* Equal layouts: without a margin, a comparison cuts about alpha of the time (the level
 * is what it says); with the margin above the noise of a run, never. */
static void test_decide_equal(void **state)
{
	struct halving_member m[8];
	double t[8][64];
	const double base[8] = {1, 1, 1, 1, 1, 1, 1, 1};
	size_t tests = 0, cuts = 0, cuts_margin = 0;

	for (int trial = 0; trial < 400; trial++) {
		make_members(m, t, 8, base, 8, 0.01);
		assert_int_equal(halving_decide(m, 8, 2, 0.05, 0, 0), 0);
		for (int i = 0; i < 8; i++) {
			tests += m[i].significant >= 0;
			cuts += m[i].verdict == HALVING_DROPPED;
		}
		assert_int_equal(halving_decide(m, 8, 2, 0.05, 0.02, 0), 0);
		for (int i = 0; i < 8; i++)
			cuts_margin += m[i].verdict == HALVING_DROPPED;
	}
	assert_int_equal(tests, 400 * 4);
	/* the cut is the 4th fastest of 8, so the 4 compared are the slower half: more
	 * often below it than a random pair would be, and still cut rarely */
	printf("equal layouts: %zu of %zu comparisons cut without a margin\n", cuts, tests);
	assert_true((double)cuts / (double)tests < 0.08);
	assert_int_equal(cuts_margin, 0);
}

/* ------------------------------------------------------------------ through the database */

static const char spec[] =
    "{\"name\": \"hv\", \"model\": \"tiny\", \"fixed\": {\"seq_len\": 32, \"global_batch\": 8,"
    " \"gpus\": 1}, \"grid\": {\"micro_batch\": [1, 2, 4, 8], \"checkpointing\": [\"none\","
    " \"full\"]}, \"run\": {\"steps\": 14, \"warmup\": 2}, \"cluster\": {\"device\": \"cpu\"}}";

struct env {
	char dir[64];
	char db_path[96];
	sqlite3 *db;
	struct sweep_plan plan;
	struct exec_opts eo;
	struct exec_set es;
};

static struct env *cur;	  /* the fake executor's database */
static int n_submits;	  /* arrays the fake executor took */
static int64_t ran[1024]; /* job rows the fake executor has "run" */
static size_t n_ran;
static char oom_layout[32];  /* this layout runs out of memory */
static char lost_layout[32]; /* this layout's first job is lost (node_fail) */
static char cancel_layout[32];

static void exec_sql(sqlite3 *db, const char *sql)
{
	char *msg = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", sql, msg);
}

static long long q_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;
	long long v = -1;
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* The known speed of a layout: micro-batch 8 without checkpointing is fastest (0.5 s),
 * the rest 1 s and more, checkpointing 1.3x. */
static double speed_of(const char *layout_id)
{
	for (size_t e = 0; e < cur->plan.n_entries; e++) {
		const struct lb_layout *l = &cur->plan.entries[e].layout;
		if (strcmp(cur->plan.entries[e].id, layout_id))
			continue;
		double s = l->micro_batch == 8 ? 0.5 : 1.0 + 0.1 * (8 / l->micro_batch);
		return l->checkpointing == LB_CKPT_FULL ? 1.3 * s : s;
	}
	fail_msg("layout %s is not in the plan", layout_id);
	return 0;
}

static int fake_submit(struct executor *x, const struct slurm_array *a, const char *script,
		       const char *work_dir, char *aid, size_t idlen, char *err, size_t errlen)
{
	snprintf(aid, idlen, "%d", ++n_submits);
	return 0;
}

/* "Run" job j: its run row and steps (at its rung's steps), as the collector would have
 * written them from the run log; status failed/oom for the oom layout. */
static void run_job(const struct results_job *j)
{
	char sql[1024], now[32];
	time_t tt = time(NULL);
	struct tm tm;
	int steps = 0, warmup = 2;
	sqlite3_stmt *st = NULL;

	assert_int_equal(sqlite3_prepare_v2(cur->db,
					    "SELECT r.steps, r.warmup FROM halving_members m JOIN "
					    "halving_rungs r ON r.halving_id = m.halving_id AND "
					    "r.rung = m.rung WHERE m.job_ref = ?1",
					    -1, &st, NULL),
			 SQLITE_OK);
	sqlite3_bind_int64(st, 1, j->id);
	if (sqlite3_step(st) == SQLITE_ROW) {
		steps = sqlite3_column_int(st, 0);
		warmup = sqlite3_column_int(st, 1);
	}
	sqlite3_finalize(st);
	assert_true(steps > warmup); /* the job was tied to its member before it ran */
	gmtime_r(&tt, &tm);
	strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", &tm);
	int oom = !strcmp(j->layout_id, oom_layout);
	snprintf(
	    sql, sizeof(sql),
	    "INSERT INTO runs (run_uid, layout_id, sweep, source, status, failure_class, "
	    "log_path, start_time, end_time, world_size, backend) VALUES ('u%lld', '%s', 'hv', "
	    "'run', '%s', %s, '%s/run-u%lld.jsonl', '%s', '%s', 1, 'cpu')",
	    (long long)j->id, j->layout_id, oom ? "failed" : "ok", oom ? "'oom'" : "NULL",
	    j->run_dir, (long long)j->id, now, now);
	exec_sql(cur->db, sql);
	long long run = q_int(cur->db, "SELECT MAX(id) FROM runs");
	double base = speed_of(j->layout_id);
	for (int s = 0; s < (oom ? 1 : steps); s++) {
		snprintf(sql, sizeof(sql),
			 "INSERT INTO steps (run_id, step, warmup, time_s) VALUES (%lld, %d, %d, "
			 "%.9f)",
			 run, s, s < warmup, base * (s < warmup ? 3 : 1) * (1 + 0.01 * normal()));
		exec_sql(cur->db, sql);
	}
	assert_int_equal(results_refresh_run_stats(cur->db, run), 0);
}

static int fake_poll(struct executor *x, const struct results_job *jobs, size_t n,
		     struct exec_state *out, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		const struct results_job *j = &jobs[i];
		int seen = 0;
		memset(&out[i], 0, sizeof(out[i]));
		out[i].known = 1;
		out[i].start_time = out[i].end_time = (int64_t)time(NULL);
		if (!strcmp(j->layout_id, cancel_layout)) {
			snprintf(out[i].state, sizeof(out[i].state), "CANCELLED");
			out[i].exit_code = -1;
			continue;
		}
		if (!strcmp(j->layout_id, lost_layout) && j->attempt == 1) {
			snprintf(out[i].state, sizeof(out[i].state), "NODE_FAIL");
			out[i].exit_code = -1;
			continue;
		}
		for (size_t k = 0; k < n_ran; k++)
			seen |= ran[k] == j->id;
		if (!seen) {
			run_job(j);
			ran[n_ran++] = j->id;
		}
		int oom = !strcmp(j->layout_id, oom_layout);
		snprintf(out[i].state, sizeof(out[i].state), oom ? "FAILED" : "COMPLETED");
		out[i].exit_code = oom ? 3 : 0;
	}
	return 0;
}

static int fake_cancel(struct executor *x, const struct results_job *jobs, size_t n, char *err,
		       size_t errlen)
{
	return 0;
}

static void fake_close(struct executor *x) {}

static struct executor fake = {"local",	  1000,	       fake_submit, NULL,
			       fake_poll, fake_cancel, fake_close,  NULL};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	char err[512];

	snprintf(e->dir, sizeof(e->dir), "/tmp/lb-halving-XXXXXX");
	assert_non_null(mkdtemp(e->dir));
	snprintf(e->db_path, sizeof(e->db_path), "%s/t.db", e->dir);
	assert_int_equal(results_open(e->db_path, &e->db, err, sizeof(err)), 0);
	assert_int_equal(sweep_plan_text("hv.json", spec, strlen(spec), &e->plan, err, sizeof(err)),
			 0);
	assert_int_equal(e->plan.n_ok, 8);
	assert_int_equal(results_upsert_sweep(e->db, "hv", "spec", NULL, spec, err, sizeof(err)),
			 0);
	e->eo.db_path = e->db_path;
	e->es.o = &e->eo;
	e->es.x[track_exec_slot("local")] = &fake;
	cur = e;
	n_submits = 0;
	n_ran = 0;
	oom_layout[0] = lost_layout[0] = cancel_layout[0] = '\0';
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	char cmd[128];

	track_exec_close(&e->es);
	sweep_plan_free(&e->plan);
	results_close(e->db);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->dir);
	assert_int_equal(system(cmd), 0);
	free(e);
	return 0;
}

/* The id of the plan entry with micro-batch mb and checkpointing ck. */
static const char *layout_of(struct env *e, int mb, enum lb_ckpt ck)
{
	for (size_t i = 0; i < e->plan.n_entries; i++)
		if (e->plan.entries[i].layout.micro_batch == mb &&
		    e->plan.entries[i].layout.checkpointing == ck)
			return e->plan.entries[i].id;
	fail_msg("no layout mb %d", mb);
	return NULL;
}

static int64_t start(struct env *e, int eta)
{
	struct halving_opts o;
	size_t sel[8];
	char runs[128], err[1024] = "";
	int64_t id = 0;

	for (size_t i = 0; i < 8; i++)
		sel[i] = i;
	snprintf(runs, sizeof(runs), "%s/runs", e->dir);
	memset(&o, 0, sizeof(o));
	o.params.eta = eta;
	o.params.alpha = 0.05;
	o.params.margin = 0.02;
	o.executor = "local";
	o.runs = runs;
	o.quiet = 1;
	if (halving_start(e->db, &e->es, &e->plan, spec, sel, 8, &o, &id, err, sizeof(err)))
		fail_msg("halving_start: %s", err);
	return id;
}

/* Advance until the halving ends (at most `limit` steps); returns its state. */
static void run_to_end(struct env *e, int64_t id, struct halving_progress *pr)
{
	char err[1024] = "";
	for (int k = 0; k < 50; k++) {
		int rc = halving_advance(e->db, &e->es, id, pr, err, sizeof(err));
		if (rc)
			fail_msg("halving_advance: %d %s", rc, err);
		if (strcmp(pr->state, "running"))
			return;
	}
	fail_msg("the halving did not end in 50 steps");
}

static void test_flow(void **state)
{
	struct env *e = *state;
	struct halving_progress pr;
	char sql[512];
	const char *fast = layout_of(e, 8, LB_CKPT_NONE);

	snprintf(oom_layout, sizeof(oom_layout), "%s", layout_of(e, 1, LB_CKPT_FULL));
	int64_t id = start(e, 2);
	assert_true(id > 0);
	/* four rungs for 8 layouts at eta 2: 6, 8, 10, 14 steps */
	assert_int_equal(q_int(e->db, "SELECT COUNT(*) FROM halving_rungs"), 4);
	assert_int_equal(q_int(e->db, "SELECT steps FROM halving_rungs WHERE rung = 0"), 6);
	assert_int_equal(q_int(e->db, "SELECT steps FROM halving_rungs WHERE rung = 3"), 14);
	/* rung 0 submitted: every member has its job */
	assert_int_equal(q_int(e->db, "SELECT COUNT(*) FROM halving_members WHERE job_ref IS NOT "
				      "NULL AND rung = 0"),
			 8);
	assert_int_equal(q_int(e->db, "SELECT COUNT(*) FROM jobs"), 8);
	run_to_end(e, id, &pr);
	assert_string_equal(pr.state, "done");
	/* the fastest layout won the last rung */
	snprintf(sql, sizeof(sql),
		 "SELECT COUNT(*) FROM halving_members WHERE verdict = 'final' AND rank = 1 AND "
		 "layout_id = '%s'",
		 fast);
	assert_int_equal(q_int(e->db, sql), 1);
	/* the oom layout: dropped at rung 0 with its class */
	snprintf(sql, sizeof(sql),
		 "SELECT COUNT(*) FROM halving_members WHERE rung = 0 AND verdict = 'failed' AND "
		 "failure_class = 'oom' AND layout_id = '%s'",
		 oom_layout);
	assert_int_equal(q_int(e->db, sql), 1);
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM halving_members WHERE layout_id = '%s'",
		 oom_layout);
	assert_int_equal(q_int(e->db, sql), 1);
	/* every job is some member's, once; every decided member has its statistics */
	assert_int_equal(q_int(e->db, "SELECT COUNT(*) FROM jobs"),
			 q_int(e->db, "SELECT COUNT(*) FROM halving_members"));
	assert_int_equal(q_int(e->db, "SELECT COUNT(DISTINCT job_ref) FROM halving_members"),
			 q_int(e->db, "SELECT COUNT(*) FROM jobs"));
	assert_int_equal(q_int(e->db, "SELECT COUNT(*) FROM halving_members WHERE verdict = "
				      "'pending'"),
			 0);
	assert_int_equal(q_int(e->db, "SELECT COUNT(*) FROM halving_members WHERE verdict != "
				      "'failed' AND (n_steps IS NULL OR median_s IS NULL)"),
			 0);
	/* a rung's jobs ran its steps: rung 1's steady-state steps are 8 - 2 */
	assert_int_equal(q_int(e->db, "SELECT MIN(n_steps) FROM halving_members WHERE rung = 1"),
			 6);
	/* the views: rung 0 counts what became of its 8 layouts */
	assert_int_equal(q_int(e->db, "SELECT layouts FROM halving_rung_summary WHERE rung = 0"),
			 8);
	assert_int_equal(q_int(e->db, "SELECT kept + kept_within_noise + dropped_slower + "
				      "dropped_failed FROM halving_rung_summary WHERE rung = 0"),
			 8);
	assert_int_equal(q_int(e->db, "SELECT kept FROM halving_rung_summary WHERE rung = 0"), 4);
	assert_int_equal(q_int(e->db, "SELECT layouts FROM halving_cost"), 8);
	assert_int_equal(q_int(e->db, "SELECT runs FROM halving_cost"),
			 q_int(e->db, "SELECT COUNT(*) FROM jobs"));
	assert_int_equal(q_int(e->db, "SELECT COUNT(*) FROM halving_layouts WHERE run_id IS NULL "
				      "AND job_ref IS NOT NULL"),
			 0);
	/* the print names the winner */
	char err[256];
	FILE *f = tmpfile();
	assert_non_null(f);
	assert_int_equal(halving_print(e->db, id, f, err, sizeof(err)), 0);
	char text[8192] = "";
	rewind(f);
	size_t got = fread(text, 1, sizeof(text) - 1, f);
	text[got] = '\0';
	fclose(f);
	assert_non_null(strstr(text, "halving 1 of sweep 'hv': done"));
	assert_non_null(strstr(text, fast));
	/* done: advancing again changes nothing */
	assert_int_equal(halving_advance(e->db, &e->es, id, &pr, err, sizeof(err)), 0);
	assert_string_equal(pr.state, "done");
}

static void test_lost_job(void **state)
{
	struct env *e = *state;
	struct halving_progress pr;
	char sql[512];

	snprintf(lost_layout, sizeof(lost_layout), "%s", layout_of(e, 8, LB_CKPT_NONE));
	int64_t id = start(e, 2);
	run_to_end(e, id, &pr);
	assert_string_equal(pr.state, "done");
	/* the lost job got one more: attempt 2, and the layout still won */
	snprintf(sql, sizeof(sql),
		 "SELECT tries FROM halving_members WHERE rung = 0 AND layout_id = '%s'",
		 lost_layout);
	assert_int_equal(q_int(e->db, sql), 2);
	snprintf(sql, sizeof(sql),
		 "SELECT rank FROM halving_members WHERE verdict = 'final' AND layout_id = '%s'",
		 lost_layout);
	assert_int_equal(q_int(e->db, sql), 1);
}

static void test_cancelled(void **state)
{
	struct env *e = *state;
	struct halving_progress pr;

	snprintf(cancel_layout, sizeof(cancel_layout), "%s", layout_of(e, 2, LB_CKPT_NONE));
	int64_t id = start(e, 2);
	run_to_end(e, id, &pr);
	assert_string_equal(pr.state, "cancelled");
	assert_int_equal(q_int(e->db, "SELECT COUNT(*) FROM halving_rungs WHERE state = "
				      "'decided'"),
			 1);
	assert_int_equal(q_int(e->db, "SELECT COUNT(*) FROM halving_members WHERE rung > 0"), 0);
	/* and `cancel` stops a running one before its next rung */
	char err[256];
	int64_t id2 = start(e, 2);
	assert_true(id2 > id);
	assert_int_equal(halving_cancel_sweep(e->db, "hv", err, sizeof(err)), 1);
	assert_int_equal(halving_advance(e->db, &e->es, id2, &pr, err, sizeof(err)), 0);
	assert_string_equal(pr.state, "cancelled");
}

/* Interrupted between rungs, then between a rung's submission and its tie to the rung:
 * the next process adopts the jobs and finishes; no layout runs twice on a rung. */
static void test_resume(void **state)
{
	struct env *e = *state;
	struct halving_progress pr;
	char err[1024] = "";

	int64_t id = start(e, 2);
	/* rung 0 runs and is decided: rung 1's members exist and have their jobs */
	for (int k = 0; k < 10 && q_int(e->db, "SELECT COUNT(*) FROM halving_rungs WHERE state = "
					       "'decided'") < 1;
	     k++)
		assert_int_equal(halving_advance(e->db, &e->es, id, &pr, err, sizeof(err)), 0);
	long long n1 = q_int(e->db, "SELECT COUNT(*) FROM halving_members WHERE rung = 1");
	assert_true(n1 >= 4);
	/* a crash after rung 1's jobs were submitted but before they were tied: untie them */
	exec_sql(e->db, "UPDATE halving_members SET job_ref = NULL, tries = 0 WHERE rung = 1");
	exec_sql(e->db, "UPDATE halving_rungs SET state = 'pending' WHERE rung = 1");
	long long jobs = q_int(e->db, "SELECT COUNT(*) FROM jobs");

	/* a new process: its own handle and executors */
	track_exec_close(&e->es);
	results_close(e->db);
	assert_int_equal(results_open(e->db_path, &e->db, err, sizeof(err)), 0);
	memset(&e->es, 0, sizeof(e->es));
	e->es.o = &e->eo;
	e->es.x[track_exec_slot("local")] = &fake;
	assert_int_equal(halving_advance(e->db, &e->es, id, &pr, err, sizeof(err)), 0);
	/* adopted, not submitted again (the fake executor then ran them at once, and the
	 * same call decided rung 1 and submitted rung 2) */
	char sql[256];
	snprintf(sql, sizeof(sql),
		 "SELECT COUNT(*) FROM halving_members WHERE rung = 1 AND job_ref <= %lld", jobs);
	assert_int_equal(q_int(e->db, sql), n1);
	assert_int_equal(q_int(e->db, "SELECT MAX(tries) FROM halving_members WHERE rung = 1"), 1);
	run_to_end(e, id, &pr);
	assert_string_equal(pr.state, "done");
	assert_int_equal(q_int(e->db, "SELECT COUNT(*) FROM jobs"),
			 q_int(e->db, "SELECT COUNT(*) FROM halving_members"));
}

/* The dry run's schedule and cost against the full grid. */
static void test_dry_run(void **state)
{
	struct env *e = *state;
	struct halving_opts o;
	size_t sel[8];
	char err[512], out[4096] = "", path[128];

	for (size_t i = 0; i < 8; i++)
		sel[i] = i;
	memset(&o, 0, sizeof(o));
	o.params.eta = 2;
	o.params.alpha = 0.05;
	o.params.margin = 0.02;
	o.executor = "local";
	o.runs = e->dir;
	snprintf(path, sizeof(path), "%s/dry.txt", e->dir);
	fflush(stdout);
	int saved = dup(1);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	dup2(fileno(f), 1);
	int rc = halving_dry_run(&e->plan, sel, 8, &o, err, sizeof(err));
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	fclose(f);
	assert_int_equal(rc, 0);
	f = fopen(path, "r");
	size_t got = fread(out, 1, sizeof(out) - 1, f);
	out[got] = '\0';
	fclose(f);
	/* 8 x 6 + 4 x 8 + 2 x 10 + 1 x 14 = 114 rank-steps against 8 x 14 = 112 */
	assert_non_null(strstr(out, "total: 114 rank-steps by halving, 15 runs, against 112"));
	assert_non_null(strstr(out, "tiny L4 h64, seq 32, batch 8, 1 GPU"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rank_exact),
	    cmocka_unit_test(test_rank_normal),
	    cmocka_unit_test(test_schedule),
	    cmocka_unit_test(test_decide_known),
	    cmocka_unit_test(test_decide_groups),
	    cmocka_unit_test(test_decide_equal),
	    cmocka_unit_test_setup_teardown(test_flow, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lost_job, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cancelled, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resume, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dry_run, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
