/*
 * Pipeline schedules as data. For a pipeline of pp stages, each holding `chunks` model
 * chunks, and n_micro micro-batches, lb_schedule_build() gives one stage its list of
 * steps: forward and backward of a micro-batch through one of its chunks, and the sends
 * and receives of activations (to the next chunk in pipeline order) and gradients (to
 * the previous one). Sends and receives that must be issued together (between
 * group_start and group_end, as Megatron pairs send_forward_recv_backward) carry the same
 * group number. Three schedules:
 *
 * - 1F1B (PipeDream-Flush, Megatron's default): pp - stage - 1 warm-up forwards, then one
 *   forward one backward, then the cool-down backwards;
 * - GPipe: all forwards, then all backwards;
 * - interleaved 1F1B (Narayanan et al. 2021, Megatron-LM's virtual pipeline): the model is
 *   cut into pp * chunks chunks in pipeline order and stage s holds chunks s, s + pp,
 *   s + 2*pp, ...; activations go round the stages `chunks` times (the last stage sends
 *   chunk c's output to stage 0's chunk c + 1). Warm-up 2*(pp - stage - 1) +
 *   (chunks - 1)*pp chunk forwards, then 1F1B over chunk passes; the bubble shrinks by
 *   the factor `chunks` ((pp - 1) / (chunks * n_micro) of the compute) for
 *   1 + (pp - 1) / (pp * chunks) times the activations in flight on the first stage.
 *   n_micro must be a multiple of pp (Megatron-LM's rule for this schedule).
 *
 * Every step also names the activation slot of its (chunk, micro-batch): the buffers a
 * micro-batch holds from the moment its input arrives (a receive, or the forward on the
 * first chunk) to its backward; the list knows how many slots each chunk needs
 * (n_slots), so the trainer allocates them and the memory model counts them from the
 * same data. Pure functions, libc only: the trainer (harness/pipe.h adds the
 * simulator and the executor) and the memory model (common/memory_trainer.c) share them.
 * See docs/parallelism.md.
 */
#ifndef LB_PIPELINE_H
#define LB_PIPELINE_H

#include <stddef.h>

#include "common/layout.h"

#define LB_SCHED_MAX_PP 256

/* The schedules, the one list: X(ID, name); the enum, the names and the trainer's
 * --pipeline-schedule choices are made from it. */
#define LB_SCHED_KINDS(X) X(1F1B, "1f1b") X(GPIPE, "gpipe") X(INTERLEAVED, "interleaved")
enum lb_sched_kind {
#define LB_SCHED_ID(id, name) LB_SCHED_##id,
	LB_SCHED_KINDS(LB_SCHED_ID)
};
#define LB_SCHED_BAR(id, name) "|" name
#define LB_SCHED_CHOICES       (&(LB_SCHED_KINDS(LB_SCHED_BAR))[1]) /* "1f1b|gpipe|interleaved" */

enum lb_step_kind {
	LB_STEP_FORWARD = 0, /* forward of micro-batch `micro` through chunk `chunk` */
	LB_STEP_BACKWARD,    /* its backward */
	LB_STEP_SEND_ACT,    /* output activation of (chunk, micro) to the next chunk */
	LB_STEP_RECV_ACT,    /* input activation of (chunk, micro) from the previous chunk */
	LB_STEP_SEND_GRAD,   /* input gradient of (chunk, micro) to the previous chunk */
	LB_STEP_RECV_GRAD,   /* output gradient of (chunk, micro) from the next chunk */
};

struct lb_step {
	enum lb_step_kind kind;
	int micro; /* micro-batch, 0..n_micro-1 */
	int peer;  /* the other stage of a send/recv (pp numbering); -1 for compute */
	int group; /* send/recv: steps with one number are adjacent and issued together;
		      numbers count up from 0 per stage; -1 for compute */
	int chunk; /* this stage's model chunk, 0..chunks-1 (the stage's own chunk for a
		      send or a receive); 0 without virtual stages */
	int slot;  /* activation slot of (chunk, micro) in 0..n_slots[chunk]-1 */
};

