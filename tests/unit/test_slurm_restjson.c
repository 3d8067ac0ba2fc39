/*
 * Unit tests of slurmrestd's JSON by OpenAPI version: which version to speak with a server
 * (from its OpenAPI document; the message when it serves none of ours), the table of
 * shapes, the submit body (environment object vs "NAME=value" array, plain vs
 * {"set","number"} numbers, node counts, GPUs, script placement, hold, extra options) and
 * reading jobs (state as a string or an array, exit status as a raw wait status or an
 * object, matching array tasks and pending remainders).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slurm/restjson.h"

static void make_array(struct slurm_array *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->job_name, sizeof(a->job_name), "sw.a0");
	snprintf(a->array_spec, sizeof(a->array_spec), "0-9%%2");
	snprintf(a->out_path, sizeof(a->out_path), "/r/sw/logs/a0-%%A_%%a.out");
	snprintf(a->err_path, sizeof(a->err_path), "/r/sw/logs/a0-%%A_%%a.err");
	snprintf(a->partition, sizeof(a->partition), "gpu");
	a->nodes = 2;
	a->ntasks_per_node = 8;
	a->gpus_per_node = 8;
	a->time_limit_min = 30;
	a->exclusive = 1;
	a->script = "#!/bin/bash\necho hi\n";
}

static char *env[] = {"PATH=/usr/bin", "ODD=a=b\"c"};

static void test_body_v38(void **state)
{
	struct slurm_array a;
	char err[256];
	(void)state;
	make_array(&a);
	char *b = restjson_submit_body(38, &a, env, 2, "/w", 1, err, sizeof(err));
	assert_non_null(b);
	cJSON *r = cJSON_Parse(b);
	cJSON *j = cJSON_GetObjectItem(r, "job");
	cJSON *e = cJSON_GetObjectItem(j, "environment");
	assert_true(cJSON_IsObject(e));
	assert_string_equal(cJSON_GetObjectItem(e, "ODD")->valuestring, "a=b\"c");
	assert_int_equal(cJSON_GetObjectItem(j, "time_limit")->valueint, 30);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "nodes")), 2);
	assert_int_equal(cJSON_GetObjectItem(j, "tasks")->valueint, 16);
	assert_string_equal(cJSON_GetObjectItem(j, "gpus_per_node")->valuestring, "8");
	assert_string_equal(cJSON_GetObjectItem(j, "exclusive")->valuestring, "true");
	assert_string_equal(cJSON_GetObjectItem(j, "array")->valuestring, "0-9%2");
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "hold")));
	assert_string_equal(cJSON_GetObjectItem(r, "script")->valuestring, a.script);
	assert_null(cJSON_GetObjectItem(j, "script"));
	cJSON_Delete(r);
	free(b);
}

static void test_body_v40(void **state)
{
	struct slurm_array a;
	char err[256];
	char *extra[] = {"--mem=1000", "--constraint=a100"};
	(void)state;
	make_array(&a);
	a.extra = extra;
	a.n_extra = 2;
	char *b = restjson_submit_body(40, &a, env, 2, "/w", 0, err, sizeof(err));
	assert_non_null(b);
	cJSON *r = cJSON_Parse(b);
	cJSON *j = cJSON_GetObjectItem(r, "job");
	cJSON *e = cJSON_GetObjectItem(j, "environment");
	assert_true(cJSON_IsArray(e));
	assert_string_equal(cJSON_GetArrayItem(e, 1)->valuestring, "ODD=a=b\"c");
	double v = 0;
	assert_int_equal(restjson_number(cJSON_GetObjectItem(j, "time_limit"), &v), 0);
	assert_true(v == 30);
	assert_true(cJSON_IsObject(cJSON_GetObjectItem(j, "time_limit")));
	assert_int_equal(cJSON_GetObjectItem(j, "minimum_nodes")->valueint, 2);
	assert_string_equal(cJSON_GetObjectItem(j, "tres_per_node")->valuestring, "gres/gpu:8");
	assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "shared"), 0)->valuestring,
			    "none");
	assert_string_equal(cJSON_GetObjectItem(j, "script")->valuestring, a.script);
	assert_null(cJSON_GetObjectItem(r, "script"));
	assert_null(cJSON_GetObjectItem(j, "hold"));
	assert_string_equal(cJSON_GetObjectItem(j, "constraints")->valuestring, "a100");
	assert_int_equal(restjson_number(cJSON_GetObjectItem(j, "memory_per_node"), &v), 0);
	assert_true(v == 1000);
	cJSON_Delete(r);
	free(b);
	/* v0.0.39: array environment, script at the top */
	b = restjson_submit_body(39, &a, env, 2, "/w", 0, err, sizeof(err));
	r = cJSON_Parse(b);
	assert_non_null(cJSON_GetObjectItem(r, "script"));
	assert_true(
	    cJSON_IsArray(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "job"), "environment")));
	cJSON_Delete(r);
	free(b);
	char *bad[] = {"--gres=gpu:2"};
	a.extra = bad;
	a.n_extra = 1;
	assert_null(restjson_submit_body(40, &a, env, 2, "/w", 0, err, sizeof(err)));
	assert_non_null(strstr(err, "'--gres=gpu:2' is not supported by the rest executor"));
}

