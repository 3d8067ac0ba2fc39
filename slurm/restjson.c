/*
 * slurmrestd's JSON by OpenAPI version (restjson.h). The fields chosen for each version
 * follow the published OpenAPI specs of Slurm 22.05 (v0.0.38), 23.02 (v0.0.39) and 23.11
 * (v0.0.40); v0.0.38 is also tested against a live slurmrestd by tests/sh/e2e_rest.sh.
 */
#include "slurm/restjson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

int restjson_number(const cJSON *v, double *out)
{
	if (cJSON_IsNumber(v)) {
		*out = v->valuedouble;
		return 0;
	}
	if (cJSON_IsObject(v)) {
		const cJSON *set = cJSON_GetObjectItem(v, "set");
		const cJSON *n = cJSON_GetObjectItem(v, "number");
		if (cJSON_IsNumber(n) && (!set || cJSON_IsTrue(set))) {
			*out = n->valuedouble;
			return 0;
		}
	}
	return -1;
}

static void add_num(int minor, cJSON *o, const char *k, double v)
{
	if (minor >= 39) {
		cJSON *n = cJSON_AddObjectToObject(o, k);
		cJSON_AddBoolToObject(n, "set", 1);
		cJSON_AddBoolToObject(n, "infinite", 0);
		cJSON_AddNumberToObject(n, "number", v);
	} else {
		cJSON_AddNumberToObject(o, k, v);
	}
}

static int add_extra(int minor, cJSON *job, const char *opt, char *err, size_t errlen)
{
	const char *eq = strchr(opt, '=');
	const char *v = eq ? eq + 1 : "";
	size_t n = eq ? (size_t)(eq - opt) : strlen(opt);
	long mb;

	if (n == 5 && !strncmp(opt, "--mem", 5) && lb_parse_long(v, 0, 1L << 40, &mb) == 0)
		add_num(minor, job, "memory_per_node", (double)mb);
	else if (n == 12 && !strncmp(opt, "--constraint", 12))
		cJSON_AddStringToObject(job, "constraints", v);
	else if (n == 13 && !strncmp(opt, "--reservation", 13))
		cJSON_AddStringToObject(job, "reservation", v);
	else if (n == 9 && !strncmp(opt, "--comment", 9))
		cJSON_AddStringToObject(job, "comment", v);
	else {
		snprintf(err, errlen,
			 "cluster.sbatch_extra '%s' is not supported by the rest executor (it "
			 "takes --mem, --constraint, --reservation, --comment; or submit the "
			 "rendered script with sbatch)",
			 opt);
		return -1;
	}
	return 0;
}

char *restjson_submit_body(int minor, const struct slurm_array *a, char *const *env, size_t nenv,
			   const char *work_dir, int hold, char *err, size_t errlen)
{
	cJSON *req = cJSON_CreateObject();
	cJSON *job = req ? cJSON_AddObjectToObject(req, "job") : NULL;
	char gres[64];
	char *body = NULL;

	if (!job) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	if (minor >= 39) {
		cJSON *ea = cJSON_AddArrayToObject(job, "environment");
		for (size_t i = 0; i < nenv; i++)
			cJSON_AddItemToArray(ea, cJSON_CreateString(env[i]));
	} else {
		cJSON *eo = cJSON_AddObjectToObject(job, "environment");
		for (size_t i = 0; i < nenv; i++) {
			const char *eq = strchr(env[i], '=');
			char name[256];
			if (!eq || (size_t)(eq - env[i]) >= sizeof(name))
				continue;
			snprintf(name, sizeof(name), "%.*s", (int)(eq - env[i]), env[i]);
			cJSON_AddStringToObject(eo, name, eq + 1);
		}
	}
	cJSON_AddStringToObject(job, "name", a->job_name);
	cJSON_AddStringToObject(job, "current_working_directory", work_dir);
	cJSON_AddStringToObject(job, "standard_output", a->out_path);
	cJSON_AddStringToObject(job, "standard_error", a->err_path);
	cJSON_AddStringToObject(job, "array", a->array_spec);
	if (minor >= 39) {
		cJSON_AddNumberToObject(job, "minimum_nodes", a->nodes);
		cJSON_AddNumberToObject(job, "maximum_nodes", a->nodes);
	} else {
		cJSON *nodes = cJSON_AddArrayToObject(job, "nodes");
		cJSON_AddItemToArray(nodes, cJSON_CreateNumber(a->nodes));
		cJSON_AddItemToArray(nodes, cJSON_CreateNumber(a->nodes));
	}
	cJSON_AddNumberToObject(job, "tasks", a->nodes * a->ntasks_per_node);
	cJSON_AddNumberToObject(job, "tasks_per_node", a->ntasks_per_node);
	if (a->cpus_per_task > 0)
		cJSON_AddNumberToObject(job, "cpus_per_task", a->cpus_per_task);
	if (a->time_limit_min > 0)
		add_num(minor, job, "time_limit", a->time_limit_min);
	if (a->gpus_per_node > 0) {
		if (minor >= 39) {
			snprintf(gres, sizeof(gres), "gres/gpu:%d", a->gpus_per_node);
			cJSON_AddStringToObject(job, "tres_per_node", gres);
		} else {
			snprintf(gres, sizeof(gres), "%d", a->gpus_per_node);
			cJSON_AddStringToObject(job, "gpus_per_node", gres);
		}
	}
	if (a->partition[0])
		cJSON_AddStringToObject(job, "partition", a->partition);
	if (a->account[0])
		cJSON_AddStringToObject(job, "account", a->account);
	if (a->qos[0])
		cJSON_AddStringToObject(job, "qos", a->qos);
	if (a->exclusive) {
		if (minor >= 39) {
			cJSON *sh = cJSON_AddArrayToObject(job, "shared");
			cJSON_AddItemToArray(sh, cJSON_CreateString("none"));
		} else {
			cJSON_AddStringToObject(job, "exclusive", "true");
		}
	}
	if (hold)
		cJSON_AddBoolToObject(job, "hold", 1);
	for (int i = 0; i < a->n_extra; i++)
		if (add_extra(minor, job, a->extra[i], err, errlen))
			goto out_free;
	if (minor >= 40)
		cJSON_AddStringToObject(job, "script", a->script);
	else
		cJSON_AddStringToObject(req, "script", a->script);
	body = cJSON_PrintUnformatted(req);
	if (!body)
		snprintf(err, errlen, "out of memory");
out_free:
	cJSON_Delete(req);
	return body;
}

