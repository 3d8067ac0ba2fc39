/*
 * Import of the paper's CSV files (results/import.h) and the `layoutbench import`
 * command. Each row becomes a layout (paper_row_layout) and a run with gpu "A100" and
 * a peak of 312 TFLOP/s, our FLOPs per step from common/model.h and the sheet's measured
 * step time and MFU.
 */
#include "results/import.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/model.h"
#include "common/util.h"
#include "results/db.h"
#include "results/paper_csv.h"

#define PAPER_GPU	  "A100"
#define PAPER_PEAK_TFLOPS 312.0

const char *results_paper_failure_class(const char *failure)
{
	if (!strcmp(failure, "OOM Error"))
		return "oom";
	if (!strcmp(failure, "Kernel not available"))
		return "kernel_unavailable";
	return "error";
}

static const char upsert_run_sql[] =
    "INSERT INTO runs (run_uid, layout_id, sweep, source, label, status, failure_class, message, "
    "gpu, peak_tflops, world_size, flags, flops_per_step, hw_flops_per_step, tokens_per_step, "
    "params, log_path, measured_step_time, mfu_reported, flops_per_step_no_embed) VALUES (?1, "
    "?2, ?3, 'paper', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19) "
    "ON CONFLICT (run_uid) DO UPDATE SET layout_id = excluded.layout_id, label = excluded.label, "
    "status = excluded.status, failure_class = excluded.failure_class, "
    "message = excluded.message, gpu = excluded.gpu, peak_tflops = excluded.peak_tflops, "
    "world_size = excluded.world_size, flags = excluded.flags, "
    "flops_per_step = excluded.flops_per_step, hw_flops_per_step = excluded.hw_flops_per_step, "
    "tokens_per_step = excluded.tokens_per_step, params = excluded.params, "
    "log_path = excluded.log_path, measured_step_time = excluded.measured_step_time, "
    "mfu_reported = excluded.mfu_reported, "
    "flops_per_step_no_embed = excluded.flops_per_step_no_embed";

static int is_dir(const char *path)
{
	struct stat sb;

	return !stat(path, &sb) && S_ISDIR(sb.st_mode);
}

/* "dir/llama_13B_x.csv" -> "llama_13B_x" (and the base name with extension). */
static void sweep_name(const char *path, char *name, size_t len, char *base, size_t blen)
{
	const char *b = strrchr(path, '/');
	size_t n;

	b = b ? b + 1 : path;
	snprintf(base, blen, "%s", b);
	n = strlen(b);
	if (n > 4 && !strcmp(b + n - 4, ".csv"))
		n -= 4;
	snprintf(name, len, "%.*s", (int)n, b);
}

static int write_row(sqlite3 *db, sqlite3_stmt *s, const char *sweep, const struct paper_row *r,
		     const struct lb_layout *l, const char *path)
{
	char uid[160], id[LB_ID_LEN + 1], flags[1024];
	int rc;

	lb_layout_id(l, id);
	rc = results_upsert_layout_id(db, l, id, NULL);
	if (rc != SQLITE_OK)
		return -1;
	lb_layout_to_flags(l, flags, sizeof(flags));
	snprintf(uid, sizeof(uid), "paper:%s:%ld", sweep, r->trial_id);
	sqlite3_bind_text(s, 1, uid, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, sweep, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 4, r->kernel, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 5, r->failed ? "failed" : "ok", -1, SQLITE_STATIC);
	if (r->failed) {
		sqlite3_bind_text(s, 6, results_paper_failure_class(r->failure), -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 7, r->failure, -1, SQLITE_STATIC);
	}
	sqlite3_bind_text(s, 8, PAPER_GPU, -1, SQLITE_STATIC);
	sqlite3_bind_double(s, 9, PAPER_PEAK_TFLOPS);
	sqlite3_bind_int(s, 10, r->world_size);
	sqlite3_bind_text(s, 11, flags, -1, SQLITE_STATIC);
	sqlite3_bind_double(s, 12, lb_flops_per_step(l));
	sqlite3_bind_double(s, 13, lb_hw_flops_per_step(l));
	sqlite3_bind_int64(s, 14, (sqlite3_int64)l->global_batch * l->seq_len);
	sqlite3_bind_int64(s, 15, lb_param_count(&l->model));
	sqlite3_bind_text(s, 16, path, -1, SQLITE_STATIC);
	sqlite3_bind_double(s, 19, lb_flops_per_step_as(l, LB_FLOPS_NO_EMBED));
	if (!r->failed) {
		sqlite3_bind_double(s, 17, r->step_time_s);
		sqlite3_bind_double(s, 18, r->mfu);
	}
	rc = sqlite3_step(s);
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return rc == SQLITE_DONE ? 0 : -1;
}

