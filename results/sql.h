/*
 * Query printing for `layoutbench sql`: run SQL on the results database and print a
 * header line and the rows as an aligned table, CSV (RFC 4180) or TSV.
 */
#ifndef LB_RESULTS_SQL_H
#define LB_RESULTS_SQL_H

#include <stddef.h>
#include <stdio.h>

#include <sqlite3.h>

enum sql_format { SQL_TABLE = 0, SQL_CSV, SQL_TSV };

/* "table", "csv", "tsv" -> *out; 0, or -1 for an unknown name. */
int sql_format_parse(const char *name, enum sql_format *out);

/*
 * Run every statement of query in order; each statement that returns columns prints a
 * header and its rows to out (NULL is "" in CSV/TSV, "NULL" in a table; statements are
 * separated by a blank line). Returns 0, or -1 with err set to SQLite's message.
 */
int sql_print(sqlite3 *db, const char *query, enum sql_format fmt, FILE *out, char *err,
	      size_t errlen);

#endif
