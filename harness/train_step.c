/*
 * The trainer's core: one rank's trainer object (model, optimizer, data, the step's
 * events and read-back buffer), optimizer steps as lists of micro-batch operations run
 * by the pipeline schedule's executor (lb_pipe_execute, the one path for the
 * trainer and the tests), the gradient reductions, norm, clipping and AdamW, the phase
 * times, the stop flag and fault injection. See train.h, docs/trainer.md.
 *
 * What a step waits for: where the backend keeps AdamW's scalars on the device (ops.h
 * adamw_dev) and one rank sees the whole gradient norm, nothing before the step's end
 * (the norm, the clip factor and AdamW run on the device; the loss and the norm are read
 * back once, after the optimizer); with several ranks the norm is summed on the host,
 * which reads it before AdamW. The gradients are not zeroed before a step: each chunk's
 * first backward writes them (model.h grad_first). With --cuda-graphs 1 the optimizer is
 * a graph segment too.
 */
#include "harness/train.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/model.h"
#include "common/util.h"

static volatile sig_atomic_t stop_signal;

void lb_train_on_signal(int sig)
{
	stop_signal = sig;
}

int lb_train_stop_signal(void)
{
	return stop_signal;
}

/* --- fault injection (testing aid): LAYOUTBENCH_FAULT=KIND@RANK:STEP --- */

enum { FAULT_NONE = 0, FAULT_HANG, FAULT_EXIT, FAULT_OOM };

/* KIND hang (stop answering until a signal), exit (_exit(1) without a word, as a crash),
 * oom (fail the step as out of memory) on world rank RANK at the start of step STEP. */
static int fault_at(int rank, int step)
{
	const char *v = getenv("LAYOUTBENCH_FAULT");
	char kind[16], buf[64];
	int r, s, kinds;
	const char *at, *colon;

	if (!v || !*v || strlen(v) >= sizeof(buf))
		return FAULT_NONE;
	at = strchr(v, '@');
	colon = at ? strchr(at, ':') : NULL;
	if (!at || !colon || (size_t)(at - v) >= sizeof(kind))
		return FAULT_NONE;
	memcpy(kind, v, (size_t)(at - v));
	kind[at - v] = '\0';
	memcpy(buf, at + 1, (size_t)(colon - at - 1));
	buf[colon - at - 1] = '\0';
	if (lb_parse_int(buf, 0, 1 << 20, &r) || lb_parse_int(colon + 1, 0, 1 << 30, &s))
		return FAULT_NONE;
	kinds = !strcmp(kind, "hang")	? FAULT_HANG
		: !strcmp(kind, "exit") ? FAULT_EXIT
		: !strcmp(kind, "oom")	? FAULT_OOM
					: FAULT_NONE;
	return r == rank && s == step ? kinds : FAULT_NONE;
}

/* --- the trainer object --- */

int lb_comm_sum_double(struct lb_comm *c, double *x)
{
	double *all;
	int rc;

	if (!c || c->size == 1)
		return 0;
	all = calloc((size_t)c->size, sizeof(*all));
	if (!all)
		return LB_COMM_EFAIL;
	/* each rank's double as two 32-bit words: the sum is done here in rank order */
	rc = c->ops->all_gather(c, x, all, 2, LB_I32, NULL);
	if (rc == 0) {
		double s = 0;

		for (int i = 0; i < c->size; i++)
			s += all[i];
		*x = s;
	}
	free(all);
	return rc;
}

int lb_trainer_init(struct lb_trainer *t, const struct lb_train_opts *o, const struct lb_ops *ops,
		    struct lb_comm *tp)
{
	struct lb_groups g;

	if (!tp)
		return lb_trainer_init_par(t, o, ops, NULL, NULL);
	memset(&g, 0, sizeof(g));
	g.tp = tp;
	g.tp_size = tp->size;
	g.pp_size = g.dp_size = 1;
	g.me.tp_rank = tp->rank;
	g.pp_prev = g.pp_next = -1;
	return lb_trainer_init_par(t, o, ops, NULL, &g);
}

