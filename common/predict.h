/*
 * Step-time prediction: the seconds one optimizer step of a layout takes on a machine,
 * before it runs. Pure arithmetic on the layout record (the one the planner, the trainer
 * and the database share) and a machine description (common/machine.h reads and writes
 * its file): throughput tables of the GPU (GEMMs by shape, attention kernels by sequence,
 * memory-bound kernels by bytes), link bandwidths and latencies, what the software stack
 * moves per parameter, and a few fitted terms, each named, bounded and with a physical
 * meaning (LB_FIT_TERMS). The model, term by term, with its sources: docs/prediction.md.
 *
 * - compute: every GEMM of a layer at its shape after the tensor-parallel split (forward,
 *   input gradient, weight gradient), the attention core by kernel and sequence, the
 *   memory-bound kernels (RMSNorm, RoPE, SwiGLU, residual adds, embedding, cross-entropy)
 *   by the bytes they move, the optimizer by the bytes per parameter it moves;
 * - recomputation: full checkpointing runs each layer's forward again before its
 *   backward, selective the attention core's forward;
 * - the pipeline: per stage (its layers by lb_chunk_layers, the embedding on the first,
 *   the final norm, head and loss on the last) the time of one micro-batch, then
 *   (m - 1/v) * max + sum / v over the stages (1F1B and GPipe: v = 1; interleaved:
 *   v virtual stages), m the micro-batches per step;
 * - communication: tensor/sequence-parallel all-reduce, reduce-scatter and all-gather
 *   over NVLink (ring: 2(t-1)/t or (t-1)/t of the bytes), pipeline sends, the
 *   data-parallel reduction (ZeRO's reduce-scatter and all-gather, or an all-reduce) and
 *   the part of it not hidden behind the backward. Which link a collective takes follows
 *   from the layout's GPUs per node and the rank order tp, then dp, then pp.
 *
 * Pure functions, libc and libm only; no I/O.
 */
#ifndef LB_PREDICT_H
#define LB_PREDICT_H

#include <stddef.h>

#include "common/layout.h"

/*
 * The fitted terms: X(name, default, min, max, auto, unit, meaning). A "scale" multiplies
 * the time the tables and the link model give (1: the table is right; 2: it takes twice
 * as long); the others are seconds or fractions. A calibration fits them by least squares
 * on measured runs (lb_predict_fit) within [min, max]: those marked auto whenever the
 * runs tell them apart (lb_fit_identifiable). dp_exposed is not auto: step times alone
 * cannot tell an exposed fraction from a slower link (dp_scale), so the reduction's cost
 * with a pipeline is dp_scale's, and dp_exposed_nopp says how much of it the backward
 * hides without one.
 */
#define LB_FIT_TERMS(X)                                                                            \
	X(gemm_scale, 1.0, 0.5, 3.0, 1, "x",                                                       \
	  "GEMM time over the table's rate at that shape (1 / sustained fraction)")               \
	X(mem_scale, 1.0, 0.25, 4.0, 1, "x", "memory-bound kernels' time over the table's rate")   \
	X(norm_unfused_scale, 1.0, 0.25, 4.0, 1, "x",                                              \
	  "the unfused RMSNorm's time over its table rate (its passes in the stack)")             \
	X(tp_scale, 1.0, 0.25, 8.0, 1, "x",                                                        \
	  "tensor/sequence-parallel collectives' time over the ring at link bandwidth")           \
	X(p2p_scale, 1.0, 0.1, 20.0, 1, "x", "pipeline sends' time over the link bandwidth")       \
	X(dp_scale, 1.0, 0.1, 20.0, 1, "x",                                                        \
	  "data-parallel reduction's time over the ring at link bandwidth")                       \
	X(dp_hop_s, 0.0, 0.0, 0.5, 1, "s",                                                         \
	  "data-parallel reduction: latency of one ring step over all its buckets")               \
	X(dp_exposed, 1.0, 0.0, 1.0, 0, "",                                                        \
	  "fraction of the data-parallel reduction not hidden behind the backward, with a "       \
	  "pipeline")                                                                              \
	X(dp_exposed_nopp, 1.0, 0.0, 1.0, 1, "", "the same with one pipeline stage")               \
	X(layer_s, 0.0, 0.0, 0.005, 1, "s",                                                        \
	  "host and launch time per layer pass (forward, backward, recomputed forward)")          \
	X(microbatch_s, 0.0, 0.0, 0.5, 1, "s", "host time per micro-batch per stage")              \
	X(step_s, 0.0, 0.0, 10.0, 1, "s", "host time per optimizer step (gradient norm, logging)")

