/*
 * CUDA graphs for the CUDA backend: the ops table's graph_begin, graph_pause,
 * graph_resume and graph_end (the contract is in harness/ops.h), and what the other files
 * of the backend ask of them (cuda_common.cuh).
 *
 * A segment (a micro-batch's forward or backward through a model chunk, the optimizer)
 * is named by its caller's key. The first time a key is begun its work runs as usual:
 * the GEMMs and cuDNN's attention choose their algorithms there (that tuning waits for the
 * device and cannot be captured). The second time the work is captured on the main
 * stream (stream capture, thread-local mode, so the NCCL watchdog thread's own calls are
 * not affected) in pieces: a pause ends a piece, which is instantiated and launched at
 * once, because the host work inside the pause (a collective staged through host memory
 * reads what the piece wrote) needs its results; a resume starts the next piece. From
 * then on a begin of the key replays: the caller runs the same code through the replay
 * table (whose ops enqueue nothing outside a pause), and each pause and the end launch
 * the next piece, so the host work between the pieces (the collectives, the hooks) runs
 * as before, in the same order, between the same device work.
 *
 * What stays outside the graphs: the first run of every key; the host work in the pauses
 * (every communicator call and the data-parallel hook, NCCL's included: the watchdog
 * follows each call through events recorded outside any graph); the host-to-device
 * uploads and events the caller issues around a segment.
 *
 * Failures: a capture that fails before its first pause (a call the capture refuses, a
 * plan that would have to be built now) is dropped and the caller runs the segment again
 * without a graph (LB_GRAPH_RERUN), with one line on stderr; after two such failures the
 * key runs without graphs for good. A capture that fails after a piece ran (the host work
 * after it already happened) cannot be redone: the run ends, naming --cuda-graphs 0. A
 * replay whose host calls do not match its capture ends the run the same way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cuda/cuda_common.cuh"

#define MAX_FAILS 2 /* captures that gave no graph before a key runs without graphs */

enum { G_IDLE = 0, G_EAGER, G_CAPTURE, G_REPLAY };

struct seg {
	unsigned char *key; /* len bytes; begins with its NUL-terminated name */
	size_t len;
	int seen;		/* begun since its graphs were last dropped */
	int fails;		/* captures that gave no graph */
	int off;		/* 1: runs without graphs for good */
	int ready;		/* 1: piece[0, n) replay it */
	cudaGraphExec_t *piece; /* NULL entries: empty pieces */
	int n, cap;
};

static struct {
	struct seg *s;
	int n, cap;
	int mode;
	struct seg *cur;
	int depth;  /* pause nesting */
	int next;   /* replay: the next piece */
	int pauses; /* capture: pauses entered so far */
	int broken; /* capture: a call failed or could not be captured: no graph */
	int drop;   /* capture: the graphs are correct but are not kept */
	char why[256];
	cudaStream_t stream;
	cudaGraphExec_t *tmp; /* capture: its pieces so far */
	int ntmp, captmp;
} G;

static const char *seg_name(const struct seg *s)
{
	return s ? (const char *)s->key : "(none)";
}

static void note(const char *why)
{
	if (!G.why[0])
		snprintf(G.why, sizeof(G.why), "%s", why);
}

static void fatal(const char *fmt, const char *detail)
{
	lb_fatal(__FILE__, __LINE__, "error",
		 "CUDA graph of the %s: %s%s%s; run with --cuda-graphs 0", seg_name(G.cur), fmt,
		 detail && *detail ? ": " : "", detail ? detail : "");
}

int lbc_graph_capturing(void)
{
	return G.mode == G_CAPTURE && G.depth == 0;
}

int lbc_graph_skip(void)
{
	return G.mode == G_REPLAY && G.depth == 0;
}

int lbc_graph_soft(const char *what, const char *why)
{
	char buf[256];

	if (G.mode != G_CAPTURE || G.depth)
		return 0;
	snprintf(buf, sizeof(buf), "%s failed: %s", what, why);
	note(buf);
	if (G.pauses == 0) { /* nothing of the segment ran: run it again without a graph */
		G.broken = 1;
		cudaGetLastError();
		return 1;
	}
	fprintf(stderr,
		"error: CUDA graph of the %s: %s, after part of the segment ran; run with "
		"--cuda-graphs 0\n",
		seg_name(G.cur), buf);
	return 0;
}

