/*
 * The GPU communicator (harness/comm/comm_cuda.h), made through the cuda table's comm_world
 * and asked through the comm table's optional members, on device buffers, with ranks
 * forked by the launcher (lb_launch) before any of them touches CUDA:
 *  1. staged, 2 and 4 ranks on one GPU (what lets every parallel layout run there): every
 *     collective of the table on bf16 and f32 device buffers, grouped send/recv around a
 *     ring, a host-value call, and a split into two groups, each checked exactly (small
 *     integers, exact in bf16, so any reduction order gives the same bits);
 *  2. NCCL with one rank: the same calls through real NCCL kernels (results are the
 *     inputs), send/recv to itself, and the device time of the calls (> 0), all of an
 *     all-reduce's under the tag it was enqueued with (a staged world: -1); again
 *     without a host communicator, as across nodes (the NCCL id through a file, host
 *     values through NCCL and a device bounce buffer);
 *  3. NCCL's watchdog: a stream that makes no progress (a spinning kernel ahead of an
 *     all-reduce) ends the rank through the failure callback within the timeout, with the
 *     call named, after ncclCommAbort; exit status 4;
 *  4. with two or more GPUs: NCCL with two ranks, one per GPU, as in 1.
 * Exit 77 (the reason on the last line) in a build without CUDA or without a usable GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/comm/comm_cuda.h"
#include "harness/comm/comm_shm.h"
#include "harness/launch.h"
#include "harness/ops.h"
#ifdef LB_WITH_CUDA
#include "bench/cuda_bench.h"
#endif

#ifndef LB_WITH_CUDA
int main(void)
{
	printf("skip: built without the CUDA backend (nvcc not found at build time)\n");
	return 77;
}
#else

struct cfg {
	enum lb_gpu_comm kind;
	double timeout;
	int stall;   /* test 3 */
	int no_host; /* the multi-node path: no shared-memory world, the NCCL id through a
			file, host values through NCCL */
};

static int bad(int rank, const char *what, size_t i, double got, double want)
{
	fprintf(stderr, "rank %d: %s: element %zu is %g, want %g\n", rank, what, i, got, want);
	return 1;
}

/* n elements of kind k on the device with value f(rank, i). */
static void *dev_fill(const struct lb_ops *ops, size_t n, enum lb_kind k, int rank, int mul)
{
	double *h = malloc(n * sizeof(*h));
	void *d = ops->alloc(n, k);

	for (size_t i = 0; h && d && i < n; i++)
		h[i] = (double)((rank + 1) * mul + (int)(i % 7));
	if (h && d)
		ops->write(d, h, n, k);
	free(h);
	return d;
}

static int check(const struct lb_ops *ops, const void *d, size_t n, enum lb_kind k, int rank,
		 const char *what, double (*want)(size_t i, void *a), void *a)
{
	double *h = malloc(n * sizeof(*h));
	int rc = 0;

	if (!h)
		return 1;
	ops->read(h, d, n, k);
	for (size_t i = 0; i < n && !rc; i++)
		if (h[i] != want(i, a))
			rc = bad(rank, what, i, h[i], want(i, a));
	free(h);
	return rc;
}

struct want_ctx {
	int size, rank, mul, chunk_off;
};
/* sum over ranks r of (r + 1) * mul + i % 7 */
static double want_sum(size_t i, void *p)
{
	struct want_ctx *w = p;
	double s = 0;

	for (int r = 0; r < w->size; r++)
		s += (r + 1) * w->mul + (int)((i + w->chunk_off) % 7);
	return s;
}
/* all-gather: chunk r of count elements is rank r's */
static double want_gather(size_t i, void *p)
{
	struct want_ctx *w = p;
	int r = (int)(i / (size_t)w->chunk_off);

	return (r + 1) * w->mul + (int)((i % (size_t)w->chunk_off) % 7);
}
static double want_rank(size_t i, void *p) /* the given rank's fill */
{
	struct want_ctx *w = p;

	return (w->rank + 1) * w->mul + (int)(i % 7);
}

