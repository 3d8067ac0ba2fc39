/*
 * One-value SQL queries for the results tests: the first column of the first row as a
 * double, an integer or text (NULL or no row: NAN / -999 / "NULL"). A query that does
 * not prepare fails the test. Include after cmocka.h (fail_msg).
 */
#ifndef LB_TEST_SQL_QUERY_H
#define LB_TEST_SQL_QUERY_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include <sqlite3.h>

/* Prepare the formatted query and step it once; returns the statement (caller finalizes)
 * positioned on its first row, or NULL when there is none or the value is NULL. */
static inline sqlite3_stmt *q_first(sqlite3 *db, sqlite3_stmt **st, const char *fmt, va_list ap)
{
	char sql[1024];

	vsnprintf(sql, sizeof(sql), fmt, ap);
	if (sqlite3_prepare_v2(db, sql, -1, st, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	if (sqlite3_step(*st) == SQLITE_ROW && sqlite3_column_type(*st, 0) != SQLITE_NULL)
		return *st;
	return NULL;
}

static inline double q_dbl(sqlite3 *db, const char *fmt, ...)
{
	sqlite3_stmt *st;
	va_list ap;

	va_start(ap, fmt);
	double v = q_first(db, &st, fmt, ap) ? sqlite3_column_double(st, 0) : NAN;
	va_end(ap);
	sqlite3_finalize(st);
	return v;
}

static inline long long q_int(sqlite3 *db, const char *fmt, ...)
{
	sqlite3_stmt *st;
	va_list ap;

	va_start(ap, fmt);
	long long v = q_first(db, &st, fmt, ap) ? sqlite3_column_int64(st, 0) : -999;
	va_end(ap);
	sqlite3_finalize(st);
	return v;
}

/* Text in a static buffer, valid until the next call. */
static inline char *q_text(sqlite3 *db, const char *fmt, ...)
{
	static char out[4096];
	sqlite3_stmt *st;
	va_list ap;

	va_start(ap, fmt);
	if (q_first(db, &st, fmt, ap))
		snprintf(out, sizeof(out), "%s", (const char *)sqlite3_column_text(st, 0));
	else
		snprintf(out, sizeof(out), "NULL");
	va_end(ap);
	sqlite3_finalize(st);
	return out;
}

#endif
