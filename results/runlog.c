/*
 * Run-log line parser (docs/run-log.md): cJSON in, a typed record out, every fault
 * named by its key. Pure; used by the collector and by the fuzz target.
 */
#include "results/runlog.h"

#include "common/version.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

/* Largest integer the fast path reads exactly (15 digits) and the array text holds. */
#define RUNLOG_INT_MAX 999999999999999LL

/* A short description of a JSON value for messages: a string "x", true, null, 1.5, ... */
static void describe(const cJSON *v, char *buf, size_t len)
{
	if (!v)
		snprintf(buf, len, "nothing");
	else if (cJSON_IsString(v))
		snprintf(buf, len, "\"%.24s\"%s", v->valuestring,
			 strlen(v->valuestring) > 24 ? "..." : "");
	else if (cJSON_IsNumber(v))
		snprintf(buf, len, "%.17g", v->valuedouble);
	else if (cJSON_IsBool(v))
		snprintf(buf, len, "%s", cJSON_IsTrue(v) ? "true" : "false");
	else if (cJSON_IsNull(v))
		snprintf(buf, len, "null");
	else if (cJSON_IsArray(v))
		snprintf(buf, len, "an array");
	else if (cJSON_IsObject(v))
		snprintf(buf, len, "an object");
	else
		snprintf(buf, len, "an unknown value");
}

struct ctx {
	const char *what;   /* record type for "missing key" messages */
	const char *prefix; /* key path prefix ("layout.") or "" */
	char *err;
	size_t errlen;
};

static int fault(struct ctx *c, const char *key, const char *expected, const cJSON *v)
{
	char got[64];

	describe(v, got, sizeof(got));
	snprintf(c->err, c->errlen, "'%s%s': expected %s, got %s", c->prefix, key, expected, got);
	return -1;
}

static int missing(struct ctx *c, const char *key)
{
	snprintf(c->err, c->errlen, "%s: missing key '%s%s'", c->what, c->prefix, key);
	return -1;
}

/* Integer in [min, max]. required: absent is an error; else *out is left alone. */
static int get_int64(struct ctx *c, const cJSON *o, const char *key, int required, int64_t min,
		     int64_t max, int64_t *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	double d;

	if (!v || (!required && cJSON_IsNull(v)))
		return required ? missing(c, key) : 0;
	if (!cJSON_IsNumber(v))
		return fault(c, key, "an integer", v);
	d = v->valuedouble;
	if (!isfinite(d) || d != floor(d))
		return fault(c, key, "an integer", v);
	if (d < (double)min || d > (double)max) {
		char range[80];
		snprintf(range, sizeof(range), "an integer in [%lld, %lld]", (long long)min,
			 (long long)max);
		return fault(c, key, range, v);
	}
	*out = (int64_t)d;
	return 0;
}

static int get_int(struct ctx *c, const cJSON *o, const char *key, int required, int min, int max,
		   int *out)
{
	int64_t v;

	if (get_int64(c, o, key, required, min, max, &v))
		return -1;
	if (cJSON_GetObjectItemCaseSensitive(o, key) &&
	    !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, key)))
		*out = (int)v;
	return 0;
}

/* 0/1 from a bool or an integer 0/1. */
static int get_flag(struct ctx *c, const cJSON *o, const char *key, int required, int *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!v || (!required && cJSON_IsNull(v)))
		return required ? missing(c, key) : 0;
	if (cJSON_IsBool(v)) {
		*out = cJSON_IsTrue(v) ? 1 : 0;
		return 0;
	}
	if (cJSON_IsNumber(v) && (v->valuedouble == 0 || v->valuedouble == 1)) {
		*out = (int)v->valuedouble;
		return 0;
	}
	return fault(c, key, "true, false, 0 or 1", v);
}

/* Finite number; null allowed when nullable (then *out = NAN). */
static int get_double(struct ctx *c, const cJSON *o, const char *key, int required, int nullable,
		      double min, double *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!v)
		return required ? missing(c, key) : 0;
	if (cJSON_IsNull(v)) {
		if (!nullable)
			return fault(c, key, "a number", v);
		*out = NAN;
		return 0;
	}
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return fault(c, key, "a number", v);
	if (v->valuedouble < min) {
		char what[48];
		snprintf(what, sizeof(what), "a number >= %g", min);
		return fault(c, key, what, v);
	}
	*out = v->valuedouble;
	return 0;
}

