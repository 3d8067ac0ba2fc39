/*
 * Job scripts: a plan's runnable layouts grouped into Slurm job arrays, one array per
 * resource shape (nodes, ranks per node, time limit), each array at most MaxArraySize
 * tasks, each task finding its layout from SLURM_ARRAY_TASK_ID in a `case` table of the
 * script. Rendering is pure (plan in, arrays and script text out); writing the files
 * (slurm_render_plan, for `layoutbench plan SPEC --render DIR`) is the thin shell.
 * Every value from a spec that reaches a script is either checked against a safe
 * character set (names, partitions, accounts, paths) or single-quoted
 * (slurm_shell_quote); the spec's `setup` lines are the one exception: they are the
 * spec author's own shell and are written verbatim (docs/slurm.md).
 */
#ifndef LB_SLURM_RENDER_H
#define LB_SLURM_RENDER_H

#include <stddef.h>

#include "common/util.h"
#include "sweeps/sweep.h"

#define SLURM_DEFAULT_MAX_ARRAY 1001 /* Slurm's default MaxArraySize */
#define SLURM_DEFAULT_THROTTLE	0    /* no %K unless asked for */
#define SLURM_PATH_MAX		1024

struct slurm_render_opts {
	const char *runs_dir;	/* absolute; a layout runs in <runs_dir>/<sweep>/<layout id> */
	const char *train_path; /* layoutbench-train as compute nodes see it (absolute) */
	int throttle;		/* at most this many tasks of one array at once (%K); 0 = none */
	int max_array;		/* tasks per array at most (MaxArraySize); 0 = default 1001 */
};

/* One job array: tasks 0..n_tasks-1, task i runs plan entry entry[i]. */
struct slurm_array {
	char tag[32];	     /* "a0", "a1", ...: file stem, unique within a batch */
	char job_name[128];  /* "<sweep>.<layout id>" for one task, "<sweep>.<tag>" else */
	int nodes;	     /* --nodes */
	int ntasks_per_node; /* --ntasks-per-node: ranks per node (one per GPU) */
	int gpus_per_node;   /* GPUs per node; 0 for the CPU backend */
	char gres[64];	     /* "" = ask with --gpus-per-node; else --gres=<gres>:N with
				"gpu" or "gpu:TYPE" (cluster.gpu_request "gres", "gres:TYPE") */
	int cpus_per_task;   /* --cpus-per-task; 0 = unset */
	int time_limit_min;  /* --time, minutes; 0 = unset (partition default) */
	int throttle;	     /* %K; 0 = none */
	char partition[64];  /* from the spec's cluster; "" = default */
	char account[64];
	char qos[64];
	int exclusive;	    /* 0/1 */
	char *const *extra; /* the spec's extra #SBATCH options (borrowed from the plan) */
	int n_extra;
	size_t n_tasks;		       /* array indices 0..n_tasks-1 */
	size_t *entry;		       /* n_tasks indexes into the plan's entries */
	char array_spec[48];	       /* "0-9%4" (--array) */
	char out_path[SLURM_PATH_MAX]; /* --output, with %A (array job id) and %a (index) */
	char err_path[SLURM_PATH_MAX]; /* --error */
	char *script;		       /* the whole script text, "#!/bin/bash\n..." */
};

struct slurm_batch {
	struct slurm_array *arrays;
	size_t n_arrays;
	size_t n_tasks; /* over all arrays */
};

/*
 * Render the arrays for plan entries sel[0..n_sel) (each must be PLAN_OK), or for every
 * PLAN_OK entry when sel is NULL. Returns 0, or -1 with err set (an unsafe value, an
 * allocation failure). The caller frees out with slurm_batch_free. Pure.
 */
int slurm_render_batch(const struct sweep_plan *p, const size_t *sel, size_t n_sel,
		       const struct slurm_render_opts *o, struct slurm_batch *out, char *err,
		       size_t errlen);
void slurm_batch_free(struct slurm_batch *b);

/* Append s as one shell word in single quotes ("it's" -> 'it'\''s'). */
void slurm_shell_quote(struct lb_strbuf *sb, const char *s);

/* 1 if s is a safe name: 1..63 of [A-Za-z0-9._-], not starting with '-' or '.'. */
int slurm_safe_name(const char *s);

/* 1 if s is a safe path for an #SBATCH line: [A-Za-z0-9/._+,:@=-]+ (no spaces). */
int slurm_safe_path(const char *s);

/* The trainer path to render: $LAYOUTBENCH_TRAIN if set, else layoutbench-train next to
 * the running binary when it exists, else "layoutbench-train" (found through PATH). */
void slurm_default_train_path(char *buf, size_t len);

/* The runs folder as an absolute path (relative ones are taken from the current
 * directory; default "./runs"). Returns 0 or -1 with err set. */
int slurm_abs_runs_dir(const char *runs, char *buf, size_t len, char *err, size_t errlen);

/*
 * `layoutbench plan SPEC --render DIR`: write DIR/<tag>.sbatch for every array (with its
 * #SBATCH --array line, ready for a plain `sbatch`), and DIR/arrays.tsv (tag, array
 * spec, layout ids). Runs folder $LAYOUTBENCH_RUNS or ./runs, throttle
 * $LAYOUTBENCH_THROTTLE or none. Also creates <runs>/<sweep>/logs, the folder of
 * #SBATCH --output and --error (Slurm does not create it, and a job whose output cannot be
 * opened fails with no log at all); where it cannot be created here (the runs folder is
 * on another machine's file system) it warns on stderr and still writes the scripts.
 * Returns 0 or -1 with err set.
 */
int slurm_render_plan(const struct sweep_plan *p, const char *dir, char *err, size_t errlen);

#endif
