/*
 * The results database: opening (creating and migrating the schema embedded from
 * results/schema.sql), transactions, and the small write/read helpers that other stages
 * share for sweeps and layouts (jobs: results/jobs.h). Runs and steps are written by the
 * collector (results/collect.h) and the importer; the report reads the views `run_summary`
 * and `best_layout` (docs/schema.md). Every function takes an open handle; errors are
 * returned as status codes, with the reason in err (or from sqlite3_errmsg where a function
 * has no err argument).
 */
#ifndef LB_RESULTS_DB_H
#define LB_RESULTS_DB_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "common/layout.h"
#include "results/bind.h" /* results_bind_text and the other statement helpers */
/* RESULTS_SCHEMA_VERSION: the schema version this build writes (PRAGMA user_version after
 * results_open), the last step of results/schema.sql, which the build counts */
#include "schema_version.h"

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
 * RESULTS_DB_WRITE: refuse an existing file that this user may not write (results_db_
 * write_problem names the file or folder), else open, creating if needed, switch to WAL
 * mode with a busy timeout of
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

/*
 * Why the database at path cannot be written, when a permission says so: the file, its
 * -wal or -shm file (where they exist), or its folder (where a -wal or -shm file would
 * have to be made) not writable by this user. Returns 1 with err set ("database 'x.db':
 * no write permission on 'x.db-shm' (owner uid 0, mode 0644); ..."), 0 when every
 * permission is there. results_db_open for writing refuses with it up front, so that no
 * statement fails later as "read-only".
 */
int results_db_write_problem(const char *path, char *err, size_t errlen);

/* results_db_open(path, RESULTS_DB_WRITE, ...): the writers' open. */
int results_open(const char *path, sqlite3 **db, char *err, size_t errlen);

/* Close a handle from results_open (NULL is fine). */
void results_close(sqlite3 *db);

/*
 * Apply the migration steps of a schema text to db: steps start at lines
 * "-- migrate: N" (N = 1, 2, ...), numbered in order; the views, where the text has them,
 * at a line "-- views" (one CREATE VIEW each, its current text). The steps with N >
 * user_version run in one BEGIN EXCLUSIVE transaction (waiting up to the busy timeout for
 * the lock) that reads user_version again first, drops the views the views part names,
 * sets user_version = N after each step and creates the views after the last, so parallel
 * openers of a new database apply each step once. results_db_open calls this with the
 * embedded results/schema.sql; tests call it with their own texts. Returns 0, or -1 with
 * err set (the whole transaction is rolled back: the version is left as it was).
 */
int results_migrate(sqlite3 *db, const char *schema, char *err, size_t errlen);

/* PRAGMA user_version of db, or -1 on error. */
int results_schema_version(sqlite3 *db);

/* Transactions of a writer: BEGIN IMMEDIATE, COMMIT (0, or -1 with err set) and ROLLBACK
 * (after a failure; its own failure is not news). */
int results_begin(sqlite3 *db, char *err, size_t errlen);
int results_commit(sqlite3 *db, char *err, size_t errlen);
void results_rollback(sqlite3 *db);

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

/* The layouts table's columns of the layout's fields, in the fields' order
 * (common/layout_fields.def), for a SELECT: "l.model, l.n_layers, ..." with alias "l"
 * (NULL: none). Returns buf. */
char *results_db_layout_columns(const char *alias, char *buf, size_t len);

/* Read those columns of a row, from column col on, into l (a NULL run setting: its
 * default). Returns the column after them, or -1 with err set (a name or a split it
 * does not know). */
int results_db_layout_read(sqlite3_stmt *st, int col, struct lb_layout *l, char *err,
			   size_t errlen);

/*
 * Step st to its end, one element of sz bytes a row appended to the array *v of *n
 * elements (NULL and 0 to start): each new element is zeroed, counted, then filled by
 * row(st, elem), which returns 0, or -1 when out of memory. *v is the caller's to free,
 * after a failure too (with what its elements hold). Returns SQLITE_DONE; -1 when memory
 * ran out; else sqlite3_step's error code (the message: sqlite3_errmsg).
 */
int results_db_rows(sqlite3_stmt *st, size_t sz, int (*row)(sqlite3_stmt *st, void *elem), void **v,
		    size_t *n);

/* The same under a given id (the collector keeps the id a run log names). */
int results_upsert_layout_id(sqlite3 *db, const struct lb_layout *l, const char *layout_id,
			     const char *label);

/* The spec text stored for a sweep at submission: 0 and *text (caller frees), 1 when the
 * sweep has none (not submitted from a spec), -1 on a database error (err set). */
int results_sweep_spec_text(sqlite3 *db, const char *sweep, char **text, char *err, size_t errlen);

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
