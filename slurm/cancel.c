/*
 * `layoutbench cancel` (slurm/cancel.h).
 */
#include "slurm/cancel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slurm/halving.h"
#include "slurm/track.h"

static const char *const exec_names[3] = {"slurm", "rest", "local"};

/* Cancel the jobs of one sweep that are not final; *total counts them. Returns 0 or 1
 * (reported). */
static int cancel_sweep(struct track_cmd *t, const char *sweep, size_t *total)
{
	struct results_job *jobs = NULL, *sub = NULL;
	char err[1024];
	size_t n = 0;
	int rc = 0;

	/* a running halving would submit its next rung: it stops first */
	if (halving_cancel_sweep(t->db, sweep, err, sizeof(err)) < 0 ||
	    results_jobs_list(t->db, sweep, 1, &jobs, &n, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	sub = calloc(n ? n : 1, sizeof(*sub));
	if (!sub) {
		fprintf(stderr, "error: out of memory\n");
		free(jobs);
		return 1;
	}
	for (int k = 0; k < 3; k++) {
		size_t m = 0;
		for (size_t i = 0; i < n; i++)
			if (!strcmp(jobs[i].executor, exec_names[k]) &&
			    !exec_state_final(jobs[i].state))
				sub[m++] = jobs[i];
		if (m == 0)
			continue;
		err[0] = '\0';
		struct executor *x = track_exec_get(&t->es, exec_names[k], err, sizeof(err));
		if (!x || x->cancel(x, sub, m, err, sizeof(err))) {
			fprintf(stderr, "error: sweep '%s': %s\n", sweep, err);
			rc = 1;
			continue;
		}
		*total += m;
	}
	/* record what the schedulers now say */
	int r = track_refresh(t->db, &t->es, jobs, n, err, sizeof(err));
	if (r == -1)
		fprintf(stderr, "warning: sweep '%s': %s\n", sweep, err);
	if (r == -2) {
		fprintf(stderr, "error: sweep '%s': %s\n", sweep, err);
		rc = 1;
	}
	free(sub);
	free(jobs);
	return rc;
}

static const struct lb_option cancel_opts[] = {LB_OPTION_DB(TRACK_OPT_DB),
					       LB_OPTION_SWEEP(TRACK_OPT_SWEEP), LB_OPT_END};

static int run_cancel(const struct lb_args *a)
{
	struct track_cmd t;
	size_t total = 0;
	int rc;

	if ((rc = track_cmd_open(a, &t)))
		goto out_close;
	for (size_t s = 0; s < t.n_names; s++)
		if (cancel_sweep(&t, t.names[s], &total))
			rc = 1;
	printf("cancelled %zu job(s)\n", total);
out_close:
	track_cmd_close(&t);
	return rc;
}

const struct lb_command cmd_cancel =
    LB_COMMAND("cancel", NULL, 0, 0, 0, cancel_opts, run_cancel, "cancel pending and running jobs");
