/*
 * How the ranks of a run that spans nodes learn a few bytes of rank 0's (the NCCL unique
 * id) with what a cluster already has, and nothing of ours listening on the network:
 *
 *  - file (the default): rank 0 writes them into <dir>/.nccl-id-<tag>, the run directory
 *    every node already sees (the job scripts put the run log there), through a
 *    temporary name, fsync and rename, so a reader sees all of it or nothing; the others
 *    poll for it within the timeout; rank 0 removes it when the world is up
 *    (lb_bootstrap_done). Needs nothing on the compute nodes but a shared file system.
 *  - pmi2: Slurm's PMI2 key-value space (srun --mpi=pmi2, or SLURM_MPI_TYPE=pmi2):
 *    rank 0 puts them (hex) under a key of the run, every rank fences and gets them.
 *    libpmi2.so.0 (Debian's libpmi2-0, from Slurm) is loaded at run time, so a node
 *    without it only fails a run that asks for pmi2. For sites whose run directories are
 *    node-local.
 *  - auto: pmi2 when srun started this process with the PMI2 plugin (PMI_FD is set),
 *    else file.
 *
 * The file is the default because the trainer must run on nodes that have only libc and
 * CUDA's libraries, and a shared run directory is what every job of ours has already.
 * Plain C, libc and libdl: tested on the CPU (tests/unit/test_bootstrap.c, and under
 * srun --mpi=pmi2 by tests/sh/bootstrap_slurm.sh).
 */
#ifndef LB_BOOTSTRAP_H
#define LB_BOOTSTRAP_H

#include <stddef.h>

enum lb_bootstrap { LB_BOOT_AUTO = 0, LB_BOOT_FILE, LB_BOOT_PMI2 };

struct lb_boot_opts {
	enum lb_bootstrap kind;
	int rank, size;
	const char *dir;  /* file: the shared folder (the run directory); NULL: "." */
	const char *tag;  /* a name unique to the run (job, step, restart), for the file
			     name and the PMI2 key */
	double timeout_s; /* file: how long the others wait for rank 0's file */
};

/* "auto", "file", "pmi2" (static text). */
const char *lb_bootstrap_name(enum lb_bootstrap k);
/* 0, or -1 for another word. */
int lb_bootstrap_parse(const char *s, enum lb_bootstrap *out);
/* What auto means in this process's environment (file or pmi2); file and pmi2 stay. */
enum lb_bootstrap lb_bootstrap_resolve(enum lb_bootstrap k);

/* Give rank 0's len bytes at buf to every rank (collective over the o->size ranks).
 * 0, or LB_COMM_EFAIL / LB_COMM_ETIMEOUT (comm.h) with err set: "NCCL bootstrap: rank
 * 0's id '<path>' did not appear within 30.0 s (is the run directory on a file system
 * every node sees?)", "NCCL bootstrap through PMI2: libpmi2.so.0 cannot be loaded: ...
 * (install Slurm's libpmi2-0, or use --bootstrap file)". len is at most 480 bytes. */
int lb_bootstrap_bcast(const struct lb_boot_opts *o, void *buf, size_t len, char *err,
		       size_t errlen);
/* After every rank has used the bytes: rank 0 removes the file (file; a no-op else). */
void lb_bootstrap_done(const struct lb_boot_opts *o);

#endif
