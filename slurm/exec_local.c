/*
 * The local executor: no Slurm. Arrays are queued in the results database (tables
 * slurm_local_arrays and slurm_local_tasks, results/schema.sql step 3, next to the jobs
 * rows); a worker
 * detached from the terminal (double fork + setsid) runs the same job scripts, as many
 * at once as slots allow (ranks; one job at a time unless --slots says more), each in
 * its own process group with the SLURM_* environment a batch job would have, enforces
 * time limits (SIGTERM, then SIGKILL after 5 s) and records every state change in the
 * jobs table. `srun` in a script is "${LB_SRUN:-srun}": the worker points LB_SRUN at
 * lb-srun (written next to the scripts), which drops srun options and runs the command
 * once with --nproc-per-node = the job's ranks. One worker per database at a time (a
 * lock file next to it); a worker exits when nothing is pending or running.
 */
#include "slurm/exec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KILL_WAIT_S 5
#define MAX_RUNNING 256

static const char launcher[] =
    "#!/bin/sh\n"
    "# layoutbench local executor: stands in for srun (LB_SRUN). Drops srun's options,\n"
    "# then runs the command once with --nproc-per-node = the job's ranks: the trainer\n"
    "# starts its own ranks. The per-task SLURM_* variables are srun's to set, so they go.\n"
    "while [ $# -gt 0 ]; do\n"
    "\tcase \"$1\" in\n"
    "\t--) shift; break ;;\n"
    "\t-*) shift ;;\n"
    "\t*) break ;;\n"
    "\tesac\n"
    "done\n"
    "n=${SLURM_NTASKS:-1}\n"
    "unset SLURM_PROCID SLURM_LOCALID SLURM_NODEID SLURM_STEP_ID\n"
    "exec \"$@\" --nproc-per-node \"$n\"\n";

struct local_priv {
	struct exec_opts o;
	char db_path[SLURM_PATH_MAX];
	sqlite3 *db;
};

static int write_launcher(const char *dir, char *path, size_t len, char *err, size_t errlen)
{
	snprintf(path, len, "%s/lb-srun", dir);
	FILE *f = fopen(path, "w");
	if (!f || fputs(launcher, f) < 0 || fclose(f)) {
		snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
		return -1;
	}
	chmod(path, 0755);
	return 0;
}

