/*
 * layoutbench-train's core and shell: flags, checks, the trainer object (one rank's
 * model, optimizer and data), optimizer steps as lists of micro-batch operations, and the
 * run with its run log, progress line and failure classes. See train.h, docs/trainer.md.
 */
#include "harness/train.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/model.h"
#include "common/util.h"

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
    {"--device", 1},	   {"--run-dir", 1},   {"--data", 1},
    {"--data-dtype", 1},   {"--lr", 1},	       {"--weight-decay", 1},
    {"--clip", 1},	   {"--mem-limit", 1}, {"--nproc-per-node", 1},
    {"--comm-timeout", 1}, {"--quiet", 0},     {"--help", 0},
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
	}
	return 0;
bad:
	snprintf(err, errlen, "%s: invalid value '%s'", name, v);
	return -1;
bad_enum:
	snprintf(err, errlen, "%s: unknown value '%s' (expected %s)", name, v,
		 !strcmp(name, "--device") ? "cpu or cuda" : "u16 or u32");
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
	if (l->tp > 1) {
		snprintf(err, errlen,
			 "tp=%d: tensor parallelism is not yet supported by this "
			 "trainer",
			 l->tp);
		return -1;
	}
	if (l->pp > 1) {
		snprintf(err, errlen,
			 "pp=%d: pipeline parallelism is not yet supported by this "
			 "trainer",
			 l->pp);
		return -1;
	}
	if (l->dp > 1) {
		snprintf(err, errlen,
			 "dp=%d: data parallelism is not yet supported by this "
			 "trainer",
			 l->dp);
		return -1;
	}
	if (o->nproc_per_node != lb_layout_world(l)) {
		snprintf(err, errlen,
			 "--nproc-per-node %d: the layout has %d rank(s); only %d is "
			 "supported by this trainer",
			 o->nproc_per_node, lb_layout_world(l), lb_layout_world(l));
		return -1;
	}
	return 0;
}

/* --- the trainer object --- */

int lb_trainer_init(struct lb_trainer *t, const struct lb_train_opts *o, const struct lb_ops *ops,
		    struct lb_comm *tp)
{
	const struct lb_layout *l = &o->layout;
	int rc;

