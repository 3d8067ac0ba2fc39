/*
 * The results database: opening (creating and migrating the schema embedded from
 * results/schema.sql), and the small write/read helpers that other stages share: sweeps,
 * layouts and jobs. Runs and steps are written by the collector (results/collect.h) and
 * the importer; the report reads the views `run_summary` and `best_layout` (docs/schema.md).
 * Every function takes an open handle; errors are returned as status codes, with the
 * reason in err (or from sqlite3_errmsg where a function has no err argument).
 */
#ifndef LB_RESULTS_DB_H
#define LB_RESULTS_DB_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "common/layout.h"

/* The schema version this build writes (PRAGMA user_version after results_open). */
#define RESULTS_SCHEMA_VERSION 4

/* Milliseconds a statement waits for another connection's lock before failing. */
#define RESULTS_BUSY_TIMEOUT_MS 10000

/* $LAYOUTBENCH_DB when set and not empty, else "results.db" (in the current directory).
 * The returned string is static or the environment's; do not free. */
const char *results_default_db(void);

/* How a command opens the database: readers never create, write or migrate it. */
enum results_db_mode {
	RESULTS_DB_READ,  /* read-only: `sql` without --write, `report` */
	RESULTS_DB_WRITE, /* create if needed and migrate: collect, import, submit, status, ... */
};

/*
 * The one way to open the database at path (NULL: results_default_db()).
 *
 * RESULTS_DB_WRITE: open, creating if needed, switch to WAL mode with a busy timeout of
 * RESULTS_BUSY_TIMEOUT_MS, turn foreign keys on, and apply every migration step newer than
 * its PRAGMA user_version (results_migrate; safe when several processes open a new
 * database at once).
 *
 * RESULTS_DB_READ: open an existing file with SQLITE_OPEN_READONLY (no write access to
 * the file or its folder is needed); where the folder cannot hold the -wal/-shm files,
 * open it again as the immutable=1 URI. No migration runs: a schema older than
 * RESULTS_SCHEMA_VERSION is refused with a message that says to run a writing command
 * once. ATTACH and DETACH are refused (authorizer), and every write fails with
 * SQLITE_READONLY (sqlite3_db_readonly(db, "main") is 1).
 *
 * Either mode refuses a database written by a newer build (user_version >
 * RESULTS_SCHEMA_VERSION). Returns 0 and sets *db (close with results_close), or -1 with
 * err set ("database 'x.db': ...") and *db NULL. The handle has no mutex of its own: use
 * it from one thread at a time (open one handle per thread).
 */
int results_db_open(const char *path, enum results_db_mode mode, sqlite3 **db, char *err,
		    size_t errlen);

/* results_db_open(path, RESULTS_DB_WRITE, ...): the writers' open. */
int results_open(const char *path, sqlite3 **db, char *err, size_t errlen);

/* Close a handle from results_open (NULL is fine). */
void results_close(sqlite3 *db);

/*
 * Apply the migration steps of a schema text to db: steps start at lines
 * "-- migrate: N" (N = 1, 2, ...), numbered in order. The steps with N > user_version run
 * in one BEGIN EXCLUSIVE transaction (waiting up to the busy timeout for the lock) that
 * reads user_version again first and sets user_version = N after each step, so parallel
 * openers of a new database apply each step once. results_db_open calls this with the
 * embedded results/schema.sql; tests call it with their own texts. Returns 0, or -1 with
 * err set (the whole transaction is rolled back: the version is left as it was).
 */
int results_migrate(sqlite3 *db, const char *schema, char *err, size_t errlen);

/* PRAGMA user_version of db, or -1 on error. */
int results_schema_version(sqlite3 *db);

/*
 * Insert a sweep, or update an existing one of the same name. source is "spec", "paper"
 * or "adhoc"; spec_path and spec_text may be NULL (an existing value is then kept).
 * Returns 0, or -1 with err set.
 */
int results_upsert_sweep(sqlite3 *db, const char *name, const char *source, const char *spec_path,
			 const char *spec_text, char *err, size_t errlen);