static int lo_submit(struct executor *x, const struct slurm_array *a, const char *script_path,
		     const char *work_dir, char *array_job_id, size_t idlen, char *err,
		     size_t errlen)
{
	struct local_priv *pv = x->priv;
	sqlite3_stmt *st = NULL;
	char dir[SLURM_PATH_MAX], lpath[SLURM_PATH_MAX + 16];
	int rc;

	snprintf(dir, sizeof(dir), "%s", script_path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	if (write_launcher(dir, lpath, sizeof(lpath), err, errlen))
		return -1;
	rc = sqlite3_prepare_v2(pv->db,
				"INSERT INTO slurm_local_arrays (script, work_dir, out_path, "
				"err_path, job_name, nodes, ntasks_per_node, gpus_per_node, "
				"time_limit_min, throttle) VALUES (?,?,?,?,?,?,?,?,?,?)",
				-1, &st, NULL);
	if (rc != SQLITE_OK)
		goto out_err;
	sqlite3_bind_text(st, 1, script_path, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, work_dir, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, a->out_path, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, a->err_path, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, a->job_name, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 6, a->nodes);
	sqlite3_bind_int(st, 7, a->ntasks_per_node);
	sqlite3_bind_int(st, 8, a->gpus_per_node);
	sqlite3_bind_int(st, 9, a->time_limit_min);
	sqlite3_bind_int(st, 10, a->throttle);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto out_err;
	sqlite3_finalize(st);
	snprintf(array_job_id, idlen, "%lld", (long long)sqlite3_last_insert_rowid(pv->db));
	return 0;
out_err:
	snprintf(err, errlen, "local executor: queueing array '%s': %s", a->job_name,
		 sqlite3_errmsg(pv->db));
	sqlite3_finalize(st);
	return -1;
}

/* ------------------------------------------------------------------ the worker */

struct running {
	int64_t job_ref;
	int64_t array_id;
	pid_t pid; /* also the process group */
	time_t start;
	int limit_s; /* 0 = none */
	int ranks;
	int gpu0, ngpu; /* CUDA_VISIBLE_DEVICES range; ngpu 0 = none */
	time_t term_at; /* SIGTERM sent (time limit) */
};

struct worker {
	sqlite3 *db;
	int slots;
	int n_gpus;
	unsigned char gpu_busy[64];
	struct running run[MAX_RUNNING];
	int n_run;
};

static int count_gpus(void)
{
	const char *env = getenv("LB_LOCAL_GPUS");
	int n = 0;
	if (env && *env && lb_parse_int(env, 0, 64, &n) == 0)
		return n;
	DIR *d = opendir("/dev");
	if (!d)
		return 0;
	for (struct dirent *e; (e = readdir(d));) {
		const char *s = e->d_name;
		if (!strncmp(s, "nvidia", 6) && s[6] >= '0' && s[6] <= '9')
			n++;
	}
	closedir(d);
	return n > 64 ? 64 : n;
}

/* Expand %A %a %j %% in an output path. */
static void expand_path(const char *in, const char *aid, int idx, int64_t ref, char *out,
			size_t len)
{
	size_t k = 0;
	for (const char *p = in; *p && k + 24 < len; p++) {
		if (*p == '%' && p[1]) {
			p++;
			if (*p == 'A')
				k += (size_t)snprintf(out + k, len - k, "%s", aid);
			else if (*p == 'a')
				k += (size_t)snprintf(out + k, len - k, "%d", idx);
			else if (*p == 'j')
				k += (size_t)snprintf(out + k, len - k, "%lld", (long long)ref);
			else
				out[k++] = *p;
		} else {
			out[k++] = *p;
		}
	}
	out[k] = '\0';
}

static void set_env_int(const char *name, long long v)
{
	char b[32];
	snprintf(b, sizeof(b), "%lld", v);
	setenv(name, b, 1);
}

/* Open path (flags; created 0644) as file descriptor fd; left as it is when it cannot be. */
static void redirect(const char *path, int flags, int fd)
{
	int f = open(path, flags, 0644);

	if (f >= 0 && f != fd) {
		dup2(f, fd);
		close(f);
	}
}

/* In the child: environment, output files, exec the script. Never returns. */
static void child_exec(const char *script, const char *work_dir, const char *out, const char *errp,
		       const char *job_name, int64_t ref, const char *aid, int idx, int nodes,
		       int ntpn, int gpu0, int ngpu, const char *lb_srun)
{
	char host[256] = "localhost";
	setpgid(0, 0);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	gethostname(host, sizeof(host) - 1);
	unsetenv("SLURM_JWT");
	unsetenv("SLURMRESTD_TOKEN");
	set_env_int("SLURM_JOB_ID", ref);
	setenv("SLURM_ARRAY_JOB_ID", aid, 1);
	set_env_int("SLURM_ARRAY_TASK_ID", idx);
	setenv("SLURM_JOB_NAME", job_name, 1);
	set_env_int("SLURM_NNODES", nodes);
	set_env_int("SLURM_JOB_NUM_NODES", nodes);
	set_env_int("SLURM_NTASKS", (long long)nodes * ntpn);
	set_env_int("SLURM_NPROCS", (long long)nodes * ntpn);
	set_env_int("SLURM_NTASKS_PER_NODE", ntpn);
	setenv("SLURM_PROCID", "0", 1);
	setenv("SLURM_LOCALID", "0", 1);
	setenv("SLURM_NODEID", "0", 1);
	setenv("SLURMD_NODENAME", host, 1);
	setenv("SLURM_JOB_NODELIST", host, 1);
	setenv("SLURM_SUBMIT_DIR", work_dir, 1);
	setenv("LB_SRUN", lb_srun, 1);
	setenv("LAYOUTBENCH_EXECUTOR", "local", 1);
	if (ngpu > 0) {
		char cvd[256];
		size_t k = 0;
		for (int g = 0; g < ngpu && k + 8 < sizeof(cvd); g++)
			k += (size_t)snprintf(cvd + k, sizeof(cvd) - k, "%s%d", g ? "," : "",
					      gpu0 + g);
		setenv("CUDA_VISIBLE_DEVICES", cvd, 1);
	}
	redirect("/dev/null", O_RDONLY, 0);
	redirect(out, O_WRONLY | O_CREAT | O_APPEND, 1);
	redirect(errp, O_WRONLY | O_CREAT | O_APPEND, 2);
	if (chdir(work_dir) != 0)
		(void)chdir("/");
	execl("/bin/bash", "bash", script, (char *)NULL);
	fprintf(stderr, "error: cannot run '%s': %s\n", script, strerror(errno));
	_exit(127);
}

static void set_final(struct worker *w, int64_t ref, const char *state, int code,
		      const char *reason)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(
		w->db,
		"UPDATE jobs SET state = ?2, exit_code = ?3, reason = NULLIF(?4, ''), "
		"end_time = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE id = ?1 AND state = "
		"'RUNNING'",
		-1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, ref);
		sqlite3_bind_text(st, 2, state, -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 3, code);
		sqlite3_bind_text(st, 4, reason, -1, SQLITE_STATIC);
		sqlite3_step(st);
	}
	sqlite3_finalize(st);
	if (sqlite3_prepare_v2(w->db, "DELETE FROM slurm_local_tasks WHERE job_ref = ?1", -1, &st,
			       NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, ref);
		sqlite3_step(st);
	}
	sqlite3_finalize(st);
}

