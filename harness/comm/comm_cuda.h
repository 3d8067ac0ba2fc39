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
 * host communicator on one node; across nodes through harness/comm/bootstrap.h (a file in the
 * run directory every rank sees, or Slurm's PMI2). See docs/parallelism.md.
 */
#ifndef LB_COMM_CUDA_H
#define LB_COMM_CUDA_H

#include <stddef.h>

#include "harness/comm/comm.h"

/*
 * The world communicator over `host` (the shared-memory world of this node's ranks, or
 * NULL across nodes; owned by the result from now on, also on failure). Collective over
 * the world. Returns 0, or a LB_COMM_E* code with err set ("NCCL 2.28 cannot be loaded:
 * libnccl.so.2: cannot open shared object file (install NCCL or set LD_LIBRARY_PATH)").
 * Needs the CUDA backend initialised (the device chosen).
 */
int lb_comm_cuda_world(struct lb_comm *host, const struct lb_gpu_comm_opts *o, struct lb_comm **out,
		       char *err, size_t errlen);


/* The comm table's optional members (comm.h), on a GPU communicator: set_name names the
 * group in the watchdog's messages; error gives the last failure of the world (the rank
 * at fault where the host communicator can tell); set_tag tags the world's calls from now
 * on; take_seconds gives the device time of its NCCL calls completed since the last call
 * (CUDA events around each call on its stream: on the compute stream all of it is
 * exposed), summed over the world's communicators, per tag, and -1 on a staged world
 * (host-timed there). */

/* The communicator benchmark (bench/bench_comm.c) and tests: the kind auto resolves to
 * on this node (local ranks > visible devices: staged). */
enum lb_gpu_comm lb_comm_cuda_auto_kind(int local_size);

#endif