int lb_trainer_init_par(struct lb_trainer *t, const struct lb_train_opts *o,
			const struct lb_ops *ops, struct lb_comm *world, const struct lb_groups *g)
{
	const struct lb_layout *l = &o->layout;
	int rc;

	memset(t, 0, sizeof(*t));
	t->data.fd = -1;
	t->opts = *o;
	t->ops = ops;
	t->world = world;
	t->world_rank = world ? world->rank : 0;
	if (g) {
		t->tp = g->tp;
		t->dp = g->dp && g->dp->size > 1 ? g->dp : NULL;
		t->pp = g->pp && g->pp->size > 1 ? g->pp : NULL;
		t->dp_rank = g->me.dp_rank;
		t->stage = g->me.pp_rank;
	}
	t->accum = lb_layout_accum_steps(l);
	t->loss_scale = 1.0 / ((double)l->global_batch * l->seq_len);
	if (t->accum <= 0) {
		snprintf(t->err, sizeof(t->err),
			 "global batch %d is not a multiple of "
			 "micro-batch %d times dp %d",
			 l->global_batch, l->micro_batch, l->dp);
		return LB_E_INVAL;
	}
	if (lb_data_open(&t->data, o->data_path[0] ? o->data_path : NULL, o->data_elem,
			 l->model.vocab, l->seq_len, l->seed, t->err, sizeof(t->err)))
		return LB_E_DATA;
	t->tokens = calloc((size_t)l->micro_batch * l->seq_len, sizeof(*t->tokens));
	t->targets = calloc((size_t)l->micro_batch * l->seq_len, sizeof(*t->targets));
	if (!t->tokens || !t->targets) {
		snprintf(t->err, sizeof(t->err), "out of host memory");
		lb_trainer_free(t);
		return LB_E_OOM;
	}
	ops->set_mem_limit(o->mem_limit);
	ops->reset_peak();
	/* this stage's list, built once; its chunks' activation slots are the model's (1F1B
	 * holds pp - stage micro-batches, GPipe all, interleaved per chunk what it holds) */
	if (lb_schedule_for_layout(l, o->schedule, t->stage, &t->sched, t->err, sizeof(t->err))) {
		lb_trainer_free(t);
		return LB_E_INVAL;
	}
	if (t->sched.n_grad_bufs > 1) {
		snprintf(t->err, sizeof(t->err),
			 "the %s schedule keeps %d received gradients waiting; the model has one "
			 "buffer",
			 lb_sched_name(t->sched.kind), t->sched.n_grad_bufs);
		lb_trainer_free(t);
		return LB_E_INVAL;
	}
	rc = lb_llama_init_slots(&t->model, ops, t->tp, l, t->stage, t->sched.n_slots);
	if (rc == 0)
		t->model.graphs = o->cuda_graphs;
	/* two events per forward or backward of a step (of each model chunk), two for the
	 * optimizer */
	t->n_ev = 4 * t->accum * t->sched.chunks + 2;
	if (rc == 0) /* buckets, ZeRO's slices; NCCL time tag of the overlapped calls */
		rc = lb_gradsync_init(&t->gs, ops, &t->model, t->dp, t->dp_rank, l->zero_stage,
				      (size_t)o->grad_bucket, o->grad_overlap, t->n_ev / 2 + 3);
	if (rc == 0) /* the pipeline's sends and receives on the p2p stream */
		rc = lb_pipestream_init(&t->ps, ops, o->pipe_overlap, &t->sched);
	if (rc == 0 && l->model.tied && l->pp > 1 && (t->model.first || t->model.last)) {
		t->tied_buf = ops->alloc(t->model.tensors[t->model.t_embed].count, LB_K_F32);
		if (!t->tied_buf)
			rc = LB_E_OOM;
	}
	if (rc == 0 && !(t->stats = ops->alloc(2, LB_K_F64)))
		rc = LB_E_OOM;
	if (rc == 0 && ops->adamw_dev && ops->adamw_scalars && ops->clip_scale &&
	    !(t->sc = ops->alloc(LB_ADAMW_SC, LB_K_F64)))
		rc = LB_E_OOM;
	if (rc == 0)
		rc = lb_optim_init(&t->optim, ops, t->model.params, t->gs.r, t->gs.n_r, o->lr,
				   o->weight_decay);
	t->ev = rc ? NULL : calloc((size_t)t->n_ev, sizeof(*t->ev));
	t->ev_kind = rc ? NULL : calloc((size_t)t->n_ev / 2, sizeof(*t->ev_kind));
	t->ev_comm = rc ? NULL : calloc((size_t)t->n_ev / 2, sizeof(*t->ev_comm));
	t->tag_s = rc ? NULL : calloc((size_t)t->n_ev / 2 + 4, sizeof(*t->tag_s));
	if (rc == 0 && (!t->ev || !t->ev_kind || !t->ev_comm || !t->tag_s))
		rc = LB_E_OOM;
	for (int i = 0; rc == 0 && i < t->n_ev; i++)
		if (!(t->ev[i] = ops->event_create()))
			rc = LB_E_OOM;
	if (rc) {
		if (rc == LB_E_OOM) {
			uint64_t peak = 0;

			char lim[96];
			const char *fix;

			ops->mem_stats(NULL, &peak);
			if (o->mem_limit)
				snprintf(lim, sizeof(lim),
					 "the next allocation would pass the --mem-limit of %llu "
					 "bytes",
					 (unsigned long long)o->mem_limit);
			else
				snprintf(lim, sizeof(lim),
					 "the next allocation failed: more than the %s had free",
					 o->device_cuda ? "GPU" : "host");
			/* the advice that can still help this layout */
			if (l->micro_batch > 1)
				fix = "lower the micro-batch, checkpoint activations or split the "
				      "model (tp, pp)";
			else if (l->checkpointing == LB_CKPT_NONE)
				fix =
				    "checkpoint activations (--checkpointing selective or full) or "
				    "split the model (tp, pp)";
			else
				fix =
				    "split the model (tp, pp), shard the optimizer (--zero-stage 1 "
				    "with dp > 1) or use a device with more memory";
			snprintf(
			    t->err, sizeof(t->err),
			    "out of memory allocating weights, optimizer state and activations "
			    "(%llu bytes = %.2f GiB held; %s); %s",
			    (unsigned long long)peak, (double)peak / 1073741824.0, lim, fix);
		} else {
			snprintf(t->err, sizeof(t->err), "the model cannot run this layout");
		}
		lb_trainer_free(t);
		return rc;
	}
	return 0;
}