struct lb_schedule {
	enum lb_sched_kind kind;
	int pp, stage, n_micro;
	int chunks; /* model chunks on each stage: 1, or > 1 for the interleaved schedule */
	int n_steps;
	struct lb_step *steps;		    /* n_steps; owned, lb_schedule_release frees */
	int n_slots[LB_MAX_VIRTUAL_STAGES]; /* activation slots per chunk: the most
					       micro-batches it holds at once */
	int n_grad_bufs; /* the most received gradients waiting for their backward (1) */
};

/* Build one stage's list. 1 <= pp <= LB_SCHED_MAX_PP, 0 <= stage < pp, n_micro >= 1;
 * chunks 1 for 1F1B and GPipe, 2..LB_MAX_VIRTUAL_STAGES for the interleaved schedule,
 * whose n_micro must be a multiple of pp. Returns 0, or -1 with err set. */
int lb_schedule_build(enum lb_sched_kind kind, int pp, int chunks, int stage, int n_micro,
		      struct lb_schedule *out, char *err, size_t errlen);
void lb_schedule_release(struct lb_schedule *s);

/* The schedule a layout runs when `asked` is requested: one stage always runs its
 * micro-batches one forward one backward (1F1B); virtual_stages > 1 the interleaved
 * schedule; else the one asked (1F1B or GPipe). */
enum lb_sched_kind lb_schedule_effective(const struct lb_layout *l, enum lb_sched_kind asked);
/* The list stage `stage` of layout l runs (lb_schedule_effective of asked, the layout's
 * micro-batches per step and virtual stages). Same contract as lb_schedule_build. */
int lb_schedule_for_layout(const struct lb_layout *l, enum lb_sched_kind asked, int stage,
			   struct lb_schedule *out, char *err, size_t errlen);

/* The activation slots per chunk (n_slots) of a schedule, without its whole list: 1F1B
 * holds min(pp - stage, n_micro) and GPipe every micro-batch, counted without a list; the
 * interleaved schedule's (its warm-up is shorter than 2 * pp micro-batches through every
 * chunk) stop growing once n_micro reaches 2 * pp, so the list built has at most
 * LB_SCHED_SLOTS_CAP * pp micro-batches. The planner's memory
 * model asks this for every layout of a grid (a step of 262144 micro-batches included);
 * test_schedule_pipeline checks it against the whole list. Same contract as
 * lb_schedule_build and lb_schedule_for_layout. */
#define LB_SCHED_SLOTS_CAP 4
int lb_schedule_slots(enum lb_sched_kind kind, int pp, int chunks, int stage, int n_micro,
		      int n_slots[LB_MAX_VIRTUAL_STAGES], char *err, size_t errlen);
int lb_schedule_slots_for_layout(const struct lb_layout *l, enum lb_sched_kind asked, int stage,
				 int n_slots[LB_MAX_VIRTUAL_STAGES], char *err, size_t errlen);

/* "1f1b", "gpipe", "interleaved"; parse returns 0 or -1. */
const char *lb_sched_name(enum lb_sched_kind k);
int lb_sched_parse(const char *s, enum lb_sched_kind *out);
/* "forward", "backward", "send_act", "recv_act", "send_grad", "recv_grad". */
const char *lb_step_name(enum lb_step_kind k);
/* A forward or a backward (every other step is a send or a receive); a send. */
int lb_step_is_compute(enum lb_step_kind k);
int lb_step_is_send(enum lb_step_kind k);
/* Send/recv step i of s is the last of its group: the groups the executor posts at once
 * are runs of adjacent sends and receives with one group number (one without a number is
 * a group of its own). */
int lb_schedule_group_last(const struct lb_schedule *s, int i);

/* One line per stage-list, for logs and golden tests: compute steps as F3 / B3, sends and
 * receives as sa3 ra3 sg3 rg3, a group in brackets: "ra0 F0 [sa0 rg0] B0 [sg0 ra1] ...";
 * with several chunks each step carries its chunk after a dot (F3.1 is micro-batch 3's
 * forward through chunk 1). snprintf semantics. */
int lb_schedule_format(const struct lb_schedule *s, char *buf, size_t len);

#endif
