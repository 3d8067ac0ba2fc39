/*
 * The shared-memory communicator: the ranks of one node, each a process, joined through
 * one POSIX shared-memory segment (shm_open + mmap). It implements the whole comm table
 * (comm.h): deterministic collectives (every element reduced in rank order by one rank,
 * the result copied to all, so every rank gets the same bits whatever the arrival
 * order), grouped send/recv over per-pair ring buffers, and split into sub-communicators
 * that work concurrently. Memory is bounded: large buffers go through a fixed staging
 * area chunk by chunk. Synchronisation is lock-free (C11 atomics in the segment, futex
 * sleeps): no lock can be left held by a dead rank. Every wait is bounded by the
 * timeout (twice it when the peer waited for is itself waiting: the rank that hangs is
 * named, not one in between); a peer that died (pid table + /proc), left, hung or called
 * lb_comm_shm_abort() makes the others return LB_COMM_EPEER or LB_COMM_ETIMEOUT, and
 * lb_comm_shm_error() says which rank and why. Reductions (sum, max, avg): f32, i32, and bf16/f16
 * through fp32 rounded once. See docs/parallelism.md.
 */
#ifndef LB_COMM_SHM_H
#define LB_COMM_SHM_H

#include <stddef.h>

#include "harness/comm/comm.h"

#define LB_SHM_MAX_RANKS 64 /* processes in one segment */

/*
 * Join the communicator named `name` (a POSIX shm name: "/" then up to 200 characters
 * without "/"; lb_launch gives one per run) as `rank` of `size`. Every rank calls it with
 * the same name and size; rank 0 creates and initialises the segment (removing a stale
 * one of the same name), the others wait for it. Returns 0 when all `size` ranks have
 * joined, or a LB_COMM_E* code with err set (e.g. "rendezvous '/lb-42': 3 of 4 ranks
 * arrived within 2.0 s") when they do not within timeout_s seconds, which also bounds
 * every later wait. Caller frees with (*out)->ops->destroy; rank 0's destroy unlinks the
 * name (the mapping lives on in the ranks that still hold it).
 */
int lb_comm_shm_create(const char *name, int rank, int size, double timeout_s, struct lb_comm **out,
		       char *err, size_t errlen);

/* 1 if c is a shared-memory communicator (world or split from one). */
int lb_comm_is_shm(const struct lb_comm *c);

/*
 * Report a failure of this rank to every rank of the segment (any communicator of it):
 * their pending and later calls return LB_COMM_EPEER at once (within a few tens of
 * milliseconds), and lb_comm_shm_error() there says "rank 3 failed: oom". The first
 * abort wins. reason: short text, truncated to 200 bytes.
 */
void lb_comm_shm_abort(struct lb_comm *c, const char *reason);

/*
 * After a call failed: the failing rank (world numbering; -1 when unknown) and a
 * message for a person, e.g. "rank 3 failed: oom", "rank 2 died (pid 1234) during
 * all_reduce", "timeout after 2.0 s in barrier: rank 1 did not arrive". Returns the
 * code of the last failed call of this process (0 when none; then an abort posted by a
 * peer is still reported, with LB_COMM_EPEER). rank and msg may be NULL.
 */
int lb_comm_shm_error(const struct lb_comm *c, int *rank, char *msg, size_t len);

/*
 * For a device communicator's watchdog (another thread; no collective, no wait): mark
 * this rank as blocked in a device call (1) or not (0); and the rank at fault when a
 * device call hangs: a peer that died (its pid gone), else the first live peer that is
 * neither blocked in a device call nor waiting in this communicator (it hangs elsewhere).
 * Returns its world rank with msg ("rank 2 died (pid 1234)", "rank 1 is alive but not in
 * the collective"), or -1 with msg empty.
 */
void lb_comm_shm_set_blocked(struct lb_comm *c, int on);
int lb_comm_shm_blame(struct lb_comm *c, char *msg, size_t len);

#endif
