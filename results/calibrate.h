/*
 * `layoutbench calibrate`: the measured runs of sweeps, read from the database as fit rows
 * (layout, label, mean steady-state step time, measured MFU), the fit of a machine's
 * terms to them (common/predict.h), the report with every run's residual, the
 * leave-one-sweep-out validation, and the machine file written (common/machine.h).
 */
#ifndef LB_RESULTS_CALIBRATE_H
#define LB_RESULTS_CALIBRATE_H

#include "common/cmdline.h"

#include <stddef.h>
#include <stdio.h>

#include <sqlite3.h>

#include "common/predict.h"
#include "common/util.h"

/* The ok runs of some sweeps. */
/* A sweep's runs that calib_load leaves out or uses despite a flaw. */
struct calib_sweep_counts {
	int oom;       /* runs that ran out of memory (no measurement) */
	int other;     /* runs that failed otherwise: left out, counted */
	int rose;      /* ok runs whose loss rose, used: their layout has no other */
	int rose_left; /* ok runs whose loss rose, left out for a healthy run of the same
			  layout */
	int bound_pairs; /* pairs of its runs differing in the micro-batch only, pp > 1 */
	int bound_over;	 /* of them, the larger over the pipeline bound by more than 5% */
};

struct calib_set {
	struct lb_fit_row *rows; /* group: the sweep's name in sweeps[] */
	double *mfu;		 /* measured MFU of each row (the sheet's, else ours); NaN unknown */
	char (*layout_id)[LB_ID_LEN + 1];
	size_t n;
	char **sweeps; /* the sweeps asked for, in order (owned) */
	size_t n_sweeps;
	struct calib_sweep_counts *counts; /* per sweep, as sweeps[] */
	char gpu[64]; /* the GPU the runs name (the first that names one) */
};

/* Read the ok runs of sweeps[0..n) (each must exist) from db. A run whose loss rose (its
 * last step's loss above its first's: diverged, and measured 1-4.5% faster than a healthy
 * run of its layout on the H200) is left out when a healthy run of the same layout is
 * there, and used (counted in counts[].rose) when none is; an imported run, without steps,
 * counts as healthy. Returns 0, or -1 with err set. Free with calib_set_free (also after
 * a failure). */
int calib_load(sqlite3 *db, const char *const *sweeps, size_t n, struct calib_set *out, char *err,
	       size_t errlen);
void calib_set_free(struct calib_set *s);

/* Scores of the rows idx[0..n) of s predicted on m (rows that cannot be predicted are
 * left out; *n_pred gets how many were predicted). */
void calib_score(const struct lb_machine *m, const struct calib_set *s, const size_t *idx,
		 size_t n, struct lb_pred_score *out, size_t *n_pred);

/*
 * Leave each sweep of s out in turn: fit a copy of base (the terms the other sweeps can
 * tell apart, or only those o->free allows when only_given) on the other sweeps' runs and
 * score the left-out sweep's. Writes one markdown table row per sweep to f (the header
 * first). Returns 0, or -1 with err set.
 */
int calib_holdout(FILE *f, const struct lb_machine *base, const struct calib_set *s,
		  const struct lb_fit_opts *o, int only_given, double huber, char *err,
		  size_t errlen);

/* A pair of a sweep's runs over the pipeline bound (lb_pipeline_bound): rows lo and hi
 * (the first run of each; runs of one layout and label averaged), their mean step times. */
struct calib_bound_pair {
	size_t lo, hi;
	double lo_s, hi_s, bound;
};

/* Over this fraction a pair is over the pipeline bound. */
#define CALIB_BOUND_SLACK 0.05

/*
 * Check every pair of s's runs of one sweep and label whose layouts differ in the
 * micro-batch only (pp > 1) against the pipeline bound: s->counts[k].bound_pairs and
 * .bound_over per sweep, and *over (malloc'd, *n_over entries; free it) the pairs whose
 * larger micro-batch's step is over the bound by more than CALIB_BOUND_SLACK, sweep by
 * sweep. Such a run is slower than any pipeline schedule the model knows makes it.
 * Returns 0, or -1 out of memory.
 */
int calib_bound_pairs(struct calib_set *s, struct calib_bound_pair **over, size_t *n_over);

/* What a pair over the pipeline bound is, one sentence for calibrate's report and the
 * report's figure: a printf format taking the slack in percent (100 * CALIB_BOUND_SLACK). */
#define CALIB_BOUND_WHAT                                                                        \
	"of two runs of one sweep and label whose layouts differ in the micro-batch only, the "    \
	"larger is slower than 1F1B allows by more than %.0f%%: at most (N + (p-1) b2/v) / (N + "  \
	"(p-1) b1/v) times the smaller (N: a data-parallel rank's samples a step) where a sample " \
	"takes no longer in a larger micro-batch. No fitted term follows such a run; look at its " \
	"pipeline schedule, its memory or its nodes"

/* The pairs over (calib_bound_pairs) as a markdown table: sweep, label, the larger run's
 * layout, tp, pp, dp, checkpointing, the micro-batches, both step times, their ratio, the
 * bound and how far over it. Text cells go through escape (NULL: as they are). */
void calib_bound_md(struct lb_strbuf *sb, const struct calib_set *s,
		    const struct calib_bound_pair *over, size_t n_over,
		    void (*escape)(struct lb_strbuf *sb, const char *text));

/* `layoutbench calibrate` (its options: the table beside it); argv[0] is the name. */
extern const struct lb_command cmd_calibrate;

#endif
