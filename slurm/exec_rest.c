/*
 * The slurmrestd executor (libcurl + cJSON): URL from --rest-url or $SLURMRESTD_URL
 * ("http://host:port", or "unix:/path" for a socket with local auth, where no token is
 * sent); user from $SLURMRESTD_USER or $USER; token from $SLURM_JWT, else
 * $SLURMRESTD_TOKEN. The token goes into the X-SLURM-USER-TOKEN header and nowhere else:
 * not into the job's environment, not into messages. The OpenAPI version is the newest
 * the server answers /slurm/vX/ping for (v0.0.40, v0.0.39, v0.0.38), or --rest-version.
 * Shapes that changed between versions (environment object vs "K=V" array, time limits
 * and exit codes as objects, job_state as an array) are handled in one place each.
 * MaxArraySize is not readable over REST: 1001 (Slurm's default) unless --max-array.
 * Built only with LB_WITH_CURL.
 */
#include "slurm/exec.h"

#include <stdio.h>
#include <string.h>

#ifndef LB_WITH_CURL

int exec_rest_open(const struct exec_opts *o, struct executor **out, char *err, size_t errlen)
{
	(void)o;
	*out = NULL;
	snprintf(err, errlen,
		 "layoutbench was built without slurmrestd support (install "
		 "libcurl4-openssl-dev and rebuild)");
	return -1;
}

#else

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

static const char *const versions[] = {"v0.0.40", "v0.0.39", "v0.0.38", NULL};

struct rest_priv {
	struct exec_opts o;
	char base[512];	  /* "http://host:port" or "http://localhost" for a socket */
	char socket[512]; /* unix socket path; "" for TCP */
	char user[128];
	const char *token; /* from the environment; never copied elsewhere */
	char version[16];  /* "v0.0.38" */
	int minor;	   /* 38, 39, 40 */
	CURL *curl;
};

struct buf {
	char *p;
	size_t n;
};

static size_t on_data(char *d, size_t sz, size_t nm, void *ud)
{
	struct buf *b = ud;
	size_t len = sz * nm;
	char *np = realloc(b->p, b->n + len + 1);
	if (!np)
		return 0;
	b->p = np;
	memcpy(b->p + b->n, d, len);
	b->n += len;
	b->p[b->n] = '\0';
	return len;
}

/* GET (body NULL), POST (body) or DELETE (del); returns parsed JSON or NULL (err set). */
static cJSON *rest_call(struct rest_priv *pv, const char *path, const char *body, int del,
			long *code, char *err, size_t errlen)
{
	struct curl_slist *h = NULL;
	struct buf b = {NULL, 0};
	char url[1024], hdr[4096];
	cJSON *json = NULL;
	CURL *c = pv->curl;

	curl_easy_reset(c);
	snprintf(url, sizeof(url), "%s%s", pv->base, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	if (pv->socket[0])
		curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, pv->socket);
	if (pv->token && !pv->socket[0]) {
		snprintf(hdr, sizeof(hdr), "X-SLURM-USER-NAME: %s", pv->user);
		h = curl_slist_append(h, hdr);
		snprintf(hdr, sizeof(hdr), "X-SLURM-USER-TOKEN: %s", pv->token);
		h = curl_slist_append(h, hdr);
		memset(hdr, 0, sizeof(hdr));
	}
	if (body) {
		h = curl_slist_append(h, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	}
	if (del)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
	CURLcode rc = curl_easy_perform(c);
	*code = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, code);
	curl_slist_free_all(h); /* the header list held the token: gone now */
	if (rc != CURLE_OK)
		snprintf(err, errlen, "slurmrestd at '%s': %s",
			 pv->socket[0] ? pv->socket : pv->base, curl_easy_strerror(rc));
	else if (!(json = cJSON_Parse(b.p ? b.p : "")))
		snprintf(err, errlen, "slurmrestd %s: HTTP %ld, not JSON", path, *code);
	free(b.p);
	return json;
}

/* The first message of a response's errors[] (for err). */
static void rest_error(const cJSON *j, long code, const char *what, char *err, size_t errlen)
{
	const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "errors"), 0);
	const cJSON *d = cJSON_GetObjectItem(e, "description");
	const cJSON *m = cJSON_GetObjectItem(e, "error");
	snprintf(err, errlen, "slurmrestd: %s: HTTP %ld%s%s", what, code,
		 cJSON_IsString(d) && *d->valuestring ? ": " : (cJSON_IsString(m) ? ": " : ""),
		 cJSON_IsString(d) && *d->valuestring ? d->valuestring
						      : (cJSON_IsString(m) ? m->valuestring : ""));
	if (code == 401)
		snprintf(err + strlen(err), errlen - strlen(err),
			 " (set SLURM_JWT or SLURMRESTD_TOKEN: scontrol token)");
}

