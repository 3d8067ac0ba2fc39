/*
 * `layoutbench submit` (slurm/submit.h): plan, skip what is done or in flight, render the
 * job arrays, hand them to an executor, record one jobs row per layout, and with --wait
 * track them to the end (slurm/track.h). resubmit submits through enqueue_layouts too.
 */
#include "slurm/submit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cmdline.h"
#include "common/util.h"
#include "results/jobs.h"
#include "slurm/enqueue.h"
#include "slurm/executor.h"
#include "slurm/halving.h"
#include "slurm/render.h"
#include "slurm/track.h"
#include "sweeps/plan_predict.h"
#include "sweeps/sweep.h"

void submit_opts_init(struct submit_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->alpha = -1;
	o->margin = -1;
}

/* The halving policy's options from submit's (slurm/halving.h). */
static void halving_opts_of(const struct submit_opts *o, const char *exname, const char *runs,
			    struct halving_opts *h)
{
	memset(h, 0, sizeof(*h));
	h->params.eta = o->halving;
	h->params.n_rungs = o->rungs;
	h->params.min_steps = o->min_steps;
	h->params.alpha = o->alpha >= 0 ? o->alpha : HALVING_DEFAULT_ALPHA;
	h->params.margin = o->margin >= 0 ? o->margin : HALVING_DEFAULT_MARGIN;
	h->executor = exname;
	h->runs = runs;
	h->throttle = o->throttle;
	h->max_array = o->max_array;
	h->quiet = o->quiet;
}

static void print_dry_run(const struct sweep_plan *p, const struct slurm_batch *b,
			  const char *executor, size_t n_done, size_t n_active)
{
	double total = 0;
	int have_guess = p->step_time_guess_s > 0;
	const char *unit = !strcmp(p->cluster.device, "cpu") ? "CPU-rank-hours" : "GPU-hours";

	printf("dry run: sweep '%s', executor %s: %zu layout(s) in %zu array(s); %zu already "
	       "done, %zu pending or running (skipped)\n",
	       p->name, executor, b->n_tasks, b->n_arrays, n_done, n_active);
	printf("%-5s %-12s %-7s %-10s %-8s %-14s %s\n", "array", "--array", "layouts", "shape",
	       "time", unit, "job name");
	for (size_t i = 0; i < b->n_arrays; i++) {
		const struct slurm_array *a = &b->arrays[i];
		char shape[32], tl[16], gh[24];
		snprintf(shape, sizeof(shape), "%dx%d%s", a->nodes, a->ntasks_per_node,
			 a->gpus_per_node > 0 ? "gpu" : "cpu");
		if (a->time_limit_min > 0)
			snprintf(tl, sizeof(tl), "%d:%02d:00", a->time_limit_min / 60,
				 a->time_limit_min % 60);
		else
			snprintf(tl, sizeof(tl), "default");
		double h = sweep_gpu_hours(p, a->entry, a->n_tasks);
		if (h >= 0) {
			snprintf(gh, sizeof(gh), "%.3f", h);
			total += h;
		} else {
			snprintf(gh, sizeof(gh), "-");
		}
		printf("%-5s %-12s %-7zu %-10s %-8s %-14s %s\n", a->tag, a->array_spec, a->n_tasks,
		       shape, tl, gh, a->job_name);
	}
	if (have_guess)
		printf("total: %.3f %s (step_time_guess_s %.3g s x steps x ranks)\n", total, unit,
		       p->step_time_guess_s);
	else
		printf("total: unknown %s (the spec gives no step_time_guess_s)\n", unit);
	for (size_t i = 0; i < b->n_arrays; i++) {
		const struct slurm_array *a = &b->arrays[i];
		printf("%s:", a->tag);
		for (size_t t = 0; t < a->n_tasks; t++)
			printf(" %s", p->entries[a->entry[t]].id);
		printf("\n");
	}
}

