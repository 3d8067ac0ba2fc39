/*
 * The comm table: the collectives the trainer uses, behind function pointers, so the model
 * is written once over them. Implementations: "self" (one rank, every call a copy or a
 * no-op), "shm" (processes of one node over POSIX shared memory; the CPU backend, and
 * several ranks on one GPU staged through host memory), "nccl" (with the CUDA backend).
 *
 * Groups: a communicator is a subset of the world (the tensor-parallel group, the
 * pipeline neighbours, the data-parallel group) made by comm_split(). Buffers are
 * backend memory (host for "self"/"shm"). Element type is fp32 for the CPU backend;
 * `dtype` is carried for NCCL. Every call returns 0, or a negative LB_COMM_E* code after
 * which the trainer reports a failure (class nccl_error, or timeout when a peer died or
 * hung) and exits: there is no safe recovery from a broken collective.
 *
 * Send/recv are grouped: calls between group_start() and group_end() are issued together
 * and complete together, so a 1F1B exchange (send to the next stage while receiving from
 * it) cannot deadlock, as with ncclGroupStart/End. `stream` is the backend's stream handle
 * (NULL on CPU): calls on one stream are ordered.
 */
#ifndef LB_COMM_H
#define LB_COMM_H

#include <stddef.h>

enum lb_dtype { LB_F32 = 0, LB_BF16, LB_F16, LB_I32, LB_F64 };
enum lb_redop { LB_SUM = 0, LB_MAX, LB_AVG };

#define LB_COMM_EFAIL	 -1 /* backend error (nccl_error) */
#define LB_COMM_ETIMEOUT -2 /* a peer did not arrive within the timeout (timeout) */
#define LB_COMM_EPEER	 -3 /* a peer rank exited or reported a failure (timeout) */

struct lb_comm;

struct lb_comm_ops {
	const char *name;
	/* out[i] = reduce over ranks of in[i]; in == out allowed. count elements. */
	int (*all_reduce)(struct lb_comm *c, const void *in, void *out, size_t count,
			  enum lb_dtype t, enum lb_redop op, void *stream);
	/* in: size * count elements; out: count elements = this rank's reduced chunk. */
	int (*reduce_scatter)(struct lb_comm *c, const void *in, void *out, size_t count,
			      enum lb_dtype t, enum lb_redop op, void *stream);
	/* in: count elements; out: size * count elements, rank r's chunk at r * count. */
	int (*all_gather)(struct lb_comm *c, const void *in, void *out, size_t count,
			  enum lb_dtype t, void *stream);
	int (*broadcast)(struct lb_comm *c, void *buf, size_t count, enum lb_dtype t, int root,
			 void *stream);
	int (*send)(struct lb_comm *c, const void *buf, size_t count, enum lb_dtype t, int peer,
		    void *stream);
	int (*recv)(struct lb_comm *c, void *buf, size_t count, enum lb_dtype t, int peer,
		    void *stream);
	int (*group_start)(struct lb_comm *c);
	int (*group_end)(struct lb_comm *c);
	int (*barrier)(struct lb_comm *c);
	/* Sub-communicator of the ranks with the same color, ordered by key (MPI_Comm_split). */
	int (*split)(struct lb_comm *c, int color, int key, struct lb_comm **out);
	void (*destroy)(struct lb_comm *c);
	/* Optional (NULL: none): the host communicator a device one carries for host values
	 * (comm_cuda.h), which knows about the processes (failures, the rank at fault). */
	struct lb_comm *(*host)(struct lb_comm *c);
};

struct lb_comm {
	const struct lb_comm_ops *ops;
	int rank; /* in this communicator */
	int size;
	void *impl;
};

/* Bytes per element; 0 for an unknown type. */
size_t lb_dtype_size(enum lb_dtype t);
/* "f32", "bf16", "f16", "i32", "f64" (static text). */
const char *lb_dtype_name(enum lb_dtype t);
/* Text of a LB_COMM_E* code (static text), e.g. for "all_reduce failed: %s". */
const char *lb_comm_strerror(int code);
/* The run log's failure class of a LB_COMM_E* code: "timeout" (ETIMEOUT, EPEER: a peer
 * died or hung), "nccl_error" (EFAIL and anything else); NULL for 0. */
const char *lb_comm_failure_class(int code);

/* The communicator that knows about the processes of c: its host part for a device
 * communicator (may be NULL across nodes), else c itself. */
struct lb_comm *lb_comm_host_of(struct lb_comm *c);

/* The one-rank communicator (always available). Caller frees with comm->ops->destroy. */
struct lb_comm *lb_comm_self(void);

#endif
