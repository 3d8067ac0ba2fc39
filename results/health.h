/*
 * Run health: a run's loss trajectory classed `ok` (it falls), `flat` (it does not move)
 * or `diverged` (a loss that is not finite, or a rise), so that a speed measured on a run
 * that did not train can be told from one that did: a diverged run's kernels see other
 * values, and on a GPU that can change how fast they run. Pure: losses in, a class out;
 * the collector stores the class (run_stats.health, docs/schema.md "Run health"). The
 * margins are named here and in the docs; a change to them is a change of the class of
 * published runs.
 */
#ifndef LB_RESULTS_HEALTH_H
#define LB_RESULTS_HEALTH_H

#include <stddef.h>

enum results_health {
	RESULTS_HEALTH_UNKNOWN = 0, /* no finite loss, or fewer than RESULTS_HEALTH_MIN_STEPS */
	RESULTS_HEALTH_OK,	    /* the last quarter's mean loss fell below the first's by more
				       than RESULTS_HEALTH_FALL */
	RESULTS_HEALTH_FLAT,	    /* within the margins either side of the first step's loss */
	RESULTS_HEALTH_DIVERGED,    /* a loss that is not finite, or the last quarter's mean above
				       the first step's by more than RESULTS_HEALTH_RISE */
};

/* Steps with a finite loss needed to class a trajectory by its trend (a shorter run,
 * e.g. a two-step memory probe, stays unknown unless a loss is not finite). */
#define RESULTS_HEALTH_MIN_STEPS 4
/* Relative margins, fractions of the first step's loss: diverged above
 * first * (1 + RISE), ok below first * (1 - FALL), flat between. A healthy Llama-13B
 * width at lr 1e-4 ends 21 steps 12% below its first loss (11.4 to 10.0); at lr 3e-3 the
 * published H200 grid ended 2.3% to 200% above it. */
#define RESULTS_HEALTH_RISE 0.01
#define RESULTS_HEALTH_FALL 0.01

/* What a run's losses say. */
struct results_health_verdict {
	enum results_health health;
	double first;	     /* the first step's loss; NaN when it is not finite or absent */
	double last_quarter; /* the mean loss of the last ceil(n/4) steps; NaN when a loss among
				them is not finite, or there are no steps */
};

/*
 * Class a trajectory: loss[0..n) are the losses of a run's steps in step order (warmup
 * included: the trajectory starts at the first step), NaN or infinite where a step's loss
 * was not finite (the run log's null). No finite loss at all: unknown (a log without
 * losses). Any loss not finite: diverged. Fewer than RESULTS_HEALTH_MIN_STEPS steps:
 * unknown. Else the mean of the last ceil(n/4) losses against the first loss, by the
 * margins above.
 */
void results_health_class(const double *loss, size_t n, struct results_health_verdict *out);

/* "ok", "flat", "diverged"; NULL for unknown (stored as SQL NULL). */
const char *results_health_name(enum results_health h);

#endif
