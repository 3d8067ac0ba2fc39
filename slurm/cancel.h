/*
 * `layoutbench cancel` (its options: the table beside it): cancel the pending and running jobs
 * of a sweep (or of every sweep) through their executors, one call per array, then record
 * what the schedulers say. argv[0] is the name; returns the exit status.
 */
#ifndef LB_SLURM_CANCEL_H
#define LB_SLURM_CANCEL_H

#include "common/cmdline.h"

extern const struct lb_command cmd_cancel;

#endif
