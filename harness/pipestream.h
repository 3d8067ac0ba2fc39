/*
 * The pipeline's sends and receives on their own stream (the backend's p2p stream), as
 * production trainers run them: a send then no longer holds the compute stream until the
 * neighbouring stage posts its receive, and the compute stream waits, on the device and
 * never on the host, only where it reads what a receive wrote or overwrites what a send
 * still reads.
 *
 * The trainer's executor callbacks (harness/train_step.c) call this module around the
 * schedule's steps (lb_pipe_execute); its rules are those of the trainer's buffers
 * (harness/model.h):
 *  - a group: an event of the compute stream, which the p2p stream waits for (the group
 *    reads what the compute stream wrote before it, and its receives overwrite what the
 *    compute stream read before it); its sends and receives on the p2p stream; a "done"
 *    event of the p2p stream after them;
 *  - a compute step waits for the done events of every group with a receive not waited
 *    for yet (what it consumes arrived);
 *  - a forward of (chunk, slot) rewrites that slot's output (the buffer of send_act of the
 *    same chunk and slot) and a backward the one input-gradient buffer (send_grad's): it
 *    waits for the done event of such a send first; a send alone is otherwise not waited
 *    for;
 *  - the end of the list (lb_pipestream_drain): the compute stream waits for every group
 *    not waited for, before the step's remaining collectives (the tied embedding's
 *    exchange uses the pipeline communicator on the compute stream) and the optimizer.
 * Each wait of the compute stream sits between two events of a pool, so the seconds it
 * stood waiting are measured on the device (lb_pipestream_wait_s): the pipeline bubble as
 * the compute stream sees it.
 *
 * Off (--pipe-overlap 0, or a backend without a p2p stream, as the CPU's): the sends and
 * receives go on the compute stream and nothing here enqueues anything.
 */
#ifndef LB_PIPESTREAM_H
#define LB_PIPESTREAM_H

#include "common/pipeline.h"
#include "harness/ops.h"

/* A send whose buffer the compute stream has not waited for yet. */
struct lb_pipe_send {
	enum lb_step_kind kind; /* LB_STEP_SEND_ACT or LB_STEP_SEND_GRAD */
	int chunk, slot;	/* send_act's buffer; unused for send_grad (one buffer) */
	int done;		/* its group's done event (index into ev_done) */
};

struct lb_pipestream {
	const struct lb_ops *ops;
	int on;		/* 1: sends and receives on ops->p2p_stream() */
	void *ev_ready; /* compute stream: the work before a group */
	void **ev_done; /* (n_done) p2p stream: the end of each group of the step */
	int n_done, used;
	int cur;      /* group being issued (index into ev_done), -1 none */
	int cur_recv; /* 1: the group being issued has a receive */
	int *recv;    /* (n_done) groups with a receive not waited for */
	int n_recv;
	void **wait_ev;		   /* (n_done) scratch: the events one wait covers */
	struct lb_pipe_send *send; /* (cap_send) sends not waited for */
	int n_send, cap_send;
	int lost;	 /* 1: a send the table could not hold (out of memory): wait for all */
	void **ev_stall; /* pairs around the compute stream's waits of this step */
	int n_stall, cap_stall;
};

/* Set up for the step lists like s (its groups and sends size the pools; a longer list
 * still runs, waiting earlier): on when overlap is 1 and ops has a p2p stream. 0, or
 * LB_E_OOM. Release with lb_pipestream_free. */
int lb_pipestream_init(struct lb_pipestream *p, const struct lb_ops *ops, int overlap,
		       const struct lb_schedule *s);
void lb_pipestream_free(struct lb_pipestream *p);

/* The stream the sends and receives are issued on: the p2p stream when on, else the
 * compute stream (ops->stream()). */
void *lb_pipestream_stream(const struct lb_pipestream *p);

/* Before a step's list: the wait times start from zero. */
void lb_pipestream_step_begin(struct lb_pipestream *p);
/* Around a group: begin before its first send/recv, note each of its send/recv steps,
 * end after group_end (also when it failed). */
void lb_pipestream_group_begin(struct lb_pipestream *p);
void lb_pipestream_note(struct lb_pipestream *p, const struct lb_step *st);
void lb_pipestream_group_end(struct lb_pipestream *p);
/* Before a forward or backward (st): the compute stream waits for what it reads and
 * overwrites. */
void lb_pipestream_compute(struct lb_pipestream *p, const struct lb_step *st);
/* After the list: the compute stream waits for every group. */
void lb_pipestream_drain(struct lb_pipestream *p);
/* After the step's end is synchronised: the seconds the compute stream waited for the
 * p2p stream this step (0 when off). */
double lb_pipestream_wait_s(struct lb_pipestream *p);

#endif
