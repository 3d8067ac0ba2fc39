/*
 * Whether one layout's steps are slower than another's beyond noise: the one-sided
 * Mann-Whitney U test (Mann and Whitney 1947, the rank-sum test of Wilcoxon 1945) on the
 * per-step times of two runs, warm-up steps left out by the caller. Successive halving
 * (slurm/halving.h) drops a layout only when this test says it is slower than the rung's
 * cut, and the report says with it whether the final layouts differ. A rank test because
 * step times are not normal: a step that met a page fault, a clock change or another
 * process is an outlier that moves a mean and a t statistic, not a rank.
 *
 * The margin makes the question "slower by more than a factor 1 + margin": the test runs
 * on b against a * (1 + margin). Per-step samples of one run see the noise within a run
 * only; two runs of one layout also differ as a whole (the GPU's clocks, the node, the
 * other jobs: two H200 runs of one layout were 1.0% apart), which the margin absorbs.
 * Pure functions, libc and libm only.
 */
#ifndef LB_RANKTEST_H
#define LB_RANKTEST_H

#include <stddef.h>

/* The exact null distribution is used while both samples have at most this many values
 * and no two values tie; otherwise the normal approximation with the tie and continuity
 * corrections, which is within 0.005 of the exact p from about 10 values a side. */
#define LB_RANK_EXACT_MAX 50

struct lb_rank_test {
	double u;  /* pairs (a_i, b_j) with b_j > (1 + margin) * a_i; a tie counts 1/2 */
	double p;  /* one-sided p: P(U >= u) when both samples come from one distribution */
	int exact; /* 1: p from the exact distribution of U; 0: the normal approximation */
};

/*
 * Test whether sample b (step times, seconds) is stochastically larger than sample a
 * scaled by 1 + margin (margin >= 0), i.e. whether b's layout is slower than a's by
 * more than that factor. A small p says it is. Returns 0 and *out, or -1 when a sample
 * is empty, margin is negative or not finite, or memory ran out.
 */
int lb_ranktest_slower(const double *a, size_t na, const double *b, size_t nb, double margin,
		       struct lb_rank_test *out);

/* The two ways to the p of a U: P(U >= u) for samples of nx values (the sample whose
 * pairs x > y U counts) and ny values from one distribution. Exact: the recursion of Mann
 * and Whitney (1947) over every arrangement, no ties (-1 when memory ran out; time and
 * memory grow as nx * ny^2 * nx). Normal: mean nx*ny/2, variance
 * nx*ny/12 * (N + 1 - ties / (N (N - 1))) with N = nx + ny and ties the sum of t^3 - t
 * over the pooled sample's groups of t equal values, and a continuity correction of 1/2. */
double lb_ranktest_p_exact(size_t nx, size_t ny, double u);
double lb_ranktest_p_normal(size_t nx, size_t ny, double u, double ties);

/* The smallest p the test can give for samples of na and nb values without ties:
 * 1 / C(na + nb, na) (every b above every a). With 3 values a side it is 0.05; a rung
 * needs at least that many steady-state steps before the test can drop anything at
 * level 0.05, and 4 a side (0.014) to do so with some room. */
double lb_ranktest_min_p(size_t na, size_t nb);

/* The median of x[0..n) (the mean of the middle two for even n), x left as it is. NaN
 * when n is 0 or memory ran out. */
double lb_ranktest_median(const double *x, size_t n);

#endif
