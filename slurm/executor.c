/*
 * The executor registry (executor.h): a name to its implementation; the default, slurm,
 * comes first.
 */
#include "slurm/executor.h"

#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	int (*open)(const struct exec_opts *o, struct executor **out, char *err, size_t errlen);
} executors[] = {
#define EXECUTOR_ROW(n) {#n, exec_##n##_open},
    EXECUTORS(EXECUTOR_ROW)};

int executor_open(const char *name, const struct exec_opts *o, struct executor **out, char *err,
		  size_t errlen)
{
	size_t i, n = sizeof(executors) / sizeof(executors[0]);
	char known[128] = "";

	*out = NULL;
	for (i = 0; i < n; i++)
		if (!strcmp(name ? name : executors[0].name, executors[i].name))
			return executors[i].open(o, out, err, errlen);
	for (i = 0; i < n; i++) /* "slurm, rest or local" */
		snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
			 i == 0	      ? ""
			 : i == n - 1 ? " or "
				      : ", ",
			 executors[i].name);
	snprintf(err, errlen, "unknown executor '%s' (use %s)", name, known);
	return -1;
}

void executor_close(struct executor *x)
{
	if (x && x->close)
		x->close(x);
}
