/*
 * Tracking submitted jobs (slurm/track.h): polling the executors, settling final jobs
 * (collect, tie the run, class the failure), counting, waiting; and the preamble the jobs
 * commands share.
 */
#include "slurm/track.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "results/collect.h"
#include "slurm/classify.h"
#include "slurm/executor.h"

#define POLL_INTERVAL_MS 1000
/* Seconds after a job ended during which a missing run log, or a log without its end
 * record, is not yet a verdict: a shared file system may show the log late. The local
 * executor's jobs write on this machine's file system: no grace; nor for the exit
 * statuses 126/127, which decide at once. */
#define LOG_GRACE_S 20
/* The local executor's cancel and time limit send SIGTERM and, 5 s later, SIGKILL: a log
 * without its end record gets it within that time, or never. */
#define LOCAL_END_GRACE_S 6

static const char *const exec_names[3] = {"slurm", "rest", "local"};

int track_exec_slot(const char *name)
{
	return !strcmp(name, "slurm") ? 0 : !strcmp(name, "rest") ? 1 : 2;
}

struct executor *track_exec_get(struct exec_set *s, const char *name, char *err, size_t errlen)
{
	int k = track_exec_slot(name);

	if (!s->x[k] && !s->failed[k] && executor_open(name, s->o, &s->x[k], err, errlen))
		s->failed[k] = 1;
	if (!s->x[k] && s->failed[k] && err && !*err)
		snprintf(err, errlen, "executor '%s' is not available", name);
	return s->x[k];
}

void track_exec_close(struct exec_set *s)
{
	for (int k = 0; k < 3; k++) {
		executor_close(s->x[k]);
		s->x[k] = NULL;
	}
}

/* 1 while the run log of final job j, or (end_record) the log's end record, may still be
 * on its way (see LOG_GRACE_S, LOCAL_END_GRACE_S). */
static int log_may_be_late(const struct results_job *j, int end_record)
{
	int local = !strcmp(j->executor, "local");
	int grace = local ? (end_record ? LOCAL_END_GRACE_S : 0) : LOG_GRACE_S;

	return j->end_time > 0 && time(NULL) - j->end_time < grace;
}

/* Collect a job's run directory, if it exists. A log the collector refuses is the run's
 * fault, not the database's: the job is then classed without a run. */
static void collect_run_dir(sqlite3 *db, const struct results_job *j)
{
	struct collect_stats cs;
	char cerr[256];
	struct stat sb;

	memset(&cs, 0, sizeof(cs));
	cs.quiet = 1;
	if (stat(j->run_dir, &sb) == 0)
		results_collect_path(db, j->run_dir, &cs, cerr, sizeof(cerr));
}

