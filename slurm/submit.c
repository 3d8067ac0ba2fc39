/*
 * `layoutbench submit`, `status`, `resubmit`, `cancel` (submit.h). The core is shared:
 * submit_entries() renders the chosen layouts into arrays, writes the scripts, hands each
 * array to the executor and records one jobs row per layout; refresh() polls the
 * executors (one batched query each), writes states, collects the run directories of
 * finished jobs and classes each failure (classify.h); wait_sweep() repeats refresh()
 * until nothing is pending or running. The commands parse flags and print.
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
#include "common/embed.h"
#include "common/util.h"
#include "results/collect.h"
#include "results/db.h"
#include "slurm/classify.h"
#include "slurm/exec.h"
#include "slurm/render.h"
#include "sweeps/sweep.h"

#define POLL_INTERVAL_MS 1000
/* Seconds after a job ended during which a missing run log is not yet a verdict (a
 * shared file system may show the log late); the exit statuses 126/127 decide at once. */
#define LOG_GRACE_S 20

void submit_opts_init(struct submit_opts *o)
{
	memset(o, 0, sizeof(*o));
}

/* ---------------------------------------------------------------- helpers */


static int file_exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int sql_exec(sqlite3 *db, const char *sql)
{
	return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

/* Attempts of a layout in a sweep so far. */
static int attempts_of(sqlite3 *db, const char *sweep, const char *layout)
{
	sqlite3_stmt *st = NULL;
	int n = 0;
	if (sqlite3_prepare_v2(db,
			       "SELECT COALESCE(MAX(attempt), 0) FROM jobs WHERE sweep = ?1 "
			       "AND layout_id = ?2",
			       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, sweep, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, layout, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW)
			n = sqlite3_column_int(st, 0);
	}
	sqlite3_finalize(st);
	return n;
}

/* The newest job row of a layout: its state and class ("" none). Returns 1 if any. */
static int latest_job(sqlite3 *db, const char *sweep, const char *layout, char *state, size_t slen,
		      char *cls, size_t clen)
{
	sqlite3_stmt *st = NULL;
	int found = 0;
	if (sqlite3_prepare_v2(db,
			       "SELECT state, COALESCE(failure_class, '') FROM jobs WHERE sweep = "
			       "?1 AND layout_id = ?2 ORDER BY id DESC LIMIT 1",
			       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, sweep, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, layout, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW) {
			snprintf(state, slen, "%s", sqlite3_column_text(st, 0));
			snprintf(cls, clen, "%s", sqlite3_column_text(st, 1));
			found = 1;
		}
	}
	sqlite3_finalize(st);
	return found;
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

/* ---------------------------------------------------------------- submitting */

struct submitted {
	int64_t *rows; /* jobs.id of every task submitted */
	size_t n;
	size_t n_arrays;
};

/*
 * Render plan entries sel[0..n_sel) into arrays, write the scripts under
 * <runs>/<sweep>/scripts, submit them through x, record the jobs. Returns 0, or -1 with
 * err set (arrays submitted before the failure stay recorded).
 */
static int submit_entries(sqlite3 *db, struct executor *x, const struct sweep_plan *p,
			  const size_t *sel, size_t n_sel, const char *runs, int throttle,
			  int max_array, int quiet, struct submitted *out, char *err, size_t errlen)
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
	sql_exec(db, "BEGIN");
	for (size_t i = 0; i < p->n_entries; i++)
		if (p->entries[i].status == PLAN_OK &&
		    results_upsert_layout(db, &p->entries[i].layout,
					  p->entries[i].label[0] ? p->entries[i].label : NULL)) {
			snprintf(err, errlen, "recording layout %s: %s", p->entries[i].id,
				 sqlite3_errmsg(db));
			sql_exec(db, "ROLLBACK");
			goto out_free;
		}
	if (sql_exec(db, "COMMIT")) {
		snprintf(err, errlen, "recording layouts: %s", sqlite3_errmsg(db));
		goto out_free;
	}
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
		sql_exec(db, "BEGIN");
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
			j.attempt = attempts_of(db, p->name, e->id) + 1;
			if (results_job_insert(db, &j, NULL, err, errlen)) {
				sql_exec(db, "ROLLBACK");
				goto out_free;
			}
			out->rows[out->n++] = j.id;
		}
		if (sql_exec(db, "COMMIT")) {
			snprintf(err, errlen, "recording jobs: %s", sqlite3_errmsg(db));
			goto out_free;
		}
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

/* ---------------------------------------------------------------- status */

/* The run of a finished job: the newest run collected from its run directory that
 * started no earlier than the job was submitted. Sets job_ref on it. */
static int find_run(sqlite3 *db, const struct results_job *j, char *status, size_t slen, char *cls,
		    size_t clen, int *exit_code)
{
	sqlite3_stmt *st = NULL;
	char like[600], since[32];
	time_t t = (time_t)j->submit_time;
	struct tm tm;
	int found = 0;
	int64_t run_id = 0;

	gmtime_r(&t, &tm);
	strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(like, sizeof(like), "%s/%%", j->run_dir);
	if (sqlite3_prepare_v2(db,
			       "SELECT id, status, COALESCE(failure_class, ''), "
			       "COALESCE(exit_code, -1) FROM runs WHERE sweep = ?1 AND layout_id = "
			       "?2 AND log_path LIKE ?3 AND (job_ref IS NULL OR job_ref = ?4) AND "
			       "(start_time IS NULL OR start_time >= ?5) ORDER BY id DESC LIMIT 1",
			       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, j->sweep, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, j->layout_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, like, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, j->id);
		sqlite3_bind_text(st, 5, since, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW) {
			run_id = sqlite3_column_int64(st, 0);
			snprintf(status, slen, "%s", sqlite3_column_text(st, 1));
			snprintf(cls, clen, "%s", sqlite3_column_text(st, 2));
			*exit_code = sqlite3_column_int(st, 3);
			found = 1;
		}
	}
	sqlite3_finalize(st);
	if (found && sqlite3_prepare_v2(db, "UPDATE runs SET job_ref = ?1 WHERE id = ?2", -1, &st,
					NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, j->id);
		sqlite3_bind_int64(st, 2, run_id);
		sqlite3_step(st);
		sqlite3_finalize(st);
	}
	return found;
}

/* The exit status the script left in <run dir>/job-<array job id>_<index>.exit. */
static int exit_file(const struct results_job *j)
{
	char path[SLURM_PATH_MAX + 96], line[32] = "";
	struct stat st;
	int v = -1;

	snprintf(path, sizeof(path), "%s/job-%s.exit", j->run_dir, j->job_id);
	if (stat(path, &st) || st.st_mtime < (time_t)j->submit_time)
		return -1;
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (lb_parse_int(line, 0, 255, &v))
			v = -1;
	}
	fclose(f);
	return v;
}

