/*
 * A run's step statistics, the run_stats row (docs/schema.md): steady-state count, mean,
 * median and sample std of the step time, steady-state means of the phase times, peak
 * memory, each rank's peak as the element-wise maximum of the steps' arrays, the device's
 * readings, and the run's health from its losses (results/health.h). The collector
 * accumulates them while it reads a run's steps; a run whose steps changed otherwise
 * (a schema upgrade, a test) has them recomputed from its step rows. Below the database
 * helpers and the collector, so that both may use it.
 */
#ifndef LB_RESULTS_STATS_H
#define LB_RESULTS_STATS_H

#include <stddef.h>

#include <sqlite3.h>

#define RESULTS_STATS_PHASES 5 /* forward, backward, optimizer, comm_exposed, bubble */

/* An element-wise maximum of per-rank arrays (bytes): n of cap. */
struct rank_max {
	long long *v;
	size_t n, cap;
};

/* One run's step statistics while its steps are read (the run_stats row). Buffers are
 * reused from run to run; results_stats_reset empties them. */
struct results_stats {
	double *t; /* steady-state step times, seconds; n of cap */
	size_t n, cap;
	long long peak;			  /* max peak_mem_bytes over every step; -1 unknown */
	double sum[RESULTS_STATS_PHASES]; /* steady-state phase sums, seconds */
	long cnt[RESULTS_STATS_PHASES];	  /* steady-state steps that have the phase */
	struct rank_max rank;		  /* element-wise max of rank_peak_mem */
	long long dev_peak;	  /* max device_peak_mem_bytes over every step; -1 unknown */
	struct rank_max rank_dev; /* element-wise max of rank_device_peak_mem */
	double *loss;		  /* every step's loss in step order (NaN: not finite); nloss of
				     loss_cap: the run's health (results/health.h) */
	size_t nloss, loss_cap;
};

/* The statement that reads a run's steps (?1 the run id) and the one that writes its
 * run_stats row: prepare them once, pass them to results_stats_write and _refresh. */
extern const char results_stats_read_sql[];
extern const char results_stats_write_sql[];

/* Empty a (keeping its buffers) / free its buffers. A zeroed struct is an empty one. */
void results_stats_reset(struct results_stats *a);
void results_stats_release(struct results_stats *a);
/* Add one step: its time (steady state only), peak, phases (NaN: absent; steady state
 * only) and rank array (JSON text of non-negative integers, or NULL). -1 when out of
 * memory. */
int results_stats_add(struct results_stats *a, int warmup, double time_s, long long peak,
		      const double *phase, const char *rank_json);
/* The step's loss (NaN: not finite, or absent) and device readings, every step. -1 when
 * out of memory. */
int results_stats_add_more(struct results_stats *a, double loss, long long dev_peak,
			   const char *rank_dev_json);
/* Write the run_stats row of run_id from a (a->t is reordered) with the write statement
 * wr. 0, or -1. */
int results_stats_write(sqlite3_stmt *wr, long long run_id, struct results_stats *a);
/* Recompute the row from the step rows (rd: the read statement; a: a reusable
 * accumulator). 0 (also when the run has no step), or -1 (database error or no memory). */
int results_stats_refresh(sqlite3_stmt *rd, sqlite3_stmt *wr, long long run_id,
			  struct results_stats *a);

/*
 * Recompute the cached step statistics of one run from its step rows. The collector does
 * this for every run it writes, in the run's transaction; call it after changing a run's
 * steps by other means. Returns 0, or -1 (sqlite3_errmsg(db) says why).
 */
int results_refresh_run_stats(sqlite3 *db, long long run_id);

#endif