int lbc_graph_abort(const char *why)
{
	if (!lbc_graph_capturing())
		return 0;
	note(why);
	if (G.pauses == 0) {
		G.broken = 1;
		return 1;
	}
	fatal(why, "after part of the segment ran");
	return 1;
}

void lbc_graph_drop(const char *why)
{
	if (!lbc_graph_capturing())
		return;
	note(why);
	G.drop = 1;
}

void lbc_graph_guard(const char *what)
{
	if ((G.mode == G_CAPTURE || G.mode == G_REPLAY) && G.depth == 0)
		fatal(what, "not allowed inside a segment (outside its pauses)");
}

static void release(struct seg *s)
{
	for (int i = 0; i < s->n; i++)
		if (s->piece[i])
			cudaGraphExecDestroy(s->piece[i]); /* freed on completion if in flight */
	s->n = 0;
	s->ready = 0;
}

void lbc_graph_invalidate(void)
{
	if (G.mode == G_CAPTURE || G.mode == G_REPLAY)
		fatal("device memory freed or moved", "inside a segment");
	for (int i = 0; i < G.n; i++) {
		if (G.s[i].ready)
			G.s[i].seen = 1; /* captured again the next time it runs */
		release(&G.s[i]);
	}
}

static struct seg *find(const void *key, size_t len)
{
	struct seg *s;

	for (int i = 0; i < G.n; i++)
		if (G.s[i].len == len && !memcmp(G.s[i].key, key, len))
			return &G.s[i];
	if (G.n == G.cap) {
		int cap = G.cap ? 2 * G.cap : 32;
		struct seg *ns = (struct seg *)realloc(G.s, (size_t)cap * sizeof(*ns));

		if (!ns)
			lb_fatal(__FILE__, __LINE__, "oom", "CUDA graphs: out of host memory");
		G.s = ns;
		G.cap = cap;
	}
	s = &G.s[G.n];
	memset(s, 0, sizeof(*s));
	s->key = (unsigned char *)malloc(len + 1);
	if (!s->key)
		lb_fatal(__FILE__, __LINE__, "oom", "CUDA graphs: out of host memory");
	memcpy(s->key, key, len);
	s->key[len] = '\0'; /* a name that was not terminated still prints */
	s->len = len;
	G.n++;
	return s;
}

static void push_tmp(cudaGraphExec_t x)
{
	if (G.ntmp == G.captmp) {
		int cap = G.captmp ? 2 * G.captmp : 16;
		cudaGraphExec_t *a = (cudaGraphExec_t *)realloc(G.tmp, (size_t)cap * sizeof(*a));

		if (!a)
			lb_fatal(__FILE__, __LINE__, "oom", "CUDA graphs: out of host memory");
		G.tmp = a;
		G.captmp = cap;
	}
	G.tmp[G.ntmp++] = x;
}

static void drop_tmp(void)
{
	for (int i = 0; i < G.ntmp; i++)
		if (G.tmp[i])
			cudaGraphExecDestroy(G.tmp[i]);
	G.ntmp = 0;
}

static int begin_capture(void)
{
	cudaError_t e;

	if (lbc_stream() != G.stream) {
		note("the stream changed inside the segment");
		return -1;
	}
	e = cudaStreamBeginCapture(G.stream, cudaStreamCaptureModeThreadLocal);
	if (e != cudaSuccess) {
		cudaGetLastError();
		note(cudaGetErrorString(e));
		return -1;
	}
	return 0;
}

/* Ends the piece being captured, instantiates and launches it. 0, or -1 (G.why says why;
 * nothing of the piece ran). */
static int end_piece(void)
{
	cudaGraph_t g = NULL;
	cudaGraphExec_t x = NULL;
	size_t nodes = 0;
	cudaError_t e = cudaStreamEndCapture(G.stream, &g);

	if (e != cudaSuccess || !g || G.broken) {
		if (e != cudaSuccess)
			note(cudaGetErrorString(e));
		cudaGetLastError();
		if (g)
			cudaGraphDestroy(g);
		return -1;
	}
	e = cudaGraphGetNodes(g, NULL, &nodes);
	if (e == cudaSuccess && nodes > 0)
		e = cudaGraphInstantiateWithFlags(&x, g, 0);
	cudaGraphDestroy(g);
	if (e == cudaSuccess && x)
		e = cudaGraphLaunch(x, G.stream);
	if (e != cudaSuccess) {
		note(cudaGetErrorString(e));
		cudaGetLastError();
		if (x)
			cudaGraphExecDestroy(x);
		return -1;
	}
	push_tmp(x);
	return 0;
}

