/*
 * The report's queries (see report/load.h): one SELECT per view, rows copied into a
 * report_runs set. Column order is fixed by the query text below, so each column is read
 * by index.
 */
#include "report/load.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/layout.h"
#include "common/model.h"

#define COLUMNS                                                                                    \
	"run_id, sweep, source, label, model, seq_len, gpus, micro_batch, tp, pp, dp, "            \
	"sequence_parallel, checkpointing, attention, norm, status, failure_class, "               \
	"mfu_reported, tflops_per_gpu, step_time_mean, forward_s, backward_s, "                    \
	"optimizer_s, comm_exposed_s, bubble_s, peak_mem_bytes, rank_peak_mem, step_time_std, "    \
	"n_steps, health, mfu_no_embed, device_peak_mem_bytes, mfu"

static const char *text(sqlite3_stmt *st, int col)
{
	return (const char *)sqlite3_column_text(st, col);
}

/* Column col as a number, or unknown where it is NULL. */
static double real_or(sqlite3_stmt *st, int col, double unknown)
{
	return sqlite3_column_type(st, col) == SQLITE_NULL ? unknown
							   : sqlite3_column_double(st, col);
}

static long long int64_or(sqlite3_stmt *st, int col, long long unknown)
{
	return sqlite3_column_type(st, col) == SQLITE_NULL ? unknown
							   : sqlite3_column_int64(st, col);
}

/* Column col into *v where it is not NULL; 1 when it was there. */
static int real_if(sqlite3_stmt *st, int col, double *v)
{
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		return 0;
	*v = sqlite3_column_double(st, col);
	return 1;
}

int report_load_prepare(sqlite3 *db, const char *sql, const char *sweep, sqlite3_stmt **st)
{
	if (sqlite3_prepare_v2(db, sql, -1, st, NULL) != SQLITE_OK)
		return -1;
	if (sweep)
		sqlite3_bind_text(*st, 1, sweep, -1, SQLITE_STATIC);
	return 0;
}

/* The columns that go into a run as they stand: place in COLUMNS, member of the run. */
struct run_col {
	int col;
	size_t off;
};
#define AT(member) offsetof(struct report_run, member)
static const struct run_col text_cols[] = {
    {1, AT(sweep)},	 {3, AT(label)}, {4, AT(model)},	  {12, AT(checkpointing)},
    {13, AT(attention)}, {14, AT(norm)}, {16, AT(failure_class)},
};
static const struct run_col int_cols[] = {
    {5, AT(seq_len)}, {6, AT(gpus)}, {7, AT(micro_batch)},	  {8, AT(tp)},
    {9, AT(pp)},      {10, AT(dp)},  {11, AT(sequence_parallel)}, {28, AT(n_steps)},
};
#undef AT

static int load(sqlite3 *db, const char *view, const char *sweep, struct report_runs *rs, char *err,
		size_t errlen)
{
	char sql[1024];
	sqlite3_stmt *st = NULL;
	int rc;

	snprintf(sql, sizeof(sql), "SELECT " COLUMNS " FROM %s%s", view,
		 sweep ? " WHERE sweep = ?1" : "");
	if (report_load_prepare(db, sql, sweep, &st)) {
		snprintf(err, errlen, "cannot read view '%s': %s (is this a layoutbench database?)",
			 view, sqlite3_errmsg(db));
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct report_run r;
		const char *status = text(st, 15);
		const char *source = text(st, 2);

		memset(&r, 0, sizeof(r));
		r.model_mem = r.planned_mem = -1;
		r.run_id = (long)sqlite3_column_int64(st, 0);
		for (size_t i = 0; i < sizeof(text_cols) / sizeof(text_cols[0]); i++)
			*(const char **)((char *)&r + text_cols[i].off) =
			    text(st, text_cols[i].col);
		for (size_t i = 0; i < sizeof(int_cols) / sizeof(int_cols[0]); i++)
			*(int *)((char *)&r + int_cols[i].off) =
			    sqlite3_column_int(st, int_cols[i].col);
		r.paper = source && !strcmp(source, "paper");
		if (!status || !strcmp(status, "failed"))
			r.status = REPORT_RUN_FAILED;
		else if (!strcmp(status, "ok"))
			r.status = REPORT_RUN_OK;
		else
			r.status = REPORT_RUN_RUNNING;
		/* COALESCE(mfu_reported, mfu): an imported run shows the sheet's own MFU */
		r.has_mfu = real_if(st, 17, &r.mfu) || real_if(st, 32, &r.mfu);
		r.has_tflops = real_if(st, 18, &r.tflops);
		r.step_time = real_or(st, 19, -1);
		for (int k = 0; k < REPORT_PHASE_COUNT; k++)
			r.phase[k] = real_or(st, 20 + k, -1);
		r.peak_mem = int64_or(st, 25, -1);
		report_run_set_rank_mem(&r, text(st, 26));
		r.step_time_sd = real_or(st, 27, -1);
		r.health = report_health_parse(text(st, 29));
		if (sqlite3_column_type(st, 30) != SQLITE_NULL) {
			/* an imported run: the sheet's own MFU carried over to this count (the
			 * ratio of the two counts, mfu_no_embed / mfu) */
			double mine = sqlite3_column_double(st, 32);

			r.has_mfu_no_embed = 1;
			r.mfu_no_embed = sqlite3_column_double(st, 30);
			if (sqlite3_column_type(st, 17) != SQLITE_NULL && mine > 0)
				r.mfu_no_embed *= sqlite3_column_double(st, 17) / mine;
		}
		r.device_peak_mem = int64_or(st, 31, -1);
		if (report_runs_add(rs, &r)) {
			snprintf(err, errlen, "out of memory reading view '%s'", view);
			sqlite3_finalize(st);
			return -1;
		}
	}
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "cannot read view '%s': %s", view, sqlite3_errmsg(db));
		sqlite3_finalize(st);
		return -1;
	}
	sqlite3_finalize(st);
	return 0;
}

