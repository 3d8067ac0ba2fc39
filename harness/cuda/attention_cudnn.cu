/*
 * The `cudnn` attention kernel: cuDNN's fused flash attention through its graph API
 * (cudnn_graph.h, the "backend" descriptors), behind the ops table beside our own flash
 * kernel (attention.cu), with the same math and the same saved state: causal attention over
 * the packed qkv rows (T, (nh + 2*nkv)*D), output (T, nh*D), the log-sum-exp (B, nh, S) f32
 * saved for the backward, which recomputes the probabilities.
 *
 * The graphs are the ones cuDNN's own frontend builds for scaled dot-product attention
 * (its runtime-fusion engines recognise that pattern and run one fused kernel):
 *   forward:  S = Q K^T * scale; causal mask (row >= col, else -inf); softmax with
 *             stats = max + log(sum exp); O = softmax(S) V
 *   backward: sums = rowsum(dO * O); P = exp(S - stats) under the mask; dV = P^T dO;
 *             dS = P * (dO V^T - sums) * scale; dK = dS^T Q; dQ = dS K (through an fp32
 *             accumulator), with grouped-query heads summed into their key/value head.
 * Q, K and V are read in place from qkv through strides and dQ, dK, dV written in place into
 * dqkv, so nothing is copied. The backward's fp32 dQ accumulator and row sums live in the
 * attention scratch (lbc_attn_scratch, the same room flash's backward uses); the plans'
 * workspace is the backend's shared one (lbc_workspace).
 *
 * Each distinct problem (direction, B, S, nh, nkv, D) gets its graph once, cached for the
 * run, and its plan is the fastest of cuDNN's heuristic candidates that finalise (up to
 * MAX_CANDS, mode A's list, else the fallback list), timed on the first call's own operands
 * as the GEMMs are (tune); the first step pays for that. LAYOUTBENCH_CUDNN_TUNE=0 keeps the
 * first candidate; LAYOUTBENCH_TUNE_LOG=1 prints each choice to stderr.
 *
 * cuDNN is loaded at run time (dlopen of libcudnn.so.9): a node without it runs every other
 * attention kernel, and this one stops the run with a message naming the fix. A build whose
 * compiler found no cuDNN headers says so instead.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cuda/cuda_common.cuh"
extern "C" {
#include "common/util.h"
}

#if LB_WITH_CUDNN
#include <cudnn_graph.h>

#define NEED_FIX "use --attention flash, or install cuDNN 9 (libcudnn.so.9) on this node"

/* The library, loaded on first use. */
static struct {
	int tried, ok;
	char why[512];
	cudnnHandle_t h;
	size_t version;
	cudnnStatus_t (*create)(cudnnHandle_t *);
	cudnnStatus_t (*set_stream)(cudnnHandle_t, cudaStream_t);
	size_t (*get_version)(void);
	const char *(*err_string)(cudnnStatus_t);
	void (*last_error)(char *, size_t);
	cudnnStatus_t (*bcreate)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
	cudnnStatus_t (*bfinalize)(cudnnBackendDescriptor_t);
	cudnnStatus_t (*bdestroy)(cudnnBackendDescriptor_t);
	cudnnStatus_t (*bset)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
			      cudnnBackendAttributeType_t, int64_t, const void *);
	cudnnStatus_t (*bget)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
			      cudnnBackendAttributeType_t, int64_t, int64_t *, void *);
	cudnnStatus_t (*bexec)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
} dnn;

#define SYM(field, name)                                                                           \
	do {                                                                                       \
		*(void **)&dnn.field = dlsym(lib, name);                                           \
		if (!dnn.field) {                                                                  \
			snprintf(dnn.why, sizeof(dnn.why), "%s: no symbol %s", soname, name);      \
			return -1;                                                                 \
		}                                                                                  \
	} while (0)

static int load(void)
{
	static const char soname[] = "libcudnn.so.9";
	void *lib;
	cudnnStatus_t st;

	if (dnn.tried)
		return dnn.ok ? 0 : -1;
	dnn.tried = 1;
	lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *e = dlerror();
		snprintf(dnn.why, sizeof(dnn.why), "cannot load %s (%s)", soname, e ? e : "?");
		return -1;
	}
	SYM(create, "cudnnCreate");
	SYM(set_stream, "cudnnSetStream");
	SYM(get_version, "cudnnGetVersion");
	SYM(err_string, "cudnnGetErrorString");
	SYM(last_error, "cudnnGetLastErrorString");
	SYM(bcreate, "cudnnBackendCreateDescriptor");
	SYM(bfinalize, "cudnnBackendFinalize");
	SYM(bdestroy, "cudnnBackendDestroyDescriptor");
	SYM(bset, "cudnnBackendSetAttribute");
	SYM(bget, "cudnnBackendGetAttribute");
	SYM(bexec, "cudnnBackendExecute");
	dnn.version = dnn.get_version();
	if (dnn.version < 90000) {
		snprintf(dnn.why, sizeof(dnn.why),
			 "%s is cuDNN %zu; the graph API needs 9.0 or later", soname, dnn.version);
		return -1;
	}
	st = dnn.create(&dnn.h);
	if (st != CUDNN_STATUS_SUCCESS) {
		snprintf(dnn.why, sizeof(dnn.why), "cudnnCreate: %s", dnn.err_string(st));
		return -1;
	}
	dnn.ok = 1;
	return 0;
}

/* ---- graph building: every descriptor of a graph is kept for the run (a plan may refer to
 * them), so nothing here is destroyed but a variant pack after its call ---- */

enum {
	U_Q = 1, /* the tensors the calls bind: unique ids of the variant pack */
	U_K,
	U_V,
	U_O,
	U_STATS,
	U_DO,
	U_DQ,
	U_DK,
	U_DV,
	U_SUMS,
	U_DQACC,
	U_SCALE,
	U_NEGINF,
	U_ONE,
	U_VIRTUAL = 100 /* the first id of the graph's inner tensors */
};

#define MAX_OPS 32

struct gb {
	cudnnBackendDescriptor_t ops[MAX_OPS];
	int nops;
	int64_t uid;	  /* the next inner tensor's id */
	char fail[256];	  /* the first failed call, empty while all went well */
	const char *what; /* the graph's name, for messages */
};

static void note(struct gb *g, const char *call, cudnnStatus_t st)
{
	char last[256] = "";

	if (g->fail[0])
		return;
	dnn.last_error(last, sizeof(last));
	snprintf(g->fail, sizeof(g->fail), "%s: %s%s%s", call, dnn.err_string(st),
		 last[0] ? ": " : "", last);
}

static cudnnBackendDescriptor_t make(struct gb *g, cudnnBackendDescriptorType_t t)
{
	cudnnBackendDescriptor_t d = NULL;
	cudnnStatus_t st = dnn.bcreate(t, &d);

	if (st != CUDNN_STATUS_SUCCESS) {
		note(g, "cudnnBackendCreateDescriptor", st);
		return NULL;
	}
	return d;
}

static void set(struct gb *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
		cudnnBackendAttributeType_t type, int64_t n, const void *v)
{
	cudnnStatus_t st;

	if (!d || g->fail[0])
		return;
	st = dnn.bset(d, name, type, n, v);
	if (st != CUDNN_STATUS_SUCCESS) {
		char call[64];

		snprintf(call, sizeof(call), "set attribute %d", (int)name);
		note(g, call, st);
	}
}

static void fin(struct gb *g, cudnnBackendDescriptor_t d, const char *what)
{
	cudnnStatus_t st;

	if (!d || g->fail[0])
		return;
	st = dnn.bfinalize(d);
	if (st != CUDNN_STATUS_SUCCESS) {
		char call[96];

		snprintf(call, sizeof(call), "finalize %s", what);
		note(g, call, st);
	}
}

struct dims4 {
	int64_t d[4], s[4];
};

static struct dims4 D4(int64_t d0, int64_t d1, int64_t d2, int64_t d3, int64_t s0, int64_t s1,
		       int64_t s2, int64_t s3) {
	struct dims4 x = {{d0, d1, d2, d3}, {s0, s1, s2, s3}};
	return x;
}

/* A tensor: uid 0 makes an inner (virtual) one with the next free id; reorder: 1 for the
 * F16x16 reordering cuDNN's frontend gives the backward's fp32 dQ accumulator. */
