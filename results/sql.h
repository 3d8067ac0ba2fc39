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
 * separated by a blank line). Rows stream: a table's column widths are those of its
 * first 1000 rows (a wider later cell pushes the rest of its row right). In a table, and
 * in CSV/TSV written to a terminal, control characters and invalid UTF-8 in values are
 * shown as \xHH (lb_strbuf_add_visible). Returns 0; -1 with err set to SQLite's message
 * (or the refusal of a write on a read-only handle); -2 when writing to out failed, err
 * holding the OS's reason ("No space left on device"), the output then incomplete.
 */
int sql_print(sqlite3 *db, const char *query, enum sql_format fmt, FILE *out, char *err,
	      size_t errlen);

#endif
