/*
 * Tracking submitted jobs, shared by submit --wait, status, resubmit and cancel: the
 * executors a sweep's jobs ran on, opened once each (struct exec_set); one batched poll per
 * executor that writes the jobs' states, collects the run directories of finished jobs and
 * classes each failure (slurm/classify.h); waiting until a set of jobs ended; and the
 * preamble of the jobs commands (their flags, the database, the sweeps). Every database
 * or executor error is returned, never dropped: a job whose state or class could not be
 * written is reported, not left to look settled.
 */
#ifndef LB_SLURM_TRACK_H
#define LB_SLURM_TRACK_H

#include <stddef.h>
#include <stdint.h>

#include "common/cmdline.h"
#include "results/jobs.h"
#include "slurm/exec.h"

/* The executors of one command, opened on first use. A test may put its own executor in
 * x[] before the first use (track_exec_slot names the slot). */
struct exec_set {
	const struct exec_opts *o;
	struct executor *x[3]; /* slurm, rest, local */
	int failed[3];	       /* 1: opening it failed (the error was reported once) */
};

/* The slot of an executor name in exec_set.x (slurm 0, rest 1, local 2). */
int track_exec_slot(const char *name);

/* The executor of that name, opened on first use; NULL with err set when it cannot be. */
struct executor *track_exec_get(struct exec_set *s, const char *name, char *err, size_t errlen);
void track_exec_close(struct exec_set *s);

/*
 * Poll the jobs among jobs[0..n) that are not final (one query per executor), write their
 * states, settle the final ones: collect the run directory, tie the run to the job, class
 * the failure. jobs[] is updated in place. Returns 0; -1 with err set when an executor
 * could not be asked (it may answer the next time); -2 with err set when the database
 * failed (a state, a class or a run's tie not written or not read). The other jobs are
 * still handled; err holds the first error.
 */
int track_refresh(sqlite3 *db, struct exec_set *es, struct results_job *jobs, size_t n, char *err,
		  size_t errlen);

struct track_counts {
	size_t done, running, pending, failed;
};

/* Counts for the progress line; a final job not yet settled (its run log may still be on
 * its way) counts as running. Returns 0, or -1 with err set. */
int track_count(sqlite3 *db, const struct results_job *jobs, size_t n, struct track_counts *c,
		char *err, size_t errlen);

/* The job rows with ids rows[0..n) of a sweep, their latest state: 0 and *out (caller
 * frees), or -1 with err set. */
int track_load_rows(sqlite3 *db, const char *sweep, const int64_t *rows, size_t n,
		    struct results_job **out, size_t *nout, char *err, size_t errlen);

/* Block until none of the rows is pending or running, refreshing once a second (progress
 * on stderr unless quiet), and say the outcome; *c gets the last counts. Returns 0 when
 * all completed, 1 when one failed, -1 with err set when the database failed. */
int track_wait(sqlite3 *db, struct exec_set *es, const char *sweep, const int64_t *rows, size_t n,
	       int quiet, struct track_counts *c, char *err, size_t errlen);

/* The preamble of status, resubmit and cancel: their parsed flags, the database (opened
 * for writing) and the sweeps to work on (--sweep, checked, or every sweep with jobs).
 * Their option tables (slurm/status.c, resubmit.c, cancel.c) give their options these ids. */
enum track_opt {
	TRACK_OPT_DB,
	TRACK_OPT_SWEEP,
	TRACK_OPT_EXECUTOR, /* resubmit */
	TRACK_OPT_CLASS,    /* resubmit */
	TRACK_OPT_WAIT,
	TRACK_OPT_FORCE,    /* resubmit */
	TRACK_OPT_THROTTLE, /* resubmit */
};

struct track_cmd {
	const char *db_path;	    /* this and the strings below point into the parsed line */
	const char *sweep;	    /* --sweep or NULL */
	const char *executor;	    /* resubmit --executor or NULL */
	const char *const *classes; /* resubmit --class values */
	int n_classes;
	int wait, force, throttle; /* resubmit */
	sqlite3 *db;
	struct exec_opts eo;
	struct exec_set es;
	char **names; /* the sweeps */
	size_t n_names;
};

/*
 * Take the parsed line a of status, resubmit or cancel (it outlives t), open the
 * database, check --sweep and list the sweeps. Returns 0, or 1 after an error (reported on
 * stderr); either way release t with track_cmd_close.
 */
int track_cmd_open(const struct lb_args *a, struct track_cmd *t);
void track_cmd_close(struct track_cmd *t);

#endif