int submit_sweep(const struct submit_opts *o, char *err, size_t errlen)
{
	struct sweep_plan plan;
	struct exec_opts eo = {0};
	struct exec_set es = {0};
	struct enqueued sub = {0};
	sqlite3 *db = NULL;
	char runs[SLURM_PATH_MAX], spec_name[512];
	const char *exname = o->executor ? o->executor : "slurm";
	const char *dbp = o->db_path ? o->db_path : results_default_db();
	size_t len = 0, n_sel = 0, n_done = 0, n_active = 0;
	size_t *sel = NULL;
	char *text = NULL;
	struct stat sb;
	int rc = -1, lock = -1;

	memset(&plan, 0, sizeof(plan));
	if (!o->spec) {
		snprintf(err, errlen, "no spec given");
		return -1;
	}
	if (strcmp(exname, "slurm") && strcmp(exname, "rest") && strcmp(exname, "local")) {
		snprintf(err, errlen, "unknown executor '%s' (use slurm, rest or local)", exname);
		return -1;
	}
	if (slurm_abs_runs_dir(o->runs_dir, runs, sizeof(runs), err, errlen))
		return -1;
	text = sweep_spec_read(o->spec, spec_name, sizeof(spec_name), &len, err, errlen);
	if (!text)
		return -1;
	if (sweep_plan_text(spec_name, text, len, &plan, err, errlen))
		goto out_free_text;
	eo.rest_url = o->rest_url;
	eo.rest_version = o->rest_version;
	eo.db_path = dbp;
	eo.local_slots = o->local_slots;
	eo.hold = getenv("LB_SUBMIT_HOLD") && !strcmp(getenv("LB_SUBMIT_HOLD"), "1");
	es.o = &eo;

	/* the whole spec is checked before anything is made: its job scripts render (names,
	 * paths, cluster settings), so a spec the renderer refuses leaves no database */
	if (!o->dry_run) {
		struct slurm_render_opts ro = {0};
		struct slurm_batch b;
		char train[SLURM_PATH_MAX];

		slurm_default_train_path(train, sizeof(train));
		ro.runs_dir = runs;
		ro.train_path = train;
		ro.throttle = o->throttle;
		ro.max_array = o->max_array;
		if (slurm_render_batch(&plan, NULL, 0, &ro, &b, err, errlen))
			goto out_close;
		slurm_batch_free(&b);
	}
	/* an executor that cannot start (no Slurm configuration, no token) says so before
	 * any database is made */
	if (!o->dry_run && strcmp(exname, "local") && !track_exec_get(&es, exname, err, errlen))
		goto out_close;
	if (!o->dry_run || stat(dbp, &sb) == 0) {
		if (results_open(dbp, &db, err, errlen))
			goto out_close;
	}
	sel = calloc(plan.n_entries ? plan.n_entries : 1, sizeof(*sel));
	if (!sel) {
		snprintf(err, errlen, "out of memory");
		goto out_close;
	}
	/* what is in flight is decided, and what is submitted recorded, under the lock */
	if (!o->dry_run && (lock = enqueue_lock(dbp, o->quiet, err, errlen)) < 0)
		goto out_close;
	for (size_t i = 0; i < plan.n_entries; i++) {
		const struct plan_entry *e = &plan.entries[i];
		char st[24], cls[24];
		if (e->status != PLAN_OK)
			continue;
		if (db && !o->force && !o->halving) {
			if (results_layout_has_ok_run(db, plan.name, e->id) == 1) {
				n_done++;
				continue;
			}
			int has = results_job_latest(db, plan.name, e->id, st, sizeof(st), cls,
						     sizeof(cls), err, errlen);
			if (has < 0)
				goto out_close;
			if (has) {
				if (!exec_state_final(st)) {
					n_active++;
					continue;
				}
				if (!strcmp(st, "COMPLETED") && !*cls) {
					n_done++;
					continue;
				}
			}
		}
		sel[n_sel++] = i;
	}
	if (o->top && n_sel) {
		char info[512];

		if (plan_select_top(&plan, o->machine, o->top, sel, &n_sel, info, sizeof(info), err,
				    errlen))
			goto out_close;
		printf("%s\n", info);
	}

	if (o->dry_run && o->halving) { /* the halving's schedule against the full grid */
		struct halving_opts ho;
		halving_opts_of(o, exname, runs, &ho);
		rc = halving_dry_run(&plan, sel, n_sel, &ho, err, errlen);
		goto out_close;
	}
	if (o->dry_run) {
		struct slurm_render_opts ro = {0};
		struct slurm_batch b;
		char train[SLURM_PATH_MAX];
		int max_array = o->max_array;
		if (max_array <= 0 && !strcmp(exname, "slurm")) {
			struct executor *x = NULL;
			char e2[1024];
			if (executor_open("slurm", &eo, &x, e2, sizeof(e2)) == 0) {
				max_array = x->max_array;
				executor_close(x);
			} else { /* a dry run needs no cluster */
				fprintf(stderr,
					"note: the cluster's MaxArraySize is unknown (%s); arrays "
					"split at Slurm's default, %d (--max-array N sets it)\n",
					e2, SLURM_DEFAULT_MAX_ARRAY);
			}
		}
		slurm_default_train_path(train, sizeof(train));
		ro.runs_dir = runs;
		ro.train_path = train;
		ro.throttle = o->throttle;
		ro.max_array = max_array;
		if (slurm_render_batch(&plan, sel, n_sel, &ro, &b, err, errlen))
			goto out_close;
		print_dry_run(&plan, &b, exname, n_done, n_active);
		slurm_batch_free(&b);
		rc = 0;
		goto out_close;
	}

	if (results_upsert_sweep(db, plan.name, "spec", strcmp(o->spec, "-") ? o->spec : NULL, text,
				 err, errlen))
		goto out_close;
	if (o->halving) { /* the submission policy takes the candidates from here */
		struct halving_opts ho;
		halving_opts_of(o, exname, runs, &ho);
		rc = halving_submit(db, &es, &plan, text, sel, n_sel, &ho, o->wait, o->force, err,
				    errlen);
		if (rc > 0 && *err)
			fprintf(stderr, "error: %s\n", err);
		goto out_close;
	}
	if (!o->force && halving_refuse_plain(db, plan.name, err, errlen))
		goto out_close;
	if (n_sel == 0) {
		printf("sweep '%s': nothing to submit (%zu layout(s) done, %zu pending or running; "
		       "--force submits again)\n",
		       plan.name, n_done, n_active);
		rc = 0;
		goto out_close;
	}
	struct executor *x = track_exec_get(&es, exname, err, errlen);
	if (!x)
		goto out_close;
	if (enqueue_layouts(db, x, &plan, sel, n_sel, runs, o->throttle, o->max_array, o->quiet,
			    &sub, err, errlen)) {
		rc = sub.n ? 1 : -1;
		if (sub.n)
			fprintf(stderr, "error: %s\n", err);
		goto out_close;
	}
	enqueue_unlock(lock); /* the jobs are recorded: in flight for the next submit */
	lock = -1;
	printf("sweep '%s': submitted %zu layout(s) in %zu array(s) through %s; skipped %zu "
	       "done, %zu pending or running; runs in %s/%s\n",
	       plan.name, sub.n, sub.n_arrays, x->name, n_done, n_active, runs, plan.name);
	fflush(stdout);
	rc = 0;
	if (o->wait) {
		struct track_counts c;
		rc = track_wait(db, &es, plan.name, sub.rows, sub.n, o->quiet, &c, err, errlen);
		if (rc < 0)
			goto out_close;
		printf("sweep '%s': %zu completed, %zu failed\n", plan.name, c.done, c.failed);
	}
out_close:
	enqueue_unlock(lock);
	track_exec_close(&es);
	free(sub.rows);
	free(sel);
	results_close(db);
	sweep_plan_free(&plan);
out_free_text:
	free(text);
	return rc;
}

