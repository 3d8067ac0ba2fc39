/*
 * The report's core: the runs as read from the `run_summary` (or `best_layout`) view, and
 * the selection that turns them into the paper's figures (Hagemann et al. 2023, Figures 1-5,
 * the RMSNorm comparison and the best-layout table) as bars: one group per sweep, one bar
 * per series, each bar the best run among its candidates or a failure (OOM, ...) when none
 * was measured. Pure: runs in, bars out; reading the database lives in report/load.h,
 * rendering in report/render.h and report/plot.h. Rules: docs/report.md.
 */
#ifndef LB_REPORT_H
#define LB_REPORT_H

#include <stddef.h>

#include "results/health.h"

/* The report's figures, the one list: X(ID, name, title, table_only). The enum, the names
 * --figure takes (with "predicted", the halving's and "all": report/cmd.c) and the titles
 * are made from it. table_only: the figure is its tables, without a plot. */
#define REPORT_KINDS(X)                                                                            \
	/* Figure 1: best run per kernel label */                                                  \
	X(KERNELS, "kernels", "Figure 1: attention and RMSNorm kernels", 0)                        \
	/* Figure 2: best checkpointed vs best not checkpointed */                                 \
	X(CHECKPOINTING, "checkpointing", "Figure 2: activation checkpointing", 0)                 \
	/* Figure 3: FlashAttention-2 rows, best per micro-batch size */                           \
	X(MICROBATCH, "microbatch", "Figure 3: micro-batch size", 0)                               \
	/* Figure 4: flash + RMS kernel, mbs 1, no ckpt: each (TP, PP) */                          \
	X(TP_PP, "tp-pp", "Figure 4: tensor vs pipeline parallelism", 0)                           \
	/* Figure 5: best with sequence parallelism on vs off */                                   \
	X(SEQPAR, "seqpar", "Figure 5: sequence parallelism", 0)                                   \
	/* the RMSNorm kernel comparison */                                                        \
	X(RMS, "rms", "The RMSNorm kernel", 0)                                                     \
	/* the best_layout view: per model, seq_len and GPU count */                               \
	X(BEST, "best", "Best layouts per model, sequence length and GPU count", 0)                \
	/* per sweep, each ok run of ours: phase times, peak memory */                             \
	X(PHASES, "phases", "Step phases and peak memory per rank", 0)                             \
	/* per sweep, each run of ours that fit or ran out of memory: its peak against the         \
	 * planner's model of the trainer */                                                       \
	X(MEMORY, "memory", "Peak memory against the planner's model", 1)

enum report_kind {
#define REPORT_KIND_ID(id, ...) REPORT_##id,
	REPORT_KINDS(REPORT_KIND_ID) REPORT_KIND_COUNT
};
#define REPORT_KIND_BAR(id, name, ...) "|" name

/* Its name: "kernels", "tp-pp", ... */
const char *report_kind_name(enum report_kind k);
/* Returns 0 and sets *k, or -1 for an unknown name ("all" is not a kind). */
int report_kind_parse(const char *s, enum report_kind *k);
/* The paper's name for the figure, e.g. "Figure 1: attention and RMSNorm kernels". */
const char *report_kind_title(enum report_kind k);
/* 1 when the figure has a plot on the HTML page; 0 for a figure that is its tables alone
 * (memory). */
int report_kind_plotted(enum report_kind k);

/* Phases of a step (docs/run-log.md), in the order of run_summary's columns. */
enum report_phase {
	REPORT_PHASE_FORWARD = 0,
	REPORT_PHASE_BACKWARD,
	REPORT_PHASE_OPTIMIZER,
	REPORT_PHASE_COMM, /* exposed communication */
	REPORT_PHASE_BUBBLE,
	REPORT_PHASE_COUNT
};

enum report_status { REPORT_RUN_OK = 0, REPORT_RUN_FAILED, REPORT_RUN_RUNNING };

/* A run's health, run_summary.health (docs/schema.md, "Run health"): the class results/
 * stored, by its names. */
enum report_health {
	REPORT_HEALTH_UNKNOWN = RESULTS_HEALTH_UNKNOWN, /* NULL: too short, no loss, imported */
	REPORT_HEALTH_OK = RESULTS_HEALTH_OK,
	REPORT_HEALTH_FLAT = RESULTS_HEALTH_FLAT,
	REPORT_HEALTH_DIVERGED = RESULTS_HEALTH_DIVERGED
};

/* "ok", "flat", "diverged"; NULL for unknown. */
const char *report_health_name(enum report_health h);
/* The health named by text (NULL or anything else: unknown). */
enum report_health report_health_parse(const char *text);

