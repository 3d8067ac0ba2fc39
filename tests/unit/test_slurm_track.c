/*
 * Submitting and tracking against a database that fails (slurm/submit.h, slurm/track.h),
 * with an executor of the test's own: every database error reaches the caller.
 *  - the attempt count of a layout cannot be read (an authorizer denies jobs.attempt):
 *    submit fails, it does not record attempt 1 again;
 *  - the run of a finished job cannot be tied to it (a trigger refuses runs.job_ref):
 *    the poll fails;
 *  - the class of a finished job cannot be written (a trigger refuses it): the poll fails;
 * and, the database willing, attempts count up and the run is tied to its job; a run
 * whose log stops without its end record is a failure once its job ended (completed,
 * failed with the trainer's io_error status, or purged with that status in its .exit
 * file), and the run is closed with the class the exit status names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "results/jobs.h"
#include "slurm/enqueue.h"
#include "slurm/submit.h"
#include "slurm/track.h"
#include "sweeps/sweep.h"

static const char spec[] =
    "{\"name\": \"trk\", \"model\": \"tiny\", \"fixed\": {\"seq_len\": 32, \"global_batch\": 4,"
    " \"gpus\": 1}, \"grid\": {\"micro_batch\": [1, 2]}, \"run\": {\"steps\": 2, \"warmup\": 1},"
    " \"cluster\": {\"device\": \"cpu\"}}";

/* ---- an executor that answers what the test says */
static int n_submits;
static struct exec_state answer; /* what every poll says */

static int fake_submit(struct executor *x, const struct slurm_array *a, const char *script,
		       const char *work_dir, char *aid, size_t idlen, char *err, size_t errlen)
{
	snprintf(aid, idlen, "%d", ++n_submits);
	return 0;
}

static int fake_poll(struct executor *x, const struct results_job *jobs, size_t n,
		     struct exec_state *out, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++)
		out[i] = answer;
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

struct env {
	char dir[64];
	char db_path[96];
	sqlite3 *db;
	struct sweep_plan plan;
	struct exec_opts eo;
	struct exec_set es;
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	char err[512];

