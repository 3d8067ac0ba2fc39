/*
 * A plan's predictions: the step time, MFU and GPU-hours common/predict.h gives each
 * layout that fits, on the machine named or the one shipped for the spec's GPU, and the
 * orders `plan --sort` and `submit --top` take from them. The printers show them
 * (sweeps/plan_print.h).
 */
#ifndef LB_SWEEPS_PLAN_PREDICT_H
#define LB_SWEEPS_PLAN_PREDICT_H

#include <stddef.h>

#include "common/predict.h"
#include "sweeps/sweep.h"

struct plan_pred {
	int ok; /* 1: predicted (a layout that fits, on a machine that has its kernels) */
	double step_s;
	double mfu;	  /* fraction */
	double gpu_hours; /* step_s x the layout's steps x its GPUs */
};

struct plan_predictions {
	struct plan_pred *p; /* one per plan entry (NULL: no machine) */
	size_t n;
	char machine[64];   /* the machine's name ("" none) */
	int calibrated;	    /* the machine's terms were fitted to runs */
	int nominal;	    /* its tables are nominal */
	char note[512];	    /* why there are none, or what could not be predicted */
	size_t n_pred;	    /* entries predicted */
	size_t n_unpredicted; /* ok entries that could not be: note says why (the first) */
	size_t best;	      /* the entry with the best predicted MFU (n_pred > 0) */
};

/*
 * The machine for plan p: the one named (a shipped name or a file), else the one shipped
 * for the spec's cluster.gpu. Returns 1 with m loaded; 0 when there is none (a CPU sweep,
 * or a GPU nothing is shipped for: note says so and how to give one); -1 when the named
 * machine cannot be loaded (err set).
 */
int plan_machine(const struct sweep_plan *p, const char *name, struct lb_machine *m, char *note,
		 size_t notelen, char *err, size_t errlen);

/* Predict every ok entry of p on m (m NULL: none; note carries why). Returns 0, or -1
 * out of memory (err set). Free with plan_predictions_free. */
int plan_predict(const struct sweep_plan *p, const struct lb_machine *m, const char *note,
		 struct plan_predictions *out, char *err, size_t errlen);
void plan_predictions_free(struct plan_predictions *pp);

enum plan_sort { PLAN_SORT_SPEC = 0, PLAN_SORT_MFU, PLAN_SORT_TIME, PLAN_SORT_GPU_HOURS };
/* "spec", "mfu", "time", "gpu-hours": 0 and *s, or -1. */
int plan_sort_parse(const char *name, enum plan_sort *s);

/* The entries of p in order `by` into order[0..p->n_entries): predicted entries by the
 * key (MFU best first; time and GPU-hours least first; ties in spec order), then the
 * rest in spec order. */
void plan_sort(const struct sweep_plan *p, const struct plan_predictions *pp, enum plan_sort by,
	       size_t *order);

/*
 * `submit --top K`: keep, of the entries sel[0..*n_sel) of p, the k with the best
 * predicted MFU on the machine named (or the one shipped for the spec's GPU), in that
 * order. Entries that cannot be predicted are dropped. Returns 0 (what was kept is
 * described in info), or -1 with err set (no machine; nothing could be predicted).
 */
int plan_select_top(const struct sweep_plan *p, const char *machine, size_t k, size_t *sel,
		    size_t *n_sel, char *info, size_t infolen, char *err, size_t errlen);

#endif