/* Collect a finished job's run directory, class the job, record both. */
static void settle(sqlite3 *db, struct results_job *j, int known)
{
	struct collect_stats cs;
	char err[256], rstatus[16] = "", rclass[32] = "";
	int rexit = -1;
	struct slurm_class_in in = {0};

	memset(&cs, 0, sizeof(cs));
	cs.quiet = 1;
	if (file_exists(j->run_dir))
		results_collect_path(db, j->run_dir, &cs, err, sizeof(err));
	in.has_run = find_run(db, j, rstatus, sizeof(rstatus), rclass, sizeof(rclass), &rexit);
	if (known && !in.has_run &&
	    (!strcmp(j->state, "COMPLETED") || !strcmp(j->state, "FAILED")) &&
	    j->exit_code != 126 && j->exit_code != 127 && j->end_time > 0 &&
	    time(NULL) - j->end_time < LOG_GRACE_S)
		return; /* the run log may still be on its way: ask again later */
	in.run_status = rstatus;
	in.run_class = rclass;
	in.state = known ? j->state : "";
	in.exit_code = j->exit_code;
	if (!known && in.exit_code < 0)
		in.exit_code = in.has_run && rexit >= 0 ? rexit : exit_file(j);
	const char *cls = slurm_classify(&in);
	if (!known) {
		snprintf(j->state, sizeof(j->state), "%s", slurm_purged_state(&in));
		snprintf(j->reason, sizeof(j->reason), "no longer known to the scheduler");
		if (in.exit_code >= 0)
			j->exit_code = in.exit_code;
	}
	if (*cls)
		snprintf(j->failure_class, sizeof(j->failure_class), "%s", cls);
	else if (!in.has_run)
		snprintf(j->failure_class, sizeof(j->failure_class), "unknown");
	if (!*j->failure_class && strcmp(j->state, "COMPLETED"))
		snprintf(j->failure_class, sizeof(j->failure_class), "failed");
	results_job_update(db, j, err, sizeof(err));
}