static void launch(const char *where)
{
	cudaGraphExec_t x;

	if (G.next >= G.cur->n)
		fatal("the replay has more pauses than its capture", where);
	if (lbc_stream() != G.stream)
		fatal("the stream changed inside the segment", where);
	x = G.cur->piece[G.next++];
	if (x)
		LBC_CHECK(cudaGraphLaunch(x, G.stream));
}

const struct lb_ops *lbc_graph_begin(const void *key, size_t len)
{
	struct seg *s;

	if (G.mode != G_IDLE)
		fatal("a segment begun inside another", NULL);
	if (!key || !len)
		lb_fatal(__FILE__, __LINE__, "error", "CUDA graphs: a segment without a key");
	s = find(key, len);
	G.cur = s;
	G.depth = G.next = G.pauses = G.broken = G.drop = 0;
	G.why[0] = '\0';
	G.stream = lbc_main_stream();
	if (s->off || lbc_stream() != G.stream) {
		G.mode = G_EAGER;
		return lb_ops_cuda();
	}
	if (s->ready) {
		G.mode = G_REPLAY;
		return lbc_replay_table();
	}
	if (++s->seen < 2) { /* the first time: as usual (the tuning happens here) */
		G.mode = G_EAGER;
		return lb_ops_cuda();
	}
	G.mode = G_CAPTURE;
	G.ntmp = 0;
	if (begin_capture()) /* nothing captured: this time as usual */
		G.mode = G_EAGER;
	return lb_ops_cuda();
}

int lbc_graph_pause(void)
{
	if (G.mode == G_IDLE || G.depth++ > 0)
		return 0;
	if (G.mode == G_REPLAY) {
		launch("at a pause");
	} else if (G.mode == G_CAPTURE) {
		if (end_piece()) {
			G.depth = 0;
			if (G.pauses == 0) {
				G.broken = 1;
				return LB_GRAPH_RERUN;
			}
			fatal("capture failed after part of the segment ran", G.why);
		}
		G.pauses++;
	}
	return 0;
}

void lbc_graph_resume(void)
{
	if (G.mode == G_IDLE || G.depth == 0 || --G.depth > 0)
		return;
	if (G.mode == G_CAPTURE && begin_capture())
		fatal("capture failed after part of the segment ran", G.why);
}

/* A capture that gave no graph: counted, and after MAX_FAILS the key runs without. */
static void failed_capture(struct seg *s, const char *what)
{
	s->fails++;
	s->seen = 1; /* tried again the next time it is seen */
	if (s->fails >= MAX_FAILS)
		s->off = 1;
	fprintf(stderr, "layoutbench-train: warning: CUDA graph of the %s: %s (%s); %s\n",
		seg_name(s), what, G.why[0] ? G.why : "no reason given",
		s->off ? "it runs without a graph from now on" : "it runs without one this time");
}