/* String into a fixed buffer; null allowed when nullable (then ""). Too long is a fault. */
static int get_str(struct ctx *c, const cJSON *o, const char *key, int required, int nullable,
		   char *buf, size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!v)
		return required ? missing(c, key) : 0;
	if (cJSON_IsNull(v) && nullable) {
		buf[0] = 0;
		return 0;
	}
	if (!cJSON_IsString(v))
		return fault(c, key, nullable ? "a string or null" : "a string", v);
	if (strlen(v->valuestring) >= len) {
		char what[48];
		snprintf(what, sizeof(what), "a string of at most %zu bytes", len - 1);
		return fault(c, key, what, v);
	}
	memcpy(buf, v->valuestring, strlen(v->valuestring) + 1);
	return 0;
}

/* Any JSON value of the given kind (cJSON_IsArray/IsObject) as compact text, or NULL. */
static int get_json(struct ctx *c, const cJSON *o, const char *key, int is_array, char **out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	*out = NULL;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (is_array ? !cJSON_IsArray(v) : !cJSON_IsObject(v))
		return fault(c, key, is_array ? "an array" : "an object", v);
	*out = cJSON_PrintUnformatted(v);
	if (!*out) {
		snprintf(c->err, c->errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* An array of byte counts as canonical text "[1,2,3]" (malloc'd into *out), or NULL when
 * absent or null. Elements are integers in [0, RUNLOG_INT_MAX]. */
static int get_int_array(struct ctx *c, const cJSON *o, const char *key, char **out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key), *e;
	size_t n = 0, cap, at = 0;
	char *buf;
	int i = 0;

	*out = NULL;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsArray(v))
		return fault(c, key, "an array of integers", v);
	cJSON_ArrayForEach(e, v) n++;
	cap = 2 + n * 17 + 1;
	buf = malloc(cap);
	if (!buf) {
		snprintf(c->err, c->errlen, "out of memory");
		return -1;
	}
	buf[at++] = '[';
	cJSON_ArrayForEach(e, v)
	{
		double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
		if (!(d >= 0 && d <= (double)RUNLOG_INT_MAX && d == floor(d))) {
			char k[80];
			snprintf(k, sizeof(k), "%s[%d]", key, i);
			free(buf);
			return fault(c, k, "an integer in [0, 999999999999999]", e);
		}
		at += (size_t)snprintf(buf + at, cap - at, "%s%lld", i ? "," : "", (long long)d);
		i++;
	}
	buf[at++] = ']';
	buf[at] = 0;
	*out = buf;
	return 0;
}

static int get_strdup(struct ctx *c, const cJSON *o, const char *key, char **out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	*out = NULL;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsString(v))
		return fault(c, key, "a string", v);
	*out = strdup(v->valuestring);
	if (!*out) {
		snprintf(c->err, c->errlen, "out of memory");
		return -1;
	}
	return 0;
}

static int is_hex_id(const char *s)
{
	size_t n = strlen(s);

	if (n != LB_ID_LEN)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

#define BIG 1000000000 /* upper bound for sizes */

/* The optional explicit layer split "stage_layers": [7, 8, 8, 7] (harness/trainlog.c
 * writes it only when it differs from the rule), at most LB_MAX_STAGES positive entries. */
static int get_stage_layers(struct ctx *c, const cJSON *lo, struct lb_layout *l)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(lo, "stage_layers"), *e;
	int n = 0;

	if (!a || cJSON_IsNull(a))
		return 0;
	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) < 1 || cJSON_GetArraySize(a) > LB_MAX_STAGES)
		return fault(c, "stage_layers", "a list of 1 to 64 layer counts", a);
	cJSON_ArrayForEach(e, a)
	{
		if (!cJSON_IsNumber(e) || e->valuedouble < 1 || e->valuedouble > BIG ||
		    e->valuedouble != (double)(int)e->valuedouble)
			return fault(c, "stage_layers", "positive integers", a);
		l->stage_layers[n++] = (int)e->valuedouble;
	}
	l->n_stage_layers = n;
	return 0;
}

/* Field f of l from object o (common/layout_fields.def): required, or left at its default
 * when absent. */
