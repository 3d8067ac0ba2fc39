/*
 * The report's queries (see report/load.h): one SELECT per view, rows copied into a
 * report_runs set. Column order is fixed by the query text below, so each column is read
 * by index.
 */
#include "report/load.h"

#include <stdio.h>
#include <string.h>

#define COLUMNS                                                                                    \
	"run_id, sweep, source, label, model, seq_len, gpus, micro_batch, tp, pp, dp, "            \
	"sequence_parallel, checkpointing, attention, norm, status, failure_class, "               \
	"COALESCE(mfu_reported, mfu), tflops_per_gpu, step_time_mean, forward_s, backward_s, "     \
	"optimizer_s, comm_exposed_s, bubble_s, peak_mem_bytes, rank_peak_mem, step_time_std, "    \
	"n_steps"

static const char *text(sqlite3_stmt *st, int col)
{
	return (const char *)sqlite3_column_text(st, col);
}

static int load(sqlite3 *db, const char *view, const char *sweep, struct report_runs *rs, char *err,
		size_t errlen)
{
	char sql[768];
	sqlite3_stmt *st = NULL;
	int rc;

	snprintf(sql, sizeof(sql), "SELECT " COLUMNS " FROM %s%s", view,
		 sweep ? " WHERE sweep = ?1" : "");
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "cannot read view '%s': %s (is this a layoutbench database?)",
			 view, sqlite3_errmsg(db));
		return -1;
	}
	if (sweep)
		sqlite3_bind_text(st, 1, sweep, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct report_run r;
		const char *status = text(st, 15);
		const char *source = text(st, 2);

		memset(&r, 0, sizeof(r));
		r.run_id = (long)sqlite3_column_int64(st, 0);
		r.sweep = text(st, 1);
		r.paper = source && !strcmp(source, "paper");
		r.label = text(st, 3);
		r.model = text(st, 4);
		r.seq_len = sqlite3_column_int(st, 5);
		r.gpus = sqlite3_column_int(st, 6);
		r.micro_batch = sqlite3_column_int(st, 7);
		r.tp = sqlite3_column_int(st, 8);
		r.pp = sqlite3_column_int(st, 9);
		r.dp = sqlite3_column_int(st, 10);
		r.sequence_parallel = sqlite3_column_int(st, 11);
		r.checkpointing = text(st, 12);
		r.attention = text(st, 13);
		r.norm = text(st, 14);
		if (!status || !strcmp(status, "failed"))
			r.status = REPORT_RUN_FAILED;
		else if (!strcmp(status, "ok"))
			r.status = REPORT_RUN_OK;
		else
			r.status = REPORT_RUN_RUNNING;
		r.failure_class = text(st, 16);
		if (sqlite3_column_type(st, 17) != SQLITE_NULL) {
			r.has_mfu = 1;
			r.mfu = sqlite3_column_double(st, 17);
		}
		if (sqlite3_column_type(st, 18) != SQLITE_NULL) {
			r.has_tflops = 1;
			r.tflops = sqlite3_column_double(st, 18);
		}
		r.step_time =
		    sqlite3_column_type(st, 19) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 19);
		for (int k = 0; k < REPORT_PHASE_COUNT; k++)
			r.phase[k] = sqlite3_column_type(st, 20 + k) == SQLITE_NULL
					 ? -1
					 : sqlite3_column_double(st, 20 + k);
		r.peak_mem =
		    sqlite3_column_type(st, 25) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 25);
		report_run_set_rank_mem(&r, text(st, 26));
		r.step_time_sd =
		    sqlite3_column_type(st, 27) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 27);
		r.n_steps = sqlite3_column_int(st, 28);
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
