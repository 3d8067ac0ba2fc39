/*
 * layoutbench: the command-line entry. The commands are cli/commands.c's registry; each
 * command's file owns its options, and `help` prints them from the same tables.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

int main(int argc, char **argv)
{
	if (argc < 2) {
		lb_help_all(stderr, lb_commands, lb_command_count);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		lb_help_all(stdout, lb_commands, lb_command_count);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		char *vargv[] = {"version", NULL};
		return lb_args_run(&cmd_version, 1, vargv);
	}
	const struct lb_command *c = lb_command_find(argv[1]);
	if (!c) {
		const char *near = lb_command_suggest(argv[1]);

		if (near)
			fprintf(stderr,
				"error: unknown command '%s': did you mean '%s'? (see "
				"'layoutbench help')\n",
				argv[1], near);
		else
			fprintf(stderr, "error: unknown command '%s' (see 'layoutbench help')\n",
				argv[1]);
		return 2;
	}
	int rc = lb_args_run(c, argc - 1, argv + 1);
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
