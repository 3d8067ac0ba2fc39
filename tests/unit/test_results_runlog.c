/*
 * Unit tests of the run-log line parser (results/runlog.h): every record type, the
 * fixtures line by line, and the messages for each kind of fault.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/layout.h"
#include "results/runlog.h"

#define FIX "tests/fixtures/runlogs/run-20261202T120000Z-node1-"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *b;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc((size_t)n + 1);
	assert_non_null(b);
	*len = fread(b, 1, (size_t)n, f);
	b[*len] = 0;
	fclose(f);
	return b;
}

/* Parse s; expect failure with a message containing want. */
static void expect_fault(const char *s, const char *want)
{
	struct runlog_record r;
	char err[256] = "";

	if (runlog_parse_line(s, strlen(s), &r, err, sizeof(err)) == 0) {
		runlog_record_release(&r);
		fail_msg("parsed, expected a fault containing '%s': %s", want, s);
	}
	if (!strstr(err, want))
		fail_msg("fault '%s' does not contain '%s'", err, want);
}

static void test_header_of_ok_fixture(void **state)
{
	size_t len;
	char *buf = slurp(FIX "1001-ok.jsonl", &len), err[256];
	char *nl = strchr(buf, '\n');
	struct runlog_record r;
	struct runlog_header *h = &r.header;

	(void)state;
	assert_non_null(nl);
	assert_int_equal(runlog_parse_line(buf, (size_t)(nl - buf + 1), &r, err, sizeof(err)), 0);
	assert_int_equal(r.type, RUNLOG_HEADER);
	assert_int_equal(h->version, 1);
	assert_string_equal(h->run_uid, "20261202T120000Z-node1-1001-ok");
	assert_string_equal(h->layout_id, "92ce779f2d33830f");
	assert_string_equal(h->layout_id, h->layout_id_computed);
	assert_string_equal(h->layout.model.name, "tiny");
	assert_int_equal(h->layout.dp, 2);
	assert_int_equal(h->layout.steps, 7);
	assert_int_equal(h->layout.warmup, 2);
	assert_int_equal(h->layout.checkpointing, LB_CKPT_NONE);
	assert_int_equal(h->params, 197184);
	assert_int_equal(h->tokens_per_step, 1024);
	assert_true(h->flops_per_step == 1614151680.0);
	assert_true(h->peak_tflops == 989.0);
	assert_int_equal(h->world_size, 2);
	assert_string_equal(h->hosts, "[\"node1\"]");
	assert_non_null(strstr(h->versions, "\"nccl\":\"2.27.3\""));
	assert_string_equal(h->sweep, "fixture-sweep");
	assert_string_equal(h->job_id, "4242_3");
	assert_string_equal(h->backend, "cuda");
	assert_non_null(h->flags);
	runlog_record_release(&r);
	free(buf);
}

static void test_step_and_end(void **state)
{
	const char *s = "{\"type\":\"step\",\"step\":4,\"warmup\":false,\"time_s\":1.25,"
			"\"tokens\":1024,\"loss\":null,\"peak_mem_bytes\":123456789012,"
			"\"rank_peak_mem_bytes\":[1,2],\"phases\":{\"forward_s\":0.5}}\n";
	const char *e = "{\"type\":\"end\",\"status\":\"failed\",\"class\":\"oom\","
			"\"message\":\"out of memory\",\"rank\":3,\"exit_code\":3,"
			"\"end_time\":\"2026-12-02T12:01:00Z\"}";
	struct runlog_record r;
	char err[256];

	(void)state;
	assert_int_equal(runlog_parse_line(s, strlen(s), &r, err, sizeof(err)), 0);
	assert_int_equal(r.type, RUNLOG_STEP);
	assert_int_equal(r.step.step, 4);
	assert_int_equal(r.step.warmup, 0);
	assert_true(r.step.time_s == 1.25);
	assert_true(isnan(r.step.loss));
	assert_true(r.step.peak_mem_bytes == 123456789012LL);
	assert_string_equal(r.step.rank_peak_mem, "[1,2]");
	assert_true(r.step.forward_s == 0.5);
	assert_true(isnan(r.step.backward_s));
	runlog_record_release(&r);

	assert_int_equal(runlog_parse_line(e, strlen(e), &r, err, sizeof(err)), 0);
	assert_int_equal(r.type, RUNLOG_END);
	assert_int_equal(r.end.ok, 0);
	assert_string_equal(r.end.failure_class, "oom");
	assert_string_equal(r.end.message, "out of memory");
	assert_int_equal(r.end.rank, 3);
	assert_int_equal(r.end.exit_code, 3);
	runlog_record_release(&r);
}