void lb_trainer_free(struct lb_trainer *t)
{
	lb_optim_free(&t->optim);
	lb_gradsync_free(&t->gs);
	lb_pipestream_free(&t->ps);
	if (t->ops && t->tied_buf)
		t->ops->free_(t->tied_buf);
	if (t->ops && t->stats)
		t->ops->free_(t->stats);
	if (t->ops && t->sc)
		t->ops->free_(t->sc);
	t->tied_buf = t->stats = t->sc = NULL;
	for (int i = 0; t->ev && i < t->n_ev; i++)
		if (t->ev[i])
			t->ops->event_destroy(t->ev[i]);
	free(t->ev);
	free(t->ev_kind);
	free(t->ev_comm);
	free(t->tag_s);
	t->tag_s = NULL;
	t->ev = NULL;
	t->ev_kind = NULL;
	t->ev_comm = NULL;
	if (t->model.ops)
		lb_llama_free(&t->model);
	lb_schedule_release(&t->sched);
	lb_data_close(&t->data);
	free(t->tokens);
	free(t->targets);
	t->tokens = t->targets = NULL;
}

/* What a step's LB_E_* status means: the run log's failure class and the message; the last
 * entry stands for every other status. */
static const struct {
	int rc;
	const char *cls, *msg;
} step_errors[] = {
    {LB_E_OOM, "oom", "out of memory"},
    {LB_E_COMM, "nccl_error", "a collective failed"},
    {LB_E_TIMEOUT, "timeout", "a peer rank died or did not answer"},
    {0, "error", "internal error"},
};

static int step_error(int rc)
{
	int i = 0, last = (int)(sizeof(step_errors) / sizeof(step_errors[0])) - 1;

	while (i < last && step_errors[i].rc != rc)
		i++;
	return i;
}

static const char *model_error(int rc)
{
	return step_errors[step_error(rc)].msg;
}

const char *lb_train_rc_class(int rc)
{
	return step_errors[step_error(rc)].cls;
}

/* A device communicator's calls are timed on the device by tag (comm.h set_tag,
 * take_seconds): a forward or backward's pair number, or one of these after the pairs. */
