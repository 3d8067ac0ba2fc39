/*
 * Filling in, once, what a new schema step adds to the runs of an older database where SQL
 * alone cannot: results_db_open calls it after migrating a file whose version was older
 * (results/db.h). Version 2 (results/schema.sql): each run's FLOPs per step without the
 * input embedding lookup, from its layout (common/model.h), and its run_stats row again
 * (health, first and last-quarter loss, the device's memory reading) from its step rows.
 */
#ifndef LB_RESULTS_UPGRADE_H
#define LB_RESULTS_UPGRADE_H

#include <stddef.h>

#include <sqlite3.h>

/* Fill the columns of schema step 2 for every run that lacks them. Call it inside a
 * transaction (results_db_open does), which the caller rolls back on failure. Idempotent:
 * a second call finds nothing new and rewrites the same statistics. Returns 0, or -1
 * with err set. Below the database helpers (it uses SQLite alone), so that opening a
 * database may call it. */
int results_upgrade_runs(sqlite3 *db, char *err, size_t errlen);

#endif
