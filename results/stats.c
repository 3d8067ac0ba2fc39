/*
 * A run's step statistics (results/stats.h): accumulated from the steps as the collector
 * reads them, or read back from the step rows, and written as the run's run_stats row.
 */
#include "results/stats.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/bind.h"
#include "results/health.h"

const char results_stats_read_sql[] =
    "SELECT time_s, warmup, peak_mem_bytes, forward_s, backward_s, optimizer_s, "
    "comm_exposed_s, bubble_s, rank_peak_mem, loss, device_peak_mem_bytes, "
    "rank_device_peak_mem FROM steps WHERE run_id = ?1 ORDER BY step";
const char results_stats_write_sql[] =
    "INSERT OR REPLACE INTO run_stats (run_id, n_steps, step_time_mean, "
    "step_time_median, step_time_std, peak_mem_bytes, forward_s, backward_s, "
    "optimizer_s, comm_exposed_s, bubble_s, rank_peak_mem, "
    "device_peak_mem_bytes, rank_device_peak_mem, loss_first, "
    "loss_last_quarter, health) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
    "?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)";

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

void results_stats_reset(struct results_stats *a)
{
	a->n = 0;
	a->peak = a->dev_peak = -1;
	a->rank.n = a->rank_dev.n = 0;
	a->nloss = 0;
	for (int k = 0; k < RESULTS_STATS_PHASES; k++) {
		a->sum[k] = 0;
		a->cnt[k] = 0;
	}
}

void results_stats_release(struct results_stats *a)
{
	free(a->t);
	free(a->rank.v);
	free(a->rank_dev.v);
	free(a->loss);
	memset(a, 0, sizeof(*a));
}

/* Fold a rank array (JSON text of non-negative integers, or NULL) into m. -1 when out of
 * memory. */
static int rank_max_add(struct rank_max *m, const char *rank_json)
{
	if (!rank_json || *rank_json != '[')
		return 0;
	const char *p = rank_json + 1;
	for (size_t i = 0;; i++) {
		char *end;
		long long v;
		while (*p == ' ' || *p == ',')
			p++;
		if (*p < '0' || *p > '9')
			break;
		errno = 0;
		v = strtoll(p, &end, 10);
		if (end == p || errno)
			break;
		p = end;
		if (i == m->cap) {
			size_t nc = m->cap ? 2 * m->cap : 16;
			long long *r = realloc(m->v, nc * sizeof(*r));
			if (!r)
				return -1;
			m->v = r;
			m->cap = nc;
		}
		if (i >= m->n) {
			m->v[i] = v;
			m->n = i + 1;
		} else if (v > m->v[i]) {
			m->v[i] = v;
		}
	}
	return 0;
}

/* Append x to the array *v of *n values (room for *cap). -1 when out of memory. */
static int push_double(double **v, size_t *n, size_t *cap, double x)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 1024;
		double *nv = realloc(*v, nc * sizeof(*nv));
		if (!nv)
			return -1;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = x;
	return 0;
}

/* The step's loss (NaN: not finite, or absent) and device readings, every step. -1 when
 * out of memory. */
int results_stats_add_more(struct results_stats *a, double loss, long long dev_peak,
			   const char *rank_dev_json)
{
	if (dev_peak > a->dev_peak)
		a->dev_peak = dev_peak;
	if (push_double(&a->loss, &a->nloss, &a->loss_cap, loss))
		return -1;
	return rank_max_add(&a->rank_dev, rank_dev_json);
}

/* Add one step: its time (steady state only), peak, phases (NaN: absent; steady state
 * only) and rank array (JSON text of non-negative integers, or NULL). -1 when out of
 * memory. */
int results_stats_add(struct results_stats *a, int warmup, double time_s, long long peak,
		      const double *phase, const char *rank_json)
{
	if (peak > a->peak)
		a->peak = peak;
	if (!warmup) {
		if (push_double(&a->t, &a->n, &a->cap, time_s))
			return -1;
		for (int k = 0; k < RESULTS_STATS_PHASES; k++)
			if (isfinite(phase[k])) {
				a->sum[k] += phase[k];
				a->cnt[k]++;
			}
	}
	return rank_max_add(&a->rank, rank_json);
}

/* Bind the JSON text of m at parameter col (nothing when empty). -1 when out of memory. */
static int bind_rank_max(sqlite3_stmt *wr, int col, const struct rank_max *m)
{
	char *json, *q;

	if (!m->n)
		return 0;
	json = malloc(m->n * 21 + 2);
	if (!json)
		return -1;
	q = json;
	*q++ = '[';
	for (size_t i = 0; i < m->n; i++)
		q += sprintf(q, "%s%lld", i ? "," : "", m->v[i]);
	*q++ = ']';
	*q = 0;
	sqlite3_bind_text(wr, col, json, -1, SQLITE_TRANSIENT);
	free(json);
	return 0;
}

