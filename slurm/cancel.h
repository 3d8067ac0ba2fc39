/*
 * `layoutbench cancel` (options: common/cmdline.c): cancel the pending and running jobs
 * of a sweep (or of every sweep) through their executors, one call per array, then record
 * what the schedulers say. argv[0] is the name; returns the exit status.
 */
#ifndef LB_SLURM_CANCEL_H
#define LB_SLURM_CANCEL_H

int cmd_cancel(int argc, char **argv);

#endif
