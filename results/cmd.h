/*
 * The results stage's subcommands: `layoutbench collect`, `import`, `sql` and `calibrate` (options:
 * common/cmdline.c). argv[0] is the subcommand's name; each returns the exit status: 0
 * success, 1 failure, 2 usage error.
 */
#ifndef LB_RESULTS_CMD_H
#define LB_RESULTS_CMD_H

int cmd_collect(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_sql(int argc, char **argv);
int cmd_calibrate(int argc, char **argv); /* results/calibrate.c */

#endif
