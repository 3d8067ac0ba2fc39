/*
 * Run health (results/health.h): the loss trajectory's class, by the margins named in the
 * header.
 */
#include "results/health.h"

#include <math.h>

void results_health_class(const double *loss, size_t n, struct results_health_verdict *out)
{
	size_t finite = 0, tail, i;
	double sum = 0, first, hi, lo;

	out->health = RESULTS_HEALTH_UNKNOWN;
	out->first = out->last_quarter = NAN;
	for (i = 0; i < n; i++)
		if (isfinite(loss[i]))
			finite++;
	if (!n)
		return;
	out->first = isfinite(loss[0]) ? loss[0] : NAN;
	tail = (n + 3) / 4;
	for (i = n - tail; i < n; i++)
		sum += loss[i];
	out->last_quarter = isfinite(sum) ? sum / (double)tail : NAN;
	if (!finite)
		return;
	if (finite < n) {
		out->health = RESULTS_HEALTH_DIVERGED;
		return;
	}
	if (n < RESULTS_HEALTH_MIN_STEPS)
		return;
	first = loss[0];
	hi = first + RESULTS_HEALTH_RISE * fabs(first);
	lo = first - RESULTS_HEALTH_FALL * fabs(first);
	if (out->last_quarter > hi)
		out->health = RESULTS_HEALTH_DIVERGED;
	else if (out->last_quarter < lo)
		out->health = RESULTS_HEALTH_OK;
	else
		out->health = RESULTS_HEALTH_FLAT;
}

const char *results_health_name(enum results_health h)
{
	static const char *const names[] = {
	    [RESULTS_HEALTH_OK] = "ok",
	    [RESULTS_HEALTH_FLAT] = "flat",
	    [RESULTS_HEALTH_DIVERGED] = "diverged",
	};

	return (unsigned)h < sizeof(names) / sizeof(names[0]) ? names[h] : NULL;
}
