/*
 * The trainer's core and shell, one file per concern: flag parsing and checks
 * (train_args.c: the layout flags through common/layout.h's parser, plus the trainer's
 * own), one rank's trainer object and its optimizer step as a list of micro-batch
 * forward/backward operations for this rank's stage, so a pipeline schedule can drive it
 * (train_step.c), and the whole run with its ranks, run log, live progress line, failure
 * classes and exit codes (train.c; docs/trainer.md).
 */
#ifndef LB_TRAIN_H
#define LB_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "common/layout.h"
#include "harness/comm/comm.h"
#include "harness/comm/groups.h"
#include "harness/data.h"
#include "harness/launch.h"
#include "harness/gradsync.h"
#include "harness/model.h"
#include "harness/ops.h"
#include "harness/optim.h"
#include "harness/pipestream.h"
#include "harness/pipe.h"
#include "harness/trainlog.h"

#define LB_E_DATA -5 /* the data source failed (class error) */

struct lb_train_opts {
	struct lb_layout layout;
	int device_cuda;	     /* --device cuda */
	int gpu_comm;		     /* --gpu-comm: enum lb_gpu_comm (comm.h), 0 auto */
	int bootstrap;		     /* --bootstrap: enum lb_bootstrap (bootstrap.h), 0 auto */
	char run_dir[4096];	     /* --run-dir, default "." */
	char data_path[4096];	     /* --data; "" for the synthetic stream */
	int data_elem;		     /* --data-dtype: 2 (u16, default) or 4 (u32) */
	double lr;		     /* --lr, constant learning rate */
	double weight_decay;	     /* --weight-decay, AdamW decoupled decay on matrices */
	double clip;		     /* --clip, global gradient-norm limit; 0: off */
	uint64_t mem_limit;	     /* --mem-limit / LAYOUTBENCH_MEM_LIMIT, bytes; 0: none */
	int nproc_per_node;	     /* --nproc-per-node, for the launcher */
	double comm_timeout;	     /* --comm-timeout, seconds: a peer silent this long is a
					timeout (every communicator wait is bounded by it) */
	double peak_tflops;	     /* --peak-tflops: dense bf16 peak per GPU to record,
					TFLOP/s; 0: the peak table's (none on a CPU) */
	enum lb_sched_kind schedule; /* --pipeline-schedule 1f1b (default) | gpipe |
					interleaved; the layout's virtual_stages > 1 runs
					the interleaved one (lb_schedule_effective) */
	char dump_params[4096];	     /* --dump-params FILE (testing aid): after the last
					step rank 0 writes the whole model's fp32
					parameters there; "" for none */
	int quiet;		     /* --quiet: no live progress lines */
	uint64_t grad_bucket;	     /* --grad-bucket: elements per data-parallel gradient
					bucket (harness/gradsync.h) */
	int grad_overlap;	     /* --grad-overlap: 1 (default) reduce the buckets on the
					side stream during the backward; 0 on the compute
					stream */
	int pipe_overlap;	     /* --pipe-overlap: 1 (default) the pipeline's sends and
					receives on the p2p stream (harness/pipestream.h);
					0 on the compute stream */
	int cuda_graphs;	     /* --cuda-graphs / LAYOUTBENCH_CUDA_GRAPHS: 1 captures
					each micro-batch's forward and backward and the
					optimizer as graphs and replays them (ops.h
					graph_begin; no effect where the backend has none) */
};

#define LB_TRAIN_DEFAULT_LR	      3e-3
#define LB_TRAIN_DEFAULT_WD	      0.1
#define LB_TRAIN_DEFAULT_CLIP	      1.0
#define LB_TRAIN_DEFAULT_COMM_TIMEOUT 300.0

void lb_train_opts_init(struct lb_train_opts *o);

/* Parse argv[1..argc) (argv[0] is the program). Returns 0, 1 when --help was asked
 * (usage printed to stdout), or -1 with err set (a usage error: exit 2). Does not check
 * the layout (lb_train_check does). */
int lb_train_parse_args(struct lb_train_opts *o, int argc, char **argv, char *err, size_t errlen);
/* Refuse what this build cannot run: a layout lb_layout_check rejects (its reason), the
 * CUDA device in a CPU build, parallel sizes not yet supported. 0, or -1 with err. */
int lb_train_check(const struct lb_train_opts *o, char *err, size_t errlen);
/* The usage text (layout flags and trainer flags); static storage. */
const char *lb_train_usage(void);