static void test_state_v38(void **state)
{
	struct exec_state s;
	(void)state;
	cJSON *j = cJSON_Parse("{\"job_id\": 17, \"array_job_id\": 16, \"array_task_id\": 1,"
			       "\"job_state\": \"FAILED\", \"state_reason\": \"NonZeroExitCode\","
			       "\"exit_code\": 768, \"start_time\": 100, \"end_time\": 160}");
	restjson_job_state(j, &s);
	assert_true(s.known);
	assert_string_equal(s.state, "FAILED");
	assert_int_equal(s.exit_code, 3);
	assert_int_equal(s.start_time, 100);
	assert_int_equal(s.end_time, 160);
	assert_string_equal(s.reason, "NonZeroExitCode");
	struct results_job r;
	results_job_init(&r);
	snprintf(r.array_job_id, sizeof(r.array_job_id), "16");
	snprintf(r.job_id, sizeof(r.job_id), "16_1");
	r.array_index = 1;
	assert_true(restjson_job_matches(j, &r));
	r.array_index = 2;
	assert_false(restjson_job_matches(j, &r));
	cJSON_Delete(j);
	/* killed by signal 9: raw status 9 */
	j = cJSON_Parse("{\"job_state\": \"CANCELLED\", \"exit_code\": 9}");
	restjson_job_state(j, &s);
	assert_int_equal(s.exit_code, 137);
	cJSON_Delete(j);
	/* a pending remainder "16_[2-5%2]" */
	j = cJSON_Parse("{\"job_id\": 16, \"array_job_id\": 16, \"array_task_id\": null,"
			"\"array_task_string\": \"2-5%2\", \"job_state\": \"PENDING\","
			"\"state_reason\": \"JobArrayTaskLimit\", \"exit_code\": 0}");
	r.array_index = 4;
	assert_true(restjson_job_matches(j, &r));
	r.array_index = 6;
	assert_false(restjson_job_matches(j, &r));
	restjson_job_state(j, &s);
	assert_string_equal(s.state, "PENDING");
	assert_int_equal(s.exit_code, -1);
	assert_int_equal(s.start_time, 0);
	cJSON_Delete(j);
}

