/*
 * `layoutbench resubmit` (its options: the table beside it): plan a sweep again from the spec
 * stored at submission and submit its failed layouts (of the chosen classes) as their next
 * attempt, through the executor they ran on or --executor. Out-of-memory failures are
 * deterministic: they are left out, with a warning, unless --force. argv[0] is the name;
 * returns the exit status.
 */
#ifndef LB_SLURM_RESUBMIT_H
#define LB_SLURM_RESUBMIT_H

#include "common/cmdline.h"

extern const struct lb_command cmd_resubmit;

#endif
