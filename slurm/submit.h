/*
 * Submitting a sweep: plan (from a spec file, '-' for stdin, or the name of a spec
 * embedded in the binary), skip layouts already done or in flight, render the job arrays,
 * hand them to an executor (libslurm, slurmrestd, or local processes), record one jobs
 * row per layout, and optionally wait until the sweep ends, collecting runs as they
 * finish (slurm/track.h). `layoutbench submit` (cmd_submit) is a thin shell over
 * submit_sweep, which `layoutbench quickstart` calls too; `resubmit` (slurm/resubmit.c)
 * submits through submit_layouts. status and cancel: slurm/status.c, slurm/cancel.c.
 */
#ifndef LB_SLURM_SUBMIT_H
#define LB_SLURM_SUBMIT_H

#include <stddef.h>
#include <stdint.h>

#include "results/db.h"
#include "slurm/exec.h"
#include "sweeps/sweep.h"

struct submit_opts {
	const char *spec;	  /* spec file, "-" (stdin) or an embedded name ("quickstart") */
	const char *executor;	  /* "slurm", "rest" or "local"; NULL = "slurm" */
	const char *db_path;	  /* NULL = results_default_db() */
	const char *runs_dir;	  /* NULL = "./runs"; a layout runs in <runs>/<sweep>/<layout id> */
	const char *rest_url;	  /* NULL = $SLURMRESTD_URL */
	const char *rest_version; /* "v0.0.38"...; NULL = newest the server offers */
	int throttle;		  /* %K tasks of one array at once; 0 = none */
	int max_array;	 /* tasks per array; 0 = the cluster's MaxArraySize (1001 for rest) */
	int dry_run;	 /* 1: print what would be submitted, submit nothing */
	int wait;	 /* 1: block until every job ended, collecting runs */
	int force;	 /* 1: submit layouts already done or in flight again */
	int quiet;	 /* 1: no progress lines */
	int local_slots; /* local executor: ranks at once; 0 = 1 (one timed job at a time) */
	size_t top;	      /* > 0: only the top layouts by predicted MFU (plan_select_top) */
	const char *machine;  /* the machine predicted on (NULL: the one shipped for the GPU) */
	/* successive halving (slurm/halving.h): halving = eta, 0 = submit every layout */
	int halving, rungs, min_steps; /* rungs, min_steps: 0 = the policy's defaults */
	double alpha, margin;	       /* the rank test's level and margin; < 0 = defaults */
};

/* Set o to the defaults above (everything 0/NULL, alpha and margin -1). */
void submit_opts_init(struct submit_opts *o);

/*
 * Submit a sweep as `layoutbench submit` does: prints a summary to stdout (the dry-run
 * table with --dry-run), progress to stderr. Returns 0 when everything was submitted (and
 * with wait, every job ended COMPLETED); 1 when a job failed or could not be submitted;
 * -1 on an error before submitting (err set: a bad spec, no database, no executor).
 */
int submit_sweep(const struct submit_opts *o, char *err, size_t errlen);

/* What submit_layouts submitted. */
struct submitted {
	int64_t *rows; /* jobs.id of every task submitted (malloc'd; the caller frees) */
	size_t n;
	size_t n_arrays;
};

/*
 * Render plan entries sel[0..n_sel) of p into arrays (throttle and max_array as in
 * submit_opts; max_array 0: the executor's), write the scripts under
 * <runs>/<sweep>/scripts, submit them through x and record the layouts and one jobs row
 * per task, each the layout's next attempt. Returns 0, or -1 with err set (arrays
 * submitted before the failure stay recorded in out). Free out->rows either way.
 */
int submit_layouts(sqlite3 *db, struct executor *x, const struct sweep_plan *p, const size_t *sel,
		   size_t n_sel, const char *runs, int throttle, int max_array, int quiet,
		   struct submitted *out, char *err, size_t errlen);

/*
 * The lock under which submissions to one database take turns: deciding what is done or
 * in flight and recording the jobs of what was submitted happen while it is held, so two
 * submits (or resubmits) started at once never both submit a layout, whatever the
 * executor. A file beside the database, <db>.submit.lock, locked with flock(2) (released
 * when the process ends, however it ends). Waits for another holder, saying so once on
 * stderr unless quiet. Returns the lock's descriptor (>= 0), or -1 with err set.
 */
int submit_lock(const char *db_path, int quiet, char *err, size_t errlen);
/* Release a lock from submit_lock (-1 is fine). */
void submit_unlock(int fd);

/* `layoutbench submit` (options: common/cmdline.c); argv[0] is the name; exit status. */
int cmd_submit(int argc, char **argv);

#endif
