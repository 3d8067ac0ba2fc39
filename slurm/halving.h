/*
 * Successive halving: a submission policy over any executor (docs/halving.md). Rung 0
 * runs every candidate layout of a sweep for few steps; each rung keeps, within each
 * group of comparable layouts (same model, sequence length, global batch and GPU count:
 * the same work per step on the same GPUs), the fastest ceil(n/eta) by median
 * steady-state step time, and also every layout that is not slower than that cut beyond
 * noise (the rank test of common/ranktest.h at level alpha, with a margin for the
 * difference between two runs of one layout); the others are dropped, a layout that
 * failed (out of memory, ...) with its class. The next rung runs the survivors for more
 * steps; the last runs the spec's steps and is not cut: its layouts are compared with the
 * fastest of their group. Rung r's steps grow geometrically in steady-state steps from
 * --min-steps to the spec's.
 *
 * The pure core (the schedule, the groups, the decision of a rung) is separate from the
 * shell that keeps the state in the results database (tables halvings, halving_rungs,
 * halving_members: results/schema.sql) and submits each rung through enqueue_layouts, so
 * that every executor runs the same policy and a --wait that was left is resumed by
 * `status` (halving_advance, one step at a time, from what the database says).
 */
#ifndef LB_SLURM_HALVING_H
#define LB_SLURM_HALVING_H

#include <stddef.h>
#include <stdint.h>

#include "results/db.h"
#include "slurm/track.h"
#include "sweeps/sweep.h"

#define HALVING_MAX_RUNGS      32
#define HALVING_DEFAULT_ALPHA  0.05
#define HALVING_DEFAULT_MARGIN 0.02
/* steady-state steps of rung 0 when --min-steps is not given: with 4 a side the rank
 * test reaches p = 1/70 = 0.014, below the default level with room */
#define HALVING_DEFAULT_MIN_TIMED 4
/* jobs a layout gets on one rung when the scheduler, not the layout, failed it
 * (node_fail, preempted) */
#define HALVING_MAX_TRIES 2

struct halving_params {
	int eta;	/* each rung keeps the fastest ceil(n/eta) of a group; >= 2 */
	int n_rungs;	/* rungs, the last at the spec's steps; 0 = halving_schedule's */
	int min_steps;	/* rung 0's steps, warm-up included; 0 = warmup + 4 */
	int full_steps; /* the spec's steps (the last rung's) */
	int warmup;	/* the spec's warm-up steps (on every rung; not in the statistics) */
	double alpha;	/* the rank test's level, (0, 0.5] */
	double margin;	/* relative slowdown within noise, [0, 10] */
};

/*
 * Fill in the schedule: n_rungs when 0 (1 + floor(log_eta(largest group)), so that the
 * last rung holds about one layout per group, at least 2, and no more than the steps
 * allow), min_steps when 0, and steps[0..n_rungs) (rung r: warmup + T_r steps, T_r the
 * geometric mean between rung 0's and the spec's steady-state steps, rounded, strictly
 * growing; the last is full_steps). Returns 0, or -1 with err naming the fault and its
 * fix (eta below 2, min_steps not above warmup or above full_steps, more rungs than
 * distinct step counts).
 */
int halving_schedule(struct halving_params *hp, size_t largest_group, int steps[HALVING_MAX_RUNGS],
		     char *err, size_t errlen);

/* The group of a layout: the fields that make two layouts' step times comparable, as text
 * (exact: key) and as a label for people ("tiny L4 h64, seq 64, batch 8, 1 GPU"). */
void halving_group_key(const struct lb_layout *l, char *buf, size_t len);
void halving_group_label(const struct lb_layout *l, char *buf, size_t len);

enum halving_verdict {
	HALVING_PENDING = 0,
	HALVING_KEPT,	 /* among the fastest ceil(n/eta) of its group */
	HALVING_NOISE,	 /* slower than the cut, not beyond noise: goes on */
	HALVING_DROPPED, /* slower than the cut beyond noise */
	HALVING_FAILED,	 /* no measurement: failure_class says why */
	HALVING_FINAL,	 /* measured on the last rung */
};
const char *halving_verdict_name(enum halving_verdict v); /* "kept", ... as in the table */

/* One layout on a rung, as the decision sees it. */
struct halving_member {
	char layout_id[LB_ID_LEN + 1];
	int group;		/* its group's number; members compete within one */
	char failure_class[24]; /* "" when its run measured; else why it did not */
	const double *times;	/* its steady-state step times, seconds (not owned) */
	size_t n_times;		/* 0 with failure_class "" counts as "unmeasured" */
	/* decided by halving_decide: */
	enum halving_verdict verdict;
	int rank;	  /* 1 = fastest median in the group; 0 when failed */
	double median;	  /* seconds; 0 when failed */
	int cut;	  /* index of the member it was tested against; -1 none */
	double u, p;	  /* the test's U and one-sided p (p 1 when untested) */
	int exact;	  /* 1: exact p */
	int significant;  /* 1: slower than the cut beyond noise; -1 untested */
	char reason[320]; /* the verdict in words */
};