/* The device's own memory reading: both paths read it alike; absent is -1 / NULL. */
static void test_step_device_memory(void **state)
{
	const char *s = "{\"type\":\"step\",\"step\":1,\"warmup\":false,\"time_s\":1.0,"
			"\"tokens\":8192,\"loss\":10.5,\"peak_mem_bytes\":4000,"
			"\"rank_peak_mem_bytes\":[1000,4000],\"device_peak_mem_bytes\":9500,"
			"\"rank_device_peak_mem_bytes\":[9000,9500]}\n";
	const char *none = "{\"type\":\"step\",\"step\":1,\"warmup\":false,\"time_s\":1.0}";
	struct runlog_record r, g;
	char err[256];

	(void)state;
	assert_int_equal(runlog_parse_line(s, strlen(s), &r, err, sizeof(err)), 0);
	assert_int_equal(runlog_parse_line_general(s, strlen(s), &g, err, sizeof(err)), 0);
	assert_true(r.step.device_peak_mem_bytes == 9500);
	assert_true(g.step.device_peak_mem_bytes == 9500);
	assert_string_equal(r.step.rank_device_peak_mem, "[9000,9500]");
	assert_string_equal(g.step.rank_device_peak_mem, "[9000,9500]");
	assert_string_equal(r.step.rank_peak_mem, "[1000,4000]");
	runlog_record_release(&r);
	runlog_record_release(&g);
	assert_int_equal(runlog_parse_line(none, strlen(none), &r, err, sizeof(err)), 0);
	assert_true(r.step.device_peak_mem_bytes == -1);
	assert_null(r.step.rank_device_peak_mem);
	runlog_record_release(&r);
	expect_fault("{\"type\":\"step\",\"step\":1,\"warmup\":false,\"time_s\":1,"
		     "\"device_peak_mem_bytes\":-5}",
		     "'device_peak_mem_bytes': expected an integer in [0,");
	expect_fault("{\"type\":\"step\",\"step\":1,\"warmup\":false,\"time_s\":1,"
		     "\"rank_device_peak_mem_bytes\":[1,\"x\"]}",
		     "'rank_device_peak_mem_bytes[1]': expected an integer");
}

static void test_faults_name_key(void **state)
{
	(void)state;
	expect_fault("", "empty line");
	expect_fault("{\"type\":\"step\",", "not JSON near byte");
	expect_fault("[1,2]", "expected a JSON object");
	expect_fault("{\"step\":1}", "missing key 'type'");
	expect_fault("{\"type\":\"lap\"}", "'type': expected \"header\", \"step\" or \"end\"");
	expect_fault("{\"type\":\"step\",\"warmup\":false,\"time_s\":1}",
		     "step: missing key 'step'");
	expect_fault("{\"type\":\"step\",\"step\":1.5,\"warmup\":false,\"time_s\":1}",
		     "'step': expected an integer, got 1.5");
	expect_fault("{\"type\":\"step\",\"step\":1,\"warmup\":false,\"time_s\":\"fast\"}",
		     "'time_s': expected a number, got \"fast\"");
	expect_fault("{\"type\":\"step\",\"step\":1,\"warmup\":false,\"time_s\":-1}",
		     "'time_s': expected a number >= 0");
	expect_fault("{\"type\":\"step\",\"step\":1,\"warmup\":2,\"time_s\":1}",
		     "'warmup': expected true, false, 0 or 1");
	expect_fault("{\"type\":\"step\",\"step\":1,\"warmup\":false,\"time_s\":1,"
		     "\"phases\":{\"bubble_s\":\"x\"}}",
		     "'phases.bubble_s': expected a number");
	expect_fault("{\"type\":\"step\",\"step\":1,\"warmup\":false,\"time_s\":1} x",
		     "text after the JSON object");
	expect_fault("{\"type\":\"end\",\"status\":\"maybe\"}", "'status': expected \"ok\" or");
	expect_fault("{\"type\":\"end\"}", "end: missing key 'status'");
	expect_fault("{\"type\":\"header\",\"format\":\"other\"}", "'format': expected");
	expect_fault("{\"type\":\"header\",\"format\":\"layoutbench-runlog\",\"version\":2}",
		     "run log version 2 is newer than this build reads (1)");
	expect_fault("{\"type\":\"header\",\"format\":\"layoutbench-runlog\",\"version\":1,"
		     "\"run_uid\":\"u\",\"layout_id\":\"XYZ\"}",
		     "'layout_id': expected 16 lower-case hex digits");
	expect_fault("{\"type\":\"header\",\"format\":\"layoutbench-runlog\",\"version\":1,"
		     "\"run_uid\":\"u\",\"layout_id\":\"0123456789abcdef\"}",
		     "header: missing key 'layout'");
}