static void reap(struct worker *w)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid <= 0)
			return;
		for (int i = 0; i < w->n_run; i++) {
			struct running *r = &w->run[i];
			if (r->pid != pid)
				continue;
			int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
			/* the job's process group may still hold the trainer's ranks */
			kill(-r->pid, SIGKILL);
			if (r->term_at)
				set_final(w, r->job_ref, "TIMEOUT", code, "time limit");
			else
				set_final(w, r->job_ref, code == 0 ? "COMPLETED" : "FAILED", code,
					  code == 0 ? "" : "NonZeroExitCode");
			for (int g = 0; g < r->ngpu; g++)
				w->gpu_busy[r->gpu0 + g] = 0;
			w->run[i] = w->run[--w->n_run];
			break;
		}
	}
}

static void enforce_limits(struct worker *w)
{
	time_t now = time(NULL);
	for (int i = 0; i < w->n_run; i++) {
		struct running *r = &w->run[i];
		if (r->limit_s > 0 && !r->term_at && now - r->start >= r->limit_s) {
			kill(-r->pid, SIGTERM);
			r->term_at = now;
		} else if (r->term_at && now - r->term_at >= KILL_WAIT_S) {
			kill(-r->pid, SIGKILL);
		}
	}
}

static int used_ranks(const struct worker *w)
{
	int n = 0;
	for (int i = 0; i < w->n_run; i++)
		n += w->run[i].ranks;
	return n;
}

static int running_in_array(const struct worker *w, int64_t aid)
{
	int n = 0;
	for (int i = 0; i < w->n_run; i++)
		n += w->run[i].array_id == aid;
	return n;
}

/* Find n consecutive free GPUs; -1 if none. */
static int take_gpus(struct worker *w, int n)
{
	for (int s = 0; s + n <= w->n_gpus; s++) {
		int ok = 1;
		for (int g = 0; g < n; g++)
			ok &= !w->gpu_busy[s + g];
		if (ok) {
			for (int g = 0; g < n; g++)
				w->gpu_busy[s + g] = 1;
			return s;
		}
	}
	return -1;
}

