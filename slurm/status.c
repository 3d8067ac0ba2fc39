/*
 * `layoutbench status` (slurm/status.h).
 */
#include "slurm/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sqlite3.h>

#include "results/health_db.h"
#include "slurm/classify.h"
#include "slurm/halving.h"
#include "slurm/track.h"

/* The trainer's own word on job j: the failure class and message of the newest failed
 * run tied to it (runs.job_ref), else of the newest failed run of its layout in the
 * sweep that no job claims. Both "" when there is none. */
static void run_failure(sqlite3 *db, const struct results_job *j, char *cls, size_t clen,
			char *msg, size_t mlen)
{
	static const char sql[] =
	    "SELECT COALESCE(failure_class, ''), COALESCE(message, '') FROM runs "
	    "WHERE status = 'failed' AND (job_ref = ?1 OR (job_ref IS NULL AND sweep = ?2 AND "
	    "layout_id = ?3)) ORDER BY job_ref IS NULL, id DESC LIMIT 1";
	sqlite3_stmt *st = NULL;

	*cls = *msg = '\0';
	if (!db || sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return;
	sqlite3_bind_int64(st, 1, j->id);
	sqlite3_bind_text(st, 2, j->sweep, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, j->layout_id, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW) {
		snprintf(cls, clen, "%s", (const char *)sqlite3_column_text(st, 0));
		snprintf(msg, mlen, "%s", (const char *)sqlite3_column_text(st, 1));
	}
	sqlite3_finalize(st);
}

/* One failed layout: the trainer's class and message where its run log has them (the
 * scheduler's class and reason after them), else the scheduler's; a reason that only
 * repeats the class ("cancelled: cancelled") is not repeated. */
static void print_failed(sqlite3 *db, const struct results_job *j)
{
	char cls[32], msg[512], sched[256] = "";
	int same = !strcasecmp(j->reason, j->failure_class);

	run_failure(db, j, cls, sizeof(cls), msg, sizeof(msg));
	if (*cls) {
		snprintf(sched, sizeof(sched), " (scheduler: %s%s%s)", j->failure_class,
			 *j->reason && !same ? ", " : "", same ? "" : j->reason);
		printf("  failed %s  job %s (%s)  %s  %s%s%s%s\n", j->layout_id, j->job_id,
		       j->executor, j->state, cls, *msg ? ": " : "", msg, sched);
		return;
	}
	printf("  failed %s  job %s (%s)  %s  %s%s%s\n", j->layout_id, j->job_id, j->executor,
	       j->state, j->failure_class, *j->reason && !same ? ": " : "",
	       same ? "" : j->reason);
}

static void print_status(sqlite3 *db, const char *sweep, const struct results_job *jobs,
			 size_t n)
{
	const char *states[32];
	size_t scount[32], ns = 0, ccount[SLURM_N_CLASSES] = {0};

	for (size_t i = 0; i < n; i++) {
		size_t k;
		for (k = 0; k < ns; k++)
			if (!strcmp(states[k], jobs[i].state))
				break;
		if (k == ns && ns < 32) {
			states[ns] = jobs[i].state;
			scount[ns++] = 0;
		}
		if (k < 32)
			scount[k]++;
		for (size_t c = 0; c < SLURM_N_CLASSES; c++)
			if (!strcmp(jobs[i].failure_class, slurm_classes[c]))
				ccount[c]++;
	}
	printf("sweep '%s': %zu layout(s)\n", sweep, n);
	for (size_t k = 0; k < ns; k++)
		printf("  state %-14s %zu\n", states[k], scount[k]);
	for (size_t c = 0; c < SLURM_N_CLASSES; c++)
		if (ccount[c])
			printf("  class %-14s %zu\n", slurm_classes[c], ccount[c]);
	for (size_t i = 0; i < n; i++)
		if (*jobs[i].failure_class)
			print_failed(db, &jobs[i]);
}

/* The health of the sweep's runs that ended ok (docs/schema.md, "Run health"), and each
 * one that is not ok with its loss from the first step to the last quarter's mean. */
static int print_health(sqlite3 *db, const char *sweep)
{
	struct results_health_summary h;
	char err[256];

	if (results_health_summary(db, sweep, &h, err, sizeof(err))) {
		fprintf(stderr, "error: sweep '%s': %s\n", sweep, err);
		return 1;
	}
	if (h.ok + h.flat + h.diverged + h.unknown)
		printf(
		    "  health ok %zu, flat %zu, diverged %zu, unknown %zu (runs that ended ok)\n",
		    h.ok, h.flat, h.diverged, h.unknown);
	for (size_t i = 0; i < h.n_runs; i++)
		printf("  %s %s  run %s  loss %.4g -> %.4g\n", h.runs[i].health,
		       h.runs[i].layout_id, h.runs[i].run_uid, h.runs[i].loss_first,
		       h.runs[i].loss_last_quarter);
	results_health_summary_release(&h);
	return 0;
}

/* The sweep's newest halving, if any: one step of it, or with --wait every step to its
 * end (a --wait that was left resumes here), then its rungs. Returns 0, or 1 (reported). */
static int status_halving(struct track_cmd *t, const char *sweep)
{
	struct halving_progress pr;
	char err[1024] = "", state[16] = "";
	int64_t id = 0;
	int has = halving_latest(t->db, sweep, &id, state, sizeof(state), err, sizeof(err)), r;

	if (has <= 0)
		goto out;
	if (!strcmp(state, "running")) {
		r = t->wait ? halving_wait(t->db, &t->es, id, 0, err, sizeof(err))
			    : halving_advance(t->db, &t->es, id, &pr, err, sizeof(err));
		if (r == -1 && !t->wait)
			fprintf(stderr, "warning: sweep '%s': %s\n", sweep, err);
		has = r == -2 || (t->wait && r < 0) ? -1 : 1;
	}
	if (has > 0 && halving_print(t->db, id, stdout, err, sizeof(err)))
		has = -1;
out:
	if (has < 0)
		fprintf(stderr, "error: sweep '%s': %s\n", sweep, err);
	return has < 0;
}

/* --wait without a halving: until the newest job of every layout of the sweep ended. */
static int status_wait(struct track_cmd *t, const char *sweep, const struct results_job *jobs,
		       size_t n)
{
	struct track_counts c;
	char err[1024];
	int64_t *rows = calloc(n ? n : 1, sizeof(*rows));
	size_t k = 0;
	int r;

	if (!rows) {
		fprintf(stderr, "error: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		if (!exec_state_final(jobs[i].state))
			rows[k++] = jobs[i].id;
	r = k ? track_wait(t->db, &t->es, sweep, rows, k, 0, &c, err, sizeof(err)) : 0;
	free(rows);
	if (r < 0)
		fprintf(stderr, "error: sweep '%s': %s\n", sweep, err);
	return r < 0;
}

static const struct lb_option status_opts[] = {
    LB_OPTION_DB(TRACK_OPT_DB),
    LB_OPTION_SWEEP(TRACK_OPT_SWEEP),
    LB_SWITCH(TRACK_OPT_WAIT, "wait", 0,
	      "block until every job of the sweeps ended, driving their running halvings to "
	      "the end"),
    LB_OPT_END,
};

static int run_status(const struct lb_args *a)
{
	struct track_cmd t;
	char err[1024];
	int rc;

	if ((rc = track_cmd_open(a, &t)))
		goto out_close;
	if (t.n_names == 0)
		printf("no jobs in '%s'\n", t.db_path);
	for (size_t s = 0; s < t.n_names; s++) {
		struct results_job *jobs = NULL;
		size_t n = 0;
		if (status_halving(&t, t.names[s]))
			rc = 1;
		if (results_jobs_list(t.db, t.names[s], 1, &jobs, &n, err, sizeof(err))) {
			fprintf(stderr, "error: %s\n", err);
			rc = 1;
			continue;
		}
		if (t.wait && status_wait(&t, t.names[s], jobs, n))
			rc = 1;
		int r = track_refresh(t.db, &t.es, jobs, n, err, sizeof(err));
		if (r) {
			fprintf(stderr, "%s: sweep '%s': %s\n", r == -2 ? "error" : "warning",
				t.names[s], err);
			rc = 1;
		}
		print_status(t.db, t.names[s], jobs, n);
		if (print_health(t.db, t.names[s]))
			rc = 1;
		free(jobs);
	}
out_close:
	track_cmd_close(&t);
	return rc;
}

const struct lb_command cmd_status = LB_COMMAND(
    "status", NULL, 0, 0, 0, status_opts, run_status,
    "one batched scheduler query; writes states, collects finished runs, classes failures");
