/*
 * Opening an executor by name: the registry of the three implementations (slurm/exec.h
 * declares the table and them). The executors never include this header, so the
 * dependency runs one way: the registry above the executors, the executors above the kit
 * they share (slurm/exec.c).
 */
#ifndef LB_SLURM_EXECUTOR_H
#define LB_SLURM_EXECUTOR_H

#include <stddef.h>

#include "slurm/exec.h"

/* The executors, the one list: the registry and the choices of --executor are made from
 * it. X(name): its implementation is exec_<name>_open. */
#define EXECUTORS(X)	 X(slurm) X(rest) X(local)
#define EXECUTOR_BAR(n)	 "|" #n
#define EXECUTOR_CHOICES (&(EXECUTORS(EXECUTOR_BAR))[1]) /* "slurm|rest|local" */

/* Open an executor by name ("slurm", the default when NULL; "rest"; "local"). Returns 0
 * and *out (close with executor_close), or -1 with err set (unknown name, a build without
 * the library, no cluster, no token). */
int executor_open(const char *name, const struct exec_opts *o, struct executor **out, char *err,
		  size_t errlen);
void executor_close(struct executor *x);

#endif