/* One run (attempt). Strings point into the owning set's string pool. */
struct report_run {
	long run_id;
	const char *sweep;	   /* sweep name; imported: the CSV's base name */
	const char *label;	   /* series label: the paper's kernel string, or ours */
	const char *model;	   /* preset name, e.g. "llama-13b" */
	const char *checkpointing; /* "none" | "full" | "selective" */
	const char *attention;	   /* "naive" | "fused_softmax" | "flash" | "cudnn" */
	const char *norm;	   /* "unfused" | "fused" */
	const char *failure_class; /* NULL when none (oom, nccl_error, ...) */
	int paper;		   /* 1: imported from the paper (source = 'paper') */
	int seq_len;		   /* tokens per sequence */
	int gpus;		   /* world size */
	int micro_batch;	   /* sequences per micro-batch */
	int tp, pp, dp;
	int sequence_parallel; /* 0/1 */
	enum report_status status;
	int has_mfu;
	double mfu; /* fraction 0..1: COALESCE(mfu_reported, mfu); valid when has_mfu */
	int has_tflops;
	double tflops;			  /* model TFLOP/s per GPU; valid when has_tflops */
	double step_time;		  /* mean steady-state step time, seconds; < 0 unknown */
	double step_time_sd;		  /* its sample standard deviation over the steady-state
					     steps (warmup excluded), seconds; < 0 unknown */
	int n_steps;			  /* steady-state steps; 0 unknown */
	double phase[REPORT_PHASE_COUNT]; /* mean phase times, seconds; < 0 unknown */
	long long peak_mem;		  /* bytes, max over steps; < 0 unknown */
	long long rank_mem_min, rank_mem_max; /* per-rank peaks, bytes; valid when rank_n */
	int rank_n;			      /* ranks in rank_peak_mem; 0 unknown */
	long long model_mem;   /* the planner's model of the trainer (lb_memory_trainer) for the
				  run's layout and backend, bytes, without the GPU reserve; < 0
				  unknown (an imported run, no flags, a layout it cannot build) */
	long long planned_mem; /* what the planner plans for it: model_mem, plus on a GPU the
				  LB_TRAINER_GPU_RESERVE_GIB it reserves for the CUDA runtime;
				  bytes, < 0 unknown (with model_mem) */
	enum report_health health;
	int has_mfu_no_embed;
	double mfu_no_embed; /* fraction: MFU without the input embedding lookup (imported: the
				paper's MFU in that count); valid when has_mfu_no_embed */
	long long device_peak_mem; /* bytes: the device's own reading, most loaded rank, every
				      step; < 0 unknown (not recorded) */
};

/* 1 when the run has at least one phase time. */
int report_run_has_phases(const struct report_run *r);

/* Read a JSON array of non-negative integers ("[1,2,3]", run_summary.rank_peak_mem) into
 * r->rank_n, rank_mem_min and rank_mem_max; NULL or unreadable text leaves rank_n 0. */
void report_run_set_rank_mem(struct report_run *r, const char *json);

/* A growable set of runs with its string pool. */
struct report_runs {
	struct report_run *v; /* n runs */
	size_t n, cap;
	char **pool; /* open-addressing table of interned strings, pool_cap slots */
	size_t pool_n, pool_cap;
};

void report_runs_init(struct report_runs *rs);
/* Append a copy of r; its strings (any may be NULL; NULL strings other than
 * failure_class become "") are interned in the set's pool. Returns 0, or -1 when out of
 * memory. */
int report_runs_add(struct report_runs *rs, const struct report_run *r);
/* Intern s (copied) in the set's pool: the same text gives the same pointer. NULL when
 * out of memory. Owned by the set. */
const char *report_runs_intern(struct report_runs *rs, const char *s);
/* Frees the runs and the pool. */
void report_runs_release(struct report_runs *rs);

/* 1 when the run counts as measured: status ok with a known MFU or TFLOP/s. */
int report_run_measured(const struct report_run *r);
/* 1 when a ranks above b (both measured): known MFU beats unknown, then higher MFU, then
 * higher TFLOP/s per GPU, then the lower run_id (the earlier run). */
int report_run_better(const struct report_run *a, const struct report_run *b);

/* A qsort and bsearch comparator of pointers to runs (const struct report_run *), by run
 * id. */
int report_run_by_id(const void *pa, const void *pb);

/* The best_layout view's rule applied to a set of runs: per (model, seq_len, gpus), the ok
 * run that ranks highest by report_run_better (ok runs without MFU or TFLOP/s rank last,
 * by run_id), diverged runs left out, exactly as the view orders them. Appends a copy of
 * each winner to out (initialised by the caller). Returns 0, or -1 when out of memory. */
int report_runs_best(const struct report_runs *rs, struct report_runs *out);
/* The same; keep_diverged: diverged runs compete too; *left_out (may be NULL): how many ok
 * runs were left out as diverged. */
int report_runs_best_opts(const struct report_runs *rs, int keep_diverged, struct report_runs *out,
			  size_t *left_out);

/* Kernel classes shared by the figures: imported runs match the paper's kernel string,
 * ours the attention and norm kernels. Our cudnn (cuDNN's fused flash attention) is
 * neither: the paper's figures keep to FlashAttention-2, and cudnn shows in the kernel
 * comparison under its own labels (cudnn+unfused, cudnn+fused), after flash. */
int report_run_is_flash_rms(const struct report_run *r); /* "flash_attention2 + RMS kernel" /
							    flash + fused */
int report_run_is_flash2(const struct report_run *r);	 /* "flash_attention2" /
							    flash + unfused */

