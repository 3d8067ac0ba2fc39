/*
 * The results stage's subcommands: `layoutbench collect`, `import` and `sql` (results/cmd.c,
 * each with its table of options) and `calibrate` (results/calibrate.c).
 */
#ifndef LB_RESULTS_CMD_H
#define LB_RESULTS_CMD_H

#include "common/cmdline.h"

extern const struct lb_command cmd_collect;
extern const struct lb_command cmd_import;
extern const struct lb_command cmd_sql;
extern const struct lb_command cmd_calibrate; /* results/calibrate.c */

#endif
