/*
 * The GPU communicator (harness/comm/comm_cuda.h): NCCL, loaded at run time, or staged
 * through the host communicator; host values through the host communicator. One world
 * object per process holds what the communicators split from it share: the NCCL library,
 * the watchdog thread and its ring of enqueued calls, the failure state, the tag of the
 * calls being enqueued and their device time per tag.
 *
 * Why one file: one communicator. Each call of the table chooses between the NCCL and the
 * staged path on the same object, and both paths, the watchdog and the world's failure
 * state share its insides (the ring of tracked calls under the world's lock, the staging
 * buffers, the bounce buffer); split, those would be published in a header every piece
 * includes.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>

extern "C" {
#include "common/util.h"
#include "harness/comm/comm_cuda.h"
#include "harness/comm/comm_shm.h"
}

#define CC_RING	   8192 /* enqueued device calls the watchdog follows */
#define CC_TAGS	   4096 /* time accumulators (the trainer's phase numbers), plus one */
#define CC_MAXCOMM 64
#define CC_POLL_S  0.02

/* ---- NCCL, loaded at run time ---- */

struct nccl_api {
	void *h = NULL;
	int version;
	ncclResult_t (*GetVersion)(int *);
	ncclResult_t (*GetUniqueId)(ncclUniqueId *);
	ncclResult_t (*CommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
	ncclResult_t (*CommSplit)(ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *);
	ncclResult_t (*CommAbort)(ncclComm_t);
	ncclResult_t (*CommFinalize)(ncclComm_t);
	ncclResult_t (*CommDestroy)(ncclComm_t);
	ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
	const char *(*GetErrorString)(ncclResult_t);
	const char *(*GetLastError)(ncclComm_t);
	ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
				  ncclComm_t, cudaStream_t);
	ncclResult_t (*ReduceScatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
				      ncclComm_t, cudaStream_t);
	ncclResult_t (*AllGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
				  cudaStream_t);
	ncclResult_t (*Broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
				  cudaStream_t);
	ncclResult_t (*Send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
	ncclResult_t (*Recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
	ncclResult_t (*GroupStart)(void);
	ncclResult_t (*GroupEnd)(void);
	ncclResult_t (*CommCount)(const ncclComm_t, int *);
	ncclResult_t (*CommUserRank)(const ncclComm_t, int *);
};

static struct nccl_api nccl;

static int nccl_load(char *err, size_t errlen)
{
	static const char *const names[] = {"libnccl.so.2", "libnccl.so"};
	const char *why = "";

	if (nccl.h)
		return 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !nccl.h; i++) {
		nccl.h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (!nccl.h)
			why = dlerror();
	}
	if (!nccl.h) {
		snprintf(err, errlen,
			 "NCCL cannot be loaded: %s (install NCCL 2.18 or later, or put its lib "
			 "folder in LD_LIBRARY_PATH, e.g. 'module load nccl')",
			 why ? why : "not found");
		return -1;
	}
#define SYM(f)                                                                                     \
	do {                                                                                       \
		*(void **)&nccl.f = dlsym(nccl.h, "nccl" #f);                                      \
		if (!nccl.f) {                                                                     \
			snprintf(err, errlen,                                                      \
				 "NCCL library lacks nccl" #f " (NCCL 2.18 or later is needed)");  \
			dlclose(nccl.h);                                                           \
			nccl.h = NULL;                                                             \
			return -1;                                                                 \
		}                                                                                  \
	} while (0)
	SYM(GetVersion);
	SYM(GetUniqueId);
	SYM(CommInitRankConfig);
	SYM(CommSplit);
	SYM(CommAbort);
	SYM(CommFinalize);
	SYM(CommDestroy);
	SYM(CommGetAsyncError);
	SYM(GetErrorString);
	SYM(GetLastError);
	SYM(AllReduce);
	SYM(ReduceScatter);
	SYM(AllGather);
	SYM(Broadcast);
	SYM(Send);
	SYM(Recv);
	SYM(GroupStart);
	SYM(GroupEnd);
	SYM(CommCount);
	SYM(CommUserRank);
#undef SYM
	nccl.GetVersion(&nccl.version);
	if (nccl.version < 21800) {
		snprintf(err, errlen,
			 "NCCL %d.%d is too old: 2.18 or later is needed (ncclCommSplit)",
			 nccl.version / 10000, nccl.version / 100 % 100);
		dlclose(nccl.h);
		nccl.h = NULL;
		return -1;
	}
	return 0;
}

/* ---- the world: shared state, the watchdog ---- */

struct cc_entry {
	cudaEvent_t e0, e1;
	double t_enq;
	const char *what;
	const char *group;
	int tag;
	int ready; /* 0 from reservation (track_begin) until e1 is recorded (track_end) */
};

struct cc_world {
	struct lb_gpu_comm_opts o;
	int device;
	struct lb_comm *host_world; /* not owned: the world communicator's host part */
	pthread_mutex_t mu;
	pthread_t dog;
	int dog_running, stop;
	struct cc_entry ring[CC_RING];
	unsigned head, tail; /* pending: [head, tail) */
	double last_done;
	double tag_s[CC_TAGS + 1];
	int tag; /* the tag of the calls enqueued now (cc_set_tag), -1 none */
	ncclComm_t comms[CC_MAXCOMM];
	const char *comm_names[CC_MAXCOMM];
	int ncomms;
	int refs;
	int failed;  /* 1 once the watchdog took over */
	int aborted; /* 1 once ncclCommAbort returned for every communicator */
	int blocked_marked;
	struct lb_comm_err err;	  /* the last failed call */
	cudaStream_t host_stream; /* host values through NCCL (no host communicator) */
};

struct cc_comm {
	struct lb_comm c;
	struct cc_world *w;
	enum lb_gpu_comm kind;
	struct lb_comm *host; /* owned; NULL across nodes */
	ncclComm_t nc;	      /* nccl kind */
	const char *name;
	int in_group;
	/* staged: a pinned buffer per grouped call, and the receives to copy back */
	void **stage;
	size_t *stage_cap;
	int nstage, cap_stage, used_stage;
	struct {
		void *dev;
		int idx;
		size_t bytes;
		cudaStream_t s;
	} * recvs;
	int nrecvs, cap_recvs;
	/* nccl: the grouped calls' stream and tracking entry (tracked from the first call of
	 * the group to the group's end, when NCCL launches them) */
	cudaStream_t group_stream;
	struct cc_entry *group_e;
	/* host values through NCCL */
	void *bounce;
	size_t bounce_cap;
};

extern const struct lb_comm_ops lbc_comm_ops;
#define cc_ops lbc_comm_ops

static struct cc_comm *CC(struct lb_comm *c)
{
	return (struct cc_comm *)c;
}

static int cuda_fail(struct cc_world *w, const char *what, cudaError_t e)
{
	cudaGetLastError();
	return lb_comm_err_set(&w->err,
			       e == cudaErrorMemoryAllocation ? LB_COMM_EFAIL : LB_COMM_EFAIL, -1,
			       "%s: %s", what, cudaGetErrorString(e));
}

static ncclDataType_t nccl_type(enum lb_dtype t)
{
	switch (t) {
	case LB_F32:
		return ncclFloat32;
	case LB_BF16:
		return ncclBfloat16;
	case LB_F16:
		return ncclFloat16;
	case LB_I32:
		return ncclInt32;
	case LB_F64:
		return ncclFloat64;
	}
	return ncclFloat32;
}

static ncclRedOp_t nccl_op(enum lb_redop op)
{
	return op == LB_MAX ? ncclMax : op == LB_AVG ? ncclAvg : ncclSum;
}

/* The rank at fault, for a message: from the host world (one node), a peer that died, or
 * a live one that is not blocked in a device call; -1 when none can be named. */
static int blame(struct cc_world *w, char *msg, size_t len)
{
	if (!w->host_world || !lb_comm_is_shm(w->host_world)) {
		msg[0] = 0;
		return -1;
	}
	return lb_comm_shm_blame(w->host_world, msg, len);
}

static void *abort_main(void *arg)
{
	struct cc_world *w = (struct cc_world *)arg;

	for (int i = 0; i < w->ncomms; i++)
		if (w->comms[i])
			nccl.CommAbort(w->comms[i]);
	__atomic_store_n(&w->aborted, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* ncclCommAbort on every communicator, waiting at most wait_s for it: the abort stops
 * NCCL's own kernels, but it cannot return while the stream is held by another kernel
 * that does not end (a device that hangs outside NCCL), and the rank must end anyway. */
static void abort_bounded(struct cc_world *w, double wait_s)
{
	pthread_t th;
	double end = lb_now_s() + wait_s;

	if (pthread_create(&th, NULL, abort_main, w))
		return;
	pthread_detach(th);
	while (!__atomic_load_n(&w->aborted, __ATOMIC_ACQUIRE) && lb_now_s() < end)
		usleep(1000);
}

/* The watchdog's verdict: abort every NCCL communicator, then end the rank through the
 * callback (which does not return). Called with w->mu held. */
static void dog_fail(struct cc_world *w, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void dog_fail(struct cc_world *w, int code, const char *fmt, ...)
{
	char m[512], who[256] = "", full[900];
	int culprit;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	w->failed = 1;
	/* give the peers' watchdogs a moment to mark themselves blocked */
	pthread_mutex_unlock(&w->mu);
	{
		double wait = w->o.timeout_s * 0.25 < 1.0 ? w->o.timeout_s * 0.25 : 1.0;
		struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};

		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&w->mu);
	culprit = blame(w, who, sizeof(who));
	if (who[0])
		snprintf(full, sizeof(full), "%s; %s", m, who);
	else
		snprintf(full, sizeof(full), "%s", m);
	lb_comm_err_set(&w->err, code, culprit, "%s", full);
	pthread_mutex_unlock(&w->mu);
	abort_bounded(w, 2.0);
	if (w->o.on_fail)
		w->o.on_fail(w->o.fail_arg, code, culprit, full);
	_exit(4);
}

/* Pop the completed calls at the ring's head, adding their device time to their tags.
 * w->mu held. Returns the first pending entry, or NULL. */
static struct cc_entry *pop_done(struct cc_world *w)
{
	while (w->head != w->tail) {
		struct cc_entry *e = &w->ring[w->head % CC_RING];
		cudaError_t q;
		float ms = 0;

		if (!e->ready)
			return e;
		q = cudaEventQuery(e->e1);
		if (q == cudaErrorNotReady)
			return e;
		if (q != cudaSuccess) {
			cudaGetLastError();
			return e; /* the watchdog reports it */
		}
		if (cudaEventElapsedTime(&ms, e->e0, e->e1) == cudaSuccess)
			w->tag_s[e->tag >= 0 && e->tag < CC_TAGS ? e->tag : CC_TAGS] += ms * 1e-3;
		else
			cudaGetLastError();
		w->last_done = lb_now_s();
		w->head++;
	}
	return NULL;
}

static void *dog_main(void *arg)
{
	struct cc_world *w = (struct cc_world *)arg;
	struct timespec ts = {0, (long)(CC_POLL_S * 1e9)};

	cudaSetDevice(w->device);
	pthread_mutex_lock(&w->mu);
	while (!w->stop) {
		struct cc_entry *e = pop_done(w);
		double t = lb_now_s();
		char pm[512];
		int pr;

		if (e && e->ready) {
			double start = e->t_enq > w->last_done ? e->t_enq : w->last_done;
			cudaError_t q = cudaEventQuery(e->e1);

			if (q != cudaSuccess && q != cudaErrorNotReady) {
				cudaGetLastError();
				dog_fail(w, LB_COMM_EFAIL, "NCCL %s on the %s communicator: %s",
					 e->what, e->group, cudaGetErrorString(q));
			}
			/* blocked for a quarter of the timeout: tell the peers (blame) */
			if (w->host_world && t - start > 0.25 * w->o.timeout_s &&
			    !w->blocked_marked) {
				lb_comm_shm_set_blocked(w->host_world, 1);
				w->blocked_marked = 1;
			}
			if (t - start > w->o.timeout_s)
				dog_fail(w, LB_COMM_ETIMEOUT,
					 "NCCL %s on the %s communicator did not complete within "
					 "%.1f s",
					 e->what, e->group, w->o.timeout_s);
		} else if (!e) {
			w->last_done = t;
			if (w->blocked_marked) {
				lb_comm_shm_set_blocked(w->host_world, 0);
				w->blocked_marked = 0;
			}
		}
		for (int i = 0; i < w->ncomms; i++) {
			ncclResult_t st = ncclSuccess;

			if (!w->comms[i] || nccl.CommGetAsyncError(w->comms[i], &st) != ncclSuccess)
				continue;
			if (st != ncclSuccess && st != ncclInProgress)
				dog_fail(w, LB_COMM_EFAIL,
					 "NCCL error on the %s communicator: %s (%s)",
					 w->comm_names[i], nccl.GetErrorString(st),
					 nccl.GetLastError(w->comms[i]));
		}
		/* a peer posted its failure while this rank waits in a device call */
		if (e && w->host_world && t - e->t_enq > 0.25 * w->o.timeout_s &&
		    lb_comm_shm_error(w->host_world, &pr, pm, sizeof(pm)) == LB_COMM_EPEER)
			dog_fail(w, LB_COMM_EPEER, "%s", pm);
		pthread_mutex_unlock(&w->mu);
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&w->mu);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* Record the call just enqueued on stream s (e0 before it, e1 after). */
static int track_begin(struct cc_world *w, cudaStream_t s, struct cc_entry **out)
{
	struct cc_entry *e;

	pthread_mutex_lock(&w->mu);
	while (w->failed || w->tail - w->head >= CC_RING) { /* full: wait for the device */
		if (!w->failed)
			pop_done(w);
		pthread_mutex_unlock(&w->mu);
		usleep(200);
		pthread_mutex_lock(&w->mu);
	}
	e = &w->ring[w->tail % CC_RING];
	e->ready = 0;
	w->tail++; /* reserved: the watchdog waits at it until track_end */
	pthread_mutex_unlock(&w->mu);
	if (!e->e0) {
		cudaError_t er = cudaEventCreate(&e->e0);

		if (er == cudaSuccess)
			er = cudaEventCreate(&e->e1);
		if (er != cudaSuccess) {
			e->ready = 1; /* nothing recorded: completes at once */
			return cuda_fail(w, "cudaEventCreate", er);
		}
	}
	cudaEventRecord(e->e0, s);
	*out = e;
	return 0;
}

static int track_end(struct cc_world *w, struct cc_entry *e, cudaStream_t s, const char *what,
		     const char *group)
{
	cudaError_t er = cudaEventRecord(e->e1, s);

	if (er != cudaSuccess)
		return cuda_fail(w, "cudaEventRecord", er);
	e->t_enq = lb_now_s();
	e->what = what;
	e->group = group;
	e->tag = w->tag;
	pthread_mutex_lock(&w->mu);
	e->ready = 1;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

/* A nonblocking communicator's call returned ncclInProgress: wait until it is issued. */
static int settle(struct cc_world *w, ncclComm_t nc, ncclResult_t r, const char *what,
		  double timeout_s)
{
	double deadline = lb_now_s() + timeout_s;

	while (r == ncclInProgress) {
		if (nccl.CommGetAsyncError(nc, &r) != ncclSuccess)
			break;
		if (r != ncclInProgress)
			break;
		if (lb_now_s() > deadline)
			return lb_comm_err_set(&w->err, LB_COMM_ETIMEOUT, -1,
					       "%s: not done within %.1f s", what, timeout_s);
		usleep(100);
	}
	if (r != ncclSuccess)
		return lb_comm_err_set(&w->err,
				       r == ncclRemoteError || r == ncclSystemError ? LB_COMM_EPEER
										    : LB_COMM_EFAIL,
				       -1, "%s: %s (%s)", what, nccl.GetErrorString(r),
				       nc ? nccl.GetLastError(nc) : "");
	return 0;
}

static int world_register(struct cc_world *w, ncclComm_t nc, const char *name)
{
	pthread_mutex_lock(&w->mu);
	if (w->ncomms >= CC_MAXCOMM) {
		pthread_mutex_unlock(&w->mu);
		return lb_comm_err_set(&w->err, LB_COMM_EFAIL, -1,
				       "more than %d NCCL communicators", CC_MAXCOMM);
	}
	w->comms[w->ncomms] = nc;
	w->comm_names[w->ncomms++] = name;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

static void world_unregister(struct cc_world *w, ncclComm_t nc)
{
	pthread_mutex_lock(&w->mu);
	for (int i = 0; i < w->ncomms; i++)
		if (w->comms[i] == nc) {
			w->comms[i] = w->comms[--w->ncomms];
			w->comm_names[i] = w->comm_names[w->ncomms];
			break;
		}
	pthread_mutex_unlock(&w->mu);
}

/* ---- the NCCL path ---- */

/*
 * One call of the table, described once for every route it can take (host memory through
 * the host communicator, or across nodes through a bounce buffer; staged through pinned host
 * memory; NCCL); its buffers travel beside it: in and out, device buffers, or host memory
 * when the caller gave no stream (broadcast's buffer is both, send's is in, recv's is out).
 * peer: a send's or receive's peer, a broadcast's root.
 */
enum cc_op { CC_ALL_REDUCE, CC_REDUCE_SCATTER, CC_ALL_GATHER, CC_BROADCAST, CC_SEND, CC_RECV };

struct cc_call {
	enum cc_op op;
	size_t count;
	enum lb_dtype t;
	enum lb_redop redop;
	int peer;
};

/* Each op's name in the call log and in NCCL's error messages (kept by the tracking entry:
 * static text). */
static const struct {
	const char *what, *nccl_what;
} cc_op_names[] = {
    [CC_ALL_REDUCE] = {"AllReduce", "ncclAllReduce"},
    [CC_REDUCE_SCATTER] = {"ReduceScatter", "ncclReduceScatter"},
    [CC_ALL_GATHER] = {"AllGather", "ncclAllGather"},
    [CC_BROADCAST] = {"Broadcast", "ncclBroadcast"},
    [CC_SEND] = {"Send", "ncclSend"},
    [CC_RECV] = {"Recv", "ncclRecv"},
};

static int cc_p2p(const struct cc_call *k)
{
	return k->op == CC_SEND || k->op == CC_RECV;
}

/* The call enqueued through NCCL on stream s, from in to out. */
static ncclResult_t nccl_issue(struct cc_comm *cc, const struct cc_call *k, const void *in,
			       void *out, cudaStream_t s)
{
	ncclDataType_t t = nccl_type(k->t);

	switch (k->op) {
	case CC_ALL_REDUCE:
		return nccl.AllReduce(in, out, k->count, t, nccl_op(k->redop), cc->nc, s);
	case CC_REDUCE_SCATTER:
		return nccl.ReduceScatter(in, out, k->count, t, nccl_op(k->redop), cc->nc, s);
	case CC_ALL_GATHER:
		return nccl.AllGather(in, out, k->count, t, cc->nc, s);
	case CC_BROADCAST:
		return nccl.Broadcast(out, out, k->count, t, k->peer, cc->nc, s);
	case CC_SEND:
		return nccl.Send(in, k->count, t, k->peer, cc->nc, s);
	default:
		return nccl.Recv(out, k->count, t, k->peer, cc->nc, s);
	}
}

/* Enqueue the call through NCCL on stream s and track it. */
static int nccl_call(struct cc_comm *cc, const struct cc_call *k, const void *in, void *out,
		     cudaStream_t s)
{
	struct cc_entry *e = NULL;
	int rc = track_begin(cc->w, s, &e), rc2;

	if (rc)
		return rc;
	rc = settle(cc->w, cc->nc, nccl_issue(cc, k, in, out, s), cc_op_names[k->op].nccl_what,
		    cc->w->o.timeout_s);
	rc2 = track_end(cc->w, e, s, cc_op_names[k->op].what, cc->name);
	return rc ? rc : rc2;
}

/* Host values through NCCL (copy in, run, copy out, wait): the device buffer of at least
 * need bytes they pass through, kept for the next call. */
static int bounce(struct cc_comm *cc, size_t need, void **buf)
{
	if (cc->bounce_cap < need) {
		cudaError_t e;

		if (cc->bounce)
			cudaFree(cc->bounce);
		cc->bounce = NULL;
		cc->bounce_cap = 0;
		if ((e = cudaMalloc(&cc->bounce, need)) != cudaSuccess)
			return cuda_fail(cc->w, "host-value bounce buffer", e);
		cc->bounce_cap = need;
	}
	*buf = cc->bounce;
	return 0;
}

static int wait_stream(struct cc_world *w, cudaStream_t s)
{
	cudaError_t e;

	while ((e = cudaStreamQuery(s)) == cudaErrorNotReady)
		usleep(50);
	return e == cudaSuccess ? 0 : cuda_fail(w, "cudaStreamQuery", e);
}

/* ---- the staged path ---- */

static int stage_buf(struct cc_comm *cc, int idx, size_t bytes, void **out)
{
	if (idx >= cc->cap_stage) {
		int cap = cc->cap_stage ? 2 * cc->cap_stage : 8;
		void **s = (void **)realloc(cc->stage, cap * sizeof(*s));
		size_t *sc;

		if (!s)
			return lb_comm_err_set(&cc->w->err, LB_COMM_EFAIL, -1,
					       "out of host memory");
		cc->stage = s;
		sc = (size_t *)realloc(cc->stage_cap, cap * sizeof(*sc));
		if (!sc)
			return lb_comm_err_set(&cc->w->err, LB_COMM_EFAIL, -1,
					       "out of host memory");
		cc->stage_cap = sc;
		for (int i = cc->cap_stage; i < cap; i++) {
			cc->stage[i] = NULL;
			cc->stage_cap[i] = 0;
		}
		cc->cap_stage = cap;
	}
	if (cc->stage_cap[idx] < bytes) {
		size_t cap = cc->stage_cap[idx] ? cc->stage_cap[idx] : 4096;
		cudaError_t e;

		while (cap < bytes)
			cap *= 2;
		if (cc->stage[idx])
			cudaFreeHost(cc->stage[idx]);
		cc->stage[idx] = NULL;
		cc->stage_cap[idx] = 0;
		if ((e = cudaMallocHost(&cc->stage[idx], cap)) != cudaSuccess)
			return cuda_fail(cc->w, "pinned staging buffer", e);
		cc->stage_cap[idx] = cap;
	}
	if (idx >= cc->nstage)
		cc->nstage = idx + 1;
	*out = cc->stage[idx];
	return 0;
}

static int d2h(struct cc_comm *cc, void *h, const void *d, size_t bytes, cudaStream_t s)
{
	cudaError_t e = cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, s);

	if (e == cudaSuccess)
		e = cudaStreamSynchronize(s);
	return e == cudaSuccess ? 0 : cuda_fail(cc->w, "staging copy to the host", e);
}

static int h2d(struct cc_comm *cc, void *d, const void *h, size_t bytes, cudaStream_t s)
{
	cudaError_t e = cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s);

	if (e == cudaSuccess)
		e = cudaStreamSynchronize(s);
	return e == cudaSuccess ? 0 : cuda_fail(cc->w, "staging copy to the device", e);
}

static int host_rc(struct cc_comm *cc, int rc)
{
	if (rc) {
		char m[400];
		int r = -1;

		if (cc->host && lb_comm_is_shm(cc->host))
			lb_comm_shm_error(cc->host, &r, m, sizeof(m));
		else
			snprintf(m, sizeof(m), "%s", lb_comm_strerror(rc));
		lb_comm_err_set(&cc->w->err, rc, r, "%s", m);
	}
	return rc;
}

/* The call through the host communicator h (host memory), from in to out. */
static int host_issue(struct lb_comm *h, const struct cc_call *k, const void *in, void *out)
{
	switch (k->op) {
	case CC_ALL_REDUCE:
		return h->ops->all_reduce(h, in, out, k->count, k->t, k->redop, NULL);
	case CC_REDUCE_SCATTER:
		return h->ops->reduce_scatter(h, in, out, k->count, k->t, k->redop, NULL);
	case CC_ALL_GATHER:
		return h->ops->all_gather(h, in, out, k->count, k->t, NULL);
	case CC_BROADCAST:
		return h->ops->broadcast(h, out, k->count, k->t, k->peer, NULL);
	case CC_SEND:
		return h->ops->send(h, in, k->count, k->t, k->peer, NULL);
	default:
		return h->ops->recv(h, out, k->count, k->t, k->peer, NULL);
	}
}

/* Bytes of a collective's input and output on this rank. */
static void coll_bytes(const struct lb_comm *c, const struct cc_call *k, size_t *in_b,
		       size_t *out_b)
{
	size_t b = k->count * lb_dtype_size(k->t);

	*in_b = k->op == CC_REDUCE_SCATTER ? b * c->size : b;
	*out_b = k->op == CC_ALL_GATHER ? b * c->size : b;
}

/* all_reduce and broadcast work in place in the staging and bounce buffers. */
static int coll_in_place(const struct cc_call *k)
{
	return k->op == CC_ALL_REDUCE || k->op == CC_BROADCAST;
}

static int cc_run(struct lb_comm *c, const struct cc_call *k, const void *in, void *out,
		  void *stream);

/* A collective on host memory across nodes (no host communicator): through NCCL on the
 * world's host stream, via a device bounce buffer: copy in, run, copy out, wait. */
static int coll_bounced(struct lb_comm *c, const struct cc_call *k, const void *in, void *out)
{
	struct cc_comm *cc = CC(c);
	cudaStream_t s = cc->w->host_stream;
	size_t in_b, out_b;
	void *h = NULL, *ho;
	int rc;

	coll_bytes(c, k, &in_b, &out_b);
	if ((rc = bounce(cc, coll_in_place(k) ? in_b : in_b + out_b, &h)))
		return rc;
	ho = coll_in_place(k) ? h : (char *)h + in_b;
	cudaMemcpyAsync(h, in, in_b, cudaMemcpyHostToDevice, s);
	if ((rc = cc_run(c, k, h, ho, s)))
		return rc;
	cudaMemcpyAsync(out, ho, out_b, cudaMemcpyDeviceToHost, s);
	return wait_stream(cc->w, s);
}

/* A collective staged through pinned host memory and the host communicator, on stream s. */
static int coll_staged(struct cc_comm *cc, const struct cc_call *k, const void *in, void *out,
		       cudaStream_t s)
{
	size_t in_b, out_b;
	void *h = NULL, *ho = NULL;
	int rc;

	coll_bytes(&cc->c, k, &in_b, &out_b);
	if ((rc = stage_buf(cc, 0, in_b, &h)) ||
	    (!coll_in_place(k) && (rc = stage_buf(cc, 1, out_b, &ho))) ||
	    (rc = d2h(cc, h, in, in_b, s)))
		return rc;
	if (coll_in_place(k))
		ho = h;
	if ((rc = host_rc(cc, host_issue(cc->host, k, h, ho))))
		return rc;
	return h2d(cc, out, ho, out_b, s);
}

static int staged_p2p(struct cc_comm *cc, int dir, void *buf, size_t count, enum lb_dtype t,
		      int peer, cudaStream_t s);
static int grouped(struct cc_comm *cc, cudaStream_t s, ncclResult_t r, const char *what);

/*
 * Every call of the table, by route: without a stream (host memory) through the host
 * communicator where there is one, else (across nodes) bounced through NCCL, a send or
 * receive refused; the staged kind through pinned host memory; else NCCL, a send or receive
 * inside a group tracked with its group.
 */
static int cc_run(struct lb_comm *c, const struct cc_call *k, const void *in, void *out,
		  void *stream)
{
	struct cc_comm *cc = CC(c);
	cudaStream_t s = (cudaStream_t)stream;

	if (!stream && cc->host)
		return host_rc(cc, host_issue(cc->host, k, in, out));
	if (!stream && cc_p2p(k))
		return lb_comm_err_set(
		    &cc->w->err, LB_COMM_EFAIL, -1, "%s",
		    k->op == CC_SEND ? "send of host memory across nodes is not supported"
				     : "receive into host memory across nodes is not supported");
	if (!stream)
		return coll_bounced(c, k, in, out);
	if (cc->kind == LB_GPU_COMM_STAGED)
		return cc_p2p(k)
			   ? staged_p2p(cc, k->op == CC_RECV, k->op == CC_SEND ? (void *)in : out,
					k->count, k->t, k->peer, s)
			   : coll_staged(cc, k, in, out, s);
	if (cc_p2p(k) && cc->in_group)
		return grouped(cc, s, nccl_issue(cc, k, in, out, s), cc_op_names[k->op].nccl_what);
	return nccl_call(cc, k, in, out, s);
}

/* ---- the table ---- */

static int cc_all_reduce(struct lb_comm *c, const void *in, void *out, size_t count,
			 enum lb_dtype t, enum lb_redop op, void *stream)
{
	struct cc_call k = {CC_ALL_REDUCE, count, t, op, 0};

	return cc_run(c, &k, in, out, stream);
}

static int cc_reduce_scatter(struct lb_comm *c, const void *in, void *out, size_t count,
			     enum lb_dtype t, enum lb_redop op, void *stream)
{
	struct cc_call k = {CC_REDUCE_SCATTER, count, t, op, 0};

	return cc_run(c, &k, in, out, stream);
}

static int cc_all_gather(struct lb_comm *c, const void *in, void *out, size_t count,
			 enum lb_dtype t, void *stream)
{
	struct cc_call k = {CC_ALL_GATHER, count, t, LB_SUM, 0};

	return cc_run(c, &k, in, out, stream);
}

static int cc_broadcast(struct lb_comm *c, void *buf, size_t count, enum lb_dtype t, int root,
			void *stream)
{
	struct cc_call k = {CC_BROADCAST, count, t, LB_SUM, root};

	return cc_run(c, &k, buf, buf, stream);
}

static int cc_send(struct lb_comm *c, const void *buf, size_t count, enum lb_dtype t, int peer,
		   void *stream)
{
	struct cc_call k = {CC_SEND, count, t, LB_SUM, peer};

	return cc_run(c, &k, buf, NULL, stream);
}

static int cc_recv(struct lb_comm *c, void *buf, size_t count, enum lb_dtype t, int peer,
		   void *stream)
{
	struct cc_call k = {CC_RECV, count, t, LB_SUM, peer};

	return cc_run(c, &k, NULL, buf, stream);
}

static int cc_group_start(struct lb_comm *c)
{
	struct cc_comm *cc = CC(c);

	if (cc->in_group)
		return lb_comm_err_set(&cc->w->err, LB_COMM_EFAIL, -1,
				       "group_start inside a group");
	cc->in_group = 1;
	cc->used_stage = 0;
	cc->nrecvs = 0;
	cc->group_e = NULL;
	cc->group_stream = NULL;
	if (cc->kind == LB_GPU_COMM_STAGED)
		return host_rc(cc, cc->host->ops->group_start(cc->host));
	if (cc->kind == LB_GPU_COMM_NCCL) {
		ncclResult_t r = nccl.GroupStart();

		if (r != ncclSuccess)
			return lb_comm_err_set(&cc->w->err, LB_COMM_EFAIL, -1, "ncclGroupStart: %s",
					       nccl.GetErrorString(r));
	}
	return 0;
}

/* Staged send/recv: outside a group, a one-call group. */
static int staged_p2p(struct cc_comm *cc, int dir, void *buf, size_t count, enum lb_dtype t,
		      int peer, cudaStream_t s)
{
	size_t b = count * lb_dtype_size(t);
	int own = !cc->in_group, rc, idx;
	void *h = NULL;

	if (own && (rc = cc_group_start(&cc->c)))
		return rc;
	idx = cc->used_stage++;
	if ((rc = stage_buf(cc, idx, b, &h)))
		return rc;
	if (dir == 0) {
		if ((rc = d2h(cc, h, buf, b, s)))
			return rc;
		rc = host_rc(cc, cc->host->ops->send(cc->host, h, count, t, peer, NULL));
	} else {
		if (cc->nrecvs >= cc->cap_recvs) {
			int cap = cc->cap_recvs ? 2 * cc->cap_recvs : 8;
			void *r = realloc(cc->recvs, cap * sizeof(*cc->recvs));

			if (!r)
				return lb_comm_err_set(&cc->w->err, LB_COMM_EFAIL, -1,
						       "out of host memory");
			*(void **)&cc->recvs = r;
			cc->cap_recvs = cap;
		}
		cc->recvs[cc->nrecvs].dev = buf;
		cc->recvs[cc->nrecvs].idx = idx;
		cc->recvs[cc->nrecvs].s = s;
		cc->recvs[cc->nrecvs++].bytes = b;
		rc = host_rc(cc, cc->host->ops->recv(cc->host, h, count, t, peer, NULL));
	}
	if (rc)
		return rc;
	return own ? cc->c.ops->group_end(&cc->c) : 0;
}

/* A send or receive inside a group: tracked as one call from the group's first to its end. */
static int grouped(struct cc_comm *cc, cudaStream_t s, ncclResult_t r, const char *what)
{
	int rc;

	if (!cc->group_e) {
		cc->group_stream = s;
		if ((rc = track_begin(cc->w, s, &cc->group_e)))
			return rc;
	}
	return settle(cc->w, cc->nc, r, what, cc->w->o.timeout_s);
}

static int cc_group_end(struct lb_comm *c)
{
	struct cc_comm *cc = CC(c);
	int rc = 0;

	if (!cc->in_group)
		return lb_comm_err_set(&cc->w->err, LB_COMM_EFAIL, -1,
				       "group_end without group_start");
	cc->in_group = 0;
	if (cc->kind == LB_GPU_COMM_STAGED) {
		if ((rc = host_rc(cc, cc->host->ops->group_end(cc->host))))
			return rc;
		for (int i = 0; i < cc->nrecvs && !rc; i++) {
			cudaError_t e = cudaMemcpyAsync(
			    cc->recvs[i].dev, cc->stage[cc->recvs[i].idx], cc->recvs[i].bytes,
			    cudaMemcpyHostToDevice, cc->recvs[i].s);

			if (e == cudaSuccess)
				e = cudaStreamSynchronize(cc->recvs[i].s);
			if (e != cudaSuccess)
				rc = cuda_fail(cc->w, "staging copy to the device", e);
		}
		cc->nrecvs = 0;
		return rc;
	}
	{
		ncclResult_t r = nccl.GroupEnd();

		if ((rc = settle(cc->w, cc->nc, r, "ncclGroupEnd", cc->w->o.timeout_s)))
			return rc;
		if (cc->group_e)
			rc = track_end(cc->w, cc->group_e, cc->group_stream, "send/recv", cc->name);
		cc->group_e = NULL;
		return rc;
	}
}

static int cc_barrier(struct lb_comm *c)
{
	struct cc_comm *cc = CC(c);
	int32_t one = 1;

	if (cc->host)
		return host_rc(cc, cc->host->ops->barrier(cc->host));
	return cc_all_reduce(c, &one, &one, 1, LB_I32, LB_SUM, NULL);
}

static void world_put(struct cc_world *w)
{
	if (--w->refs > 0)
		return;
	if (w->dog_running) {
		pthread_mutex_lock(&w->mu);
		w->stop = 1;
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->dog, NULL);
	}
	for (int i = 0; i < CC_RING; i++) {
		if (w->ring[i].e0)
			cudaEventDestroy(w->ring[i].e0);
		if (w->ring[i].e1)
			cudaEventDestroy(w->ring[i].e1);
	}
	if (w->host_stream)
		cudaStreamDestroy(w->host_stream);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

static void cc_destroy(struct lb_comm *c)
{
	struct cc_comm *cc = CC(c);
	struct cc_world *w = cc->w;

	if (cc->nc) {
		world_unregister(w, cc->nc);
		if (w->err.code || w->failed) {
			nccl.CommAbort(cc->nc);
		} else {
			ncclResult_t r = nccl.CommFinalize(cc->nc);

			if (settle(w, cc->nc, r, "ncclCommFinalize", w->o.timeout_s))
				nccl.CommAbort(cc->nc);
			else
				nccl.CommDestroy(cc->nc);
		}
	}
	if (cc->host)
		cc->host->ops->destroy(cc->host);
	for (int i = 0; i < cc->cap_stage; i++)
		if (cc->stage[i])
			cudaFreeHost(cc->stage[i]);
	free(cc->stage);
	free(cc->stage_cap);
	free(cc->recvs);
	if (cc->bounce)
		cudaFree(cc->bounce);
	world_put(w);
	free(cc);
}

static int cc_split(struct lb_comm *c, int color, int key, struct lb_comm **out)
{
	struct cc_comm *cc = CC(c), *n;
	struct cc_world *w = cc->w;
	int rc = 0;

	*out = NULL;
	n = (struct cc_comm *)calloc(1, sizeof(*n));
	if (!n)
		return lb_comm_err_set(&w->err, LB_COMM_EFAIL, -1, "out of host memory");
	n->c.ops = &cc_ops;
	n->c.impl = n;
	n->w = w;
	n->kind = cc->kind;
	n->name = "group";
	w->refs++;
	if (cc->host && (rc = host_rc(cc, cc->host->ops->split(cc->host, color, key, &n->host)))) {
		n->host = NULL;
		cc_destroy(&n->c);
		return rc;
	}
	if (n->host) {
		n->c.rank = n->host->rank;
		n->c.size = n->host->size;
	}
	if (cc->kind == LB_GPU_COMM_NCCL) {
		ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
		ncclResult_t r;

		cfg.blocking = 0;
		/* a nonblocking communicator takes the next call only once its state has been
		 * read back as ncclSuccess ("Attempt to use communicator before the previous
		 * operation returned ncclSuccess"): the parent's before and after the split */
		rc = settle(w, cc->nc, ncclInProgress, "ncclCommSplit (parent)", w->o.timeout_s);
		if (rc) {
			cc_destroy(&n->c);
			return rc;
		}
		r = nccl.CommSplit(cc->nc, color, key, &n->nc, &cfg);
		rc = settle(w, n->nc ? n->nc : cc->nc, r, "ncclCommSplit", w->o.timeout_s);
		if (!rc)
			rc = settle(w, cc->nc, ncclInProgress, "ncclCommSplit (parent)",
				    w->o.timeout_s);
		if (!rc && n->nc &&
		    (nccl.CommUserRank(n->nc, &n->c.rank) != ncclSuccess ||
		     nccl.CommCount(n->nc, &n->c.size) != ncclSuccess))
			rc = lb_comm_err_set(&w->err, LB_COMM_EFAIL, -1,
					     "ncclCommSplit: cannot read the new rank");
		if (!rc && n->nc)
			rc = world_register(w, n->nc, n->name);
		if (rc) {
			cc_destroy(&n->c);
			return rc;
		}
	}
	*out = &n->c;
	return 0;
}

static struct lb_comm *cc_host(struct lb_comm *c)
{
	return CC(c)->host;
}

static void cc_set_name(struct lb_comm *c, const char *name);
static int cc_error(const struct lb_comm *c, int *rank, char *msg, size_t len);
static int cc_set_tag(struct lb_comm *c, int tag);
static double cc_take_seconds(struct lb_comm *c, double *per_tag, int ntags);

const struct lb_comm_ops lbc_comm_ops = {
    "cuda",  cc_all_reduce,  cc_reduce_scatter, cc_all_gather, cc_broadcast,	cc_send,
    cc_recv, cc_group_start, cc_group_end,	cc_barrier,    cc_split,	cc_destroy,
    cc_host, cc_set_name,    cc_error,		cc_set_tag,    cc_take_seconds,
};

/* ---- the world ---- */

extern "C" enum lb_gpu_comm lb_comm_cuda_auto_kind(int local_size)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError();
		n = 1;
	}
	return local_size > n ? LB_GPU_COMM_STAGED : LB_GPU_COMM_NCCL;
}

extern "C" int lb_comm_cuda_world(struct lb_comm *host, const struct lb_gpu_comm_opts *o,
				  struct lb_comm **out, char *err, size_t errlen)
{
	struct cc_world *w;
	struct cc_comm *cc;
	int rc;

	*out = NULL;
	w = (struct cc_world *)calloc(1, sizeof(*w));
	cc = (struct cc_comm *)calloc(1, sizeof(*cc));
	if (!w || !cc) {
		free(w);
		free(cc);
		if (host)
			host->ops->destroy(host);
		snprintf(err, errlen, "out of host memory");
		return LB_COMM_EFAIL;
	}
	w->o = *o;
	w->refs = 1;
	w->err.rank = -1;
	w->tag = -1;
	pthread_mutex_init(&w->mu, NULL);
	cudaGetDevice(&w->device);
	w->host_world = host;
	cc->w = w;
	cc->host = host;
	cc->name = "world";
	cc->c.ops = &cc_ops;
	cc->c.impl = cc;
	cc->c.rank = o->rank;
	cc->c.size = o->size;
	cc->kind = o->kind == LB_GPU_COMM_AUTO ? lb_comm_cuda_auto_kind(o->local_size) : o->kind;
	*out = &cc->c;
	if (cc->kind == LB_GPU_COMM_STAGED) {
		if (!host) {
			snprintf(err, errlen,
				 "the staged GPU communicator joins the ranks of one node only; "
				 "across nodes use --gpu-comm nccl with one rank per GPU");
			return LB_COMM_EFAIL;
		}
		return 0;
	}
	if (nccl_load(err, errlen))
		return LB_COMM_EFAIL;
	{
		ncclUniqueId id;
		ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
		ncclResult_t r = ncclSuccess;
		struct lb_boot_opts boot;

		memset(&boot, 0, sizeof(boot));
		boot.kind = o->bootstrap;
		boot.rank = o->rank;
		boot.size = o->size;
		boot.dir = o->id_dir;
		boot.tag = o->id_tag;
		boot.timeout_s = o->timeout_s;

		memset(&id, 0, sizeof(id));
		if (o->rank == 0 && (r = nccl.GetUniqueId(&id)) != ncclSuccess) {
			snprintf(err, errlen, "ncclGetUniqueId: %s", nccl.GetErrorString(r));
			return LB_COMM_EFAIL;
		}
		if (host) {
			rc = host->ops->broadcast(host, &id, sizeof(id) / 4, LB_I32, 0, NULL);
			if (rc) {
				int cr;

				lb_comm_shm_error(host, &cr, err, errlen);
				return rc;
			}
		} else if ((rc = lb_bootstrap_bcast(&boot, &id, sizeof(id), err, errlen))) {
			return rc;
		}
		cfg.blocking = 0;
		r = nccl.CommInitRankConfig(&cc->nc, o->size, id, o->rank, &cfg);
		rc = settle(w, cc->nc, r, "ncclCommInitRankConfig", o->timeout_s);
		if (!host) /* every rank has joined (or failed): the id is spent */
			lb_bootstrap_done(&boot);
		if (rc) {
			snprintf(err, errlen, "%s", w->err.msg);
			return rc;
		}
	}
	if ((rc = world_register(w, cc->nc, cc->name))) {
		snprintf(err, errlen, "%s", w->err.msg);
		return rc;
	}
	{
		cudaError_t e = cudaStreamCreateWithFlags(&w->host_stream, cudaStreamNonBlocking);

		if (e != cudaSuccess) {
			cudaGetLastError();
			snprintf(err, errlen, "cudaStreamCreate: %s", cudaGetErrorString(e));
			return LB_COMM_EFAIL;
		}
	}
	if (pthread_create(&w->dog, NULL, dog_main, w)) {
		snprintf(err, errlen, "cannot start the NCCL watchdog thread");
		return LB_COMM_EFAIL;
	}
	w->dog_running = 1;
	return 0;
}

/* 1 if c is a GPU communicator (world or split from one). */
static int lb_comm_is_cuda(const struct lb_comm *c)
{
	return c && c->ops == &cc_ops;
}

static void cc_set_name(struct lb_comm *c, const char *name)
{
	struct cc_comm *cc;

	if (!lb_comm_is_cuda(c))
		return;
	cc = CC(c);
	pthread_mutex_lock(&cc->w->mu);
	cc->name = name;
	for (int i = 0; i < cc->w->ncomms; i++)
		if (cc->nc && cc->w->comms[i] == cc->nc)
			cc->w->comm_names[i] = name;
	pthread_mutex_unlock(&cc->w->mu);
}

static int cc_error(const struct lb_comm *c, int *rank, char *msg, size_t len)
{
	const struct cc_world *w;

	w = lb_comm_is_cuda(c) ? ((const struct cc_comm *)c)->w : NULL;
	return lb_comm_err_get(w ? &w->err : NULL, rank, msg, len);
}

static int cc_set_tag(struct lb_comm *c, int tag)
{
	struct cc_world *w = CC(c)->w;
	int old = w->tag;

	w->tag = tag;
	return old;
}

static double cc_take_seconds(struct lb_comm *c, double *per_tag, int ntags)
{
	struct cc_world *w;
	double total = 0;

	if (!lb_comm_is_cuda(c) || CC(c)->kind != LB_GPU_COMM_NCCL)
		return -1;
	w = CC(c)->w;
	pthread_mutex_lock(&w->mu);
	pop_done(w);
	for (int i = 0; i <= CC_TAGS; i++) {
		total += w->tag_s[i];
		if (per_tag && i < ntags)
			per_tag[i] = w->tag_s[i];
		w->tag_s[i] = 0;
	}
	pthread_mutex_unlock(&w->mu);
	return total;
}