static int get_field(struct ctx *c, const cJSON *o, struct lb_layout *l, int f, int required)
{
	const struct lb_field_info *fi = &lb_fields[f];
	char s[64], what[160];
	int64_t seed;
	int v = (int)lb_field_get(l, f);

	switch (fi->kind) {
	case LB_FK_NAME: /* the model's: read by parse_layout */
		return 0;
	case LB_FK_SPLIT:
		return get_stage_layers(c, o, l);
	case LB_FK_SEED:
		seed = (int64_t)lb_field_get(l, f);
		if (get_int64(c, o, fi->key, required, 0, INT64_MAX, &seed))
			return -1;
		lb_field_set(l, f, seed);
		return 0;
	case LB_FK_BOOL:
		if (get_flag(c, o, fi->key, required, &v))
			return -1;
		break;
	case LB_FK_ENUM:
		if (!cJSON_GetObjectItemCaseSensitive(o, fi->key) && !required)
			return 0;
		if (get_str(c, o, fi->key, 1, 0, s, sizeof(s)))
			return -1;
		if ((v = lb_field_enum_index(f, s)) < 0)
			return fault(c, fi->key, lb_field_expect(f, 0, what, sizeof(what)),
				     cJSON_GetObjectItemCaseSensitive(o, fi->key));
		break;
	default: /* the integers */
		if (get_int(c, o, fi->key, required, (int)fi->lo, (int)fi->hi, &v))
			return -1;
	}
	lb_field_set(l, f, v);
	return 0;
}

/* The header's layout: the "model" object's name and shape, the "layout" object's
 * fields (the run settings and the sparse ones may be absent: their defaults). */
static int parse_layout(struct ctx *c, const cJSON *root, struct lb_layout *l)
{
	const cJSON *lo = cJSON_GetObjectItemCaseSensitive(root, "layout");
	const cJSON *mo = cJSON_GetObjectItemCaseSensitive(root, "model");
	struct lb_model *m = &l->model;
	char name[LB_NAME_MAX] = "";

	lb_layout_init(l);
	if (!lo)
		return missing(c, "layout");
	if (!cJSON_IsObject(lo))
		return fault(c, "layout", "an object", lo);
	if (!mo)
		return missing(c, "model");
	if (!cJSON_IsObject(mo))
		return fault(c, "model", "an object", mo);

	c->prefix = "model.";
	if (get_str(c, mo, "name", 1, 0, name, sizeof(name)))
		return -1;
	for (int f = 0; f < LB_NFIELDS; f++)
		if (lb_fields[f].in_model && get_field(c, mo, l, f, 1))
			return -1;
	memcpy(m->name, name, sizeof(name));

	c->prefix = "layout.";
	if (get_str(c, lo, "model", 0, 0, name, sizeof(name)))
		return -1;
	if (cJSON_GetObjectItemCaseSensitive(lo, "model") && strcmp(name, m->name)) {
		snprintf(c->err, c->errlen,
			 "'layout.model': \"%s\" differs from 'model.name' \"%s\"", name, m->name);
		return -1;
	}
	for (int f = 0; f < LB_NFIELDS; f++)
		if (!lb_fields[f].in_model &&
		    get_field(c, lo, l, f, !(lb_fields[f].attrs & (LB_FA_RUN | LB_FA_SPARSE))))
			return -1;
	c->prefix = "";
	return 0;
}

