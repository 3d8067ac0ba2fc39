/*
 * Unit tests of slurmrestd's JSON by OpenAPI version: the submit body (environment object
 * vs "NAME=value" array, plain vs {"set","number"} numbers, node counts, GPUs, script
 * placement, hold, extra options) and reading jobs (state as a string or an array, exit
 * status as a raw wait status or an object, matching array tasks and pending remainders).
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
	/* a plain job matches by id */
	j = cJSON_Parse("{\"job_id\": 30, \"array_job_id\": 0, \"job_state\": \"RUNNING\"}");
	results_job_init(&r);
	snprintf(r.job_id, sizeof(r.job_id), "30");
	assert_true(restjson_job_matches(j, &r));
	cJSON_Delete(j);
	assert_true(exec_task_in("1,3,7-9", 8));
	assert_false(exec_task_in("1,3,7-9", 4));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_body_v38),
	    cmocka_unit_test(test_body_v40),
	    cmocka_unit_test(test_state_v38),
	    cmocka_unit_test(test_state_v40),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
