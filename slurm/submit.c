/*
 * `layoutbench submit` (slurm/submit.h): plan, skip what is done or in flight, render the
 * job arrays, hand them to an executor, record one jobs row per layout, and with --wait
 * track them to the end (slurm/track.h). resubmit submits through submit_layouts too.
 */
#include "slurm/submit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cmdline.h"
#include "common/util.h"
#include "results/jobs.h"
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

int submit_lock(const char *db_path, int quiet, char *err, size_t errlen)
{
	char path[SLURM_PATH_MAX + 16];
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s.submit.lock", db_path) >= sizeof(path)) {
		snprintf(err, errlen, "'%s': the database path is too long", db_path);
		return -1;
	}
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0) {
		snprintf(err, errlen,
			 "cannot open the submit lock '%s': %s (it needs write access to the "
			 "database's folder)",
			 path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return fd;
	if (!quiet)
		fprintf(stderr, "waiting for another submit to '%s' to record its jobs\n", db_path);
	while (flock(fd, LOCK_EX)) {
		if (errno == EINTR)
			continue;
		snprintf(err, errlen, "cannot lock '%s': %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

void submit_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* the lock goes with the descriptor */
}

int submit_layouts(sqlite3 *db, struct executor *x, const struct sweep_plan *p, const size_t *sel,
		   size_t n_sel, const char *runs, int throttle, int max_array, int quiet,
		   struct submitted *out, char *err, size_t errlen)
{
	struct slurm_render_opts ro = {0};
	struct slurm_batch b;
	char train[SLURM_PATH_MAX], dir[SLURM_PATH_MAX + 80], cwd[SLURM_PATH_MAX];
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	slurm_default_train_path(train, sizeof(train));
	ro.runs_dir = runs;
	ro.train_path = train;
	ro.throttle = throttle;
	ro.max_array = max_array > 0 ? max_array : x->max_array;
	if (slurm_render_batch(p, sel, n_sel, &ro, &b, err, errlen))
		return -1;
	out->rows = calloc(b.n_tasks ? b.n_tasks : 1, sizeof(*out->rows));
	if (!out->rows) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	if (!getcwd(cwd, sizeof(cwd)))
		snprintf(cwd, sizeof(cwd), "/");
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(dir, sizeof(dir), "%s/%s/logs", runs, p->name);
	if (lb_mkdir_p(dir, err, errlen))
		goto out_free;
	snprintf(dir, sizeof(dir), "%s/%s/scripts", runs, p->name);
	if (lb_mkdir_p(dir, err, errlen))
		goto out_free;
	if (results_begin(db, err, errlen))
		goto out_free;
	for (size_t i = 0; i < p->n_entries; i++)
		if (p->entries[i].status == PLAN_OK &&
		    results_upsert_layout(db, &p->entries[i].layout,
					  p->entries[i].label[0] ? p->entries[i].label : NULL)) {
			snprintf(err, errlen, "recording layout %s: %s", p->entries[i].id,
				 sqlite3_errmsg(db));
			results_rollback(db);
			goto out_free;
		}
	if (results_commit(db, err, errlen))
		goto out_free;
	for (size_t i = 0; i < b.n_arrays; i++) {
		struct slurm_array *a = &b.arrays[i];
		char script[SLURM_PATH_MAX + 160], aid[64];
		snprintf(script, sizeof(script), "%s/%s-%d-%s.sbatch", dir, stamp, (int)getpid(),
			 a->tag);
		FILE *f = fopen(script, "w");
		if (!f || fputs(a->script, f) < 0 || fclose(f)) {
			snprintf(err, errlen, "cannot write '%s': %s", script, strerror(errno));
			goto out_free;
		}
		chmod(script, 0755);
		if (x->submit(x, a, script, cwd, aid, sizeof(aid), err, errlen))
			goto out_free;
		if (results_begin(db, err, errlen))
			goto out_free;
		for (size_t t = 0; t < a->n_tasks; t++) {
			const struct plan_entry *e = &p->entries[a->entry[t]];
			struct results_job j;
			results_job_init(&j);
			snprintf(j.executor, sizeof(j.executor), "%s", x->name);
			snprintf(j.sweep, sizeof(j.sweep), "%s", p->name);
			snprintf(j.layout_id, sizeof(j.layout_id), "%s", e->id);
			snprintf(j.job_id, sizeof(j.job_id), "%.40s_%zu", aid, t);
			snprintf(j.array_job_id, sizeof(j.array_job_id), "%s", aid);
			j.array_index = (int)t;
			snprintf(j.state, sizeof(j.state), "PENDING");
			j.submit_time = (int64_t)now;
			snprintf(j.run_dir, sizeof(j.run_dir), "%s/%s/%s", runs, p->name, e->id);
			/* a failed count is an error, not attempt 1 again */
			if (results_job_attempts(db, p->name, e->id, &j.attempt, err, errlen)) {
				results_rollback(db);
				goto out_free;
			}
			j.attempt++;
			if (results_job_insert(db, &j, NULL, err, errlen)) {
				results_rollback(db);
				goto out_free;
			}
			out->rows[out->n++] = j.id;
		}
		if (results_commit(db, err, errlen))
			goto out_free;
		out->n_arrays++;
		if (!quiet)
			fprintf(stderr, "submitted %s: job %s, %zu layout(s), --array=%s (%s)\n",
				a->job_name, aid, a->n_tasks, a->array_spec, x->name);
	}
	if (x->start && x->start(x, err, errlen))
		goto out_free;
	rc = 0;
out_free:
	slurm_batch_free(&b);
	return rc;
}

int submit_sweep(const struct submit_opts *o, char *err, size_t errlen)
{
	struct sweep_plan plan;
	struct exec_opts eo = {0};
	struct exec_set es = {0};
	struct submitted sub = {0};
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
	if (!o->dry_run && (lock = submit_lock(dbp, o->quiet, err, errlen)) < 0)
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
			if (exec_open("slurm", &eo, &x, e2, sizeof(e2)) == 0) {
				max_array = x->max_array;
				exec_close(x);
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
	if (submit_layouts(db, x, &plan, sel, n_sel, runs, o->throttle, o->max_array, o->quiet,
			   &sub, err, errlen)) {
		rc = sub.n ? 1 : -1;
		if (sub.n)
			fprintf(stderr, "error: %s\n", err);
		goto out_close;
	}
	submit_unlock(lock); /* the jobs are recorded: in flight for the next submit */
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
	submit_unlock(lock);
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
