/*
 * libFuzzer target: arbitrary bytes as run-log lines (split at newlines), each through
 * the run-log parser. It must never crash, hang or leak, a failure must come with a
 * message, and the fast path for step lines must agree with the general cJSON path on
 * every line: same verdict, same values.
 */
// fuzz-sources: results/runlog.c common/layout.c common/preset.c common/cmdline.c common/model.c common/util.c
// fuzz-libs: -lcjson -lm
// fuzz-seeds: tests/fixtures/runlogs/*.jsonl tests/fixtures/memory/*.jsonl
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "results/runlog.h"

static int same_double(double a, double b)
{
	return (isnan(a) && isnan(b)) || a == b;
}

static int same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static void check_line(const char *p, size_t n)
{
	struct runlog_record a, b;
	char ea[256] = "", eb[256] = "";
	int ra = runlog_parse_line(p, n, &a, ea, sizeof(ea));
	int rb = runlog_parse_line_general(p, n, &b, eb, sizeof(eb));

	if (ra != rb)
		abort(); /* the fast path accepted what the general path refuses, or not */
	if (ra) {
		if (!ea[0] || !eb[0])
			abort(); /* a failure without a message */
		return;
	}
	if (a.type != b.type)
		abort();
	if (a.type == RUNLOG_STEP) {
		const struct runlog_step *x = &a.step, *y = &b.step;
		if (x->step != y->step || x->warmup != y->warmup ||
		    !same_double(x->time_s, y->time_s) || x->tokens != y->tokens ||
		    !same_double(x->loss, y->loss) || x->peak_mem_bytes != y->peak_mem_bytes ||
		    !same_double(x->forward_s, y->forward_s) ||
		    !same_double(x->backward_s, y->backward_s) ||
		    !same_double(x->optimizer_s, y->optimizer_s) ||
		    !same_double(x->comm_exposed_s, y->comm_exposed_s) ||
		    !same_double(x->bubble_s, y->bubble_s) ||
		    !same_str(x->rank_peak_mem, y->rank_peak_mem) ||
		    x->device_peak_mem_bytes != y->device_peak_mem_bytes ||
		    !same_str(x->rank_device_peak_mem, y->rank_device_peak_mem))
			abort();
	}
	runlog_record_release(&a);
	runlog_record_release(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		/* a copy of exactly n bytes, so that reading past the line is caught */
		char *line = malloc(n ? n : 1);
		if (!line)
			return 0;
		memcpy(line, p, n);
		check_line(line, n);
		free(line);
		p += n;
	}
	return 0;
}
