/*
 * The CUDA table's matmul and matmul_add over the one GEMM entry lbc_gemm (cuda_common.cuh):
 * row-major onto cuBLASLt's column-major, one plan per distinct problem cached for the
 * process, its algorithm the fastest of the heuristic's candidates timed on the first
 * call's operands (the tuner), the backend's shared workspace. The plans' structures and
 * the calls the benchmarks (bench/cuda_bench.cu) make of them are in gemm.cuh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cuda/core.cuh"
#include "harness/cuda/gemm.cuh"

#define TUNE_ALGOS                                                                                 \
	16	    /* heuristic candidates lbc_gemm times on a new problem (all the               \
		     * benchmarks ask for: the ceiling is the best of the same list) */
#define TUNE_RUNS 3 /* timed runs of each candidate, after one warm-up */

static cublasLtHandle_t lbc_lt; /* set at init (lbc_gemm_init) */

int lbc_gemm_init(void)
{
	return cublasLtCreate(&lbc_lt) == CUBLAS_STATUS_SUCCESS ? 0 : -1;
}

/* ------------------------------------------------------------------------------------------
 * GEMM (lbc_gemm, cuda_common.cuh). cuBLASLt is column-major; a row-major (r, c) matrix
 * with leading dim ld is the column-major (c, r) matrix with the same ld, its transpose.
 * So row-major C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T:
 * cuBLASLt's A is our B and its B is our A, m and n swap, and the transpose flags carry
 * over unchanged (ta applies to our A in either view). A plan (descriptors, layouts and
 * an algorithm) is made once per distinct problem and kept in an open-addressing hash
 * table for the life of the process. The key includes the operands' alignment (of the
 * pointers and, when batched, of the batch strides), because the heuristic only proposes
 * algorithms valid for the alignment it is told. The algorithm is the fastest of the
 * heuristic's first TUNE_ALGOS candidates, timed on the first call's operands (gemm_tune):
 * on the H200 the heuristic's first choice alone reaches only 75-95% of the best candidate
 * at the Llama shapes (82% for the f32 weight-gradient GEMM m=5120 n=13824 k=2048, TN).
 * ------------------------------------------------------------------------------------------ */

static struct {
	struct lbc_gemm_plan *slot;
	size_t cap, count; /* cap: power of two */
} plans;

/* Largest power of two (up to 256) dividing the address and, when batched, the stride. */
static int gemm_align(const void *p, long long stride, size_t es, int batch)
{
	uint64_t a = (uint64_t)(uintptr_t)p | 256;

	if (batch > 1)
		a |= (uint64_t)stride * es;
	return (int)(a & (~a + 1));
}

static uint64_t gemm_hash(const struct lbc_gemm_key *key)
{
	const unsigned char *p = (const unsigned char *)key;
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	for (size_t i = 0; i < sizeof(*key); i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static void gemm_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, long long rows, long long cols,
			long long ld, int batch, long long stride)
{
	LBC_CHECK_LT(cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld));
	if (batch > 1) {
		int32_t bc = batch;
		int64_t st = stride;

		LBC_CHECK_LT(cublasLtMatrixLayoutSetAttribute(
		    *l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof(bc)));
		LBC_CHECK_LT(cublasLtMatrixLayoutSetAttribute(
		    *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof(st)));
	}
}