enum lb_fit_term {
#define LB_FIT_ENUM(name, def, lo, hi, fit_auto, unit, what) LB_FIT_##name,
	LB_FIT_TERMS(LB_FIT_ENUM)
#undef LB_FIT_ENUM
	    LB_FIT_COUNT
};

struct lb_fit_term_info {
	const char *name;
	double def, min, max;
	int fit_auto; /* 1: calibrate fits it when the runs tell it apart */
	const char *unit; /* "x" (a scale), "s" or "" (a fraction) */
	const char *what;
};
extern const struct lb_fit_term_info lb_fit_terms[LB_FIT_COUNT];
/* The term named name, or -1. */
int lb_fit_term_find(const char *name);

/* Attention kernels' scale: the same bounds for each (a fitted term per kernel). */
#define LB_ATTN_SCALE_MIN 0.2
#define LB_ATTN_SCALE_MAX 5.0

/* Memory-bound kernels, in the names of bench_kernels' rows. */
#define LB_MEMK_LIST(X)                                                                            \
	X(NORM_FUSED_FWD, "rmsnorm.fused.fwd")                                                     \
	X(NORM_FUSED_BWD, "rmsnorm.fused.bwd")                                                     \
	X(NORM_UNFUSED_FWD, "rmsnorm.unfused.fwd")                                                 \
	X(NORM_UNFUSED_BWD, "rmsnorm.unfused.bwd")                                                 \
	X(ROPE_FWD, "rope.fwd")                                                                    \
	X(ROPE_BWD, "rope.bwd")                                                                    \
	X(SWIGLU_FWD, "swiglu.fwd")                                                                \
	X(SWIGLU_BWD, "swiglu.bwd")                                                                \
	X(EMBED_FWD, "embed.fwd")                                                                  \
	X(EMBED_BWD, "embed.bwd")                                                                  \
	X(XENT_MAX, "xent.max")                                                                    \
	X(XENT_SUM, "xent.sum")                                                                    \
	X(XENT_GRAD, "xent.grad")                                                                  \
	X(ADD, "add")                                                                              \
	X(ADAMW, "adamw")

enum lb_memk {
#define LB_MEMK_ENUM(id, name) LB_MEMK_##id,
	LB_MEMK_LIST(LB_MEMK_ENUM)
#undef LB_MEMK_ENUM
	    LB_MEMK_COUNT
};
/* "rmsnorm.fused.fwd", ...; lb_memk_parse returns the kernel or -1. */
const char *lb_memk_name(enum lb_memk k);
int lb_memk_parse(const char *name);

enum lb_gemm_op { LB_GEMM_FWD = 0, LB_GEMM_DGRAD, LB_GEMM_WGRAD, LB_GEMM_OPS };
/* "fwd", "dgrad", "wgrad"; parse returns the op or -1. */
const char *lb_gemm_op_name(enum lb_gemm_op op);
int lb_gemm_op_parse(const char *s);

/* A measured GEMM: C (m, n) = A (m, k) B (k, n), at tflops (2 m n k FLOPs a call). */
struct lb_gemm_row {
	enum lb_gemm_op op;
	double m, n, k;
	double tflops;
};

/* One attention kernel: its rates by sequence length, forward and backward, in the
 * FLOPs bench_kernels counts (causal: 4 B nh S^2 D / 2 forward, 2.5 times that
 * backward, for every kernel, though naive and fused compute all S^2 scores). */
#define LB_ATTN_ROWS_MAX 16
struct lb_attn_kernel {
	char name[32]; /* "naive", "fused_softmax", "flash", "cudnn", or another kernel a
			  variant names ("flash1") */
	int n_fwd, n_bwd;
	double fwd_seq[LB_ATTN_ROWS_MAX], fwd_tflops[LB_ATTN_ROWS_MAX]; /* by rising seq */
	double bwd_seq[LB_ATTN_ROWS_MAX], bwd_tflops[LB_ATTN_ROWS_MAX];
	double scale; /* fitted: time over the table's (LB_ATTN_SCALE_MIN..MAX) */
	int fitted;   /* 1: scale came from a calibration */
};

/* A run label the stack used that names another kernel than the layout's attention: the
 * paper's "flash_attentionv1.0.8" is attention flash in the layout, FlashAttention 1 in
 * the stack. */
struct lb_attn_variant {
	char label[64];
	char kernel[32];
};

/* A memory-bound kernel's rate at a size (bytes read and written per call). */
struct lb_mem_row {
	enum lb_memk kernel;
	double bytes, gbps;
};

#define LB_MACHINE_GEMM_MAX	256
#define LB_MACHINE_ATTN_MAX	8
#define LB_MACHINE_VARIANT_MAX	8
#define LB_MACHINE_MEM_MAX	128
#define LB_MACHINE_TEXT		1024

