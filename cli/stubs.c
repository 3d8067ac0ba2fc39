/*
 * Weak placeholders for subcommands whose stage has not defined them yet; a stage's
 * strong definition replaces each one at link time. Removed once every stage lands.
 */
#include <stdio.h>

#include "cli/commands.h"

#define STUB(fn)                                                                     \
	__attribute__((weak)) int fn(int argc, char **argv)                          \
	{                                                                            \
		(void)argc;                                                          \
		fprintf(stderr, "error: '%s' is not built yet\n", argv[0]);          \
		return 1;                                                            \
	}
STUB(cmd_plan)
STUB(cmd_submit)
STUB(cmd_status)
STUB(cmd_resubmit)
STUB(cmd_cancel)
STUB(cmd_collect)
STUB(cmd_import)
STUB(cmd_report)
STUB(cmd_sql)
STUB(cmd_quickstart)

/* slurm/render.h: `plan --render` is served by the slurm stage. */
struct sweep_plan;
__attribute__((weak)) int slurm_render_plan(const struct sweep_plan *p, const char *dir,
					     char *err, unsigned long errlen)
{
	(void)p;
	(void)dir;
	snprintf(err, errlen, "job-script rendering is not built yet");
	return -1;
}