static cudnnBackendDescriptor_t
tensor_ex(struct gb *g, int64_t uid, cudnnDataType_t type, struct dims4 x, bool by_value,
	  int reorder)
{
	cudnnBackendDescriptor_t t = make(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
	bool virt = uid == 0;
	int64_t align = 16;

	if (virt)
		uid = g->uid++;
	set(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
	set(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, x.d);
	set(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, x.s);
	set(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
	set(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
	set(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
	if (by_value)
		set(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
	if (reorder) {
		cudnnBackendTensorReordering_t r = CUDNN_TENSOR_REORDERING_F16x16;

		set(g, t, CUDNN_ATTR_TENSOR_REORDERING_MODE, CUDNN_TYPE_TENSOR_REORDERING_MODE, 1,
		    &r);
	}
	fin(g, t, "tensor");
	return t;
}

static cudnnBackendDescriptor_t tensor(struct gb *g, int64_t uid, cudnnDataType_t type,
				       struct dims4 x)
{
	return tensor_ex(g, uid, type, x, false, 0);
}

/* A scalar passed by value (its host value is bound at each call). */
static cudnnBackendDescriptor_t scalar(struct gb *g, int64_t uid, cudnnDataType_t type)
{
	return tensor_ex(g, uid, type, D4(1, 1, 1, 1, 1, 1, 1, 1), true, 0);
}

static void add_op(struct gb *g, cudnnBackendDescriptor_t op)
{
	if (g->nops < MAX_OPS)
		g->ops[g->nops++] = op;
	else if (!g->fail[0])
		snprintf(g->fail, sizeof(g->fail), "more than %d operations", MAX_OPS);
}

/* y = mode(x[, b[, t]]); axis >= 0: GEN_INDEX's axis. */
static void pw(struct gb *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
	       cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
	       cudnnBackendDescriptor_t y, int64_t axis)
{
	cudnnBackendDescriptor_t p = make(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
	cudnnBackendDescriptor_t op;

	set(g, p, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
	set(g, p, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
	if (axis >= 0)
		set(g, p, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
	fin(g, p, "pointwise");
	op = make(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
	set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
	    &p);
	set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
	if (b)
		set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
		    &b);
	if (t)
		set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
		    &t);
	set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
	fin(g, op, "pointwise operation");
	add_op(g, op);
}

static void reduce(struct gb *g, cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
		   cudnnBackendDescriptor_t y)
{
	cudnnBackendDescriptor_t r = make(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
	cudnnBackendDescriptor_t op;
	cudnnDataType_t f = CUDNN_DATA_FLOAT;

	set(g, r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
	set(g, r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
	fin(g, r, "reduction");
	op = make(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
	set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
	set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
	set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &r);
	fin(g, op, "reduction operation");
	add_op(g, op);
}

static void matmul(struct gb *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
		   cudnnBackendDescriptor_t c)
{
	cudnnBackendDescriptor_t m = make(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
	cudnnBackendDescriptor_t op;
	cudnnDataType_t f = CUDNN_DATA_FLOAT;

	set(g, m, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
	fin(g, m, "matmul");
	op = make(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
	set(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
	set(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
	set(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
	set(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m);
	fin(g, op, "matmul operation");
	add_op(g, op);
}

static void reshape(struct gb *g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y)
{
	cudnnBackendDescriptor_t op = make(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);

	set(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
	set(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
	fin(g, op, "reshape operation");
	add_op(g, op);
}

/* Variants of the graphs (the trainer's is 0; the sweep times the others, see
 * lb_cuda_cudnn_sweep): as cuDNN's own frontend builds them (the index generation in int32,
 * the backward's row sums of dO * O inside the graph, its fp32 dQ accumulator with the F16x16
 * reordering), and the dP-workspace backward (dQ = dS K straight into bf16, no accumulator:
 * what cuDNN's frontend asks for when the backward must be deterministic). */
#define V_IDX_INT32    1
#define V_SUMS_VIRTUAL 2
#define V_DQ_REORDER   4
#define V_DQ_DIRECT    8

/* The causal mask on scores x (B, nh, S, S): keep row >= col, else -inf. */
static cudnnBackendDescriptor_t causal(struct gb *g, cudnnBackendDescriptor_t x, struct dims4 ss,
				       cudnnBackendDescriptor_t neginf, int flags)
{
	cudnnBackendDescriptor_t row = tensor(g, 0, CUDNN_DATA_INT32, ss);
	cudnnBackendDescriptor_t col = tensor(g, 0, CUDNN_DATA_INT32, ss);
	cudnnBackendDescriptor_t keep = tensor(g, 0, CUDNN_DATA_BOOLEAN, ss);
	cudnnBackendDescriptor_t y = tensor(g, 0, CUDNN_DATA_FLOAT, ss);
	cudnnDataType_t ip = flags & V_IDX_INT32 ? CUDNN_DATA_INT32 : CUDNN_DATA_FLOAT;

	pw(g, CUDNN_POINTWISE_GEN_INDEX, ip, x, NULL, NULL, row, 2);
	pw(g, CUDNN_POINTWISE_GEN_INDEX, ip, x, NULL, NULL, col, 3);
	pw(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, NULL, keep, -1);
	pw(g, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, x, neginf, keep, y, -1);
	return y;
}

#define MAX_CANDS 8 /* engine configurations timed per problem */
#define TUNE_RUNS 3 /* timed runs of each, after one warm-up */

/* One cached graph: its plan (while cands > 1, not yet chosen: the candidates, timed on
 * the first call), the plan's workspace need and the host values of its scalars. */
struct graph {
	int used, bwd, b, s, nh, nkv, d;
	cudnnBackendDescriptor_t plan;
	int64_t ws;
	int ncand;
	cudnnBackendDescriptor_t cand[MAX_CANDS];
	int64_t cand_ws[MAX_CANDS];
	float scale, neginf, one;
};

#define MAX_GRAPHS 16
static struct graph graphs[MAX_GRAPHS];

/* Shapes of the problem's tensors, strides in elements. */
struct shapes {
	struct dims4 q, kt, v, vt, o, stats, ss, sst, row1, kr, qacc, qh, kh;
};

static struct shapes shapes_of(int b, int s, int nh, int nkv, int d)
{
	int64_t row = (int64_t)(nh + 2 * nkv) * d, S = s, od = (int64_t)nh * d;
	struct shapes x;

	x.q = D4(b, nh, S, d, S * row, d, row, 1);
	x.kt = D4(b, nkv, d, S, S * row, d, 1, row);
	x.v = D4(b, nkv, S, d, S * row, d, row, 1);
	x.vt = x.kt;
	x.kr = x.v; /* K back as (B, nkv, S, D) */
	x.o = D4(b, nh, S, d, S * od, d, od, 1);
	x.stats = D4(b, nh, S, 1, nh * S, S, 1, 1);
	x.ss = D4(b, nh, S, S, nh * S * S, S * S, S, 1);
	x.sst = D4(b, nh, S, S, nh * S * S, S * S, 1, S);
	x.row1 = D4(b, nh, S, d, nh * S * d, S * d, nh * d, 1);
	x.qacc = D4(b, nh, S, d, nh * S * d, S * d, d, 1);
	x.qh = x.qacc; /* dK, dV of every query head before the sum over a group */
	x.kh = D4(b, nkv, S, d, S * row, d, row, 1);
	return x;
}

static void build_fwd(struct gb *g, const struct shapes *x, int flags)
{
	cudnnBackendDescriptor_t q = tensor(g, U_Q, CUDNN_DATA_BFLOAT16, x->q);
	cudnnBackendDescriptor_t kt = tensor(g, U_K, CUDNN_DATA_BFLOAT16, x->kt);
	cudnnBackendDescriptor_t v = tensor(g, U_V, CUDNN_DATA_BFLOAT16, x->v);
	cudnnBackendDescriptor_t o = tensor(g, U_O, CUDNN_DATA_BFLOAT16, x->o);
	cudnnBackendDescriptor_t stats = tensor(g, U_STATS, CUDNN_DATA_FLOAT, x->stats);
	cudnnBackendDescriptor_t scale = scalar(g, U_SCALE, CUDNN_DATA_FLOAT);
	cudnnBackendDescriptor_t neginf = scalar(g, U_NEGINF, CUDNN_DATA_FLOAT);
	cudnnBackendDescriptor_t s1 = tensor(g, 0, CUDNN_DATA_FLOAT, x->ss);
	cudnnBackendDescriptor_t s2 = tensor(g, 0, CUDNN_DATA_FLOAT, x->ss);
	cudnnBackendDescriptor_t s3, mx, s4, s5, sum, lg, p;

	matmul(g, q, kt, s1);
	pw(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s1, scale, NULL, s2, -1);
	s3 = causal(g, s2, x->ss, neginf, flags);
	mx = tensor(g, 0, CUDNN_DATA_FLOAT, x->stats);
	reduce(g, CUDNN_REDUCE_TENSOR_MAX, s3, mx);
	s4 = tensor(g, 0, CUDNN_DATA_FLOAT, x->ss);
	pw(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, s3, mx, NULL, s4, -1);
	s5 = tensor(g, 0, CUDNN_DATA_FLOAT, x->ss);
	pw(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, s4, NULL, NULL, s5, -1);
	sum = tensor(g, 0, CUDNN_DATA_FLOAT, x->stats);
	reduce(g, CUDNN_REDUCE_TENSOR_ADD, s5, sum);
	lg = tensor(g, 0, CUDNN_DATA_FLOAT, x->stats);
	pw(g, CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, sum, NULL, NULL, lg, -1);
	pw(g, CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, mx, lg, NULL, stats, -1);
	p = tensor(g, 0, CUDNN_DATA_BFLOAT16, x->ss); /* the second matmul reads bf16 */
	pw(g, CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, s5, sum, NULL, p, -1);
	matmul(g, p, v, o);
}

/* dst = the (B, nh, ...) product of every query head, summed over each group of nh/nkv
 * query heads into dst's nkv heads (the grouped-query backward); without groups the
 * product goes straight to dst. */
static void grad_into(struct gb *g, const struct shapes *x, cudnnBackendDescriptor_t a,
		      cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t dst, int grouped)
{
	cudnnBackendDescriptor_t full;

	if (!grouped) {
		matmul(g, a, b, dst);
		return;
	}
	full = tensor(g, 0, CUDNN_DATA_BFLOAT16, x->qh);
	matmul(g, a, b, full);
	reduce(g, CUDNN_REDUCE_TENSOR_ADD, full, dst);
}

static void build_bwd(struct gb *g, const struct shapes *x, int grouped, int flags)
{
	cudnnBackendDescriptor_t q = tensor(g, U_Q, CUDNN_DATA_BFLOAT16, x->q);
	cudnnBackendDescriptor_t kt = tensor(g, U_K, CUDNN_DATA_BFLOAT16, x->kt);
	cudnnBackendDescriptor_t vt = tensor(g, U_V, CUDNN_DATA_BFLOAT16, x->vt);
	cudnnBackendDescriptor_t o = tensor(g, U_O, CUDNN_DATA_BFLOAT16, x->o);
	cudnnBackendDescriptor_t d_o = tensor(g, U_DO, CUDNN_DATA_BFLOAT16, x->o);
	cudnnBackendDescriptor_t stats = tensor(g, U_STATS, CUDNN_DATA_FLOAT, x->stats);
	cudnnBackendDescriptor_t dq = tensor(g, U_DQ, CUDNN_DATA_BFLOAT16, x->q);
	cudnnBackendDescriptor_t dk = tensor(g, U_DK, CUDNN_DATA_BFLOAT16, x->kh);
	cudnnBackendDescriptor_t dv = tensor(g, U_DV, CUDNN_DATA_BFLOAT16, x->kh);
	cudnnBackendDescriptor_t sums =
	    tensor(g, flags & V_SUMS_VIRTUAL ? 0 : U_SUMS, CUDNN_DATA_FLOAT, x->stats);
	cudnnBackendDescriptor_t dqacc =
	    flags & V_DQ_DIRECT
		? NULL
		: tensor_ex(g, U_DQACC, CUDNN_DATA_FLOAT, x->qacc, false, flags & V_DQ_REORDER);
	cudnnBackendDescriptor_t scale = scalar(g, U_SCALE, CUDNN_DATA_FLOAT);
	cudnnBackendDescriptor_t neginf = scalar(g, U_NEGINF, CUDNN_DATA_FLOAT);
	cudnnBackendDescriptor_t one = scalar(g, U_ONE, CUDNN_DATA_FLOAT);
	cudnnBackendDescriptor_t t1 = tensor(g, 0, CUDNN_DATA_FLOAT, x->row1);
	cudnnBackendDescriptor_t t2 = tensor(g, 0, CUDNN_DATA_FLOAT, x->stats);
	cudnnBackendDescriptor_t s1 = tensor(g, 0, CUDNN_DATA_FLOAT, x->ss);
	cudnnBackendDescriptor_t s2 = tensor(g, 0, CUDNN_DATA_FLOAT, x->ss);
	cudnnBackendDescriptor_t s3 = tensor(g, 0, CUDNN_DATA_FLOAT, x->ss);
	cudnnBackendDescriptor_t s4, p, pt, dp, t3, t4, ds, dst, kr;

	/* the row sums of dO * O (the softmax backward's correction) */
	pw(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, d_o, o, NULL, t1, -1);
	reduce(g, CUDNN_REDUCE_TENSOR_ADD, t1, t2);
	pw(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, t2, one, NULL, sums, -1);
	/* the probabilities again, from the saved stats */
	matmul(g, q, kt, s1);
	pw(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s1, scale, NULL, s2, -1);
	pw(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, s2, stats, NULL, s3, -1);
	s4 = causal(g, s3, x->ss, neginf, flags);
	p = tensor(g, 0, CUDNN_DATA_FLOAT, x->ss);
	pw(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, s4, NULL, NULL, p, -1);
	pt = tensor(g, 0, CUDNN_DATA_BFLOAT16, x->sst);
	reshape(g, p, pt);
	grad_into(g, x, pt, d_o, dv, grouped); /* dV = P^T dO */
	dp = tensor(g, 0, CUDNN_DATA_FLOAT, x->ss);
	matmul(g, d_o, vt, dp);
	t3 = tensor(g, 0, CUDNN_DATA_FLOAT, x->ss);
	pw(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, dp, sums, NULL, t3, -1);
	t4 = tensor(g, 0, CUDNN_DATA_FLOAT, x->ss);
	pw(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, t3, p, NULL, t4, -1);
	ds = tensor(g, 0, CUDNN_DATA_FLOAT, x->ss);
	pw(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, t4, scale, NULL, ds, -1);
	dst = tensor(g, 0, CUDNN_DATA_BFLOAT16, x->sst);
	reshape(g, ds, dst);
	grad_into(g, x, dst, q, dk, grouped); /* dK = dS^T Q */
	kr = tensor(g, 0, CUDNN_DATA_BFLOAT16, x->kr);
	reshape(g, kt, kr);
	if (flags & V_DQ_DIRECT) {
		matmul(g, ds, kr, dq); /* dQ = dS K, in one pass */
		return;
	}
	matmul(g, ds, kr, dqacc); /* dQ = dS K, in fp32 */
	pw(g, CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, dqacc, NULL, NULL, dq, -1);
}

static int cudnn_tune_on(void)
{
	const char *v = getenv("LAYOUTBENCH_CUDNN_TUNE");

	return !(v && !strcmp(v, "0"));
}

/* The operation graph, and into gr the execution plans of the heuristic's engine
 * configurations that finalise (mode A's list, or the fallback list when none of mode A's
 * does): up to MAX_CANDS (1 without tuning), each with a workspace no larger than the
 * first's or 64 MiB, so that timing them never grows the memory the run holds. 0 when
 * there is one, else -1 with the reason in g->fail. */
static int plans_of(struct gb *g, struct graph *gr)
{
	static const cudnnBackendHeurMode_t modes[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
	cudnnBackendDescriptor_t og = make(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
	int want = cudnn_tune_on() ? MAX_CANDS : 1;
	char tried[256] = "";

	gr->ncand = 0;
	set(g, og, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &dnn.h);
	set(g, og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->nops, g->ops);
	fin(g, og, "operation graph");
	for (size_t mi = 0; mi < sizeof(modes) / sizeof(modes[0]) && !g->fail[0] && !gr->ncand;
	     mi++) {
		cudnnBackendDescriptor_t heur = make(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
		cudnnBackendDescriptor_t cfg[16];
		int64_t n = 0;

		set(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR,
		    1, &og);
		set(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[mi]);
		fin(g, heur, "heuristics");
		if (g->fail[0])
			break;
		for (int i = 0; i < 16; i++)
			cfg[i] = make(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
		if (g->fail[0] ||
		    dnn.bget(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 16,
			     &n, cfg) != CUDNN_STATUS_SUCCESS)
			n = 0;
		for (int64_t i = 0; i < n && gr->ncand < want; i++) {
			cudnnBackendDescriptor_t plan =
			    make(g, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
			int64_t ws = 0, cnt = 0;

			if (!plan)
				break;
			if (dnn.bset(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
				     &dnn.h) == CUDNN_STATUS_SUCCESS &&
			    dnn.bset(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
				     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
				     &cfg[i]) == CUDNN_STATUS_SUCCESS &&
			    dnn.bfinalize(plan) == CUDNN_STATUS_SUCCESS) {
				if (dnn.bget(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
					     CUDNN_TYPE_INT64, 1, &cnt,
					     &ws) != CUDNN_STATUS_SUCCESS)
					ws = 0;
				if (!gr->ncand ||
				    ws <= (gr->cand_ws[0] > (64 << 20) ? gr->cand_ws[0]
								       : (64 << 20))) {
					gr->cand[gr->ncand] = plan;
					gr->cand_ws[gr->ncand++] = ws;
					continue;
				}
			} else {
				dnn.last_error(tried, sizeof(tried));
			}
			dnn.bdestroy(plan);
		}
	}
	if (!gr->ncand && !g->fail[0])
		snprintf(g->fail, sizeof(g->fail), "no cuDNN engine runs this graph%s%s",
			 tried[0] ? ": " : "", tried);
	if (!gr->ncand)
		return -1;
	gr->plan = gr->cand[0];
	gr->ws = gr->cand_ws[0];
	for (int i = 1; i < gr->ncand; i++)
		if (gr->cand_ws[i] > gr->ws)
			gr->ws = gr->cand_ws[i];
	return 0;
}

/* The graph of a problem, built on first use; every failure ends the run here. NULL only
 * inside a CUDA graph capture that can still fall back (lbc_graph_abort): a graph is
 * built, and its plan tuned, where the device can be waited for. */
static struct graph *graph_of(int bwd, int b, int s, int nh, int nkv, int d)
{
	struct graph *gr = NULL;
	struct gb g;
	struct shapes x;

	if (load())
		lb_fatal(__FILE__, __LINE__, "error", "--attention cudnn: %s; %s", dnn.why,
			 NEED_FIX);
	for (int i = 0; i < MAX_GRAPHS; i++) {
		struct graph *c = &graphs[i];

		if (c->used && c->bwd == bwd && c->b == b && c->s == s && c->nh == nh &&
		    c->nkv == nkv && c->d == d)
			return c;
		if (!c->used && !gr)
			gr = c;
	}
	if (!gr)
		lb_fatal(__FILE__, __LINE__, "error",
			 "--attention cudnn: more than %d attention shapes in one run", MAX_GRAPHS);
	if (lbc_graph_abort("a cuDNN attention plan would be built inside the capture"))
		return NULL;
	memset(&g, 0, sizeof(g));
	g.uid = U_VIRTUAL;
	g.what = bwd ? "backward" : "forward";
	x = shapes_of(b, s, nh, nkv, d);
	if (bwd)
		build_bwd(&g, &x, nh != nkv, 0);
	else
		build_fwd(&g, &x, 0);
	if (g.fail[0] || plans_of(&g, gr))
		lb_fatal(__FILE__, __LINE__, "error",
			 "--attention cudnn: cuDNN %zu cannot build the attention %s for B=%d S=%d "
			 "heads=%d kv-heads=%d D=%d: %s; use --attention flash",
			 dnn.version, g.what, b, s, nh, nkv, d, g.fail);
	gr->used = 1;
	gr->bwd = bwd;
	gr->b = b;
	gr->s = s;
	gr->nh = nh;
	gr->nkv = nkv;
	gr->d = d;
	gr->scale = 1.0f / sqrtf((float)d);
	gr->neginf = -INFINITY;
	gr->one = 1.0f;
	return gr;
}

/* Runs plan with the variant pack vp on the backend's current stream, the backward's
 * accumulator (acc, bytes; NULL for the forward) cleared first: cuDNN before 9.6 does not
 * clear it itself, later releases may, and the fill costs microseconds. */
static cudnnStatus_t exec(cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t vp, void *acc,
			  size_t acc_bytes)
{
	if (acc && cudaMemsetAsync(acc, 0, acc_bytes, lbc_stream) != cudaSuccess)
		return CUDNN_STATUS_EXECUTION_FAILED;
	return dnn.bexec(dnn.h, plan, vp);
}

/*
 * Chooses gr's plan among its candidates on the first call: each runs once to warm up and
 * then TUNE_RUNS times between two events, on this call's operands (every candidate writes
 * the same outputs, and the chosen one runs again after), and the least time wins; the
 * others are destroyed. A candidate that fails to run is left out; when none runs, the
 * first is kept and the real call reports its error.
 */
static void tune(struct graph *gr, cudnnBackendDescriptor_t vp, void *acc, size_t acc_bytes)
{
	cudaEvent_t ev[2 * MAX_CANDS];
	int ok[MAX_CANDS], best = 0, last = -1;
	float ms, best_ms = -1, first_ms = -1;

	memset(ev, 0, sizeof(ev));
	for (int i = 0; i < gr->ncand; i++) {
		ok[i] = cudaEventCreate(&ev[2 * i]) == cudaSuccess &&
			cudaEventCreate(&ev[2 * i + 1]) == cudaSuccess &&
			exec(gr->cand[i], vp, acc, acc_bytes) == CUDNN_STATUS_SUCCESS &&
			cudaEventRecord(ev[2 * i], lbc_stream) == cudaSuccess;
		for (int r = 0; r < TUNE_RUNS && ok[i]; r++)
			ok[i] = exec(gr->cand[i], vp, acc, acc_bytes) == CUDNN_STATUS_SUCCESS;
		ok[i] = ok[i] && cudaEventRecord(ev[2 * i + 1], lbc_stream) == cudaSuccess;
		if (ok[i])
			last = i;
	}
	if (last >= 0 && cudaEventSynchronize(ev[2 * last + 1]) == cudaSuccess)
		for (int i = 0; i < gr->ncand; i++)
			if (ok[i] &&
			    cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]) == cudaSuccess) {
				if (!i)
					first_ms = ms;
				if (best_ms < 0 || ms < best_ms) {
					best_ms = ms;
					best = i;
				}
			}
	cudaStreamSynchronize(lbc_stream);
	cudaGetLastError(); /* a candidate's failure is no error of the run */
	for (int i = 0; i < 2 * gr->ncand; i++)
		if (ev[i])
			cudaEventDestroy(ev[i]);
	if (getenv("LAYOUTBENCH_TUNE_LOG"))
		fprintf(stderr,
			"cudnn %s B=%d S=%d heads=%d kv-heads=%d D=%d: candidate %d of %d, %.3f ms "
			"(the first: %.3f ms)\n",
			gr->bwd ? "backward" : "forward", gr->b, gr->s, gr->nh, gr->nkv, gr->d,
			best, gr->ncand, best_ms / TUNE_RUNS, first_ms / TUNE_RUNS);
	for (int i = 0; i < gr->ncand; i++)
		if (i != best)
			dnn.bdestroy(gr->cand[i]);
	gr->plan = gr->cand[best];
	gr->ws = gr->cand_ws[best];
	gr->ncand = 1;
}

/* Bind the tensors and run the plan (chosen on the first call) on the backend's current
 * stream; acc as for exec. */
static void run(struct graph *gr, int n, const int64_t *uids, void *const *ptrs, void *acc,
		size_t acc_bytes)
{
	cudnnBackendDescriptor_t vp = NULL;
	void *ws;
	cudnnStatus_t st;
	const char *call = "cudnnSetStream";

	/* the first call's tuning waits for the device: never inside a capture */
	if (gr->ncand > 1 &&
	    lbc_graph_abort("a cuDNN attention plan would be tuned inside the capture"))
		return;
	ws = lbc_workspace((size_t)gr->ws);
	st = dnn.set_stream(dnn.h, lbc_stream);
	if (st == CUDNN_STATUS_SUCCESS) {
		call = "variant pack";
		st = dnn.bcreate(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
	}
	if (st == CUDNN_STATUS_SUCCESS)
		st = dnn.bset(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
	if (st == CUDNN_STATUS_SUCCESS)
		st = dnn.bset(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n,
			      ptrs);
	if (st == CUDNN_STATUS_SUCCESS)
		st = dnn.bset(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
	if (st == CUDNN_STATUS_SUCCESS)
		st = dnn.bfinalize(vp);
	if (st == CUDNN_STATUS_SUCCESS && gr->ncand > 1)
		tune(gr, vp, acc, acc_bytes);
	if (st == CUDNN_STATUS_SUCCESS) {
		call = "cudnnBackendExecute";
		st = exec(gr->plan, vp, acc, acc_bytes);
	}
	if (vp)
		dnn.bdestroy(vp);
	if (st != CUDNN_STATUS_SUCCESS) {
		char last[256] = "";

		dnn.last_error(last, sizeof(last));
		if (lbc_graph_soft(call, dnn.err_string(st)))
			return;
		lb_fatal(__FILE__, __LINE__, "error", "--attention cudnn: %s (%s%s%s)", call,
			 dnn.err_string(st), last[0] ? ": " : "", last);
	}
}

void lbc_attn_cudnn_fwd(void *out, void *lse, void *scratch, const void *qkv, int b, int s, int nh,
			int nkv, int d)
{
	struct graph *gr = graph_of(0, b, s, nh, nkv, d);
	const act_t *base = (const act_t *)qkv;
	int64_t uids[] = {U_Q, U_K, U_V, U_O, U_STATS, U_SCALE, U_NEGINF};

	(void)scratch;
	if (!gr)
		return;
	void *ptrs[] = {(void *)base,
			(void *)(base + (size_t)nh * d),
			(void *)(base + (size_t)(nh + nkv) * d),
			out,
			lse,
			&gr->scale,
			&gr->neginf};

	run(gr, 7, uids, ptrs, NULL, 0);
}

void lbc_attn_cudnn_bwd(void *dqkv, void *scratch, const void *dout, const void *out,
			const void *lse, const void *qkv, int b, int s, int nh, int nkv, int d)
{
	struct graph *gr = graph_of(1, b, s, nh, nkv, d);
	const act_t *base = (const act_t *)qkv;
	act_t *dbase = (act_t *)dqkv;
	float *dqacc = (float *)scratch; /* B*S*nh*D, then the row sums B*nh*S */
	float *sums = dqacc + (size_t)b * s * nh * d;
	int64_t uids[] = {U_Q,	U_K,  U_V,    U_O,     U_DO,	U_STATS,  U_DQ,
			  U_DK, U_DV, U_SUMS, U_DQACC, U_SCALE, U_NEGINF, U_ONE};

	if (!gr)
		return;
	void *ptrs[] = {(void *)base,
			(void *)(base + (size_t)nh * d),
			(void *)(base + (size_t)(nh + nkv) * d),
			(void *)out,
			(void *)dout,
			(void *)lse,
			dbase,
			dbase + (size_t)nh * d,
			dbase + (size_t)(nh + nkv) * d,
			sums,
			dqacc,
			&gr->scale,
			&gr->neginf,
			&gr->one};

	run(gr, 14, uids, ptrs, dqacc, (size_t)b * s * nh * d * sizeof(float));
}

/* ---- the variant sweep (cuda_bench.h lb_cuda_cudnn_sweep; bench/bench_attn.c) ----
 *
 * For one shape, each variant of the forward and backward graphs is built, and every engine
 * configuration cuDNN offers for it is made into a plan and run: the heuristic's lists in
 * modes A, B and fallback, every engine of the graph with its default knobs, and then, for
 * the engine of the variant's fastest plan so far, each of its knobs through its range (one
 * knob at a time, at most SW_KNOB_VALUES values each): tile shapes, CTA counts, stream-K and
 * the like are how an engine spreads the causal mask's rows over the SMs. Each plan's
 * outputs are checked against the trainer's own plan's (the reference; the trainer's plan
 * is itself checked against the fp64 reference by test_gpu_ops and bench_kernels) and it is
 * timed (the least of SW_ROUNDS means of SW_RUNS calls, each call with the accumulator's
 * fill where the variant has one, as the trainer's calls do). Plans that do not finalise,
 * need more than SW_WS_MAX of workspace or fail to run are counted and left out. */

#define SW_MAX_CFG     96
#define SW_KNOB_VALUES 8
#define SW_WS_MAX      (4ull << 30)
#define SW_RUNS	       10
#define SW_ROUNDS      3

struct sw_variant {
	const char *name;
	int bwd, flags;
};

static const struct sw_variant sw_variants[] = {
    {"trainer", 0, 0},
    {"frontend", 0, V_IDX_INT32},
    {"trainer", 1, 0},
    {"frontend", 1, V_IDX_INT32 | V_SUMS_VIRTUAL | V_DQ_REORDER},
    {"dq-reorder", 1, V_DQ_REORDER},
    {"sums-virtual", 1, V_SUMS_VIRTUAL},
    {"dp-workspace", 1, V_IDX_INT32 | V_SUMS_VIRTUAL | V_DQ_DIRECT},
};

/* Device buffers of the sweep. */
struct sw_bufs {
	act_t *qkv, *out, *dout, *dqkv, *out_ref, *dqkv_ref;
	float *lse, *lse_ref, *scratch;
	unsigned *cmp; /* max |a - b| and max |b|, as float bits */
	void *ws;
	size_t ws_bytes;
	int b, s, nh, nkv, d;
};

/* max |a - b| and max |b| over n elements into cmp[0], cmp[1] (non-negative floats order
 * as their bits; a NaN difference counts as +inf). */
template <typename T>
static __global__ void sw_cmp_kernel(const T *a, const T *b, size_t n, unsigned *cmp)
{
	float dm = 0, bm = 0;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float x = (float)a[i], y = (float)b[i], d = fabsf(x - y);

		if (!(d <= dm))
			dm = d == d ? d : INFINITY;
		bm = fmaxf(bm, fabsf(y));
	}
	atomicMax(&cmp[0], __float_as_uint(dm));
	atomicMax(&cmp[1], __float_as_uint(bm));
}

/* 0 when a matches the reference b: max |a - b| <= rtol max |b| + atol. */
template <typename T>
static int sw_check(struct sw_bufs *m, const T *a, const T *b, size_t n, double rtol, double atol,
		    double *err)
{
	unsigned h[2] = {0, 0};
	float dm, bm;

	if (cudaMemsetAsync(m->cmp, 0, 2 * sizeof(unsigned), lbc_stream) != cudaSuccess)
		return -1;
	sw_cmp_kernel<T><<<1024, 256, 0, lbc_stream>>>(a, b, n, m->cmp);
	if (cudaMemcpyAsync(h, m->cmp, sizeof(h), cudaMemcpyDeviceToHost, lbc_stream) !=
		cudaSuccess ||
	    cudaStreamSynchronize(lbc_stream) != cudaSuccess)
		return -1;
	memcpy(&dm, &h[0], 4);
	memcpy(&bm, &h[1], 4);
	*err = bm > 0 ? dm / bm : dm;
	return dm <= rtol * bm + atol ? 0 : 1;
}

/* The variant pack of a variant's graph (the tensors it binds, and nothing else). */
static int sw_pack(const struct sw_bufs *m, const struct sw_variant *v, struct graph *gr,
		   int64_t *uids, void **ptrs)
{
	const act_t *q = m->qkv, *dq = m->dqkv;
	size_t hd = (size_t)m->nh * m->d, kvd = (size_t)m->nkv * m->d;
	int n = 0;

#define BIND(u, p)                                                                                 \
	do {                                                                                       \
		uids[n] = (u);                                                                     \
		ptrs[n++] = (void *)(p);                                                           \
	} while (0)
	BIND(U_Q, q);
	BIND(U_K, q + hd);
	BIND(U_V, q + hd + kvd);
	BIND(U_SCALE, &gr->scale);
	BIND(U_NEGINF, &gr->neginf);
	if (!v->bwd) {
		BIND(U_O, m->out);
		BIND(U_STATS, m->lse);
		return n;
	}
	BIND(U_O, m->out_ref);
	BIND(U_DO, m->dout);
	BIND(U_STATS, m->lse_ref);
	BIND(U_DQ, dq);
	BIND(U_DK, dq + hd);
	BIND(U_DV, dq + hd + kvd);
	BIND(U_ONE, &gr->one);
	if (!(v->flags & V_SUMS_VIRTUAL))
		BIND(U_SUMS, m->scratch + (size_t)m->b * m->s * hd);
	if (!(v->flags & V_DQ_DIRECT))
		BIND(U_DQACC, m->scratch);
#undef BIND
	return n;
}

/* One call of plan on the sweep's buffers; the accumulator filled first where it exists. */
static cudnnStatus_t sw_exec(struct sw_bufs *m, const struct sw_variant *v,
			     cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t vp)
{
	size_t acc = v->bwd && !(v->flags & V_DQ_DIRECT)
			 ? (size_t)m->b * m->s * m->nh * m->d * sizeof(float)
			 : 0;

	return exec(plan, vp, acc ? m->scratch : NULL, acc);
}

/* A variant pack for plan's workspace; NULL on failure. */
static cudnnBackendDescriptor_t sw_vpack(struct sw_bufs *m, const struct sw_variant *v,
					 struct graph *gr)
{
	cudnnBackendDescriptor_t vp = NULL;
	int64_t uids[16];
	void *ptrs[16];
	int n = sw_pack(m, v, gr, uids, ptrs);

	if (dnn.bcreate(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp) != CUDNN_STATUS_SUCCESS)
		return NULL;
	if (dnn.bset(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids) ||
	    dnn.bset(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs) ||
	    dnn.bset(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &m->ws) ||
	    dnn.bfinalize(vp)) {
		dnn.bdestroy(vp);
		return NULL;
	}
	return vp;
}

/* Seconds per call of plan (the least of SW_ROUNDS means), or -1. */
static double sw_time(struct sw_bufs *m, const struct sw_variant *v, cudnnBackendDescriptor_t plan,
		      cudnnBackendDescriptor_t vp)
{
	cudaEvent_t e0 = NULL, e1 = NULL;
	double best = -1;
	float ms;

	if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
		goto out;
	for (int r = 0; r < SW_ROUNDS; r++) {
		if (cudaEventRecord(e0, lbc_stream) != cudaSuccess)
			goto out;
		for (int i = 0; i < SW_RUNS; i++)
			if (sw_exec(m, v, plan, vp) != CUDNN_STATUS_SUCCESS)
				goto out;
		if (cudaEventRecord(e1, lbc_stream) != cudaSuccess ||
		    cudaEventSynchronize(e1) != cudaSuccess ||
		    cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
			goto out;
		if (best < 0 || ms * 1e-3 / SW_RUNS < best)
			best = ms * 1e-3 / SW_RUNS;
	}
out:
	cudaStreamSynchronize(lbc_stream);
	cudaGetLastError();
	if (e0)
		cudaEventDestroy(e0);
	if (e1)
		cudaEventDestroy(e1);
	return best;
}

/* The engine (global index) of cfg, or -1. */
static int64_t sw_engine_of(cudnnBackendDescriptor_t cfg)
{
	cudnnBackendDescriptor_t e = NULL;
	int64_t idx = -1, cnt = 0;

	if (dnn.bcreate(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &e) != CUDNN_STATUS_SUCCESS)
		return -1;
	if (dnn.bget(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cnt,
		     &e) != CUDNN_STATUS_SUCCESS ||
	    dnn.bget(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &cnt, &idx) !=
		CUDNN_STATUS_SUCCESS)
		idx = -1;
	dnn.bdestroy(e);
	return idx;
}

/* The engine of global index idx on og (finalised), or NULL. */
static cudnnBackendDescriptor_t sw_engine(cudnnBackendDescriptor_t og, int64_t idx)
{
	cudnnBackendDescriptor_t e = NULL;

	if (dnn.bcreate(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &e) != CUDNN_STATUS_SUCCESS)
		return NULL;
	if (dnn.bset(e, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &og) ||
	    dnn.bset(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &idx) ||
	    dnn.bfinalize(e)) {
		dnn.bdestroy(e);
		return NULL;
	}
	return e;
}

/* An engine configuration of engine e, with one knob set (ktype < 0: the defaults). */
static cudnnBackendDescriptor_t sw_cfg(cudnnBackendDescriptor_t e, int ktype, int64_t kval)
{
	cudnnBackendDescriptor_t cfg = NULL, ch = NULL;
	cudnnBackendKnobType_t kt = (cudnnBackendKnobType_t)ktype;
	int bad;

	if (dnn.bcreate(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg) != CUDNN_STATUS_SUCCESS)
		return NULL;
	bad = dnn.bset(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &e) !=
	      CUDNN_STATUS_SUCCESS;
	if (!bad && ktype >= 0) {
		bad =
		    dnn.bcreate(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &ch) ||
		    dnn.bset(ch, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &kt) ||
		    dnn.bset(ch, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &kval) ||
		    dnn.bfinalize(ch) ||
		    dnn.bset(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
			     1, &ch);
	}
	if (bad || dnn.bfinalize(cfg)) {
		if (ch)
			dnn.bdestroy(ch);
		dnn.bdestroy(cfg);
		return NULL;
	}
	return cfg; /* the choice stays alive with it (a few bytes, for the sweep's life) */
}

struct sw_cand {
	cudnnBackendDescriptor_t cfg;
	char label[64];
};

/* Appends the heuristic's list of mode to c (up to want); how many it added. */
static int sw_heur(cudnnBackendDescriptor_t og, cudnnBackendHeurMode_t mode, const char *name,
		   int want, struct sw_cand *c, int n, int cap)
{
	cudnnBackendDescriptor_t heur = NULL, cfg[16];
	int64_t got = 0;
	int added = 0;

	memset(cfg, 0, sizeof(cfg));
	if (dnn.bcreate(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur) != CUDNN_STATUS_SUCCESS)
		return 0;
	if (dnn.bset(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
		     &og) ||
	    dnn.bset(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) ||
	    dnn.bfinalize(heur))
		goto out;
	for (int i = 0; i < 16; i++)
		if (dnn.bcreate(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[i]))
			goto out;
	if (dnn.bget(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 16, &got,
		     cfg))
		got = 0;
	for (int64_t i = 0; i < got && added < want && n + added < cap; i++) {
		c[n + added].cfg = cfg[i];
		snprintf(c[n + added].label, sizeof(c[0].label), "heuristic %s #%d", name, (int)i);
		cfg[i] = NULL; /* kept */
		added++;
	}
out:
	for (int i = 0; i < 16; i++)
		if (cfg[i])
			dnn.bdestroy(cfg[i]);
	dnn.bdestroy(heur);
	return added;
}

/* The plan of cfg (finalised) and its workspace; NULL when it does not finalise. */
static cudnnBackendDescriptor_t sw_plan(cudnnBackendDescriptor_t cfg, int64_t *ws, char *json,
					size_t jlen)
{
	cudnnBackendDescriptor_t plan = NULL;
	int64_t cnt = 0;

	*ws = 0;
	json[0] = '\0';
	if (dnn.bcreate(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != CUDNN_STATUS_SUCCESS)
		return NULL;
	if (dnn.bset(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &dnn.h) ||
	    dnn.bset(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR,
		     1, &cfg) ||
	    dnn.bfinalize(plan)) {
		dnn.bdestroy(plan);
		return NULL;
	}
	if (dnn.bget(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &cnt, ws))
		*ws = 0;
	if (dnn.bget(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
		     (int64_t)jlen - 1, &cnt, json) ||
	    cnt < 0)
		cnt = 0;
	json[cnt < (int64_t)jlen ? cnt : (int64_t)jlen - 1] = '\0';
	for (char *p = json; *p; p++) /* one line, one field */
		if (*p == '\t' || *p == '\n' || *p == '\r')
			*p = ' ';
	return plan;
}

/* Every result line of the sweep goes to out as
 *   SWEEP <dir> <variant> <candidate> engine=<e> ws_mib=<w> <ms> <TFLOP/s> <check> <json>
 * tab-separated; the fastest checked plan of each direction, and of each variant, follow. */
struct sw_best {
	double s;
	char what[160];
};

static void sw_variant_run(struct sw_bufs *m, const struct sw_variant *v, double flops,
			   double t_end, FILE *out, struct sw_best *best, int *tried, int *failed)
{
	struct gb g;
	struct shapes x = shapes_of(m->b, m->s, m->nh, m->nkv, m->d);
	struct graph gr;
	struct sw_cand c[SW_MAX_CFG];
	cudnnBackendDescriptor_t og;
	uint64_t seen[SW_MAX_CFG]; /* hashes of the plans' JSON: each plan timed once */
	int n = 0, nseen = 0;
	int64_t best_engine = -1, count = 0, cnt = 0;
	double vbest = -1;

	memset(&g, 0, sizeof(g));
	memset(&gr, 0, sizeof(gr));
	g.uid = U_VIRTUAL;
	g.what = v->bwd ? "backward" : "forward";
	gr.scale = 1.0f / sqrtf((float)m->d);
	gr.neginf = -INFINITY;
	gr.one = 1.0f;
	if (v->bwd)
		build_bwd(&g, &x, m->nh != m->nkv, v->flags);
	else
		build_fwd(&g, &x, v->flags);
	og = make(&g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
	set(&g, og, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &dnn.h);
	set(&g, og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g.nops, g.ops);
	fin(&g, og, "operation graph");
	if (g.fail[0]) {
		fprintf(out, "SWEEP\t%s\t%s\t-\t-\t-\t-\t-\tno graph: %s\t\n", g.what, v->name,
			g.fail);
		return;
	}
	n += sw_heur(og, CUDNN_HEUR_MODE_A, "A", 16, c, n, SW_MAX_CFG);
	n += sw_heur(og, CUDNN_HEUR_MODE_B, "B", 16, c, n, SW_MAX_CFG);
	n += sw_heur(og, CUDNN_HEUR_MODE_FALLBACK, "fallback", 8, c, n, SW_MAX_CFG);
	if (dnn.bget(og, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1, &cnt,
		     &count))
		count = 0;
	for (int64_t e = 0; e < count && n < SW_MAX_CFG; e++) {
		cudnnBackendDescriptor_t eng = sw_engine(og, e);

		if (eng && (c[n].cfg = sw_cfg(eng, -1, 0))) {
			snprintf(c[n].label, sizeof(c[0].label), "engine %lld, default knobs",
				 (long long)e);
			n++;
		}
	}
	/* the candidates, then (once) the knobs of the engine that was fastest */
	for (int i = 0, knobs_done = 0; i < n || !knobs_done; i++) {
		cudnnBackendDescriptor_t plan, vp;
		char json[4096], check[48];
		int64_t ws = 0, eng;
		double t, err = 0;
		int bad;

		if (i >= n) { /* the knob pass: each knob of the best engine through its range */
			cudnnBackendDescriptor_t e =
			    best_engine >= 0 ? sw_engine(og, best_engine) : NULL;
			cudnnBackendDescriptor_t info[CUDNN_KNOB_TYPE_COUNTS];
			int64_t ninfo = 0;

			knobs_done = 1;
			if (!e)
				break;
			memset(info, 0, sizeof(info));
			for (int k = 0; k < CUDNN_KNOB_TYPE_COUNTS; k++)
				if (dnn.bcreate(CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR, &info[k]))
					info[k] = NULL;
			if (dnn.bget(e, CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR,
				     CUDNN_KNOB_TYPE_COUNTS, &ninfo, info))
				ninfo = 0;
			for (int64_t k = 0; k < ninfo && n < SW_MAX_CFG; k++) {
				cudnnBackendKnobType_t kt;
				int64_t lo = 0, hi = -1, st = 1, cnt = 0, span;

				if (!info[k] ||
				    dnn.bget(info[k], CUDNN_ATTR_KNOB_INFO_TYPE,
					     CUDNN_TYPE_KNOB_TYPE, 1, &cnt, &kt) ||
				    dnn.bget(info[k], CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE,
					     CUDNN_TYPE_INT64, 1, &cnt, &lo) ||
				    dnn.bget(info[k], CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE,
					     CUDNN_TYPE_INT64, 1, &cnt, &hi) ||
				    dnn.bget(info[k], CUDNN_ATTR_KNOB_INFO_STRIDE, CUDNN_TYPE_INT64,
					     1, &cnt, &st))
					continue;
				if (st < 1)
					st = 1;
				span = (hi - lo) / st + 1; /* values lo, lo + st, ..., hi */
				for (int64_t j = 0;
				     j < span && j < SW_KNOB_VALUES && n < SW_MAX_CFG; j++) {
					int64_t val =
					    lo + (span <= SW_KNOB_VALUES
						      ? j
						      : j * (span - 1) / (SW_KNOB_VALUES - 1)) *
						     st;

					if (!(c[n].cfg = sw_cfg(e, (int)kt, val)))
						continue;
					snprintf(c[n].label, sizeof(c[0].label),
						 "engine %lld, knob %d = %lld",
						 (long long)best_engine, (int)kt, (long long)val);
					n++;
				}
			}
			for (int k = 0; k < CUDNN_KNOB_TYPE_COUNTS; k++)
				if (info[k])
					dnn.bdestroy(info[k]);
			if (i >= n)
				break;
		}
		if (lb_now_s() > t_end) {
			fprintf(out, "SWEEP\t%s\t%s\t(the rest)\t-\t-\t-\t-\tskipped: time\t\n",
				g.what, v->name);
			break;
		}
		(*tried)++;
		eng = sw_engine_of(c[i].cfg);
		plan = sw_plan(c[i].cfg, &ws, json, sizeof(json));
		if (!plan) {
			(*failed)++;
			continue;
		}
		if (json[0]) { /* the same plan through another list: timed once */
			uint64_t h = 0xcbf29ce484222325ull;
			int dup = 0;

			for (const char *p = json; *p; p++)
				h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
			for (int k = 0; k < nseen && !dup; k++)
				dup = seen[k] == h;
			if (dup) {
				dnn.bdestroy(plan);
				continue;
			}
			if (nseen < SW_MAX_CFG)
				seen[nseen++] = h;
		}
		if ((uint64_t)ws > SW_WS_MAX ||
		    ((size_t)ws > m->ws_bytes && (cudaFree(m->ws), m->ws = NULL, m->ws_bytes = 0,
						  cudaMalloc(&m->ws, (size_t)ws) != cudaSuccess))) {
			cudaGetLastError();
			fprintf(out,
				"SWEEP\t%s\t%s\t%s\tengine=%lld\tws_mib=%.0f\t-\t-\tskipped: "
				"workspace\t%s\n",
				g.what, v->name, c[i].label, (long long)eng, ws / 1048576.0, json);
			dnn.bdestroy(plan);
			continue;
		}
		if ((size_t)ws > m->ws_bytes)
			m->ws_bytes = (size_t)ws;
		vp = sw_vpack(m, v, &gr);
		/* the outputs NaN first (all bits set): what a plan leaves unwritten fails */
		if (v->bwd)
			cudaMemsetAsync(m->dqkv, 0xff,
					(size_t)m->b * m->s * (m->nh + 2 * m->nkv) * m->d *
					    sizeof(act_t),
					lbc_stream);
		else if (cudaMemsetAsync(m->out, 0xff,
					 (size_t)m->b * m->s * m->nh * m->d * sizeof(act_t),
					 lbc_stream) == cudaSuccess)
			cudaMemsetAsync(m->lse, 0xff, (size_t)m->b * m->nh * m->s * sizeof(float),
					lbc_stream);
		if (!vp || sw_exec(m, v, plan, vp) != CUDNN_STATUS_SUCCESS) {
			cudaStreamSynchronize(lbc_stream);
			cudaGetLastError();
			(*failed)++;
			snprintf(check, sizeof(check), "failed to run");
			t = -1;
		} else {
			bad =
			    v->bwd
				? sw_check<act_t>(m, m->dqkv, m->dqkv_ref,
						  (size_t)m->b * m->s * (m->nh + 2 * m->nkv) * m->d,
						  1.0 / 32, 0, &err)
				: sw_check<act_t>(m, m->out, m->out_ref,
						  (size_t)m->b * m->s * m->nh * m->d, 1.0 / 64, 0,
						  &err);
			if (!v->bwd && !bad) {
				double lerr = 0;

				bad =
				    sw_check<float>(m, m->lse, m->lse_ref,
						    (size_t)m->b * m->nh * m->s, 1e-3, 1e-3, &lerr);
				err = err > lerr ? err : lerr;
			}
			snprintf(check, sizeof(check), "%s (rel %.1e)", bad ? "WRONG" : "ok", err);
			t = bad ? -1 : sw_time(m, v, plan, vp);
		}
		if (vp)
			dnn.bdestroy(vp);
		fprintf(out,
			"SWEEP\t%s\t%s\t%s\tengine=%lld\tws_mib=%.0f\t%.4f\t%.1f\t%s\t%.300s\n",
			g.what, v->name, c[i].label, (long long)eng, ws / 1048576.0,
			t > 0 ? t * 1e3 : -1.0, t > 0 ? flops / t / 1e12 : -1.0, check, json);
		fflush(out);
		if (t > 0 && (vbest < 0 || t < vbest)) {
			vbest = t;
			best_engine = eng;
		}
		if (t > 0 && (best[v->bwd].s < 0 || t < best[v->bwd].s)) {
			best[v->bwd].s = t;
			snprintf(best[v->bwd].what, sizeof(best[0].what), "%s, %s (engine %lld)",
				 v->name, c[i].label, (long long)eng);
		}
		dnn.bdestroy(plan);
	}
	for (int i = 0; i < n; i++)
		if (c[i].cfg)
			dnn.bdestroy(c[i].cfg);
	fprintf(out, "VARIANT\t%s\t%s\t%.4f ms\t%.1f TFLOP/s\n", g.what, v->name,
		vbest > 0 ? vbest * 1e3 : -1.0, vbest > 0 ? flops / vbest / 1e12 : -1.0);
}

/* Seconds per call of the trainer's own kernel (its tuned plan), -1 on failure. */
static double sw_trainer_time(struct sw_bufs *m, int bwd)
{
	cudaEvent_t e0 = NULL, e1 = NULL;
	double best = -1;
	float ms;

	if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
		goto out;
	for (int r = 0; r < SW_ROUNDS; r++) {
		cudaEventRecord(e0, lbc_stream);
		for (int i = 0; i < SW_RUNS; i++) {
			if (bwd)
				lbc_attn_cudnn_bwd(m->dqkv, m->scratch, m->dout, m->out_ref,
						   m->lse_ref, m->qkv, m->b, m->s, m->nh, m->nkv,
						   m->d);
			else
				lbc_attn_cudnn_fwd(m->out, m->lse, m->scratch, m->qkv, m->b, m->s,
						   m->nh, m->nkv, m->d);
		}
		if (cudaEventRecord(e1, lbc_stream) != cudaSuccess ||
		    cudaEventSynchronize(e1) != cudaSuccess ||
		    cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
			goto out;
		if (best < 0 || ms * 1e-3 / SW_RUNS < best)
			best = ms * 1e-3 / SW_RUNS;
	}
out:
	cudaGetLastError();
	if (e0)
		cudaEventDestroy(e0);
	if (e1)
		cudaEventDestroy(e1);
	return best;
}

extern "C" int lb_cuda_cudnn_sweep(int b, int s, int nh, int nkv, int d, double max_s, FILE *out,
				   double *trainer, double *best_tflops)
{
	const struct lb_ops *o = lb_ops_cuda();
	size_t T = (size_t)b * s, qkv_n = T * (nh + 2 * nkv) * d, o_n = T * nh * d;
	double fwd_flops = 4.0 * b * nh * (double)s * s * d / 2, bwd_flops = 2.5 * fwd_flops;
	double t0 = lb_now_s(), tf, tb;
	struct sw_best best[2];
	struct sw_bufs m;
	int tried = 0, failed = 0, rc = -1;

	*trainer = *best_tflops = -1;
	memset(&m, 0, sizeof(m));
	m.b = b;
	m.s = s;
	m.nh = nh;
	m.nkv = nkv;
	m.d = d;
	if (load()) {
		fprintf(out, "SWEEP\terror\t%s\n", dnn.why);
		return -1;
	}
	best[0].s = best[1].s = -1;
	best[0].what[0] = best[1].what[0] = '\0';
	if (cudaMalloc((void **)&m.qkv, qkv_n * sizeof(act_t)) != cudaSuccess ||
	    cudaMalloc((void **)&m.dqkv, qkv_n * sizeof(act_t)) != cudaSuccess ||
	    cudaMalloc((void **)&m.dqkv_ref, qkv_n * sizeof(act_t)) != cudaSuccess ||
	    cudaMalloc((void **)&m.out, o_n * sizeof(act_t)) != cudaSuccess ||
	    cudaMalloc((void **)&m.out_ref, o_n * sizeof(act_t)) != cudaSuccess ||
	    cudaMalloc((void **)&m.dout, o_n * sizeof(act_t)) != cudaSuccess ||
	    cudaMalloc((void **)&m.lse, (size_t)b * nh * s * sizeof(float)) != cudaSuccess ||
	    cudaMalloc((void **)&m.lse_ref, (size_t)b * nh * s * sizeof(float)) != cudaSuccess ||
	    cudaMalloc((void **)&m.scratch, lbc_attn_scratch(b, s, nh, d) * sizeof(float)) !=
		cudaSuccess ||
	    cudaMalloc((void **)&m.cmp, 2 * sizeof(unsigned)) != cudaSuccess) {
		fprintf(out, "SWEEP\terror\tout of device memory for B=%d S=%d\n", b, s);
		goto out_free;
	}
	o->fill_normal(m.qkv, qkv_n, LB_K_ACT, 7, 1, 1.0);
	o->fill_normal(m.dout, o_n, LB_K_ACT, 7, 2, 1.0);
	/* the reference: the trainer's own plans (tuned on their first call) */
	lbc_attn_cudnn_fwd(m.out_ref, m.lse_ref, m.scratch, m.qkv, b, s, nh, nkv, d);
	lbc_attn_cudnn_bwd(m.dqkv_ref, m.scratch, m.dout, m.out_ref, m.lse_ref, m.qkv, b, s, nh,
			   nkv, d);
	tf = sw_trainer_time(&m, 0);
	tb = sw_trainer_time(&m, 1);
	if (cudaStreamSynchronize(lbc_stream) != cudaSuccess)
		goto out_free;
	fprintf(out,
		"TRAINER\tB=%d S=%d heads=%d kv-heads=%d D=%d\tforward %.4f ms %.1f TFLOP/s\t"
		"backward %.4f ms %.1f TFLOP/s\tfwd+bwd %.1f TFLOP/s\tcuDNN %zu\n",
		b, s, nh, nkv, d, tf * 1e3, fwd_flops / tf / 1e12, tb * 1e3, bwd_flops / tb / 1e12,
		(fwd_flops + bwd_flops) / (tf + tb) / 1e12, dnn.version);
	fflush(out);
	if (tf > 0 && tb > 0)
		*trainer = (fwd_flops + bwd_flops) / (tf + tb) / 1e12;
	for (size_t i = 0; i < sizeof(sw_variants) / sizeof(sw_variants[0]); i++) {
		/* the forwards first, and each direction a fair share of the time */
		double share = t0 + max_s * (sw_variants[i].bwd ? 1.0 : 0.35);

		sw_variant_run(&m, &sw_variants[i], sw_variants[i].bwd ? bwd_flops : fwd_flops,
			       share, out, best, &tried, &failed);
	}
	fprintf(out, "BEST\tforward\t%.4f ms\t%.1f TFLOP/s\t%s\n", best[0].s * 1e3,
		best[0].s > 0 ? fwd_flops / best[0].s / 1e12 : -1.0, best[0].what);
	fprintf(out, "BEST\tbackward\t%.4f ms\t%.1f TFLOP/s\t%s\n", best[1].s * 1e3,
		best[1].s > 0 ? bwd_flops / best[1].s / 1e12 : -1.0, best[1].what);
	if (best[0].s > 0 && best[1].s > 0)
		*best_tflops = (fwd_flops + bwd_flops) / (best[0].s + best[1].s) / 1e12;
	if (best[0].s > 0 && best[1].s > 0)
		fprintf(out,
			"BEST\tfwd+bwd\t%.4f ms\t%.1f TFLOP/s\tthe trainer's plans: %.1f TFLOP/s; "
			"%d plans tried, %d did not build or run, %.0f s\n",
			(best[0].s + best[1].s) * 1e3,
			(fwd_flops + bwd_flops) / (best[0].s + best[1].s) / 1e12,
			(fwd_flops + bwd_flops) / (tf + tb) / 1e12, tried, failed, lb_now_s() - t0);
	rc = 0;
out_free:
	cudaStreamSynchronize(lbc_stream);
	cudaGetLastError();
	cudaFree(m.qkv);
	cudaFree(m.dqkv);
	cudaFree(m.dqkv_ref);
	cudaFree(m.out);
	cudaFree(m.out_ref);
	cudaFree(m.dout);
	cudaFree(m.lse);
	cudaFree(m.lse_ref);
	cudaFree(m.scratch);
	cudaFree(m.cmp);
	cudaFree(m.ws);
	cudaGetLastError();
	return rc;
}

#else /* built without cuDNN's headers */

#define NO_CUDNN                                                                                   \
	lb_fatal(__FILE__, __LINE__, "error",                                                      \
		 "--attention cudnn: this layoutbench-train was built without cuDNN's headers "    \
		 "(cudnn_graph.h was not found under CUDA_HOME/include or /usr/include); install " \
		 "cuDNN 9 and rebuild, or use --attention flash")

void lbc_attn_cudnn_fwd(void *out, void *lse, void *scratch, const void *qkv, int b, int s, int nh,
			int nkv, int d)
{
	NO_CUDNN;
}

void lbc_attn_cudnn_bwd(void *dqkv, void *scratch, const void *dout, const void *out,
			const void *lse, const void *qkv, int b, int s, int nh, int nkv, int d)
{
	NO_CUDNN;
}

extern "C" int lb_cuda_cudnn_sweep(int b, int s, int nh, int nkv, int d, double max_s, FILE *out,
				   double *trainer, double *best)
{
	*trainer = *best = -1;
	fprintf(out, "SWEEP\terror\tbuilt without cuDNN's headers (cudnn_graph.h)\n");
	return -1;
}
#endif