static void test_state_v40(void **state)
{
	struct exec_state s;
	(void)state;
	cJSON *j = cJSON_Parse(
	    "{\"job_id\": 21, \"array_job_id\": {\"set\": true, \"infinite\": false, \"number\": "
	    "20},"
	    "\"array_task_id\": {\"set\": true, \"infinite\": false, \"number\": 0},"
	    "\"job_state\": [\"TIMEOUT\"], \"state_reason\": \"None\","
	    "\"exit_code\": {\"status\": [\"SIGNALED\"], \"return_code\": {\"set\": true, "
	    "\"number\": 0}, \"signal\": {\"id\": {\"set\": true, \"number\": 15}, \"name\": "
	    "\"TERM\"}},"
	    "\"start_time\": {\"set\": true, \"infinite\": false, \"number\": 200},"
	    "\"end_time\": {\"set\": true, \"infinite\": false, \"number\": 262}}");
	restjson_job_state(j, &s);
	assert_string_equal(s.state, "TIMEOUT");
	assert_string_equal(s.reason, "");
	assert_int_equal(s.exit_code, 143);
	assert_int_equal(s.start_time, 200);
	assert_int_equal(s.end_time, 262);
	struct results_job r;
	results_job_init(&r);
	snprintf(r.array_job_id, sizeof(r.array_job_id), "20");
	r.array_index = 0;
	assert_true(restjson_job_matches(j, &r));
	cJSON_Delete(j);
	j = cJSON_Parse("{\"job_state\": [\"FAILED\"], \"exit_code\": {\"status\": [\"ERROR\"],"
			"\"return_code\": {\"set\": true, \"number\": 127}}}");
	restjson_job_state(j, &s);
	assert_int_equal(s.exit_code, 127);
	cJSON_Delete(j);
	/* numbers out of range are not believed */
	j = cJSON_Parse("{\"job_state\": [\"FAILED\"], \"exit_code\": {\"return_code\": 1e300,"
			"\"signal\": {\"id\": 900}}, \"start_time\": -5, \"end_time\": 1e300}");
	restjson_job_state(j, &s);
	assert_int_equal(s.exit_code, -1);
	assert_int_equal(s.start_time, 0);
	assert_int_equal(s.end_time, 0);
	cJSON_Delete(j);
	j = cJSON_Parse("{\"job_state\": \"FAILED\", \"exit_code\": 1e12}");
	restjson_job_state(j, &s);
	assert_int_equal(s.exit_code, -1);
	cJSON_Delete(j);
	/* a plain job matches by id */
	j = cJSON_Parse("{\"job_id\": 30, \"array_job_id\": 0, \"job_state\": \"RUNNING\"}");
	results_job_init(&r);
	snprintf(r.job_id, sizeof(r.job_id), "30");
	assert_true(restjson_job_matches(j, &r));
	cJSON_Delete(j);
	assert_true(exec_task_in("1,3,7-9", 8));
	assert_false(exec_task_in("1,3,7-9", 4));
}

/* An OpenAPI document with the given paths (the values do not matter). */
static cJSON *doc_with(const char *const *paths)
{
	cJSON *d = cJSON_CreateObject();
	cJSON *p = cJSON_AddObjectToObject(d, "paths");
	for (; *paths; paths++)
		cJSON_AddObjectToObject(p, *paths);
	return d;
}

