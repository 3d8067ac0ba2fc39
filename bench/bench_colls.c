/*
 * The communicator benchmark, printed as nccl-tests prints it: for all_reduce,
 * reduce_scatter, all_gather and sendrecv (a ring: each rank sends to the next and
 * receives from the previous), one line per message size with the size in bytes, the
 * element count, the type, the time per call in microseconds (the slowest rank's mean),
 * algbw = size / time and busbw = algbw * (2 (n - 1) / n for all_reduce, (n - 1) / n for
 * reduce_scatter and all_gather, 1 for sendrecv), in GB/s. For reduce_scatter and
 * all_gather the size is the whole (gathered) buffer, as nccl-tests counts it. Results
 * are checked once per size (exact small integers): a wrong one prints FAIL and the
 * benchmark exits 1.
 *
 *   bench_colls [--comm shm|staged|nccl] [--nproc N] [--min-bytes B] [--max-bytes B]
 *               [--iters N] [--warmup N] [--op all|all_reduce|reduce_scatter|all_gather|sendrecv]
 *
 * shm: host buffers, the CPU backend's communicator. staged and nccl: device buffers of
 * the CUDA backend (comm_cuda.h), ranks on GPU local_rank % GPUs; NCCL needs one GPU per
 * rank. Defaults: shm, 2 ranks, 8 B to 16 MiB, 10 iterations after 3 warm-up calls.
 * The first line after the tables is a RESULT line (bench/run.sh) with the largest
 * all_reduce's busbw.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "common/cmdline.h"
#include "common/util.h"
#include "harness/comm/comm_shm.h"
#include "harness/launch.h"
#include "harness/ops.h"
#include "harness/train.h"

#define MAX_SIZES 40
/* The collectives, the one list: X(ID, name). */
#define OPS(X)		  X(AR, all_reduce) X(RS, reduce_scatter) X(AG, all_gather) X(SR, sendrecv)
#define OP_ID(id, name)	  OP_##id,
#define OP_NAME(id, name) #name,
#define OP_BAR(id, name)  "|" #name
enum { OPS(OP_ID) NOPS };
static const char *const op_names[NOPS] = {OPS(OP_NAME)};

struct shared {
	double us[NOPS][MAX_SIZES]; /* slowest rank's mean, microseconds */
	int wrong[NOPS][MAX_SIZES];
	int nsizes;
	size_t bytes[MAX_SIZES];
	char err[512];
};

struct cfg {
	const char *comm;
	int nproc, iters, warmup, op; /* op: -1 all */
	size_t min_b, max_b;
	struct shared *sh;
};

/* One call of op on count elements per rank (all_reduce, sendrecv: count; reduce_scatter:
 * in count * n -> out count; all_gather: in count -> out count * n). */
static int call(struct lb_comm *c, int op, void *in, void *out, size_t count, void *s)
{
	int n = c->size, r = c->rank, rc;

	switch (op) {
	case OP_AR:
		return c->ops->all_reduce(c, in, out, count, LB_F32, LB_SUM, s);
	case OP_RS:
		return c->ops->reduce_scatter(c, in, out, count, LB_F32, LB_SUM, s);
	case OP_AG:
		return c->ops->all_gather(c, in, out, count, LB_F32, s);
	default:
		if ((rc = c->ops->group_start(c)))
			return rc;
		if (!(rc = c->ops->send(c, in, count, LB_F32, (r + 1) % n, s)))
			rc = c->ops->recv(c, out, count, LB_F32, (r + n - 1) % n, s);
		return rc ? rc : c->ops->group_end(c);
	}
}

/* The expected element i of op's output on rank r of n (inputs: rank q holds q + 1 +
 * (global index % 5)). */
static double expect(int op, size_t i, size_t count, int r, int n)
{
	double s = 0;

	switch (op) {
	case OP_AR:
		for (int q = 0; q < n; q++)
			s += q + 1 + (double)(i % 5);
		return s;
	case OP_RS:
		for (int q = 0; q < n; q++)
			s += q + 1 + (double)((r * count + i) % 5);
		return s;
	case OP_AG:
		return (double)(i / count) + 1 + (double)((i % count) % 5);
	default:
		return (double)((r + n - 1) % n) + 1 + (double)(i % 5);
	}
}

