/*
 * The registry of `layoutbench`'s commands: one list of the command structs that their
 * own files define, each with its table of options beside it (common/cmdline.h). The
 * commands cli/ owns itself are `plan` (it joins the planner and the renderer),
 * `quickstart` (every stage in a row), `help` and `version`; the others live with their
 * stage (slurm/submit.h, results/cmd.h, report/cmd.h, ...).
 */
#ifndef LB_COMMANDS_H
#define LB_COMMANDS_H

#include <stddef.h>

#include "common/cmdline.h"

extern const struct lb_command cmd_plan;
extern const struct lb_command cmd_quickstart;
extern const struct lb_command cmd_help;
extern const struct lb_command cmd_version;

/* Every command, in the order help lists them. */
extern const struct lb_command *const lb_commands[];
extern const size_t lb_command_count;

/* The command named name, or NULL. */
const struct lb_command *lb_command_find(const char *name);
/* The command a misspelled name most likely meant (at most two edits, an adjacent swap
 * one: "plna" -> "plan"), or NULL. */
const char *lb_command_suggest(const char *name);

#endif