/* One rank's trainer. */
struct lb_trainer {
	struct lb_train_opts opts;
	const struct lb_ops *ops;
	struct lb_comm *tp;    /* tensor-parallel group (NULL: none) */
	struct lb_comm *dp;    /* data-parallel group (NULL: none); gradients and the loss
				  are summed over it (each rank's loss scale is already
				  1 / tokens of the global batch) */
	struct lb_comm *pp;    /* pipeline group (NULL: none); peers in its numbering */
	struct lb_comm *world; /* every rank (NULL: one rank); the loss, the gradient norm
				  and the peak memory are summed or gathered over it */
	int world_rank;
	int stage;		 /* pipeline stage (pp rank) */
	struct lb_gradsync gs;	 /* the data-parallel gradient reduction, ZeRO's slices */
	void *tied_buf;		 /* pp > 1, tied: (V/tp, H) the other stage's embedding grad */
	double comm_s;		 /* seconds in dp/tp/world collectives of the last step */
	double bubble_s;	 /* seconds waiting in pipeline send/recv of the last step */
	struct lb_pipestream ps; /* the pipeline's sends and receives on their own stream */
	struct lb_llama model;
	struct lb_schedule sched; /* this stage's list (common/pipeline.h), built once */
	struct lb_optim optim;
	struct lb_data data;
	int dp_rank;		 /* this rank's slice of the global batch (data.h) */
	int accum;		 /* micro-batches per optimizer step on this rank */
	int32_t *tokens;	 /* (T) host staging of a micro-batch */
	int32_t *targets;	 /* (T) */
	double loss_scale;	 /* 1 / tokens of the global batch */
	struct lb_phases phases; /* of the last step */
	void *stats;		 /* two f64 elements: the step's loss sum and squared
				    gradient norm, read back together once per step */
	void **ev;		 /* n_ev events: a (start, end) pair per forward or
				    backward of a step, the last pair the optimizer's */
	int n_ev, ev_used;
	int *ev_kind;	   /* per pair: LB_STEP_FORWARD or LB_STEP_BACKWARD */
	double *ev_comm;   /* per pair: host-timed tp collectives inside it, s */
	double *tag_s;	   /* NCCL: device time per tag (pairs, then pipeline,
			      optimizer, other, overlapped), n_ev / 2 + 4 */
	double opt_comm_s; /* collectives inside the optimizer phase, s */
	double grad_norm;  /* of the last step, before clipping */
	int fresh_grads;   /* 1 while lb_trainer_step runs its list: each chunk's first
			      backward writes its gradients (model.h grad_first) */
	void *sc;	   /* LB_ADAMW_SC f64: AdamW's step scalars on the device, when the
			      backend keeps them there (ops.h adamw_dev); else NULL */
	/* the optimizer's graph segments by how they ran (the model counts its own) */
	long graph_runs[LB_GRAPH_NRUNS];
	char err[1024]; /* what failed, after an LB_E_* return */
};

/* Build model, optimizer and data for opts (after lb_train_check) on backend ops.
 * Returns 0 or an LB_E_* code (t->err says what). Release with lb_trainer_free. */
int lb_trainer_init(struct lb_trainer *t, const struct lb_train_opts *o, const struct lb_ops *ops,
		    struct lb_comm *tp);
/* The same for one rank of a parallel layout: g from lb_comm_make_groups over world
 * (both NULL: one rank). */
int lb_trainer_init_par(struct lb_trainer *t, const struct lb_train_opts *o,
			const struct lb_ops *ops, struct lb_comm *world, const struct lb_groups *g);
void lb_trainer_free(struct lb_trainer *t);

/* Run one stage's list of steps of optimizer step `step` through the schedule's
 * executor (lb_pipe_execute; the pipeline schedule is data), accumulating gradients.
 * A forward or backward uses the model chunk and activation slot its step names (the
 * list's slots, which the model was built with). Sends and receives with one group
 * number are issued together over t->pp (group_start/end), their time counted as the
 * bubble; without a pipeline group they are refused (LB_E_INVAL).
 * *loss_sum (may be NULL) gets the sum of token losses of the forwards. A stop flag
 * (lb_train_stop_signal) ends the list early with 1. Returns 0, 1 or an LB_E_* code. */
int lb_trainer_run_steps(struct lb_trainer *t, int step, const struct lb_step *list, int n,
			 double *loss_sum);

/* One optimizer step with this stage's schedule (opts.schedule; one stage: forward,
 * backward per micro-batch): zero gradients, run, sum the SP norm gradients over tp and
 * the tied embedding's two copies, average over dp (all-reduce, or reduce-scatter for
 * ZeRO-1), the global gradient norm over every rank (replicas counted once), clip,
 * AdamW on this rank's range, all-gather the parameters (ZeRO-1). *loss gets the step's mean token
 * loss. Returns 0, 1 (stopped by a signal) or an LB_E_* code. */
int lb_trainer_step(struct lb_trainer *t, int step, double *loss);

/* The run log's failure class of a step's LB_E_* status: "oom", "nccl_error", "timeout",
 * else "error" (static text). */
const char *lb_train_rc_class(int rc);

/* The signal (SIGTERM, SIGINT) that asked the run to stop, or 0; the handler that sets it
 * (installed by the run for SIGTERM and SIGINT). */
int lb_train_stop_signal(void);
void lb_train_on_signal(int sig);

/* Segments run by how (ops.h LB_GRAPH_*), the model's and the optimizer's together: n
 * (LB_GRAPH_NRUNS entries). */
void lb_trainer_graph_runs(const struct lb_trainer *t, long *n);

/* The whole run: checks, the ranks (srun tasks, or --nproc-per-node forked here), run
 * log, steps, live lines on stderr, the end record. Returns the process exit status
 * (docs/run-log.md's table). */
int lb_train_main(const struct lb_train_opts *o);

/* Sum x over the ranks of c in rank order, in double (every rank gets the same bits);
 * 0 or an LB_COMM_E* code. */
int lb_comm_sum_double(struct lb_comm *c, double *x);

#endif