static void on_fail(void *arg, int code, int culprit, const char *msg)
{
	(void)arg;
	printf("watchdog: code %d culprit %d: %s\n", code, culprit, msg);
	fflush(stdout);
	_exit(4);
}

static int rank_main(const struct lb_rank_env *env, void *arg)
{
	const struct cfg *cf = arg;
	const struct lb_ops *ops = lb_ops_cuda();
	struct lb_comm *host = NULL, *w = NULL, *sub = NULL;
	struct lb_gpu_comm_opts o;
	char err[1024];
	int rank = env->rank, n = env->world_size, fails = 0, rc;
	double dev_s;
	const size_t cnt = 1000;
	void *s;

	if (ops->init(env->local_rank, err, sizeof(err))) {
		fprintf(stderr, "rank %d: %s\n", rank, err);
		return 1;
	}
	s = ops->stream();
	if (!cf->no_host &&
	    lb_comm_shm_create(env->rdzv_name, rank, n, cf->timeout, &host, err, sizeof(err))) {
		fprintf(stderr, "rank %d: %s\n", rank, err);
		return 1;
	}
	memset(&o, 0, sizeof(o));
	o.kind = cf->kind;
	o.rank = rank;
	o.size = n;
	o.local_rank = env->local_rank;
	o.local_size = n;
	o.timeout_s = cf->timeout;
	o.on_fail = on_fail;
	o.id_dir = "/tmp";
	o.id_tag = env->rdzv_name + 1;
	/* through the table, as the trainer asks for it */
	if (ops->comm_world != lb_comm_cuda_world) {
		fprintf(stderr, "rank %d: the cuda table's comm_world is not lb_comm_cuda_world\n",
			rank);
		return 1;
	}
	if ((rc = ops->comm_world(host, &o, &w, err, sizeof(err)))) {
		fprintf(stderr, "rank %d: world: %s\n", rank, err);
		return 1;
	}
	if (cf->stall) { /* the stream stalls; the all-reduce behind it cannot complete */
		void *d = dev_fill(ops, cnt, LB_K_F32, rank, 1);

		lb_cuda_stall(30.0);
		w->ops->all_reduce(w, d, d, cnt, LB_F32, LB_SUM, s);
		ops->sync(); /* the watchdog ends the process from its thread */
		fprintf(stderr, "rank %d: the stalled stream finished without the watchdog\n",
			rank);
		return 1;
	}
	for (int kk = 0; kk < 2; kk++) {
		enum lb_kind k = kk ? LB_K_ACT : LB_K_F32;
		enum lb_dtype t = ops->dtype[k];
		struct want_ctx wc = {n, rank, 3, 0};
		void *a = dev_fill(ops, cnt, k, rank, 3), *b = ops->alloc(cnt * n, k);
		const char *tn = kk ? "bf16" : "f32";
		char what[64];

		snprintf(what, sizeof(what), "all_reduce %s", tn);
		rc = w->ops->all_reduce(w, a, a, cnt, t, LB_SUM, s);
		fails += rc ? bad(rank, what, 0, rc, 0)
			    : check(ops, a, cnt, k, rank, what, want_sum, &wc);
		/* reduce-scatter: each rank's input is (size * cnt); its chunk r summed */
		ops->free_(a);
		a = dev_fill(ops, cnt * n, k, rank, 3);
		snprintf(what, sizeof(what), "reduce_scatter %s", tn);
		rc = w->ops->reduce_scatter(w, a, b, cnt, t, LB_SUM, s);
		wc.chunk_off = (int)(rank * cnt);
		fails += rc ? bad(rank, what, 0, rc, 0)
			    : check(ops, b, cnt, k, rank, what, want_sum, &wc);
		ops->free_(a);
		a = dev_fill(ops, cnt, k, rank, 3);
		snprintf(what, sizeof(what), "all_gather %s", tn);
		rc = w->ops->all_gather(w, a, b, cnt, t, s);
		wc.chunk_off = (int)cnt;
		fails += rc ? bad(rank, what, 0, rc, 0)
			    : check(ops, b, cnt * n, k, rank, what, want_gather, &wc);
		snprintf(what, sizeof(what), "broadcast %s", tn);
		rc = w->ops->broadcast(w, a, cnt, t, n - 1, s);
		wc.rank = n - 1;
		fails += rc ? bad(rank, what, 0, rc, 0)
			    : check(ops, a, cnt, k, rank, what, want_rank, &wc);
		/* a ring: send to the next rank, receive from the previous, in one group */
		ops->free_(a);
		a = dev_fill(ops, cnt, k, rank, 3);
		snprintf(what, sizeof(what), "send/recv %s", tn);
		rc = w->ops->group_start(w);
		if (!rc)
			rc = w->ops->send(w, a, cnt, t, (rank + 1) % n, s);
		if (!rc)
			rc = w->ops->recv(w, b, cnt, t, (rank + n - 1) % n, s);
		if (!rc)
			rc = w->ops->group_end(w);
		wc.rank = (rank + n - 1) % n;
		fails += rc ? bad(rank, what, 0, rc, 0)
			    : check(ops, b, cnt, k, rank, what, want_rank, &wc);
		ops->free_(a);
		ops->free_(b);
	}
	{ /* a host value */
		float x = rank + 1.0f;

		rc = w->ops->all_reduce(w, &x, &x, 1, LB_F32, LB_SUM, NULL);
		if (rc || x != n * (n + 1) / 2.0)
			fails += bad(rank, "host all_reduce", 0, x, n * (n + 1) / 2.0);
	}
	if (n >= 2) { /* a split into the even and the odd ranks */
		rc = w->ops->split(w, rank % 2, rank, &sub);
		if (rc) {
			fails += bad(rank, "split", 0, rc, 0);
		} else {
			void *a = dev_fill(ops, cnt, LB_K_F32, rank / 2, 5);
			struct want_ctx wc = {sub->size, 0, 5, 0};

			rc = sub->ops->all_reduce(sub, a, a, cnt, LB_F32, LB_SUM, s);
			fails += rc ? bad(rank, "split all_reduce", 0, rc, 0)
				    : check(ops, a, cnt, LB_K_F32, rank, "split all_reduce",
					    want_sum, &wc);
			ops->free_(a);
			sub->ops->destroy(sub);
		}
	}
	lb_comm_set_name(w, "test world");
	if ((rc = lb_comm_error(w, NULL, NULL, 0)))
		fails += bad(rank, "the world's error after calls that succeeded", 0, rc, 0);
	if (cf->kind == LB_GPU_COMM_NCCL) {
		double dev = lb_comm_take_seconds(w, NULL, 0), per_tag[3] = {-1, -1, -1};
		size_t big = (size_t)1 << 22; /* 16 MiB out of place: a copy even on one rank */
		void *a = ops->alloc(big, LB_K_F32), *b = ops->alloc(big, LB_K_F32);
		int old;

		if (!(dev > 0))
			fails += bad(rank, "device time of the NCCL calls", 0, dev, 1);
		else if (rank == 0)
			printf("  NCCL calls' device time %.3f ms\n", dev * 1e3);
		/* the tags (comm.h set_tag): an all-reduce tagged 1 is timed under tag 1 alone */
		if ((old = lb_comm_set_tag(w, 1)) != -1)
			fails += bad(rank, "the world's first tag", 0, old, -1);
		rc = a && b ? w->ops->all_reduce(w, a, b, big, LB_F32, LB_SUM, s) : -1;
		if ((old = lb_comm_set_tag(w, -1)) != 1)
			fails += bad(rank, "the tag set_tag replaces", 0, old, 1);
		ops->sync();
		dev = lb_comm_take_seconds(w, per_tag, 3);
		if (rc || !(per_tag[1] > 0) || per_tag[0] != 0 || per_tag[2] != 0 ||
		    dev != per_tag[1])
			fails +=
			    bad(rank, "device time of an all-reduce tagged 1", 1, per_tag[1], dev);
		ops->free_(a);
		ops->free_(b);
	} else if ((dev_s = lb_comm_take_seconds(w, NULL, 0)) != -1) {
		fails += bad(rank, "device time of a staged world (host-timed)", 0, dev_s, -1);
	}
	rc = w->ops->barrier(w);
	fails += rc ? bad(rank, "barrier", 0, rc, 0) : 0;
	w->ops->destroy(w);
	return fails ? 1 : 0;
}