static int parse_header(struct ctx *c, const cJSON *root, struct runlog_header *h)
{
	char fmt[32];
	int64_t v;

	c->what = "header";
	h->params = h->tokens_per_step = -1;
	h->flops_per_step = h->hw_flops_per_step = h->peak_tflops = -1;
	if (get_str(c, root, "format", 1, 0, fmt, sizeof(fmt)))
		return -1;
	if (strcmp(fmt, "layoutbench-runlog"))
		return fault(c, "format", "\"layoutbench-runlog\"",
			     cJSON_GetObjectItemCaseSensitive(root, "format"));
	if (get_int64(c, root, "version", 1, 1, 1000000, &v))
		return -1;
	h->version = (int)v;
	if (h->version > LB_RUNLOG_VERSION) {
		snprintf(c->err, c->errlen,
			 "run log version %d is newer than this build reads (%d); use a newer "
			 "layoutbench",
			 h->version, LB_RUNLOG_VERSION);
		return -1;
	}
	if (get_str(c, root, "run_uid", 1, 0, h->run_uid, sizeof(h->run_uid)))
		return -1;
	if (!h->run_uid[0])
		return fault(c, "run_uid", "a non-empty string",
			     cJSON_GetObjectItemCaseSensitive(root, "run_uid"));
	if (get_str(c, root, "layout_id", 1, 0, h->layout_id, sizeof(h->layout_id)))
		return -1;
	if (!is_hex_id(h->layout_id))
		return fault(c, "layout_id", "16 lower-case hex digits",
			     cJSON_GetObjectItemCaseSensitive(root, "layout_id"));
	if (parse_layout(c, root, &h->layout))
		return -1;
	lb_layout_id(&h->layout, h->layout_id_computed);
	if (get_strdup(c, root, "flags", &h->flags) ||
	    get_int64(c, root, "params", 0, 0, INT64_MAX, &h->params) ||
	    get_int64(c, root, "tokens_per_step", 0, 0, INT64_MAX, &h->tokens_per_step) ||
	    get_double(c, root, "flops_per_step", 0, 1, 0, &h->flops_per_step) ||
	    get_double(c, root, "hw_flops_per_step", 0, 1, 0, &h->hw_flops_per_step) ||
	    get_str(c, root, "gpu", 0, 1, h->gpu, sizeof(h->gpu)) ||
	    get_double(c, root, "peak_tflops", 0, 1, 0, &h->peak_tflops) ||
	    get_int(c, root, "world_size", 0, 1, BIG, &h->world_size) ||
	    get_json(c, root, "hosts", 1, &h->hosts) ||
	    get_str(c, root, "backend", 0, 1, h->backend, sizeof(h->backend)) ||
	    get_json(c, root, "versions", 0, &h->versions) ||
	    get_str(c, root, "git_commit", 0, 1, h->git_commit, sizeof(h->git_commit)) ||
	    get_str(c, root, "start_time", 0, 1, h->start_time, sizeof(h->start_time)) ||
	    get_str(c, root, "sweep", 0, 1, h->sweep, sizeof(h->sweep)) ||
	    get_str(c, root, "job_id", 0, 1, h->job_id, sizeof(h->job_id)) ||
	    get_str(c, root, "label", 0, 1, h->label, sizeof(h->label)))
		return -1;
	/* NaN (null) means unknown, like absent */
	if (isnan(h->flops_per_step))
		h->flops_per_step = -1;
	if (isnan(h->hw_flops_per_step))
		h->hw_flops_per_step = -1;
	if (isnan(h->peak_tflops))
		h->peak_tflops = -1;
	return 0;
}

static int parse_step(struct ctx *c, const cJSON *root, struct runlog_step *s)
{
	const cJSON *ph;
	struct ctx pc;

	c->what = "step";
	s->tokens = s->peak_mem_bytes = s->device_peak_mem_bytes = -1;
	s->loss = s->forward_s = s->backward_s = s->optimizer_s = s->comm_exposed_s = s->bubble_s =
	    NAN;
	if (get_int64(c, root, "step", 1, 0, INT64_MAX, &s->step) ||
	    get_flag(c, root, "warmup", 1, &s->warmup) ||
	    get_double(c, root, "time_s", 1, 0, 0, &s->time_s) ||
	    get_int64(c, root, "tokens", 0, 0, INT64_MAX, &s->tokens) ||
	    get_double(c, root, "loss", 0, 1, -INFINITY, &s->loss) ||
	    get_int64(c, root, "peak_mem_bytes", 0, 0, INT64_MAX, &s->peak_mem_bytes) ||
	    get_int_array(c, root, "rank_peak_mem_bytes", &s->rank_peak_mem) ||
	    get_int64(c, root, "device_peak_mem_bytes", 0, 0, INT64_MAX,
		      &s->device_peak_mem_bytes) ||
	    get_int_array(c, root, "rank_device_peak_mem_bytes", &s->rank_device_peak_mem))
		return -1;
	ph = cJSON_GetObjectItemCaseSensitive(root, "phases");
	if (!ph || cJSON_IsNull(ph))
		return 0;
	if (!cJSON_IsObject(ph))
		return fault(c, "phases", "an object", ph);
	pc = *c;
	pc.prefix = "phases.";
	if (get_double(&pc, ph, "forward_s", 0, 1, 0, &s->forward_s) ||
	    get_double(&pc, ph, "backward_s", 0, 1, 0, &s->backward_s) ||
	    get_double(&pc, ph, "optimizer_s", 0, 1, 0, &s->optimizer_s) ||
	    get_double(&pc, ph, "comm_exposed_s", 0, 1, 0, &s->comm_exposed_s) ||
	    get_double(&pc, ph, "bubble_s", 0, 1, 0, &s->bubble_s))
		return -1;
	return 0;
}

