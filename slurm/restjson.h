/*
 * The JSON of slurmrestd, by OpenAPI version, in one place: the job-submit request body
 * for an array, and reading one job of a `GET /slurm/vX/jobs` answer (its state, exit
 * status, times; which of our jobs rows it is). Pure (cJSON only), so every version's
 * shapes are tested without a server: v0.0.38 (Slurm 22.05) sends the environment as an
 * object and numbers plainly; v0.0.39 and later send the environment as "NAME=value"
 * strings and numbers as {"set", "infinite", "number"}; v0.0.40 puts the script inside
 * the job. Compiled with or without libcurl.
 */
#ifndef LB_SLURM_RESTJSON_H
#define LB_SLURM_RESTJSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "results/jobs.h"
#include "slurm/exec.h"
#include "slurm/render.h"

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
