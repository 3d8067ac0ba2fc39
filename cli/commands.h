/*
 * The subcommands of `layoutbench`. Each stage's folder owns its subcommands' code
 * (plan in sweeps/, submit/status/resubmit/cancel in slurm/, collect/import/sql in
 * results/, report in report/); cli/main.c holds the table that names them.
 * Each function gets argv with argv[0] = the subcommand name and returns the process
 * exit status: 0 success, 1 failure, 2 usage error.
 */
#ifndef LB_COMMANDS_H
#define LB_COMMANDS_H

int cmd_plan(int argc, char **argv);
int cmd_submit(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_resubmit(int argc, char **argv);
int cmd_cancel(int argc, char **argv);
int cmd_collect(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_sql(int argc, char **argv);
int cmd_quickstart(int argc, char **argv);

/* Print the usage line of a subcommand to stderr (from the table in cli/main.c). */
void lb_usage(const char *cmd);

#endif