static int parse_end(struct ctx *c, const cJSON *root, struct runlog_end *e)
{
	char status[16];
	int64_t v;

	c->what = "end";
	e->rank = -1;
	e->exit_code = -1;
	if (get_str(c, root, "status", 1, 0, status, sizeof(status)))
		return -1;
	if (!strcmp(status, "ok"))
		e->ok = 1;
	else if (!strcmp(status, "failed"))
		e->ok = 0;
	else
		return fault(c, "status", "\"ok\" or \"failed\"",
			     cJSON_GetObjectItemCaseSensitive(root, "status"));
	if (get_str(c, root, "class", 0, 1, e->failure_class, sizeof(e->failure_class)) ||
	    get_strdup(c, root, "message", &e->message) ||
	    get_int(c, root, "rank", 0, 0, BIG, &e->rank) ||
	    get_int64(c, root, "exit_code", 0, 0, 255, &v) ||
	    get_str(c, root, "end_time", 0, 1, e->end_time, sizeof(e->end_time)))
		return -1;
	if (cJSON_GetObjectItemCaseSensitive(root, "exit_code") &&
	    !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, "exit_code")))
		e->exit_code = (int)v;
	if (!e->ok && !e->failure_class[0])
		snprintf(e->failure_class, sizeof(e->failure_class), "error");
	return 0;
}

/*
 * Fast path for step lines as the trainer writes them (flat keys, plain numbers): the
 * collector reads a million of them per sweep, and cJSON's allocations and locale look-ups
 * dominate. It accepts only what it reads exactly as the general path would (integers of
 * at most 15 digits, numbers by Clinger's exact fast path or strtod, no escapes, no
 * duplicate or unknown keys) and otherwise returns 0: the general path then parses the
 * line and names any fault. Returns 1 when s is filled.
 */
struct scan {
	const char *p, *end;
};

static void sc_ws(struct scan *sc)
{
	while (sc->p < sc->end &&
	       (*sc->p == ' ' || *sc->p == '\t' || *sc->p == '\n' || *sc->p == '\r'))
		sc->p++;
}

static int sc_char(struct scan *sc, char ch)
{
	sc_ws(sc);
	if (sc->p < sc->end && *sc->p == ch) {
		sc->p++;
		return 1;
	}
	return 0;
}

/* A key or string without escapes; sets *k and *n. */
static int sc_string(struct scan *sc, const char **k, size_t *n)
{
	const char *q;

	if (!sc_char(sc, '"'))
		return 0;
	for (q = sc->p; q < sc->end && *q != '"'; q++)
		if (*q == '\\' || (unsigned char)*q < 0x20)
			return 0;
	if (q == sc->end)
		return 0;
	*k = sc->p;
	*n = (size_t)(q - sc->p);
	sc->p = q + 1;
	return 1;
}

static int sc_literal_n(struct scan *sc, const char *lit, size_t n)
{
	sc_ws(sc);
	if ((size_t)(sc->end - sc->p) >= n && !memcmp(sc->p, lit, n)) {
		sc->p += n;
		return 1;
	}
	return 0;
}

#define sc_literal(sc, lit) sc_literal_n((sc), (lit), sizeof(lit) - 1)

/* The end of a number must be a delimiter. */
static int sc_delim(const struct scan *sc)
{
	return sc->p == sc->end || *sc->p == ',' || *sc->p == '}' || *sc->p == ']' ||
	       *sc->p == ' ' || *sc->p == '\t' || *sc->p == '\n' || *sc->p == '\r';
}

/* A non-negative integer of 1 to 15 digits, no fraction or exponent. */
static int sc_uint(struct scan *sc, int64_t *v)
{
	int64_t x = 0;
	int nd = 0;

	sc_ws(sc);
	if (sc->end - sc->p > 1 && sc->p[0] == '0' && sc->p[1] >= '0' && sc->p[1] <= '9')
		return 0; /* a leading zero: not canonical */
	while (sc->p < sc->end && *sc->p >= '0' && *sc->p <= '9') {
		if (++nd > 15)
			return 0;
		x = x * 10 + (*sc->p++ - '0');
	}
	if (!nd || !sc_delim(sc))
		return 0;
	*v = x;
	return 1;
}

