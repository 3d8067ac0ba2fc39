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

int cmd_submit(int argc, char **argv)
{
	struct submit_opts o;
	struct lb_args a;
	char err[1024];
	int rc;

	if ((rc = lb_args_parse("submit", argc, argv, &a)))
		goto out_release_args;
	if (a.given[LB_OPT_LOCAL_WORKER]) { /* internal: the local executor's detached worker */
		rc = exec_local_worker(a.str[LB_OPT_DB] ? a.str[LB_OPT_DB] : results_default_db(),
				       (int)a.num[LB_OPT_SLOTS]);
		goto out_release_args;
	}
	if (a.n_operands != 1) {
		fprintf(stderr, "error: submit needs SPEC\n");
		lb_usage("submit");
		rc = 2;
		goto out_release_args;
	}
	submit_opts_init(&o);
	o.spec = a.operands[0];
	o.executor = a.str[LB_OPT_EXECUTOR];
	o.db_path = a.str[LB_OPT_DB];
	o.runs_dir = a.str[LB_OPT_RUNS];
	o.rest_url = a.str[LB_OPT_REST_URL];
	o.rest_version = a.str[LB_OPT_REST_VERSION];
	o.throttle = (int)a.num[LB_OPT_THROTTLE];
	o.max_array = (int)a.num[LB_OPT_MAX_ARRAY];
	o.local_slots = (int)a.num[LB_OPT_SLOTS];
	o.dry_run = a.given[LB_OPT_DRY_RUN] > 0;
	o.wait = a.given[LB_OPT_WAIT] > 0;
	o.force = a.given[LB_OPT_FORCE] > 0;
	o.quiet = a.given[LB_OPT_QUIET] > 0;
	o.top = a.given[LB_OPT_TOP] ? (size_t)a.num[LB_OPT_TOP] : 0;
	o.machine = a.str[LB_OPT_MACHINE];
	if (o.machine && !o.top) {
		fprintf(stderr, "error: --machine predicts for --top K; give --top K as well\n");
		lb_usage("submit");
		rc = 2;
		goto out_release_args;
	}
	o.halving = (int)a.num[LB_OPT_HALVING];
	o.rungs = (int)a.num[LB_OPT_RUNGS];
	o.min_steps = (int)a.num[LB_OPT_MIN_STEPS];
	if (!o.halving && (a.given[LB_OPT_RUNGS] || a.given[LB_OPT_MIN_STEPS] ||
			   a.given[LB_OPT_ALPHA] || a.given[LB_OPT_MARGIN])) {
		fprintf(stderr, "error: --rungs, --min-steps, --alpha and --margin set up a "
				"successive halving: give --halving ETA too\n");
		lb_usage("submit");
		rc = 2;
		goto out_release_args;
	}
	if (lb_parse_double(a.str[LB_OPT_ALPHA], 1e-9, 0.5, &o.alpha)) {
		fprintf(stderr,
			"error: option '--alpha' expects a level above 0 and at most 0.5, "
			"got '%s'\n",
			a.str[LB_OPT_ALPHA]);
		lb_usage("submit");
		rc = 2;
		goto out_release_args;
	}
	if (lb_parse_double(a.str[LB_OPT_MARGIN], 0, 10, &o.margin)) {
		fprintf(stderr,
			"error: option '--margin' expects a fraction from 0 to 10 (0.02: "
			"2%%), got '%s'\n",
			a.str[LB_OPT_MARGIN]);
		lb_usage("submit");
		rc = 2;
		goto out_release_args;
	}
	rc = submit_sweep(&o, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "error: %s\n", err);
		rc = 1;
	}
out_release_args:
	lb_args_release(&a);
	return rc;
}

/* Names of the sweeps that have jobs (or just `only`). */
