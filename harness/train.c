/*
 * layoutbench-train's core and shell: flags, checks, the trainer object (one rank's
 * model, optimizer and data), optimizer steps as lists of micro-batch operations, and the
 * run with its run log, progress line and failure classes. See train.h, docs/trainer.md.
 */
#include "harness/train.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/mman.h>

#include "common/model.h"
#include "common/util.h"
#include "harness/comm_shm.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

int lb_train_stop_signal(void)
{
	return stop_signal;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* --- flags --- */

void lb_train_opts_init(struct lb_train_opts *o)
{
	memset(o, 0, sizeof(*o));
	lb_layout_init(&o->layout);
	snprintf(o->run_dir, sizeof(o->run_dir), ".");
	o->data_elem = 2;
	o->lr = LB_TRAIN_DEFAULT_LR;
	o->weight_decay = LB_TRAIN_DEFAULT_WD;
	o->clip = LB_TRAIN_DEFAULT_CLIP;
	o->nproc_per_node = 1;
	o->comm_timeout = LB_TRAIN_DEFAULT_COMM_TIMEOUT;
}

const char *lb_train_usage(void)
{
	static char buf[8192];

	snprintf(
	    buf, sizeof(buf),
	    "usage: layoutbench-train [layout flags] [trainer flags]\n\n%s\n"
	    "trainer flags:\n"
	    "  --device cpu|cuda       backend (default cpu; cuda needs a 'make cuda' build)\n"
	    "  --run-dir DIR           where run-<run_uid>.jsonl goes (default .; created)\n"
	    "  --data FILE             flat binary token ids, sequences packed back to back\n"
	    "                          (default: a synthetic stream from the seed)\n"
	    "  --data-dtype u16|u32    width of the ids in --data (default u16)\n"
	    "  --lr X                  constant AdamW learning rate (default %g)\n"
	    "  --weight-decay X        AdamW decoupled weight decay on matrices (default %g)\n"
	    "  --clip X                global gradient-norm clip, 0 off (default %g)\n"
	    "  --mem-limit BYTES       cap on the CPU allocator (K, M, G, T suffixes); an\n"
	    "                          allocation above it fails the run as oom (exit 3);\n"
	    "                          default $LAYOUTBENCH_MEM_LIMIT, else none\n"
	    "  --nproc-per-node N      ranks this process starts without srun (default 1)\n"
	    "  --comm-timeout S        seconds before a silent peer is a timeout (default %g)\n"
	    "  --pipeline-schedule 1f1b|gpipe  pipeline schedule with --pp > 1 (default 1f1b)\n"
	    "  --dump-params FILE      testing aid: write the whole model's fp32 parameters\n"
	    "                          after the last step (rank 0)\n"
	    "  --quiet                 no progress line per step on stderr\n"
	    "  --help                  this text\n\n"
	    "exit status: 0 ok, 1 error, 2 usage, 3 oom, 4 nccl_error, 5 diverged, 6 timeout,\n"
	    "128+N killed by signal N\n",
	    lb_layout_flags_usage(), LB_TRAIN_DEFAULT_LR, LB_TRAIN_DEFAULT_WD,
	    LB_TRAIN_DEFAULT_CLIP, LB_TRAIN_DEFAULT_COMM_TIMEOUT);
	return buf;
}

int lb_parse_bytes(const char *s, uint64_t *out)
{
	char num[64];
	size_t n = strlen(s);
	uint64_t mul = 1, v;

	if (n == 0 || n >= sizeof(num))
		return -1;
	memcpy(num, s, n + 1);
	switch (num[n - 1]) {
	case 'K':
	case 'k':
		mul = 1ULL << 10;
		break;
	case 'M':
	case 'm':
		mul = 1ULL << 20;
		break;
	case 'G':
	case 'g':
		mul = 1ULL << 30;
		break;
	case 'T':
	case 't':
		mul = 1ULL << 40;
		break;
	default:
		break;
	}
	if (mul != 1)
		num[n - 1] = '\0';
	if (lb_parse_u64(num, &v) || (v && v > UINT64_MAX / mul))
		return -1;
	*out = v * mul;
	return 0;
}

/* Trainer flags: name, takes a value. */
static const struct {
	const char *name;
	int has_value;
} train_flags[] = {
    {"--device", 1},
    {"--run-dir", 1},
    {"--data", 1},
    {"--data-dtype", 1},
    {"--lr", 1},
    {"--weight-decay", 1},
    {"--clip", 1},
    {"--mem-limit", 1},
    {"--nproc-per-node", 1},
    {"--comm-timeout", 1},
    {"--quiet", 0},
    {"--help", 0},
    {"--pipeline-schedule", 1},
    {"--dump-params", 1},
};

static int set_train_flag(struct lb_train_opts *o, const char *name, const char *v, char *err,
			  size_t errlen)
{
	if (!strcmp(name, "--device")) {
		if (!strcmp(v, "cpu"))
			o->device_cuda = 0;
		else if (!strcmp(v, "cuda"))
			o->device_cuda = 1;
		else
			goto bad_enum;
	} else if (!strcmp(name, "--run-dir")) {
		if (!*v || strlen(v) >= sizeof(o->run_dir))
			goto bad;
		snprintf(o->run_dir, sizeof(o->run_dir), "%s", v);
	} else if (!strcmp(name, "--data")) {
		if (!*v || strlen(v) >= sizeof(o->data_path))
			goto bad;
		snprintf(o->data_path, sizeof(o->data_path), "%s", v);
	} else if (!strcmp(name, "--data-dtype")) {
		if (!strcmp(v, "u16"))
			o->data_elem = 2;
		else if (!strcmp(v, "u32"))
			o->data_elem = 4;
		else
			goto bad_enum;
	} else if (!strcmp(name, "--lr")) {
		if (lb_parse_double(v, 0.0, 1e300, &o->lr))
			goto bad;
	} else if (!strcmp(name, "--weight-decay")) {
		if (lb_parse_double(v, 0.0, 1e6, &o->weight_decay))
			goto bad;
	} else if (!strcmp(name, "--clip")) {
		if (lb_parse_double(v, 0.0, 1e300, &o->clip))
			goto bad;
	} else if (!strcmp(name, "--mem-limit")) {
		if (lb_parse_bytes(v, &o->mem_limit))
			goto bad;
	} else if (!strcmp(name, "--nproc-per-node")) {
		if (lb_parse_int(v, 1, 1024, &o->nproc_per_node))
			goto bad;
	} else if (!strcmp(name, "--comm-timeout")) {
		if (lb_parse_double(v, 0.001, 1e7, &o->comm_timeout))
			goto bad;
	} else if (!strcmp(name, "--pipeline-schedule")) {
		if (lb_sched_parse(v, &o->schedule))
			goto bad_enum;
	} else if (!strcmp(name, "--dump-params")) {
		if (!*v || strlen(v) >= sizeof(o->dump_params))
			goto bad;
		snprintf(o->dump_params, sizeof(o->dump_params), "%s", v);
	}
	return 0;
bad:
	snprintf(err, errlen, "%s: invalid value '%s'", name, v);
	return -1;
bad_enum:
	snprintf(err, errlen, "%s: unknown value '%s' (expected %s)", name, v,
		 !strcmp(name, "--device")		? "cpu or cuda"
		 : !strcmp(name, "--pipeline-schedule") ? "1f1b or gpipe"
							: "u16 or u32");
	return -1;
}

int lb_train_parse_args(struct lb_train_opts *o, int argc, char **argv, char *err, size_t errlen)
{
	char **rest;
	int nrest = 0, rc = 0;
	const char *env = getenv("LAYOUTBENCH_MEM_LIMIT");

	if (env && *env && lb_parse_bytes(env, &o->mem_limit)) {
		snprintf(err, errlen, "LAYOUTBENCH_MEM_LIMIT: invalid byte count '%s'", env);
		return -1;
	}
	for (int i = 1; i < argc; i++) /* --help wins over any error */
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(lb_train_usage(), stdout);
			return 1;
		}
	rest = calloc((size_t)argc + 1, sizeof(*rest));
	if (!rest) {
		snprintf(err, errlen, "out of host memory");
		return -1;
	}
	if (lb_layout_parse_args(&o->layout, argc - 1, argv + 1, rest, &nrest, err, errlen)) {
		rc = -1;
		goto out_free_rest;
	}
	for (int i = 0; i < nrest; i++) {
		const char *arg = rest[i], *eq = strchr(arg, '='), *val = NULL;
		char name[64];
		size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
		size_t f;

		if (nlen >= sizeof(name))
			nlen = sizeof(name) - 1;
		memcpy(name, arg, nlen);
		name[nlen] = '\0';
		for (f = 0; f < sizeof(train_flags) / sizeof(train_flags[0]); f++)
			if (!strcmp(train_flags[f].name, name))
				break;
		if (f == sizeof(train_flags) / sizeof(train_flags[0])) {
			snprintf(err, errlen, "unknown flag '%s' (see 'layoutbench-train --help')",
				 arg);
			rc = -1;
			goto out_free_rest;
		}
		if (!train_flags[f].has_value) {
			if (eq) {
				snprintf(err, errlen, "%s takes no value", name);
				rc = -1;
				goto out_free_rest;
			}
			if (!strcmp(name, "--quiet"))
				o->quiet = 1;
			continue;
		}
		if (eq) {
			val = eq + 1;
		} else if (i + 1 < nrest) {
			val = rest[++i];
		} else {
			snprintf(err, errlen, "%s needs a value", name);
			rc = -1;
			goto out_free_rest;
		}
		if (set_train_flag(o, name, val, err, errlen)) {
			rc = -1;
			goto out_free_rest;
		}
	}
out_free_rest:
	free(rest);
	return rc;
}