/* The trainer's memory model for a run's layout flags on its backend (the planner's
 * figure without the GPU reserve); -1 when the flags do not parse or the trainer could
 * not build the layout. */
static long long model_mem(const char *flags, const char *backend)
{
	char buf[2048], *argv[128], *rest[128], err[256], *save = NULL;
	struct lb_layout l;
	struct lb_mem_estimate est;
	int argc = 0, nrest = 0;

	if (!flags || snprintf(buf, sizeof(buf), "%s", flags) >= (int)sizeof(buf))
		return -1;
	for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		if (argc == (int)(sizeof(argv) / sizeof(argv[0])))
			return -1;
		argv[argc++] = tok;
	}
	lb_layout_init(&l);
	if (lb_layout_parse_args(&l, argc, argv, rest, &nrest, err, sizeof(err)) || nrest ||
	    lb_memory_trainer(&l, backend && !strcmp(backend, "cuda"), 0, &est))
		return -1;
	return (long long)est.total;
}

int report_load_model_mem(sqlite3 *db, const char *sweep, struct report_runs *rs, char *err,
			  size_t errlen)
{
	const struct report_run **idx;
	sqlite3_stmt *st = NULL;
	char *prev_flags = NULL, *prev_backend = NULL;
	long long prev = -1;
	int rc;

	if (!rs->n)
		return 0;
	idx = malloc(rs->n * sizeof(*idx));
	if (!idx) {
		snprintf(err, errlen, "out of memory reading the runs' flags");
		return -1;
	}
	for (size_t i = 0; i < rs->n; i++)
		idx[i] = &rs->v[i];
	qsort(idx, rs->n, sizeof(*idx), report_run_by_id);
	if (report_load_prepare(
		db,
		sweep ? "SELECT id, flags, coalesce(backend, '') FROM runs WHERE "
			"source = 'run' AND flags IS NOT NULL AND sweep = ?1 ORDER BY "
			"flags, backend"
		      : "SELECT id, flags, coalesce(backend, '') FROM runs WHERE "
			"source = 'run' AND flags IS NOT NULL ORDER BY flags, backend",
		sweep, &st)) {
		/* a database of the views alone (docs/schema.md's contract): no model figures */
		free(idx);
		return 0;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct report_run key = {.run_id = (long)sqlite3_column_int64(st, 0)};
		const struct report_run *kp = &key, **hit;

		const char *flags = text(st, 1), *backend = text(st, 2);

		hit = bsearch(&kp, idx, rs->n, sizeof(*idx), report_run_by_id);
		if (!hit)
			continue;
		/* rows come by layout: the model once per distinct flags and backend */
		if (!prev_flags || strcmp(prev_flags, flags) || strcmp(prev_backend, backend)) {
			free(prev_flags);
			free(prev_backend);
			prev_flags = strdup(flags);
			prev_backend = strdup(backend);
			if (!prev_flags || !prev_backend) {
				rc = SQLITE_NOMEM;
				break;
			}
			prev = model_mem(flags, backend);
		}
		((struct report_run *)*hit)->model_mem = prev;
		((struct report_run *)*hit)->planned_mem =
		    prev < 0
			? -1
			: prev + (strcmp(backend, "cuda")
				      ? 0
				      : (long long)(LB_TRAINER_GPU_RESERVE_GIB * 1073741824.0));
	}
	if (rc != SQLITE_DONE)
		snprintf(err, errlen, "cannot read the runs' flags: %s",
			 rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(db));
	sqlite3_finalize(st);
	free(prev_flags);
	free(prev_backend);
	free(idx);
	return rc == SQLITE_DONE ? 0 : -1;
}

int report_load_runs(sqlite3 *db, const char *sweep, struct report_runs *rs, char *err,
		     size_t errlen)
{
	return load(db, "run_summary", sweep, rs, err, errlen);
}

int report_load_best(sqlite3 *db, const char *sweep, struct report_runs *rs, char *err,
		     size_t errlen)
{
	return load(db, "best_layout", sweep, rs, err, errlen);
}

int report_load_diverged(sqlite3 *db, const char *sweep, size_t *n, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc;

	*n = 0;
	if (report_load_prepare(db,
				sweep ? "SELECT count(*) FROM run_summary WHERE status = 'ok' AND "
					"health = 'diverged' AND sweep = ?1"
				      : "SELECT count(*) FROM run_summary WHERE status = 'ok' AND "
					"health = 'diverged'",
				sweep, &st)) {
		snprintf(err, errlen, "cannot read view 'run_summary': %s", sqlite3_errmsg(db));
		return -1;
	}
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*n = (size_t)sqlite3_column_int64(st, 0);
	else
		snprintf(err, errlen, "cannot read view 'run_summary': %s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : -1;
}