/* A number that may be plain, {"number": N}, or {"set": true, "number": N}. */
static int num_of(const cJSON *v, double *out)
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

static void add_num(struct rest_priv *pv, cJSON *o, const char *k, double v)
{
	if (pv->minor >= 39) {
		cJSON *n = cJSON_AddObjectToObject(o, k);
		cJSON_AddBoolToObject(n, "set", 1);
		cJSON_AddBoolToObject(n, "infinite", 0);
		cJSON_AddNumberToObject(n, "number", v);
	} else {
		cJSON_AddNumberToObject(o, k, v);
	}
}

static int add_extra(cJSON *job, const char *opt, char *err, size_t errlen)
{
	const char *eq = strchr(opt, '=');
	const char *v = eq ? eq + 1 : "";
	size_t n = eq ? (size_t)(eq - opt) : strlen(opt);
	long mb;
	if (n == 5 && !strncmp(opt, "--mem", 5) && lb_parse_long(v, 1, 1L << 40, &mb) == 0)
		cJSON_AddNumberToObject(job, "memory_per_node", (double)mb);
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

static int rs_submit(struct executor *x, const struct slurm_array *a, const char *script_path,
		     const char *work_dir, char *array_job_id, size_t idlen, char *err,
		     size_t errlen)
{
	struct rest_priv *pv = x->priv;
	cJSON *req = cJSON_CreateObject(), *job = cJSON_AddObjectToObject(req, "job");
	size_t nenv = 0;
	char **env = exec_job_environ(&nenv);
	char path[64], gres[64];
	long code;
	int rc = -1;

	(void)script_path;
	if (!env || !req) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	if (pv->minor >= 39) {
		cJSON *ea = cJSON_AddArrayToObject(job, "environment");
		for (size_t i = 0; i < nenv; i++)
			cJSON_AddItemToArray(ea, cJSON_CreateString(env[i]));
	} else {
		cJSON *eo = cJSON_AddObjectToObject(job, "environment");
		for (size_t i = 0; i < nenv; i++) {
			const char *eq = strchr(env[i], '=');
			if (!eq)
				continue;
			char name[256];
			snprintf(name, sizeof(name), "%.*s", (int)(eq - env[i]), env[i]);
			cJSON_AddStringToObject(eo, name, eq + 1);
		}
	}
	cJSON_AddStringToObject(job, "name", a->job_name);
	cJSON_AddStringToObject(job, "current_working_directory", work_dir);
	cJSON_AddStringToObject(job, "standard_output", a->out_path);
	cJSON_AddStringToObject(job, "standard_error", a->err_path);
	cJSON_AddStringToObject(job, "array", a->array_spec);
	if (pv->minor >= 39) {
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
		add_num(pv, job, "time_limit", a->time_limit_min);
	if (a->gpus_per_node > 0) {
		if (pv->minor >= 39) {
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
		if (pv->minor >= 39) {
			cJSON *sh = cJSON_AddArrayToObject(job, "shared");
			cJSON_AddItemToArray(sh, cJSON_CreateString("none"));
		} else {
			cJSON_AddStringToObject(job, "exclusive", "true");
		}
	}
	if (pv->o.hold)
		cJSON_AddBoolToObject(job, "hold", 1);
	for (int i = 0; i < a->n_extra; i++)
		if (add_extra(job, a->extra[i], err, errlen))
			goto out_free;
	if (pv->minor >= 40)
		cJSON_AddStringToObject(job, "script", a->script);
	else
		cJSON_AddStringToObject(req, "script", a->script);
	char *body = cJSON_PrintUnformatted(req);
	if (!body) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	snprintf(path, sizeof(path), "/slurm/%s/job/submit", pv->version);
	cJSON *resp = rest_call(pv, path, body, 0, &code, err, errlen);
	free(body);
	if (!resp)
		goto out_free;
	const cJSON *jid = cJSON_GetObjectItem(resp, "job_id");
	if (code == 200 && cJSON_IsNumber(jid)) {
		snprintf(array_job_id, idlen, "%.0f", jid->valuedouble);
		rc = 0;
	} else {
		rest_error(resp, code, "submitting an array", err, errlen);
	}
	cJSON_Delete(resp);
out_free:
	free(env);
	cJSON_Delete(req);
	return rc;
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

static void fill(struct rest_priv *pv, struct exec_state *s, const cJSON *j)
{
	double v;
	s->known = 1;
	snprintf(s->state, sizeof(s->state), "%s",
		 str_or_first(cJSON_GetObjectItem(j, "job_state")));
	snprintf(s->reason, sizeof(s->reason), "%s",
		 str_or_first(cJSON_GetObjectItem(j, "state_reason")));
	if (!strcmp(s->reason, "None"))
		s->reason[0] = '\0';
	s->exit_code = -1;
	if (exec_state_final(s->state)) {
		const cJSON *ec = cJSON_GetObjectItem(j, "exit_code");
		if (cJSON_IsObject(ec)) { /* v0.0.39+: {status, return_code, signal} */
			const cJSON *sig = cJSON_GetObjectItem(ec, "signal");
			double sn = 0;
			if (num_of(cJSON_GetObjectItem(sig, "id"), &sn) == 0 && sn > 0)
				s->exit_code = 128 + (int)sn;
			else if (num_of(cJSON_GetObjectItem(ec, "return_code"), &v) == 0)
				s->exit_code = (int)v;
		} else if (num_of(ec, &v) == 0) { /* v0.0.38: the raw wait status */
			int st = (int)v;
			s->exit_code = (st & 0x7f) ? 128 + (st & 0x7f) : (st >> 8) & 0xff;
		}
	}
	if (num_of(cJSON_GetObjectItem(j, "start_time"), &v) == 0 && strcmp(s->state, "PENDING"))
		s->start_time = (int64_t)v;
	if (num_of(cJSON_GetObjectItem(j, "end_time"), &v) == 0 && exec_state_final(s->state))
		s->end_time = (int64_t)v;
	(void)pv;
}

static int task_in(const char *s, long task)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", s);
	char *pct = strchr(buf, '%');
	if (pct)
		*pct = '\0';
	char *save = NULL;
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

static int rs_poll(struct executor *x, const struct results_job *jobs, size_t n,
		   struct exec_state *out, char *err, size_t errlen)
{
	struct rest_priv *pv = x->priv;
	char path[64];
	long code;
	double v;

	snprintf(path, sizeof(path), "/slurm/%s/jobs", pv->version);
	cJSON *resp = rest_call(pv, path, NULL, 0, &code, err, errlen);
	if (!resp)
		return -1;
	if (code != 200) {
		rest_error(resp, code, "listing jobs", err, errlen);
		cJSON_Delete(resp);
		return -1;
	}
	const cJSON *list = cJSON_GetObjectItem(resp, "jobs");
	for (size_t i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].exit_code = -1;
		double aid = strtod(jobs[i].array_job_id, NULL), jid = strtod(jobs[i].job_id, NULL);
		const cJSON *j;
		cJSON_ArrayForEach(j, list)
		{
			double ja = 0, jt = -1, jj = 0;
			num_of(cJSON_GetObjectItem(j, "array_job_id"), &ja);
			num_of(cJSON_GetObjectItem(j, "array_task_id"), &jt);
			num_of(cJSON_GetObjectItem(j, "job_id"), &jj);
			const cJSON *ts = cJSON_GetObjectItem(j, "array_task_string");
			int hit;
			if (jobs[i].array_index >= 0 && aid > 0) {
				if (cJSON_IsString(ts) && *ts->valuestring)
					hit = ja == aid &&
					      task_in(ts->valuestring, jobs[i].array_index);
				else
					hit = ja == aid && jt == jobs[i].array_index;
				if (!hit && ja == 0 && jj == aid && jobs[i].array_index == 0)
					hit = 1;
			} else {
				hit = jj == jid;
			}
			if (hit) {
				fill(pv, &out[i], j);
				break;
			}
		}
	}
	(void)v;
	cJSON_Delete(resp);
	return 0;
}

static int rs_cancel(struct executor *x, const struct results_job *jobs, size_t n, char *err,
		     size_t errlen)
{
	struct rest_priv *pv = x->priv;
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		char path[160];
		long code;
		if (jobs[i].array_index >= 0)
			snprintf(path, sizeof(path), "/slurm/%s/job/%s_%d", pv->version,
				 jobs[i].array_job_id, jobs[i].array_index);
		else
			snprintf(path, sizeof(path), "/slurm/%s/job/%s", pv->version,
				 jobs[i].job_id);
		cJSON *resp = rest_call(pv, path, NULL, 1, &code, err, errlen);
		if (!resp) {
			rc = -1;
			continue;
		}
		if (code != 200) {
			/* an already finished or purged job is not an error */
			const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(resp, "errors"), 0);
			double en = 0;
			num_of(cJSON_GetObjectItem(e, "error_number"), &en);
			if (en != 2017 && en != 2021) {
				rest_error(resp, code, "cancelling a job", err, errlen);
				rc = -1;
			}
		}
		cJSON_Delete(resp);
	}
	return rc;
}

static void rs_close(struct executor *x)
{
	struct rest_priv *pv = x->priv;
	if (pv->curl)
		curl_easy_cleanup(pv->curl);
	free(pv);
	free(x);
}

static int ping(struct rest_priv *pv, const char *ver, long *code, char *err, size_t errlen)
{
	char path[64];
	snprintf(path, sizeof(path), "/slurm/%s/ping", ver);
	cJSON *r = rest_call(pv, path, NULL, 0, code, err, errlen);
	if (!r)
		return -1;
	int ok = *code == 200;
	if (!ok && *code != 404)
		rest_error(r, *code, "ping", err, errlen);
	cJSON_Delete(r);
	return ok ? 0 : -1;
}

int exec_rest_open(const struct exec_opts *o, struct executor **out, char *err, size_t errlen)
{
	struct executor *x = calloc(1, sizeof(*x));
	struct rest_priv *pv = calloc(1, sizeof(*pv));
	const char *url = o->rest_url ? o->rest_url : getenv("SLURMRESTD_URL");
	const char *user = getenv("SLURMRESTD_USER");
	static int curl_inited;
	long code = 0;

	*out = NULL;
	if (!x || !pv) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	pv->o = *o;
	if (!url || !*url) {
		snprintf(err, errlen,
			 "no slurmrestd address (give --rest-url http://host:port or unix:/path, "
			 "or set SLURMRESTD_URL)");
		goto out_free;
	}
	if (!strncmp(url, "unix:", 5)) {
		snprintf(pv->socket, sizeof(pv->socket), "%s", url + 5);
		snprintf(pv->base, sizeof(pv->base), "http://localhost");
	} else if (!strncmp(url, "http://", 7) || !strncmp(url, "https://", 8)) {
		snprintf(pv->base, sizeof(pv->base), "%s", url);
		size_t l = strlen(pv->base);
		while (l > 0 && pv->base[l - 1] == '/')
			pv->base[--l] = '\0';
	} else {
		snprintf(err, errlen,
			 "slurmrestd address '%s' is neither http://host:port nor unix:/path", url);
		goto out_free;
	}
	pv->token = getenv("SLURM_JWT");
	if (!pv->token || !*pv->token)
		pv->token = getenv("SLURMRESTD_TOKEN");
	if (pv->token && !*pv->token)
		pv->token = NULL;
	if (!pv->socket[0] && !pv->token) {
		snprintf(err, errlen,
			 "no token for slurmrestd at '%s' (set SLURM_JWT or SLURMRESTD_TOKEN, e.g. "
			 "from 'scontrol token')",
			 pv->base);
		goto out_free;
	}
	if (!user || !*user)
		user = getenv("USER");
	if (!user || !*user) {
		struct passwd *pw = getpwuid(getuid());
		user = pw ? pw->pw_name : "root";
	}
	snprintf(pv->user, sizeof(pv->user), "%s", user);
	if (!curl_inited) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		curl_inited = 1;
	}
	pv->curl = curl_easy_init();
	if (!pv->curl) {
		snprintf(err, errlen, "curl_easy_init failed");
		goto out_free;
	}
	if (o->rest_version && *o->rest_version) {
		if (strncmp(o->rest_version, "v0.0.", 5) ||
		    lb_parse_int(o->rest_version + 5, 36, 99, &pv->minor)) {
			snprintf(err, errlen, "--rest-version '%s' is not like v0.0.38",
				 o->rest_version);
			goto out_free;
		}
		snprintf(pv->version, sizeof(pv->version), "%s", o->rest_version);
		if (ping(pv, pv->version, &code, err, errlen))
			goto out_free;
	} else {
		for (int i = 0; versions[i]; i++) {
			err[0] = '\0';
			if (ping(pv, versions[i], &code, err, errlen) == 0) {
				snprintf(pv->version, sizeof(pv->version), "%s", versions[i]);
				lb_parse_int(versions[i] + 5, 36, 99, &pv->minor);
				break;
			}
			if (err[0] && code != 404 && code != 0)
				goto out_free; /* auth or server error: say that */
			if (code == 0)
				goto out_free; /* cannot connect */
		}
		if (!pv->version[0]) {
			snprintf(err, errlen,
				 "slurmrestd at '%s' offers none of v0.0.40, v0.0.39, v0.0.38 "
				 "(give --rest-version)",
				 pv->socket[0] ? pv->socket : pv->base);
			goto out_free;
		}
	}
	x->name = "rest";
	x->max_array = SLURM_DEFAULT_MAX_ARRAY;
	x->submit = rs_submit;
	x->poll = rs_poll;
	x->cancel = rs_cancel;
	x->close = rs_close;
	x->priv = pv;
	*out = x;
	return 0;
out_free:
	if (pv && pv->curl)
		curl_easy_cleanup(pv->curl);
	free(pv);
	free(x);
	return -1;
}

#endif