/*
 * A machine: one GPU kind, its node, its links and the software stack that runs on it.
 * Rates are what a kernel sustains at a size; without a row, a GEMM takes the parametric
 * rate peak * gemm_efficiency * f(m) f(n) f(k), f(x) = x / (x + gemm_half_dim), and a
 * memory-bound kernel copy_gbps * its efficiency (mem_efficiency, unless
 * mem_kernel_efficiency names one). Rows correct the parametric rate: a GEMM at a shape
 * takes the parametric rate times the ratio measured at the nearest rows of its op.
 */
struct lb_machine {
	char name[64];			/* "h200", "a100-paper" */
	char gpu[64];			/* product name, as in a spec's cluster.gpu */
	char description[LB_MACHINE_TEXT];
	char source[LB_MACHINE_TEXT];	/* where the tables come from */
	char base[64];			/* the machine this one was made from ("" none) */
	int nominal;			/* 1: tables from data sheets and papers, not measured */
	int calibrated;			/* 1: fitted terms from measured runs */
	double peak_tflops;		/* dense bf16 per GPU */
	double gemm_efficiency;		/* parametric GEMM rate: fraction of the peak */
	double gemm_half_dim;		/* a dimension at which f() is 1/2 */
	int n_gemm;
	struct lb_gemm_row gemm[LB_MACHINE_GEMM_MAX];
	int n_attn;
	struct lb_attn_kernel attn[LB_MACHINE_ATTN_MAX];
	int n_variants;
	struct lb_attn_variant variants[LB_MACHINE_VARIANT_MAX];
	double copy_gbps;			 /* device memory bandwidth a copy reaches */
	double mem_efficiency;			 /* memory-bound kernels without a row */
	double mem_kernel_efficiency[LB_MEMK_COUNT]; /* 0: mem_efficiency */
	int n_mem;
	struct lb_mem_row mem[LB_MACHINE_MEM_MAX];
	/* links */
	int gpus_per_node;
	double nvlink_gbps;	/* GB/s per GPU, one direction, within a node */
	double nvlink_lat_s;	/* per ring step */
	double node_gbps;	/* GB/s per node, one direction, between nodes */
	double node_lat_s;
	/* the software stack: bytes moved per parameter */
	double grad_bytes;	/* gradient reduced (4: fp32) */
	double param_bytes;	/* parameters gathered after a ZeRO step (2: bf16) */
	double optimizer_bytes; /* read and written by the optimizer step and the gradient
				   norm, per parameter it updates */
	double fit[LB_FIT_COUNT];
	int fitted[LB_FIT_COUNT]; /* 1: the term came from a calibration */
};

/* Defaults: every fitted term at its default, gemm_efficiency 0.8, gemm_half_dim 128,
 * mem_efficiency 0.8, 8 GPUs per node, grad_bytes 4, param_bytes 2, optimizer_bytes 34;
 * no rates (peak 0: nothing can be predicted until a table says). */
void lb_machine_init(struct lb_machine *m);

/* The attention kernel a run uses on m: the variant the label names, else the layout's
 * attention kernel; NULL when m has no rates for it. */
const struct lb_attn_kernel *lb_machine_attn(const struct lb_machine *m, enum lb_attn attn,
					     const char *label);
struct lb_attn_kernel *lb_machine_attn_mut(struct lb_machine *m, const char *name);

/* What lb_predict returns: the step and where its time goes (seconds). */
struct lb_prediction {
	double step_s;	      /* one optimizer step */
	double mfu;	      /* model FLOPs (PaLM count) / (step_s * GPUs * peak); 0 no peak */
	double hfu;	      /* with recomputation */
	double pipeline_s;    /* the micro-batches through the pipeline, bubble included */
	double bubble_s;      /* of which the bottleneck stage idles (fill, drain, imbalance) */
	double gemm_s;	      /* per step on the bottleneck stage: GEMMs */
	double attn_s;	      /* attention core */
	double mem_s;	      /* memory-bound kernels */
	double tp_s;	      /* tensor/sequence-parallel collectives */
	double p2p_s;	      /* pipeline sends */
	double host_s;	      /* per layer pass and per micro-batch host time */
	double dp_s;	      /* exposed data-parallel reduction */
	double optimizer_s;   /* optimizer step */
	double step_host_s;   /* per step host time */
	int bottleneck;	      /* the stage with the longest micro-batch */
	int micro_batches;    /* per step per data-parallel rank */
};

/*
 * Memo of the per-layer costs, which depend on the model's shape, the sequence, the
 * micro-batch, tp, sequence parallelism, checkpointing and the kernels but not on pp,
 * dp or ZeRO: a grid of many layouts computes each once. Zeroed by lb_predict_cache_init;
 * it belongs to one machine (cleared when another is used); free with _release.
 */