#define STR_(x) #x
#define STR(x)	STR_(x)

/* The ids of its options (struct lb_option.id). */
enum {
	OPT_EXECUTOR,
	OPT_DB,
	OPT_RUNS,
	OPT_DRY_RUN,
	OPT_THROTTLE,
	OPT_MAX_ARRAY,
	OPT_WAIT,
	OPT_FORCE,
	OPT_TOP,
	OPT_MACHINE,
	OPT_QUIET,
	OPT_REST_URL,
	OPT_REST_VERSION,
	OPT_SLOTS,
	OPT_HALVING,
	OPT_RUNGS,
	OPT_MIN_STEPS,
	OPT_ALPHA,
	OPT_MARGIN,
	OPT_LOCAL_WORKER
};

static const struct lb_option submit_opts[] = {
    LB_CHOICE(OPT_EXECUTOR, "executor", NULL, EXECUTOR_CHOICES, "slurm", 0,
	      "where the jobs run: libslurm, slurmrestd, or local processes without Slurm"),
    LB_OPTION_DB(OPT_DB),
    LB_TEXT(OPT_RUNS, "runs", "DIR", "runs",
	    "the runs folder (default ./runs): a layout runs in DIR/<sweep>/<layout id>"),
    LB_SWITCH(OPT_DRY_RUN, "dry-run", 0,
	      "print the arrays that would be submitted, submit nothing"),
    LB_OPTION_THROTTLE(OPT_THROTTLE),
    LB_WHOLE(OPT_MAX_ARRAY, "max-array", "N", NULL, 0, 1000000,
	     "at most N tasks per array (0: the cluster's MaxArraySize)"),
    LB_OPTION_WAIT(OPT_WAIT),
    LB_SWITCH(OPT_FORCE, "force", 0, "submit layouts already completed or in flight again"),
    LB_WHOLE(OPT_TOP, "top", "K", NULL, 1, 100000000,
	     "only the K layouts with the best predicted MFU among those that fit (and are not "
	     "done)"),
    LB_OPTION_MACHINE(OPT_MACHINE),
    LB_SWITCH(OPT_QUIET, "quiet", 0, "no progress lines"),
    LB_TEXT(OPT_REST_URL, "rest-url", "URL", NULL,
	    "slurmrestd: http://host:port or unix:/path (default $SLURMRESTD_URL)"),
    LB_TEXT(OPT_REST_VERSION, "rest-version", "vX", NULL,
	    "slurmrestd: the API version (default the newest the server offers)"),
    LB_WHOLE(OPT_SLOTS, "slots", "N", NULL, 1, 1000000,
	     "local: ranks that run at once (default 1: timed runs do not share the machine)"),
    LB_WHOLE(OPT_HALVING, "halving", "ETA", NULL, 2, 1000,
	     "successive halving: rung 0 runs every layout for few steps, each rung keeps the "
	     "fastest 1/ETA of each group and those within noise of the cut, the last runs the "
	     "spec's steps (docs/halving.md)"),
    LB_WHOLE(OPT_RUNGS, "rungs", "R", NULL, 2, 32,
	     "halving: rungs, the last at the spec's steps (default: about one layout per group "
	     "on the last)"),
    LB_WHOLE(OPT_MIN_STEPS, "min-steps", "S", NULL, 2, 1000000,
	     "halving: rung 0's steps, warm-up included (default warm-up + 4)"),
    LB_NUMBER(OPT_ALPHA, "alpha", "P", STR(HALVING_DEFAULT_ALPHA), 1e-9, 0.5,
	      "halving: the rank test's level: a layout slower than the cut is dropped when "
	      "p < P"),
    LB_NUMBER(OPT_MARGIN, "margin", "F", STR(HALVING_DEFAULT_MARGIN), 0, 10,
	      "halving: a relative slowdown counted as noise (two runs of one layout differ by "
	      "about 1% on an H200)"),
    LB_SWITCH(OPT_LOCAL_WORKER, "local-worker", LB_OPT_HIDDEN, "the local executor's worker"),
    LB_OPT_END,
};