static int launch(const char *name, int nproc, struct cfg *cf, int want_status, double max_s)
{
	struct lb_launch_opts lo = LB_LAUNCH_OPTS_INIT;
	struct lb_launch_result res;
	struct timespec t0, t1;
	double dt;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	fflush(stdout);
	rc = lb_launch(nproc, rank_main, cf, &lo, &res);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	dt = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
	if (rc < 0 || res.status != want_status || dt > max_s) {
		printf("FAIL  %-40s status %d (want %d), %.1f s (limit %.0f): %s\n", name,
		       res.status, want_status, dt, max_s, res.message);
		return 1;
	}
	printf("PASS  %-40s %.1f s\n", name, dt);
	return 0;
}

int main(void)
{
	const struct lb_ops *ops = lb_ops_cuda();
	struct cfg cf = {LB_GPU_COMM_STAGED, 20.0, 0, 0};
	int fails = 0, ngpu = 0;
	char err[512];
	pid_t pid;
	int st;

	/* is there a GPU? ask in a child, so that this process forks the ranks CUDA-free */
	pid = fork();
	if (pid == 0) {
		if (ops->init(0, err, sizeof(err))) {
			printf("skip: %s\n", err);
			fflush(stdout);
			_exit(77);
		}
		_exit(0);
	}
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) == 77)
		return 77;
	{ /* the GPU count, from a child too */
		int fd[2];

		if (pipe(fd) == 0 && (pid = fork()) == 0) {
			int c = 0;

			close(fd[0]);
			ops->init(0, err, sizeof(err));
			c = lb_comm_cuda_auto_kind(2) == LB_GPU_COMM_NCCL ? 2 : 1;
			if (write(fd[1], &c, sizeof(c)) != (ssize_t)sizeof(c))
				_exit(1);
			_exit(0);
		}
		close(fd[1]);
		if (read(fd[0], &ngpu, sizeof(ngpu)) != (ssize_t)sizeof(ngpu))
			ngpu = 1;
		close(fd[0]);
		waitpid(pid, &st, 0);
	}
	fails += launch("staged, 2 ranks on one GPU", 2, &cf, 0, 60);
	fails += launch("staged, 4 ranks on one GPU", 4, &cf, 0, 60);
	cf.kind = LB_GPU_COMM_NCCL;
	fails += launch("nccl, 1 rank", 1, &cf, 0, 60);
	cf.no_host = 1;
	fails += launch("nccl, 1 rank, no host communicator", 1, &cf, 0, 60);
	cf.no_host = 0;
	cf.timeout = 1.0;
	cf.stall = 1;
	fails += launch("nccl watchdog: a stalled stream, exit 4", 1, &cf, 4, 15);
	cf.stall = 0;
	cf.timeout = 20.0;
	if (ngpu >= 2)
		fails += launch("nccl, 2 ranks on 2 GPUs", 2, &cf, 0, 60);
	else
		printf("SKIP  nccl, 2 ranks on 2 GPUs (one GPU here)\n");
	printf("%s\n", fails ? "FAIL" : "ok: the GPU communicator");
	return fails ? 1 : 0;
}
#endif