static int rank_main(const struct lb_rank_env *env, void *arg)
{
	struct cfg *cf = arg;
	struct shared *sh = cf->sh;
	const struct lb_ops *ops = NULL;
	struct lb_comm *c = NULL;
	int dev = strcmp(cf->comm, "shm") != 0, r = env->rank, n = env->world_size, rc = 0;
	size_t maxc = cf->max_b / sizeof(float);
	void *in = NULL, *out = NULL, *s = NULL;
	double *hbuf = NULL;
	char err[512];

	if (dev) {
		struct lb_gpu_comm_opts o;
		struct lb_comm *host = NULL;

		ops = lb_ops_find("cuda");
		if (!ops) {
			snprintf(err, sizeof(err), "--comm %s: built without the CUDA backend",
				 cf->comm);
			goto fail_msg;
		}
		if (ops->init(env->local_rank, err, sizeof(err)))
			goto fail_msg;
		memset(&o, 0, sizeof(o));
		o.kind = !strcmp(cf->comm, "nccl") ? LB_GPU_COMM_NCCL : LB_GPU_COMM_STAGED;
		o.rank = r;
		o.size = n;
		o.local_rank = env->local_rank;
		o.local_size = n;
		o.timeout_s = 120;
		if (lb_comm_shm_create(env->rdzv_name, r, n, 120, &host, err, sizeof(err)) ||
		    ops->comm_world(host, &o, &c, err, sizeof(err)))
			goto fail_msg;
		s = ops->stream();
		in = ops->alloc(maxc * n, LB_K_F32);
		out = ops->alloc(maxc * n, LB_K_F32);
		hbuf = malloc(maxc * n * sizeof(double));
		if (!in || !out || !hbuf) {
			snprintf(err, sizeof(err), "out of memory for %zu-byte buffers",
				 cf->max_b * n);
			goto fail_msg;
		}
	} else {
		if (lb_comm_shm_create(env->rdzv_name, r, n, 120, &c, err, sizeof(err)))
			goto fail_msg;
		in = malloc(maxc * n * sizeof(float));
		out = malloc(maxc * n * sizeof(float));
		hbuf = malloc(maxc * n * sizeof(double));
		if (!in || !out || !hbuf) {
			snprintf(err, sizeof(err), "out of memory for %zu-byte buffers",
				 cf->max_b * n);
			goto fail_msg;
		}
	}
	for (int op = 0; op < NOPS; op++) {
		if ((cf->op >= 0 && cf->op != op) ||
		    (op == OP_SR && n == 1 && strcmp(cf->comm, "nccl")))
			continue; /* only NCCL sends to itself */
		for (int k = 0; k < sh->nsizes; k++) {
			/* count per rank: the size is the whole buffer for RS/AG (nccl-tests) */
			size_t count =
			    sh->bytes[k] / sizeof(float) / ((op == OP_RS || op == OP_AG) ? n : 1);
			size_t nin = op == OP_RS ? count * n : count,
			       nout = op == OP_AG ? count * n : count;
			double t0;
			float dt, worst;
			int wrong = 0;

			if (!count)
				continue;
			for (size_t i = 0; i < nin; i++)
				hbuf[i] = r + 1 + (double)(i % 5);
			if (dev)
				ops->write(in, hbuf, nin, LB_K_F32);
			else
				for (size_t i = 0; i < nin; i++)
					((float *)in)[i] = (float)hbuf[i];
			if ((rc = call(c, op, in, out, count, s)))
				goto fail_comm;
			if (dev)
				ops->read(hbuf, out, nout, LB_K_F32);
			else
				for (size_t i = 0; i < nout; i++)
					hbuf[i] = ((float *)out)[i];
			for (size_t i = 0; i < nout; i++)
				if (hbuf[i] != expect(op, i, count, r, n))
					wrong++;
			for (int it = 0; it < cf->warmup; it++)
				if ((rc = call(c, op, in, out, count, s)))
					goto fail_comm;
			if (dev)
				ops->sync();
			if ((rc = c->ops->barrier(c)))
				goto fail_comm;
			t0 = lb_now_s();
			for (int it = 0; it < cf->iters; it++)
				if ((rc = call(c, op, in, out, count, s)))
					goto fail_comm;
			if (dev)
				ops->sync();
			dt = (float)((lb_now_s() - t0) / cf->iters);
			worst = dt;
			if ((rc = c->ops->all_reduce(c, &dt, &worst, 1, LB_F32, LB_MAX, NULL)))
				goto fail_comm;
			if (r == 0)
				sh->us[op][k] = worst * 1e6;
			__atomic_fetch_add(&sh->wrong[op][k], wrong, __ATOMIC_RELAXED);
		}
	}
	c->ops->destroy(c);
	free(hbuf);
	if (!dev) {
		free(in);
		free(out);
	}
	return 0;
fail_comm:
	snprintf(err, sizeof(err), "rank %d: %s failed: %s", r, "collective", lb_comm_strerror(rc));
fail_msg:
	if (r == 0 || !sh->err[0])
		snprintf(sh->err, sizeof(sh->err), "%s", err);
	return 1;
}

enum { O_COMM, O_NPROC, O_MIN_BYTES, O_MAX_BYTES, O_ITERS, O_WARMUP, O_OP };

