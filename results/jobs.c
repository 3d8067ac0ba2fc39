/*
 * The jobs table and the questions about a job's runs (results/jobs.h).
 */
#include "results/jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void results_job_init(struct results_job *j)
{
	memset(j, 0, sizeof(*j));
	j->array_index = -1;
	j->exit_code = -1;
	j->attempt = 1;
}

/* Unix seconds to ISO 8601 UTC; "" for 0. */
static void iso_time(int64_t t, char buf[32])
{
	struct tm tm;
	time_t tt = (time_t)t;

	buf[0] = 0;
	if (t > 0 && gmtime_r(&tt, &tm))
		strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The fields insert and update share, from parameter first on, in the columns' order:
 * job_id, array_job_id, array_index, state, reason, failure_class, exit_code,
 * submit_time, start_time, end_time, run_dir (unknown values NULL). */
static void bind_fields(sqlite3_stmt *st, int first, const struct results_job *j)
{
	char t[3][32];

	iso_time(j->submit_time, t[0]);
	iso_time(j->start_time, t[1]);
	iso_time(j->end_time, t[2]);
	results_bind_text(st, first, j->job_id);
	results_bind_text(st, first + 1, j->array_job_id);
	if (j->array_index >= 0)
		sqlite3_bind_int(st, first + 2, j->array_index);
	results_bind_text(st, first + 3, j->state);
	results_bind_text(st, first + 4, j->reason);
	results_bind_text(st, first + 5, j->failure_class);
	if (j->exit_code >= 0)
		sqlite3_bind_int(st, first + 6, j->exit_code);
	for (int k = 0; k < 3; k++)
		results_bind_text(st, first + 7 + k, t[k]);
	results_bind_text(st, first + 10, j->run_dir);
}

int results_job_insert(sqlite3 *db, struct results_job *j, int64_t *id, char *err, size_t errlen)
{
	static const char sql[] =
	    "INSERT INTO jobs (executor, sweep, layout_id, job_id, array_job_id, array_index, "
	    "state, reason, failure_class, exit_code, submit_time, start_time, end_time, run_dir, "
	    "attempt) VALUES (?1, ?2, ?3, ?4, ?5, ?6, COALESCE(?7, 'PENDING'), ?8, ?9, ?10, ?11, "
	    "?12, ?13, ?14, ?15)";
	static const char sweep_sql[] =
	    "INSERT INTO sweeps (name, source) VALUES (?1, 'spec') ON CONFLICT (name) DO NOTHING";
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(db, sweep_sql, -1, &st, NULL) != SQLITE_OK)
		goto out_err;
	sqlite3_bind_text(st, 1, j->sweep, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	st = NULL;
	if (rc != SQLITE_DONE)
		goto out_err;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		goto out_err;
	sqlite3_bind_text(st, 1, j->executor, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, j->sweep, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, j->layout_id, -1, SQLITE_TRANSIENT);
	bind_fields(st, 4, j);
	sqlite3_bind_int(st, 15, j->attempt > 0 ? j->attempt : 1);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	st = NULL;
	if (rc != SQLITE_DONE)
		goto out_err;
	j->id = sqlite3_last_insert_rowid(db);
	if (id)
		*id = j->id;
	return 0;
out_err:
	snprintf(err, errlen, "job of layout '%s' in sweep '%s': %s", j->layout_id, j->sweep,
		 sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return -1;
}

int results_job_update(sqlite3 *db, const struct results_job *j, char *err, size_t errlen)
{
	static const char sql[] =
	    "UPDATE jobs SET job_id = COALESCE(?2, job_id), "
	    "array_job_id = COALESCE(?3, array_job_id), array_index = COALESCE(?4, array_index), "
	    "state = COALESCE(?5, state), reason = COALESCE(?6, reason), "
	    "failure_class = COALESCE(?7, failure_class), exit_code = COALESCE(?8, exit_code), "
	    "submit_time = COALESCE(?9, submit_time), start_time = COALESCE(?10, start_time), "
	    "end_time = COALESCE(?11, end_time), run_dir = COALESCE(?12, run_dir) WHERE id = ?1";
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		goto out_err;
	sqlite3_bind_int64(st, 1, j->id);
	bind_fields(st, 2, j);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	st = NULL;
	if (rc != SQLITE_DONE)
		goto out_err;
	if (sqlite3_changes(db) == 0) {
		snprintf(err, errlen, "job row %lld not found", (long long)j->id);
		return -1;
	}
	return 0;
out_err:
	snprintf(err, errlen, "job row %lld: %s", (long long)j->id, sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return -1;
}

static void copy_col(sqlite3_stmt *st, int i, char *dst, size_t len)
{
	const unsigned char *s = sqlite3_column_text(st, i);

	snprintf(dst, len, "%s", s ? (const char *)s : "");
}

int results_jobs_list(sqlite3 *db, const char *sweep, int latest_only, struct results_job **jobs,
		      size_t *n, char *err, size_t errlen)
{
	static const char sql[] =
	    "SELECT id, executor, sweep, layout_id, job_id, array_job_id, "
	    "COALESCE(array_index, -1), state, reason, failure_class, COALESCE(exit_code, -1), "
	    "COALESCE(CAST(strftime('%s', submit_time) AS INTEGER), 0), "
	    "COALESCE(CAST(strftime('%s', start_time) AS INTEGER), 0), "
	    "COALESCE(CAST(strftime('%s', end_time) AS INTEGER), 0), run_dir, attempt "
	    "FROM jobs j WHERE sweep = ?1 AND (?2 = 0 OR id = (SELECT MAX(id) FROM jobs k "
	    "WHERE k.sweep = j.sweep AND k.layout_id = j.layout_id)) ORDER BY id";
	sqlite3_stmt *st = NULL;
	struct results_job *v = NULL, *nv;
	size_t cnt = 0, cap = 0;
	int rc;

	*jobs = NULL;
	*n = 0;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		goto out_err;
	sqlite3_bind_text(st, 1, sweep, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 2, latest_only ? 1 : 0);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct results_job *j;
		if (cnt == cap) {
			cap = cap ? 2 * cap : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				snprintf(err, errlen, "out of memory");
				goto out_free;
			}
			v = nv;
		}
		j = &v[cnt++];
		results_job_init(j);
		j->id = sqlite3_column_int64(st, 0);
		copy_col(st, 1, j->executor, sizeof(j->executor));
		copy_col(st, 2, j->sweep, sizeof(j->sweep));
		copy_col(st, 3, j->layout_id, sizeof(j->layout_id));
		copy_col(st, 4, j->job_id, sizeof(j->job_id));
		copy_col(st, 5, j->array_job_id, sizeof(j->array_job_id));
		j->array_index = sqlite3_column_int(st, 6);
		copy_col(st, 7, j->state, sizeof(j->state));
		copy_col(st, 8, j->reason, sizeof(j->reason));
		copy_col(st, 9, j->failure_class, sizeof(j->failure_class));
		j->exit_code = sqlite3_column_int(st, 10);
		j->submit_time = sqlite3_column_int64(st, 11);
		j->start_time = sqlite3_column_int64(st, 12);
		j->end_time = sqlite3_column_int64(st, 13);
		copy_col(st, 14, j->run_dir, sizeof(j->run_dir));
		j->attempt = sqlite3_column_int(st, 15);
	}
	if (rc != SQLITE_DONE)
		goto out_err;
	sqlite3_finalize(st);
	*jobs = v;
	*n = cnt;
	return 0;
out_err:
	snprintf(err, errlen, "jobs of sweep '%s': %s", sweep, sqlite3_errmsg(db));
out_free:
	sqlite3_finalize(st);
	free(v);
	return -1;
}

/* sql prepared with ?1 = sweep and ?2 = layout_id bound; NULL when it cannot be. */
static sqlite3_stmt *layout_query(sqlite3 *db, const char *sql, const char *sweep,
				  const char *layout_id)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		sqlite3_finalize(st);
		return NULL;
	}
	sqlite3_bind_text(st, 1, sweep, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, layout_id, -1, SQLITE_TRANSIENT);
	return st;
}

