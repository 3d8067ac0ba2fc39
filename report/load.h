/*
 * Reading the report's input from the results database: the `run_summary` view (one row
 * per run) and the `best_layout` view (per model, seq_len and GPU count, the best ok run),
 * both with the columns named in docs/schema.md. The only SQL the report runs; opening
 * the database is results/db.h's job.
 */
#ifndef LB_REPORT_LOAD_H
#define LB_REPORT_LOAD_H

#include <stddef.h>

#include <sqlite3.h>

#include "report/report.h"

/* Append every row of run_summary (sweep: only that sweep; NULL: all) to rs, whose
 * caller initialised it (report_runs_init) and releases it. The MFU read is
 * COALESCE(mfu_reported, mfu), and the MFU without the input embedding lookup is the
 * view's mfu_no_embed (an imported run's: the sheet's MFU times mfu_no_embed / mfu, the
 * ratio of the two counts); the spread is the view's step_time_std over n_steps
 * steady-state steps; health and the device's peak as the view has them; model_mem and
 * planned_mem are left unknown (-1). Returns 0, or -1 with err set. */
int report_load_runs(sqlite3 *db, const char *sweep, struct report_runs *rs, char *err,
		     size_t errlen);

/* The memory figure's model column: set model_mem of rs's runs of ours (loaded by
 * report_load_runs with the same sweep) to the planner's model of the trainer
 * (lb_memory_trainer, 1F1B, the default gradient bucket) for the layout in the runs
 * table's flags on its backend, computed once per distinct layout and backend; where the
 * database has only the views (no runs table) they stay unknown. Returns 0, or -1 with
 * err set. */
int report_load_model_mem(sqlite3 *db, const char *sweep, struct report_runs *rs, char *err,
			  size_t errlen);

/* How many runs that ended ok diverged (run_summary.health; sweep: only that sweep's):
 * what the best_layout view leaves out. Returns 0, or -1 with err set. */
int report_load_diverged(sqlite3 *db, const char *sweep, size_t *n, char *err, size_t errlen);

/* The same for the best_layout view (sweep: only rows won by that sweep). */
int report_load_best(sqlite3 *db, const char *sweep, struct report_runs *rs, char *err,
		     size_t errlen);

/* Prepare one of the report's queries into *st (the caller finalizes it), its ?1 bound to
 * sweep when one is given (sweep must outlive *st). Returns 0, or -1 (sqlite3_errmsg
 * says why). */
int report_load_prepare(sqlite3 *db, const char *sql, const char *sweep, sqlite3_stmt **st);

#endif