/*
 * Decide a rung: in each group, members that failed are FAILED; the others rank by
 * median step time (ties by layout id). Not the last rung: the fastest ceil(n/eta) of
 * the n that entered the group's rung are KEPT (the slowest of them is the cut); each
 * slower one is tested against the cut (lb_ranktest_slower with margin): DROPPED when
 * p < alpha, NOISE otherwise. Last rung: every measured member is FINAL, each tested
 * against the group's fastest (significant: it is slower beyond noise). Pure. Returns 0,
 * or -1 when memory ran out.
 */
int halving_decide(struct halving_member *m, size_t n, int eta, double alpha, double margin,
		   int last);

/* What to submit: the options of `submit` that a halving keeps. */
struct halving_opts {
	struct halving_params params; /* eta, n_rungs, min_steps, alpha, margin as given */
	const char *executor;	      /* "slurm", "rest" or "local" */
	const char *runs;	      /* the absolute runs folder */
	int throttle, max_array, quiet;
};

/*
 * `submit --dry-run --halving`: print the schedule of a halving over plan entries
 * sel[0..n_sel) (its groups, and per rung the steps, the layouts it would run if every
 * cut took exactly 1/eta and the GPU-hours from the spec's step_time_guess_s), against
 * the full grid (every candidate at the spec's steps). Returns 0, or -1 with err set.
 */
int halving_dry_run(const struct sweep_plan *p, const size_t *sel, size_t n_sel,
		    const struct halving_opts *o, char *err, size_t errlen);

/*
 * Start a halving of plan p over the candidates sel[0..n_sel) (the runnable layouts that
 * submit selected; a narrower list, such as predicted best layouts, narrows rung 0):
 * record it with the spec text (the sweep row must exist), and submit rung 0 through
 * the executor es opens by o->executor. *id gets its row id. Returns 0, or -1 with err
 * set (nothing recorded when the schedule or the first submission failed before any job).
 */
int halving_start(sqlite3 *db, struct exec_set *es, const struct sweep_plan *p,
		  const char *spec_text, const size_t *sel, size_t n_sel,
		  const struct halving_opts *o, int64_t *id, char *err, size_t errlen);

/* The newest halving of a sweep: 1 and *id and its state ("running", "done",
 * "cancelled"), 0 when the sweep has none, -1 with err set. */
int halving_latest(sqlite3 *db, const char *sweep, int64_t *id, char *state, size_t slen, char *err,
		   size_t errlen);

/* Where a halving stands, for the progress line. */
struct halving_progress {
	char sweep[LB_NAME_MAX];
	int rung, n_rungs, steps; /* the current rung (the last when done) and its steps */
	char state[16];		  /* "running", "done", "cancelled" */
	struct track_counts jobs; /* the current rung's jobs */
	int decided;		  /* the rung this call decided; -1 none */
	int retried;		  /* layouts this call gave one more job (node_fail, preempted) */
};

/*
 * One step of a halving, as `status` and --wait take it: poll the current rung's jobs
 * (collecting and classing the finished ones); submit members that have no job yet (a
 * rung made but not submitted before an interruption) and, once, members whose job the
 * scheduler lost (node_fail, preempted); when every job of the rung has settled, read
 * their steady-state step times, decide the rung, record the verdicts, and make and
 * submit the next rung, or end the halving. A cancelled job ends it as cancelled. Safe
 * to call at any time, from any process, again after a crash: each decision is one
 * transaction. Returns 0 and *pr; -1 with err set when an executor could not be asked
 * (it may answer later); -2 with err set on a database or submission error.
 */
int halving_advance(sqlite3 *db, struct exec_set *es, int64_t id, struct halving_progress *pr,
		    char *err, size_t errlen);

/*
 * Advance the halving once a second until it ends, with a progress line on stderr
 * (unless quiet) and each rung's outcome when it is decided. Returns 0 when it is done, 1
 * when it was cancelled or no layout reached the last rung, -1 with err set on an error.
 */
int halving_wait(sqlite3 *db, struct exec_set *es, int64_t id, int quiet, char *err, size_t errlen);

/* Print a halving's rungs (steps, layouts, kept, within noise, dropped, failed) and, when
 * done, the fastest layout of each group, to f. Returns 0, or -1 with err set. */
int halving_print(sqlite3 *db, int64_t id, FILE *f, char *err, size_t errlen);

/* Mark the running halvings of a sweep cancelled (`cancel`). Returns the number, or -1
 * with err set. */
int halving_cancel_sweep(sqlite3 *db, const char *sweep, char *err, size_t errlen);

/*
 * `submit --halving`: the policy's part of submit_sweep. sel[0..n_sel) are the runnable
 * layouts of p (every PLAN_OK entry: a halving decides itself what has run). A sweep
 * whose newest halving is running resumes it (with --wait, follows it to the end); one
 * that is done starts again only with force. Returns as submit_sweep does.
 */
int halving_submit(sqlite3 *db, struct exec_set *es, const struct sweep_plan *p,
		   const char *spec_text, const size_t *sel, size_t n_sel,
		   const struct halving_opts *o, int wait, int force, char *err, size_t errlen);

/* A plain submit of a sweep that a running halving drives would run its layouts beside
 * it: 0 when the sweep has no running halving, -1 with err naming the halving and what
 * to do instead (also on a database error). */
int halving_refuse_plain(sqlite3 *db, const char *sweep, char *err, size_t errlen);

#endif
