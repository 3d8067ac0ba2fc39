/*
 * The GPU communicator: the comm table (comm.h) for the CUDA backend. One communicator
 * carries two kinds of buffer, told apart by the stream argument, as every call site in
 * the trainer passes it: a call with a stream (the backend's, ops->stream()) moves device
 * buffers and is enqueued on that stream; a call with stream NULL moves host values (the
 * loss, the peaks, the log path) and runs at once.
 *
 * Device buffers travel one of two ways, chosen once for the world:
 *  - "nccl": one NCCL communicator per group, split from the world's (ncclCommSplit), the
 *    collectives and grouped send/recv enqueued on the stream with no host
 *    synchronisation. NCCL is loaded at run time (libnccl.so.2), so a one-GPU run needs no
 *    NCCL. A watchdog thread follows every enqueued call through a CUDA event: a call that
 *    does not complete within the timeout, or an asynchronous NCCL error, aborts the
 *    communicators (ncclCommAbort) and ends the rank through the failure callback, with
 *    the rank at fault named where the host communicator can tell (a shared-memory world:
 *    a peer that died, or one that does not reach a probe barrier).
 *  - "staged": through host memory and the host communicator (comm_shm), copied
 *    device -> host, reduced there, copied back; each call synchronises the stream. NCCL
 *    refuses two ranks on one GPU, so this is what lets every parallel layout run with
 *    several ranks on one GPU (a test vehicle: its speed means nothing).
 * Host values go through the host communicator when there is one (ranks of one node);
 * across nodes (no host communicator) through NCCL via a device bounce buffer.
 *
 * Bootstrap of the NCCL world (its unique id, from rank 0 to all): broadcast over the
 * host communicator on one node; across nodes through harness/bootstrap.h (a file in the
 * run directory every rank sees, or Slurm's PMI2). See docs/parallelism.md.
 */
#ifndef LB_COMM_CUDA_H
#define LB_COMM_CUDA_H

#include <stddef.h>

#include "harness/bootstrap.h"
#include "harness/comm.h"

enum lb_gpu_comm { LB_GPU_COMM_AUTO = 0, LB_GPU_COMM_NCCL, LB_GPU_COMM_STAGED };

/* Called by the watchdog thread when a device call failed or hung, after the NCCL
 * communicators were aborted: the LB_COMM_E* code (ETIMEOUT: a call did not complete in
 * time; EPEER: a peer posted its own failure; EFAIL: an NCCL or CUDA error), the rank at
 * fault (world numbering, -1 unknown), a message. It should not return; if it does, the
 * process exits with status 4 (nccl_error). */
typedef void (*lb_comm_fail_fn)(void *arg, int code, int culprit, const char *msg);

struct lb_comm_cuda_opts {
	enum lb_gpu_comm kind; /* AUTO: staged when ranks of a node share a GPU, else nccl */
	int rank, size;	       /* world */
	int local_rank, local_size;
	double timeout_s;	     /* a device call that does not complete in this time fails */
	const char *id_dir;	     /* across nodes: where rank 0 writes the NCCL id (run dir) */
	const char *id_tag;	     /* a name unique to this run (the job id) for that file */
	enum lb_bootstrap bootstrap; /* across nodes: file, pmi2 or auto (bootstrap.h) */
	lb_comm_fail_fn on_fail;
	void *fail_arg;
};

/*
 * The world communicator over `host` (the shared-memory world of this node's ranks, or
 * NULL across nodes; owned by the result from now on, also on failure). Collective over
 * the world. Returns 0, or a LB_COMM_E* code with err set ("NCCL 2.28 cannot be loaded:
 * libnccl.so.2: cannot open shared object file (install NCCL or set LD_LIBRARY_PATH)").
 * Needs the CUDA backend initialised (the device chosen).
 */
int lb_comm_cuda_world(struct lb_comm *host, const struct lb_comm_cuda_opts *o,
		       struct lb_comm **out, char *err, size_t errlen);

/* 1 if c is a GPU communicator (world or split from one). */
int lb_comm_is_cuda(const struct lb_comm *c);
/* Name a group for messages ("tp", "pp", "dp"; static text). */
void lb_comm_cuda_set_name(struct lb_comm *c, const char *name);
/* After a failed call: the rank at fault (-1 unknown) and a message; returns the code of
 * the last failed call (0 when none). */
int lb_comm_cuda_error(const struct lb_comm *c, int *rank, char *msg, size_t len);

/*
 * Device time of the NCCL calls completed since the last call (seconds, measured by CUDA
 * events around each call on its stream: on the compute stream all of it is exposed),
 * summed over the world's communicators; per_tag[i] (may be NULL) the part enqueued while
 * lb_comm_cuda_current_tag was i (i < ntags; the trainer's phase numbers). Call after the
 * stream is synchronised. -1 for a staged or non-GPU communicator (host-timed there).
 */
double lb_comm_cuda_take_seconds(struct lb_comm *c, double *per_tag, int ntags);
extern int lb_comm_cuda_current_tag;

/* The communicator benchmark (bench/bench_comm.c) and tests: the kind auto resolves to
 * on this node (local ranks > visible devices: staged). */
enum lb_gpu_comm lb_comm_cuda_auto_kind(int local_size);

#endif
