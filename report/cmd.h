/*
 * `layoutbench report` (options: common/cmdline.c). argv[0] is the subcommand's name;
 * returns the exit status: 0 success, 1 failure, 2 usage error.
 */
#ifndef LB_REPORT_CMD_H
#define LB_REPORT_CMD_H

int cmd_report(int argc, char **argv);

#endif