#define TAG_PIPE(t)   ((t)->n_ev / 2)
#define TAG_OPT(t)    ((t)->n_ev / 2 + 1)
#define TAG_OTHER(t)  ((t)->n_ev / 2 + 2)
#define N_TAGS(t)     ((t)->n_ev / 2 + 4) /* the last: overlapped (gradsync.h) */
#define SET_TAG(t, x) ((void)lb_comm_set_tag((t)->world, (x)))

/* The executor's context: the trainer and the optimizer step being run. */
struct exec_ctx {
	struct lb_trainer *t;
	int step;
	double t0; /* start of the send/recv group being issued */
	int pair;  /* event pair of the compute step being run, -1 none */
	double c0; /* the model's tp collective seconds at its start */
};

/* The compute step's events: a (start, end) pair per forward or backward while there
 * are pairs left (the last two events are the optimizer's). */
static void compute_begin(struct exec_ctx *x, const struct lb_step *st)
{
	struct lb_trainer *t = x->t;

	x->pair = -1;
	x->c0 = t->model.comm_s;
	if (t->ev_used + 2 <= t->n_ev - 2) {
		x->pair = t->ev_used / 2;
		t->ev_kind[x->pair] = st->kind;
		t->ev_used += 2;
		t->ops->event_record(t->ev[2 * x->pair]);
	}
	SET_TAG(t, x->pair >= 0 ? x->pair : TAG_OTHER(t));
}

static int compute_end(struct exec_ctx *x, const struct lb_step *st, int rc)
{
	struct lb_trainer *t = x->t;

	if (x->pair >= 0) {
		t->ops->event_record(t->ev[2 * x->pair + 1]);
		t->ev_comm[x->pair] = t->model.comm_s - x->c0; /* host-timed tp collectives */
	}
	if (rc)
		snprintf(t->err, sizeof(t->err), "%s in the %s of micro-batch %d%s%s",
			 model_error(rc), lb_step_name(st->kind), st->micro,
			 t->gs.err[0] ? ": " : "", t->gs.err);
	return rc;
}

static int exec_forward(void *ctx, const struct lb_step *st)
{
	struct exec_ctx *x = ctx;
	struct lb_trainer *t = x->t;
	const struct lb_chunk *ch;

	if (stop_signal)
		return 1;
	if (st->chunk < 0 || st->chunk >= t->model.n_chunks) {
		snprintf(t->err, sizeof(t->err),
			 "forward of micro-batch %d through chunk %d: this stage holds %d",
			 st->micro, st->chunk, t->model.n_chunks);
		return LB_E_INVAL;
	}
	ch = &t->model.chunks[st->chunk];
	/* the model's first chunk embeds the tokens, its last scores the targets */
	if ((ch->first || ch->last) &&
	    lb_data_batch(&t->data, &t->opts.layout, x->step, t->dp_rank, st->micro, t->tokens,
			  t->targets, t->err, sizeof(t->err)))
		return LB_E_DATA;
	lb_pipestream_compute(&t->ps, st); /* its input arrived, its output was sent */
	compute_begin(x, st);
	return compute_end(x, st,
			   lb_llama_forward(&t->model, st->chunk, st->slot, t->tokens, t->targets,
					    NULL, t->loss_scale, NULL));
}

static int exec_backward(void *ctx, const struct lb_step *st)
{
	struct exec_ctx *x = ctx;

	if (stop_signal)
		return 1;
	/* the data-parallel reduction hooks into the last backward of each model chunk
	 * (every one with ZeRO-2): every schedule runs a chunk's backwards in micro-batch
	 * order */
	lb_pipestream_compute(&x->t->ps, st); /* its gradient arrived, the last one was sent */
	lb_gradsync_backward(&x->t->gs, st->micro == 0, st->micro == x->t->accum - 1);
	/* a chunk's first backward of the step writes its gradients: no zeroing before */
	x->t->model.grad_first = x->t->fresh_grads && st->micro == 0;
	compute_begin(x, st);
	return compute_end(x, st, lb_llama_backward(&x->t->model, st->chunk, st->slot, NULL));
}

