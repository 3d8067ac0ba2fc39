/*
 * The comm table: the collectives the trainer uses, behind function pointers, so the model
 * is written once over them. Implementations: "self" (one rank, every call a copy or a
 * no-op), "shm" (processes of one node over POSIX shared memory; the CPU backend, and
 * several ranks on one GPU staged through host memory), "nccl" (with the CUDA backend).
 *
 * The communicators are a wing of the harness of their own, harness/comm/: this contract
 * and its helpers (comm_common.c), the implementations (comm_self.c, comm_shm.{h,c},
 * comm_cuda.{h,cu}), the bootstrap of a world across nodes (bootstrap.{h,c}) and the
 * groups of a layout split from the world (groups.{h,c}). The model, the trainer and the
 * launcher use them; they use nothing of the trainer.
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

#include "harness/comm/bootstrap.h"

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

	/* What only a device communicator has (optional: NULL where there is nothing of the
	 * kind; the core calls them through the lb_comm_* wrappers below, which do the
	 * default). */
	/* Name the group for messages ("tensor-parallel"; static text). */
	void (*set_name)(struct lb_comm *c, const char *name);
	/* After a failed call: the code of the last failed call (0 when none), the rank at
	 * fault (world numbering, -1 unknown) and a message. */
	int (*error)(const struct lb_comm *c, int *rank, char *msg, size_t len);
	/* Tag the calls enqueued from now on, on every communicator of c's world, with tag
	 * (the trainer's phase numbers, >= 0; -1: none); returns the tag it replaces. */
	int (*set_tag)(struct lb_comm *c, int tag);
	/* Device time of the calls completed since the last call (seconds, measured on the
	 * device around each call), summed over c's world; per_tag[i] (may be NULL) the part
	 * enqueued under tag i (i < ntags). Call after the streams are synchronised. -1 when
	 * c's calls are not timed on the device (they are host-timed). */
	double (*take_seconds)(struct lb_comm *c, double *per_tag, int ntags);
};

struct lb_comm {
	const struct lb_comm_ops *ops;
	int rank; /* in this communicator */
	int size;
	void *impl;
};

/* A C table's members for the data calls, barrier, split and destroy, from a backend's
 * functions named X_all_reduce, X_reduce_scatter, X_all_gather, X_broadcast, X_send,
 * X_recv, X_barrier, X_split and X_destroy:
 * {.name = "x", LB_COMM_OPS(x), .group_start = ..., .group_end = ...}. */
#define LB_COMM_OPS(x)                                                                             \
	.all_reduce = x##_all_reduce, .reduce_scatter = x##_reduce_scatter,                        \
	.all_gather = x##_all_gather, .broadcast = x##_broadcast, .send = x##_send,                \
	.recv = x##_recv, .barrier = x##_barrier, .split = x##_split, .destroy = x##_destroy

/* Bytes per element; 0 for an unknown type. */
size_t lb_dtype_size(enum lb_dtype t);
/* "f32", "bf16", "f16", "i32", "f64" (static text). */
const char *lb_dtype_name(enum lb_dtype t);
/* Text of a LB_COMM_E* code (static text), e.g. for "all_reduce failed: %s". */
const char *lb_comm_strerror(int code);
/* The run log's failure class of a LB_COMM_E* code: "timeout" (ETIMEOUT, EPEER: a peer
 * died or hung), "nccl_error" (EFAIL and anything else); NULL for 0. */
const char *lb_comm_failure_class(int code);

/* A world's last failed call, as the table's optional error member reports it. */
struct lb_comm_err {
	int code;      /* LB_COMM_E*, 0 if none */
	int rank;      /* world rank at fault, -1 unknown */
	char msg[512]; /* what failed, for the run log */
};
/* Record a failure in e; returns code. */
int lb_comm_err_set(struct lb_comm_err *e, int code, int rank, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* e's code, its rank into *rank and message into msg (either may be NULL); e NULL: 0, rank
 * -1 and an empty message. */
int lb_comm_err_get(const struct lb_comm_err *e, int *rank, char *msg, size_t len);

/* The communicator that knows about the processes of c: its host part for a device
 * communicator (may be NULL across nodes), else c itself. */
struct lb_comm *lb_comm_host_of(struct lb_comm *c);

/* The optional members through their defaults (c may be NULL): set_name does nothing;
 * error gives 0 (rank -1, msg ""); set_tag gives -1; take_seconds gives -1. */
void lb_comm_set_name(struct lb_comm *c, const char *name);
int lb_comm_error(const struct lb_comm *c, int *rank, char *msg, size_t len);
int lb_comm_set_tag(struct lb_comm *c, int tag);
double lb_comm_take_seconds(struct lb_comm *c, double *per_tag, int ntags);

/* The one-rank communicator (always available). Caller frees with comm->ops->destroy. */
struct lb_comm *lb_comm_self(void);

/*
 * The device communicator: a backend's own (lb_ops.comm_world, ops.h; the CUDA backend's
 * is comm_cuda.h), asked for by what it must join and how it must fail.
 */
enum lb_gpu_comm { LB_GPU_COMM_AUTO = 0, LB_GPU_COMM_NCCL, LB_GPU_COMM_STAGED };

/* Called by the device communicator's watchdog thread when a device call failed or hung,
 * after the device communicators were aborted: the LB_COMM_E* code (ETIMEOUT: a call did
 * not complete in time; EPEER: a peer posted its own failure; EFAIL: a library or device
 * error), the rank at fault (world numbering, -1 unknown), a message. It should not
 * return; if it does, the process exits with status 4 (nccl_error). */
typedef void (*lb_comm_fail_fn)(void *arg, int code, int culprit, const char *msg);

struct lb_gpu_comm_opts {
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

#endif
