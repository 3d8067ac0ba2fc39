/*
 * Putting layouts into the queue (slurm/enqueue.h): render the job arrays, write their
 * scripts, hand them to an executor and record one jobs row per task; and the lock under
 * which submissions to one database take turns.
 */
#include "slurm/enqueue.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "results/jobs.h"
#include "slurm/render.h"

int enqueue_lock(const char *db_path, int quiet, char *err, size_t errlen)
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

void enqueue_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* the lock goes with the descriptor */
}

int enqueue_layouts(sqlite3 *db, struct executor *x, const struct sweep_plan *p, const size_t *sel,
		    size_t n_sel, const char *runs, int throttle, int max_array, int quiet,
		    struct enqueued *out, char *err, size_t errlen)
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
