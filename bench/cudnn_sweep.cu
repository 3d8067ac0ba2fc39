/*
 * The cuDNN attention sweep (bench/cuda_bench.h lb_cuda_cudnn_sweep, bench/bench_attn.c):
 * every plan cuDNN offers for the `cudnn` attention kernel's graphs
 * (harness/cuda/attention_cudnn.cu), checked against the trainer's own plans and timed.
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
 * need more than SW_WS_MAX of workspace or fail to run are counted and left out.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cuda_bench.h"
#include "harness/cuda/attention_cudnn.cuh"
#include "harness/cuda/cuda_common.cuh"
extern "C" {
#include "common/util.h"
}

#if LB_WITH_CUDNN
static const struct lbc_cudnn *dnn; /* the library (lbc_cudnn_lib), from the sweep's start */

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

/* The host values of a graph's scalars, bound by the variant pack. */
struct sw_scalars {
	float scale, neginf, one;
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

	if (cudaMemsetAsync(m->cmp, 0, 2 * sizeof(unsigned), lbc_stream()) != cudaSuccess)
		return -1;
	sw_cmp_kernel<T><<<1024, 256, 0, lbc_stream()>>>(a, b, n, m->cmp);
	if (cudaMemcpyAsync(h, m->cmp, sizeof(h), cudaMemcpyDeviceToHost, lbc_stream()) !=
		cudaSuccess ||
	    cudaStreamSynchronize(lbc_stream()) != cudaSuccess)
		return -1;
	memcpy(&dm, &h[0], 4);
	memcpy(&bm, &h[1], 4);
	*err = bm > 0 ? dm / bm : dm;
	return dm <= rtol * bm + atol ? 0 : 1;
}

/* The variant pack of a variant's graph (the tensors it binds, and nothing else). */
static int sw_pack(const struct sw_bufs *m, const struct sw_variant *v, struct sw_scalars *gr,
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

	return lbc_cudnn_exec(plan, vp, acc ? m->scratch : NULL, acc);
}

/* A variant pack for plan's workspace; NULL on failure. */
static cudnnBackendDescriptor_t sw_vpack(struct sw_bufs *m, const struct sw_variant *v,
					 struct sw_scalars *gr)
{
	cudnnBackendDescriptor_t vp = NULL;
	int64_t uids[16];
	void *ptrs[16];
	int n = sw_pack(m, v, gr, uids, ptrs);

	if (dnn->bcreate(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp) != CUDNN_STATUS_SUCCESS)
		return NULL;
	if (dnn->bset(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids) ||
	    dnn->bset(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs) ||
	    dnn->bset(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &m->ws) ||
	    dnn->bfinalize(vp)) {
		dnn->bdestroy(vp);
		return NULL;
	}
	return vp;
}

/* One call of what sw_time times: plan with the variant pack vp on the sweep's buffers, or
 * (plan NULL) the trainer's own kernel (its tuned plan) of v's direction. 0, or -1 when it
 * failed to run. */
static int sw_call(struct sw_bufs *m, const struct sw_variant *v, cudnnBackendDescriptor_t plan,
		   cudnnBackendDescriptor_t vp)
{
	if (plan)
		return sw_exec(m, v, plan, vp) == CUDNN_STATUS_SUCCESS ? 0 : -1;
	if (v->bwd)
		lbc_attn_cudnn_bwd(m->dqkv, m->scratch, m->dout, m->out_ref, m->lse_ref, m->qkv,
				   m->b, m->s, m->nh, m->nkv, m->d);
	else
		lbc_attn_cudnn_fwd(m->out, m->lse, m->scratch, m->qkv, m->b, m->s, m->nh, m->nkv,
				   m->d);
	return 0;
}

/* Seconds per call (sw_call) of plan, or of the trainer's kernel: the least of SW_ROUNDS
 * means of SW_RUNS calls; -1 when a call or the timing failed before one round was done. */