/* A final job is settled once it has a class, or it completed and its run is known. */
static int settled(sqlite3 *db, const struct results_job *j)
{
	sqlite3_stmt *st = NULL;
	int n = 0;
	if (*j->failure_class)
		return 1;
	if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM runs WHERE job_ref = ?1", -1, &st, NULL) ==
	    SQLITE_OK) {
		sqlite3_bind_int64(st, 1, j->id);
		if (sqlite3_step(st) == SQLITE_ROW)
			n = sqlite3_column_int(st, 0);
	}
	sqlite3_finalize(st);
	return n > 0;
}

struct exec_set {
	const struct exec_opts *o;
	struct executor *x[3]; /* slurm, rest, local */
	int failed[3];
};

static int exec_slot(const char *name)
{
	return !strcmp(name, "slurm") ? 0 : !strcmp(name, "rest") ? 1 : 2;
}

static struct executor *exec_get(struct exec_set *s, const char *name, char *err, size_t errlen)
{
	int k = exec_slot(name);
	if (!s->x[k] && !s->failed[k] && exec_open(name, s->o, &s->x[k], err, errlen))
		s->failed[k] = 1;
	return s->x[k];
}

static void exec_set_close(struct exec_set *s)
{
	for (int k = 0; k < 3; k++)
		exec_close(s->x[k]);
}

/*
 * Poll the active jobs among jobs[0..n) (one query per executor), write their states,
 * settle the finished ones. Returns 0, or -1 when an executor could not be asked (err
 * set; the other executors' jobs are still refreshed).
 */
static int refresh(sqlite3 *db, struct exec_set *es, struct results_job *jobs, size_t n, char *err,
		   size_t errlen)
{
	static const char *names[3] = {"slurm", "rest", "local"};
	int rc = 0;
	struct results_job *sub = calloc(n ? n : 1, sizeof(*sub));
	struct exec_state *st = calloc(n ? n : 1, sizeof(*st));
	size_t *map = calloc(n ? n : 1, sizeof(*map));

	if (!sub || !st || !map) {
		snprintf(err, errlen, "out of memory");
		rc = -1;
		goto out_free;
	}
	for (int k = 0; k < 3; k++) {
		size_t m = 0;
		for (size_t i = 0; i < n; i++)
			if (!strcmp(jobs[i].executor, names[k]) &&
			    !exec_state_final(jobs[i].state)) {
				sub[m] = jobs[i];
				map[m++] = i;
			}
		if (m == 0)
			continue;
		struct executor *x = exec_get(es, names[k], err, errlen);
		if (!x || x->poll(x, sub, m, st, err, errlen)) {
			rc = -1;
			continue;
		}
		for (size_t t = 0; t < m; t++) {
			struct results_job *j = &jobs[map[t]];
			char e2[256];
			if (!st[t].known) {
				settle(db, j, 0);
				continue;
			}
			int changed = strcmp(j->state, st[t].state) != 0;
			snprintf(j->state, sizeof(j->state), "%s", st[t].state);
			snprintf(j->reason, sizeof(j->reason), "%s", st[t].reason);
			j->exit_code = st[t].exit_code;
			j->start_time = st[t].start_time;
			j->end_time = st[t].end_time;
			if (changed || exec_state_final(j->state))
				results_job_update(db, j, e2, sizeof(e2));
		}
	}
	for (size_t i = 0; i < n; i++)
		if (exec_state_final(jobs[i].state) && !settled(db, &jobs[i]))
			settle(db, &jobs[i], 1);
out_free:
	free(sub);
	free(st);
	free(map);
	return rc;
}