/* The descriptors of key's problem (no algorithm yet). */
void lbc_gemm_plan_init(struct lbc_gemm_plan *p, const struct lbc_gemm_key *key)
{
	const struct lbc_gemm_key *q = key;
	cublasOperation_t opa = q->tb ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's A = our B */
	cublasOperation_t opb = q->ta ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's B = our A */

	memset(p, 0, sizeof(*p));
	p->key = *key;
	LBC_CHECK_LT(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	LBC_CHECK_LT(
	    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
	LBC_CHECK_LT(
	    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
	/* our B, row-major (k, n) [or (n, k) when tb], is column-major (n, k) [(k, n)] */
	gemm_layout(&p->la, CUDA_R_16BF, q->tb ? q->k : q->n, q->tb ? q->n : q->k, q->ldb, q->batch,
		    q->sb);
	/* our A, row-major (m, k) [or (k, m) when ta], is column-major (k, m) [(m, k)] */
	gemm_layout(&p->lb, CUDA_R_16BF, q->ta ? q->m : q->k, q->ta ? q->k : q->m, q->lda, q->batch,
		    q->sa);
	/* C, row-major (m, n), is column-major (n, m) */
	gemm_layout(&p->lc, q->c_f32 ? CUDA_R_32F : CUDA_R_16BF, q->n, q->m, q->ldc, q->batch,
		    q->sc);
}

void lbc_gemm_plan_release(struct lbc_gemm_plan *p)
{
	cublasLtMatrixLayoutDestroy(p->lc);
	cublasLtMatrixLayoutDestroy(p->lb);
	cublasLtMatrixLayoutDestroy(p->la);
	cublasLtMatmulDescDestroy(p->op);
}

/* Up to want candidates, best first (the heuristic's order); how many it gave. */
int lbc_gemm_heuristics(const struct lbc_gemm_plan *p, cublasLtMatmulHeuristicResult_t *res,
			int want)
{
	cublasLtMatmulPreference_t pref;
	uint64_t ws = WORKSPACE_B;
	uint32_t al_a = p->key.align_b, al_b = p->key.align_a, al_c = p->key.align_c;
	cublasStatus_t st;
	int got = 0;

	LBC_CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
	LBC_CHECK_LT(cublasLtMatmulPreferenceSetAttribute(
	    pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
	LBC_CHECK_LT(cublasLtMatmulPreferenceSetAttribute(
	    pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
	LBC_CHECK_LT(cublasLtMatmulPreferenceSetAttribute(
	    pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
	LBC_CHECK_LT(cublasLtMatmulPreferenceSetAttribute(
	    pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c)));
	LBC_CHECK_LT(cublasLtMatmulPreferenceSetAttribute(
	    pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof(al_c)));
	st = cublasLtMatmulAlgoGetHeuristic(lbc_lt, p->op, p->la, p->lb, p->lc, p->lc, pref, want,
					    res, &got);
	cublasLtMatmulPreferenceDestroy(pref);
	return st == CUBLAS_STATUS_SUCCESS ? got : 0;
}

static struct lbc_gemm_plan *gemm_put(struct lbc_gemm_plan *slot, size_t cap,
				      const struct lbc_gemm_plan *p)
{
	size_t i = (size_t)gemm_hash(&p->key) & (cap - 1);

	while (slot[i].used)
		i = (i + 1) & (cap - 1);
	slot[i] = *p;
	slot[i].used = 1;
	return &slot[i];
}

/* 0 when the environment has LAYOUTBENCH_GEMM_TUNE=0 (read once): lbc_gemm then keeps the
 * heuristic's first choice, for comparison in benches; 1 (tune) otherwise. */
static int gemm_tune_on(void)
{
	static int on = -1;

	if (on < 0) {
		const char *v = getenv("LAYOUTBENCH_GEMM_TUNE");
		char *end;

		on = 1;
		if (v && *v && strtol(v, &end, 10) == 0 && !*end)
			on = 0;
	}
	return on;
}

/* Bytes from C's first element to one past its last (every batch, the gaps of ldc and of the
 * batch stride included): what a copy of C with C's layout must hold. 0 for a negative
 * stride or ldc < n, which such a copy cannot mirror (the caller then does not tune). */
static size_t gemm_c_extent(const struct lbc_gemm_key *q)
{
	long long e;

	if (q->sc < 0 || q->ldc < q->n)
		return 0;
	e = (long long)(q->m - 1) * q->ldc + q->n + (long long)(q->batch - 1) * q->sc;
	return (size_t)e * (q->c_f32 ? sizeof(float) : sizeof(act_t));
}

/* One tuning run of algo into the scratch sc (D; C too unless cin, the caller's C, which is
 * only read); 1 when cuBLASLt accepted it. */
int lbc_gemm_run(const struct lbc_gemm_plan *p, const cublasLtMatmulAlgo_t *algo, void *sc,
		 const void *cin, const void *a, const void *b, float alpha, float beta)
{
	return cublasLtMatmul(lbc_lt, p->op, &alpha, b, p->la, a, p->lb, &beta, cin ? cin : sc,
			      p->lc, sc, p->lc, algo, lbc_workspace(WORKSPACE_B), WORKSPACE_B,
			      lbc_stream()) == CUBLAS_STATUS_SUCCESS;
}

/*
 * The index of the fastest of the heuristic's candidates res[0, n) for p's problem, timed on
 * the caller's operands: each candidate runs once to warm up, then TUNE_RUNS times between
 * two events; every run is enqueued on lbc_stream() before one cudaEventSynchronize, and the
 * least mean time wins. A candidate that cublasLtMatmul refuses is left out.
 *
 * The runs read the real A and B (read-only) but write a scratch C, never the caller's C:
 * with beta != 0 the caller accumulates into C, so C must see exactly one product. The
 * scratch has C's layout and, offset within its allocation, C's address modulo 256, so the
 * alignment (part of the key) is the real one. With beta != 0 it starts as a copy of C: the
 * candidates then read the values the real call reads (cuBLASLt's kernels do not depend on
 * the values, so zeros would time the same; the copy costs one pass over C, once, and
 * leaves no doubt). With beta = 0, C is not read and the scratch is left unset.
 *
 * The scratch is transient (freed before returning) and taken with plain cudaMalloc, outside
 * the counting allocator: once per problem, in the first step, the device's momentary peak
 * exceeds the counted peak by at most this one buffer (C's extent + 256 bytes). cudaMalloc
 * rather than cudaMallocAsync because cudaFree hands the memory back at once, where a
 * stream-ordered pool may keep it reserved until a later synchronisation and starve the
 * trainer's next cudaMalloc.
 *
 * Tuning never fails the run: when the scratch or the events cannot be had (out of memory)
 * or no candidate runs, the CUDA error is cleared and 0, the heuristic's first, is returned.
 */
static int gemm_tune(const struct lbc_gemm_plan *p, const cublasLtMatmulHeuristicResult_t *res,
		     int n, const void *a, const void *b, const void *c, const void *cin,
		     float alpha, float beta)
{
	cudaEvent_t ev[2 * TUNE_ALGOS];
	int ran[TUNE_ALGOS];
	size_t bytes = gemm_c_extent(&p->key), off = (uintptr_t)c & 255;
	char *base = NULL;
	void *sc;
	float ms, best_ms = -1;
	int best = 0, last = -1, i, r;

	memset(ev, 0, sizeof(ev));
	memset(ran, 0, sizeof(ran));
	if (n > TUNE_ALGOS)
		n = TUNE_ALGOS;
	if (!bytes || cudaMalloc((void **)&base, bytes + off) != cudaSuccess || !base)
		goto out_clear;
	sc = base + off;
	if (beta != 0.0f && !cin &&
	    cudaMemcpyAsync(sc, c, bytes, cudaMemcpyDeviceToDevice, lbc_stream()) != cudaSuccess)
		goto out_free;
	for (i = 0; i < n; i++) {
		if (cudaEventCreate(&ev[2 * i]) != cudaSuccess ||
		    cudaEventCreate(&ev[2 * i + 1]) != cudaSuccess)
			goto out_free;
		if (res[i].state != CUBLAS_STATUS_SUCCESS)
			continue;
		/* the warm-up: a refusal here (or below) marks the candidate unavailable */
		ran[i] = lbc_gemm_run(p, &res[i].algo, sc, cin, a, b, alpha, beta);
		if (!ran[i])
			continue;
		if (cudaEventRecord(ev[2 * i], lbc_stream()) != cudaSuccess)
			goto out_free;
		for (r = 0; r < TUNE_RUNS && ran[i]; r++)
			ran[i] = lbc_gemm_run(p, &res[i].algo, sc, cin, a, b, alpha, beta);
		if (cudaEventRecord(ev[2 * i + 1], lbc_stream()) != cudaSuccess)
			goto out_free;
		last = i;
	}
	/* the one wait, for the last event recorded: every timed run has finished after it */
	if (last >= 0 && cudaEventSynchronize(ev[2 * last + 1]) == cudaSuccess)
		for (i = 0; i < n; i++)
			if (ran[i] &&
			    cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]) == cudaSuccess &&
			    (best_ms < 0 || ms < best_ms)) {
				best_ms = ms;
				best = i;
			}
out_free:
	/* at once after the wait above; after an early exit, the scratch's last writer */
	cudaStreamSynchronize(lbc_stream());
	cudaFree(base);
	for (i = 0; i < 2 * n; i++)
		if (ev[i])
			cudaEventDestroy(ev[i]);
out_clear:
	cudaGetLastError(); /* a failed allocation or call here is no error of the run */
	return best;
}

/* The cached plan of key, or NULL. */
static const struct lbc_gemm_plan *gemm_plan_find(const struct lbc_gemm_key *key)
{
	if (plans.cap)
		for (size_t i = (size_t)gemm_hash(key) & (plans.cap - 1); plans.slot[i].used;
		     i = (i + 1) & (plans.cap - 1))
			if (!memcmp(&plans.slot[i].key, key, sizeof(*key)))
				return &plans.slot[i];
	return NULL;
}

static void gemm_no_algorithm(const struct lbc_gemm_key *key)
{
	lb_fatal(__FILE__, __LINE__, "error",
		 "cublasLt has no algorithm for gemm m=%d n=%d k=%d ta=%d tb=%d lda=%lld "
		 "ldb=%lld ldc=%lld batch=%d c_f32=%d align=%d/%d/%d",
		 key->m, key->n, key->k, key->ta, key->tb, key->lda, key->ldb, key->ldc, key->batch,
		 key->c_f32, key->align_a, key->align_b, key->align_c);
}

/* The cached plan of key, made (and its algorithm chosen) on first use. a, b, c, alpha and
 * beta are the first call's: the candidates are timed on them (gemm_tune, which writes a
 * scratch C, never c). */
static const struct lbc_gemm_plan *gemm_plan_get(const struct lbc_gemm_key *key, const void *a,
						 const void *b, const void *c, const void *cin,
						 float alpha, float beta)
{
	cublasLtMatmulHeuristicResult_t res[TUNE_ALGOS];
	struct lbc_gemm_plan p;
	const struct lbc_gemm_plan *hit = gemm_plan_find(key);
	size_t i;
	int got;

	if (hit)
		return hit;
	if ((plans.count + 1) * 2 > plans.cap) { /* grow at half load */
		size_t ncap = plans.cap ? plans.cap * 2 : 64;
		struct lbc_gemm_plan *ns = (struct lbc_gemm_plan *)calloc(ncap, sizeof(*ns));

		if (!ns)
			lb_fatal(__FILE__, __LINE__, "oom", "gemm plan cache: out of host memory");
		for (i = 0; i < plans.cap; i++)
			if (plans.slot[i].used)
				gemm_put(ns, ncap, &plans.slot[i]);
		free(plans.slot);
		plans.slot = ns;
		plans.cap = ncap;
	}
	lbc_gemm_plan_init(&p, key);
	memset(res, 0, sizeof(res));
	got = lbc_gemm_heuristics(&p, res, gemm_tune_on() ? TUNE_ALGOS : 1);
	if (got < 1)
		gemm_no_algorithm(key);
	p.algo = res[got > 1 ? gemm_tune(&p, res, got, a, b, c, cin, alpha, beta) : 0].algo;
	plans.count++;
	return gemm_put(plans.slot, plans.cap, &p);
}

void lbc_gemm_key_make(struct lbc_gemm_key *key, int c_f32, const void *a, const void *b,
		       const void *c, int m, int n, int k, int ta, int tb, long long lda,
		       long long ldb, long long ldc, long long sa, long long sb, long long sc,
		       int batch, float beta)
{
	memset(key, 0, sizeof(*key)); /* the key is hashed and compared as bytes */
	key->m = m;
	key->n = n;
	key->k = k;
	key->ta = !!ta;
	key->tb = !!tb;
	key->batch = batch;
	key->c_f32 = !!c_f32;
	key->beta_nz = beta != 0.0f;
	key->lda = lda;
	key->ldb = ldb;
	key->ldc = ldc;
	if (batch > 1) { /* strides of one matrix mean nothing */
		key->sa = sa;
		key->sb = sb;
		key->sc = sc;
	}
	key->align_a = gemm_align(a, sa, sizeof(act_t), batch);
	key->align_b = gemm_align(b, sb, sizeof(act_t), batch);
	key->align_c = gemm_align(c, sc, c_f32 ? sizeof(float) : sizeof(act_t), batch);
}

/* C_i = beta * C_i (k = 0: an empty sum; cuBLASLt does not take k = 0). */
template <typename T>
static __global__ void gemm_beta_kernel(T *c, int m, int n, long long ldc, long long sc, int batch,
					float beta)
{
	size_t total = (size_t)batch * m * n;

	for (size_t e = GRID_START; e < total; e += GRID_STEP) {
		size_t j = e % n, i = (e / n) % m, bi = e / ((size_t)m * n);
		T *p = c + (long long)bi * sc + (long long)i * ldc + (long long)j;

		*p = beta == 0.0f ? (T)0.0f : (T)(beta * (float)*p);
	}
}

/*
 * The contract is in cuda_common.cuh. The first call of a distinct problem (the plan cache's
 * miss) chooses the algorithm by timing the heuristic's candidates (gemm_tune): that call
 * synchronises the host once and briefly allocates a scratch C outside the counting
 * allocator. The distinct problems all occur in the first (warm-up) step, so the steps that
 * are measured neither wait nor allocate. LAYOUTBENCH_GEMM_TUNE=0 keeps the heuristic's
 * first choice instead.
 */
/* lbc_gemm with C read from cin (NULL: from c itself) and the result written to c (cuBLASLt's
 * D): a GEMM whose epilogue adds another buffer. cin must not be c's alias in part. */
static void gemm_ex(void *c, const void *cin, int c_f32, const void *a, const void *b, int m, int n,
		    int k, int ta, int tb, long long lda, long long ldb, long long ldc,
		    long long stride_a, long long stride_b, long long stride_c, int batch,
		    float alpha, float beta)
{
	struct lbc_gemm_key key;
	const struct lbc_gemm_plan *p;
	const void *cr = cin ? cin : c;

	if (m <= 0 || n <= 0 || batch <= 0)
		return;
	if (k <= 0) {
		if (beta == 1.0f)
			return;
		if (c_f32)
			gemm_beta_kernel<<<grid_for((size_t)batch * m * n), THREADS, 0,
					   lbc_stream()>>>((float *)c, m, n, ldc, stride_c, batch,
							   beta);
		else
			gemm_beta_kernel<<<grid_for((size_t)batch * m * n), THREADS, 0,
					   lbc_stream()>>>((act_t *)c, m, n, ldc, stride_c, batch,
							   beta);
		LBC_LAUNCHED();
		return;
	}
	lbc_gemm_key_make(&key, c_f32, a, b, c, m, n, k, ta, tb, lda, ldb, ldc, stride_a, stride_b,
			  stride_c, batch, beta);
	key.c_in = cin != NULL;
	if (cin) /* the alignment the heuristic is told must hold for both */
		key.align_c = key.align_c < gemm_align(cin, stride_c, c_f32 ? 4 : 2, batch)
				  ? key.align_c
				  : gemm_align(cin, stride_c, c_f32 ? 4 : 2, batch);
	if (lbc_graph_capturing() && !gemm_plan_find(&key)) {
		/* a problem first seen inside a capture (the tuning waits for the device, which
		 * a capture cannot): the heuristic's first algorithm, not cached; the graph is
		 * right but not kept, so the segment runs eagerly (and tunes) the next time */
		struct lbc_gemm_plan tmp;
		cublasLtMatmulHeuristicResult_t res1;

		memset(&res1, 0, sizeof(res1));
		lbc_gemm_plan_init(&tmp, &key);
		if (lbc_gemm_heuristics(&tmp, &res1, 1) < 1)
			gemm_no_algorithm(&key);
		lbc_graph_drop("a GEMM problem first seen inside the capture");
		LBC_CHECK_LT(cublasLtMatmul(lbc_lt, tmp.op, &alpha, b, tmp.la, a, tmp.lb, &beta, cr,
					    tmp.lc, c, tmp.lc, &res1.algo,
					    lbc_workspace(WORKSPACE_B), WORKSPACE_B, lbc_stream()));
		lbc_gemm_plan_release(&tmp);
		return;
	}
	p = gemm_plan_get(&key, a, b, c, cin, alpha, beta);
	/* swapped operands: column-major C^T = op(B)^T op(A)^T; C read from cr, D written to c */
	LBC_CHECK_LT(cublasLtMatmul(lbc_lt, p->op, &alpha, b, p->la, a, p->lb, &beta, cr, p->lc, c,
				    p->lc, &p->algo, lbc_workspace(WORKSPACE_B), WORKSPACE_B,
				    lbc_stream()));
}

void lbc_gemm(void *c, int c_f32, const void *a, const void *b, int m, int n, int k, int ta, int tb,
	      long long lda, long long ldb, long long ldc, long long stride_a, long long stride_b,
	      long long stride_c, int batch, float alpha, float beta)
{
	gemm_ex(c, NULL, c_f32, a, b, m, n, k, ta, tb, lda, ldb, ldc, stride_a, stride_b, stride_c,
		batch, alpha, beta);
}

/* The table's matmul: natural leading dims, one matrix, C overwritten or accumulated. */
void lbc_matmul(void *c, const void *a, const void *b, int m, int n, int k, int ta, int tb,
		double alpha, int accumulate, int c_f32)
{
	lbc_gemm(c, c_f32, a, b, m, n, k, ta, tb, ta ? m : k, tb ? k : n, n, 0, 0, 0, 1,
		 (float)alpha, accumulate ? 1.0f : 0.0f);
}

/* The table's matmul_add: out = op(A) op(B) + addend (bf16), the addend read as cuBLASLt's
 * C and the result written as its D, so the residual add needs no pass of its own. */
void lbc_matmul_add(void *out, const void *a, const void *b, const void *addend, int m, int n,
		    int k, int ta, int tb)
{
	gemm_ex(out, addend == out ? NULL : addend, 0, a, b, m, n, k, ta, tb, ta ? m : k,
		tb ? k : n, n, 0, 0, 0, 1, 1.0f, 1.0f);
}