	memset(t, 0, sizeof(*t));
	t->data.fd = -1;
	t->opts = *o;
	t->ops = ops;
	t->tp = tp;
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
	rc = lb_llama_init(&t->model, ops, tp, l, 0, 1);
	if (rc == 0)
		rc = lb_optim_init(&t->optim, ops, t->model.params, 0, t->model.n_params, o->lr,
				   o->weight_decay);
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

int lb_trainer_run_steps(struct lb_trainer *t, int step, const struct lb_step *list, int n,
			 double *loss_sum)
{
	double sum = 0;
	int rc;

	for (int i = 0; i < n; i++) {
		const struct lb_step *op = &list[i];
		int slot = op->micro % t->model.n_slots;
		double t0 = now_s(), ls = 0;

		if (stop_signal)
			return 1;
		if (op->kind == LB_STEP_FORWARD) {
			if (lb_data_batch(&t->data, &t->opts.layout, step, t->dp_rank, op->micro,
					  t->tokens, t->targets, t->err, sizeof(t->err)))
				return LB_E_DATA;
			rc = lb_llama_forward(&t->model, slot, t->tokens, t->targets, NULL,
					      t->loss_scale, &ls);
			t->phases.forward_s += now_s() - t0;
			sum += ls;
		} else if (op->kind == LB_STEP_BACKWARD) {
			rc = lb_llama_backward(&t->model, slot, NULL);
			t->phases.backward_s += now_s() - t0;
		} else {
			snprintf(t->err, sizeof(t->err),
				 "pipeline step '%s' is not supported by this trainer yet",
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

int lb_trainer_step(struct lb_trainer *t, int step, double *loss)
{
	const struct lb_ops *ops = t->ops;
	struct lb_schedule sched;
	double sum = 0, t0, scale;
	int rc;

	memset(&t->phases, 0, sizeof(t->phases));
	t->phases.comm_exposed_s = t->phases.bubble_s = -1; /* not measured on one rank */
	if (lb_schedule_build(LB_SCHED_1F1B, 1, 0, t->accum, &sched, t->err, sizeof(t->err)))
		return LB_E_INVAL;
	lb_llama_zero_grads(&t->model);
	rc = lb_trainer_run_steps(t, step, sched.steps, sched.n_steps, &sum);
	lb_schedule_release(&sched);
	if (rc)
		return rc;
	if (t->dp && t->dp->size > 1) { /* data parallelism: sum gradients and loss */
		float fsum = (float)sum;

		rc = t->dp->ops->all_reduce(t->dp, t->model.grads, t->model.grads,
					    t->model.n_params, ops->dtype, LB_SUM, NULL);
		if (!rc)
			rc = t->dp->ops->all_reduce(t->dp, &fsum, &fsum, 1, LB_F32, LB_SUM, NULL);
		if (rc) {
			snprintf(t->err, sizeof(t->err), "data-parallel gradient all-reduce: %s",
				 lb_comm_strerror(rc));
			return (rc == LB_COMM_ETIMEOUT || rc == LB_COMM_EPEER) ? LB_E_TIMEOUT
									       : LB_E_COMM;
		}
		sum = fsum;
	}
	*loss = sum * t->loss_scale;

	t0 = now_s();
	/* with tp or pp > 1 the squares of each rank's shard are to be summed over them
	 * (replicated tensors counted once) before the square root */
	t->grad_norm = sqrt(ops->sum_sq(t->model.grads, t->model.n_params));
	scale = lb_optim_clip_scale(t->grad_norm, t->opts.clip);
	lb_optim_step(&t->optim, t->model.params, t->model.grads, t->model.tensors,
		      t->model.n_tensors, scale);
	t->phases.optimizer_s = now_s() - t0;
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

/* End the run with a failure class: message on stderr, end record, exit code. */
static int fail_run(struct lb_trainlog *lg, const char *cls, const char *msg)
{
	int code = lb_class_exit_code(cls);
	char host[128] = "unknown";

	gethostname(host, sizeof(host) - 1);
	fprintf(stderr, "error: host %s rank 0: %s (class %s)\n", host, msg, cls);
	lb_trainlog_end(lg, cls, msg, 0, code);
	return code;
}

int lb_train_main(const struct lb_train_opts *o)
{
	const struct lb_layout *l = &o->layout;
	const struct lb_ops *ops = lb_ops_cpu();
	struct lb_runinfo info = {0};
	struct lb_trainlog lg;
	struct lb_trainer *t;
	struct lb_comm *tp;
	struct sigaction sa;
	char err[1024], msg[1200];
	double flops = lb_flops_per_step(l);
	int64_t tokens = (int64_t)l->global_batch * l->seq_len;
	int rc, code = LB_EXIT_OK;

	if (lb_train_check(o, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		return LB_EXIT_USAGE;
	}
	info.layout = l;
	info.gpu = "cpu";
	info.peak_tflops = -1; /* unknown for a CPU: MFU stays null, never a guess */
	info.backend = "cpu";
	info.world_size = lb_layout_world(l);
	if (lb_trainlog_open(&lg, o->run_dir, &info, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		return LB_EXIT_ERROR;
	}
	lb_trainlog_set_current(&lg, 0);
	fprintf(stderr, "layoutbench-train: run log %s\n", lg.path);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	t = calloc(1, sizeof(*t));
	tp = lb_comm_self();
	if (!t || !tp) {
		code = fail_run(&lg, "oom", "out of host memory");
		goto out_close;
	}
	rc = lb_trainer_init(t, o, ops, tp);
	if (rc) {
		code = fail_run(&lg, rc_class(rc), t->err);
		goto out_free;
	}
	for (int step = 0; step < l->steps; step++) {
		double t0 = now_s(), loss = 0, dt;
		uint64_t peak = 0;

		rc = lb_trainer_step(t, step, &loss);
		if (rc == 1 || stop_signal)
			break;
		if (rc) {
			code = fail_run(&lg, rc_class(rc), t->err);
			goto out_trainer;
		}
		dt = now_s() - t0;
		ops->mem_stats(NULL, &peak);
		lb_trainlog_step(&lg, step, step < l->warmup, dt, tokens, loss, peak, &t->phases);
		if (!isfinite(loss)) { /* logged with loss null, then the end record */
			snprintf(msg, sizeof(msg), "loss is %s at step %d (lower --lr or --clip)",
				 isnan(loss) ? "nan" : "inf", step);
			code = fail_run(&lg, "diverged", msg);
			goto out_trainer;
		}
		if (!o->quiet) {
			char mfu[64] = "";

			/* MFU = model FLOPs / (time * GPUs * peak), only with a known peak */
			if (info.peak_tflops > 0)
				snprintf(mfu, sizeof(mfu), " MFU %.1f%%",
					 100.0 * flops / dt /
					     (info.world_size * info.peak_tflops * 1e12));
			fprintf(stderr,
				"step %d/%d loss %.4f time %.3f s %.0f tok/s %.4f TFLOP/s%s%s\n",
				step + 1, l->steps, loss, dt, tokens / dt, flops / dt / 1e12, mfu,
				step < l->warmup ? " (warmup)" : "");
		}
	}
	if (stop_signal) {
		int sig = stop_signal;

		snprintf(msg, sizeof(msg), "stopped by signal %d (%s)", sig,
			 sig == SIGTERM	 ? "SIGTERM"
			 : sig == SIGINT ? "SIGINT"
					 : "signal");
		fprintf(stderr, "error: %s (class killed)\n", msg);
		code = 128 + sig;
		lb_trainlog_end(&lg, "killed", msg, 0, code);
		goto out_trainer;
	}
	snprintf(msg, sizeof(msg), "%d steps", l->steps);
	lb_trainlog_end(&lg, NULL, msg, -1, LB_EXIT_OK);
out_trainer:
	lb_trainer_free(t);
out_free:
	free(t);
	if (tp)
		tp->ops->destroy(tp);
out_close:
	lb_trainlog_set_current(NULL, 0);
	lb_trainlog_close(&lg);
	return code;
}