static int exists(sqlite3 *db, const char *sql, const char *sweep, const char *layout_id)
{
	sqlite3_stmt *st = layout_query(db, sql, sweep, layout_id);
	int rc;

	if (!st)
		return -1;
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

int results_layout_has_ok_run(sqlite3 *db, const char *sweep, const char *layout_id)
{
	return exists(db,
		      "SELECT 1 FROM runs WHERE sweep = ?1 AND layout_id = ?2 AND status = 'ok' "
		      "LIMIT 1",
		      sweep, layout_id);
}

int results_layout_has_active_job(sqlite3 *db, const char *sweep, const char *layout_id)
{
	return exists(db,
		      "SELECT 1 FROM jobs WHERE sweep = ?1 AND layout_id = ?2 AND state IN "
		      "('PENDING', 'CONFIGURING', 'REQUEUED', 'SUSPENDED', 'RUNNING') LIMIT 1",
		      sweep, layout_id);
}

int results_job_attempts(sqlite3 *db, const char *sweep, const char *layout_id, int *n, char *err,
			 size_t errlen)
{
	sqlite3_stmt *st =
	    layout_query(db,
			 "SELECT COALESCE(MAX(attempt), 0) FROM jobs WHERE sweep = ?1 "
			 "AND layout_id = ?2",
			 sweep, layout_id);

	if (!st || sqlite3_step(st) != SQLITE_ROW)
		goto out_err;
	*n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return 0;
out_err:
	snprintf(err, errlen, "attempts of layout '%s' in sweep '%s': %s", layout_id, sweep,
		 sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return -1;
}

int results_job_latest(sqlite3 *db, const char *sweep, const char *layout_id, char *state,
		       size_t slen, char *cls, size_t clen, char *err, size_t errlen)
{
	sqlite3_stmt *st = layout_query(db,
					"SELECT state, COALESCE(failure_class, '') FROM jobs WHERE "
					"sweep = ?1 AND layout_id = ?2 ORDER BY id DESC LIMIT 1",
					sweep, layout_id);
	int rc;

	if (!st)
		goto out_err;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		copy_col(st, 0, state, slen);
		copy_col(st, 1, cls, clen);
	} else if (rc != SQLITE_DONE) {
		goto out_err;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_ROW;
out_err:
	snprintf(err, errlen, "jobs of layout '%s' in sweep '%s': %s", layout_id, sweep,
		 sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return -1;
}

/* The first row of st (prepared, bound) as a run: 1, 0 when none, -1 on an error. */
static int read_run(sqlite3_stmt *st, struct results_job_run *run)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return -1;
	run->id = sqlite3_column_int64(st, 0);
	copy_col(st, 1, run->status, sizeof(run->status));
	copy_col(st, 2, run->failure_class, sizeof(run->failure_class));
	run->exit_code = sqlite3_column_int(st, 3);
	return 1;
}

#define RUN_COLUMNS "id, status, COALESCE(failure_class, ''), COALESCE(exit_code, -1)"

int results_job_find_run(sqlite3 *db, const struct results_job *j, struct results_job_run *run,
			 char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	char like[600], since[32];
	int found;

	iso_time(j->submit_time, since);
	snprintf(like, sizeof(like), "%s/%%", j->run_dir);
	if (sqlite3_prepare_v2(db,
			       "SELECT " RUN_COLUMNS
			       " FROM runs WHERE sweep = ?1 AND layout_id = ?2 "
			       "AND log_path LIKE ?3 AND (job_ref IS NULL OR job_ref = ?4) AND "
			       "(start_time IS NULL OR ?5 IS NULL OR start_time >= ?5) "
			       "ORDER BY id DESC LIMIT 1",
			       -1, &st, NULL) != SQLITE_OK)
		goto out_err;
	sqlite3_bind_text(st, 1, j->sweep, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, j->layout_id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, like, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, j->id);
	results_bind_text(st, 5, since);
	found = read_run(st, run);
	sqlite3_finalize(st);
	st = NULL;
	if (found < 0)
		goto out_err;
	if (!found)
		return 0;
	if (sqlite3_prepare_v2(db, "UPDATE runs SET job_ref = ?1 WHERE id = ?2", -1, &st, NULL) !=
	    SQLITE_OK)
		goto out_err;
	sqlite3_bind_int64(st, 1, j->id);
	sqlite3_bind_int64(st, 2, run->id);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto out_err;
	sqlite3_finalize(st);
	return 1;
out_err:
	snprintf(err, errlen, "run of job row %lld: %s", (long long)j->id, sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return -1;
}

int results_job_tied_run(sqlite3 *db, int64_t job, struct results_job_run *run, char *err,
			 size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int found = -1;

	if (sqlite3_prepare_v2(db,
			       "SELECT " RUN_COLUMNS
			       " FROM runs WHERE job_ref = ?1 ORDER BY id DESC "
			       "LIMIT 1",
			       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, job);
		found = read_run(st, run);
	}
	if (found < 0)
		snprintf(err, errlen, "run of job row %lld: %s", (long long)job,
			 sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return found;
}

int results_job_run_close(sqlite3 *db, int64_t run_id, const char *cls, const char *message,
			  char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(
		db,
		"UPDATE runs SET status = 'failed', failure_class = ?2, message = ?3, "
		"end_time = COALESCE(end_time, strftime('%Y-%m-%dT%H:%M:%SZ', "
		"'now')) WHERE id = ?1 AND status = 'running'",
		-1, &st, NULL) != SQLITE_OK)
		goto out_err;
	sqlite3_bind_int64(st, 1, run_id);
	results_bind_text(st, 2, cls);
	results_bind_text(st, 3, message);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto out_err;
	sqlite3_finalize(st);
	return 0;
out_err:
	snprintf(err, errlen, "run %lld: %s", (long long)run_id, sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return -1;
}

void results_names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int results_job_sweeps(sqlite3 *db, char ***names, size_t *n, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	char **v = NULL;
	size_t cnt = 0;
	int rc;

	*names = NULL;
	*n = 0;
	if (sqlite3_prepare_v2(db, "SELECT DISTINCT sweep FROM jobs ORDER BY sweep", -1, &st,
			       NULL) != SQLITE_OK)
		goto out_err;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		char **nv = realloc(v, (cnt + 1) * sizeof(*v));
		if (!nv || !(nv[cnt] = strdup((const char *)sqlite3_column_text(st, 0)))) {
			v = nv ? nv : v;
			snprintf(err, errlen, "out of memory");
			goto out_free;
		}
		v = nv;
		cnt++;
	}
	if (rc != SQLITE_DONE)
		goto out_err;
	sqlite3_finalize(st);
	*names = v;
	*n = cnt;
	return 0;
out_err:
	snprintf(err, errlen, "sweeps with jobs: %s", sqlite3_errmsg(db));
out_free:
	sqlite3_finalize(st);
	results_names_free(v, cnt);
	return -1;
}