/*
 * Insert the layout row for l under lb_layout_id(l) (every layout field a column), or
 * leave an existing row as it is; label (may be NULL) is stored when the row has none.
 * Returns 0, or an SQLite error code (message: sqlite3_errmsg(db)).
 */
int results_upsert_layout(sqlite3 *db, const struct lb_layout *l, const char *label);

/* The same under a given id (the collector keeps the id a run log names). */
int results_upsert_layout_id(sqlite3 *db, const struct lb_layout *l, const char *layout_id,
			     const char *label);

/* One submission of one layout of a sweep (a row of table jobs). Times are Unix seconds,
 * 0 when unknown (stored as NULL, ISO 8601 UTC text in the table). */
struct results_job {
	int64_t id;		       /* row id (jobs.id); set by results_job_insert */
	char executor[8];	       /* "local", "slurm" or "rest" */
	char sweep[LB_NAME_MAX];       /* sweep name */
	char layout_id[LB_ID_LEN + 1]; /* the layout submitted */
	char job_id[64];	       /* scheduler id ("12345", "12345_7", a pid); "" unknown */
	char array_job_id[64];	       /* array's job id; "" when not an array task */
	int array_index;	       /* array task index; -1 when not an array task */
	char state[24];		       /* PENDING, RUNNING, COMPLETED, FAILED, CANCELLED,
					  TIMEOUT, NODE_FAIL, PREEMPTED, OUT_OF_MEMORY, ... */
	char reason[160];	       /* scheduler's reason or a message; "" none */
	char failure_class[24];	       /* oom, nccl_error, timeout, killed, ...; "" none */
	int exit_code;		       /* -1 unknown */
	int64_t submit_time;	       /* Unix seconds; 0 unknown */
	int64_t start_time;	       /* Unix seconds; 0 unknown */
	int64_t end_time;	       /* Unix seconds; 0 unknown */
	char run_dir[512];	       /* the job's run directory */
	int attempt;		       /* 1 for the first submission of a layout in a sweep */
};

/* Set j to an empty job: strings "", array_index -1, exit_code -1, attempt 1, times 0. */
void results_job_init(struct results_job *j);

/* Insert j (j->id is ignored); the new row id goes to *id (may be NULL) and j->id.
 * The sweep row is created (source "spec") when missing. Returns 0, or -1 with err set. */
int results_job_insert(sqlite3 *db, struct results_job *j, int64_t *id, char *err, size_t errlen);

/* Update the job with row id j->id: job_id, array_job_id, array_index, state, reason,
 * failure_class, exit_code and the three times. An empty string or -1/0 (unknown) keeps
 * the stored value. Returns 0, or -1 with err set ("job row 7 not found"). */
int results_job_update(sqlite3 *db, const struct results_job *j, char *err, size_t errlen);

/* Jobs of a sweep ordered by row id. latest_only: only the newest row of each layout.
 * On success returns 0 and sets *jobs (caller frees with free(); NULL when none) and *n.
 * Returns -1 with err set on error. */
int results_jobs_list(sqlite3 *db, const char *sweep, int latest_only, struct results_job **jobs,
		      size_t *n, char *err, size_t errlen);

/* 1 if the layout has a run with status 'ok' in the sweep, 0 if not, -1 on error. */
int results_layout_has_ok_run(sqlite3 *db, const char *sweep, const char *layout_id);

/* 1 if the layout has a job in state PENDING, CONFIGURING, REQUEUED, SUSPENDED or
 * RUNNING in the sweep, 0 if not, -1 on error. */
int results_layout_has_active_job(sqlite3 *db, const char *sweep, const char *layout_id);

/*
 * Whether the results database db (opened from db_path, which messages name) knows the
 * sweep `name` (a row of table sweeps, which jobs and runs reference). Returns 0 when it
 * does; 1 when not, with err set to "no sweep 'NAME' in database 'PATH' (known: a, b)";
 * -1 on a database error (err set). status, cancel, resubmit and report check --sweep
 * with it, so that a misspelled name is an error and not an empty answer.
 */
int results_sweep_check(struct sqlite3 *db, const char *db_path, const char *name, char *err,
		      size_t errlen);

#endif
