/*
 * The jobs table (results/schema.sql): one row per submission of a layout, written by
 * submit and by the executors' polls, read by status, resubmit and cancel; and the
 * queries those commands ask about a job's runs. Every function takes an open handle
 * (results/db.h) and returns a status code, the reason in err.
 */
#ifndef LB_RESULTS_JOBS_H
#define LB_RESULTS_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "results/db.h"

/* One submission of one layout of a sweep (a row of table jobs). Times are Unix seconds,
 * 0 when unknown (stored as NULL, ISO 8601 UTC text in the table). */
struct results_job {
	int64_t id;		       /* row id (jobs.id); set by results_job_insert */
	char executor[8];	       /* "local", "slurm" or "rest" */
	char sweep[LB_NAME_MAX];       /* sweep name */
	char layout_id[LB_ID_LEN + 1]; /* the layout submitted */
	char job_id[64];	       /* scheduler id ("12345", "12345_7", a pid); "" unknown */
	char array_job_id[64];	       /* array's job id; "" when not an array task */
	int array_index;	       /* array task index; -1 when not an array task */
	char state[24];		       /* PENDING, RUNNING, COMPLETED, FAILED, CANCELLED,
					  TIMEOUT, NODE_FAIL, PREEMPTED, OUT_OF_MEMORY, ... */
	char reason[160];	       /* scheduler's reason or a message; "" none */
	char failure_class[24];	       /* oom, nccl_error, timeout, killed, ...; "" none */
	int exit_code;		       /* -1 unknown */
	int64_t submit_time;	       /* Unix seconds; 0 unknown */
	int64_t start_time;	       /* Unix seconds; 0 unknown */
	int64_t end_time;	       /* Unix seconds; 0 unknown */
	char run_dir[512];	       /* the job's run directory */
	int attempt;		       /* 1 for the first submission of a layout in a sweep */
};

/* Set j to an empty job: strings "", array_index -1, exit_code -1, attempt 1, times 0. */
void results_job_init(struct results_job *j);

/* Insert j (j->id is ignored); the new row id goes to *id (may be NULL) and j->id.
 * The sweep row is created (source "spec") when missing. Returns 0, or -1 with err set. */
int results_job_insert(sqlite3 *db, struct results_job *j, int64_t *id, char *err, size_t errlen);

/* Update the job with row id j->id: job_id, array_job_id, array_index, state, reason,
 * failure_class, exit_code and the three times. An empty string or -1/0 (unknown) keeps
 * the stored value. Returns 0, or -1 with err set ("job row 7 not found"). */
int results_job_update(sqlite3 *db, const struct results_job *j, char *err, size_t errlen);

/* Jobs of a sweep ordered by row id. latest_only: only the newest row of each layout.
 * On success returns 0 and sets *jobs (caller frees with free(); NULL when none) and *n.
 * Returns -1 with err set on error. */
int results_jobs_list(sqlite3 *db, const char *sweep, int latest_only, struct results_job **jobs,
		      size_t *n, char *err, size_t errlen);

/* 1 if the layout has a run with status 'ok' in the sweep, 0 if not, -1 on error. */
int results_layout_has_ok_run(sqlite3 *db, const char *sweep, const char *layout_id);

/* 1 if the layout has a job in state PENDING, CONFIGURING, REQUEUED, SUSPENDED or
 * RUNNING in the sweep, 0 if not, -1 on error. */
int results_layout_has_active_job(sqlite3 *db, const char *sweep, const char *layout_id);

/* The attempts of a layout in a sweep so far (0 when it was never submitted) in *n.
 * Returns 0, or -1 with err set: a failed query is not "no attempt". */
int results_job_attempts(sqlite3 *db, const char *sweep, const char *layout_id, int *n, char *err,
			 size_t errlen);

/* The newest job of a layout in a sweep: its state and failure class ("" none). Returns 1
 * when there is one, 0 when none, -1 with err set on a database error. */
int results_job_latest(sqlite3 *db, const char *sweep, const char *layout_id, char *state,
		       size_t slen, char *cls, size_t clen, char *err, size_t errlen);

/* What the run of a job says. */
struct results_job_run {
	int64_t id;		/* runs.id */
	char status[16];	/* ok, failed, running */
	char failure_class[32]; /* "" none */
	int exit_code;		/* -1 unknown */
};

/*
 * The run of job j: the newest run collected from its run directory (log_path under
 * j->run_dir) for its sweep and layout, not tied to another job, that started no earlier
 * than the job was submitted; the run is tied to the job (runs.job_ref = j->id). Returns
 * 1 and *run, 0 when there is none yet, -1 with err set on a database error (the tie
 * included).
 */
int results_job_find_run(sqlite3 *db, const struct results_job *j, struct results_job_run *run,
			 char *err, size_t errlen);

/* The run tied to job row job (runs.job_ref), when there is one: 1 and *run, 0 when none,
 * -1 with err set. */
int results_job_tied_run(sqlite3 *db, int64_t job, struct results_job_run *run, char *err,
			 size_t errlen);

/*
 * Close run run_id, still 'running' although its job ended without the run log's end
 * record (the trainer killed before it could write it): status 'failed', failure class
 * cls, the message, end_time now. A run that is no longer running is left alone. Returns
 * 0, or -1 with err set.
 */
int results_job_run_close(sqlite3 *db, int64_t run_id, const char *cls, const char *message,
			  char *err, size_t errlen);

/* The names of the sweeps that have jobs, sorted: 0 and *names[0..*n) (free each and the
 * array with results_names_free), or -1 with err set. */
int results_job_sweeps(sqlite3 *db, char ***names, size_t *n, char *err, size_t errlen);
void results_names_free(char **names, size_t n);

#endif
