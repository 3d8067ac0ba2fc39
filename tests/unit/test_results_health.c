/*
 * Unit tests of run health (results/health.h): one trajectory per class, the margins at
 * their edges, the short and the loss-less run, and the trajectories of published H200
 * runs (a healthy lr-1e-4 run, a diverged lr-3e-3 run, and the one lr-3e-3 run that came
 * back to 2.3% above its first loss).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "results/health.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static enum results_health cls(const double *v, size_t n)
{
	struct results_health_verdict h;

	results_health_class(v, n, &h);
	return h.health;
}

static void test_ok(void **state)
{
	/* the H200 width at lr 1e-4 (a cudnn run of docs/results/h200/cudnn) */
	static const double v[] = {11.41, 11.38, 11.34, 11.28, 11.18, 10.95, 10.72,
				   10.44, 10.30, 10.20, 10.15, 10.07, 10.04, 10.00,
				   9.99,  10.01, 9.99,	9.97,  9.98,  9.97};
	struct results_health_verdict h;

	(void)state;
	results_health_class(v, N(v), &h);
	assert_int_equal(h.health, RESULTS_HEALTH_OK);
	assert_true(h.first == 11.41);
	assert_true(fabs(h.last_quarter - (9.99 + 9.97 + 9.98 + 9.97 + 10.01) / 5) < 1e-12);
	assert_string_equal(results_health_name(h.health), "ok");
}

static void test_flat(void **state)
{
	static const double v[] = {5.5, 5.5, 5.5, 5.5, 5.5, 5.5, 5.5};
	static const double wobble[] = {10.0, 10.3, 9.8, 10.05, 9.95, 10.09};

	(void)state;
	assert_int_equal(cls(v, N(v)), RESULTS_HEALTH_FLAT);
	assert_int_equal(cls(wobble, N(wobble)), RESULTS_HEALTH_FLAT);
	assert_string_equal(results_health_name(RESULTS_HEALTH_FLAT), "flat");
}

static void test_diverged_rise(void **state)
{
	/* the H200 width at lr 3e-3 (published grid): 11.42 to 12.66 */
	static const double rose[] = {11.42, 11.23, 12.87, 12.89, 16.75, 17.28, 15.07,
				      18.32, 19.01, 15.98, 16.07, 15.28, 14.81, 14.56,
				      14.33, 13.86, 13.65, 13.22, 13.09, 12.66, 12.66};
	/* up to 24 and back to 11.38: the last quarter's mean is 2.3% above the first */
	static const double back[] = {11.42, 11.23, 12.87, 12.90, 18.54, 17.39, 13.88,
				      21.90, 21.78, 23.97, 18.72, 16.38, 13.49, 13.27,
				      12.47, 12.35, 11.93, 11.72, 11.40, 11.32, 11.38};

	(void)state;
	assert_int_equal(cls(rose, N(rose)), RESULTS_HEALTH_DIVERGED);
	assert_int_equal(cls(back, N(back)), RESULTS_HEALTH_DIVERGED);
	assert_string_equal(results_health_name(RESULTS_HEALTH_DIVERGED), "diverged");
}

static void test_diverged_not_finite(void **state)
{
	static const double mid[] = {5.5, 5.4, NAN, 5.3, 5.2, 5.1, 5.0, 4.9};
	static const double last[] = {5.5, INFINITY};
	struct results_health_verdict h;

	(void)state;
	assert_int_equal(cls(mid, N(mid)), RESULTS_HEALTH_DIVERGED);
	/* however short the run */
	results_health_class(last, N(last), &h);
	assert_int_equal(h.health, RESULTS_HEALTH_DIVERGED);
	assert_true(h.first == 5.5);
	assert_true(isnan(h.last_quarter));
}

/* The margins: 1% either side of the first step's loss, over the last ceil(n/4) steps. */
static void test_margins(void **state)
{
	double v[8] = {10, 10, 10, 10, 10, 10, 0, 0};

	(void)state;
	v[6] = v[7] = 10.11; /* +1.1% */
	assert_int_equal(cls(v, 8), RESULTS_HEALTH_DIVERGED);
	v[6] = v[7] = 10.09;
	assert_int_equal(cls(v, 8), RESULTS_HEALTH_FLAT);
	v[6] = v[7] = 9.91;
	assert_int_equal(cls(v, 8), RESULTS_HEALTH_FLAT);
	v[6] = v[7] = 9.89; /* -1.1% */
	assert_int_equal(cls(v, 8), RESULTS_HEALTH_OK);
	/* the last quarter is two steps of eight: a mean, not the last step alone */
	v[6] = 9.0;
	v[7] = 11.0;
	assert_int_equal(cls(v, 8), RESULTS_HEALTH_FLAT);
	/* five steps: the last two (ceil(5/4)) */
	{
		double w[5] = {10, 12, 9.0, 9.5, 9.7};
		assert_int_equal(cls(w, 5), RESULTS_HEALTH_OK);
		w[3] = 10.6;
		w[4] = 9.4;
		assert_int_equal(cls(w, 5), RESULTS_HEALTH_FLAT);
	}
}

static void test_unknown(void **state)
{
	static const double two[] = {11.42, 11.23}; /* a two-step memory probe */
	static const double none[] = {NAN, NAN, NAN, NAN, NAN};
	struct results_health_verdict h;

	(void)state;
	assert_int_equal(cls(two, N(two)), RESULTS_HEALTH_UNKNOWN);
	assert_int_equal(cls(none, N(none)), RESULTS_HEALTH_UNKNOWN);
	results_health_class(NULL, 0, &h);
	assert_int_equal(h.health, RESULTS_HEALTH_UNKNOWN);
	assert_true(isnan(h.first) && isnan(h.last_quarter));
	assert_null(results_health_name(RESULTS_HEALTH_UNKNOWN));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ok),
	    cmocka_unit_test(test_flat),
	    cmocka_unit_test(test_diverged_rise),
	    cmocka_unit_test(test_diverged_not_finite),
	    cmocka_unit_test(test_margins),
	    cmocka_unit_test(test_unknown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
