/*
 * layoutbench: the command-line entry. The commands, their options and their usage are
 * the table in common/cmdline.c; this file maps each name to its function, and prints
 * `help` from the same table.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "common/cmdline.h"
#include "common/version.h"
#include "report/cmd.h"
#include "results/cmd.h"
#include "slurm/cancel.h"
#include "slurm/resubmit.h"
#include "slurm/status.h"
#include "slurm/submit.h"

static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
    {"quickstart", cmd_quickstart},
    {"plan", cmd_plan},
    {"submit", cmd_submit},
    {"status", cmd_status},
    {"resubmit", cmd_resubmit},
    {"cancel", cmd_cancel},
    {"collect", cmd_collect},
    {"import", cmd_import},
    {"calibrate", cmd_calibrate},
    {"report", cmd_report},
    {"sql", cmd_sql},
    {"help", cmd_help},
    {"version", cmd_version},
};

static int (*find_function(const char *name))(int, char **)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(commands[i].name, name))
			return commands[i].fn;
	return NULL;
}

static int cmd_help(int argc, char **argv)
{
	struct lb_args a;
	int rc;

	if ((rc = lb_args_parse("help", argc, argv, &a)))
		goto out_release_args;
	if (a.given[LB_OPT_MARKDOWN]) {
		lb_help_markdown(stdout);
	} else if (a.n_operands == 0) {
		lb_help_all(stdout);
	} else {
		const struct lb_command *c = lb_command_find(a.operands[0]);
		if (!c) {
			const char *near = lb_command_suggest(a.operands[0]);

			fprintf(stderr, "error: unknown command '%s'%s%s%s\n", a.operands[0],
				near ? ": did you mean '" : "", near ? near : "", near ? "'?" : "");
			rc = 2;
			goto out_release_args;
		}
		lb_help_command(stdout, c);
	}
out_release_args:
	lb_args_release(&a);
	return rc;
}

static int cmd_version(int argc, char **argv)
{
	struct lb_args a;
	int rc;

	if (!(rc = lb_args_parse("version", argc, argv, &a)))
		printf("layoutbench %s (%s)\n", LB_VERSION, lb_git_commit());
	lb_args_release(&a);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		lb_help_all(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		lb_help_all(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		char *vargv[] = {"version", NULL};
		return cmd_version(1, vargv);
	}
	const struct lb_command *c = lb_command_find(argv[1]);
	int (*fn)(int, char **) = find_function(argv[1]);
	if (!c || !fn) {
		const char *near = lb_command_suggest(argv[1]);

		if (near)
			fprintf(stderr, "error: unknown command '%s': did you mean '%s'? (see "
				"'layoutbench help')\n", argv[1], near);
		else
			fprintf(stderr, "error: unknown command '%s' (see 'layoutbench help')\n",
				argv[1]);
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			lb_help_command(stdout, c);
			return 0;
		}
	}
	int rc = fn(argc - 1, argv + 1);
	/* what a command printed must have reached stdout (a full disk, a quota): a command
	 * that did not say so itself does not exit 0 (git's check in its main) */
	errno = 0;
	if (!rc && (fflush(stdout) || ferror(stdout))) {
		fprintf(stderr, "error: cannot write to standard output: %s\n",
			errno ? strerror(errno) : "a write failed");
		return 1;
	}
	return rc;
}
