/*
 * The results database: open with WAL and a busy timeout, migrate the schema embedded
 * from results/schema.sql step by step (PRAGMA user_version), and the shared helpers for
 * sweeps, layouts and jobs (results/db.h).
 */
#include "results/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/embed.h"

const char *results_default_db(void)
{
	const char *p = getenv("LAYOUTBENCH_DB");

	return p && *p ? p : "results.db";
}

int results_schema_version(sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	int v = -1;

	if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* Find the next "-- migrate: N" line at or after p; sets *n and returns the line start. */
static const char *next_step(const char *p, long *n)
{
	static const char mark[] = "-- migrate:";

	while (p && *p) {
		if (!strncmp(p, mark, sizeof(mark) - 1)) {
			char *end;
			long v = strtol(p + sizeof(mark) - 1, &end, 10);
			if (end != p + sizeof(mark) - 1 && v > 0 && v < 100000) {
				*n = v;
				return p;
			}
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return NULL;
}

int results_migrate(sqlite3 *db, const char *schema, char *err, size_t errlen)
{
	int have = results_schema_version(db);
	long n = 0, last = 0;
	const char *p;

	if (have < 0) {
		snprintf(err, errlen, "cannot read the schema version: %s", sqlite3_errmsg(db));
		return -1;
	}
	for (p = next_step(schema, &n); p;) {
		long next_n = 0;
		const char *body = strchr(p, '\n');
		const char *q = body ? next_step(body + 1, &next_n) : NULL;
		size_t blen;
		char *sql, *msg = NULL;

		if (n != last + 1) {
			snprintf(err, errlen, "schema: migration step %ld follows step %ld", n,
				 last);
			return -1;
		}
		last = n;
		if (n <= have || !body) {
			p = q;
			n = next_n;
			continue;
		}
		blen = q ? (size_t)(q - body) : strlen(body);
		sql = malloc(blen + 128);
		if (!sql) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		snprintf(sql, blen + 128, "BEGIN IMMEDIATE;%.*s;PRAGMA user_version = %ld;COMMIT;",
			 (int)blen, body, n);
		if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
			snprintf(err, errlen, "schema migration to version %ld: %s", n,
				 msg ? msg : sqlite3_errmsg(db));
			sqlite3_free(msg);
			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			free(sql);
			return -1;
		}
		free(sql);
		have = (int)n;
		p = q;
		n = next_n;
	}
	return 0;
}

int results_open(const char *path, sqlite3 **db, char *err, size_t errlen)
{
	sqlite3 *h = NULL;
	const char *schema;
	char *msg = NULL;
	int v;

	*db = NULL;
	if (!path)
		path = results_default_db();
	if (sqlite3_open_v2(path, &h,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database '%s': %s", path,
			 h ? sqlite3_errmsg(h) : "cannot open");
		goto out_close;
	}
	sqlite3_busy_timeout(h, RESULTS_BUSY_TIMEOUT_MS);
	if (sqlite3_exec(h,
			 "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; "
			 "PRAGMA foreign_keys = ON;",
			 NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "database '%s': %s", path, msg ? msg : sqlite3_errmsg(h));
		sqlite3_free(msg);
		goto out_close;
	}
	v = results_schema_version(h);
	if (v < 0) {
		snprintf(err, errlen, "database '%s': %s (is it an SQLite database?)", path,
			 sqlite3_errmsg(h));
		goto out_close;
	}
	if (v > RESULTS_SCHEMA_VERSION) {
		snprintf(err, errlen,
			 "database '%s' has schema version %d, newer than this build's %d; "
			 "use a newer layoutbench",
			 path, v, RESULTS_SCHEMA_VERSION);
		goto out_close;
	}
	if (v < RESULTS_SCHEMA_VERSION) {
		char merr[512];
		schema = lb_embedded("results/schema.sql", NULL);
		if (!schema) {
			snprintf(err, errlen, "results/schema.sql is not embedded in this build");
			goto out_close;
		}
		if (results_migrate(h, schema, merr, sizeof(merr))) {
			snprintf(err, errlen, "database '%s': %s", path, merr);
			goto out_close;
		}
	}
	*db = h;
	return 0;
out_close:
	sqlite3_close(h);
	return -1;
}

void results_close(sqlite3 *db)
{
	if (db)
		sqlite3_close(db);
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *s)
{
	if (s && *s)
		sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

int results_upsert_sweep(sqlite3 *db, const char *name, const char *source, const char *spec_path,
			 const char *spec_text, char *err, size_t errlen)
{
	static const char sql[] =
	    "INSERT INTO sweeps (name, source, spec_path, spec_text) VALUES (?1, ?2, ?3, ?4) "
	    "ON CONFLICT (name) DO UPDATE SET source = excluded.source, "
	    "spec_path = COALESCE(excluded.spec_path, spec_path), "
	    "spec_text = COALESCE(excluded.spec_text, spec_text)";
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		goto out_err;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, source, -1, SQLITE_TRANSIENT);
	bind_text_or_null(st, 3, spec_path);
	bind_text_or_null(st, 4, spec_text);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		goto out_err_msg;
	return 0;
out_err:
	sqlite3_finalize(st);
out_err_msg:
	snprintf(err, errlen, "sweep '%s': %s", name, sqlite3_errmsg(db));
	return -1;
}

int results_upsert_layout_id(sqlite3 *db, const struct lb_layout *l, const char *layout_id,
			     const char *label)
{
	static const char sql[] =
	    "INSERT INTO layouts (layout_id, model, n_layers, hidden, n_heads, n_kv_heads, ffn, "
	    "vocab, tied, seq_len, global_batch, micro_batch, tp, pp, dp, gpus, gpus_per_node, "
	    "nodes, sequence_parallel, zero_stage, checkpointing, attention, norm, steps, warmup, "
	    "seed, canonical, label) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
	    "?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28) "
	    "ON CONFLICT (layout_id) DO UPDATE SET label = COALESCE(label, excluded.label)";
	const struct lb_model *m = &l->model;
	char canon[1024];
	sqlite3_stmt *st = NULL;
	int rc, i = 1;

	rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return rc;
	lb_layout_canonical(l, canon, sizeof(canon));
	sqlite3_bind_text(st, i++, layout_id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, i++, m->name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, i++, m->n_layers);
	sqlite3_bind_int(st, i++, m->hidden);
	sqlite3_bind_int(st, i++, m->n_heads);
	sqlite3_bind_int(st, i++, m->n_kv_heads);
	sqlite3_bind_int(st, i++, m->ffn);
	sqlite3_bind_int(st, i++, m->vocab);
	sqlite3_bind_int(st, i++, m->tied);
	sqlite3_bind_int(st, i++, l->seq_len);
	sqlite3_bind_int(st, i++, l->global_batch);
	sqlite3_bind_int(st, i++, l->micro_batch);
	sqlite3_bind_int(st, i++, l->tp);
	sqlite3_bind_int(st, i++, l->pp);
	sqlite3_bind_int(st, i++, l->dp);
	sqlite3_bind_int64(st, i++, (sqlite3_int64)l->tp * l->pp * l->dp);
	sqlite3_bind_int(st, i++, l->gpus_per_node);
	sqlite3_bind_int(st, i++, l->nodes);
	sqlite3_bind_int(st, i++, l->sequence_parallel);
	sqlite3_bind_int(st, i++, l->zero_stage);
	sqlite3_bind_text(st, i++, lb_ckpt_name(l->checkpointing), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, i++, lb_attn_name(l->attention), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, i++, lb_norm_name(l->norm), -1, SQLITE_STATIC);
	sqlite3_bind_int(st, i++, l->steps);
	sqlite3_bind_int(st, i++, l->warmup);
	sqlite3_bind_int64(st, i++, (sqlite3_int64)l->seed);
	sqlite3_bind_text(st, i++, canon, -1, SQLITE_TRANSIENT);
	bind_text_or_null(st, i++, label);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int results_upsert_layout(sqlite3 *db, const struct lb_layout *l, const char *label)
{
	char id[LB_ID_LEN + 1];

	lb_layout_id(l, id);
	return results_upsert_layout_id(db, l, id, label);
}

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
	char t[3][32];
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
	iso_time(j->submit_time, t[0]);
	iso_time(j->start_time, t[1]);
	iso_time(j->end_time, t[2]);
	sqlite3_bind_text(st, 1, j->executor, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, j->sweep, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, j->layout_id, -1, SQLITE_TRANSIENT);
	bind_text_or_null(st, 4, j->job_id);
	bind_text_or_null(st, 5, j->array_job_id);
	if (j->array_index >= 0)
		sqlite3_bind_int(st, 6, j->array_index);
	bind_text_or_null(st, 7, j->state);
	bind_text_or_null(st, 8, j->reason);
	bind_text_or_null(st, 9, j->failure_class);
	if (j->exit_code >= 0)
		sqlite3_bind_int(st, 10, j->exit_code);
	bind_text_or_null(st, 11, t[0]);
	bind_text_or_null(st, 12, t[1]);
	bind_text_or_null(st, 13, t[2]);
	bind_text_or_null(st, 14, j->run_dir);
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
	char t[3][32];
	int rc;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		goto out_err;
	iso_time(j->submit_time, t[0]);
	iso_time(j->start_time, t[1]);
	iso_time(j->end_time, t[2]);
	sqlite3_bind_int64(st, 1, j->id);
	bind_text_or_null(st, 2, j->job_id);
	bind_text_or_null(st, 3, j->array_job_id);
	if (j->array_index >= 0)
		sqlite3_bind_int(st, 4, j->array_index);
	bind_text_or_null(st, 5, j->state);
	bind_text_or_null(st, 6, j->reason);
	bind_text_or_null(st, 7, j->failure_class);
	if (j->exit_code >= 0)
		sqlite3_bind_int(st, 8, j->exit_code);
	bind_text_or_null(st, 9, t[0]);
	bind_text_or_null(st, 10, t[1]);
	bind_text_or_null(st, 11, t[2]);
	bind_text_or_null(st, 12, j->run_dir);
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

static int exists(sqlite3 *db, const char *sql, const char *sweep, const char *layout_id)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, sweep, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, layout_id, -1, SQLITE_TRANSIENT);
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