static const char *str_or_first(const cJSON *v)
{
	if (cJSON_IsString(v))
		return v->valuestring;
	if (cJSON_IsArray(v)) {
		const cJSON *f = cJSON_GetArrayItem(v, 0);
		if (cJSON_IsString(f))
			return f->valuestring;
	}
	return "";
}

void restjson_job_state(const cJSON *j, struct exec_state *s)
{
	double v;

	memset(s, 0, sizeof(*s));
	s->known = 1;
	s->exit_code = -1;
	snprintf(s->state, sizeof(s->state), "%s",
		 str_or_first(cJSON_GetObjectItem(j, "job_state")));
	snprintf(s->reason, sizeof(s->reason), "%s",
		 str_or_first(cJSON_GetObjectItem(j, "state_reason")));
	if (!strcmp(s->reason, "None"))
		s->reason[0] = '\0';
	if (exec_state_final(s->state)) {
		const cJSON *ec = cJSON_GetObjectItem(j, "exit_code");
		if (cJSON_IsObject(ec)) { /* v0.0.39+: {status, return_code, signal} */
			const cJSON *sig = cJSON_GetObjectItem(ec, "signal");
			double sn = 0;
			if (restjson_number(cJSON_GetObjectItem(sig, "id"), &sn) == 0 && sn > 0)
				s->exit_code = 128 + (int)sn;
			else if (restjson_number(cJSON_GetObjectItem(ec, "return_code"), &v) == 0)
				s->exit_code = (int)v;
		} else if (restjson_number(ec, &v) == 0) { /* v0.0.38: the raw wait status */
			int st = (int)v;
			s->exit_code = (st & 0x7f) ? 128 + (st & 0x7f) : (st >> 8) & 0xff;
		}
	}
	if (restjson_number(cJSON_GetObjectItem(j, "start_time"), &v) == 0 &&
	    strcmp(s->state, "PENDING"))
		s->start_time = (int64_t)v;
	if (restjson_number(cJSON_GetObjectItem(j, "end_time"), &v) == 0 &&
	    exec_state_final(s->state))
		s->end_time = (int64_t)v;
}

int restjson_job_matches(const cJSON *job, const struct results_job *j)
{
	double ja = 0, jt = -1, jj = 0;
	double aid = strtod(j->array_job_id, NULL), jid = strtod(j->job_id, NULL);
	const cJSON *ts = cJSON_GetObjectItem(job, "array_task_string");

	restjson_number(cJSON_GetObjectItem(job, "array_job_id"), &ja);
	restjson_number(cJSON_GetObjectItem(job, "array_task_id"), &jt);
	restjson_number(cJSON_GetObjectItem(job, "job_id"), &jj);
	if (j->array_index < 0 || aid <= 0)
		return jj == jid;
	if (cJSON_IsString(ts) && *ts->valuestring)
		return ja == aid && exec_task_in(ts->valuestring, j->array_index);
	if (ja == aid && jt == j->array_index)
		return 1;
	/* an array of one task can show as a plain job */
	return ja == 0 && jj == aid && j->array_index == 0;
}