/* The memory of a pipeline send/recv step. */
static void *exec_buffer(void *ctx, const struct lb_step *st, size_t *count, enum lb_dtype *dtype)
{
	struct lb_trainer *t = ((struct exec_ctx *)ctx)->t;
	struct lb_llama *m = &t->model;

	*count = lb_llama_stage_count(m);
	*dtype = t->ops->dtype[LB_K_ACT];
	if (st->chunk < 0 || st->chunk >= m->n_chunks || st->slot < 0 ||
	    st->slot >= m->chunks[st->chunk].n_slots)
		return NULL;
	lb_pipestream_note(&t->ps, st);
	switch (st->kind) {
	case LB_STEP_SEND_ACT:
		return lb_llama_stage_output(m, st->chunk, st->slot);
	case LB_STEP_RECV_ACT:
		return lb_llama_stage_input(m, st->chunk, st->slot);
	case LB_STEP_SEND_GRAD:
		return lb_llama_stage_dinput(m);
	case LB_STEP_RECV_GRAD:
		return lb_llama_stage_doutput(m);
	default:
		return NULL;
	}
}

/* A send/recv group: on the p2p stream when overlapping (pipestream.h). The host's time
 * in it is the bubble where the calls block the host (the CPU, the staged communicator);
 * NCCL's is measured on the device (lb_trainer_step). */
static void exec_group(void *ctx, const struct lb_step *first, int done)
{
	struct exec_ctx *x = ctx;

	(void)first;
	if (!done) {
		SET_TAG(x->t, TAG_PIPE(x->t));
		lb_pipestream_group_begin(&x->t->ps);
		x->t0 = lb_now_s();
	} else {
		x->t->bubble_s += lb_now_s() - x->t0;
		lb_pipestream_group_end(&x->t->ps);
	}
}

static int exec_comm_failed(void *ctx, const struct lb_step *st, int rc)
{
	struct lb_trainer *t = ((struct exec_ctx *)ctx)->t;

	if (!t->pp && st) {
		snprintf(t->err, sizeof(t->err),
			 "pipeline step '%s' needs a pipeline group (pp > 1)",
			 lb_step_name(st->kind));
		return LB_E_INVAL;
	}
	if (st)
		snprintf(t->err, sizeof(t->err), "pipeline %s of micro-batch %d: %s",
			 lb_step_name(st->kind), st->micro, lb_comm_strerror(rc));
	else
		snprintf(t->err, sizeof(t->err), "the pipeline group does not fit stage %d of %d",
			 t->stage, t->opts.layout.pp);
	return lb_comm_rc_status(rc) ? lb_comm_rc_status(rc) : LB_E_COMM;
}

int lb_trainer_run_steps(struct lb_trainer *t, int step, const struct lb_step *list, int n,
			 double *loss_sum)
{
	const struct lb_pipe_ops pops = {.forward = exec_forward,
					 .backward = exec_backward,
					 .buffer = exec_buffer,
					 .group = exec_group,
					 .comm_failed = exec_comm_failed,
					 .stream = lb_pipestream_stream(&t->ps)};
	struct exec_ctx x = {t, step, 0, -1, 0};
	struct lb_schedule s = t->sched;
	int rc;

	s.steps = (struct lb_step *)list; /* read only */
	s.n_steps = n;
	s.stage = t->stage;
	s.pp = t->pp ? t->pp->size : 1;
	t->ops->zero(t->model.loss_acc, 1, LB_K_F64);
	lb_gradsync_step_begin(&t->gs);
	lb_pipestream_step_begin(&t->ps);
	rc = lb_pipe_execute(&s, t->pp, &pops, &x);
	lb_pipestream_drain(&t->ps); /* before anything reads or rewrites what they moved */
	if (rc)
		return rc;
	if (loss_sum) /* tests: read the forwards' loss sum (waits for the device) */
		t->ops->read(loss_sum, t->model.loss_acc, 1, LB_K_F64);
	return 0;
}

/* A collective of the step; its time counts as exposed communication. */
#define STEP_COMM(what, call)                                                                      \
	do {                                                                                       \
		double c0_ = lb_now_s();                                                           \
		int rc_ = (call);                                                                  \
		t->comm_s += lb_now_s() - c0_;                                                     \
		if (rc_) {                                                                         \
			snprintf(t->err, sizeof(t->err), "%s: %s", (what), lb_comm_strerror(rc_)); \
			return lb_comm_rc_status(rc_);                                             \
		}                                                                                  \
	} while (0)

