/*
 * Run health as the database holds it (run_summary.health; results/health.h classes it):
 * what `layoutbench status` shows per sweep. Reading only.
 */
#ifndef LB_RESULTS_HEALTH_DB_H
#define LB_RESULTS_HEALTH_DB_H

#include <stddef.h>

#include <sqlite3.h>

/* A run whose health is not ok: its id, layout, class and first and last-quarter loss. */
struct results_health_run {
	char run_uid[128];
	char layout_id[17];
	char health[16];	  /* "diverged", "flat" */
	double loss_first;	  /* NaN unknown */
	double loss_last_quarter; /* NaN unknown */
};

/* Of a sweep's runs that ended ok: how many are healthy and which are not. */
struct results_health_summary {
	size_t ok, flat, diverged, unknown;
	struct results_health_run *runs; /* flat and diverged runs, by run id; caller frees */
	size_t n_runs;
};

/* Fill s for sweep (every run of it whose status is ok). Returns 0, or -1 with err set.
 * Release with results_health_summary_release. */
int results_health_summary(sqlite3 *db, const char *sweep, struct results_health_summary *s,
			   char *err, size_t errlen);
void results_health_summary_release(struct results_health_summary *s);

#endif
