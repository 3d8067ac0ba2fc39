/*
 * Pipeline schedules as data. For a pipeline of pp stages and n_micro micro-batches,
 * lb_schedule_build() gives one stage its list of steps: forward and backward of a
 * micro-batch, and the sends and receives of activations (to the next stage) and
 * gradients (to the previous one). Sends and receives that must be issued together
 * (between group_start and group_end, as Megatron pairs send_forward_recv_backward) carry
 * the same group number. Two schedules: 1F1B (PipeDream-Flush, Megatron's default:
 * pp - stage - 1 warm-up forwards, then one forward one backward, then the cool-down
 * backwards) and GPipe (all forwards, then all backwards).
 *
 * lb_schedule_simulate() runs the lists of every stage together with unit-time compute
 * steps and rendezvous messaging (an operation completes only once its partner is
 * posted, the strictest model): it reports deadlock, unmatched or out-of-order messages,
 * data-flow errors (a forward before its activation arrived), the peak number of
 * micro-batches in flight per stage (their activations held), and the bubble fraction.
 * Building, formatting and simulating are pure functions; lb_schedule_execute() runs a
 * list over a communicator. See docs/parallelism.md.
 */
#ifndef LB_SCHEDULE_H
#define LB_SCHEDULE_H

#include <stddef.h>

#include "harness/comm.h"

#define LB_SCHED_MAX_PP 256

enum lb_sched_kind { LB_SCHED_1F1B = 0, LB_SCHED_GPIPE };

enum lb_step_kind {
	LB_STEP_FORWARD = 0, /* forward of micro-batch `micro` through this stage's layers */
	LB_STEP_BACKWARD,    /* its backward */
	LB_STEP_SEND_ACT,    /* output activation of `micro` to stage + 1 */
	LB_STEP_RECV_ACT,    /* input activation of `micro` from stage - 1 */
	LB_STEP_SEND_GRAD,   /* input gradient of `micro` to stage - 1 */
	LB_STEP_RECV_GRAD,   /* output gradient of `micro` from stage + 1 */
};

struct lb_step {
	enum lb_step_kind kind;
	int micro; /* micro-batch, 0..n_micro-1 */
	int peer;  /* the other stage of a send/recv (pp numbering); -1 for compute */
	int group; /* send/recv: steps with one number are adjacent and issued together;
		      numbers count up from 0 per stage; -1 for compute */
};

struct lb_schedule {
	enum lb_sched_kind kind;
	int pp, stage, n_micro;
	int n_steps;
	struct lb_step *steps; /* n_steps; owned, lb_schedule_release frees */
};

/* Build one stage's list. 1 <= pp <= LB_SCHED_MAX_PP, 0 <= stage < pp, n_micro >= 1.
 * Returns 0, or -1 with err set. */
int lb_schedule_build(enum lb_sched_kind kind, int pp, int stage, int n_micro,
		      struct lb_schedule *out, char *err, size_t errlen);
void lb_schedule_release(struct lb_schedule *s);

/* "1f1b", "gpipe"; parse returns 0 or -1. */
const char *lb_sched_name(enum lb_sched_kind k);
int lb_sched_parse(const char *s, enum lb_sched_kind *out);
/* "forward", "backward", "send_act", "recv_act", "send_grad", "recv_grad". */
const char *lb_step_name(enum lb_step_kind k);

/* One line per stage-list, for logs and golden tests: compute steps as F3 / B3, sends and
 * receives as sa3 ra3 sg3 rg3, a group in brackets: "ra0 F0 [sa0 rg0] B0 [sg0 ra1] ...".
 * snprintf semantics. */
int lb_schedule_format(const struct lb_schedule *s, char *buf, size_t len);

struct lb_sim_report {
	int time;			    /* unit steps until every stage finished */
	double bubble;			    /* idle share: 1 - busy / (pp * time) */
	int busy[LB_SCHED_MAX_PP];	    /* compute steps per stage */
	int max_in_flight[LB_SCHED_MAX_PP]; /* peak forwards without their backward */
	int deadlock;			    /* 1 if the stages stopped with steps left */
	char error[256];		    /* the first problem, "" when none */
};

/* Run stages[0..pp) together (stages[s].stage must be s). Returns 0 when every step ran
 * and every check held, -1 otherwise with rep->error (and rep->deadlock) set. */
int lb_schedule_simulate(const struct lb_schedule *stages, int pp, struct lb_sim_report *rep);

/*
 * Run one stage's list over the pipeline communicator pp (pp->rank == s->stage,
 * pp->size == s->pp): compute steps call forward/backward; each send/recv group is
 * issued between group_start and group_end with the buffer that buffer() names. The
 * callbacks return 0 or a non-zero code that stops the run. Returns 0, the first non-zero
 * callback code, or the comm's LB_COMM_E* code. The code form of the data above; the
 * trainer may also walk s->steps itself (docs/parallelism.md).
 */
struct lb_pipe_ops {
	int (*forward)(void *ctx, int micro);
	int (*backward)(void *ctx, int micro);
	/* The memory of the send/recv step `kind` for `micro`: *count elements of *dtype
	 * (preset to LB_F32). NULL stops the run with LB_COMM_EFAIL. */
	void *(*buffer)(void *ctx, enum lb_step_kind kind, int micro, size_t *count,
			enum lb_dtype *dtype);
};
int lb_schedule_execute(const struct lb_schedule *s, struct lb_comm *pp,
			const struct lb_pipe_ops *ops, void *ctx);

#endif