/* local_sum_sq's pass over the optimizer's ranges (lb_optim_runs): g, the gradients. */
struct sum_sq_ctx {
	const struct lb_llama *m;
	const struct lb_ops *ops;
	void *acc, *g;
};

/* Counted (0) or left out (-1): a tied embedding's last-stage copy, and a tensor replicated
 * across tensor parallelism (the norm gains) on tp ranks but 0. */
static int sum_sq_class(void *ctx, int i)
{
	const struct sum_sq_ctx *c = ctx;

	return lb_llama_tied_copy(c->m, i) || (lb_llama_tp_replicated(c->m, i) && c->m->tp_rank)
		   ? -1
		   : 0;
}

static void sum_sq_run(void *ctx, size_t a, size_t b, size_t s, int cls)
{
	const struct sum_sq_ctx *c = ctx;

	c->ops->sum_sq_acc(c->acc, lb_at(c->ops, c->g, s, LB_K_F32), b - a);
}

/* Sum of squares of the gradients this rank counts in the global norm: its optimizer
 * range (every element of a data-parallel replica once: ZeRO-1 shards partition it,
 * without ZeRO only dp rank 0 counts), norm gains on tp rank 0 only, a tied embedding's
 * last-stage copy not at all. Enqueued: the sum lands in acc (one f64 element), which
 * the caller zeroed. */
static void local_sum_sq(struct lb_trainer *t, const struct lb_ops *ops, void *acc)
{
	struct sum_sq_ctx c = {&t->model, ops, acc, lb_gradsync_grads(&t->gs)};

	if (!t->gs.zero && t->dp_rank != 0)
		return;
	/* one call per run of counted tensors that follow one another in a range (no
	 * padding between them): the same sum, fewer launches */
	lb_optim_runs(&t->optim, t->model.tensors, t->model.n_tensors, sum_sq_class, sum_sq_run,
		      &c);
}

/* The optimizer's device work as a graph segment (ops.h graph_begin) when graphs are on:
 * with `norm`, the gradient norm and the clip factor into t->stats and t->sc first (one
 * rank sees the whole norm); with `adamw`, AdamW from t->sc. */
struct opt_key {
	char name[48];
	int norm, adamw;
};

static void opt_body(struct lb_trainer *t, const struct lb_ops *o, int norm, int adamw)
{
	struct lb_llama *m = &t->model;
	void *sq = lb_at(o, t->stats, 1, LB_K_F64);

	if (norm) {
		o->copy(t->stats, m->loss_acc, 1, LB_K_F64);
		o->zero(sq, 1, LB_K_F64);
		local_sum_sq(t, o, sq);
	}
	if (norm && adamw)
		o->clip_scale(t->sc, sq, t->opts.clip);
	if (adamw)
		lb_optim_step_dev(&t->optim, o, m->params, lb_gradsync_grads(&t->gs), m->tensors,
				  m->n_tensors, t->sc);
}

static void opt_segment(struct lb_trainer *t, int norm, int adamw)
{
	const struct lb_ops *ops = t->ops;
	struct opt_key k;
	int st;

	if (!t->opts.cuda_graphs || !ops->graph_begin) {
		opt_body(t, ops, norm, adamw);
		return;
	}
	memset(&k, 0, sizeof(k));
	snprintf(k.name, sizeof(k.name), "optimizer (%s%s%s)", norm ? "norm" : "",
		 norm && adamw ? ", " : "", adamw ? "AdamW" : "");
	k.norm = norm;
	k.adamw = adamw;
	opt_body(t, ops->graph_begin(&k, sizeof(k)), norm, adamw);
	st = ops->graph_end(1);
	if (st == LB_GRAPH_RERUN) /* nothing of it ran: again, eagerly */
		opt_body(t, ops, norm, adamw);
	if (st >= 0 && st < LB_GRAPH_NRUNS)
		t->graph_runs[st]++;
}

void lb_trainer_graph_runs(const struct lb_trainer *t, long *n)
{
	for (int i = 0; i < LB_GRAPH_NRUNS; i++)
		n[i] = t->graph_runs[i] + t->model.graph_runs[i];
}

