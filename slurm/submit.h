/*
 * Submitting a sweep: plan (from a spec file, '-' for stdin, or the name of a spec
 * embedded in the binary), skip layouts already done or in flight, render the job arrays,
 * hand them to an executor (libslurm, slurmrestd, or local processes), record one jobs
 * row per layout, and optionally wait until the sweep ends, collecting runs as they
 * finish. Also `status`, `resubmit` and `cancel`. The subcommands (cmd_submit,
 * cmd_status, cmd_resubmit, cmd_cancel) are thin shells over the functions below;
 * `layoutbench quickstart` calls submit_sweep directly.
 */
#ifndef LB_SLURM_SUBMIT_H
#define LB_SLURM_SUBMIT_H

#include <stddef.h>

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
	int local_slots; /* local executor: ranks at once; 0 = GPUs or CPU cores */
};

/* Set o to the defaults above (everything 0/NULL). */
void submit_opts_init(struct submit_opts *o);

/*
 * Submit a sweep as `layoutbench submit` does: prints a summary to stdout (the dry-run
 * table with --dry-run), progress to stderr. Returns 0 when everything was submitted (and
 * with wait, every job ended COMPLETED); 1 when a job failed or could not be submitted;
 * -1 on an error before submitting (err set: a bad spec, no database, no executor).
 */
int submit_sweep(const struct submit_opts *o, char *err, size_t errlen);

/* The subcommands (options: common/cmdline.c); argv[0] is the name; exit status. */
int cmd_submit(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_resubmit(int argc, char **argv);
int cmd_cancel(int argc, char **argv);

#endif