	snprintf(e->dir, sizeof(e->dir), "/tmp/lb-track-XXXXXX");
	assert_non_null(mkdtemp(e->dir));
	snprintf(e->db_path, sizeof(e->db_path), "%s/t.db", e->dir);
	assert_int_equal(results_open(e->db_path, &e->db, err, sizeof(err)), 0);
	assert_int_equal(
	    sweep_plan_text("trk.json", spec, strlen(spec), &e->plan, err, sizeof(err)), 0);
	assert_int_equal(e->plan.n_ok, 2);
	e->eo.db_path = e->db_path;
	e->es.o = &e->eo;
	e->es.x[track_exec_slot("local")] = &fake;
	memset(&answer, 0, sizeof(answer));
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

/* Submit every runnable layout of the plan once; returns enqueue_layouts' status. */
static int submit_all(struct env *e, char *err, size_t errlen)
{
	size_t sel[2] = {0, 1};
	char runs[128];
	struct enqueued sub;
	int rc;

	snprintf(runs, sizeof(runs), "%s/runs", e->dir);
	rc = enqueue_layouts(e->db, &fake, &e->plan, sel, 2, runs, 0, 0, 1, &sub, err, errlen);
	free(sub.rows);
	return rc;
}

static int deny_attempt(void *u, int action, const char *table, const char *column, const char *db,
			const char *trigger)
{
	return action == SQLITE_READ && table && column && !strcmp(table, "jobs") &&
		       !strcmp(column, "attempt")
		   ? SQLITE_DENY
		   : SQLITE_OK;
}

static void test_attempts(void **state)
{
	struct env *e = *state;
	char err[1024] = "";

	assert_int_equal(submit_all(e, err, sizeof(err)), 0);
	assert_int_equal(submit_all(e, err, sizeof(err)), 0);
	assert_int_equal(q_int(e->db, "SELECT COUNT(*) FROM jobs WHERE attempt = 2"), 2);

	/* the count cannot be read: submit fails and records nothing more */
	sqlite3_set_authorizer(e->db, deny_attempt, NULL);
	assert_int_equal(submit_all(e, err, sizeof(err)), -1);
	sqlite3_set_authorizer(e->db, NULL, NULL);
	assert_non_null(strstr(err, "attempts of layout"));
	assert_int_equal(q_int(e->db, "SELECT COUNT(*) FROM jobs"), 4);
	assert_int_equal(q_int(e->db, "SELECT MAX(attempt) FROM jobs"), 2);
}

/* One running job of the first layout with a run collected from its run directory. */
static int64_t job_with_run(struct env *e)
{
	struct results_job j;
	char err[512], sql[1024];

	assert_int_equal(results_upsert_layout(e->db, &e->plan.entries[0].layout, NULL), 0);
	results_job_init(&j);
	snprintf(j.executor, sizeof(j.executor), "local");
	snprintf(j.sweep, sizeof(j.sweep), "trk");
	snprintf(j.layout_id, sizeof(j.layout_id), "%s", e->plan.entries[0].id);
	snprintf(j.job_id, sizeof(j.job_id), "1_0");
	snprintf(j.state, sizeof(j.state), "RUNNING");
	snprintf(j.run_dir, sizeof(j.run_dir), "%s/no-such-dir", e->dir);
	j.submit_time = 1000;
	assert_int_equal(results_job_insert(e->db, &j, NULL, err, sizeof(err)), 0);
	snprintf(sql, sizeof(sql),
		 "INSERT INTO runs (run_uid, layout_id, sweep, source, status, log_path, "
		 "start_time) VALUES ('u1', '%s', 'trk', 'run', 'ok', '%s/run-u1.jsonl', "
		 "'2030-01-01T00:00:00Z')",
		 e->plan.entries[0].id, j.run_dir);
	exec_sql(e->db, sql);
	return j.id;
}

/* Poll the sweep's jobs once: track_refresh's status. */
static int refresh(struct env *e, char *err, size_t errlen)
{
	struct results_job *jobs = NULL;
	size_t n = 0;
	int rc;

	assert_int_equal(results_jobs_list(e->db, "trk", 1, &jobs, &n, err, errlen), 0);
	rc = track_refresh(e->db, &e->es, jobs, n, err, errlen);
	free(jobs);
	return rc;
}

static void test_run_tie(void **state)
{
	struct env *e = *state;
	char err[1024] = "";
	int64_t id = job_with_run(e);

	answer.known = 1;
	snprintf(answer.state, sizeof(answer.state), "COMPLETED");
	answer.exit_code = 0;

	/* the run cannot be tied to its job: the poll says so */
	exec_sql(e->db, "CREATE TRIGGER no_tie BEFORE UPDATE OF job_ref ON runs "
			"BEGIN SELECT RAISE(ABORT, 'no tie today'); END");
	assert_int_equal(refresh(e, err, sizeof(err)), -2);
	assert_non_null(strstr(err, "no tie today"));
	assert_int_equal(q_int(e->db, "SELECT COUNT(*) FROM runs WHERE job_ref IS NOT NULL"), 0);

	/* the database willing, the run is tied and the job settled without a class */
	exec_sql(e->db, "DROP TRIGGER no_tie");
	assert_int_equal(refresh(e, err, sizeof(err)), 0);
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT job_ref FROM runs WHERE run_uid = 'u1'");
	assert_int_equal(q_int(e->db, sql), id);
}

static void test_class_write(void **state)
{
	struct env *e = *state;
	char err[1024] = "";

	job_with_run(e);
	exec_sql(e->db, "DELETE FROM runs"); /* no run: the job fails with a class */
	answer.known = 1;
	snprintf(answer.state, sizeof(answer.state), "FAILED");
	answer.exit_code = 1;

	/* the state cannot be written */
	exec_sql(e->db, "CREATE TRIGGER no_state BEFORE UPDATE OF state ON jobs "
			"BEGIN SELECT RAISE(ABORT, 'no state today'); END");
	assert_int_equal(refresh(e, err, sizeof(err)), -2);
	assert_non_null(strstr(err, "no state today"));
	exec_sql(e->db, "DROP TRIGGER no_state");

	/* the job is final now; its class cannot be written */
	exec_sql(e->db, "UPDATE jobs SET state = 'FAILED'");
	exec_sql(e->db, "CREATE TRIGGER no_class BEFORE UPDATE OF failure_class ON jobs "
			"BEGIN SELECT RAISE(ABORT, 'no class today'); END");
	assert_int_equal(refresh(e, err, sizeof(err)), -2);
	assert_non_null(strstr(err, "no class today"));
	exec_sql(e->db, "DROP TRIGGER no_class");

	/* the database willing, the job gets its class */
	assert_int_equal(refresh(e, err, sizeof(err)), 0);
	assert_int_equal(q_int(e->db, "SELECT COUNT(*) FROM jobs WHERE failure_class IS NOT NULL"),
			 1);
}

static const char *q_text(sqlite3 *db, const char *sql)
{
	static char buf[512];
	sqlite3_stmt *st = NULL;
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	buf[0] = 0;
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		snprintf(buf, sizeof(buf), "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return buf;
}

static void test_run_without_end(void **state)
{
	struct env *e = *state;
	char err[1024] = "", path[256];
	FILE *f;

	job_with_run(e);
	exec_sql(e->db, "UPDATE runs SET status = 'running'");
	/* completed, exit 0, the log without its end record: no success */
	answer.known = 1;
	snprintf(answer.state, sizeof(answer.state), "COMPLETED");
	answer.exit_code = 0;
	answer.end_time = 1000; /* long over: no grace */
	assert_int_equal(refresh(e, err, sizeof(err)), 0);
	assert_string_equal(q_text(e->db, "SELECT state || '|' || failure_class FROM jobs"),
			    "COMPLETED|failed");
	assert_string_equal(q_text(e->db, "SELECT status || '|' || failure_class || '|' || "
					  "message FROM runs"),
			    "failed|error|the job ended (COMPLETED, exit 0) without the run log's "
			    "end record");

	/* the trainer's io_error status (a full disk) */
	exec_sql(e->db, "UPDATE jobs SET state = 'RUNNING', failure_class = NULL, exit_code = "
			"NULL; UPDATE runs SET status = 'running', failure_class = NULL, job_ref = "
			"NULL");
	snprintf(answer.state, sizeof(answer.state), "FAILED");
	answer.exit_code = 7;
	assert_int_equal(refresh(e, err, sizeof(err)), 0);
	assert_string_equal(q_text(e->db, "SELECT state || '|' || failure_class FROM jobs"),
			    "FAILED|failed");
	assert_string_equal(q_text(e->db, "SELECT status || '|' || failure_class || '|' || "
					  "message FROM runs"),
			    "failed|io_error|the job ended (FAILED, exit 7) without the run log's "
			    "end record: the run log could not be written");

	/* the job gone from the scheduler: its .exit file says 7 */
	exec_sql(e->db, "UPDATE jobs SET state = 'RUNNING', failure_class = NULL, exit_code = "
			"NULL, end_time = NULL; UPDATE runs SET status = 'running', failure_class "
			"= NULL, job_ref = NULL");
	snprintf(path, sizeof(path), "%s/no-such-dir", e->dir);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/no-such-dir/job-1_0.exit", e->dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("7\n", f);
	fclose(f);
	memset(&answer, 0, sizeof(answer));
	answer.known = 0;
	assert_int_equal(refresh(e, err, sizeof(err)), 0);
	assert_string_equal(q_text(e->db, "SELECT state || '|' || failure_class FROM jobs"),
			    "FAILED|failed");
	assert_string_equal(q_text(e->db, "SELECT status || '|' || failure_class FROM runs"),
			    "failed|io_error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_attempts, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_run_tie, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_class_write, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_run_without_end, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
