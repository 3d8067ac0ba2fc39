/*
 * Sweep specs and the planner. A spec (JSON) names a sweep, its model(s), fixed values,
 * a grid, zipped groups, a union of sub-grids, derived values and `where` constraints,
 * plus the cluster it targets. sweep_plan() expands it into grid points, each checked by
 * the layout validity rules and the memory estimate. Pure: text in, plan out; file
 * reading lives in sweep_load().
 */
#ifndef LB_SWEEP_H
#define LB_SWEEP_H

#include <stddef.h>

#include "common/layout.h"

enum plan_status { PLAN_OK = 0, PLAN_OOM, PLAN_INVALID };

struct plan_entry {
	struct lb_layout layout;
	char id[LB_ID_LEN + 1];
	enum plan_status status;
	char reason[160]; /* for PLAN_INVALID (and PLAN_OOM: "needs 91.2 GiB of 80 GiB") */
	double mem_gib;	  /* estimated memory per GPU */
	char label[64];	  /* optional series label from the spec (e.g. a kernel name) */
};

/* The cluster a sweep targets (spec key "cluster"). Strings are validated by the
 * spec parser (see docs/spec.md) and are safe to quote into a job script. */
struct sweep_cluster {
	char partition[64]; /* "" = cluster default */
	char account[64];
	char qos[64];
	int time_limit_min; /* per job; 0 = unset */
	int gpus_per_node;
	double gpu_mem_gib;  /* memory per GPU used for pruning */
	char gpu[64];	     /* product name for the peak table, e.g. "A100" */
	double peak_tflops;  /* dense bf16 peak per GPU the trainer records (TFLOP/s, its
				--peak-tflops), for a GPU the peak table lacks; 0 = the table's */
	int cpus_per_task;   /* 0 = unset */
	int exclusive;	     /* 0/1 */
	char **sbatch_extra; /* extra "#SBATCH" options, validated; n_sbatch_extra entries */
	int n_sbatch_extra;
	char **env; /* "NAME=value" pairs exported by the job script */
	int n_env;
	char **setup; /* shell lines run before the trainer (module loads); the spec
			 author's own shell, written verbatim and documented as such */
	int n_setup;
	char device[16];      /* trainer --device: "cuda" or "cpu" */
	int memory_paper;     /* spec "memory_model": 1 "paper" (the paper stack's model,
				 lb_memory_estimate), 0 "trainer" (default: what
				 layoutbench-train allocates, lb_memory_trainer) */
	char gpu_request[64]; /* how a job asks for its GPUs: "" or "gpus-per-node"
				 (--gpus-per-node=N), "gres" (--gres=gpu:N), "gres:TYPE"
				 (--gres=gpu:TYPE:N) */
};

/* The trainer's optimizer settings a sweep asks for (spec "run": lr, weight_decay, clip),
 * given to every task as --lr, --weight-decay, --clip; a setting whose bit is not in
 * `given` is left to the trainer's default (a zeroed struct gives none). Not part of the
 * layout id: they change the losses, not the work of a step. */
enum { SWEEP_OPTIM_LR = 1, SWEEP_OPTIM_WD = 2, SWEEP_OPTIM_CLIP = 4 };
struct sweep_optim {
	double lr, weight_decay, clip;
	unsigned given; /* SWEEP_OPTIM_* bits */
};

struct sweep_plan {
	char name[LB_NAME_MAX];
	struct sweep_cluster cluster;
	struct sweep_optim optim;
	double step_time_guess_s;   /* 0 = none given */
	struct plan_entry *entries; /* every grid point, in expansion order */
	size_t n_entries;
	size_t n_ok, n_oom, n_invalid;
	/* Added after the first contract: points dropped by `where`, and points whose layout
	 * id repeats an earlier entry's (merged into it: its label gains "|label"). */
	size_t n_filtered, n_duplicates;
	char description[512];
};

/* Parse a spec text into a plan. path is used in messages only. Returns 0, or -1 with
 * err set to "PATH: JSON.PATH: fault" (e.g. "x.json: grid.tp[2]: expected a positive
 * integer, got \"two\""). Caller frees with sweep_plan_free. */
int sweep_plan_text(const char *path, const char *text, size_t len, struct sweep_plan *out,
		    char *err, size_t errlen);

void sweep_plan_free(struct sweep_plan *p);

/* Plan a spec named on the command line: "-" reads stdin; an existing file is read;
 * otherwise the spec embedded in the binary as "sweeps/specs/<arg>" or
 * "sweeps/specs/<arg>.json" (so "quickstart" names the shipped quickstart spec). Same
 * contract as sweep_plan_text. */
int sweep_plan_load(const char *spec_arg, struct sweep_plan *out, char *err, size_t errlen);

/* The text of a spec named as sweep_plan_load names it, NUL-terminated: what is planned
 * is exactly what a caller can keep (the database stores it; resubmit plans it again).
 * name gets the name used in messages (the path, "-", or "sweeps/specs/NAME.json").
 * Returns the text (caller frees with free) and its length in *len, or NULL with err set. */
char *sweep_spec_read(const char *spec_arg, char *name, size_t namelen, size_t *len, char *err,
		      size_t errlen);

/* Estimated GPU-hours (ranks x steps x step_time_guess_s): of the listed entries, or of
 * every ok entry when entries is NULL. -1 when the spec gives no step-time guess. */
double sweep_gpu_hours(const struct sweep_plan *p, const size_t *entries, size_t n);

/* Limits on expansion. max_points: grid points (before `where`) a spec may expand to;
 * 0 = SWEEP_MAX_POINTS. */
#define SWEEP_MAX_POINTS 4000000
struct sweep_opts {
	size_t max_points;
	int threads; /* judging threads; 0 = the online CPUs for large plans, 1 for small */
};

/* sweep_plan_text with options (opts may be NULL). */
int sweep_plan_text_opts(const char *path, const char *text, size_t len,
			 const struct sweep_opts *opts, struct sweep_plan *out, char *err,
			 size_t errlen);

const char *sweep_status_name(enum plan_status s); /* "ok", "oom", "invalid" */

#endif
