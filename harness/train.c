/*
 * layoutbench-train's run and its failure policy: the ranks (an srun task, or the ranks
 * this process forks with --nproc-per-node), the backend's device, the run log (rank 0
 * writes it; the launcher or rank 1 ends it when rank 0 cannot), the live progress line,
 * the failure classes and the exit codes (docs/run-log.md). See train.h, docs/trainer.md.
 */
#include "harness/train.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mman.h>

#include "common/model.h"
#include "common/util.h"
#include "harness/comm/comm_shm.h"

/* --- the run --- */

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
	static const char *cls[] = {"oom",	"nccl_error", "timeout", "killed",
				    "diverged", "io_error",   "error"};

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

	struct lb_comm *h = lb_comm_host_of(world);

	code = lb_comm_error(world, &r, m, sizeof(m));
	if (!code && h && lb_comm_is_shm(h))
		code = lb_comm_shm_error(h, &r, m, sizeof(m));
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
	if (own && lb_comm_host_of(world) && lb_comm_is_shm(lb_comm_host_of(world))) {
		char reason[256];

		snprintf(reason, sizeof(reason), "%s: %.190s", cls, msg);
		lb_comm_shm_abort(lb_comm_host_of(world), reason);
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
			return lb_comm_rc_status(rc);
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

/* The dense bf16 peak per GPU a run assumes: the peak table's for the device (NULL or the
 * CPU: none), the user's --peak-tflops over it; -1 unknown (MFU stays null, never a guess). */
static double run_peak_tflops(const struct lb_train_opts *o, const struct lb_device_info *dev)
{
	double peak = -1;

	if (dev && dev->sm_count > 0 && lb_gpu_peak_tflops(dev->name, &peak))
		peak = -1;
	return o->peak_tflops > 0 ? o->peak_tflops : peak;
}

/* The run log's header; dev: the device this process trains on (NULL: the CPU, as the
 * launcher of a CPU run writes it). */
static int open_log(struct lb_trainlog *lg, const struct lb_train_opts *o,
		    const struct lb_device_info *dev, char *err, size_t errlen)
{
	struct lb_runinfo info = {0};
	double peak;

	info.layout = &o->layout;
	info.gpu = "cpu";
	info.peak_tflops = -1; /* unknown for a CPU: MFU stays null, never a guess */
	info.backend = "cpu";
	info.world_size = lb_layout_world(&o->layout);
	info.pipeline_schedule = lb_sched_name(lb_schedule_effective(&o->layout, o->schedule));
	info.has_optimizer = 1;
	info.lr = o->lr;
	info.weight_decay = o->weight_decay;
	info.clip = o->clip;
	if (dev && dev->sm_count > 0) {
		info.gpu = dev->name;
		info.backend = "cuda";
		info.cuda_version = dev->runtime[0] ? dev->runtime : NULL;
		info.driver_version = dev->driver[0] ? dev->driver : NULL;
		info.device = dev;
	}
	/* the peak table (common/model.c): unknown products stay null; the user's figure for a
	 * GPU the table lacks */
	peak = run_peak_tflops(o, dev);
	if (peak > 0)
		info.peak_tflops = peak;
	return lb_trainlog_open(lg, o->run_dir, &info, err, errlen);
}

/* The device communicator's watchdog ends the rank from its own thread (the main thread is
 * blocked in a device wait): the same report as a failure seen by the main thread. */
static struct {
	struct run_ctx *x;
	struct lb_trainlog *lg;
	struct lb_comm *world;
	int rank;
} dog;

static void on_device_comm_fail(void *arg, int code, int culprit, const char *msg)
{
	char cls[32] = "nccl_error";
	const char *p = strstr(msg, "failed: ");
	int own = code != LB_COMM_EPEER, status;

	(void)arg;
	if (!own && p) { /* a peer's own failure: "rank 3 failed: oom: ..." */
		size_t n;

		p += 8;
		n = strcspn(p, ":");
		if (p[n] == ':' && is_class(p, n) && n < sizeof(cls))
			snprintf(cls, sizeof(cls), "%.*s", (int)n, p);
	}
	status = rank_fail(dog.x, dog.lg, dog.world, dog.rank, own, cls, culprit, msg);
	fflush(NULL);
	_exit(status);
}

/* The world over the backend's device communicator; host: this node's shared-memory
 * world, or NULL across nodes (owned by the result). */
static int device_world(struct run_ctx *x, const struct lb_ops *ops, const struct lb_rank_env *env,
			struct lb_comm *host, struct lb_comm **world, char *err, size_t errlen)
{
	const char *rc_env = getenv("SLURM_RESTART_COUNT");
	static char tag[200];
	struct lb_gpu_comm_opts co;

	memset(&co, 0, sizeof(co));
	co.kind = (enum lb_gpu_comm)x->o->gpu_comm;
	co.rank = env->rank;
	co.size = env->world_size;
	co.local_rank = env->local_rank;
	co.local_size = env->local_size > 0 ? env->local_size : env->world_size;
	co.timeout_s = x->o->comm_timeout;
	co.id_dir = x->o->run_dir;
	snprintf(tag, sizeof(tag), "%s-r%s", env->rdzv_name + 1, rc_env ? rc_env : "0");
	co.id_tag = tag;
	co.bootstrap = (enum lb_bootstrap)x->o->bootstrap;
	co.on_fail = on_device_comm_fail;
	dog.world = host;
	return ops->comm_world(host, &co, world, err, errlen);
}

/* One rank of the run (also the whole of a one-rank run). */
static int rank_main(const struct lb_rank_env *env, void *arg)
{
	struct run_ctx *x = arg;
	const struct lb_train_opts *o = x->o;
	const struct lb_layout *l = &o->layout;
	const struct lb_ops *ops = lb_ops_find(o->device_cuda ? "cuda" : "cpu");
	struct lb_device_info dev;
	struct lb_trainlog own_log, *lg = NULL;
	struct lb_comm *world = NULL;
	struct lb_groups g;
	struct lb_trainer *t = NULL;
	struct sigaction sa;
	uint64_t *peaks = NULL, *counted = NULL, *dev_peaks = NULL, mine[2];
	char err[1024], msg[1400], cls[32];
	double flops = lb_flops_per_step(l);
	double flops_no_embed = lb_flops_per_step_as(l, LB_FLOPS_NO_EMBED), peak_tflops = -1;
	char mfu_text[96] = "";
	int64_t tokens = (int64_t)l->global_batch * l->seq_len;
	int rank = env->rank, n = env->world_size, code = LB_EXIT_OK, rc, culprit;
	int have_groups = 0;

	memset(&g, 0, sizeof(g));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = lb_train_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL); /* a closed terminal: the run ends as killed, logged */
	if (x->lg) { /* launcher mode: the log is the launcher's; rank 0 writes the steps */
		if (rank == 0)
			lg = x->lg;
		else
			x->lg->f = NULL; /* this process's copy: never written */
	}
	if (ops->init && ops->init(env->local_rank, err, sizeof(err))) {
		/* no usable device: nothing to train on; the log says so */
		if (rank == 0 && !lg && open_log(&own_log, o, NULL, msg, sizeof(msg)) == 0)
			lg = &own_log;
		lb_trainlog_set_current(lg, rank);
		code = rank_fail(x, lg, NULL, rank, 1, "error", rank, err);
		goto out;
	}
	ops->device_info(&dev);
	peak_tflops = run_peak_tflops(o, &dev);
	if (!x->lg && rank == 0) {
		if (open_log(&own_log, o, &dev, err, sizeof(err))) {
			fprintf(stderr, "error: %s\n", err);
			if (own_log.f)
				lb_trainlog_close(&own_log);
			return own_log.werr ? LB_EXIT_IO : LB_EXIT_ERROR;
		}
		lg = &own_log;
		fprintf(stderr, "layoutbench-train: run log %s\n", lg->path);
	}
	lb_trainlog_set_current(lg, rank);
	/* one rank with --gpu-comm nccl: a one-rank NCCL world all the same (its groups and
	 * calls run through NCCL: the NCCL path tested on one GPU) */
	if (n > 1 || (o->device_cuda && o->gpu_comm == LB_GPU_COMM_NCCL)) {
		/* a node's ranks meet in shared memory; GPU ranks of several nodes through NCCL */
		if (n > 1 && (!o->device_cuda || env->nnodes <= 1)) {
			rc = lb_comm_shm_create(env->rdzv_name, rank, n, o->comm_timeout, &world,
						err, sizeof(err));
			if (rc) {
				world = NULL;
				code = rank_fail(x, lg, NULL, rank, 0, "timeout", -1, err);
				goto out;
			}
		}
		if (o->device_cuda && ops->comm_world) {
			struct lb_comm *host = world;

			dog.x = x;
			dog.lg = lg;
			dog.rank = rank;
			world = NULL;
			rc = device_world(x, ops, env, host, &world, err, sizeof(err));
			dog.world = world;
			if (rc) {
				code = rank_fail(x, lg, world, rank, 1, "nccl_error", rank, err);
				goto out;
			}
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
			comm_failure(world, lb_comm_rc_status(rc), &culprit, cls, sizeof(cls), msg,
				     sizeof(msg), "while building the tp/dp/pp groups");
			code = rank_fail(x, lg, world, rank, 0, cls, culprit, msg);
			goto out;
		}
		have_groups = 1;
		lb_comm_set_name(g.tp, "tensor-parallel");
		lb_comm_set_name(g.pp, "pipeline");
		lb_comm_set_name(g.dp, "data-parallel");
	}
	t = calloc(1, sizeof(*t));
	peaks = calloc((size_t)n * 4, sizeof(*peaks));
	counted = peaks ? peaks + 2 * n : NULL;
	dev_peaks = peaks ? peaks + 3 * n : NULL;
	if (!t || !peaks) {
		code = rank_fail(x, lg, world, rank, 1, "oom", rank, "out of host memory");
		goto out;
	}
	rc = lb_trainer_init_par(t, o, ops, world, have_groups ? &g : NULL);
	if (rc) {
		code = rank_fail(x, lg, world, rank, 1, lb_train_rc_class(rc), rank, t->err);
		free(t);
		t = NULL;
		goto out;
	}
	for (int step = 0; step < l->steps; step++) {
		double t0 = lb_now_s(), loss = 0, dt;
		uint64_t peak = 0;

		rc = lb_trainer_step(t, step, &loss);
		if (rc == 1 || lb_train_stop_signal())
			break;
		if (rc == LB_E_TIMEOUT || rc == LB_E_COMM) {
			comm_failure(world, rc, &culprit, cls, sizeof(cls), msg, sizeof(msg),
				     t->err);
			code = rank_fail(x, lg, world, rank, 0, cls, culprit, msg);
			goto out;
		}
		if (rc) {
			code =
			    rank_fail(x, lg, world, rank, 1, lb_train_rc_class(rc), rank, t->err);
			goto out;
		}
		dt = lb_now_s() - t0;
		ops->mem_stats(NULL, &peak);
		/* each rank's two readings, the allocator's and the device's (a uint64 as two
		 * 32-bit words each), gathered at once: rank r's at peaks[2r], peaks[2r + 1] */
		mine[0] = peak;
		mine[1] = ops->device_mem_peak ? ops->device_mem_peak() : 0;
		rc = 0;
		if (world)
			rc = world->ops->all_gather(world, mine, peaks, 4, LB_I32, NULL);
		else
			memcpy(peaks, mine, sizeof(mine));
		if (rc) {
			comm_failure(world, lb_comm_rc_status(rc), &culprit, cls, sizeof(cls), msg,
				     sizeof(msg), "peak memory gather");
			code = rank_fail(x, lg, world, rank, 0, cls, culprit, msg);
			goto out;
		}
		for (int r = 0; r < n; r++) {
			counted[r] = peaks[2 * r];
			dev_peaks[r] = peaks[2 * r + 1];
		}
		if (rank == 0) {
			lb_trainlog_step_ranks(lg, step, step < l->warmup, dt, tokens, loss, counted,
					       ops->device_mem_peak ? dev_peaks : NULL,
					       world ? n : -1, &t->phases);
			if (lg && lg->werr) { /* a full disk: stop rather than train unlogged */
				lb_trainlog_error(lg, msg, sizeof(msg));
				code = rank_fail(x, lg, world, rank, 1, "io_error", rank, msg);
				goto out;
			}
		}
		if (!isfinite(loss)) { /* every rank sees the same summed loss */
			snprintf(msg, sizeof(msg), "loss is %s at step %d (lower --lr or --clip)",
				 isnan(loss) ? "nan" : "inf", step);
			code = rank_fail(x, lg, world, rank, 0, "diverged", -1, msg);
			if (code == LB_EXIT_TIMEOUT)
				code = LB_EXIT_DIVERGED;
			goto out;
		}
		if (!o->quiet && rank == 0) {
			/* MFU as the paper counts it, and without the input embedding lookup
			 * (docs/flops.md), where the peak is known */
			if (peak_tflops > 0 && dt > 0)
				snprintf(mfu_text, sizeof(mfu_text),
					 " MFU %.1f%% (%.1f%% without the embedding lookup)",
					 100.0 * flops / (dt * n * peak_tflops * 1e12),
					 100.0 * flops_no_embed / (dt * n * peak_tflops * 1e12));
			fprintf(stderr,
				"step %d/%d loss %.4f time %.3f s %.0f tok/s %.4f TFLOP/s%s%s\n",
				step + 1, l->steps, loss, dt, tokens / dt, flops / dt / 1e12,
				mfu_text, step < l->warmup ? " (warmup)" : "");
		}
	}
	if (lb_train_stop_signal()) {
		int sig = lb_train_stop_signal();

		snprintf(msg, sizeof(msg), "stopped by signal %d (%s)", sig,
			 sig == SIGTERM	 ? "SIGTERM"
			 : sig == SIGINT ? "SIGINT"
			 : sig == SIGHUP ? "SIGHUP"
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
			code = rank_fail(x, lg, world, rank, 1, lb_train_rc_class(rc), rank, err);
		}
		goto out;
	}
	if (world && (rc = world->ops->barrier(world))) { /* nobody leaves a collective alone */
		comm_failure(world, lb_comm_rc_status(rc), &culprit, cls, sizeof(cls), msg,
			     sizeof(msg), "final barrier");
		code = rank_fail(x, lg, world, rank, 0, cls, culprit, msg);
		goto out;
	}
	if (o->cuda_graphs && ops->graph_begin) { /* what the graphs did, per rank */
		long gr[LB_GRAPH_NRUNS];

		lb_trainer_graph_runs(t, gr);
		fprintf(stderr,
			"layoutbench-train: rank %d: cuda graphs: %ld segments captured, %ld "
			"replayed, %ld run without a graph, %ld captures given up\n",
			rank, gr[LB_GRAPH_CAPTURED], gr[LB_GRAPH_REPLAYED], gr[LB_GRAPH_EAGER],
			gr[LB_GRAPH_RERUN]);
	}
	if (rank == 0) {
		snprintf(msg, sizeof(msg), "%d steps", l->steps);
		lb_trainlog_end(lg, NULL, msg, -1, LB_EXIT_OK);
		if (lg && lg->werr) { /* the end record did not fit: not an ok run */
			lb_trainlog_error(lg, msg, sizeof(msg));
			code = rank_fail(x, lg, world, rank, 1, "io_error", rank, msg);
			goto out;
		}
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
	s = lb_rank_env_from_slurm(&env, !o->device_cuda, err, sizeof(err));
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
	if (open_log(&lg, o, NULL, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		if (lg.f)
			lb_trainlog_close(&lg);
		return lg.werr ? LB_EXIT_IO : LB_EXIT_ERROR;
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
