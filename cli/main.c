/*
 * layoutbench: the command-line entry. A table of subcommands (name, function, usage);
 * `layoutbench help CMD` and each command's usage error print from the same table.
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "common/version.h"

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *usage;
	const char *summary;
};

static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);

static const struct command commands[] = {
    {"quickstart", cmd_quickstart, "quickstart [--db PATH] [--out DIR] [--jobs N]",
     "run the embedded tiny sweep end to end on the CPU: plan, train, collect, report"},
    {"plan", cmd_plan, "plan SPEC [--format table|csv|json] [--render DIR]",
     "expand a sweep spec into layouts, each ok, oom (predicted) or invalid with a reason"},
    {"submit", cmd_submit,
     "submit SPEC [--executor slurm|rest|local] [--db PATH] [--runs DIR] [--dry-run] "
     "[--throttle K] [--max-array N] [--wait] [--force] [--quiet] [--rest-url URL] "
     "[--rest-version vX] [--slots N]",
     "submit every runnable layout of a sweep and record the jobs"},
    {"status", cmd_status, "status [--db PATH] [--sweep NAME]",
     "poll the jobs of a sweep, collect finished runs, count states and failure classes"},
    {"resubmit", cmd_resubmit,
     "resubmit [--db PATH] [--sweep NAME] [--class CLASS ...] [--executor E] [--throttle K] "
     "[--wait]",
     "submit failed layouts again"},
    {"cancel", cmd_cancel, "cancel [--db PATH] [--sweep NAME]",
     "cancel a sweep's pending and running jobs"},
    {"collect", cmd_collect, "collect [--db PATH] [RUN_DIR|FILE ...]",
     "ingest run logs into the database (idempotent)"},
    {"import", cmd_import, "import --format paper [--db PATH] FILE.csv ...",
     "load the paper's measured runs as external sweeps"},
    {"report", cmd_report,
     "report [--db PATH] [--sweep NAME] --figure "
     "kernels|checkpointing|microbatch|tp-pp|seqpar|rms|best|phases|all "
     "[--format md|csv|html] [--out DIR]",
     "the paper's MFU tables and figures from the runs in the database"},
    {"sql", cmd_sql, "sql [--db PATH] [--format table|csv|tsv] [--write] QUERY",
     "run a query on the results database (read-only; --write allows changes)"},
    {"help", cmd_help, "help [CMD]", "print usage"},
    {"version", cmd_version, "version", "print the version"},
};

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

void lb_usage(const char *cmd)
{
	const struct command *c = find_command(cmd);
	if (c)
		fprintf(stderr, "usage: layoutbench %s\n", c->usage);
}

static void usage_all(FILE *f)
{
	fprintf(f, "usage: layoutbench <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'layoutbench help CMD' prints a command's options; the default database is "
		   "results.db (--db or LAYOUTBENCH_DB)\n");
}

static int cmd_help(int argc, char **argv)
{
	if (argc < 2) {
		usage_all(stdout);
		return 0;
	}
	const struct command *c = find_command(argv[1]);
	if (!c) {
		fprintf(stderr, "error: unknown command '%s'\n", argv[1]);
		return 2;
	}
	printf("usage: layoutbench %s\n\n%s\n", c->usage, c->summary);
	return 0;
}

static int cmd_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("layoutbench %s (%s)\n", LB_VERSION, lb_git_commit());
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage_all(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage_all(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version"))
		return cmd_version(0, NULL);
	const struct command *c = find_command(argv[1]);
	if (!c) {
		fprintf(stderr, "error: unknown command '%s' (see 'layoutbench help')\n", argv[1]);
		return 2;
	}
	for (int i = 2; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			char *hargv[] = {"help", (char *)c->name, NULL};
			return cmd_help(2, hargv);
		}
	return c->fn(argc - 1, argv + 1);
}