/* Keep the first error of several: err is written only while it is empty. */
static void first_error(char *err, size_t errlen, const char *msg)
{
	if (err && errlen && !*err)
		snprintf(err, errlen, "%s", msg);
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

/*
 * Collect a final job's run directory, tie its run, class the job, record it. known: the
 * scheduler still knows the job (else it was purged: the state comes from the run). Returns
 * 0 (settled, or not yet when its log may still be on its way), or -1 with err set.
 */
static int settle(sqlite3 *db, struct results_job *j, int known, char *err, size_t errlen)
{
	struct results_job_run run = {0, "", "", -1};
	struct slurm_class_in in = {0};
	int found;

	collect_run_dir(db, j);
	found = results_job_find_run(db, j, &run, err, errlen);
	if (found < 0)
		return -1;
	in.has_run = found;
	if (known && !in.has_run &&
	    (!strcmp(j->state, "COMPLETED") || !strcmp(j->state, "FAILED")) &&
	    j->exit_code != 126 && j->exit_code != 127 && log_may_be_late(j, 0))
		return 0; /* the run log may still be on its way: ask again later */
	if (known && in.has_run && !strcmp(run.status, "running") &&
	    (!strcmp(j->state, "COMPLETED") || !strcmp(j->state, "FAILED")) &&
	    log_may_be_late(j, 1))
		return 0; /* so may its end record: a completed job's log without it failed */
	in.run_status = run.status;
	in.run_class = run.failure_class;
	in.state = known ? j->state : "";
	in.exit_code = j->exit_code;
	if (!known && in.exit_code < 0)
		in.exit_code = in.has_run && run.exit_code >= 0 ? run.exit_code : exit_file(j);
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
	return results_job_update(db, j, err, errlen);
}

/* A final job is settled once it has a class, or it completed and its run is tied to it.
 * Returns 1, 0, or -1 with err set. */
static int settled(sqlite3 *db, const struct results_job *j, char *err, size_t errlen)
{
	struct results_job_run run;

	if (*j->failure_class)
		return 1;
	return results_job_tied_run(db, j->id, &run, err, errlen);
}

/*
 * The run of a settled job that still reads 'running': its trainer wrote the end record
 * after the job was settled (a cancel, then status), so collect it again; a log that has
 * no end record once the grace is over never gets one (the trainer was killed first, or
 * its disk was full): close the run as failed, its class from the job's
 * (slurm_run_end_class: 'killed', 'timeout' for a job past its time limit, 'io_error' for
 * a trainer that exited 7, ...). Returns 0, or -1 with err set.
 */
static int settle_run(sqlite3 *db, const struct results_job *j, char *err, size_t errlen)
{
	struct results_job_run run;
	char msg[160];
	int found = results_job_tied_run(db, j->id, &run, err, errlen);

	if (found <= 0 || strcmp(run.status, "running"))
		return found < 0 ? -1 : 0;
	collect_run_dir(db, j);
	found = results_job_tied_run(db, j->id, &run, err, errlen);
	if (found <= 0 || strcmp(run.status, "running") || log_may_be_late(j, 1))
		return found < 0 ? -1 : 0;
	const char *cls = slurm_run_end_class(j->failure_class, j->exit_code);
	if (!strcmp(cls, "killed") || !strcmp(cls, "timeout"))
		snprintf(msg, sizeof(msg), "the job ended (%s) before the run log's end record",
			 j->state);
	else /* the trainer's own exit status says why */
		snprintf(msg, sizeof(msg),
			 "the job ended (%s, exit %d) without the run log's end record%s", j->state,
			 j->exit_code,
			 !strcmp(cls, "io_error") ? ": the run log could not be written" : "");
	return results_job_run_close(db, run.id, cls, msg, err, errlen);
}

int track_refresh(sqlite3 *db, struct exec_set *es, struct results_job *jobs, size_t n, char *err,
		  size_t errlen)
{
	struct results_job *sub = calloc(n ? n : 1, sizeof(*sub));
	struct exec_state *st = calloc(n ? n : 1, sizeof(*st));
	size_t *map = calloc(n ? n : 1, sizeof(*map));
	char e[1024];
	int rc = 0;

	err[0] = '\0';
	if (!sub || !st || !map) {
		snprintf(err, errlen, "out of memory");
		rc = -2;
		goto out_free;
	}
	for (int k = 0; k < 3; k++) {
		size_t m = 0;
		for (size_t i = 0; i < n; i++)
			if (!strcmp(jobs[i].executor, exec_names[k]) &&
			    !exec_state_final(jobs[i].state)) {
				sub[m] = jobs[i];
				map[m++] = i;
			}
		if (m == 0)
			continue;
		e[0] = '\0';
		struct executor *x = track_exec_get(es, exec_names[k], e, sizeof(e));
		if (!x || x->poll(x, sub, m, st, e, sizeof(e))) {
			first_error(err, errlen, e);
			if (rc == 0)
				rc = -1;
			continue;
		}
		for (size_t t = 0; t < m; t++) {
			struct results_job *j = &jobs[map[t]];
			if (!st[t].known) {
				if (settle(db, j, 0, e, sizeof(e))) {
					first_error(err, errlen, e);
					rc = -2;
				}
				continue;
			}
			int changed = strcmp(j->state, st[t].state) != 0;
			snprintf(j->state, sizeof(j->state), "%s", st[t].state);
			snprintf(j->reason, sizeof(j->reason), "%s", st[t].reason);
			j->exit_code = st[t].exit_code;
			j->start_time = st[t].start_time;
			j->end_time = st[t].end_time;
			if ((changed || exec_state_final(j->state)) &&
			    results_job_update(db, j, e, sizeof(e))) {
				first_error(err, errlen, e);
				rc = -2;
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (!exec_state_final(jobs[i].state))
			continue;
		int s = settled(db, &jobs[i], e, sizeof(e));
		if (s == 0)
			s = settle(db, &jobs[i], 1, e, sizeof(e)) ? -1 : 1;
		if (s > 0 && settle_run(db, &jobs[i], e, sizeof(e)))
			s = -1;
		if (s < 0) {
			first_error(err, errlen, e);
			rc = -2;
		}
	}
out_free:
	free(sub);
	free(st);
	free(map);
	return rc;
}

int track_count(sqlite3 *db, const struct results_job *jobs, size_t n, struct track_counts *c,
		char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < n; i++) {
		const struct results_job *j = &jobs[i];
		int s;
		if (!exec_state_final(j->state)) {
			if (!strcmp(j->state, "RUNNING") || !strcmp(j->state, "COMPLETING") ||
			    !strcmp(j->state, "CONFIGURING"))
				c->running++;
			else
				c->pending++;
		} else if ((s = settled(db, j, err, errlen)) < 0) {
			return -1;
		} else if (!s) {
			c->running++;
		} else if (!strcmp(j->state, "COMPLETED") && !*j->failure_class) {
			c->done++;
		} else {
			c->failed++;
		}
	}
	return 0;
}

int track_load_rows(sqlite3 *db, const char *sweep, const int64_t *rows, size_t n,
		    struct results_job **out, size_t *nout, char *err, size_t errlen)
{
	struct results_job *all = NULL, *sel;
	size_t na = 0, k = 0;

	if (results_jobs_list(db, sweep, 0, &all, &na, err, errlen))
		return -1;
	sel = calloc(n ? n : 1, sizeof(*sel));
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

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

int track_wait(sqlite3 *db, struct exec_set *es, const char *sweep, const int64_t *rows, size_t n,
	       int quiet, struct track_counts *c, char *err, size_t errlen)
{
	int tty = isatty(2);
	struct track_counts last = {(size_t)-1, 0, 0, 0};
	time_t t0 = time(NULL);
	char e[1024];

	for (;;) {
		struct results_job *jobs = NULL;
		size_t nj = 0;
		if (track_load_rows(db, sweep, rows, n, &jobs, &nj, err, errlen))
			return -1;
		/* an executor that cannot be asked this time may answer the next: warn; a
		 * database that refuses to record a state ends the wait */
		int rrc = track_refresh(db, es, jobs, nj, e, sizeof(e));
		if (rrc == -1)
			fprintf(stderr, "warning: %s\n", e);
		int crc = rrc == -2 ? -1 : track_count(db, jobs, nj, c, err, errlen);
		free(jobs);
		if (rrc == -2)
			snprintf(err, errlen, "%s", e);
		if (crc)
			return -1;
		if (!quiet && memcmp(c, &last, sizeof(*c))) {
			if (tty)
				fprintf(stderr,
					"\r%s: done %zu / running %zu / pending %zu / failed "
					"%zu (%lds)   ",
					sweep, c->done, c->running, c->pending, c->failed,
					(long)(time(NULL) - t0));
			else
				fprintf(stderr,
					"%s: done %zu / running %zu / pending %zu / failed %zu\n",
					sweep, c->done, c->running, c->pending, c->failed);
			last = *c;
		}
		if (c->running + c->pending == 0)
			break;
		sleep_ms(POLL_INTERVAL_MS);
	}
	if (!quiet && tty)
		fprintf(stderr, "\n");
	return c->failed ? 1 : 0;
}

int track_cmd_open(const struct lb_args *a, struct track_cmd *t)
{
	char err[1024];

	memset(t, 0, sizeof(*t));
	t->db_path = a->str[TRACK_OPT_DB] ? a->str[TRACK_OPT_DB] : results_default_db();
	t->sweep = a->str[TRACK_OPT_SWEEP];
	t->executor = a->str[TRACK_OPT_EXECUTOR];
	t->classes = a->many[TRACK_OPT_CLASS];
	t->n_classes = a->n_many[TRACK_OPT_CLASS];
	t->wait = a->given[TRACK_OPT_WAIT] > 0;
	t->force = a->given[TRACK_OPT_FORCE] > 0;
	t->throttle = (int)a->num[TRACK_OPT_THROTTLE];
	t->eo.db_path = t->db_path;
	t->eo.hold = getenv("LB_SUBMIT_HOLD") && !strcmp(getenv("LB_SUBMIT_HOLD"), "1");
	t->es.o = &t->eo;
	if (results_open(t->db_path, &t->db, err, sizeof(err)))
		goto out_err;
	if (!t->sweep) {
		if (results_job_sweeps(t->db, &t->names, &t->n_names, err, sizeof(err)))
			goto out_err;
		return 0;
	}
	/* a misspelled --sweep is an error, not an empty answer */
	if (results_sweep_check(t->db, t->db_path, t->sweep, err, sizeof(err)))
		goto out_err;
	t->names = calloc(1, sizeof(char *));
	if (!t->names || !(t->names[0] = strdup(t->sweep))) {
		snprintf(err, sizeof(err), "out of memory");
		goto out_err;
	}
	t->n_names = 1;
	return 0;
out_err:
	fprintf(stderr, "error: %s\n", err);
	return 1;
}

void track_cmd_close(struct track_cmd *t)
{
	track_exec_close(&t->es);
	results_names_free(t->names, t->n_names);
	results_close(t->db);
	memset(t, 0, sizeof(*t));
}