static double sw_time(struct sw_bufs *m, const struct sw_variant *v, cudnnBackendDescriptor_t plan,
		      cudnnBackendDescriptor_t vp)
{
	cudaEvent_t ev[2] = {NULL, NULL};
	double best = -1;
	float ms;

	if (cudaEventCreate(&ev[0]) != cudaSuccess || cudaEventCreate(&ev[1]) != cudaSuccess)
		goto out;
	for (int r = 0; r < SW_ROUNDS; r++) {
		if (cudaEventRecord(ev[0], lbc_stream()) != cudaSuccess)
			goto out;
		for (int i = 0; i < SW_RUNS; i++)
			if (sw_call(m, v, plan, vp))
				goto out;
		if (cudaEventRecord(ev[1], lbc_stream()) != cudaSuccess ||
		    cudaEventSynchronize(ev[1]) != cudaSuccess ||
		    cudaEventElapsedTime(&ms, ev[0], ev[1]) != cudaSuccess)
			goto out;
		if (best < 0 || ms * 1e-3 / SW_RUNS < best)
			best = ms * 1e-3 / SW_RUNS;
	}
out:
	lbc_timing_end(ev, 2);
	return best;
}

/* The engine (global index) of cfg, or -1. */
static int64_t sw_engine_of(cudnnBackendDescriptor_t cfg)
{
	cudnnBackendDescriptor_t e = NULL;
	int64_t idx = -1, cnt = 0;

	if (dnn->bcreate(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &e) != CUDNN_STATUS_SUCCESS)
		return -1;
	if (dnn->bget(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cnt,
		      &e) != CUDNN_STATUS_SUCCESS ||
	    dnn->bget(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &cnt, &idx) !=
		CUDNN_STATUS_SUCCESS)
		idx = -1;
	dnn->bdestroy(e);
	return idx;
}