int lb_train_check(const struct lb_train_opts *o, char *err, size_t errlen)
{
	const struct lb_layout *l = &o->layout;
	char reason[512];
	int world = lb_layout_world(l);

	if (o->device_cuda) {
		snprintf(err, errlen,
			 "layoutbench-train was built without the CUDA backend "
			 "(build with 'make cuda')");
		return -1;
	}
	if (lb_layout_check(l, reason, sizeof(reason))) {
		snprintf(err, errlen, "%s", reason);
		return -1;
	}
	if (world > LB_SHM_MAX_RANKS) {
		snprintf(err, errlen,
			 "tp*pp*dp=%d ranks: the CPU backend's shared-memory communicator joins "
			 "at most %d ranks of one node",
			 world, LB_SHM_MAX_RANKS);
		return -1;
	}
	if (!getenv("SLURM_PROCID") && o->nproc_per_node != world) {
		snprintf(err, errlen,
			 "--nproc-per-node %d: the layout has tp*pp*dp=%d rank(s); start "
			 "that many (--nproc-per-node %d) or run under srun -n %d",
			 o->nproc_per_node, world, world, world);
		return -1;
	}
	return 0;
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

static int comm_rc(int rc)
{
	if (rc == 0)
		return 0;
	return (rc == LB_COMM_ETIMEOUT || rc == LB_COMM_EPEER) ? LB_E_TIMEOUT : LB_E_COMM;
}

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
	int rc, n_slots, dp = l->dp;
	size_t lo, hi;

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
	/* activations held: 1F1B keeps pp - stage micro-batches in flight, GPipe all */
	n_slots = o->schedule == LB_SCHED_GPIPE && l->pp > 1 ? t->accum : l->pp - t->stage;
	if (n_slots > t->accum)
		n_slots = t->accum;
	if (n_slots < 1)
		n_slots = 1;
	rc = lb_llama_init(&t->model, ops, t->tp, l, t->stage, n_slots);
	t->zero = l->zero_stage == 1 && t->dp;
	lo = 0;
	hi = rc ? 0 : t->model.n_params;
	if (rc == 0 && t->zero) { /* ZeRO-1: optimizer state of this rank's shard only */
		t->shard = t->model.n_alloc / (size_t)dp;
		lo = (size_t)t->dp_rank * t->shard;
		hi = lo + t->shard;
		if (hi > t->model.n_params)
			hi = t->model.n_params;
		if (lo > hi)
			lo = hi;
		t->gshard = ops->alloc(t->shard);
		if (!t->gshard)
			rc = LB_E_OOM;
	}
	if (rc == 0 && l->model.tied && l->pp > 1 && (t->model.first || t->model.last)) {
		t->tied_buf = ops->alloc(t->model.tensors[t->model.t_embed].count);
		if (!t->tied_buf)
			rc = LB_E_OOM;
	}
	if (rc == 0)
		rc = lb_optim_init(&t->optim, ops, t->model.params, lo, hi, o->lr, o->weight_decay);
	if (rc) {
		if (rc == LB_E_OOM) {
			uint64_t peak = 0;

			ops->mem_stats(NULL, &peak);
			snprintf(
			    t->err, sizeof(t->err),
			    "out of memory allocating weights, optimizer state and activations "
			    "(%llu bytes held at the failing allocation, limit %llu bytes); "
			    "lower the micro-batch or checkpoint activations",
			    (unsigned long long)peak, (unsigned long long)o->mem_limit);
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
	if (t->ops && t->gshard)
		t->ops->free_(t->gshard);
	if (t->ops && t->tied_buf)
		t->ops->free_(t->tied_buf);
	t->gshard = t->tied_buf = NULL;
	if (t->model.ops)
		lb_llama_free(&t->model);
	lb_data_close(&t->data);
	free(t->tokens);
	free(t->targets);
	t->tokens = t->targets = NULL;
}

static const char *model_error(int rc)
{
	switch (rc) {
	case LB_E_OOM:
		return "out of memory";
	case LB_E_COMM:
		return "a collective failed";
	case LB_E_TIMEOUT:
		return "a peer rank died or did not answer";
	default:
		return "internal error";
	}
}

/* The memory of a pipeline send/recv step. */
static void *pipe_buffer(struct lb_trainer *t, const struct lb_step *op)
{
	int slot = op->micro % t->model.n_slots;

	switch (op->kind) {
	case LB_STEP_SEND_ACT:
		return lb_llama_stage_output(&t->model, slot);
	case LB_STEP_RECV_ACT:
		return lb_llama_stage_input(&t->model, slot);
	case LB_STEP_SEND_GRAD:
		return lb_llama_stage_dinput(&t->model);
	case LB_STEP_RECV_GRAD:
		return lb_llama_stage_doutput(&t->model);
	default:
		return NULL;
	}
}

/* Steps [i, j) are one send/recv group: issue them together over t->pp. */
static int run_group(struct lb_trainer *t, const struct lb_step *list, int i, int j)
{
	struct lb_comm *c = t->pp;
	size_t n = lb_llama_stage_count(&t->model);
	double t0 = now_s();
	int rc = c->ops->group_start(c);

	for (int k = i; rc == 0 && k < j; k++) {
		const struct lb_step *op = &list[k];
		void *buf = pipe_buffer(t, op);

		if (op->kind == LB_STEP_SEND_ACT || op->kind == LB_STEP_SEND_GRAD)
			rc = c->ops->send(c, buf, n, t->ops->dtype, op->peer, NULL);
		else
			rc = c->ops->recv(c, buf, n, t->ops->dtype, op->peer, NULL);
	}
	if (rc == 0)
		rc = c->ops->group_end(c);
	t->bubble_s += now_s() - t0;
	if (rc)
		snprintf(t->err, sizeof(t->err), "pipeline %s of micro-batch %d: %s",
			 lb_step_name(list[i].kind), list[i].micro, lb_comm_strerror(rc));
	return comm_rc(rc);
}

int lb_trainer_run_steps(struct lb_trainer *t, int step, const struct lb_step *list, int n,
			 double *loss_sum)
{
	double sum = 0;
	int rc;

	for (int i = 0; i < n; i++) {
		const struct lb_step *op = &list[i];
		int slot = op->micro % t->model.n_slots;
		double t0 = now_s(), c0 = t->model.comm_s, ls = 0;

		if (stop_signal)
			return 1;
		if (op->kind == LB_STEP_FORWARD) {
			if (lb_data_batch(&t->data, &t->opts.layout, step, t->dp_rank, op->micro,
					  t->tokens, t->targets, t->err, sizeof(t->err)))
				return LB_E_DATA;
			rc = lb_llama_forward(&t->model, slot, t->tokens, t->targets, NULL,
					      t->loss_scale, &ls);
			t->phases.forward_s += now_s() - t0 - (t->model.comm_s - c0);
			sum += ls;
		} else if (op->kind == LB_STEP_BACKWARD) {
			rc = lb_llama_backward(&t->model, slot, NULL);
			t->phases.backward_s += now_s() - t0 - (t->model.comm_s - c0);
		} else if (t->pp && op->group >= 0) {
			int j = i + 1;

			while (j < n && list[j].group == op->group && list[j].peer >= 0)
				j++;
			if ((rc = run_group(t, list, i, j)))
				return rc;
			i = j - 1;
			continue;
		} else {
			snprintf(t->err, sizeof(t->err),
				 "pipeline step '%s' needs a pipeline group (pp > 1)",
				 lb_step_name(op->kind));
			return LB_E_INVAL;
		}
		if (rc) {
			snprintf(t->err, sizeof(t->err), "%s in the %s of micro-batch %d",
				 model_error(rc), lb_step_name(op->kind), op->micro);
			return rc;
		}
	}
	if (loss_sum)
		*loss_sum = sum;
	return 0;
}

/* A collective of the step; its time counts as exposed communication. */
#define STEP_COMM(what, call)                                                                      \
	do {                                                                                       \
		double c0_ = now_s();                                                              \
		int rc_ = (call);                                                                  \
		t->comm_s += now_s() - c0_;                                                        \
		if (rc_) {                                                                         \
			snprintf(t->err, sizeof(t->err), "%s: %s", (what), lb_comm_strerror(rc_)); \
			return comm_rc(rc_);                                                       \
		}                                                                                  \
	} while (0)

/* Sum of squares of the gradients this rank counts in the global norm: its optimizer
 * range (every element of a data-parallel replica once: ZeRO-1 shards partition it,
 * without ZeRO only dp rank 0 counts), norm gains on tp rank 0 only, a tied embedding's
 * last-stage copy not at all. */
static double local_sum_sq(struct lb_trainer *t)
{
	struct lb_llama *m = &t->model;
	double s = 0;

	if (!t->zero && t->dp_rank != 0)
		return 0;
	for (int i = 0; i < m->n_tensors; i++) {
		size_t a = m->tensors[i].offset, b = a + m->tensors[i].count;

		if (lb_llama_tied_copy(m, i) || (lb_llama_tp_replicated(m, i) && m->tp_rank))
			continue;
		if (a < t->optim.lo)
			a = t->optim.lo;
		if (b > t->optim.hi)
			b = t->optim.hi;
		if (a < b)
			s += t->ops->sum_sq(t->ops->at(m->grads, a), b - a);
	}
	return s;
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
		  c->ops->send(c, g, n, t->ops->dtype, peer, NULL));
	STEP_COMM("tied embedding gradient exchange",
		  c->ops->recv(c, t->tied_buf, n, t->ops->dtype, peer, NULL));
	STEP_COMM("tied embedding gradient exchange", c->ops->group_end(c));
	t->ops->acc(g, t->tied_buf, n);
	return 0;
}

int lb_trainer_step(struct lb_trainer *t, int step, double *loss)
{
	const struct lb_ops *ops = t->ops;
	const struct lb_layout *l = &t->opts.layout;
	struct lb_llama *m = &t->model;
	struct lb_schedule sched;
	double sum = 0, t0, scale, sq;
	int rc;

	memset(&t->phases, 0, sizeof(t->phases));
	t->comm_s = t->bubble_s = m->comm_s = 0;
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
	if (lb_schedule_build(t->pp ? t->opts.schedule : LB_SCHED_1F1B, l->pp, t->stage, t->accum,
			      &sched, t->err, sizeof(t->err)))
		return LB_E_INVAL;
	lb_llama_zero_grads(m);
	rc = lb_trainer_run_steps(t, step, sched.steps, sched.n_steps, &sum);
	lb_schedule_release(&sched);
	if (rc)
		return rc;
	if ((rc = lb_llama_sync_sp_grads(m))) {
		snprintf(t->err, sizeof(t->err), "sequence-parallel norm gradient all-reduce: %s",
			 model_error(rc));
		return rc;
	}
	if ((rc = sum_tied(t)))
		return rc;
	if (t->dp && t->zero) { /* ZeRO-1: this rank's shard of the summed gradients */
		STEP_COMM("data-parallel gradient reduce-scatter",
			  t->dp->ops->reduce_scatter(t->dp, m->grads, t->gshard, t->shard,
						     ops->dtype, LB_SUM, NULL));
		if (t->optim.hi > t->optim.lo)
			ops->copy(ops->at(m->grads, t->optim.lo), t->gshard,
				  t->optim.hi - t->optim.lo);
	} else if (t->dp) {
		STEP_COMM("data-parallel gradient all-reduce",
			  t->dp->ops->all_reduce(t->dp, m->grads, m->grads, m->n_params, ops->dtype,
						 LB_SUM, NULL));
	}
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

	t0 = now_s();
	sq = local_sum_sq(t);
	if (t->world) {
		double c0 = now_s();

		STEP_COMM("gradient norm all-reduce", lb_comm_sum_double(t->world, &sq));
		t0 += now_s() - c0;
	}
	t->grad_norm = sqrt(sq);
	scale = lb_optim_clip_scale(t->grad_norm, t->opts.clip);
	lb_optim_step(&t->optim, m->params, m->grads, m->tensors, m->n_tensors, scale);
	if (t->zero) { /* every rank gets the updated shards */
		double c0 = now_s();

		STEP_COMM("data-parallel parameter all-gather",
			  t->dp->ops->all_gather(t->dp, ops->at(m->params, t->dp_rank * t->shard),
						 m->params, t->shard, ops->dtype, NULL));
		t0 += now_s() - c0;
	}
	t->phases.optimizer_s = now_s() - t0;
	t->comm_s += m->comm_s;
	if (t->world && t->world->size > 1) {
		t->phases.comm_exposed_s = t->comm_s;
		t->phases.bubble_s = t->pp ? t->bubble_s : 0;
	} else {
		t->phases.comm_exposed_s = t->phases.bubble_s = -1; /* not measured on one rank */
	}
	return 0;
}

/* --- the run --- */

static const char *rc_class(int rc)
{
	switch (rc) {
	case LB_E_OOM:
		return "oom";
	case LB_E_COMM:
		return "nccl_error";
	case LB_E_TIMEOUT:
		return "timeout";
	default:
		return "error";
	}
}

/* What a rank tells the launcher when it fails (shared memory mapped before the fork). */
struct rank_report {
	int failed;   /* 1 once written */
	int culprit;  /* the rank at fault (world numbering), -1 unknown */
	int code;     /* exit code of the class */
	char cls[32]; /* failure class */
	char msg[512];
};

struct run_shared {
	int end_written; /* rank 0 wrote the end record (a run that completed) */
	struct rank_report r[LB_SHM_MAX_RANKS];
};

struct run_ctx {
	const struct lb_train_opts *o;
	struct lb_trainlog *lg; /* launcher mode: the launcher's log, inherited by rank 0 */
	struct run_shared *sh;	/* launcher mode: the reports; NULL otherwise */
	char log_path[4096];	/* under srun: rank 0's log (broadcast), for rank 1 */
};

static int is_class(const char *s, size_t n)
{
	static const char *cls[] = {"oom", "nccl_error", "timeout", "killed", "diverged", "error"};

	for (size_t i = 0; i < sizeof(cls) / sizeof(cls[0]); i++)
		if (strlen(cls[i]) == n && !strncmp(s, cls[i], n))
			return 1;
	return 0;
}

/* After a failed collective: the rank at fault, the class and a message. A peer that
 * failed for its own reason posted "<class>: <message>" as its abort reason ("rank 3
 * failed: oom: ..."); a peer that died or hung is a timeout; a backend error nccl_error. */
static void comm_failure(struct lb_comm *world, int rc, int *culprit, char *cls, size_t clen,
			 char *msg, size_t mlen, const char *what)
{
	char m[512] = "";
	const char *p;
	int code = 0, r = -1;

	if (world && lb_comm_is_shm(world))
		code = lb_comm_shm_error(world, &r, m, sizeof(m));
	*culprit = r;
	snprintf(cls, clen, "%s",
		 rc == LB_E_COMM && code != LB_COMM_EPEER ? "nccl_error" : "timeout");
	if ((p = strstr(m, "failed: "))) {
		size_t n;

		p += 8;
		n = strcspn(p, ":");
		if (p[n] == ':' && is_class(p, n) && n < clen)
			snprintf(cls, clen, "%.*s", (int)n, p);
	}
	if (m[0])
		snprintf(msg, mlen, "%s (%s)", m, what);
	else
		snprintf(msg, mlen, "%s", what);
}

/* A rank's failure: stderr, the abort (own failures), and the end record where this rank
 * writes it (rank 0; rank 1 under srun when rank 0 is gone; in launcher mode the
 * launcher, from the report). Returns this rank's exit status. */
static int rank_fail(struct run_ctx *x, struct lb_trainlog *lg, struct lb_comm *world, int rank,
		     int own, const char *cls, int culprit, const char *msg)
{
	int code = lb_class_exit_code(cls), status = code;
	char host[128] = "unknown";

	gethostname(host, sizeof(host) - 1);
	fprintf(stderr, "error: host %s rank %d: %s (class %s)\n", host, rank, msg, cls);
	if (own && world && lb_comm_is_shm(world)) {
		char reason[256];

		snprintf(reason, sizeof(reason), "%s: %.190s", cls, msg);
		lb_comm_shm_abort(world, reason);
	}
	if (!own && (x->sh || rank != 0))
		status = LB_EXIT_TIMEOUT; /* "a peer failed first": the launcher names the cause */
	if (x->sh) {
		struct rank_report *r = &x->sh->r[rank];

		r->culprit = culprit;
		r->code = code;
		snprintf(r->cls, sizeof(r->cls), "%s", cls);
		snprintf(r->msg, sizeof(r->msg), "%s", msg);
		__atomic_store_n(&r->failed, 1, __ATOMIC_RELEASE);
	} else if (rank == 0) {
		lb_trainlog_end(lg, cls, msg, culprit, code);
	} else if (rank == 1 && culprit == 0 && x->log_path[0]) {
		struct lb_trainlog l1;

		if (lb_trainlog_append(&l1, x->log_path) == 0) {
			lb_trainlog_end(&l1, cls, msg, culprit, code);
			lb_trainlog_close(&l1);
		}
	}
	return status;
}

/* --dump-params: the whole model from every rank's owned parts, written by rank 0 as
 * raw fp32 in the single-rank order (lb_llama_full_count). Collective over world. */
static int dump_params(struct lb_trainer *t, const char *path, char *err, size_t errlen)
{
	size_t n = lb_llama_full_count(&t->opts.layout.model);
	float *full = calloc(n, sizeof(*full));
	int rc = 0;

	if (!full) {
		snprintf(err, errlen, "out of host memory");
		return LB_E_OOM;
	}
	if (t->dp_rank == 0)
		lb_llama_add_full(&t->model, full);
	if (t->world && t->world->size > 1) {
		rc = t->world->ops->all_reduce(t->world, full, full, n, LB_F32, LB_SUM, NULL);
		if (rc) {
			snprintf(err, errlen, "parameter gather: %s", lb_comm_strerror(rc));
			free(full);
			return comm_rc(rc);
		}
	}
	if (t->world_rank == 0) {
		FILE *f = fopen(path, "wb");

		if (!f || fwrite(full, sizeof(*full), n, f) != n) {
			snprintf(err, errlen, "cannot write '%.900s': %s", path, strerror(errno));
			rc = LB_E_DATA;
		}
		if (f && fclose(f) && !rc) {
			snprintf(err, errlen, "cannot write '%.900s': %s", path, strerror(errno));
			rc = LB_E_DATA;
		}
	}
	free(full);
	return rc;
}

static int open_log(struct lb_trainlog *lg, const struct lb_train_opts *o, char *err, size_t errlen)
{
	struct lb_runinfo info = {0};

	info.layout = &o->layout;
	info.gpu = "cpu";
	info.peak_tflops = -1; /* unknown for a CPU: MFU stays null, never a guess */
	info.backend = "cpu";
	info.world_size = lb_layout_world(&o->layout);
	return lb_trainlog_open(lg, o->run_dir, &info, err, errlen);
}

/* One rank of the run (also the whole of a one-rank run). */
static int rank_main(const struct lb_rank_env *env, void *arg)
{
	struct run_ctx *x = arg;
	const struct lb_train_opts *o = x->o;
	const struct lb_layout *l = &o->layout;
	const struct lb_ops *ops = lb_ops_cpu();
	struct lb_trainlog own_log, *lg = NULL;
	struct lb_comm *world = NULL;
	struct lb_groups g;
	struct lb_trainer *t = NULL;
	struct sigaction sa;
	uint64_t *peaks = NULL;
	char err[1024], msg[1400], cls[32];
	double flops = lb_flops_per_step(l);
	int64_t tokens = (int64_t)l->global_batch * l->seq_len;
	int rank = env->rank, n = env->world_size, code = LB_EXIT_OK, rc, culprit;
	int have_groups = 0;

	memset(&g, 0, sizeof(g));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (x->lg) { /* launcher mode: the log is the launcher's; rank 0 writes the steps */
		if (rank == 0)
			lg = x->lg;
		else
			x->lg->f = NULL; /* this process's copy: never written */
	} else if (rank == 0) {
		if (open_log(&own_log, o, err, sizeof(err))) {
			fprintf(stderr, "error: %s\n", err);
			return LB_EXIT_ERROR;
		}
		lg = &own_log;
		fprintf(stderr, "layoutbench-train: run log %s\n", lg->path);
	}
	lb_trainlog_set_current(lg, rank);
	if (n > 1) {
		rc = lb_comm_shm_create(env->rdzv_name, rank, n, o->comm_timeout, &world, err,
					sizeof(err));
		if (rc) {
			world = NULL;
			code = rank_fail(x, lg, NULL, rank, 0, "timeout", -1, err);
			goto out;
		}
		if (!x->sh) { /* under srun: every rank learns rank 0's log (for rank 1) */
			if (rank == 0)
				snprintf(x->log_path, sizeof(x->log_path), "%s", lg->path);
			rc = world->ops->broadcast(world, x->log_path, sizeof(x->log_path) / 4,
						   LB_I32, 0, NULL);
			x->log_path[sizeof(x->log_path) - 1] = '\0';
			if (rc == 0)
				rc = lb_comm_make_groups(world, l->tp, l->pp, l->dp, &g);
		} else {
			rc = lb_comm_make_groups(world, l->tp, l->pp, l->dp, &g);
		}
		if (rc) {
			comm_failure(world, comm_rc(rc), &culprit, cls, sizeof(cls), msg,
				     sizeof(msg), "while building the tp/dp/pp groups");
			code = rank_fail(x, lg, world, rank, 0, cls, culprit, msg);
			goto out;
		}
		have_groups = 1;
	}
	t = calloc(1, sizeof(*t));
	peaks = calloc((size_t)n, sizeof(*peaks));
	if (!t || !peaks) {
		code = rank_fail(x, lg, world, rank, 1, "oom", rank, "out of host memory");
		goto out;
	}
	rc = lb_trainer_init_par(t, o, ops, world, have_groups ? &g : NULL);
	if (rc) {
		code = rank_fail(x, lg, world, rank, 1, rc_class(rc), rank, t->err);
		free(t);
		t = NULL;
		goto out;
	}
	for (int step = 0; step < l->steps; step++) {
		double t0 = now_s(), loss = 0, dt;
		uint64_t peak = 0;

		rc = lb_trainer_step(t, step, &loss);
		if (rc == 1 || stop_signal)
			break;
		if (rc == LB_E_TIMEOUT || rc == LB_E_COMM) {
			comm_failure(world, rc, &culprit, cls, sizeof(cls), msg, sizeof(msg),
				     t->err);
			code = rank_fail(x, lg, world, rank, 0, cls, culprit, msg);
			goto out;
		}
		if (rc) {
			code = rank_fail(x, lg, world, rank, 1, rc_class(rc), rank, t->err);
			goto out;
		}
		dt = now_s() - t0;
		ops->mem_stats(NULL, &peak);
		peaks[0] = peak;
		if (world) { /* each rank's peak, as two 32-bit words */
			rc = world->ops->all_gather(world, &peak, peaks, 2, LB_I32, NULL);
			if (rc) {
				comm_failure(world, comm_rc(rc), &culprit, cls, sizeof(cls), msg,
					     sizeof(msg), "peak memory gather");
				code = rank_fail(x, lg, world, rank, 0, cls, culprit, msg);
				goto out;
			}
		}
		if (rank == 0)
			lb_trainlog_step_ranks(lg, step, step < l->warmup, dt, tokens, loss, peaks,
					       world ? n : -1, &t->phases);
		if (!isfinite(loss)) { /* every rank sees the same summed loss */
			snprintf(msg, sizeof(msg), "loss is %s at step %d (lower --lr or --clip)",
				 isnan(loss) ? "nan" : "inf", step);
			code = rank_fail(x, lg, world, rank, 0, "diverged", -1, msg);
			if (code == LB_EXIT_TIMEOUT)
				code = LB_EXIT_DIVERGED;
			goto out;
		}
		if (!o->quiet && rank == 0) {
			fprintf(stderr,
				"step %d/%d loss %.4f time %.3f s %.0f tok/s %.4f TFLOP/s%s\n",
				step + 1, l->steps, loss, dt, tokens / dt, flops / dt / 1e12,
				step < l->warmup ? " (warmup)" : "");
		}
	}
	if (stop_signal) {
		int sig = stop_signal;

		snprintf(msg, sizeof(msg), "stopped by signal %d (%s)", sig,
			 sig == SIGTERM	 ? "SIGTERM"
			 : sig == SIGINT ? "SIGINT"
					 : "signal");
		fprintf(stderr, "error: rank %d: %s (class killed)\n", rank, msg);
		code = 128 + sig;
		if (x->sh) {
			struct rank_report *r = &x->sh->r[rank];

			r->culprit = -1;
			r->code = code;
			snprintf(r->cls, sizeof(r->cls), "killed");
			snprintf(r->msg, sizeof(r->msg), "%.500s", msg);
			__atomic_store_n(&r->failed, 1, __ATOMIC_RELEASE);
		} else if (rank == 0) {
			lb_trainlog_end(lg, "killed", msg, 0, code);
		}
		goto out;
	}
	if (o->dump_params[0] && (rc = dump_params(t, o->dump_params, err, sizeof(err)))) {
		if (rc == LB_E_TIMEOUT || rc == LB_E_COMM) {
			comm_failure(world, rc, &culprit, cls, sizeof(cls), msg, sizeof(msg), err);
			code = rank_fail(x, lg, world, rank, 0, cls, culprit, msg);
		} else {
			code = rank_fail(x, lg, world, rank, 1, rc_class(rc), rank, err);
		}
		goto out;
	}
	if (world && (rc = world->ops->barrier(world))) { /* nobody leaves a collective alone */
		comm_failure(world, comm_rc(rc), &culprit, cls, sizeof(cls), msg, sizeof(msg),
			     "final barrier");
		code = rank_fail(x, lg, world, rank, 0, cls, culprit, msg);
		goto out;
	}
	if (rank == 0) {
		snprintf(msg, sizeof(msg), "%d steps", l->steps);
		lb_trainlog_end(lg, NULL, msg, -1, LB_EXIT_OK);
		if (x->sh)
			__atomic_store_n(&x->sh->end_written, 1, __ATOMIC_RELEASE);
	}
out:
	if (t) {
		lb_trainer_free(t);
		free(t);
	}
	free(peaks);
	if (have_groups)
		lb_groups_release(&g);
	if (world)
		world->ops->destroy(world);
	lb_trainlog_set_current(NULL, 0);
	if (lg == &own_log)
		lb_trainlog_close(lg);
	return code;
}

/* Launcher mode: the end record of a failed run, from the failing rank's report. */
static int launcher_end(struct run_ctx *x, struct lb_trainlog *lg,
			const struct lb_launch_result *res)
{
	const struct rank_report *r = NULL;
	char cls[32], msg[768], path[4096];
	int culprit = res->failed_rank, code;

	if (res->failed_rank >= 0 && x->sh->r[res->failed_rank].failed)
		r = &x->sh->r[res->failed_rank];
	/* a rank that noticed a peer's failure names it; prefer the peer's own report */
	if (r && r->culprit >= 0 && r->culprit < LB_SHM_MAX_RANKS && x->sh->r[r->culprit].failed &&
	    strcmp(x->sh->r[r->culprit].cls, "timeout") &&
	    strcmp(x->sh->r[r->culprit].cls, "killed")) /* not: stopped by the launcher */
		r = &x->sh->r[r->culprit];
	if (r) {
		culprit = r->culprit;
		snprintf(cls, sizeof(cls), "%s", r->cls);
		snprintf(msg, sizeof(msg), "%s", r->msg);
		code = r->code;
	} else if (res->failed_rank >= 0) { /* died without a word: killed, crashed */
		snprintf(cls, sizeof(cls), "timeout");
		snprintf(msg, sizeof(msg), "%s without a failure report", res->message);
		code = LB_EXIT_TIMEOUT;
	} else {
		snprintf(cls, sizeof(cls), "killed");
		snprintf(msg, sizeof(msg), "%s", res->message);
		code = res->status;
	}
	fprintf(stderr, "error: layoutbench-train: %s (class %s, rank %d)\n", msg, cls, culprit);
	snprintf(path, sizeof(path), "%s", lg->path);
	if (lb_trainlog_append(lg, path) == 0) {
		lb_trainlog_end(lg, cls, msg, culprit, code);
		lb_trainlog_close(lg);
	}
	return code;
}

int lb_train_main(const struct lb_train_opts *o)
{
	const struct lb_layout *l = &o->layout;
	struct lb_launch_opts lo = LB_LAUNCH_OPTS_INIT;
	struct lb_launch_result res;
	struct lb_rank_env env;
	struct lb_trainlog lg;
	struct run_ctx x;
	char err[1024], path[4096];
	int s, world = lb_layout_world(l), rc, code;

	if (lb_train_check(o, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		return LB_EXIT_USAGE;
	}
	memset(&x, 0, sizeof(x));
	x.o = o;
	s = lb_rank_env_from_slurm(&env, 1, err, sizeof(err));
	if (s < 0) {
		fprintf(stderr, "error: %s\n", err);
		return LB_EXIT_USAGE;
	}
	if (s == 1) { /* an srun task: one rank */
		if (env.world_size != world) {
			fprintf(stderr,
				"error: srun started %d task(s) but the layout has tp*pp*dp=%d "
				"rank(s); run it with srun -n %d\n",
				env.world_size, world, world);
			return LB_EXIT_USAGE;
		}
		return rank_main(&env, &x);
	}
	if (world == 1) {
		lb_rank_env_single(&env);
		return rank_main(&env, &x);
	}
	/* --nproc-per-node: this process opens the log, forks the ranks and writes the end
	 * record of a failed run from the failing rank's report */
	if (open_log(&lg, o, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		return LB_EXIT_ERROR;
	}
	fprintf(stderr, "layoutbench-train: run log %s (%d ranks)\n", lg.path, world);
	x.sh = mmap(NULL, sizeof(*x.sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (x.sh == MAP_FAILED) {
		snprintf(err, sizeof(err), "cannot map the launcher's report area: %s",
			 strerror(errno));
		fprintf(stderr, "error: %s\n", err);
		lb_trainlog_end(&lg, "error", err, -1, LB_EXIT_ERROR);
		lb_trainlog_close(&lg);
		return LB_EXIT_ERROR;
	}
	memset(x.sh, 0, sizeof(*x.sh));
	x.lg = &lg;
	rc = lb_launch(world, rank_main, &x, &lo, &res);
	snprintf(path, sizeof(path), "%s", lg.path);
	lb_trainlog_close(&lg); /* its buffer is empty: rank 0 wrote through its own copy */
	snprintf(lg.path, sizeof(lg.path), "%s", path);
	if (rc < 0) {
		fprintf(stderr, "error: %s\n", res.message);
		if (lb_trainlog_append(&lg, path) == 0) {
			lb_trainlog_end(&lg, "error", res.message, -1, LB_EXIT_ERROR);
			lb_trainlog_close(&lg);
		}
		code = LB_EXIT_ERROR;
	} else if (rc == 0) {
		code = LB_EXIT_OK;
	} else {
		code = launcher_end(&x, &lg, &res);
	}
	munmap(x.sh, sizeof(*x.sh));
	return code;
}
