/*
 * The slurmrestd executor (libcurl + cJSON): URL from --rest-url or $SLURMRESTD_URL
 * ("http://host:port", or "unix:/path" for a socket with local auth, where no token is
 * sent); user from $SLURMRESTD_USER or $USER; token from $SLURM_JWT, else
 * $SLURMRESTD_TOKEN. The token goes into the X-SLURM-USER-TOKEN header and nowhere else:
 * not into the job's environment, not into messages. The OpenAPI version is
 * --rest-version, else the newest we speak (restjson.h: v0.0.42 .. v0.0.38) of those the
 * server's OpenAPI document (GET /openapi/v3) lists, else, where the server hides that
 * document, the newest that answers /slurm/vX/ping; the chosen version's ping then checks
 * the token. The JSON of each version is restjson.c's business. MaxArraySize is not
 * readable over REST: 1001 (Slurm's default) unless --max-array. Built only with
 * LB_WITH_CURL.
 */
#include "slurm/exec.h"
#include "slurm/restjson.h"

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

struct rest_priv {
	struct exec_opts o;
	char base[512];	  /* "http://host:port" or "http://localhost" for a socket */
	char socket[512]; /* unix socket path; "" for TCP */
	char user[128];
	const char *token; /* from the environment; never copied elsewhere */
	char version[16];  /* "v0.0.42" */
	int minor;	   /* 42 */
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

static void rest_error(const cJSON *j, long code, const char *what, char *err, size_t errlen);

/* GET (body NULL), POST (body) or DELETE (del); returns parsed JSON or NULL (err set).
 * *code is the HTTP status, 0 when no answer came. */
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
	else if (!(json = cJSON_Parse(b.p ? b.p : ""))) {
		if (*code == 401) /* "Authentication failure", as text */
			rest_error(NULL, *code, path, err, errlen);
		else
			snprintf(err, errlen, "slurmrestd %s: HTTP %ld, not JSON", path, *code);
	}
	free(b.p);
	return json;
}

/* The first message of a response's errors[] (for err); j may be NULL. */
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

static int rs_submit(struct executor *x, const struct slurm_array *a, const char *script_path,
		     const char *work_dir, char *array_job_id, size_t idlen, char *err,
		     size_t errlen)
{
	struct rest_priv *pv = x->priv;
	size_t nenv = 0;
	char **env = exec_job_environ(&nenv);
	char path[64];
	long code;
	int rc = -1;

	(void)script_path;
	if (!env) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	char *body =
	    restjson_submit_body(pv->minor, a, env, nenv, work_dir, pv->o.hold, err, errlen);
	free(env);
	if (!body)
		return -1;
	snprintf(path, sizeof(path), "/slurm/%s/job/submit", pv->version);
	cJSON *resp = rest_call(pv, path, body, 0, &code, err, errlen);
	free(body);
	if (!resp)
		return -1;
	const cJSON *jid = cJSON_GetObjectItem(resp, "job_id");
	if (code == 200 && cJSON_IsNumber(jid)) {
		snprintf(array_job_id, idlen, "%.0f", jid->valuedouble);
		rc = 0;
	} else {
		rest_error(resp, code, "submitting an array", err, errlen);
	}
	cJSON_Delete(resp);
	return rc;
}

static int rs_poll(struct executor *x, const struct results_job *jobs, size_t n,
		   struct exec_state *out, char *err, size_t errlen)
{
	struct rest_priv *pv = x->priv;
	char path[64];
	long code;

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
		const cJSON *j;
		memset(&out[i], 0, sizeof(out[i]));
		out[i].exit_code = -1;
		cJSON_ArrayForEach(j, list)
		{
			if (restjson_job_matches(j, &jobs[i])) {
				restjson_job_state(j, &out[i]);
				break;
			}
		}
	}
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
			restjson_number(cJSON_GetObjectItem(e, "error_number"), &en);
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

static int ping(struct rest_priv *pv, int minor, long *code, char *err, size_t errlen)
{
	char path[64];
	snprintf(path, sizeof(path), "/slurm/v0.0.%d/ping", minor);
	cJSON *r = rest_call(pv, path, NULL, 0, code, err, errlen);
	if (!r)
		return -1;
	int ok = *code == 200;
	if (!ok && *code != 404)
		rest_error(r, *code, "ping", err, errlen);
	cJSON_Delete(r);
	return ok ? 0 : -1;
}

static const char *where(const struct rest_priv *pv)
{
	return pv->socket[0] ? pv->socket : pv->base;
}

/* The version to speak: the newest we know of those the server's OpenAPI document lists;
 * without the document, the newest that answers a ping. 0, or -1 with err set. */
static int negotiate(struct rest_priv *pv, char *err, size_t errlen)
{
	int served[32];
	size_t n = 0;
	long code = 0;
	int m = -1;

	cJSON *doc = rest_call(pv, "/openapi/v3", NULL, 0, &code, err, errlen);
	if (!doc && (code == 0 || code == 401))
		return -1; /* cannot connect, or no valid credentials: err says which */
	if (doc && code == 200)
		n = restjson_served(doc, served, sizeof(served) / sizeof(served[0]));
	cJSON_Delete(doc);
	if (n) {
		m = restjson_pick(served, n);
		if (m < 0) {
			restjson_none_message(where(pv), served, n, err, errlen);
			return -1;
		}
	} else {
		for (int v = RESTJSON_NEWEST; v >= RESTJSON_OLDEST && m < 0; v--) {
			err[0] = '\0';
			if (ping(pv, v, &code, err, errlen) == 0)
				m = v;
			else if (code != 404)
				return -1; /* cannot connect, auth or server error: err says so */
		}
		if (m < 0) {
			restjson_none_message(where(pv), NULL, 0, err, errlen);
			return -1;
		}
	}
	pv->minor = m;
	snprintf(pv->version, sizeof(pv->version), "v0.0.%d", m);
	return 0;
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
		char ours[128];
		restjson_spoken(ours, sizeof(ours));
		if (strncmp(o->rest_version, "v0.0.", 5) ||
		    lb_parse_int(o->rest_version + 5, 0, 999, &pv->minor)) {
			snprintf(err, errlen, "--rest-version '%s' is not like v0.0.%d",
				 o->rest_version, RESTJSON_NEWEST);
			goto out_free;
		}
		if (!restjson_shape(pv->minor)) {
			snprintf(err, errlen,
				 "--rest-version '%s' is older than any layoutbench speaks (%s)",
				 o->rest_version, ours);
			goto out_free;
		}
		snprintf(pv->version, sizeof(pv->version), "v0.0.%d", pv->minor);
	} else if (negotiate(pv, err, errlen)) {
		goto out_free;
	}
	/* the chosen version answers, and takes the token */
	err[0] = '\0';
	if (ping(pv, pv->minor, &code, err, errlen)) {
		if (!err[0] || code == 404)
			snprintf(err, errlen, "slurmrestd at '%s' does not serve %s (HTTP %ld)",
				 where(pv), pv->version, code);
		goto out_free;
	}
	*x = (struct executor){.name = "rest",
			       .max_array = SLURM_DEFAULT_MAX_ARRAY,
			       .submit = rs_submit,
			       .poll = rs_poll,
			       .cancel = rs_cancel,
			       .close = rs_close,
			       .priv = pv};
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
