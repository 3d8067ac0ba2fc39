/*
 * The one-sided Mann-Whitney U test of common/ranktest.h: U counted over every pair, its
 * null distribution computed exactly for small samples without ties (the recursion of
 * Mann and Whitney 1947), the normal approximation with the tie correction otherwise.
 */
#include "common/ranktest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;

	return a < b ? -1 : a > b;
}

double lb_ranktest_median(const double *x, size_t n)
{
	double *s, m;

	if (n == 0 || !(s = malloc(n * sizeof(*s))))
		return NAN;
	memcpy(s, x, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	free(s);
	return m;
}

double lb_ranktest_min_p(size_t na, size_t nb)
{
	/* 1 / C(na + nb, na), as a running product so that it does not overflow */
	double p = 1.0;

	for (size_t k = 1; k <= na; k++)
		p *= (double)k / (double)(nb + k);
	return p;
}

/*
 * P_{i,j}(v), the probability that U = v for i x's and j y's: the largest of the i + j values is an
 * x with probability i / (i + j), and then exceeds all j y's: P_{i,j}(v) = i/(i+j) P_{i-1,j}(v - j)
 * + j/(i+j) P_{i,j-1}(v), P_{i,0} and P_{0,j} all mass at 0. Rows of i are kept two at a time.
 */
double lb_ranktest_p_exact(size_t m, size_t n, double u)
{
	size_t cells = m * n + 1;
	double *prev = calloc((n + 1) * cells, sizeof(double));
	double *cur = calloc((n + 1) * cells, sizeof(double));
	double p = -1.0;

	if (!prev || !cur)
		goto out_free;
	for (size_t j = 0; j <= n; j++)
		prev[j * cells] = 1.0; /* i = 0 */
	for (size_t i = 1; i <= m; i++) {
		memset(cur, 0, (n + 1) * cells * sizeof(double));
		cur[0] = 1.0; /* j = 0 */
		for (size_t j = 1; j <= n; j++) {
			double wx = (double)i / (double)(i + j), wy = 1.0 - wx;
			const double *up = prev + j * cells, *left = cur + (j - 1) * cells;
			double *out = cur + j * cells;
			for (size_t v = 0; v <= i * j; v++)
				out[v] = (v >= j ? wx * up[v - j] : 0.0) + wy * left[v];
		}
		double *t = prev;
		prev = cur;
		cur = t;
	}
	p = 0.0;
	for (size_t v = (size_t)ceil(u); v <= m * n; v++)
		p += prev[n * cells + v];
	if (p > 1.0)
		p = 1.0;
out_free:
	free(prev);
	free(cur);
	return p;
}

int lb_ranktest_slower(const double *a, size_t na, const double *b, size_t nb, double margin,
		       struct lb_rank_test *out)
{
	double *all, u = 0.0, ties = 0.0;
	size_t n = na + nb;
	int tied = 0;

	memset(out, 0, sizeof(*out));
	if (na == 0 || nb == 0 || !(margin >= 0.0) || !isfinite(margin))
		return -1;
	all = malloc(n * sizeof(*all));
	if (!all)
		return -1;
	for (size_t i = 0; i < na; i++)
		all[i] = a[i] * (1.0 + margin);
	for (size_t j = 0; j < nb; j++)
		all[na + j] = b[j];
	for (size_t i = 0; i < na; i++)
		for (size_t j = 0; j < nb; j++)
			u += b[j] > all[i] ? 1.0 : b[j] == all[i] ? 0.5 : 0.0;
	/* tie groups of the pooled sample: sum of t^3 - t */
	qsort(all, n, sizeof(*all), cmp_double);
	for (size_t i = 0; i < n;) {
		size_t k = i + 1;
		while (k < n && all[k] == all[i])
			k++;
		double t = (double)(k - i);
		if (k - i > 1) {
			ties += t * t * t - t;
			tied = 1;
		}
		i = k;
	}
	free(all);
	out->u = u;
	if (!tied && na <= LB_RANK_EXACT_MAX && nb <= LB_RANK_EXACT_MAX) {
		out->p = lb_ranktest_p_exact(nb, na, u);
		out->exact = 1;
		return out->p < 0 ? -1 : 0;
	}
	out->p = lb_ranktest_p_normal(nb, na, u, ties);
	return 0;
}

double lb_ranktest_p_normal(size_t nx, size_t ny, double u, double ties)
{
	double n = (double)nx + (double)ny;
	double mean = (double)nx * (double)ny / 2.0;
	double var = (double)nx * (double)ny / 12.0 * (n + 1.0 - ties / (n * (n - 1.0)));

	if (!(var > 0.0)) /* every value the same: no evidence either way */
		return 1.0;
	return 0.5 * erfc((u - mean - 0.5) / sqrt(var) / sqrt(2.0));
}
