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
 * compiler found no cuDNN headers says so instead. What the sweep of every plan cuDNN offers
 * (bench/cudnn_sweep.cu) needs of this file is in attention_cudnn.cuh.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cuda/attention_cudnn.cuh"
#include "harness/cuda/cuda_common.cuh"
extern "C" {
#include "common/util.h"
}

#if LB_WITH_CUDNN
#define NEED_FIX "use --attention flash, or install cuDNN 9 (libcudnn.so.9) on this node"

/* The library, loaded on first use (attention_cudnn.cuh). */
static struct lbc_cudnn dnn;

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

/* One operand of an operation: the attribute naming it and its descriptor (NULL: an
 * optional operand left out). */
struct op_in {
	cudnnBackendAttributeName_t attr;
	cudnnBackendDescriptor_t d;
};

/* An operation of the given type on its operands in[], finished (what names it in a
 * message) and added to the graph. */
template <int N>
static void op_add(struct gb *g, cudnnBackendDescriptorType_t type, const char *what,
		   const struct op_in (&in)[N])
{
	cudnnBackendDescriptor_t op = make(g, type);

	for (int i = 0; i < N; i++)
		if (in[i].d)
			set(g, op, in[i].attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &in[i].d);
	fin(g, op, what);
	add_op(g, op);
}