struct counts {
	size_t done, running, pending, failed;
};

/* Counts for the progress line; a finished job not yet classed (its run log may still be
 * on its way) counts as running. */
static void count(sqlite3 *db, const struct results_job *jobs, size_t n, struct counts *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < n; i++) {
		const struct results_job *j = &jobs[i];
		if (!exec_state_final(j->state)) {
			if (!strcmp(j->state, "RUNNING") || !strcmp(j->state, "COMPLETING") ||
			    !strcmp(j->state, "CONFIGURING"))
				c->running++;
			else
				c->pending++;
		} else if (!settled(db, j)) {
			c->running++;
		} else if (!strcmp(j->state, "COMPLETED") && !*j->failure_class) {
			c->done++;
		} else {
			c->failed++;
		}
	}
}

/* Load the jobs rows with the given ids (the latest state). */
static int load_rows(sqlite3 *db, const char *sweep, const int64_t *rows, size_t n,
		     struct results_job **out, size_t *nout, char *err, size_t errlen)
{
	struct results_job *all = NULL;
	size_t na = 0, k = 0;
	if (results_jobs_list(db, sweep, 0, &all, &na, err, errlen))
		return -1;
	struct results_job *sel = calloc(n ? n : 1, sizeof(*sel));
	if (!sel) {
		free(all);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < na; i++)
		for (size_t r = 0; r < n; r++)
			if (all[i].id == rows[r]) {
				sel[k++] = all[i];
				break;
			}
	free(all);
	*out = sel;
	*nout = k;
	return 0;
}

/* Block until none of the rows is pending or running. Returns 0 when all completed. */
static int wait_rows(sqlite3 *db, struct exec_set *es, const char *sweep, const int64_t *rows,
		     size_t n, int quiet, char *err, size_t errlen)
{
	int tty = isatty(2);
	struct counts c, last = {(size_t)-1, 0, 0, 0};
	int rc = 0;
	time_t t0 = time(NULL);

	for (;;) {
		struct results_job *jobs = NULL;
		size_t nj = 0;
		if (load_rows(db, sweep, rows, n, &jobs, &nj, err, errlen))
			return -1;
		if (refresh(db, es, jobs, nj, err, errlen)) {
			fprintf(stderr, "warning: %s\n", err);
			err[0] = '\0';
		}
		count(db, jobs, nj, &c);
		free(jobs);
		if (!quiet && memcmp(&c, &last, sizeof(c))) {
			if (tty)
				fprintf(stderr,
					"\r%s: done %zu / running %zu / pending %zu / failed "
					"%zu (%lds)   ",
					sweep, c.done, c.running, c.pending, c.failed,
					(long)(time(NULL) - t0));
			else
				fprintf(stderr,
					"%s: done %zu / running %zu / pending %zu / failed %zu\n",
					sweep, c.done, c.running, c.pending, c.failed);
			last = c;
		}
		if (c.running + c.pending == 0)
			break;
		sleep_ms(POLL_INTERVAL_MS);
	}
	if (!quiet && tty)
		fprintf(stderr, "\n");
	if (c.failed)
		rc = 1;
	return rc;
}

