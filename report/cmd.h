/*
 * `layoutbench report` (its options: the table beside it). argv[0] is the subcommand's name;
 * returns the exit status: 0 success, 1 failure, 2 usage error.
 */
#ifndef LB_REPORT_CMD_H
#define LB_REPORT_CMD_H

#include "common/cmdline.h"

extern const struct lb_command cmd_report;

#endif
