/*
 * layoutbench-train: the trainer binary. Parses the layout flags (the same parser as the
 * CLI) and the trainer's own, then runs; everything else is in harness/train.c.
 */
#include <stdio.h>

#include "harness/train.h"

int main(int argc, char **argv)
{
	struct lb_train_opts o;
	char err[1024];
	int rc;

	lb_train_opts_init(&o);
	rc = lb_train_parse_args(&o, argc, argv, err, sizeof(err));
	if (rc == 1)
		return 0;
	if (rc) {
		fprintf(stderr, "error: %s\n", err);
		return LB_EXIT_USAGE;
	}
	return lb_train_main(&o);
}
