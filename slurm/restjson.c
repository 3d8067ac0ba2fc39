/*
 * slurmrestd's JSON by OpenAPI version (restjson.h). The fields chosen for each version
 * follow the OpenAPI documents of Slurm 22.05 (v0.0.38), 23.02 (v0.0.39), 23.11 (v0.0.40),
 * 24.05 (v0.0.41) and 24.11 (v0.0.42); CI runs tests/sh/e2e_rest.sh against Slurm 22.05's
 * slurmrestd (v0.0.38) and Slurm 24.11's (v0.0.42, the newest it serves).
 */
#include "slurm/restjson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* One row per version we speak, oldest first (restjson.h says what each column means).
 * v0.0.40, v0.0.41 and v0.0.42 differ in nothing we send or read: v0.0.41 deprecated the
 * request's own "script" and v0.0.42 dropped "exclusive", neither of which they use. */
static const struct restjson_shape shapes[] = {
    /* minor, served by Slurm, env_list, num_objects, node_range, tres_gpus, shared_none,
       script_in_job */
    {38, "22.05, 23.02, 23.11", 0, 0, 0, 0, 0, 0},
    {39, "23.02, 23.11, 24.05", 1, 1, 1, 1, 1, 0},
    {40, "23.11, 24.05, 24.11, 25.05", 1, 1, 1, 1, 1, 1},
    {41, "24.05, 24.11, 25.05, 25.11", 1, 1, 1, 1, 1, 1},
    {42, "24.11, 25.05, 25.11", 1, 1, 1, 1, 1, 1},
};
_Static_assert(sizeof(shapes) / sizeof(shapes[0]) == RESTJSON_NEWEST - RESTJSON_OLDEST + 1,
	       "one row per version we speak");

const struct restjson_shape *restjson_shape(int minor)
{
	if (minor < RESTJSON_OLDEST)
		return NULL;
	if (minor > RESTJSON_NEWEST)
		minor = RESTJSON_NEWEST;
	return &shapes[minor - RESTJSON_OLDEST];
}

void restjson_spoken(char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = '\0';
	for (int m = RESTJSON_NEWEST; m >= RESTJSON_OLDEST && o < len; m--) {
		int w =
		    snprintf(buf + o, len - o, "%sv0.0.%d", m == RESTJSON_NEWEST ? "" : ", ", m);
		if (w < 0)
			break;
		o += (size_t)w;
	}
}

/* The N of a path "/slurm/v0.0.N/<rest>" or "/slurm/v0.0.N/<rest>/" (24.11 lists most
 * paths with the slash), or -1. */
static int path_minor(const char *path, const char *rest)
{
	const char *p = path;
	size_t rl = strlen(rest);
	int n = 0, digits = 0;
	if (strncmp(p, "/slurm/v0.0.", 12))
		return -1;
	for (p += 12; *p >= '0' && *p <= '9' && digits < 4; p++, digits++)
		n = n * 10 + (*p - '0');
	if (!digits || *p != '/' || strncmp(p + 1, rest, rl))
		return -1;
	p += 1 + rl;
	return !*p || !strcmp(p, "/") ? n : -1;
}

/* 1 if the OpenAPI paths object has "/slurm/v0.0.<minor>/<rest>". */
static int has_path(const cJSON *paths, int minor, const char *rest)
{
	const cJSON *p;
	cJSON_ArrayForEach(p, paths)
	{
		if (p->string && path_minor(p->string, rest) == minor)
			return 1;
	}
	return 0;
}

size_t restjson_served(const cJSON *openapi, int *minors, size_t max)
{
	const cJSON *paths = cJSON_GetObjectItem(openapi, "paths");
	const cJSON *p;
	size_t n = 0;

	if (!cJSON_IsObject(paths))
		return 0;
	cJSON_ArrayForEach(p, paths)
	{
		int m = p->string ? path_minor(p->string, "job/submit") : -1;
		int seen = 0;
		if (m < 0 || !has_path(paths, m, "jobs"))
			continue;
		for (size_t i = 0; i < n; i++)
			seen |= minors[i] == m;
		if (seen || n == max)
			continue;
		/* insert, newest first */
		size_t i = n++;
		while (i > 0 && minors[i - 1] < m) {
			minors[i] = minors[i - 1];
			i--;
		}
		minors[i] = m;
	}
	return n;
}

int restjson_pick(const int *served, size_t n)
{
	int best = -1;
	for (size_t i = 0; i < n; i++)
		if (served[i] >= RESTJSON_OLDEST && served[i] <= RESTJSON_NEWEST &&
		    served[i] > best)
			best = served[i];
	return best;
}

