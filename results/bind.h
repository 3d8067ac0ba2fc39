/*
 * The statement helpers every writer of the results database shares: a value or NULL
 * bound to a parameter, and a statement stepped and made ready for its next bindings.
 * SQLite alone, below every other results file.
 */
#ifndef LB_RESULTS_BIND_H
#define LB_RESULTS_BIND_H

#include <sqlite3.h>

/* Bind s to parameter i of st, or NULL when s is NULL or "" (SQLITE_TRANSIENT). */
void results_bind_text(sqlite3_stmt *st, int i, const char *s);
/* Bind v, or NULL unless known and finite. */
void results_bind_double(sqlite3_stmt *st, int i, double v, int known);
/* Bind v, or NULL unless known. */
void results_bind_int64(sqlite3_stmt *st, int i, long long v, int known);
/* Step a statement that returns no rows, reset it and clear its bindings. Returns
 * sqlite3_step's code: SQLITE_DONE on success. */
int results_bind_run(sqlite3_stmt *st);

#endif
