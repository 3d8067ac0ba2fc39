/*
 * `layoutbench status` (options: common/cmdline.c): one batched poll per executor, the
 * states written, finished runs collected, failures classed (slurm/track.h), then per
 * sweep the count of each state and class and one line per failed layout. argv[0] is the
 * name; returns the exit status.
 */
#ifndef LB_SLURM_STATUS_H
#define LB_SLURM_STATUS_H

int cmd_status(int argc, char **argv);

#endif
