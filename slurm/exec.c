/*
 * What the executors share (exec.h): the job environment without secrets, the final-state
 * test, array task lists. Opening an executor by name is slurm/executor.c's.
 */
#include "slurm/exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

int exec_state_final(const char *s)
{
	static const char *active[] = {"PENDING",     "RUNNING",   "CONFIGURING", "COMPLETING",
				       "REQUEUED",    "RESIZING",  "SUSPENDED",	  "REQUEUE_HOLD",
				       "REQUEUE_FED", "SIGNALING", "STAGE_OUT",	  NULL};
	if (!s || !*s)
		return 0;
	for (int i = 0; active[i]; i++)
		if (!strcmp(s, active[i]))
			return 0;
	return 1;
}

int exec_env_is_secret(const char *e)
{
	return !strncmp(e, "SLURM_JWT=", 10) || !strncmp(e, "SLURMRESTD_TOKEN=", 17);
}

char **exec_job_environ(size_t *n)
{
	size_t cnt = 0, k = 0;
	for (char **e = environ; e && *e; e++)
		cnt++;
	char **env = calloc(cnt + 2, sizeof(*env));
	if (!env)
		return NULL;
	for (char **e = environ; e && *e; e++)
		if (!exec_env_is_secret(*e))
			env[k++] = *e;
	if (k == 0)
		env[k++] = "PATH=/usr/local/bin:/usr/bin:/bin";
	env[k] = NULL;
	*n = k;
	return env;
}

int exec_array_seen(const struct results_job *jobs, size_t i)
{
	if (!jobs[i].array_job_id[0])
		return 0;
	for (size_t k = 0; k < i; k++)
		if (!strcmp(jobs[k].array_job_id, jobs[i].array_job_id))
			return 1;
	return 0;
}

int exec_task_in(const char *s, long task)
{
	char buf[1024];
	char *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	char *pct = strchr(buf, '%');
	if (pct)
		*pct = '\0';
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		long lo = strtol(tok, &end, 10), hi = lo;
		if (*end == '-')
			hi = strtol(end + 1, &end, 10);
		if (task >= lo && task <= hi)
			return 1;
	}
	return 0;
}