static void test_negotiate(void **state)
{
	int served[8];
	char err[512];
	(void)state;
	/* Slurm 24.11: v0.0.40 .. v0.0.42, slurmdbd's paths beside them, in any order */
	const char *const p2411[] = {"/slurm/v0.0.41/jobs",	    "/slurm/v0.0.40/job/submit",
				     "/slurmdb/v0.0.42/jobs",	    "/slurm/v0.0.42/ping",
				     "/slurm/v0.0.42/job/submit",   "/slurm/v0.0.41/job/submit",
				     "/slurm/v0.0.40/jobs",	    "/slurm/v0.0.42/jobs",
				     "/slurm/v0.0.42/job/{job_id}", NULL};
	cJSON *d = doc_with(p2411);
	size_t n = restjson_served(d, served, 8);
	assert_int_equal(n, 3);
	assert_int_equal(served[0], 42);
	assert_int_equal(served[1], 41);
	assert_int_equal(served[2], 40);
	assert_int_equal(restjson_pick(served, n), 42);
	/* room for two: the first two found */
	assert_int_equal(restjson_served(d, served, 2), 2);
	cJSON_Delete(d);
	/* Slurm 22.05 */
	const char *const p2205[] = {"/slurm/v0.0.38/ping", "/slurm/v0.0.38/jobs",
				     "/slurm/v0.0.38/job/submit", "/slurmdb/v0.0.38/jobs", NULL};
	d = doc_with(p2205);
	n = restjson_served(d, served, 8);
	assert_int_equal(n, 1);
	assert_int_equal(restjson_pick(served, n), 38);
	cJSON_Delete(d);
	/* a later Slurm: v0.0.43 and v0.0.44 only, and a version with a ping but no submit */
	const char *const plate[] = {"/slurm/v0.0.44/jobs",	   "/slurm/v0.0.44/job/submit",
				     "/slurm/v0.0.43/jobs",	   "/slurm/v0.0.43/job/submit",
				     "/slurm/v0.0.42/ping",	   "/slurm/v0.0.4x/jobs",
				     "/slurm/v0.0.42/job/submitx", NULL};
	d = doc_with(plate);
	n = restjson_served(d, served, 8);
	assert_int_equal(n, 2);
	assert_int_equal(served[0], 44);
	assert_int_equal(restjson_pick(served, n), -1);
	restjson_none_message("http://h:6820", served, n, err, sizeof(err));
	assert_string_equal(err, "slurmrestd at 'http://h:6820' offers v0.0.44, v0.0.43; "
				 "layoutbench speaks v0.0.42, v0.0.41, v0.0.40, v0.0.39, v0.0.38 "
				 "(give --rest-version to try one it offers, or use --executor "
				 "slurm)");
	cJSON_Delete(d);
	/* an older Slurm (21.08: v0.0.35 .. v0.0.37) */
	const char *const pold[] = {"/slurm/v0.0.37/jobs", "/slurm/v0.0.37/job/submit",
				    "/slurm/v0.0.36/jobs", "/slurm/v0.0.36/job/submit", NULL};
	d = doc_with(pold);
	n = restjson_served(d, served, 8);
	assert_int_equal(n, 2);
	assert_int_equal(restjson_pick(served, n), -1);
	cJSON_Delete(d);
	/* not an OpenAPI document: nothing served (the caller then pings) */
	d = cJSON_Parse("{\"errors\": []}");
	assert_int_equal(restjson_served(d, served, 8), 0);
	assert_int_equal(restjson_served(NULL, served, 8), 0);
	cJSON_Delete(d);
	restjson_none_message("/run/x.sock", NULL, 0, err, sizeof(err));
	assert_non_null(strstr(err, "'/run/x.sock' offers no /slurm/v0.0.N/job/submit; "
				    "layoutbench speaks v0.0.42,"));
}

static cJSON *read_fixture(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	long n;
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	text = calloc(1, (size_t)n + 1);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	cJSON *j = cJSON_Parse(text);
	free(text);
	assert_non_null(j);
	return j;
}

/* The paths real servers list (Debian's slurmrestd 22.05.8 and 24.11.5, as
 * scripts/slurm-local.sh starts them; 24.11 ends most paths with a slash). */
static void test_negotiate_real(void **state)
{
	int served[8];
	(void)state;
	cJSON *d = read_fixture("tests/fixtures/slurmrestd/openapi-paths-22.05.json");
	size_t n = restjson_served(d, served, 8);
	assert_int_equal(n, 1);
	assert_int_equal(restjson_pick(served, n), 38);
	cJSON_Delete(d);
	d = read_fixture("tests/fixtures/slurmrestd/openapi-paths-24.11.json");
	n = restjson_served(d, served, 8);
	assert_int_equal(n, 3);
	assert_int_equal(served[0], 42);
	assert_int_equal(served[1], 41);
	assert_int_equal(served[2], 40);
	assert_int_equal(restjson_pick(served, n), 42);
	cJSON_Delete(d);
}

/* A real v0.0.42 answer (Slurm 24.11): each job's state, exit status and times, and which
 * of our rows it is. */
