/*
 * Putting layouts into the queue: plan entries rendered into job arrays (slurm/render.h),
 * their scripts written, submitted through an executor (slurm/exec.h) and recorded, one
 * jobs row per task. Every way of submitting goes through here: `submit`
 * (slurm/submit.h), `resubmit` (slurm/resubmit.c) and each rung of a successive halving
 * (slurm/halving.h), so that every executor runs the same code.
 */
#ifndef LB_SLURM_ENQUEUE_H
#define LB_SLURM_ENQUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "results/db.h"
#include "slurm/exec.h"
#include "sweeps/sweep.h"

/* What enqueue_layouts submitted. */
struct enqueued {
	int64_t *rows; /* jobs.id of every task submitted (malloc'd; the caller frees) */
	size_t n;
	size_t n_arrays;
};

/*
 * Render plan entries sel[0..n_sel) of p into arrays (throttle and max_array as in
 * submit_opts; max_array 0: the executor's), write the scripts under
 * <runs>/<sweep>/scripts, submit them through x and record the layouts and one jobs row
 * per task, each the layout's next attempt. Returns 0, or -1 with err set (arrays
 * submitted before the failure stay recorded in out). Free out->rows either way.
 */
int enqueue_layouts(sqlite3 *db, struct executor *x, const struct sweep_plan *p, const size_t *sel,
		    size_t n_sel, const char *runs, int throttle, int max_array, int quiet,
		    struct enqueued *out, char *err, size_t errlen);

/*
 * The lock under which submissions to one database take turns: deciding what is done or
 * in flight and recording the jobs of what was submitted happen while it is held, so two
 * submits (or resubmits) started at once never both submit a layout, whatever the
 * executor. A file beside the database, <db>.submit.lock, locked with flock(2) (released
 * when the process ends, however it ends). Waits for another holder, saying so once on
 * stderr unless quiet. Returns the lock's descriptor (>= 0), or -1 with err set.
 */
int enqueue_lock(const char *db_path, int quiet, char *err, size_t errlen);
/* Release a lock from enqueue_lock (-1 is fine). */
void enqueue_unlock(int fd);

#endif
