/*
 * `layoutbench status` (its options: the table beside it): one batched poll per executor, the
 * states written, finished runs collected, failures classed (slurm/track.h), then per
 * sweep the count of each state and class and one line per failed layout. argv[0] is the
 * name; returns the exit status.
 */
#ifndef LB_SLURM_STATUS_H
#define LB_SLURM_STATUS_H

#include "common/cmdline.h"

extern const struct lb_command cmd_status;

#endif
