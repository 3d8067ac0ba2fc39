/*
 * The plan's writers: every layout of a sweep plan with its status (ok, oom with the
 * predicted need, invalid with the reason) as a table, CSV or JSON, then a summary:
 * counts and, when the spec guesses a step time, the GPU-hours of the runnable layouts.
 * Formats: docs/spec.md ("Output of `layoutbench plan`").
 */
#ifndef LB_SWEEPS_PLAN_PRINT_H
#define LB_SWEEPS_PLAN_PRINT_H

#include <stddef.h>
#include <stdio.h>

#include "sweeps/plan_predict.h"
#include "sweeps/sweep.h"

enum plan_format { PLAN_TABLE, PLAN_CSV, PLAN_JSON };

/* "table", "csv" or "json": 0 and *fmt set, or -1. */
int plan_format_parse(const char *s, enum plan_format *fmt);

/*
 * Write plan p to out in fmt, then its summary: to out after a table, to diag after CSV
 * or JSON (so that out holds only the data); a warning goes to stderr when a GPU sweep
 * sets no GPU memory. Returns 0, or -1 with err set (out of memory, a write failed).
 */
int plan_print(FILE *out, FILE *diag, const struct sweep_plan *p, enum plan_format fmt, char *err,
	       size_t errlen);

/* What `plan` adds: the predictions (columns step_s, mfu and gpu_h before the status in
 * the table; predicted_step_s, predicted_mfu, predicted_gpu_hours after the reason in CSV;
 * a "predicted" object per entry in JSON; a summary line) and the order of the entries. */
struct plan_print_opts {
	const struct plan_predictions *pred; /* NULL: no prediction columns */
	const size_t *order;		     /* NULL: spec order */
};
int plan_print_ex(FILE *out, FILE *diag, const struct sweep_plan *p, enum plan_format fmt,
		  const struct plan_print_opts *o, char *err, size_t errlen);

#endif