static void test_state_v42_real(void **state)
{
	struct exec_state s;
	struct results_job r;
	const cJSON *j;
	(void)state;
	cJSON *d = read_fixture("tests/fixtures/slurmrestd/jobs-v0.0.42.json");
	const cJSON *jobs = cJSON_GetObjectItem(d, "jobs");
	/* (array job id, index) or (job id, -1), and what each must read as */
	const struct {
		const char *array_job_id, *job_id;
		int index;
		const char *state, *reason;
		int exit_code, has_times;
	} want[] = {
	    {"3", "3_0", 0, "COMPLETED", "", 0, 1},
	    {"3", "3_1", 1, "COMPLETED", "", 0, 1},
	    {"", "4", -1, "FAILED", "NonZeroExitCode", 3, 1},
	    {"", "5", -1, "CANCELLED", "", 128 + 15, 1},
	    {"6", "6_4", 4, "PENDING", "JobHeldUser", -1, 0},
	};
	for (size_t w = 0; w < sizeof(want) / sizeof(want[0]); w++) {
		int hits = 0;
		results_job_init(&r);
		snprintf(r.array_job_id, sizeof(r.array_job_id), "%s", want[w].array_job_id);
		snprintf(r.job_id, sizeof(r.job_id), "%s", want[w].job_id);
		r.array_index = want[w].index;
		cJSON_ArrayForEach(j, jobs)
		{
			if (!restjson_job_matches(j, &r))
				continue;
			hits++;
			restjson_job_state(j, &s);
			assert_string_equal(s.state, want[w].state);
			assert_string_equal(s.reason, want[w].reason);
			assert_int_equal(s.exit_code, want[w].exit_code);
			assert_int_equal(s.start_time > 0, want[w].has_times);
			assert_int_equal(s.end_time >= s.start_time && s.end_time > 0,
					 want[w].has_times);
		}
		assert_int_equal(hits, 1);
	}
	/* index 6 is past the remainder 0-5%2 */
	results_job_init(&r);
	snprintf(r.array_job_id, sizeof(r.array_job_id), "6");
	r.array_index = 6;
	cJSON_ArrayForEach(j, jobs) assert_false(restjson_job_matches(j, &r));
	cJSON_Delete(d);
}

static void test_shapes(void **state)
{
	struct slurm_array a;
	char err[256], spoken[128];
	(void)state;
	restjson_spoken(spoken, sizeof(spoken));
	assert_string_equal(spoken, "v0.0.42, v0.0.41, v0.0.40, v0.0.39, v0.0.38");
	assert_null(restjson_shape(37));
	for (int m = RESTJSON_OLDEST; m <= RESTJSON_NEWEST; m++) {
		const struct restjson_shape *sh = restjson_shape(m);
		assert_non_null(sh);
		assert_int_equal(sh->minor, m);
		assert_non_null(sh->slurm);
	}
	assert_false(restjson_shape(38)->env_list);
	assert_true(restjson_shape(39)->env_list);
	assert_false(restjson_shape(39)->script_in_job);
	assert_true(restjson_shape(40)->script_in_job);
	/* a version named with --rest-version that is newer than ours: the newest shapes */
	assert_int_equal(restjson_shape(45)->minor, RESTJSON_NEWEST);
	/* v0.0.41 and v0.0.42 send what v0.0.40 sends */
	make_array(&a);
	char *b40 = restjson_submit_body(40, &a, env, 2, "/w", 1, err, sizeof(err));
	for (int m = 41; m <= 42; m++) {
		char *b = restjson_submit_body(m, &a, env, 2, "/w", 1, err, sizeof(err));
		assert_non_null(b);
		assert_string_equal(b, b40);
		free(b);
	}
	free(b40);
	/* older than any we speak */
	assert_null(restjson_submit_body(37, &a, env, 2, "/w", 0, err, sizeof(err)));
	assert_string_equal(err, "slurmrestd v0.0.37 is older than any layoutbench speaks "
				 "(v0.0.42, v0.0.41, v0.0.40, v0.0.39, v0.0.38)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_negotiate), cmocka_unit_test(test_negotiate_real),
	    cmocka_unit_test(test_shapes),    cmocka_unit_test(test_body_v38),
	    cmocka_unit_test(test_body_v40),  cmocka_unit_test(test_state_v38),
	    cmocka_unit_test(test_state_v40), cmocka_unit_test(test_state_v42_real),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