/* The run's health and its losses (results/health.h) at parameters 15..17. */
static void bind_health(sqlite3_stmt *wr, const struct results_stats *a)
{
	struct results_health_verdict h;
	const char *name;

	results_health_class(a->loss, a->nloss, &h);
	results_bind_double(wr, 15, h.first, 1);
	results_bind_double(wr, 16, h.last_quarter, 1);
	name = results_health_name(h.health);
	if (name)
		sqlite3_bind_text(wr, 17, name, -1, SQLITE_STATIC);
}

/* Write the run_stats row from the accumulated steps (a->t is reordered): the same
 * numbers results_refresh_run_stats computes from the step rows. */
int results_stats_write(sqlite3_stmt *wr, long long run_id, struct results_stats *a)
{
	double *t = a->t;
	size_t n = a->n;
	int rc;

	sqlite3_bind_int64(wr, 1, run_id);
	if (n) {
		double sum = 0, ss = 0, mean;
		for (size_t i = 0; i < n; i++)
			sum += t[i];
		mean = sum / (double)n;
		qsort(t, n, sizeof(*t), cmp_double);
		sqlite3_bind_int64(wr, 2, (long long)n);
		sqlite3_bind_double(wr, 3, mean);
		sqlite3_bind_double(wr, 4, n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2);
		if (n > 1) {
			for (size_t i = 0; i < n; i++)
				ss += (t[i] - mean) * (t[i] - mean);
			sqlite3_bind_double(wr, 5, sqrt(ss / (double)(n - 1)));
		}
	}
	if (a->peak >= 0)
		sqlite3_bind_int64(wr, 6, a->peak);
	for (int k = 0; k < RESULTS_STATS_PHASES; k++)
		if (a->cnt[k])
			sqlite3_bind_double(wr, 7 + k, a->sum[k] / (double)a->cnt[k]);
	if (a->dev_peak >= 0)
		sqlite3_bind_int64(wr, 13, a->dev_peak);
	if (bind_rank_max(wr, 12, &a->rank) || bind_rank_max(wr, 14, &a->rank_dev)) {
		sqlite3_clear_bindings(wr);
		return -1;
	}
	bind_health(wr, a);
	rc = results_bind_run(wr) == SQLITE_DONE ? 0 : -1;
	return rc;
}

/*
 * Recompute the run_stats row of a run from its step rows (steady-state count, mean,
 * median, sample std and phase means; peak memory and per-rank peaks over every step).
 * a is a reusable accumulator. Returns 0, or -1 (database error or no memory).
 */
int results_stats_refresh(sqlite3_stmt *rd, sqlite3_stmt *wr, long long run_id,
			  struct results_stats *a)
{
	int rc, any = 0;

	results_stats_reset(a);
	sqlite3_bind_int64(rd, 1, run_id);
	while ((rc = sqlite3_step(rd)) == SQLITE_ROW) {
		double ph[RESULTS_STATS_PHASES];
		any = 1;
		for (int k = 0; k < RESULTS_STATS_PHASES; k++)
			ph[k] = sqlite3_column_type(rd, 3 + k) == SQLITE_NULL
				    ? NAN
				    : sqlite3_column_double(rd, 3 + k);
		if (results_stats_add(a, sqlite3_column_int(rd, 1), sqlite3_column_double(rd, 0),
				      sqlite3_column_type(rd, 2) == SQLITE_NULL
					  ? -1
					  : sqlite3_column_int64(rd, 2),
				      ph, (const char *)sqlite3_column_text(rd, 8)) ||
		    results_stats_add_more(
			a,
			sqlite3_column_type(rd, 9) == SQLITE_NULL ? NAN
								  : sqlite3_column_double(rd, 9),
			sqlite3_column_type(rd, 10) == SQLITE_NULL ? -1
								   : sqlite3_column_int64(rd, 10),
			(const char *)sqlite3_column_text(rd, 11))) {
			sqlite3_reset(rd);
			return -1;
		}
	}
	sqlite3_reset(rd);
	if (rc != SQLITE_DONE)
		return -1;
	if (!any)
		return 0;
	return results_stats_write(wr, run_id, a);
}

int results_refresh_run_stats(sqlite3 *db, long long run_id)
{
	sqlite3_stmt *rd = NULL, *wr = NULL;
	struct results_stats acc;
	int rc = -1;

	memset(&acc, 0, sizeof(acc));
	if (sqlite3_prepare_v2(db, results_stats_read_sql, -1, &rd, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, results_stats_write_sql, -1, &wr, NULL) == SQLITE_OK)
		rc = results_stats_refresh(rd, wr, run_id, &acc);
	sqlite3_finalize(rd);
	sqlite3_finalize(wr);
	results_stats_release(&acc);
	return rc;
}
