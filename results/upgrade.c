/*
 * Filling in the columns a schema step adds to an older database's runs (results/upgrade.h).
 */
#include "results/upgrade.h"

#include <stdio.h>
#include <string.h>

#include "common/layout.h"
#include "common/model.h"
#include "results/stats.h"

/* flops_per_step_no_embed of every run without it, from its layout row. 0 or -1. */
static int fill_flops(sqlite3 *db)
{
	sqlite3_stmt *rd = NULL, *wr = NULL;
	int rc = -1, s;

	if (sqlite3_prepare_v2(db,
			       "SELECT r.id, l.n_layers, l.hidden, l.n_heads, l.n_kv_heads, l.ffn, "
			       "l.vocab, l.tied, l.seq_len, l.global_batch FROM runs r JOIN "
			       "layouts l ON l.layout_id = r.layout_id WHERE "
			       "r.flops_per_step_no_embed IS NULL",
			       -1, &rd, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "UPDATE runs SET flops_per_step_no_embed = ?2 WHERE id = ?1", -1,
			       &wr, NULL) != SQLITE_OK)
		goto out_finalize;
	while ((s = sqlite3_step(rd)) == SQLITE_ROW) {
		struct lb_layout l;

		lb_layout_init(&l);
		l.model.n_layers = sqlite3_column_int(rd, 1);
		l.model.hidden = sqlite3_column_int(rd, 2);
		l.model.n_heads = sqlite3_column_int(rd, 3);
		l.model.n_kv_heads = sqlite3_column_int(rd, 4);
		l.model.ffn = sqlite3_column_int(rd, 5);
		l.model.vocab = sqlite3_column_int(rd, 6);
		l.model.tied = sqlite3_column_int(rd, 7);
		l.seq_len = sqlite3_column_int(rd, 8);
		l.global_batch = sqlite3_column_int(rd, 9);
		sqlite3_bind_int64(wr, 1, sqlite3_column_int64(rd, 0));
		sqlite3_bind_double(wr, 2, lb_flops_per_step_as(&l, LB_FLOPS_NO_EMBED));
		if (sqlite3_step(wr) != SQLITE_DONE)
			goto out_finalize;
		sqlite3_reset(wr);
	}
	rc = s == SQLITE_DONE ? 0 : -1;
out_finalize:
	sqlite3_finalize(rd);
	sqlite3_finalize(wr);
	return rc;
}

/* run_stats again (health, losses, device readings) for every run that has a row. */
static int fill_stats(sqlite3 *db)
{
	sqlite3_stmt *rd = NULL;
	int rc = -1, s;

	if (sqlite3_prepare_v2(db, "SELECT run_id FROM run_stats ORDER BY run_id", -1, &rd, NULL) !=
	    SQLITE_OK)
		return -1;
	while ((s = sqlite3_step(rd)) == SQLITE_ROW)
		if (results_refresh_run_stats(db, sqlite3_column_int64(rd, 0)))
			goto out_finalize;
	rc = s == SQLITE_DONE ? 0 : -1;
out_finalize:
	sqlite3_finalize(rd);
	return rc;
}

int results_upgrade_runs(sqlite3 *db, char *err, size_t errlen)
{
	if (fill_flops(db) || fill_stats(db)) {
		snprintf(err, errlen, "filling in the runs' health and FLOPs: %s",
			 sqlite3_errmsg(db));
		return -1;
	}
	return 0;
}