/* A JSON number: exact by Clinger's fast path (mantissa <= 2^53, |exponent| <= 22),
 * else strtod on the same text (what cJSON calls). */
static int sc_number(struct scan *sc, double *v)
{
	static const double pow10[] = {1e0,  1e1,  1e2,	 1e3,  1e4,  1e5,  1e6,	 1e7,
				       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
				       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
	const char *start;
	uint64_t m = 0;
	int neg = 0, nd = 0, exp10 = 0, e = 0, eneg = 0, ed = 0;
	char buf[64];

	sc_ws(sc);
	start = sc->p;
	if (sc->p < sc->end && *sc->p == '-') {
		neg = 1;
		sc->p++;
	}
	while (sc->p < sc->end && *sc->p >= '0' && *sc->p <= '9') {
		if (nd < 19)
			m = m * 10 + (uint64_t)(*sc->p - '0');
		else
			exp10++;
		nd++;
		sc->p++;
	}
	if (!nd)
		return 0;
	if (sc->p < sc->end && *sc->p == '.') {
		int fd = 0;
		sc->p++;
		while (sc->p < sc->end && *sc->p >= '0' && *sc->p <= '9') {
			if (nd < 19) {
				m = m * 10 + (uint64_t)(*sc->p - '0');
				exp10--;
			}
			nd++;
			fd++;
			sc->p++;
		}
		if (!fd)
			return 0;
	}
	if (sc->p < sc->end && (*sc->p == 'e' || *sc->p == 'E')) {
		sc->p++;
		if (sc->p < sc->end && (*sc->p == '+' || *sc->p == '-'))
			eneg = *sc->p++ == '-';
		while (sc->p < sc->end && *sc->p >= '0' && *sc->p <= '9') {
			if (++ed > 4)
				return 0;
			e = e * 10 + (*sc->p++ - '0');
		}
		if (!ed)
			return 0;
		exp10 += eneg ? -e : e;
	}
	if (!sc_delim(sc))
		return 0;
	if (nd <= 19 && m <= (1ULL << 53) && exp10 >= -22 && exp10 <= 22) {
		double d = (double)m;
		d = exp10 < 0 ? d / pow10[-exp10] : d * pow10[exp10];
		*v = neg ? -d : d;
		return 1;
	}
	if ((size_t)(sc->p - start) >= sizeof(buf))
		return 0;
	memcpy(buf, start, (size_t)(sc->p - start));
	buf[sc->p - start] = 0;
	*v = strtod(buf, NULL);
	return isfinite(*v);
}

static int sc_key_is(const char *k, size_t n, const char *name)
{
	return strlen(name) == n && !memcmp(k, name, n);
}

/* The same for a string literal, without strlen. */
#define KEY_IS(k, n, lit) ((n) == sizeof(lit) - 1 && !memcmp((k), (lit), sizeof(lit) - 1))

static int fast_phases(struct scan *sc, struct runlog_step *s)
{
	static const char *const names[] = {"forward_s", "backward_s", "optimizer_s",
					    "comm_exposed_s", "bubble_s"};
	double *dst[] = {&s->forward_s, &s->backward_s, &s->optimizer_s, &s->comm_exposed_s,
			 &s->bubble_s};
	unsigned seen = 0;

	if (sc_char(sc, '}'))
		return 1;
	for (;;) {
		const char *k;
		size_t n;
		int i;

		if (!sc_string(sc, &k, &n) || !sc_char(sc, ':'))
			return 0;
		for (i = 0; i < 5 && !sc_key_is(k, n, names[i]); i++)
			;
		if (i == 5 || (seen & (1u << i)))
			return 0;
		seen |= 1u << i;
		if (sc_literal(sc, "null"))
			*dst[i] = NAN;
		else if (!sc_number(sc, dst[i]) || *dst[i] < 0)
			return 0;
		if (sc_char(sc, '}'))
			return 1;
		if (!sc_char(sc, ','))
			return 0;
	}
}

/* null, or an array of byte counts into *out (malloc'd canonical text), which must not
 * have one yet (a key given twice). */
static int fast_rank_mem(struct scan *sc, char **out)
{
	char buf[512];
	size_t at = 1;
	int64_t v;

	if (*out)
		return 0;
	if (sc_literal(sc, "null"))
		return 1;
	if (!sc_char(sc, '['))
		return 0;
	buf[0] = '[';
	if (!sc_char(sc, ']')) {
		for (;;) {
			const char *d;
			sc_ws(sc);
			d = sc->p;
			if (!sc_uint(sc, &v) || at + 20 >= sizeof(buf))
				return 0;
			if (at > 1)
				buf[at++] = ',';
			memcpy(buf + at, d, (size_t)(sc->p - d));
			at += (size_t)(sc->p - d);
			if (sc_char(sc, ']'))
				break;
			if (!sc_char(sc, ','))
				return 0;
		}
	}
	buf[at++] = ']';
	buf[at] = 0;
	*out = malloc(at + 1);
	if (*out)
		memcpy(*out, buf, at + 1);
	return *out != NULL;
}

enum { F_TYPE = 1, F_STEP = 2, F_WARMUP = 4, F_TIME = 8, F_REQUIRED = 15 };

/* The step's keys that may be absent or null, after the four required ones (their bit in
 * fast_step's seen: 16 << index), each with how its value is read and its field. */
enum fast_kind { FAST_COUNT, FAST_REAL, FAST_RANKS, FAST_PHASES };
static const struct fast_key {
	const char *key;
	enum fast_kind kind;
	size_t off; /* of the field in struct runlog_step (FAST_PHASES: unused) */
} fast_keys[] = {
    {"tokens", FAST_COUNT, offsetof(struct runlog_step, tokens)},
    {"loss", FAST_REAL, offsetof(struct runlog_step, loss)},
    {"peak_mem_bytes", FAST_COUNT, offsetof(struct runlog_step, peak_mem_bytes)},
    {"rank_peak_mem_bytes", FAST_RANKS, offsetof(struct runlog_step, rank_peak_mem)},
    {"device_peak_mem_bytes", FAST_COUNT, offsetof(struct runlog_step, device_peak_mem_bytes)},
    {"rank_device_peak_mem_bytes", FAST_RANKS, offsetof(struct runlog_step, rank_device_peak_mem)},
    {"phases", FAST_PHASES, 0},
};

/* The value of key f into its field of s (null leaves the field as it is). */
static int fast_value(struct scan *sc, struct runlog_step *s, const struct fast_key *f)
{
	char *field = (char *)s + f->off;

	if (f->kind == FAST_RANKS)
		return fast_rank_mem(sc, (char **)field);
	if (sc_literal(sc, "null"))
		return 1;
	switch (f->kind) {
	case FAST_COUNT:
		return sc_uint(sc, (int64_t *)field);
	case FAST_REAL:
		return sc_number(sc, (double *)field);
	default:
		return sc_char(sc, '{') && fast_phases(sc, s);
	}
}

static int fast_step(const char *line, size_t len, struct runlog_step *s)
{
	struct scan sc = {line, line + len};
	unsigned seen = 0, bit;

	memset(s, 0, sizeof(*s));
	s->tokens = s->peak_mem_bytes = s->device_peak_mem_bytes = -1;
	s->loss = s->forward_s = s->backward_s = s->optimizer_s = s->comm_exposed_s = s->bubble_s =
	    NAN;
	if (!sc_char(&sc, '{'))
		return 0;
	for (;;) {
		const char *k, *v;
		size_t n, vn;
		int64_t iv;
		int ok = 0;

		if (!sc_string(&sc, &k, &n) || !sc_char(&sc, ':'))
			goto out_not_handled;
		if (KEY_IS(k, n, "type")) {
			bit = F_TYPE;
			ok = sc_string(&sc, &v, &vn) && KEY_IS(v, vn, "step");
		} else if (KEY_IS(k, n, "step")) {
			bit = F_STEP;
			ok = sc_uint(&sc, &iv);
			s->step = iv;
		} else if (KEY_IS(k, n, "warmup")) {
			bit = F_WARMUP;
			ok = 1;
			if (sc_literal(&sc, "true"))
				s->warmup = 1;
			else if (sc_literal(&sc, "false"))
				s->warmup = 0;
			else if (sc_uint(&sc, &iv) && iv <= 1)
				s->warmup = (int)iv;
			else
				ok = 0;
		} else if (KEY_IS(k, n, "time_s")) {
			bit = F_TIME;
			ok = sc_number(&sc, &s->time_s) && s->time_s >= 0;
		} else {
			size_t i = 0;
			while (i < sizeof(fast_keys) / sizeof(fast_keys[0]) &&
			       !sc_key_is(k, n, fast_keys[i].key))
				i++;
			if (i == sizeof(fast_keys) / sizeof(fast_keys[0]))
				goto out_not_handled;
			bit = 16u << i;
			ok = fast_value(&sc, s, &fast_keys[i]);
		}
		if (!ok || (seen & bit))
			goto out_not_handled;
		seen |= bit;
		if (sc_char(&sc, '}'))
			break;
		if (!sc_char(&sc, ','))
			goto out_not_handled;
	}
	sc_ws(&sc);
	if (sc.p != sc.end || (seen & F_REQUIRED) != F_REQUIRED)
		goto out_not_handled;
	return 1;
out_not_handled:
	free(s->rank_peak_mem);
	free(s->rank_device_peak_mem);
	s->rank_peak_mem = s->rank_device_peak_mem = NULL;
	return 0;
}

int runlog_parse_line(const char *line, size_t len, struct runlog_record *rec, char *err,
		      size_t errlen)
{
	if (len > 8 && line[0] == '{' && fast_step(line, len, &rec->step)) {
		rec->type = RUNLOG_STEP;
		return 0;
	}
	return runlog_parse_line_general(line, len, rec, err, errlen);
}

int runlog_parse_line_general(const char *line, size_t len, struct runlog_record *rec, char *err,
			      size_t errlen)
{
	struct ctx c = {"record", "", err, errlen};
	const cJSON *type;
	const char *end = NULL;
	cJSON *root;
	int rc = -1;

	while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	rec->type = 0;
	root = cJSON_ParseWithLengthOpts(line, len, &end, 0);
	if (!root) {
		size_t at = end && end >= line ? (size_t)(end - line) : 0;
		if (len == 0)
			snprintf(err, errlen, "empty line");
		else
			snprintf(err, errlen, "not JSON near byte %zu", at + 1);
		return -1;
	}
	if (!cJSON_IsObject(root)) {
		snprintf(err, errlen, "expected a JSON object");
		goto out_free_json;
	}
	if (end && (size_t)(end - line) < len) {
		const char *p = end;
		while (p < line + len && (*p == ' ' || *p == '\t'))
			p++;
		if (p < line + len) {
			snprintf(err, errlen, "text after the JSON object at byte %zu",
				 (size_t)(p - line) + 1);
			goto out_free_json;
		}
	}
	type = cJSON_GetObjectItemCaseSensitive(root, "type");
	if (!type) {
		snprintf(err, errlen, "missing key 'type'");
		goto out_free_json;
	}
	if (!cJSON_IsString(type) ||
	    (strcmp(type->valuestring, "header") && strcmp(type->valuestring, "step") &&
	     strcmp(type->valuestring, "end"))) {
		fault(&c, "type", "\"header\", \"step\" or \"end\"", type);
		goto out_free_json;
	}
	switch (type->valuestring[0]) {
	case 'h':
		memset(&rec->header, 0, sizeof(rec->header));
		rec->type = RUNLOG_HEADER;
		rc = parse_header(&c, root, &rec->header);
		break;
	case 's':
		memset(&rec->step, 0, sizeof(rec->step));
		rec->type = RUNLOG_STEP;
		rc = parse_step(&c, root, &rec->step);
		break;
	default:
		memset(&rec->end, 0, sizeof(rec->end));
		rec->type = RUNLOG_END;
		rc = parse_end(&c, root, &rec->end);
		break;
	}
	if (rc)
		runlog_record_release(rec);
out_free_json:
	cJSON_Delete(root);
	return rc;
}

void runlog_record_release(struct runlog_record *rec)
{
	switch (rec->type) {
	case RUNLOG_HEADER:
		free(rec->header.flags);
		free(rec->header.hosts);
		free(rec->header.versions);
		rec->header.flags = rec->header.hosts = rec->header.versions = NULL;
		break;
	case RUNLOG_STEP:
		free(rec->step.rank_peak_mem);
		free(rec->step.rank_device_peak_mem);
		rec->step.rank_peak_mem = rec->step.rank_device_peak_mem = NULL;
		break;
	case RUNLOG_END:
		free(rec->end.message);
		rec->end.message = NULL;
		break;
	}
	rec->type = 0;
}
