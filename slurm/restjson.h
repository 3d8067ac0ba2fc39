/*
 * The JSON of slurmrestd, by OpenAPI version, in one place: which versions we speak and
 * which one to use with a server (from its OpenAPI document), the job-submit request body
 * for an array, and reading one job of a `GET /slurm/vX/jobs` answer (its state, exit
 * status, times; which of our jobs rows it is). Pure (cJSON only), so every version's
 * shapes are tested without a server. We speak v0.0.38 (Slurm 22.05) through v0.0.42
 * (Slurm 24.11, 25.05): v0.0.38 sends the environment as an object and numbers plainly;
 * v0.0.39 and later send the environment as "NAME=value" strings and numbers as {"set",
 * "infinite", "number"}; v0.0.40 and later put the script inside the job. The table in
 * restjson.c says it row by row. Compiled with or without libcurl.
 */
#ifndef LB_SLURM_RESTJSON_H
#define LB_SLURM_RESTJSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "results/jobs.h"
#include "slurm/exec.h"
#include "slurm/render.h"

/* The OpenAPI versions we speak: v0.0.<minor> for minor in [OLDEST, NEWEST]. */
#define RESTJSON_OLDEST 38
#define RESTJSON_NEWEST 42

/*
 * What differs, between the versions we speak, in what we send (one row per version in
 * restjson.c). What we read needs no row: a job's state (a string, or an array from
 * v0.0.40), its numbers (plain, or {"set", "number"} from v0.0.39) and its exit status (a
 * raw wait status, or an object from v0.0.39) are told apart by their JSON type.
 */
struct restjson_shape {
	int minor;		    /* 38 for v0.0.38 */
	const char *slurm;	    /* the Slurm releases whose slurmrestd serves it */
	unsigned env_list : 1;	    /* environment ["NAME=value", ...]; else {"NAME": "value"} */
	unsigned num_objects : 1;   /* time_limit, memory_per_node {"set", "infinite", "number"} */
	unsigned node_range : 1;    /* minimum_nodes, maximum_nodes; else "nodes": [min, max] */
	unsigned tres_gpus : 1;	    /* tres_per_node "gres/gpu:N"; else gpus_per_node "N" */
	unsigned shared_none : 1;   /* exclusive as "shared": ["none"]; else "exclusive": "true" */
	unsigned script_in_job : 1; /* "job": {"script"}; else the request's own "script" */
};

/* The row for v0.0.<minor>; a minor past the newest gets the newest row (a version named
 * with --rest-version that we have not seen yet), one before the oldest NULL. */
const struct restjson_shape *restjson_shape(int minor);

/* "v0.0.42, v0.0.41, v0.0.40, v0.0.39, v0.0.38": the versions we speak, newest first. */
void restjson_spoken(char *buf, size_t len);

/*
 * The versions a slurmrestd serves, from its OpenAPI document (GET /openapi/v3): each N of
 * a "/slurm/v0.0.N/job/submit" path that also has "/slurm/v0.0.N/jobs", newest first, into
 * minors[0..max). Returns how many, 0 when the document lists none (or is not one).
 */
size_t restjson_served(const cJSON *openapi, int *minors, size_t max);

/* The newest of served[0..n) that we speak, or -1 when none is. */
int restjson_pick(const int *served, size_t n);

/* The message for a server at `where` that serves none of ours: it names what the server
 * offers (served[0..n), newest first) and what we speak. */
void restjson_none_message(const char *where, const int *served, size_t n, char *err,
			   size_t errlen);

/*
 * The body of POST /slurm/v0.0.<minor>/job/submit for array a: env[0..nenv) ("NAME=value"),
 * work_dir, hold (submit held). Returns the JSON text (caller frees with free()), or NULL
 * with err set (an sbatch_extra option REST cannot express, out of memory).
 */
char *restjson_submit_body(int minor, const struct slurm_array *a, char *const *env, size_t nenv,
			   const char *work_dir, int hold, char *err, size_t errlen);

/* 1 if the job object (one item of "jobs") is our jobs row j (an array task by array job id
 * and index, also inside a pending remainder's "array_task_string"; else by job id). */
int restjson_job_matches(const cJSON *job, const struct results_job *j);

/* Fill out from a job object: state, reason, exit status (v0.0.38: the raw wait status;
 * later: {return_code, signal}), start and end times. */
void restjson_job_state(const cJSON *job, struct exec_state *out);

/* A number given plainly, as {"number": N} or as {"set": true, "number": N}: 0 and *out,
 * or -1. */
int restjson_number(const cJSON *v, double *out);

#endif