/* Replace the first occurrence of from with to in the header of the ok fixture. */
static void header_variant_fault(const char *from, const char *to, const char *want)
{
	size_t len;
	char *buf = slurp(FIX "1001-ok.jsonl", &len);
	char *nl = strchr(buf, '\n'), *at, *line;

	*nl = 0;
	at = strstr(buf, from);
	assert_non_null(at);
	line = malloc(strlen(buf) + strlen(to) + 1);
	assert_non_null(line);
	sprintf(line, "%.*s%s%s", (int)(at - buf), buf, to, at + strlen(from));
	expect_fault(line, want);
	free(line);
	free(buf);
}

static void test_header_layout_faults(void **state)
{
	(void)state;
	header_variant_fault("\"tp\":1", "\"tp\":\"one\"", "'layout.tp': expected an integer");
	header_variant_fault("\"tp\":1,", "", "header: missing key 'layout.tp'");
	header_variant_fault("\"checkpointing\":\"none\"", "\"checkpointing\":\"some\"",
			     "'layout.checkpointing': expected none, full or selective");
	header_variant_fault("\"attention\":\"flash\"", "\"attention\":\"cuDNN\"",
			     "'layout.attention': expected naive, fused_softmax, flash or cudnn");
	header_variant_fault("\"heads\":4", "\"heads\":0", "'model.heads': expected an integer in");
	header_variant_fault("\"layout\":{\"model\":\"tiny\"", "\"layout\":{\"model\":\"big\"",
			     "'layout.model': \"big\" differs from 'model.name'");
	header_variant_fault("\"peak_tflops\":989.0", "\"peak_tflops\":\"high\"",
			     "'peak_tflops': expected a number");
}

/* Count parsed and failed lines of a fixture, the last line included. */
static void count_fixture(const char *name, int *ok, int *bad, int *steps, int *ends)
{
	size_t len, pos = 0;
	char *buf = slurp(name, &len), err[256];

	*ok = *bad = *steps = *ends = 0;
	while (pos < len) {
		char *nl = memchr(buf + pos, '\n', len - pos);
		size_t l = nl ? (size_t)(nl - (buf + pos)) + 1 : len - pos;
		struct runlog_record r;
		if (runlog_parse_line(buf + pos, l, &r, err, sizeof(err)) == 0) {
			(*ok)++;
			*steps += r.type == RUNLOG_STEP;
			*ends += r.type == RUNLOG_END;
			runlog_record_release(&r);
		} else {
			(*bad)++;
		}
		pos += l;
	}
	free(buf);
}

static void test_fixtures(void **state)
{
	static const struct {
		const char *name;
		int ok, bad, steps, ends;
	} cases[] = {
	    {"1001-ok", 9, 0, 7, 1},	    {"1002-oom", 3, 0, 1, 1},
	    {"1003-nccl", 5, 0, 3, 1},	    {"1004-diverged", 7, 0, 5, 1},
	    {"1005-timeout", 6, 0, 4, 1},   {"1006-killed", 4, 0, 2, 1},
	    {"1007-truncated", 6, 1, 5, 0}, {"1008-corrupt", 8, 2, 6, 1},
	    {"1009-running", 5, 0, 4, 0},   {"1010-newer", 3, 1, 2, 1},
	    {"1011-empty", 0, 0, 0, 0},
	};
	char path[256];
	int ok, bad, steps, ends;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(path, sizeof(path), FIX "%s.jsonl", cases[i].name);
		count_fixture(path, &ok, &bad, &steps, &ends);
		if (ok != cases[i].ok || bad != cases[i].bad || steps != cases[i].steps ||
		    ends != cases[i].ends)
			fail_msg("%s: ok %d bad %d steps %d ends %d", cases[i].name, ok, bad, steps,
				 ends);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_header_of_ok_fixture), cmocka_unit_test(test_step_and_end),
	    cmocka_unit_test(test_step_device_memory),	 cmocka_unit_test(test_faults_name_key),
	    cmocka_unit_test(test_header_layout_faults), cmocka_unit_test(test_fixtures),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
