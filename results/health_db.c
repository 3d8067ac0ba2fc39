/*
 * A sweep's run health from run_summary (results/health_db.h).
 */
#include "results/health_db.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

int results_health_summary(sqlite3 *db, const char *sweep, struct results_health_summary *s,
			   char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	size_t cap = 0;
	int rc;

	memset(s, 0, sizeof(*s));
	if (sqlite3_prepare_v2(
		db,
		"SELECT run_uid, layout_id, health, loss_first, loss_last_quarter "
		"FROM run_summary WHERE sweep = ?1 AND status = 'ok' ORDER BY run_id",
		-1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "run health: %s", sqlite3_errmsg(db));
		return -1;
	}
	sqlite3_bind_text(st, 1, sweep, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *h = (const char *)sqlite3_column_text(st, 2);
		struct results_health_run *r;

		if (!h) {
			s->unknown++;
			continue;
		}
		if (!strcmp(h, "ok")) {
			s->ok++;
			continue;
		}
		if (!strcmp(h, "flat"))
			s->flat++;
		else
			s->diverged++;
		if (lb_grow(&s->runs, s->n_runs, &cap, 16, sizeof(*s->runs))) {
			snprintf(err, errlen, "out of memory");
			rc = SQLITE_NOMEM;
			goto out_finalize;
		}
		r = &s->runs[s->n_runs++];
		snprintf(r->run_uid, sizeof(r->run_uid), "%s", sqlite3_column_text(st, 0));
		snprintf(r->layout_id, sizeof(r->layout_id), "%s", sqlite3_column_text(st, 1));
		snprintf(r->health, sizeof(r->health), "%s", h);
		r->loss_first =
		    sqlite3_column_type(st, 3) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 3);
		r->loss_last_quarter =
		    sqlite3_column_type(st, 4) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 4);
	}
	if (rc != SQLITE_DONE)
		snprintf(err, errlen, "run health: %s", sqlite3_errmsg(db));
out_finalize:
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		results_health_summary_release(s);
	return rc == SQLITE_DONE ? 0 : -1;
}

void results_health_summary_release(struct results_health_summary *s)
{
	free(s->runs);
	memset(s, 0, sizeof(*s));
}
