/*
 * The report's halving section (`report --figure halving`, and part of `all` where the
 * database has a halving): each successive halving (slurm/halving.h, docs/halving.md) as
 * the views halving_rung_summary, halving_layouts and halving_cost show it: its rungs
 * (steps, layouts, what became of them, what they cost), what it spent against the full
 * grid, and per rung and group every layout's verdict with the statistics behind it (its
 * median step time, how much slower than the cut, the rank test's p); on the last rung,
 * whether each layout differs from the fastest of its group. Loading is this module's
 * only SQL; rendering (markdown, CSV, HTML) is pure. Formats: docs/report.md.
 */
#ifndef LB_REPORT_HALVING_H
#define LB_REPORT_HALVING_H

#include <stddef.h>

#include <sqlite3.h>

#include "common/util.h"

/* Its name among the report's figures (--figure halving): a section, not a report_kind. */
#define REPORT_HALVING_NAME "halving"

struct report_halving_rung {
	int rung, steps;
	char *state; /* pending, running, decided */
	int layouts, kept, noise, dropped, failed, final, pending;
	double gpu_seconds; /* < 0 unknown (nothing ran yet) */
};

struct report_halving_member {
	int rung, steps;
	char *grp, *layout_id, *label, *checkpointing, *verdict, *cut_layout, *failure_class;
	int micro_batch, tp, pp, dp;
	int rank;	    /* 0 when failed or pending */
	int n_steps;	    /* steady-state steps; -1 unknown */
	double median;	    /* seconds; < 0 unknown */
	double cut_median;  /* seconds; < 0 when untested */
	double slowdown;    /* median / cut median - 1; NAN when untested */
	double p;	    /* < 0 when untested */
	int significant;    /* 1, 0, or -1 when untested */
	double gpu_seconds; /* < 0 unknown */
};

struct report_halving {
	long id;
	char *sweep, *state, *message, *executor, *steps; /* steps: "6, 8, 10, 14" */
	int eta, n_rungs;
	double alpha, margin;
	int gpu; /* 1: GPU-hours; 0: CPU-rank-hours (its runs ran on the CPU) */
	int layouts, runs, full_steps;
	double spent, full_est; /* GPU seconds; < 0 unknown */
	struct report_halving_rung *rungs;
	size_t n_rung_rows;
	struct report_halving_member *members; /* by rung, group, rank */
	size_t n_members;
};

struct report_halvings {
	struct report_halving *v;
	size_t n;
};

/* Load every halving (sweep: only that sweep's; NULL: all) in sweep and id order. A
 * database without the halving views (older, or views only) has none. Returns 0 (release
 * hs with report_halving_release either way), or -1 with err set. */
int report_halving_load(sqlite3 *db, const char *sweep, struct report_halvings *hs, char *err,
			size_t errlen);
void report_halving_release(struct report_halvings *hs);

/* The section as markdown ("## Successive halving (halving)", a table of rungs and one of
 * layouts per rung and group), as CSV (one row per layout and rung; header in
 * docs/report.md), and as an HTML <section id="halving">. With no halving: the heading
 * and "No halving in this database." (markdown, HTML), the header alone (CSV). */
void report_halving_md(struct lb_strbuf *sb, const struct report_halvings *hs);
void report_halving_csv(struct lb_strbuf *sb, const struct report_halvings *hs);
void report_halving_html(struct lb_strbuf *sb, const struct report_halvings *hs);

#endif
