/*
 * Executors: where job arrays run. One table of operations (submit an array, poll many
 * jobs in one query, cancel, start) behind three implementations: libslurm
 * (exec_slurm.c, LB_WITH_SLURM), slurmrestd over HTTP or a unix socket with libcurl
 * (exec_rest.c, LB_WITH_CURL), and local processes on this machine (exec_local.c, no
 * Slurm: a detached worker runs the same scripts and records job states in the results
 * database). A build without a library keeps its executor's name and says how to get it.
 * This header is the table and the kit the executors share (exec.c); opening one by name
 * is slurm/executor.h's, which alone calls the implementations.
 */
#ifndef LB_SLURM_EXEC_H
#define LB_SLURM_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "results/jobs.h"
#include "slurm/render.h"

struct exec_opts {
	const char *rest_url;	  /* "http://host:port" or "unix:/path"; NULL = $SLURMRESTD_URL */
	const char *rest_version; /* "v0.0.42"; NULL = negotiated (exec_rest.c) */
	const char *db_path;	  /* the results database (the local executor's queue) */
	int local_slots;	  /* local: ranks at once; 0 = 1 (one timed job at a time) */
	int hold;		  /* submit held (priority 0); the submit benchmark uses it */
};

/* What one poll learnt about one job. */
struct exec_state {
	int known;	    /* 0: the scheduler no longer knows the job (purged after MinJobAge) */
	char state[24];	    /* PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ... */
	char reason[160];   /* scheduler's reason; "" none */
	int exit_code;	    /* the batch script's exit status, 128+N for signal N; -1 unknown */
	int64_t start_time; /* Unix seconds; 0 unknown */
	int64_t end_time;
};

struct executor {
	const char *name; /* "slurm", "rest", "local" */
	int max_array;	  /* tasks per array at most (MaxArraySize) */
	/* Submit array a whose script is at script_path; work_dir is the job's cwd. Writes the
	 * array's job id to array_job_id. Returns 0 or -1 with err set. */
	int (*submit)(struct executor *x, const struct slurm_array *a, const char *script_path,
		      const char *work_dir, char *array_job_id, size_t idlen, char *err,
		      size_t errlen);
	/* After the submitted jobs are recorded (local: start the worker); may be NULL. */
	int (*start)(struct executor *x, char *err, size_t errlen);
	/* One batched query for jobs[0..n): fills out[0..n). Returns 0 or -1 with err set. */
	int (*poll)(struct executor *x, const struct results_job *jobs, size_t n,
		    struct exec_state *out, char *err, size_t errlen);
	/* Cancel jobs[0..n): the whole array of each (one call per array; a sweep's arrays
	 * hold only its own layouts), plain jobs by id. Returns 0 or -1 with err set. */
	int (*cancel)(struct executor *x, const struct results_job *jobs, size_t n, char *err,
		      size_t errlen);
	void (*close)(struct executor *x);
	void *priv;
};

/* 1 if array task `task` is in a task list such as "2-5%2" or "1,3,7-9" (the pending
 * remainder of an array, as slurmctld reports it). */
int exec_task_in(const char *task_str, long task);

/* 1 if jobs[i]'s array already appears in jobs[0..i) (cancel kills whole arrays once). */
int exec_array_seen(const struct results_job *jobs, size_t i);

/* 1 if a state is final (the job will not run again). */
int exec_state_final(const char *state);

/* The job environment: this process's environment minus secrets (SLURM_JWT,
 * SLURMRESTD_TOKEN), never empty (libslurm refuses an empty one). Returns a
 * NULL-terminated array whose strings belong to environ; the caller frees the array. */
char **exec_job_environ(size_t *n);

/* 1 if an environment entry ("NAME=value") is a secret that never reaches a job. */
int exec_env_is_secret(const char *entry);

/* The local executor's worker loop (run by `layoutbench submit --local-worker --db PATH
 * --slots N`, which the local executor starts detached): runs the database's pending
 * local jobs, returns when none is pending or running, or at once when another worker
 * holds the database. Returns 0. */
int exec_local_worker(const char *db_path, int slots);

/* The implementations (slurm/executor.c dispatches to them). */
int exec_slurm_open(const struct exec_opts *o, struct executor **out, char *err, size_t errlen);
int exec_rest_open(const struct exec_opts *o, struct executor **out, char *err, size_t errlen);
int exec_local_open(const struct exec_opts *o, struct executor **out, char *err, size_t errlen);

#endif