/* The engine of global index idx on og (finalised), or NULL. */
static cudnnBackendDescriptor_t sw_engine(cudnnBackendDescriptor_t og, int64_t idx)
{
	cudnnBackendDescriptor_t e = NULL;

	if (dnn->bcreate(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &e) != CUDNN_STATUS_SUCCESS)
		return NULL;
	if (dnn->bset(e, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
		      &og) ||
	    dnn->bset(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &idx) ||
	    dnn->bfinalize(e)) {
		dnn->bdestroy(e);
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

	if (dnn->bcreate(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg) != CUDNN_STATUS_SUCCESS)
		return NULL;
	bad = dnn->bset(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &e) !=
	      CUDNN_STATUS_SUCCESS;
	if (!bad && ktype >= 0) {
		bad =
		    dnn->bcreate(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &ch) ||
		    dnn->bset(ch, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &kt) ||
		    dnn->bset(ch, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &kval) ||
		    dnn->bfinalize(ch) ||
		    dnn->bset(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
			      1, &ch);
	}
	if (bad || dnn->bfinalize(cfg)) {
		if (ch)
			dnn->bdestroy(ch);
		dnn->bdestroy(cfg);
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
	if (dnn->bcreate(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur) != CUDNN_STATUS_SUCCESS)
		return 0;
	if (dnn->bset(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
		      &og) ||
	    dnn->bset(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) ||
	    dnn->bfinalize(heur))
		goto out;
	for (int i = 0; i < 16; i++)
		if (dnn->bcreate(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[i]))
			goto out;
	if (dnn->bget(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 16, &got,
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
			dnn->bdestroy(cfg[i]);
	dnn->bdestroy(heur);
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
	if (dnn->bcreate(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != CUDNN_STATUS_SUCCESS)
		return NULL;
	if (dnn->bset(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &dnn->h) ||
	    dnn->bset(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR,
		      1, &cfg) ||
	    dnn->bfinalize(plan)) {
		dnn->bdestroy(plan);
		return NULL;
	}
	if (dnn->bget(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &cnt,
		      ws))
		*ws = 0;
	if (dnn->bget(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
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
	const char *what = v->bwd ? "backward" : "forward";
	char fail[256];
	struct sw_scalars gr;
	struct sw_cand c[SW_MAX_CFG];
	cudnnBackendDescriptor_t og;
	uint64_t seen[SW_MAX_CFG]; /* hashes of the plans' JSON: each plan timed once */
	int n = 0, nseen = 0;
	int64_t best_engine = -1, count = 0, cnt = 0;
	double vbest = -1;

	memset(&gr, 0, sizeof(gr));
	gr.scale = 1.0f / sqrtf((float)m->d);
	gr.neginf = -INFINITY;
	gr.one = 1.0f;
	og = lbc_cudnn_op_graph(v->bwd, m->b, m->s, m->nh, m->nkv, m->d, v->flags, fail,
				sizeof(fail));
	if (!og) {
		fprintf(out, "SWEEP\t%s\t%s\t-\t-\t-\t-\t-\tno graph: %s\t\n", what, v->name, fail);
		return;
	}
	n += sw_heur(og, CUDNN_HEUR_MODE_A, "A", 16, c, n, SW_MAX_CFG);
	n += sw_heur(og, CUDNN_HEUR_MODE_B, "B", 16, c, n, SW_MAX_CFG);
	n += sw_heur(og, CUDNN_HEUR_MODE_FALLBACK, "fallback", 8, c, n, SW_MAX_CFG);
	if (dnn->bget(og, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1, &cnt,
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
				if (dnn->bcreate(CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR, &info[k]))
					info[k] = NULL;
			if (dnn->bget(e, CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR,
				      CUDNN_KNOB_TYPE_COUNTS, &ninfo, info))
				ninfo = 0;
			for (int64_t k = 0; k < ninfo && n < SW_MAX_CFG; k++) {
				cudnnBackendKnobType_t kt;
				int64_t lo = 0, hi = -1, st = 1, cnt = 0, span;

				if (!info[k] ||
				    dnn->bget(info[k], CUDNN_ATTR_KNOB_INFO_TYPE,
					      CUDNN_TYPE_KNOB_TYPE, 1, &cnt, &kt) ||
				    dnn->bget(info[k], CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE,
					      CUDNN_TYPE_INT64, 1, &cnt, &lo) ||
				    dnn->bget(info[k], CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE,
					      CUDNN_TYPE_INT64, 1, &cnt, &hi) ||
				    dnn->bget(info[k], CUDNN_ATTR_KNOB_INFO_STRIDE,
					      CUDNN_TYPE_INT64, 1, &cnt, &st))
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
					dnn->bdestroy(info[k]);
			if (i >= n)
				break;
		}
		if (lb_now_s() > t_end) {
			fprintf(out, "SWEEP\t%s\t%s\t(the rest)\t-\t-\t-\t-\tskipped: time\t\n",
				what, v->name);
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
				dnn->bdestroy(plan);
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
				what, v->name, c[i].label, (long long)eng, ws / 1048576.0, json);
			dnn->bdestroy(plan);
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
					lbc_stream());
		else if (cudaMemsetAsync(m->out, 0xff,
					 (size_t)m->b * m->s * m->nh * m->d * sizeof(act_t),
					 lbc_stream()) == cudaSuccess)
			cudaMemsetAsync(m->lse, 0xff, (size_t)m->b * m->nh * m->s * sizeof(float),
					lbc_stream());
		if (!vp || sw_exec(m, v, plan, vp) != CUDNN_STATUS_SUCCESS) {
			cudaStreamSynchronize(lbc_stream());
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
			dnn->bdestroy(vp);
		fprintf(out,
			"SWEEP\t%s\t%s\t%s\tengine=%lld\tws_mib=%.0f\t%.4f\t%.1f\t%s\t%.300s\n",
			what, v->name, c[i].label, (long long)eng, ws / 1048576.0,
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
		dnn->bdestroy(plan);
	}
	for (int i = 0; i < n; i++)
		if (c[i].cfg)
			dnn->bdestroy(c[i].cfg);
	fprintf(out, "VARIANT\t%s\t%s\t%.4f ms\t%.1f TFLOP/s\n", what, v->name,
		vbest > 0 ? vbest * 1e3 : -1.0, vbest > 0 ? flops / vbest / 1e12 : -1.0);
}

extern "C" int lb_cuda_cudnn_sweep(int b, int s, int nh, int nkv, int d, double max_s, FILE *out,
				   double *trainer, double *best_tflops)
{
	const struct lb_ops *o = lb_ops_cuda();
	size_t T = (size_t)b * s, qkv_n = T * (nh + 2 * nkv) * d, o_n = T * nh * d;
	double fwd_flops = 4.0 * b * nh * (double)s * s * d / 2, bwd_flops = 2.5 * fwd_flops;
	double t0 = lb_now_s(), tf, tb;
	const struct sw_variant trainer_fwd = {"trainer", 0, 0}, trainer_bwd = {"trainer", 1, 0};
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
	dnn = lbc_cudnn_lib();
	if (!dnn->ok) {
		fprintf(out, "SWEEP\terror\t%s\n", dnn->why);
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
	tf = sw_time(&m, &trainer_fwd, NULL, NULL);
	tb = sw_time(&m, &trainer_bwd, NULL, NULL);
	if (cudaStreamSynchronize(lbc_stream()) != cudaSuccess)
		goto out_free;
	fprintf(out,
		"TRAINER\tB=%d S=%d heads=%d kv-heads=%d D=%d\tforward %.4f ms %.1f TFLOP/s\t"
		"backward %.4f ms %.1f TFLOP/s\tfwd+bwd %.1f TFLOP/s\tcuDNN %zu\n",
		b, s, nh, nkv, d, tf * 1e3, fwd_flops / tf / 1e12, tb * 1e3, bwd_flops / tb / 1e12,
		(fwd_flops + bwd_flops) / (tf + tb) / 1e12, dnn->version);
	fflush(out);
	if (tf > 0 && tb > 0)
		*trainer = (fwd_flops + bwd_flops) / (tf + tb) / 1e12;
	for (size_t i = 0; i < sizeof(sw_variants) / sizeof(sw_variants[0]); i++) {
		/* the forwards first, and each direction a fair share of the time */
		double share = t0 + max_s * (sw_variants[i].bwd ? 1.0 : 0.35);

		sw_variant_run(&m, &sw_variants[i], sw_variants[i].bwd ? bwd_flops : fwd_flops,
			       share, out, best, &tried, &failed);
	}
	for (int i = 0; i < 2; i++) {
		double flops = i ? bwd_flops : fwd_flops;

		fprintf(out, "BEST\t%s\t%.4f ms\t%.1f TFLOP/s\t%s\n", i ? "backward" : "forward",
			best[i].s * 1e3, best[i].s > 0 ? flops / best[i].s / 1e12 : -1.0,
			best[i].what);
	}
	if (best[0].s > 0 && best[1].s > 0) {
		*best_tflops = (fwd_flops + bwd_flops) / (best[0].s + best[1].s) / 1e12;
		fprintf(out,
			"BEST\tfwd+bwd\t%.4f ms\t%.1f TFLOP/s\tthe trainer's plans: %.1f TFLOP/s; "
			"%d plans tried, %d did not build or run, %.0f s\n",
			(best[0].s + best[1].s) * 1e3,
			(fwd_flops + bwd_flops) / (best[0].s + best[1].s) / 1e12,
			(fwd_flops + bwd_flops) / (tf + tb) / 1e12, tried, failed, lb_now_s() - t0);
	}
	rc = 0;
out_free:
	cudaStreamSynchronize(lbc_stream());
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
extern "C" int lb_cuda_cudnn_sweep(int b, int s, int nh, int nkv, int d, double max_s, FILE *out,
				   double *trainer, double *best)
{
	*trainer = *best = -1;
	fprintf(out, "SWEEP\terror\tbuilt without cuDNN's headers (cudnn_graph.h)\n");
	return -1;
}
#endif
