/*
 * The executor registry (executor.h): a name to its implementation.
 */
#include "slurm/executor.h"

#include <stdio.h>
#include <string.h>

int executor_open(const char *name, const struct exec_opts *o, struct executor **out, char *err,
		  size_t errlen)
{
	*out = NULL;
	if (!name || !strcmp(name, "slurm"))
		return exec_slurm_open(o, out, err, errlen);
	if (!strcmp(name, "rest"))
		return exec_rest_open(o, out, err, errlen);
	if (!strcmp(name, "local"))
		return exec_local_open(o, out, err, errlen);
	snprintf(err, errlen, "unknown executor '%s' (use slurm, rest or local)", name);
	return -1;
}

void executor_close(struct executor *x)
{
	if (x && x->close)
		x->close(x);
}
