/*
 * Submitting a sweep: plan (from a spec file, '-' for stdin, or the name of a spec
 * embedded in the binary), skip layouts already done or in flight, render the job arrays,
 * hand them to an executor (libslurm, slurmrestd, or local processes), record one jobs
 * row per layout, and optionally wait until the sweep ends, collecting runs as they
 * finish (slurm/track.h). `layoutbench submit` (cmd_submit) is a thin shell over
 * submit_sweep, which `layoutbench quickstart` calls too; `resubmit` (slurm/resubmit.c)
 * submits through enqueue_layouts. status and cancel: slurm/status.c, slurm/cancel.c.
 */
#ifndef LB_SLURM_SUBMIT_H
#define LB_SLURM_SUBMIT_H

#include "common/cmdline.h"

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
	int max_array;	     /* tasks per array; 0 = the cluster's MaxArraySize (1001 for rest) */
	int dry_run;	     /* 1: print what would be submitted, submit nothing */
	int wait;	     /* 1: block until every job ended, collecting runs */
	int force;	     /* 1: submit layouts already done or in flight again */
	int quiet;	     /* 1: no progress lines */
	int local_slots;     /* local executor: ranks at once; 0 = 1 (one timed job at a time) */
	size_t top;	     /* > 0: only the top layouts by predicted MFU (plan_select_top) */
	const char *machine; /* the machine predicted on (NULL: the one shipped for the GPU) */
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

/* `layoutbench submit`, its options beside it in slurm/submit.c. */
extern const struct lb_command cmd_submit;

#endif