/* ---------------------------------------------------------------- submit */

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
	int rc = -1;

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

	if (!o->dry_run || file_exists(dbp)) {
		if (results_open(dbp, &db, err, errlen))
			goto out_free_plan;
	}
	sel = calloc(plan.n_entries ? plan.n_entries : 1, sizeof(*sel));
	if (!sel) {
		snprintf(err, errlen, "out of memory");
		goto out_close;
	}
	for (size_t i = 0; i < plan.n_entries; i++) {
		const struct plan_entry *e = &plan.entries[i];
		char st[24], cls[24];
		if (e->status != PLAN_OK)
			continue;
		if (db && !o->force) {
			if (results_layout_has_ok_run(db, plan.name, e->id) == 1) {
				n_done++;
				continue;
			}
			if (latest_job(db, plan.name, e->id, st, sizeof(st), cls, sizeof(cls))) {
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

	if (o->dry_run) {
		struct slurm_render_opts ro = {0};
		struct slurm_batch b;
		char train[SLURM_PATH_MAX];
		int max_array = o->max_array;
		if (max_array <= 0 && !strcmp(exname, "slurm")) {
			struct executor *x = NULL;
			char e2[256];
			if (exec_open("slurm", &eo, &x, e2, sizeof(e2)) == 0) {
				max_array = x->max_array;
				exec_close(x);
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
	if (n_sel == 0) {
		printf("sweep '%s': nothing to submit (%zu layout(s) done, %zu pending or running; "
		       "--force submits again)\n",
		       plan.name, n_done, n_active);
		rc = 0;
		goto out_close;
	}
	struct executor *x = exec_get(&es, exname, err, errlen);
	if (!x)
		goto out_close;
	if (submit_entries(db, x, &plan, sel, n_sel, runs, o->throttle, o->max_array, o->quiet,
			   &sub, err, errlen)) {
		rc = sub.n ? 1 : -1;
		if (sub.n)
			fprintf(stderr, "error: %s\n", err);
		goto out_close;
	}
	printf("sweep '%s': submitted %zu layout(s) in %zu array(s) through %s; skipped %zu "
	       "done, %zu pending or running; runs in %s/%s\n",
	       plan.name, sub.n, sub.n_arrays, x->name, n_done, n_active, runs, plan.name);
	fflush(stdout);
	rc = 0;
	if (o->wait) {
		rc = wait_rows(db, &es, plan.name, sub.rows, sub.n, o->quiet, err, errlen);
		if (rc < 0)
			goto out_close;
		struct results_job *jobs = NULL;
		size_t nj = 0;
		struct counts c;
		if (load_rows(db, plan.name, sub.rows, sub.n, &jobs, &nj, err, errlen) == 0) {
			count(db, jobs, nj, &c);
			printf("sweep '%s': %zu completed, %zu failed\n", plan.name, c.done,
			       c.failed);
			free(jobs);
		}
	}
out_close:
	exec_set_close(&es);
	free(sub.rows);
	free(sel);
	results_close(db);
out_free_plan:
	sweep_plan_free(&plan);
out_free_text:
	free(text);
	return rc;
}

/* ---------------------------------------------------------------- commands */

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
static int sweep_names(sqlite3 *db, const char *only, char ***names, size_t *n)
{
	sqlite3_stmt *st = NULL;
	*names = NULL;
	*n = 0;
	if (only) {
		*names = calloc(1, sizeof(char *));
		if (!*names || !((*names)[0] = strdup(only)))
			return -1;
		*n = 1;
		return 0;
	}
	if (sqlite3_prepare_v2(db, "SELECT DISTINCT sweep FROM jobs ORDER BY sweep", -1, &st,
			       NULL) != SQLITE_OK)
		return -1;
	while (sqlite3_step(st) == SQLITE_ROW) {
		char **nn = realloc(*names, (*n + 1) * sizeof(char *));
		if (!nn)
			break;
		*names = nn;
		(*names)[(*n)++] = strdup((const char *)sqlite3_column_text(st, 0));
	}
	sqlite3_finalize(st);
	return 0;
}


/* With --sweep: 0 if the database knows it, else 1 after the message (see above). */
static int check_sweep_arg(sqlite3 *db, const char *db_path, const char *sweep)
{
	char err[1024];
	if (!sweep || results_sweep_check(db, db_path, sweep, err, sizeof(err)) == 0)
		return 0;
	fprintf(stderr, "error: %s\n", err);
	return 1;
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

struct common_args {
	const char *db;
	const char *sweep;
	const char *executor;
	const char *const *classes;
	int n_classes;
	int wait;
	int force;
	int throttle;
};

/* The flags status/resubmit/cancel share, from the parsed line. */
static void common_args(const struct lb_args *a, struct common_args *c)
{
	memset(c, 0, sizeof(*c));
	c->db = a->str[LB_OPT_DB];
	c->sweep = a->str[LB_OPT_SWEEP];
	c->executor = a->str[LB_OPT_EXECUTOR];
	c->classes = a->many[LB_OPT_CLASS];
	c->n_classes = a->n_many[LB_OPT_CLASS];
	c->wait = a->given[LB_OPT_WAIT] > 0;
	c->force = a->given[LB_OPT_FORCE] > 0;
	c->throttle = (int)a->num[LB_OPT_THROTTLE];
}

static void print_status(const char *sweep, const struct results_job *jobs, size_t n)
{
	static const char *classes[] = {"oom",	     "timeout",	     "node_fail", "preempted",
					"cancelled", "launch_error", "failed",	  "unknown"};
	const char *states[32];
	size_t scount[32], ns = 0, ccount[8] = {0};

	for (size_t i = 0; i < n; i++) {
		size_t k;
		for (k = 0; k < ns; k++)
			if (!strcmp(states[k], jobs[i].state))
				break;
		if (k == ns && ns < 32) {
			states[ns] = jobs[i].state;
			scount[ns++] = 0;
		}
		if (k < 32)
			scount[k]++;
		for (size_t c = 0; c < 8; c++)
			if (!strcmp(jobs[i].failure_class, classes[c]))
				ccount[c]++;
	}
	printf("sweep '%s': %zu layout(s)\n", sweep, n);
	for (size_t k = 0; k < ns; k++)
		printf("  state %-14s %zu\n", states[k], scount[k]);
	for (size_t c = 0; c < 8; c++)
		if (ccount[c])
			printf("  class %-14s %zu\n", classes[c], ccount[c]);
	for (size_t i = 0; i < n; i++)
		if (*jobs[i].failure_class)
			printf("  failed %s  job %s (%s)  %s  %s%s%s\n", jobs[i].layout_id,
			       jobs[i].job_id, jobs[i].executor, jobs[i].state,
			       jobs[i].failure_class, *jobs[i].reason ? ": " : "", jobs[i].reason);
}

static int run_status(const struct common_args *args)
{
	struct common_args c = *args;
	struct exec_opts eo = {0};
	struct exec_set es = {0};
	sqlite3 *db = NULL;
	char err[1024], **names = NULL;
	size_t nn = 0;
	int rc = 0;

	eo.db_path = c.db ? c.db : results_default_db();
	es.o = &eo;
	if (results_open(eo.db_path, &db, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	if (check_sweep_arg(db, eo.db_path, c.sweep)) {
		results_close(db);
		return 1;
	}
	rc = 0;
	sweep_names(db, c.sweep, &names, &nn);
	if (nn == 0)
		printf("no jobs in '%s'\n", eo.db_path);
	for (size_t s = 0; s < nn; s++) {
		struct results_job *jobs = NULL;
		size_t n = 0;
		if (results_jobs_list(db, names[s], 1, &jobs, &n, err, sizeof(err))) {
			fprintf(stderr, "error: %s\n", err);
			rc = 1;
			continue;
		}
		if (refresh(db, &es, jobs, n, err, sizeof(err))) {
			fprintf(stderr, "warning: sweep '%s': %s\n", names[s], err);
			rc = 1;
		}
		print_status(names[s], jobs, n);
		free(jobs);
	}
	free_names(names, nn);
	exec_set_close(&es);
	results_close(db);
	return rc;
}

static int class_selected(const struct common_args *c, const char *cls)
{
	if (!*cls)
		return 0;
	if (c->n_classes == 0)
		return 1;
	for (int i = 0; i < c->n_classes; i++)
		if (!strcmp(c->classes[i], cls))
			return 1;
	return 0;
}

/* The plan of a sweep from the spec text stored at submission. */
static int plan_of(sqlite3 *db, const char *sweep, struct sweep_plan *p, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc = -1;
	if (sqlite3_prepare_v2(db, "SELECT spec_text FROM sweeps WHERE name = ?1", -1, &st, NULL) !=
	    SQLITE_OK) {
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
		return -1;
	}
	sqlite3_bind_text(st, 1, sweep, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
		const char *t = (const char *)sqlite3_column_text(st, 0);
		rc = sweep_plan_text(sweep, t, strlen(t), p, err, errlen);
	} else {
		snprintf(err, errlen,
			 "no spec stored to plan it again (it was not submitted from a spec; "
			 "submit it with 'layoutbench submit SPEC' first)");
	}
	sqlite3_finalize(st);
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

static int run_resubmit(const struct common_args *args)
{
	struct common_args c = *args;
	struct exec_opts eo = {0};
	struct exec_set es = {0};
	sqlite3 *db = NULL;
	char err[1024], **names = NULL;
	size_t nn = 0;
	int rc = 0;

	eo.db_path = c.db ? c.db : results_default_db();
	eo.hold = getenv("LB_SUBMIT_HOLD") && !strcmp(getenv("LB_SUBMIT_HOLD"), "1");
	es.o = &eo;
	if (results_open(eo.db_path, &db, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	if (check_sweep_arg(db, eo.db_path, c.sweep)) {
		results_close(db);
		return 1;
	}
	sweep_names(db, c.sweep, &names, &nn);
	if (nn == 0)
		printf("no jobs in '%s'\n", eo.db_path);
	for (size_t s = 0; s < nn; s++) {
		struct results_job *jobs = NULL;
		struct sweep_plan plan;
		size_t n = 0, n_sel = 0;
		size_t *sel = NULL;
		struct submitted sub = {0};
		const char *exname = c.executor;
		char runs[SLURM_PATH_MAX] = "";

		memset(&plan, 0, sizeof(plan));
		if (results_jobs_list(db, names[s], 1, &jobs, &n, err, sizeof(err)))
			goto sweep_err;
		if (refresh(db, &es, jobs, n, err, sizeof(err)))
			fprintf(stderr, "warning: sweep '%s': %s\n", names[s], err);
		size_t n_failed = 0;
		for (size_t i = 0; i < n; i++)
			if (exec_state_final(jobs[i].state) &&
			    class_selected(&c, jobs[i].failure_class))
				n_failed++;
		if (n_failed == 0) { /* nothing to plan again (a sweep without jobs has no spec) */
			printf("sweep '%s': nothing to resubmit\n", names[s]);
			goto sweep_next;
		}
		if (plan_of(db, names[s], &plan, err, sizeof(err)))
			goto sweep_err;
		sel = calloc(n ? n : 1, sizeof(*sel));
		if (!sel)
			goto sweep_err;
		for (size_t i = 0; i < n; i++) {
			if (!exec_state_final(jobs[i].state) ||
			    !class_selected(&c, jobs[i].failure_class))
				continue;
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
		if (n_sel == 0) {
			printf("sweep '%s': nothing to resubmit\n", names[s]);
			goto sweep_next;
		}
		struct executor *x = exec_get(&es, exname, err, sizeof(err));
		if (!x)
			goto sweep_err;
		if (submit_entries(db, x, &plan, sel, n_sel, runs, c.throttle, 0, 0, &sub, err,
				   sizeof(err)))
			goto sweep_err;
		printf("sweep '%s': resubmitted %zu layout(s) in %zu array(s) through %s\n",
		       names[s], sub.n, sub.n_arrays, x->name);
		fflush(stdout);
		if (c.wait) {
			int w = wait_rows(db, &es, names[s], sub.rows, sub.n, 0, err, sizeof(err));
			if (w < 0)
				goto sweep_err;
			if (w > 0)
				rc = 1;
		}
		goto sweep_next;
	sweep_err:
		fprintf(stderr, "error: sweep '%s': %s\n", names[s], err);
		rc = 1;
	sweep_next:
		free(sub.rows);
		free(sel);
		free(jobs);
		sweep_plan_free(&plan);
	}
	free_names(names, nn);
	exec_set_close(&es);
	results_close(db);
	return rc;
}

static int run_cancel(const struct common_args *args)
{
	static const char *exnames[3] = {"slurm", "rest", "local"};
	struct common_args c = *args;
	struct exec_opts eo = {0};
	struct exec_set es = {0};
	sqlite3 *db = NULL;
	char err[1024], **names = NULL;
	size_t nn = 0, total = 0;
	int rc = 0;

	eo.db_path = c.db ? c.db : results_default_db();
	es.o = &eo;
	if (results_open(eo.db_path, &db, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	if (check_sweep_arg(db, eo.db_path, c.sweep)) {
		results_close(db);
		return 1;
	}
	sweep_names(db, c.sweep, &names, &nn);
	for (size_t s = 0; s < nn; s++) {
		struct results_job *jobs = NULL, *sub = NULL;
		size_t n = 0;
		if (results_jobs_list(db, names[s], 1, &jobs, &n, err, sizeof(err))) {
			fprintf(stderr, "error: %s\n", err);
			rc = 1;
			continue;
		}
		sub = calloc(n ? n : 1, sizeof(*sub));
		for (int k = 0; sub && k < 3; k++) {
			size_t m = 0;
			for (size_t i = 0; i < n; i++)
				if (!strcmp(jobs[i].executor, exnames[k]) &&
				    !exec_state_final(jobs[i].state))
					sub[m++] = jobs[i];
			if (m == 0)
				continue;
			struct executor *x = exec_get(&es, exnames[k], err, sizeof(err));
			if (!x || x->cancel(x, sub, m, err, sizeof(err))) {
				fprintf(stderr, "error: sweep '%s': %s\n", names[s], err);
				rc = 1;
				continue;
			}
			total += m;
		}
		/* record what the schedulers now say */
		if (refresh(db, &es, jobs, n, err, sizeof(err)))
			fprintf(stderr, "warning: sweep '%s': %s\n", names[s], err);
		free(sub);
		free(jobs);
	}
	printf("cancelled %zu job(s)\n", total);
	free_names(names, nn);
	exec_set_close(&es);
	results_close(db);
	return rc;
}

/* status, resubmit and cancel: the flags they share, then the command. */
static int run_jobs_command(const char *name, int (*fn)(const struct common_args *), int argc,
			    char **argv)
{
	struct common_args c;
	struct lb_args a;
	int rc;

	if (!(rc = lb_args_parse(name, argc, argv, &a))) {
		common_args(&a, &c);
		rc = fn(&c);
	}
	lb_args_release(&a);
	return rc;
}

int cmd_status(int argc, char **argv)
{
	return run_jobs_command("status", run_status, argc, argv);
}

int cmd_resubmit(int argc, char **argv)
{
	return run_jobs_command("resubmit", run_resubmit, argc, argv);
}

int cmd_cancel(int argc, char **argv)
{
	return run_jobs_command("cancel", run_cancel, argc, argv);
}
