/*
 * Pipeline schedules: the lists themselves are built as data in common/pipeline.h (1F1B,
 * GPipe, interleaved 1F1B; shared with the memory model); this module checks them and
 * runs them.
 *
 * lb_pipe_simulate() runs the lists of every stage together with unit-time compute
 * steps (one forward or backward of one model chunk) and rendezvous messaging (an
 * operation completes only once its partner is posted, the strictest model; messages
 * between two stages keep their order in each direction, as NCCL's and the
 * shared-memory communicator's do): it reports deadlock, unmatched or out-of-order
 * messages, data-flow errors (a forward before its activation arrived), the peak number
 * of micro-batch passes in flight per stage (their activations held), and the bubble.
 *
 * lb_pipe_execute() is the one executor: it walks a stage's list over the pipeline
 * communicator, calling back for the compute steps and the buffers of the sends and
 * receives. The trainer runs every optimizer step through it (harness/train_step.c), and
 * the tests run toy pipelines through it. See docs/parallelism.md.
 */
#ifndef LB_PIPE_H
#define LB_PIPE_H

#include <stddef.h>

#include "common/pipeline.h"
#include "harness/comm/comm.h"

struct lb_sim_report {
	int time;			    /* unit steps until every stage finished */
	double bubble;			    /* idle share: 1 - busy / (pp * time) */
	double bubble_ratio;		    /* idle over busy, summed over the stages:
					       (pp * time - busy) / busy; (pp - 1) / n_micro
					       for 1F1B, (pp - 1) / (chunks * n_micro)
					       interleaved (Narayanan et al. 2021) */
	int busy[LB_SCHED_MAX_PP];	    /* compute steps per stage */
	int max_in_flight[LB_SCHED_MAX_PP]; /* peak forwards without their backward */
	int deadlock;			    /* 1 if the stages stopped with steps left */
	char error[256];		    /* the first problem, "" when none */
};

/* Run stages[0..pp) together (stages[s].stage must be s, all with the same pp, chunks
 * and micro-batches). Returns 0 when every step ran and every check held, -1 otherwise
 * with rep->error (and rep->deadlock) set. */
int lb_pipe_simulate(const struct lb_schedule *stages, int pp, struct lb_sim_report *rep);

/*
 * Run one stage's list over the pipeline communicator pp (pp->rank == s->stage,
 * pp->size == s->pp; NULL for a list without sends and receives): compute steps call
 * forward/backward; each send/recv group is issued between group_start and group_end
 * with the buffers buffer() names, on `stream`. Callbacks return 0 or a non-zero code
 * that stops the run. group (optional) is told before a group is issued (done 0) and
 * after it completed or failed (done 1). A communicator failure (or a send/recv without
 * a communicator, or a buffer() of NULL: LB_COMM_EFAIL) goes through comm_failed
 * (optional; st NULL when pp does not fit the list) whose return value is returned;
 * without it the LB_COMM_E* code itself. Returns 0 or the first failure's code.
 */
struct lb_pipe_ops {
	int (*forward)(void *ctx, const struct lb_step *st);
	int (*backward)(void *ctx, const struct lb_step *st);
	/* The memory of a send/recv step: *count elements of *dtype (preset to LB_F32). */
	void *(*buffer)(void *ctx, const struct lb_step *st, size_t *count, enum lb_dtype *dtype);
	void (*group)(void *ctx, const struct lb_step *first, int done);
	int (*comm_failed)(void *ctx, const struct lb_step *st, int rc);
	void *stream;
};
int lb_pipe_execute(const struct lb_schedule *s, struct lb_comm *pp,
			const struct lb_pipe_ops *ops, void *ctx);

#endif