struct lb_predict_cache {
	const struct lb_machine *m;
	size_t cap, n;
	struct lb_pc_slot *slots;
	long hits, misses;
};
void lb_predict_cache_init(struct lb_predict_cache *c);
void lb_predict_cache_release(struct lb_predict_cache *c);

/*
 * Predict layout l on machine m. label: the run's series label (a kernel variant such as
 * the paper's "flash_attentionv1.0.8"), or NULL. cache may be NULL. Returns 0 and fills
 * out; or -1 with why (len bytes) when it cannot: the layout is not valid, or the
 * machine has no peak or no rates for the layout's attention kernel ("machine 'x' has no
 * rate for attention 'cudnn' (measure it with bench_kernels and calibrate)").
 */
int lb_predict(const struct lb_machine *m, const struct lb_layout *l, const char *label,
	       struct lb_predict_cache *cache, struct lb_prediction *out, char *why, size_t len);

/* ---- fitting the terms to measured runs ---- */

/* One measured run: its layout, label and mean steady-state seconds per step. */
struct lb_fit_row {
	struct lb_layout layout;
	char label[64];
	double step_s;
	const char *group; /* a name to report it under (its sweep), not owned */
};

/* Which terms a fit may move: the LB_FIT_COUNT terms, then one per attention kernel of
 * the machine (index LB_FIT_COUNT + i for m->attn[i]). */
#define LB_FIT_MAX_PARAMS (LB_FIT_COUNT + LB_MACHINE_ATTN_MAX)

struct lb_fit_opts {
	int free[LB_FIT_MAX_PARAMS]; /* 1: fit it; 0: keep it */
	double huber;		     /* relative residual beyond which a row weighs less
					(Huber); 0: plain least squares */
	int max_iter;		     /* Levenberg-Marquardt iterations; 0: 100 */
};

struct lb_fit_result {
	int n_rows, n_used; /* rows given, rows that could be predicted */
	int n_params;	    /* terms fitted */
	int iterations;
	double rms;	    /* root mean square of the relative residuals */
	double mean_abs;    /* mean |relative residual| */
	double max_abs;
};

/*
 * The terms that the rows can tell apart: free[i] = 1 for every term whose value changes
 * some row's prediction (a one-GPU grid cannot fit the link terms; a grid without
 * naive attention cannot fit its scale). Terms m marks as not to fit stay 0.
 */
void lb_fit_identifiable(const struct lb_machine *m, const struct lb_fit_row *rows, size_t n,
			 struct lb_fit_opts *o);

/*
 * Fit the free terms of m to rows by least squares on the relative residuals
 * (predicted - measured) / measured, Levenberg-Marquardt with each term held in its
 * bounds, rows beyond o->huber weighted by Huber's rule. m's fitted terms are updated
 * in place and marked fitted. resid (n entries, may be NULL) gets each row's relative
 * residual (NaN when the row cannot be predicted). Returns 0, or -1 with err set (no
 * row can be predicted; out of memory).
 */
int lb_predict_fit(struct lb_machine *m, const struct lb_fit_row *rows, size_t n,
		   const struct lb_fit_opts *o, double *resid, struct lb_fit_result *res, char *err,
		   size_t errlen);

/* ---- judging predictions against measurements ---- */

/* Spearman's rank correlation of x and y (n >= 2; ties get their mean rank); NaN when a
 * side has no spread. */
double lb_spearman(const double *x, const double *y, size_t n);

/* Of n runs with predicted and measured step times and measured MFU (fractions): mean
 * and worst |relative error|, Spearman of predicted against measured step time, and the
 * measured MFU of the run predicted fastest (lowest predicted GPU-seconds per token: the
 * highest predicted MFU) and of the best measured run. */
struct lb_pred_score {
	size_t n;
	double mean_abs, max_abs;
	double spearman;
	double mfu_of_predicted_best, mfu_best;
	size_t predicted_best, measured_best; /* indices */
};
void lb_pred_score(const double *pred_s, const double *meas_s, const double *pred_mfu,
		   const double *meas_mfu, size_t n, struct lb_pred_score *out);

/*
 * The pipeline bound on one layout at two micro-batches, which needs no model: under 1F1B
 * (and GPipe; interleaved 1F1B with v virtual stages) a data-parallel rank with N samples
 * a step in micro-batches of b on p stages runs N/b + (p-1)/v micro-batch times of its
 * slowest stage, so where a sample takes no longer in a larger micro-batch, hi takes at
 * most (N + (p-1) b_hi / v) / (N + (p-1) b_lo / v) times lo's step (1 without a
 * pipeline). Returns that bound, or 0 when hi is not lo at a larger micro-batch.
 */
double lb_pipeline_bound(const struct lb_layout *lo, const struct lb_layout *hi);

#endif