static const struct lb_option opts[] = {
    LB_CHOICE(O_COMM, "comm", NULL, "shm|staged|nccl", "shm", 0,
	      "the communicator: shared memory between processes, staged through host memory, "
	      "or NCCL"),
    LB_WHOLE(O_NPROC, "nproc", "N", "2", 1, LB_SHM_MAX_RANKS, "ranks"),
    LB_BYTES(O_MIN_BYTES, "min-bytes", "B", "8", 4, 1099511627776.0,
	     "the smallest message (K, M, G suffixes); the sizes double from it"),
    LB_BYTES(O_MAX_BYTES, "max-bytes", "B", "16M", 4, 1099511627776.0, "the largest message"),
    LB_WHOLE(O_ITERS, "iters", "N", "10", 1, 100000, "timed iterations of each size"),
    LB_WHOLE(O_WARMUP, "warmup", "N", "3", 0, 100000, "untimed iterations before them"),
    LB_CHOICE(O_OP, "op", NULL, "all" OPS(OP_BAR), "all", 0, "the collective, or every one"),
    LB_OPT_END,
};

static int run_bench(const struct lb_args *a)
{
	struct cfg cf = {0};
	struct lb_launch_opts lo = LB_LAUNCH_OPTS_INIT;
	struct lb_launch_result res;
	int bad = 0, rc;

	cf.comm = a->str[O_COMM];
	cf.nproc = (int)a->num[O_NPROC];
	cf.iters = (int)a->num[O_ITERS];
	cf.warmup = (int)a->num[O_WARMUP];
	cf.min_b = (size_t)a->num[O_MIN_BYTES];
	cf.max_b = (size_t)a->num[O_MAX_BYTES];
	cf.op = (int)a->num[O_OP] - 1; /* the choices: all, then the ops */
	if (cf.min_b > cf.max_b) {
		fprintf(stderr, "error: --min-bytes is above --max-bytes\n");
		return 2;
	}
	cf.sh =
	    mmap(NULL, sizeof(*cf.sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (cf.sh == MAP_FAILED)
		return 1;
	memset(cf.sh, 0, sizeof(*cf.sh));
	for (size_t b = cf.min_b; b <= cf.max_b && cf.sh->nsizes < MAX_SIZES; b *= 2)
		cf.sh->bytes[cf.sh->nsizes++] = b;
	rc = lb_launch(cf.nproc, rank_main, &cf, &lo, &res);
	if (rc != 0) {
		fprintf(stderr, "error: %s%s%s\n", cf.sh->err[0] ? cf.sh->err : res.message,
			cf.sh->err[0] ? "; " : "", cf.sh->err[0] ? res.message : "");
		if (strstr(cf.sh->err, "no CUDA device") ||
		    strstr(cf.sh->err, "without the CUDA")) {
			printf("skip: %s\n", cf.sh->err);
			return 77;
		}
		return 1;
	}
	printf("# comm %s, %d rank(s), float, %d iterations after %d warm-up\n", cf.comm, cf.nproc,
	       cf.iters, cf.warmup);
	for (int op = 0; op < NOPS; op++) {
		double fac = op == OP_AR   ? 2.0 * (cf.nproc - 1) / cf.nproc
			     : op == OP_SR ? 1.0
					   : (double)(cf.nproc - 1) / cf.nproc;

		if (cf.op >= 0 && cf.op != op)
			continue;
		printf("#\n# %s\n# %12s %12s %6s %12s %10s %10s %6s\n", op_names[op], "size(B)",
		       "count", "type", "time(us)", "algbw", "busbw", "check");
		for (int k = 0; k < cf.sh->nsizes; k++) {
			double us = cf.sh->us[op][k], alg = cf.sh->bytes[k] / (us * 1e-6) / 1e9;

			if (us <= 0)
				continue;
			printf("  %12zu %12zu %6s %12.2f %10.2f %10.2f %6s\n", cf.sh->bytes[k],
			       cf.sh->bytes[k] / sizeof(float), "float", us, alg, alg * fac,
			       cf.sh->wrong[op][k] ? "FAIL" : "ok");
			bad |= cf.sh->wrong[op][k] != 0;
		}
	}
	if (cf.op < 0 || cf.op == OP_AR) {
		int k = cf.sh->nsizes - 1;
		double us = cf.sh->us[OP_AR][k], alg = cf.sh->bytes[k] / (us * 1e-6) / 1e9;

		printf("RESULT\t%s_allreduce_%dranks_%zuB_busbw\t%.2f\tGB/s\t-\t%s\n", cf.comm,
		       cf.nproc, cf.sh->bytes[k], alg * 2.0 * (cf.nproc - 1) / cf.nproc,
		       bad ? "FAIL" : "INFO");
	}
	return bad ? 1 : 0;
}

LB_PROGRAM_MAIN("bench_colls", opts, run_bench,
		"each collective's time, algorithm and bus bandwidth over message sizes, its "
		"data checked (as nccl-tests prints them)")
