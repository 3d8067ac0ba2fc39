/*
 * The GEMM's plans (gemm.cu), for what times them outside the trainer (the benchmarks of
 * bench/cuda_bench.cu): a problem's key, its plan (cuBLASLt's descriptors and the algorithm
 * chosen), the heuristic's candidates for it, and one call of a plan with a given
 * algorithm. See gemm.cu for the row-major to column-major mapping.
 */
#ifndef LB_CUDA_GEMM_CUH
#define LB_CUDA_GEMM_CUH

#include "harness/cuda/cuda_common.cuh"

struct lbc_gemm_key {
	int m, n, k, ta, tb, batch, c_f32, beta_nz;
	int align_a, align_b, align_c; /* bytes, powers of two up to 256 */
	int c_in;		       /* 1: C read from its own buffer, D written to another */
	long long lda, ldb, ldc, sa, sb, sc;
};

struct lbc_gemm_plan {
	struct lbc_gemm_key key;
	int used;
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t la; /* cuBLASLt's A: our B */
	cublasLtMatrixLayout_t lb; /* cuBLASLt's B: our A */
	cublasLtMatrixLayout_t lc; /* C and D */
	cublasLtMatmulAlgo_t algo;
};

/* The key of a problem: C (m, n) = alpha op(A) op(B) + beta C with the given leading dims
 * and, when batch > 1, batch strides; a, b and c give the operands' alignment (NULL: 256
 * bytes). Zeroed first: keys are hashed and compared as bytes. */
void lbc_gemm_key_make(struct lbc_gemm_key *key, int c_f32, const void *a, const void *b,
		       const void *c, int m, int n, int k, int ta, int tb, long long lda,
		       long long ldb, long long ldc, long long sa, long long sb, long long sc,
		       int batch, float beta);
/* The descriptors of key's problem (no algorithm yet); release frees them. */
void lbc_gemm_plan_init(struct lbc_gemm_plan *p, const struct lbc_gemm_key *key);
void lbc_gemm_plan_release(struct lbc_gemm_plan *p);
/* Up to want candidates, best first (the heuristic's order); how many it gave. */
int lbc_gemm_heuristics(const struct lbc_gemm_plan *p, cublasLtMatmulHeuristicResult_t *res,
			int want);
/* One call of p's problem with algo on lbc_stream(), D written to d and C read from cin (NULL:
 * from d); 1 when cuBLASLt accepted it. */
int lbc_gemm_run(const struct lbc_gemm_plan *p, const cublasLtMatmulAlgo_t *algo, void *d,
		 const void *cin, const void *a, const void *b, float alpha, float beta);

#endif