enum report_bar_state {
	REPORT_BAR_VALUE = 0, /* a measured winner: run is set */
	REPORT_BAR_OOM,	      /* nothing measured; at least one candidate ran out of memory */
	REPORT_BAR_FAILED,    /* nothing measured; candidates failed otherwise (failure_class) */
	REPORT_BAR_RUNNING,   /* nothing measured or failed yet; some candidate still running */
	REPORT_BAR_DIVERGED   /* nothing measured but diverged runs, which were left out */
};

/*
 * Bars come in groups: one group per sweep, model, sequence length and GPU count (runs of
 * one sweep on different GPU counts or sequence lengths are not comparable bars); for the
 * best figure one per model, sequence length and GPU count.
 */
struct report_bar {
	const char *group; /* the group's title, one pool string per group (pointers compare):
			      "llama-13b, seq 2048, 64 GPUs (sweep NAME)"; best:
			      "llama-13b/2048/64" */
	const char *sweep; /* the group's sweep (best: the winner's); pool string */
	const char *model; /* the group's model, sequence length and GPU count */
	int seq_len, gpus;
	const char *series; /* the bar's name within its group; pool string */
	enum report_bar_state state;
	const struct report_run *run; /* the winner when state is VALUE, else NULL (memory:
					 the run, also when OOM) */
	const char *failure_class;    /* FAILED: the most frequent class among candidates */
	int order1, order2;	      /* the series' place among the figure's series (kernel rank,
					 micro-batch size, TP and PP, ...); see report_figure_series */
	/* Layout fields that define the bar (used when run is NULL): -1 / NULL unknown. */
	int micro_batch, tp, pp;
	const char *checkpointing;
};

struct report_figure {
	enum report_kind kind;
	struct report_bar *bars; /* n bars, ordered by group, then series */
	size_t n;
	size_t diverged_left_out; /* distinct diverged runs that were candidates of a bar and
				     were left out (0 with keep_diverged) */
};

/* How a figure is built. */
struct report_build_opts {
	int keep_diverged; /* 1: diverged runs compete for bars like any ok run (and are marked);
			      0 (default): the bar figures leave them out */
};

/*
 * Build one figure from a set of runs: REPORT_BEST turns each run (a best_layout row) into
 * one bar; REPORT_PHASES makes one bar per ok run of ours (not imported) in run_id order,
 * REPORT_MEMORY one bar per run of ours with a model figure that ended ok with a peak
 * (state VALUE) or out of memory (state OOM), in run_id order,
 * series its label, leaving out groups where no run has phase times; every other kind
 * selects per group. sweep: only that sweep (NULL: all). Groups come in the order of
 * model name, sequence length, GPU count, then sweep name; a group with no candidates for
 * the figure is left out.
 * Returns 0, or -1 when out of memory. rs must outlive the figure (bars point into it).
 * Caller releases with report_figure_release.
 */
int report_figure_build(struct report_runs *rs, enum report_kind kind, const char *sweep,
			struct report_figure *out);
/* The same with options (report_figure_build: every option 0). The bar figures (kernels
 * ... best) leave diverged runs out unless o->keep_diverged, counting them in
 * out->diverged_left_out; a bar whose only measured candidates diverged is
 * REPORT_BAR_DIVERGED. The per-run figures (phases, memory) show every run. */
int report_figure_build_opts(struct report_runs *rs, enum report_kind kind, const char *sweep,
			     const struct report_build_opts *o, struct report_figure *out);
void report_figure_release(struct report_figure *f);

/* Number of distinct groups in a figure (bars are ordered by group). */
size_t report_figure_groups(const struct report_figure *f);

/* A bar's group without its sweep: "llama-13b, seq 2048, 64 GPUs" (one GPU: "1 GPU"). */
void report_bar_group_name(const struct report_bar *b, char *buf, size_t len);

/* The spread of a bar's winner over its steady-state steps: the step time's sample
 * standard deviation (seconds) and the MFU's (a fraction, first order: MFU is inversely
 * proportional to the step time, so its standard deviation is MFU * sd / mean of the step
 * time). Each is < 0 when unknown (no winner, fewer than two steps, an imported run, no
 * peak for MFU). */
double report_bar_step_sd(const struct report_bar *b);
double report_bar_mfu_sd(const struct report_bar *b);

/* The distinct series of a figure in the order its groups list them (the paper's kernel
 * order, micro-batch size, (TP, PP), ...): sets *series (caller frees the array with
 * free(); the strings belong to the runs' pool) and returns the count, or returns 0 with
 * *series NULL when there are none or memory ran out. */
size_t report_figure_series(const struct report_figure *f, const char ***series);

/* 1 when every measured bar of the figure has a known MFU (then plots show MFU, else
 * TFLOP/s per GPU). */
int report_figure_all_mfu(const struct report_figure *f);

/* A bar's MFU cell: "70.57" (percent, two decimals), "n/a" (unknown peak; unknown_text),
 * "OOM", "FAILED(nccl_error)", "RUNNING", "DIVERGED". Writes into buf (snprintf
 * semantics). */
void report_bar_mfu_text(const struct report_bar *b, const char *unknown_text, char *buf,
			 size_t len);

#endif