/* Start pending jobs while slots allow. Returns the number still pending. */
static int start_pending(struct worker *w)
{
	sqlite3_stmt *st = NULL, *claim = NULL, *rec = NULL;
	int pending = 0;
	static const char q[] =
	    "SELECT j.id, j.array_job_id, j.array_index, a.id, a.script, a.work_dir, a.out_path, "
	    "a.err_path, a.job_name, a.nodes, a.ntasks_per_node, a.gpus_per_node, "
	    "a.time_limit_min, a.throttle FROM jobs j JOIN slurm_local_arrays a ON a.id = "
	    "CAST(j.array_job_id AS INTEGER) WHERE j.executor = 'local' AND j.state = 'PENDING' "
	    "ORDER BY j.id";

	if (sqlite3_prepare_v2(w->db, q, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(w->db,
			       "UPDATE jobs SET state = 'RUNNING', start_time = "
			       "strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE id = ?1 AND state = "
			       "'PENDING'",
			       -1, &claim, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(w->db,
			       "INSERT OR REPLACE INTO slurm_local_tasks (job_ref, pid) VALUES "
			       "(?1, ?2)",
			       -1, &rec, NULL) != SQLITE_OK)
		goto out;
	while (sqlite3_step(st) == SQLITE_ROW) {
		int64_t ref = sqlite3_column_int64(st, 0);
		const char *aid = (const char *)sqlite3_column_text(st, 1);
		int idx = sqlite3_column_int(st, 2);
		int64_t array_id = sqlite3_column_int64(st, 3);
		int nodes = sqlite3_column_int(st, 9), ntpn = sqlite3_column_int(st, 10);
		int gpn = sqlite3_column_int(st, 11), limit = sqlite3_column_int(st, 12);
		int throttle = sqlite3_column_int(st, 13);
		int ranks = nodes * ntpn, gpu0 = 0, ngpu = 0;

		pending++;
		if (w->n_run >= MAX_RUNNING)
			continue;
		if (w->n_run > 0 && used_ranks(w) + ranks > w->slots)
			continue;
		if (throttle > 0 && running_in_array(w, array_id) >= throttle)
			continue;
		if (gpn > 0 && w->n_gpus > 0) {
			ngpu = nodes * gpn > w->n_gpus ? w->n_gpus : nodes * gpn;
			gpu0 = take_gpus(w, ngpu);
			if (gpu0 < 0)
				continue;
		}
		sqlite3_reset(claim);
		sqlite3_bind_int64(claim, 1, ref);
		if (sqlite3_step(claim) != SQLITE_DONE || sqlite3_changes(w->db) != 1) {
			for (int g = 0; g < ngpu; g++)
				w->gpu_busy[gpu0 + g] = 0;
			continue; /* cancelled meanwhile */
		}
		char out[SLURM_PATH_MAX], errp[SLURM_PATH_MAX], lb_srun[SLURM_PATH_MAX + 16];
		const char *script = (const char *)sqlite3_column_text(st, 4);
		expand_path((const char *)sqlite3_column_text(st, 6), aid ? aid : "0", idx, ref,
			    out, sizeof(out));
		expand_path((const char *)sqlite3_column_text(st, 7), aid ? aid : "0", idx, ref,
			    errp, sizeof(errp));
		snprintf(lb_srun, sizeof(lb_srun), "%s", script);
		char *slash = strrchr(lb_srun, '/');
		snprintf(slash ? slash + 1 : lb_srun,
			 sizeof(lb_srun) - (size_t)(slash ? slash + 1 - lb_srun : 0), "lb-srun");
		pid_t pid = fork();
		if (pid == 0)
			child_exec(script, (const char *)sqlite3_column_text(st, 5), out, errp,
				   (const char *)sqlite3_column_text(st, 8), ref, aid ? aid : "0",
				   idx, nodes, ntpn, gpu0, ngpu, lb_srun);
		if (pid < 0) {
			set_final(w, ref, "FAILED", 126, "fork failed");
			continue;
		}
		setpgid(pid, pid);
		struct running *r = &w->run[w->n_run++];
		memset(r, 0, sizeof(*r));
		r->job_ref = ref;
		r->array_id = array_id;
		r->pid = pid;
		r->start = time(NULL);
		r->limit_s = limit > 0 ? limit * 60 : 0;
		r->ranks = ranks;
		r->gpu0 = gpu0;
		r->ngpu = ngpu;
		sqlite3_reset(rec);
		sqlite3_bind_int64(rec, 1, ref);
		sqlite3_bind_int64(rec, 2, pid);
		sqlite3_step(rec);
		pending--;
	}
out:
	sqlite3_finalize(st);
	sqlite3_finalize(claim);
	sqlite3_finalize(rec);
	return pending;
}

static int lock_path(const char *db_path, char *buf, size_t len)
{
	return snprintf(buf, len, "%s.local-worker.lock", db_path) >= (int)len ? -1 : 0;
}

/* Take the worker lock without waiting: fd on success, -1 when another worker holds it. */
static int try_lock(const char *db_path)
{
	char path[SLURM_PATH_MAX + 32];
	if (lock_path(db_path, path, sizeof(path)))
		return -1;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int count_pending(sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	int n = 0;
	if (sqlite3_prepare_v2(db,
			       "SELECT COUNT(*) FROM jobs WHERE executor = 'local' AND state = "
			       "'PENDING'",
			       -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return n;
}

static void worker_main(const char *db_path, int slots)
{
	struct worker w;
	char err[256];
	int lock = try_lock(db_path);

	if (lock < 0)
		return; /* another worker runs this database's queue */
	memset(&w, 0, sizeof(w));
	if (results_open(db_path, &w.db, err, sizeof(err))) {
		fprintf(stderr, "error: local worker: %s\n", err);
		return;
	}
	w.n_gpus = count_gpus();
	w.slots = slots;
	signal(SIGPIPE, SIG_IGN);
	for (;;) {
		reap(&w);
		enforce_limits(&w);
		int pending = start_pending(&w);
		if (w.n_run == 0 && pending == 0) {
			/* release, then look once more: a submitter that failed to take the
			 * lock while we held it left its jobs for us */
			flock(lock, LOCK_UN);
			close(lock);
			if (count_pending(w.db) == 0 || (lock = try_lock(db_path)) < 0)
				break;
			continue;
		}
		struct timespec ts = {0, 200 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	results_close(w.db);
}

/* Ranks that run at once: --slots, else 1. Timed runs do not share the machine unless
 * asked: jobs run side by side measure each other (the quickstart's speed table ranked
 * layouts by contention when every core ran one). */
static int default_slots(const struct exec_opts *o)
{
	return o->local_slots > 0 ? o->local_slots : 1;
}

/*
 * Start a detached worker (double fork + setsid): it outlives this process. The worker
 * is a fresh program (`layoutbench submit --local-worker`), not a forked copy: SQLite's
 * lock bookkeeping must not cross a fork() while this process has the database open.
 */
static int lo_start(struct executor *x, char *err, size_t errlen)
{
	struct local_priv *pv = x->priv;
	char slots[16], logp[SLURM_PATH_MAX + 32], self[SLURM_PATH_MAX];
	const char *bin = getenv("LAYOUTBENCH_BIN");
	pid_t pid;

	if (bin && *bin) {
		snprintf(self, sizeof(self), "%s", bin);
	} else {
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n <= 0) {
			snprintf(err, errlen,
				 "local executor: cannot find this program "
				 "(set LAYOUTBENCH_BIN to the layoutbench binary)");
			return -1;
		}
		self[n] = '\0';
	}
	snprintf(slots, sizeof(slots), "%d", default_slots(&pv->o));
	snprintf(logp, sizeof(logp), "%s.local-worker.log", pv->db_path);
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "local executor: fork failed: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		setsid();
		pid_t p2 = fork();
		if (p2 != 0)
			_exit(p2 < 0 ? 1 : 0);
		redirect("/dev/null", O_RDONLY, 0);
		redirect("/dev/null", O_WRONLY, 1);
		redirect(logp, O_WRONLY | O_CREAT | O_APPEND, 2);
		for (int i = 3; i < 1024; i++)
			close(i);
		execl(self, "layoutbench", "submit", "--local-worker", "--db", pv->db_path,
		      "--slots", slots, (char *)NULL);
		fprintf(stderr, "error: local executor: cannot run '%s': %s\n", self,
			strerror(errno));
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return 0;
}

int exec_local_worker(const char *db_path, int slots)
{
	if (slots <= 0) {
		struct exec_opts o = {0};
		slots = default_slots(&o);
	}
	worker_main(db_path, slots);
	return 0;
}

static int worker_alive(const char *db_path)
{
	int fd = try_lock(db_path);
	if (fd < 0)
		return 1;
	close(fd);
	return 0;
}

static int lo_poll(struct executor *x, const struct results_job *jobs, size_t n,
		   struct exec_state *out, char *err, size_t errlen)
{
	struct local_priv *pv = x->priv;
	sqlite3_stmt *st = NULL;
	int alive = worker_alive(pv->db_path), restart = 0;

	if (sqlite3_prepare_v2(pv->db,
			       "SELECT state, COALESCE(reason, ''), COALESCE(exit_code, -1), "
			       "COALESCE(CAST(strftime('%s', start_time) AS INTEGER), 0), "
			       "COALESCE(CAST(strftime('%s', end_time) AS INTEGER), 0) FROM jobs "
			       "WHERE id = ?1",
			       -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "local executor: %s", sqlite3_errmsg(pv->db));
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].exit_code = -1;
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, jobs[i].id);
		if (sqlite3_step(st) != SQLITE_ROW)
			continue;
		out[i].known = 1;
		snprintf(out[i].state, sizeof(out[i].state), "%s", sqlite3_column_text(st, 0));
		snprintf(out[i].reason, sizeof(out[i].reason), "%s", sqlite3_column_text(st, 1));
		out[i].exit_code = sqlite3_column_int(st, 2);
		out[i].start_time = sqlite3_column_int64(st, 3);
		out[i].end_time = sqlite3_column_int64(st, 4);
		if (!alive && !strcmp(out[i].state, "RUNNING")) {
			/* the worker died under it (machine restart, kill -9) */
			snprintf(out[i].state, sizeof(out[i].state), "NODE_FAIL");
			snprintf(out[i].reason, sizeof(out[i].reason), "the local worker is gone");
		}
		if (!alive && !strcmp(out[i].state, "PENDING"))
			restart = 1;
	}
	sqlite3_finalize(st);
	if (restart)
		return lo_start(x, err, errlen);
	return 0;
}

static int lo_cancel(struct executor *x, const struct results_job *jobs, size_t n, char *err,
		     size_t errlen)
{
	struct local_priv *pv = x->priv;
	sqlite3_stmt *pend = NULL, *pid = NULL;
	int rc = 0;

	if (sqlite3_prepare_v2(pv->db,
			       "UPDATE jobs SET state = 'CANCELLED', reason = 'cancelled', "
			       "end_time = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE id = ?1 AND "
			       "state IN ('PENDING', 'RUNNING')",
			       -1, &pend, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(pv->db, "SELECT pid FROM slurm_local_tasks WHERE job_ref = ?1", -1,
			       &pid, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "local executor: %s", sqlite3_errmsg(pv->db));
		rc = -1;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		sqlite3_reset(pid);
		sqlite3_bind_int64(pid, 1, jobs[i].id);
		pid_t p = sqlite3_step(pid) == SQLITE_ROW ? (pid_t)sqlite3_column_int64(pid, 0) : 0;
		sqlite3_reset(pend);
		sqlite3_bind_int64(pend, 1, jobs[i].id);
		sqlite3_step(pend);
		if (p > 1 && sqlite3_changes(pv->db) == 1)
			kill(-p, SIGTERM); /* the worker reaps it; the state stays CANCELLED */
	}
out:
	sqlite3_finalize(pend);
	sqlite3_finalize(pid);
	return rc;
}

static void lo_close(struct executor *x)
{
	struct local_priv *pv = x->priv;
	results_close(pv->db);
	free(pv);
	free(x);
}

static const struct executor local_ops = {
    .name = "local",
    .max_array = SLURM_DEFAULT_MAX_ARRAY,
    .submit = lo_submit,
    .start = lo_start,
    .poll = lo_poll,
    .cancel = lo_cancel,
    .close = lo_close,
};

int exec_local_open(const struct exec_opts *o, struct executor **out, char *err, size_t errlen)
{
	struct executor *x = calloc(1, sizeof(*x));
	struct local_priv *pv = calloc(1, sizeof(*pv));
	const char *path = o->db_path ? o->db_path : results_default_db();

	*out = NULL;
	if (!x || !pv) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	pv->o = *o;
	if (path[0] == '/') {
		snprintf(pv->db_path, sizeof(pv->db_path), "%s", path);
	} else {
		char cwd[SLURM_PATH_MAX / 2];
		if (!getcwd(cwd, sizeof(cwd))) {
			snprintf(err, errlen, "cannot read the current directory: %s",
				 strerror(errno));
			goto out_free;
		}
		snprintf(pv->db_path, sizeof(pv->db_path), "%s/%s", cwd, path);
	}
	if (results_open(pv->db_path, &pv->db, err, errlen)) /* its tables: schema.sql step 3 */
		goto out_free;
	*x = local_ops;
	x->priv = pv;
	*out = x;
	return 0;
out_free:
	free(pv);
	free(x);
	return -1;
}
