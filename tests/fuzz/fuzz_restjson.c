/*
 * libFuzzer target: arbitrary bytes as a slurmrestd answer, read the ways the REST
 * executor reads one: as an OpenAPI document (the versions it serves, the one to speak,
 * the message when none is ours) and as a jobs list (each job's state, exit status and
 * times, matched against array tasks and plain jobs). It must never crash, hang or leak;
 * what it reads must stay in range.
 */
// fuzz-sources: slurm/restjson.c slurm/exec.c common/util.c
// fuzz-libs: -lcjson -lm
// fuzz-seeds: tests/fixtures/slurmrestd/*.json
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slurm/restjson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	int served[8];
	char err[512];
	const cJSON *j;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	cJSON *doc = cJSON_Parse(text);
	free(text);
	if (!doc)
		return 0;

	size_t n = restjson_served(doc, served, 8);
	if (n > 8)
		abort();
	for (size_t i = 1; i < n; i++)
		if (served[i] >= served[i - 1])
			abort(); /* newest first, each once */
	int m = restjson_pick(served, n);
	if (m != -1 && (m < RESTJSON_OLDEST || m > RESTJSON_NEWEST))
		abort();
	restjson_none_message("http://h:1", served, n, err, sizeof(err));
	if (!err[0])
		abort();

	struct results_job rows[3];
	memset(rows, 0, sizeof(rows));
	strcpy(rows[0].array_job_id, "3");
	strcpy(rows[0].job_id, "3_1");
	rows[0].array_index = 1;
	strcpy(rows[1].job_id, "4");
	rows[1].array_index = -1;
	strcpy(rows[2].array_job_id, "6");
	strcpy(rows[2].job_id, "6_4");
	rows[2].array_index = 4;
	cJSON_ArrayForEach(j, cJSON_GetObjectItem(doc, "jobs"))
	{
		struct exec_state s;
		for (size_t r = 0; r < 3; r++)
			(void)restjson_job_matches(j, &rows[r]);
		restjson_job_state(j, &s);
		if (!s.known || memchr(s.state, '\0', sizeof(s.state)) == NULL ||
		    memchr(s.reason, '\0', sizeof(s.reason)) == NULL)
			abort();
		if (s.exit_code < -1 || s.exit_code > 255 + 128)
			abort();
	}
	cJSON_Delete(doc);
	return 0;
}
