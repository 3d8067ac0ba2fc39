/*
 * What the cudnn attention kernel (attention_cudnn.cu) offers besides the table's two ops,
 * for the sweep of every plan cuDNN has for it (bench/cudnn_sweep.cu): the library as it
 * was loaded, the unique ids the graphs bind their tensors by, the graphs' variants, the
 * operation graph of a variant at one shape, and one execution of a plan. Only in a build
 * that found cuDNN's headers (LB_WITH_CUDNN).
 */
#ifndef LB_CUDA_ATTENTION_CUDNN_CUH
#define LB_CUDA_ATTENTION_CUDNN_CUH

#if LB_WITH_CUDNN
#include <cudnn_graph.h>

#include "harness/cuda/cuda_common.cuh"

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

/* Variants of the graphs (the trainer's is 0; the sweep times the others, see
 * lb_cuda_cudnn_sweep, bench/cudnn_sweep.cu): as cuDNN's own frontend builds them (the index
 * generation in int32, the backward's row sums of dO * O inside the graph, its fp32 dQ accumulator
 * with the F16x16 reordering), and the dP-workspace backward (dQ = dS K straight into bf16, no
 * accumulator: what cuDNN's frontend asks for when the backward must be deterministic). */
#define V_IDX_INT32    1
#define V_SUMS_VIRTUAL 2
#define V_DQ_REORDER   4
#define V_DQ_DIRECT    8

/* The library, loaded at run time (dlopen of libcudnn.so.9) on first use, and the calls of
 * it the kernel makes. */
struct lbc_cudnn {
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
};

/* The library, loaded on first use: ->ok, else ->why says what is missing. */
const struct lbc_cudnn *lbc_cudnn_lib(void);
/* The operation graph of variant flags (V_*) of the forward (bwd 0) or the backward at one
 * shape, finalised, as the trainer's graphs are built before their plans are made; NULL
 * with the failed call in fail. Its descriptors are kept for the run. */
cudnnBackendDescriptor_t lbc_cudnn_op_graph(int bwd, int b, int s, int nh, int nkv, int d,
					    int flags, char *fail, size_t len);
/* Runs plan with the variant pack vp on the backend's current stream, the backward's fp32
 * accumulator (acc, acc_bytes; NULL for the forward) cleared first. */
cudnnStatus_t lbc_cudnn_exec(cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t vp, void *acc,
			     size_t acc_bytes);
#endif

#endif
