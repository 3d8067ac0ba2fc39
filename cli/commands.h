/*
 * The subcommands cli/ owns itself: `plan` (it joins the planner and the renderer) and
 * `quickstart` (every stage in a row). The others live with their stage and are declared
 * in its header (slurm/submit.h, results/cmd.h, report/cmd.h, ...); cli/main.c maps the
 * names of common/cmdline.c's table to all of them. Each gets argv with argv[0] = the
 * subcommand name and returns the exit status: 0 success, 1 failure, 2 usage error.
 */
#ifndef LB_COMMANDS_H
#define LB_COMMANDS_H

int cmd_plan(int argc, char **argv);
int cmd_quickstart(int argc, char **argv);

#endif
