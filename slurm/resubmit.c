/*
 * `layoutbench resubmit` (slurm/resubmit.h).
 */
#include "slurm/resubmit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slurm/classify.h"
#include "slurm/enqueue.h"
#include "slurm/executor.h"
#include "slurm/track.h"

/* 1 if a job's failure class is one resubmit was asked for (any, without --class). */
static int class_selected(const struct track_cmd *t, const char *cls)
{
	if (!*cls)
		return 0;
	if (t->n_classes == 0)
		return 1;
	for (int i = 0; i < t->n_classes; i++)
		if (!strcmp(t->classes[i], cls))
			return 1;
	return 0;
}

/* The plan of a sweep from the spec text stored at submission. */
static int plan_of(sqlite3 *db, const char *sweep, struct sweep_plan *p, char *err, size_t errlen)
{
	char *text = NULL;
	int rc = results_sweep_spec_text(db, sweep, &text, err, errlen);

	if (rc > 0)
		snprintf(err, errlen,
			 "no spec stored to plan it again (it was not submitted from a spec; "
			 "submit it with 'layoutbench submit SPEC' first)");
	if (rc)
		return -1;
	rc = sweep_plan_text(sweep, text, strlen(text), p, err, errlen);
	free(text);
	return rc;
}

/* runs folder of a job: its run dir minus "/<sweep>/<layout id>". */
static void runs_of(const struct results_job *j, char *buf, size_t len)
{
	snprintf(buf, len, "%s", j->run_dir);
	for (int k = 0; k < 2; k++) {
		char *s = strrchr(buf, '/');
		if (s && s != buf)
			*s = '\0';
	}
}

/* Resubmit the failed layouts of one sweep. Returns 0, or 1 (reported). */
static int resubmit_sweep(struct track_cmd *t, const char *sweep)
{
	struct results_job *jobs = NULL;
	struct sweep_plan plan;
	struct enqueued sub = {0};
	const char *exname = t->executor;
	char err[1024], runs[SLURM_PATH_MAX] = "";
	size_t n = 0, n_sel = 0, n_failed = 0, n_oom = 0, *sel = NULL;
	int rc = 0, r, lock;

	memset(&plan, 0, sizeof(plan));
	/* which layouts failed is decided, and their new jobs recorded, under submit's lock:
	 * two resubmits at once do not both submit a layout again */
	if ((lock = enqueue_lock(t->db_path, 0, err, sizeof(err))) < 0)
		goto out_err;
	if (results_jobs_list(t->db, sweep, 1, &jobs, &n, err, sizeof(err)))
		goto out_err;
	r = track_refresh(t->db, &t->es, jobs, n, err, sizeof(err));
	if (r == -2)
		goto out_err;
	if (r == -1)
		fprintf(stderr, "warning: sweep '%s': %s\n", sweep, err);
	for (size_t i = 0; i < n; i++)
		if (exec_state_final(jobs[i].state) && class_selected(t, jobs[i].failure_class))
			n_failed++;
	if (n_failed == 0) { /* nothing to plan again (a sweep without jobs has no spec) */
		printf("sweep '%s': nothing to resubmit\n", sweep);
		goto out_free;
	}
	if (plan_of(t->db, sweep, &plan, err, sizeof(err)))
		goto out_err;
	sel = calloc(n ? n : 1, sizeof(*sel));
	if (!sel) {
		snprintf(err, sizeof(err), "out of memory");
		goto out_err;
	}
	for (size_t i = 0; i < n; i++) {
		if (!exec_state_final(jobs[i].state) || !class_selected(t, jobs[i].failure_class))
			continue;
		if (!t->force && !strcmp(jobs[i].failure_class, "oom")) {
			n_oom++; /* the same layout on the same GPUs runs out of memory again */
			continue;
		}
		for (size_t e = 0; e < plan.n_entries; e++)
			if (plan.entries[e].status == PLAN_OK &&
			    !strcmp(plan.entries[e].id, jobs[i].layout_id)) {
				sel[n_sel++] = e;
				if (!exname)
					exname = jobs[i].executor;
				if (!runs[0])
					runs_of(&jobs[i], runs, sizeof(runs));
				break;
			}
	}
	if (n_oom)
		fprintf(stderr,
			"warning: sweep '%s': %zu layout(s) ran out of memory, and a new attempt "
			"of the same layout does the same; not resubmitted (--force resubmits "
			"them)\n",
			sweep, n_oom);
	if (n_sel == 0) {
		printf("sweep '%s': nothing to resubmit\n", sweep);
		goto out_free;
	}
	err[0] = '\0';
	struct executor *x = track_exec_get(&t->es, exname, err, sizeof(err));
	if (!x)
		goto out_err;
	if (enqueue_layouts(t->db, x, &plan, sel, n_sel, runs, t->throttle, 0, 0, &sub, err,
			    sizeof(err)))
		goto out_err;
	enqueue_unlock(lock);
	lock = -1;
	printf("sweep '%s': resubmitted %zu layout(s) in %zu array(s) through %s\n", sweep, sub.n,
	       sub.n_arrays, x->name);
	fflush(stdout);
	if (t->wait) {
		struct track_counts c;
		r = track_wait(t->db, &t->es, sweep, sub.rows, sub.n, 0, &c, err, sizeof(err));
		if (r < 0)
			goto out_err;
		rc = r > 0;
	}
	goto out_free;
out_err:
	fprintf(stderr, "error: sweep '%s': %s\n", sweep, err);
	rc = 1;
out_free:
	enqueue_unlock(lock);
	free(sub.rows);
	free(sel);
	free(jobs);
	sweep_plan_free(&plan);
	return rc;
}

static const struct lb_option resubmit_opts[] = {
    LB_OPTION_DB(TRACK_OPT_DB),
    LB_OPTION_SWEEP(TRACK_OPT_SWEEP),
    LB_CHOICE(TRACK_OPT_CLASS, "class", "CLASS", SLURM_CLASS_CHOICES, NULL, LB_OPT_MANY,
	      "only failures of these classes (default every failed layout)"),
    LB_CHOICE(TRACK_OPT_EXECUTOR, "executor", "E", EXECUTOR_CHOICES, NULL, 0,
	      "where the jobs run (default where they ran before)"),
    LB_OPTION_THROTTLE(TRACK_OPT_THROTTLE),
    LB_OPTION_WAIT(TRACK_OPT_WAIT),
    LB_SWITCH(TRACK_OPT_FORCE, "force", 0,
	      "also resubmit out-of-memory failures, which fail the same way again"),
    LB_OPT_END,
};

static int run_resubmit(const struct lb_args *a)
{
	struct track_cmd t;
	int rc;

	if ((rc = track_cmd_open(a, &t)))
		goto out_close;
	if (t.n_names == 0)
		printf("no jobs in '%s'\n", t.db_path);
	for (size_t s = 0; s < t.n_names; s++)
		if (resubmit_sweep(&t, t.names[s]))
			rc = 1;
out_close:
	track_cmd_close(&t);
	return rc;
}

const struct lb_command cmd_resubmit =
    LB_COMMAND("resubmit", NULL, 0, 0, 0, resubmit_opts, run_resubmit,
	       "submit failed layouts again, as a new attempt");
