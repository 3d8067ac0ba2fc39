/*
 * The registry of `layoutbench`'s commands (cli/commands.h), and the two that read it:
 * `help` and `version`.
 */
#include "cli/commands.h"

#include <stdio.h>
#include <string.h>

#include "common/version.h"
#include "report/cmd.h"
#include "results/cmd.h"
#include "slurm/cancel.h"
#include "slurm/resubmit.h"
#include "slurm/status.h"
#include "slurm/submit.h"

const struct lb_command *const lb_commands[] = {
    &cmd_quickstart, &cmd_plan,	   &cmd_submit,	 &cmd_status,	 &cmd_resubmit,
    &cmd_cancel,     &cmd_collect, &cmd_import,	 &cmd_calibrate, &cmd_report,
    &cmd_sql,	     &cmd_help,	   &cmd_version,
};
const size_t lb_command_count = sizeof(lb_commands) / sizeof(lb_commands[0]);

const struct lb_command *lb_command_find(const char *name)
{
	for (size_t i = 0; name && i < lb_command_count; i++)
		if (!strcmp(lb_commands[i]->name, name))
			return lb_commands[i];
	return NULL;
}

const char *lb_command_suggest(const char *name)
{
	return lb_args_nearest(name, lb_commands, lb_command_count);
}

enum { OPT_MARKDOWN };

static const struct lb_option help_opts[] = {
    LB_SWITCH(OPT_MARKDOWN, "markdown", 0, "the command table as markdown (the README's)"),
    LB_OPT_END,
};

static int run_help(const struct lb_args *a)
{
	const struct lb_command *c;
	const char *near;

	if (a->given[OPT_MARKDOWN]) {
		lb_help_markdown(stdout, lb_commands, lb_command_count);
		return 0;
	}
	if (a->n_operands == 0) {
		lb_help_all(stdout, lb_commands, lb_command_count);
		return 0;
	}
	if (!(c = lb_command_find(a->operands[0]))) {
		near = lb_command_suggest(a->operands[0]);
		fprintf(stderr, "error: unknown command '%s'%s%s%s\n", a->operands[0],
			near ? ": did you mean '" : "", near ? near : "", near ? "'?" : "");
		return 2;
	}
	lb_help_command(stdout, c);
	return 0;
}

const struct lb_command cmd_help =
    LB_COMMAND("help", "[CMD]", 0, 1, 0, help_opts, run_help,
	       "print the usage of every command, or of one with its options");

static const struct lb_option no_opts[] = {LB_OPT_END};

static int run_version(const struct lb_args *a)
{
	(void)a; /* it takes nothing */
	printf("layoutbench %s (%s)\n", LB_VERSION, lb_git_commit());
	return 0;
}

const struct lb_command cmd_version =
    LB_COMMAND("version", NULL, 0, 0, 0, no_opts, run_version,
	       "print the version and the commit it was built from");