void restjson_none_message(const char *where, const int *served, size_t n, char *err, size_t errlen)
{
	char offers[256] = "", ours[128];
	size_t o = 0;

	for (size_t i = 0; i < n && o < sizeof(offers); i++) {
		int w =
		    snprintf(offers + o, sizeof(offers) - o, "%sv0.0.%d", i ? ", " : "", served[i]);
		if (w < 0)
			break;
		o += (size_t)w;
	}
	restjson_spoken(ours, sizeof(ours));
	snprintf(err, errlen,
		 "slurmrestd at '%s' offers %s; layoutbench speaks %s (give --rest-version "
		 "to try one it offers, or use --executor slurm)",
		 where, n ? offers : "no /slurm/v0.0.N/job/submit", ours);
}

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

static void add_num(const struct restjson_shape *sh, cJSON *o, const char *k, double v)
{
	if (sh->num_objects) {
		cJSON *n = cJSON_AddObjectToObject(o, k);
		cJSON_AddBoolToObject(n, "set", 1);
		cJSON_AddBoolToObject(n, "infinite", 0);
		cJSON_AddNumberToObject(n, "number", v);
	} else {
		cJSON_AddNumberToObject(o, k, v);
	}
}

static int add_extra(const struct restjson_shape *sh, cJSON *job, const char *opt, char *err,
		     size_t errlen)
{
	const char *eq = strchr(opt, '=');
	const char *v = eq ? eq + 1 : "";
	size_t n = eq ? (size_t)(eq - opt) : strlen(opt);
	long mb;

	if (n == 5 && !strncmp(opt, "--mem", 5) && lb_parse_long(v, 0, 1L << 40, &mb) == 0)
		add_num(sh, job, "memory_per_node", (double)mb);
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
	const struct restjson_shape *sh = restjson_shape(minor);
	cJSON *req = NULL, *job = NULL;
	char gres[64];
	char *body = NULL;

	if (!sh) {
		char ours[128];
		restjson_spoken(ours, sizeof(ours));
		snprintf(err, errlen,
			 "slurmrestd v0.0.%d is older than any layoutbench speaks (%s)", minor,
			 ours);
		return NULL;
	}
	req = cJSON_CreateObject();
	job = req ? cJSON_AddObjectToObject(req, "job") : NULL;
	if (!job) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	if (sh->env_list) {
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
	if (sh->node_range) {
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
		add_num(sh, job, "time_limit", a->time_limit_min);
	if (a->gpus_per_node > 0) {
		if (sh->tres_gpus) {
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
		if (sh->shared_none) {
			cJSON *none = cJSON_AddArrayToObject(job, "shared");
			cJSON_AddItemToArray(none, cJSON_CreateString("none"));
		} else {
			cJSON_AddStringToObject(job, "exclusive", "true");
		}
	}
	if (hold)
		cJSON_AddBoolToObject(job, "hold", 1);
	for (int i = 0; i < a->n_extra; i++)
		if (add_extra(sh, job, a->extra[i], err, errlen))
			goto out_free;
	if (sh->script_in_job)
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

/* A number in [lo, hi] (NaN and anything outside refused): 0 and *out, or -1. Numbers a
 * server sends are checked before they become integers. */
static int number_in(const cJSON *v, double lo, double hi, double *out)
{
	double d;
	if (restjson_number(v, &d) || !(d >= lo && d <= hi))
		return -1;
	*out = d;
	return 0;
}

void restjson_job_state(const cJSON *j, struct exec_state *s)
{
	const double max_time = 1e15; /* Unix seconds: far beyond any job */
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
			if (number_in(cJSON_GetObjectItem(sig, "id"), 1, 127, &sn) == 0)
				s->exit_code = 128 + (int)sn;
			else if (number_in(cJSON_GetObjectItem(ec, "return_code"), 0, 255, &v) == 0)
				s->exit_code = (int)v;
		} else if (number_in(ec, 0, 65535, &v) == 0) { /* v0.0.38: the raw wait status */
			int st = (int)v;
			s->exit_code = (st & 0x7f) ? 128 + (st & 0x7f) : (st >> 8) & 0xff;
		}
	}
	if (number_in(cJSON_GetObjectItem(j, "start_time"), 0, max_time, &v) == 0 &&
	    strcmp(s->state, "PENDING"))
		s->start_time = (int64_t)v;
	if (number_in(cJSON_GetObjectItem(j, "end_time"), 0, max_time, &v) == 0 &&
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