/* pp > 1 with a tied embedding: first and last stage swap their copies' gradients and
 * both add the other's (a + b == b + a: the two stay bitwise equal). */
static int sum_tied(struct lb_trainer *t)
{
	struct lb_llama *m = &t->model;
	struct lb_comm *c = t->pp;
	size_t n;
	void *g;
	int peer;

	if (!t->tied_buf || !c)
		return 0;
	n = m->tensors[m->t_embed].count;
	g = lb_llama_grad(m, m->t_embed);
	peer = m->first ? c->size - 1 : 0;
	STEP_COMM("tied embedding gradient exchange", c->ops->group_start(c));
	STEP_COMM("tied embedding gradient exchange",
		  c->ops->send(c, g, n, t->ops->dtype[LB_K_F32], peer, t->ops->stream()));
	STEP_COMM("tied embedding gradient exchange",
		  c->ops->recv(c, t->tied_buf, n, t->ops->dtype[LB_K_F32], peer, t->ops->stream()));
	STEP_COMM("tied embedding gradient exchange", c->ops->group_end(c));
	t->ops->acc(g, t->tied_buf, n);
	return 0;
}

/* The step's phase times from its events (waits for the last one): forward and backward
 * GPU (or wall) time less the host-timed tensor-parallel collectives inside them, and the
 * optimizer's. */
static void step_phases(struct lb_trainer *t)
{
	const struct lb_ops *ops = t->ops;
	int n_opt = t->n_ev - 2;

	for (int p = 0; p < t->ev_used / 2; p++) {
		double dt = ops->event_elapsed(t->ev[2 * p], t->ev[2 * p + 1]) - t->ev_comm[p];

		if (t->ev_kind[p] == LB_STEP_FORWARD)
			t->phases.forward_s += dt;
		else
			t->phases.backward_s += dt;
	}
	t->phases.optimizer_s = ops->event_elapsed(t->ev[n_opt], t->ev[n_opt + 1]) - t->opt_comm_s;
}

/* A device communicator (NCCL): the device time of the step's calls (the stream has
 * finished: step_phases waited) replaces the host times, which saw only the enqueue.
 * Returns 1 if it did. */
static int device_comm_times(struct lb_trainer *t)
{
	double host_s = t->comm_s, opt_host = t->opt_comm_s;

	if (!t->world || lb_comm_take_seconds(t->world, t->tag_s, N_TAGS(t)) < 0)
		return 0;
	t->comm_s = host_s + t->tag_s[TAG_OPT(t)] + t->tag_s[TAG_OTHER(t)];
	for (int p = 0; p < t->ev_used / 2; p++) {
		t->ev_comm[p] = t->tag_s[p];
		t->comm_s += t->tag_s[p];
	}
	t->opt_comm_s = opt_host + t->tag_s[TAG_OPT(t)];
	/* the pipeline's calls: on the compute stream their time is the bubble; on the p2p
	 * stream only the compute stream's waits for them are */
	t->bubble_s = t->ps.on ? lb_pipestream_wait_s(&t->ps) : t->tag_s[TAG_PIPE(t)];
	t->model.comm_s = 0;
	return 1;
}

