/*
 * The results database's statement helpers (results/bind.h).
 */
#include "results/bind.h"

#include <math.h>

void results_bind_text(sqlite3_stmt *st, int i, const char *s)
{
	if (s && *s)
		sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

void results_bind_double(sqlite3_stmt *st, int i, double v, int known)
{
	if (known && isfinite(v))
		sqlite3_bind_double(st, i, v);
	else
		sqlite3_bind_null(st, i);
}

void results_bind_int64(sqlite3_stmt *st, int i, long long v, int known)
{
	if (known)
		sqlite3_bind_int64(st, i, v);
	else
		sqlite3_bind_null(st, i);
}

int results_bind_run(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc;
}
