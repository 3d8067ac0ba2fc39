/*
 * The parallel trainer's additions to the run log, read back by the collector's parser
 * (results/runlog.h): a step line with every rank's peak memory (rank_peak_mem_bytes,
 * peak_mem_bytes their maximum) and the phase times comm_exposed_s and bubble_s; an end
 * record appended to an existing log (the launcher's, or rank 1's when rank 0 died),
 * naming the failing rank and class. Also lb_comm_sum_double over one rank.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/train.h"
#include "harness/trainlog.h"
#include "results/runlog.h"

static char dir[256];

static int read_lines(const char *path, char lines[][4096], int max)
{
	FILE *f = fopen(path, "r");
	int n = 0;

	if (!f)
		return -1;
	while (n < max && fgets(lines[n], 4096, f))
		n++;
	fclose(f);
	return n;
}

static void test_rank_peaks_and_phases_parse(void **state)
{
	struct lb_layout l;
	struct lb_runinfo info = {0};
	struct lb_trainlog lg, app;
	struct lb_phases ph = {0.1, 0.2, 0.05, 0.03, 0.01};
	uint64_t peaks[4] = {1000, 4000, 3000, 2000};
	uint64_t dev[4] = {9000, 8000, 9500, 7000}; /* the device's own readings */
	struct runlog_record rec;
	char err[256], path[4096], lines[4][4096];

	lb_layout_init(&l);
	l.tp = 2;
	l.dp = 2;
	l.gpus_per_node = 4;
	info.layout = &l;
	info.gpu = "cpu";
	info.peak_tflops = -1;
	info.backend = "cpu";
	info.world_size = 4;
	assert_int_equal(lb_trainlog_open(&lg, dir, &info, err, sizeof(err)), 0);
	lb_trainlog_step_ranks(&lg, 0, 0, 0.5, 1024, 5.5, peaks, NULL, 4, &ph);
	lb_trainlog_step_ranks(&lg, 1, 0, 0.5, 1024, 5.4, peaks, dev, 4, &ph);
	snprintf(path, sizeof(path), "%s", lg.path);
	lb_trainlog_close(&lg);
	/* a failed run's end record, appended by another process */
	assert_int_equal(lb_trainlog_append(&app, path), 0);
	lb_trainlog_end(&app, "oom", "out of memory", 3, LB_EXIT_OOM);
	lb_trainlog_close(&app);

	assert_int_equal(read_lines(path, lines, 4), 4);
	/* no device reading: no device keys; with one, the most loaded rank and each rank's */
	assert_null(strstr(lines[1], "device_peak_mem_bytes"));
	assert_non_null(strstr(lines[2], ",\"device_peak_mem_bytes\":9500,"));
	assert_non_null(strstr(lines[2], "\"rank_device_peak_mem_bytes\":[9000,8000,9500,7000]"));
	assert_int_equal(runlog_parse_line(lines[0], strlen(lines[0]), &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.header.world_size, 4);
	runlog_record_release(&rec);
	assert_int_equal(runlog_parse_line(lines[1], strlen(lines[1]), &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.type, RUNLOG_STEP);
	assert_int_equal(rec.step.peak_mem_bytes, 4000); /* the most loaded rank */
	assert_non_null(rec.step.rank_peak_mem);
	assert_string_equal(rec.step.rank_peak_mem, "[1000,4000,3000,2000]");
	assert_true(fabs(rec.step.comm_exposed_s - 0.03) < 1e-12);
	assert_true(fabs(rec.step.bubble_s - 0.01) < 1e-12);
	runlog_record_release(&rec);
	assert_int_equal(runlog_parse_line(lines[3], strlen(lines[3]), &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.type, RUNLOG_END);
	assert_int_equal(rec.end.ok, 0);
	assert_string_equal(rec.end.failure_class, "oom");
	assert_int_equal(rec.end.rank, 3);
	assert_int_equal(rec.end.exit_code, LB_EXIT_OOM);
	runlog_record_release(&rec);
}

static void test_sum_double_one_rank(void **state)
{
	struct lb_comm *c = lb_comm_self();
	double x = 1.0 / 3.0;

	assert_non_null(c);
	assert_int_equal(lb_comm_sum_double(c, &x), 0);
	assert_true(x == 1.0 / 3.0); /* bit for bit */
	assert_int_equal(lb_comm_sum_double(NULL, &x), 0);
	c->ops->destroy(c);
}

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/lb-par-runlog-%ld", (long)getpid());
	return 0;
}

static int teardown(void **state)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rank_peaks_and_phases_parse),
	    cmocka_unit_test(test_sum_double_one_rank),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