/* A usage error of submit: message, then the usage line. Returns 2. */
static int submit_usage_error(const struct lb_args *a, const char *msg)
{
	fprintf(stderr, "error: %s\n", msg);
	lb_usage(a->cmd);
	return 2;
}

static int run_submit(const struct lb_args *a)
{
	struct submit_opts o;
	char err[1024];
	int rc;

	if (a->given[OPT_LOCAL_WORKER]) /* internal: the local executor's detached worker */
		return exec_local_worker(a->str[OPT_DB] ? a->str[OPT_DB] : results_default_db(),
					 (int)a->num[OPT_SLOTS]);
	if (a->n_operands != 1)
		return submit_usage_error(a, "submit needs SPEC");
	submit_opts_init(&o);
	o.spec = a->operands[0];
	o.executor = a->str[OPT_EXECUTOR];
	o.db_path = a->str[OPT_DB];
	o.runs_dir = a->str[OPT_RUNS];
	o.rest_url = a->str[OPT_REST_URL];
	o.rest_version = a->str[OPT_REST_VERSION];
	o.throttle = (int)a->num[OPT_THROTTLE];
	o.max_array = (int)a->num[OPT_MAX_ARRAY];
	o.local_slots = (int)a->num[OPT_SLOTS];
	o.dry_run = a->given[OPT_DRY_RUN] > 0;
	o.wait = a->given[OPT_WAIT] > 0;
	o.force = a->given[OPT_FORCE] > 0;
	o.quiet = a->given[OPT_QUIET] > 0;
	o.top = a->given[OPT_TOP] ? (size_t)a->num[OPT_TOP] : 0;
	o.machine = a->str[OPT_MACHINE];
	if (o.machine && !o.top)
		return submit_usage_error(a,
					  "--machine predicts for --top K; give --top K as well");
	o.halving = (int)a->num[OPT_HALVING];
	o.rungs = (int)a->num[OPT_RUNGS];
	o.min_steps = (int)a->num[OPT_MIN_STEPS];
	if (!o.halving && (a->given[OPT_RUNGS] || a->given[OPT_MIN_STEPS] || a->given[OPT_ALPHA] ||
			   a->given[OPT_MARGIN]))
		return submit_usage_error(a, "--rungs, --min-steps, --alpha and --margin set up a "
					     "successive halving: give --halving ETA too");
	o.alpha = a->dbl[OPT_ALPHA]; /* the table's range and default */
	o.margin = a->dbl[OPT_MARGIN];
	rc = submit_sweep(&o, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "error: %s\n", err);
		rc = 1;
	}
	return rc;
}

const struct lb_command cmd_submit =
    LB_COMMAND("submit", "SPEC", 0, 1, 1, submit_opts, run_submit,
	       "submit the runnable layouts as job arrays; skips layouts already completed or in "
	       "flight unless --force");

/* Names of the sweeps that have jobs (or just `only`). */