int lbc_graph_end(int ok)
{
	struct seg *s = G.cur;
	int mode = G.mode, ret = LB_GRAPH_EAGER;

	G.mode = G_IDLE;
	G.cur = NULL;
	if (mode == G_IDLE || !s)
		return LB_GRAPH_EAGER;
	if (G.depth && ok) {
		G.cur = s;
		fatal("a pause without its resume", NULL);
	}
	G.depth = 0;
	switch (mode) {
	case G_REPLAY:
		if (!ok)
			return LB_GRAPH_EAGER;
		G.mode = G_REPLAY;
		G.cur = s;
		launch("at its end");
		if (G.next != s->n)
			fatal("the replay has fewer pauses than its capture", NULL);
		G.mode = G_IDLE;
		G.cur = NULL;
		return LB_GRAPH_REPLAYED;
	case G_CAPTURE:
		if (!ok || (G.broken && G.pauses > 0)) {
			/* the caller's own error: the run ends; a capture being made is dropped */
			cudaGraph_t g = NULL;
			cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;

			if (cudaStreamIsCapturing(G.stream, &st) == cudaSuccess &&
			    st != cudaStreamCaptureStatusNone &&
			    cudaStreamEndCapture(G.stream, &g) == cudaSuccess && g)
				cudaGraphDestroy(g);
			cudaGetLastError();
			drop_tmp();
			if (G.broken && G.pauses == 0) { /* the caller runs it again, eagerly */
				failed_capture(s, "capture failed");
				return LB_GRAPH_RERUN;
			}
			s->seen = 1;
			return LB_GRAPH_EAGER;
		}
		if (end_piece()) {
			drop_tmp();
			if (G.pauses == 0) {
				failed_capture(s, "capture failed");
				return LB_GRAPH_RERUN;
			}
			G.cur = s;
			fatal("capture failed after part of the segment ran", G.why);
		}
		ret = LB_GRAPH_CAPTURED;
		if (G.drop) { /* launched, correct, but not kept */
			drop_tmp();
			failed_capture(s, "not kept");
			return ret;
		}
		if (s->cap < G.ntmp) {
			cudaGraphExec_t *a =
			    (cudaGraphExec_t *)realloc(s->piece, (size_t)G.ntmp * sizeof(*a));

			if (!a)
				lb_fatal(__FILE__, __LINE__, "oom",
					 "CUDA graphs: out of host memory");
			s->piece = a;
			s->cap = G.ntmp;
		}
		memcpy(s->piece, G.tmp, (size_t)G.ntmp * sizeof(*G.tmp));
		s->n = G.ntmp;
		s->ready = 1;
		G.ntmp = 0;
		return ret;
	default:
		return LB_GRAPH_EAGER;
	}
}

/*
 * The replay table (graph.cu): the cuda table with each member that only enqueues device
 * work replaced by a stub that calls the cuda table's member unless a segment is being
 * replayed outside its pauses, when the graphs already hold that work. The members that
 * return a value, wait, move host data or pick streams stay the cuda table's (each of
 * those refuses to run inside a segment outside a pause: lbc_graph_guard).
 */
template <typename T, T M> struct replay_stub;
template <typename... A, void (*lb_ops::*M)(A...)> struct replay_stub<void (*lb_ops::*)(A...), M> {
	static void fn(A... a)
	{
		if (!lbc_graph_skip())
			(lb_ops_cuda()->*M)(a...);
	}
};
#define REPLAY_STUB(t, name) ((t).name = replay_stub<decltype(&lb_ops::name), &lb_ops::name>::fn)

static struct lb_ops replay_table(void)
{
	struct lb_ops t = *lb_ops_cuda();

	REPLAY_STUB(t, zero);
	REPLAY_STUB(t, copy);
	REPLAY_STUB(t, cast);
	REPLAY_STUB(t, fill_normal);
	REPLAY_STUB(t, matmul);
	REPLAY_STUB(t, matmul_add);
	REPLAY_STUB(t, rmsnorm_fwd);
	REPLAY_STUB(t, rmsnorm_bwd);
	REPLAY_STUB(t, rmsnorm_unfused_fwd);
	REPLAY_STUB(t, rmsnorm_unfused_bwd);
	REPLAY_STUB(t, rope_fwd);
	REPLAY_STUB(t, rope_bwd);
	REPLAY_STUB(t, attn_naive_fwd);
	REPLAY_STUB(t, attn_fused_fwd);
	REPLAY_STUB(t, attn_probs_bwd);
	REPLAY_STUB(t, attn_flash_fwd);
	REPLAY_STUB(t, attn_flash_bwd);
	REPLAY_STUB(t, attn_cudnn_fwd);
	REPLAY_STUB(t, attn_cudnn_bwd);
	REPLAY_STUB(t, swiglu_fwd);
	REPLAY_STUB(t, swiglu_bwd);
	REPLAY_STUB(t, embed_fwd);
	REPLAY_STUB(t, embed_bwd);
	REPLAY_STUB(t, xent_max);
	REPLAY_STUB(t, xent_sum);
	REPLAY_STUB(t, xent_grad);
	REPLAY_STUB(t, adamw);
	REPLAY_STUB(t, add);
	REPLAY_STUB(t, acc);
	REPLAY_STUB(t, scale);
	REPLAY_STUB(t, sum_acc);
	REPLAY_STUB(t, sum_sq_acc);
	REPLAY_STUB(t, adamw_scalars);
	REPLAY_STUB(t, clip_scale);
	REPLAY_STUB(t, adamw_dev);
	return t;
}

const struct lb_ops *lbc_replay_table(void)
{
	static const struct lb_ops table = replay_table();

	return &table;
}