int results_import_paper(sqlite3 *db, const char *path, struct import_stats *st, char *err,
			 size_t errlen)
{
	char sweep[LB_NAME_MAX * 2], base[512], model[LB_NAME_MAX], perr[256];
	struct paper_row *rows = NULL;
	sqlite3_stmt *s = NULL;
	int seq_len, global_batch, rc = -1, ok = 0, failed = 0, warnings = 0;
	size_t n = 0, len, i;
	char *text = NULL;

	sweep_name(path, sweep, sizeof(sweep), base, sizeof(base));
	if (is_dir(path)) {
		snprintf(err, errlen,
			 "import: '%s' is a folder: name the CSV files (e.g. %s%s*.csv)", path,
			 path, path[0] && path[strlen(path) - 1] == '/' ? "" : "/");
		return -1;
	}
	if (lb_read_file(path, &text, &len)) {
		snprintf(err, errlen, "'%s': %s", path, strerror(errno));
		return -1;
	}
	if (paper_file_info(base, model, sizeof(model), &seq_len, &global_batch)) {
		snprintf(err, errlen,
			 "'%s': the file name names no model (expected 'llama_<N>B_...csv')", path);
		goto out_free_text;
	}
	if (paper_csv_parse(text, len, &rows, &n, NULL, 0, perr, sizeof(perr))) {
		snprintf(err, errlen, "%s: %s", path, perr);
		goto out_free_text;
	}
	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		goto out_db_error;
	if (results_upsert_sweep(db, sweep, "paper", path, NULL, perr, sizeof(perr))) {
		snprintf(err, errlen, "%s: %s", path, perr);
		goto out_rollback;
	}
	if (sqlite3_prepare_v2(db, upsert_run_sql, -1, &s, NULL) != SQLITE_OK)
		goto out_db_error_rollback;
	for (i = 0; i < n; i++) {
		struct lb_layout l;

		if (paper_row_layout(&rows[i], model, seq_len, global_batch, &l)) {
			struct lb_model m;
			if (lb_model_preset(model, &m)) {
				snprintf(err, errlen, "%s: model '%s' is not a preset", path,
					 model);
				goto out_rollback;
			}
			warnings++;
			if (!st->quiet)
				fprintf(stderr,
					"warning: %s: line %d: unknown kernel '%s'; imported as "
					"flash + fused\n",
					path, rows[i].line, rows[i].kernel);
		}
		if (write_row(db, s, sweep, &rows[i], &l, path))
			goto out_db_error_rollback;
		if (rows[i].failed)
			failed++;
		else
			ok++;
	}
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		goto out_db_error_rollback;
	st->files++;
	st->rows += (int)n;
	st->ok += ok;
	st->failed += failed;
	st->warnings += warnings;
	rc = 0;
	goto out_finalize;

out_db_error_rollback:
	snprintf(err, errlen, "%s: database: %s", path, sqlite3_errmsg(db));
out_rollback:
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	goto out_finalize;
out_db_error:
	snprintf(err, errlen, "%s: database: %s", path, sqlite3_errmsg(db));
out_finalize:
	sqlite3_finalize(s);
	free(rows);
out_free_text:
	free(text);
	return rc;
}