int lb_trainer_step(struct lb_trainer *t, int step, double *loss)
{
	const struct lb_ops *ops = t->ops;
	struct lb_llama *m = &t->model;
	double sum = 0, scale, sq, host[2], cw;
	int rc, n_opt = t->n_ev - 2;

	memset(&t->phases, 0, sizeof(t->phases));
	t->comm_s = t->bubble_s = m->comm_s = t->opt_comm_s = 0;
	t->ev_used = 0;
	switch (fault_at(t->world_rank, step)) {
	case FAULT_HANG:
		while (!stop_signal)
			pause();
		return 1;
	case FAULT_EXIT:
		_exit(1);
	case FAULT_OOM:
		snprintf(t->err, sizeof(t->err), "out of memory (injected by LAYOUTBENCH_FAULT)");
		return LB_E_OOM;
	default:
		break;
	}
	/* no zeroing: each chunk's first backward writes the gradients (grad_first) */
	t->fresh_grads = 1;
	rc = lb_trainer_run_steps(t, step, t->sched.steps, t->sched.n_steps, NULL);
	t->fresh_grads = 0;
	m->grad_first = 0;
	if (rc)
		return rc;
	SET_TAG(t, TAG_OTHER(t));
	if ((rc = lb_gradsync_sp_rest(&t->gs))) {
		snprintf(t->err, sizeof(t->err), "sequence-parallel norm gradient all-reduce: %s",
			 model_error(rc));
		return rc;
	}
	if ((rc = sum_tied(t)))
		return rc;
	/* the edge buckets, and the wait for the layer buckets reduced during the backward */
	STEP_COMM(t->gs.err[0] ? t->gs.err : "data-parallel gradient reduction",
		  lb_gradsync_finish(&t->gs));

	/* the optimizer phase: the gradient norm on the device; with the scalars on the
	 * device and one rank, the clip factor and AdamW there too, and the step's one read
	 * of the loss and the norm after them; else that read first (the clip factor needs
	 * the global norm), then AdamW */
	cw = t->comm_s;
	SET_TAG(t, TAG_OPT(t));
	ops->event_record(t->ev[n_opt]);
	if (t->sc && (!t->world || t->world->size == 1) && !t->dp) {
		ops->adamw_scalars(t->sc, lb_optim_next_step(&t->optim), t->optim.beta1,
				   t->optim.beta2, -1.0);
		opt_segment(t, 1, 1);
		ops->event_record(t->ev[n_opt + 1]);
		t->opt_comm_s = 0;
		SET_TAG(t, TAG_OTHER(t));
		ops->read(host, t->stats, 2, LB_K_F64); /* the step's end */
		*loss = host[0] * t->loss_scale;
		t->grad_norm = sqrt(host[1]);
		goto times;
	}
	opt_segment(t, 1, 0);
	ops->read(host, t->stats, 2, LB_K_F64);
	sum = host[0];
	sq = host[1];

	/* the loss: the last stage's tp rank 0 of each dp replica holds a part */
	if (t->world) {
		if (!(m->last && m->tp_rank == 0))
			sum = 0;
		STEP_COMM("loss all-reduce", lb_comm_sum_double(t->world, &sum));
	} else if (t->dp) {
		float fsum = (float)sum;

		STEP_COMM("loss all-reduce",
			  t->dp->ops->all_reduce(t->dp, &fsum, &fsum, 1, LB_F32, LB_SUM, NULL));
		sum = fsum;
	}
	*loss = sum * t->loss_scale;

	if (t->world)
		STEP_COMM("gradient norm all-reduce", lb_comm_sum_double(t->world, &sq));
	t->grad_norm = sqrt(sq);
	scale = lb_optim_clip_scale(t->grad_norm, t->opts.clip);
	if (t->sc) {
		ops->adamw_scalars(t->sc, lb_optim_next_step(&t->optim), t->optim.beta1,
				   t->optim.beta2, scale);
		opt_segment(t, 0, 1);
	} else {
		lb_optim_step(&t->optim, m->params, lb_gradsync_grads(&t->gs), m->tensors,
			      m->n_tensors, scale);
	}
	/* ZeRO: every rank gets the updated slices */
	STEP_COMM("data-parallel parameter all-gather", lb_gradsync_gather_params(&t->gs));
	ops->event_record(t->ev[n_opt + 1]);
	t->opt_comm_s = t->comm_s - cw;
	SET_TAG(t, TAG_OTHER(t));
times:
	ops->event_elapsed(t->ev[n_opt], t->ev[n_opt + 1]); /* the step's end: times complete */
	if (!device_comm_times(t)) /* host-timed groups (CPU, staged), and the device's waits */
		t->bubble_s += lb_pipestream_wait_s(&t->ps);
	step_phases(t); /* waits for the step's end */
	t->comm_s += m->comm_s;
	{ /* the compute stream's waits for the overlapped reduction are exposed */
		double in_bwd = 0, stall = lb_gradsync_stall_s(&t->gs, &in_bwd);

		t->comm_s += stall;
		t->phases.backward_s -= in_bwd;
	}
	if (t->world && t->world->size > 1) {
		t->phases.comm_exposed_s = t->comm_s;
		t->phases.bubble_s = t->pp ? t->bubble_s : 0;
	} else {
		t->phases.comm_exposed_s = t->phases.bubble_s = -1; /* not measured on one rank */
	}
	return 0;
}