/* y = mode(x[, b[, t]]); axis >= 0: GEN_INDEX's axis. */
static void pw(struct gb *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
	       cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
	       cudnnBackendDescriptor_t y, int64_t axis)
{
	cudnnBackendDescriptor_t p = make(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);

	set(g, p, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
	set(g, p, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
	if (axis >= 0)
		set(g, p, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
	fin(g, p, "pointwise");
	op_add(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise operation",
	       {{CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, p},
		{CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x},
		{CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b},
		{CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t},
		{CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y}});
}

/* y = mode(a[, b]) into a new inner tensor of the given type and dims, computed in fp32. */
static cudnnBackendDescriptor_t pw_new(struct gb *g, cudnnPointwiseMode_t mode,
				       cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
				       cudnnDataType_t type, struct dims4 dims)
{
	cudnnBackendDescriptor_t y = tensor(g, 0, type, dims);

	pw(g, mode, CUDNN_DATA_FLOAT, a, b, NULL, y, -1);
	return y;
}

/* Descriptor d of an operation with its compute type (attribute comp) set to fp32,
 * finished (what names it in a message). */
static cudnnBackendDescriptor_t fp32_compute(struct gb *g, cudnnBackendDescriptor_t d,
					     cudnnBackendAttributeName_t comp, const char *what)
{
	cudnnDataType_t f = CUDNN_DATA_FLOAT;

	set(g, d, comp, CUDNN_TYPE_DATA_TYPE, 1, &f);
	fin(g, d, what);
	return d;
}

static void reduce(struct gb *g, cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
		   cudnnBackendDescriptor_t y)
{
	cudnnBackendDescriptor_t r = make(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);

	set(g, r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
	r = fp32_compute(g, r, CUDNN_ATTR_REDUCTION_COMP_TYPE, "reduction");
	op_add(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction operation",
	       {{CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x},
		{CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y},
		{CUDNN_ATTR_OPERATION_REDUCTION_DESC, r}});
}

static void matmul(struct gb *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
		   cudnnBackendDescriptor_t c)
{
	cudnnBackendDescriptor_t m = fp32_compute(g, make(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR),
						  CUDNN_ATTR_MATMUL_COMP_TYPE, "matmul");

	op_add(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul operation",
	       {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, a},
		{CUDNN_ATTR_OPERATION_MATMUL_BDESC, b},
		{CUDNN_ATTR_OPERATION_MATMUL_CDESC, c},
		{CUDNN_ATTR_OPERATION_MATMUL_DESC, m}});
}

static void reshape(struct gb *g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y)
{
	op_add(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "reshape operation",
	       {{CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x}, {CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y}});
}

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
	s4 = pw_new(g, CUDNN_POINTWISE_SUB, s3, mx, CUDNN_DATA_FLOAT, x->ss);
	s5 = pw_new(g, CUDNN_POINTWISE_EXP, s4, NULL, CUDNN_DATA_FLOAT, x->ss);
	sum = tensor(g, 0, CUDNN_DATA_FLOAT, x->stats);
	reduce(g, CUDNN_REDUCE_TENSOR_ADD, s5, sum);
	lg = pw_new(g, CUDNN_POINTWISE_LOG, sum, NULL, CUDNN_DATA_FLOAT, x->stats);
	pw(g, CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, mx, lg, NULL, stats, -1);
	/* the second matmul reads bf16 */
	p = pw_new(g, CUDNN_POINTWISE_DIV, s5, sum, CUDNN_DATA_BFLOAT16, x->ss);
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
	p = pw_new(g, CUDNN_POINTWISE_EXP, s4, NULL, CUDNN_DATA_FLOAT, x->ss);
	pt = tensor(g, 0, CUDNN_DATA_BFLOAT16, x->sst);
	reshape(g, p, pt);
	grad_into(g, x, pt, d_o, dv, grouped); /* dV = P^T dO */
	dp = tensor(g, 0, CUDNN_DATA_FLOAT, x->ss);
	matmul(g, d_o, vt, dp);
	t3 = pw_new(g, CUDNN_POINTWISE_SUB, dp, sums, CUDNN_DATA_FLOAT, x->ss);
	t4 = pw_new(g, CUDNN_POINTWISE_MUL, t3, p, CUDNN_DATA_FLOAT, x->ss);
	ds = pw_new(g, CUDNN_POINTWISE_MUL, t4, scale, CUDNN_DATA_FLOAT, x->ss);
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
cudnnStatus_t lbc_cudnn_exec(cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t vp, void *acc,
			     size_t acc_bytes)
{
	if (acc && cudaMemsetAsync(acc, 0, acc_bytes, lbc_stream()) != cudaSuccess)
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
			lbc_cudnn_exec(gr->cand[i], vp, acc, acc_bytes) == CUDNN_STATUS_SUCCESS &&
			cudaEventRecord(ev[2 * i], lbc_stream()) == cudaSuccess;
		for (int r = 0; r < TUNE_RUNS && ok[i]; r++)
			ok[i] =
			    lbc_cudnn_exec(gr->cand[i], vp, acc, acc_bytes) == CUDNN_STATUS_SUCCESS;
		ok[i] = ok[i] && cudaEventRecord(ev[2 * i + 1], lbc_stream()) == cudaSuccess;
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
	lbc_timing_end(ev, 2 * gr->ncand); /* a candidate's failure is no error of the run */
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
 * stream; acc as for lbc_cudnn_exec. */
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
	st = dnn.set_stream(dnn.h, lbc_stream());
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
		st = lbc_cudnn_exec(gr->plan, vp, acc, acc_bytes);
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

/* The library, loaded on first use: ->ok, else ->why says what is missing. */
const struct lbc_cudnn *lbc_cudnn_lib(void)
{
	load();
	return &dnn;
}

/* The operation graph of variant flags (V_*) of the forward or backward at one shape,
 * finalised: what graph_of builds before it makes the plans; NULL with the failed call in
 * fail. Its descriptors are kept for the run. */
cudnnBackendDescriptor_t lbc_cudnn_op_graph(int bwd, int b, int s, int nh, int nkv, int d,
					    int flags, char *fail, size_t len)
{
	struct gb g;
	struct shapes x = shapes_of(b, s, nh, nkv, d);
	cudnnBackendDescriptor_t og;

	memset(&g, 0, sizeof(g));
	g.uid = U_VIRTUAL;
	g.what = bwd ? "backward" : "forward";
	if (bwd)
		build_bwd(&g, &x, nh != nkv, flags);
	else
		build_fwd(&g, &x, flags);
	og = make(&g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
	set(&g, og, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &dnn.h);
	set(&g, og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g.nops, g.ops);
	fin(&g, og, "operation graph");
	snprintf(fail, len, "%s", g.fail);
	return g.fail[0] ? NULL : og;
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
#endif
