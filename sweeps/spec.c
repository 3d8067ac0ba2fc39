/*
 * Sweep spec parser: JSON text (cJSON) to struct sweep_spec. Every spec-level rule lives
 * here: the keys each object may carry (unknown keys are errors), value types and ranges,
 * equal-length zips, fields given twice, the kernel pseudo-field, the `where`
 * expressions, and the cluster strings that reach a job script (names, sbatch options,
 * environment, setup lines), which are checked against conservative patterns. Each
 * fault names the file, the JSON path and what is wrong. Layout facts (validity rules,
 * memory) are not checked here: they belong to common/ and the planner applies them.
 *
 * Why one file: it is the reader of one format, whose every fault message is made by the
 * same few helpers from the same context (the file, the JSON path).
 */
#include "sweeps/spec.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kernel_names.h"
#include "common/model.h"
#include "common/util.h"

#define POS_MAX	 (1 << 30)
#define MAX_LIST 10000000 /* values in one grid list */

/* A field's name in a spec: the layout field's key, or the spec's own. */
static const char *field_name(int f)
{
	return f == SF_GPUS ? "gpus" : f == SF_KERNEL ? "kernel" : lb_fields[f].key;
}

/* 1 when a spec sets field f in fixed, grid or zip. */
static int field_settable(int f)
{
	if (f >= LB_NFIELDS)
		return 1;
	return lb_fields[f].kind != LB_FK_NAME &&
	       !(lb_fields[f].attrs & (LB_FA_RUN | LB_FA_DERIVED));
}

/* The names of where's variables, by number: the fields' keys but of those that are no
 * variable ("" never matches an identifier), then the spec's own. */
static void var_names(const char *names[SV_NVARS])
{
	for (int f = 0; f < LB_NFIELDS; f++)
		names[f] = (lb_fields[f].attrs & LB_FA_RUN) || lb_fields[f].kind == LB_FK_SPLIT
			       ? ""
			       : lb_fields[f].key;
	names[SF_GPUS] = "gpus";
	names[SF_KERNEL] = ""; /* compare attention and norm instead */
	names[SV_ACCUM] = "accum";
}

static int find_field(const char *name)
{
	int i;

	for (i = 0; i < SF_NFIELDS; i++)
		if (field_settable(i) && !strcmp(field_name(i), name))
			return i;
	return -1;
}

/* String literals in where: enum names and preset names. */
static int where_enum_value(int var, const char *s, long long *out)
{
	if (var == SF_MODEL) {
		const char *const *names = lb_model_preset_names();
		long long i;

		for (i = 0; names[i]; i++)
			if (!strcmp(names[i], s)) {
				*out = i;
				return 0;
			}
		return -1;
	}
	if (var >= LB_NFIELDS || lb_fields[var].kind != LB_FK_ENUM ||
	    (*out = lb_field_enum_index(var, s)) < 0)
		return -1;
	return 0;
}

/* Parse context. */
struct ctx {
	const char *path;
	char *err;
	size_t errlen;
	struct sweep_spec *spec;
};

static int fail(struct ctx *c, const char *jpath, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct ctx *c, const char *jpath, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (jpath && *jpath)
		snprintf(c->err, c->errlen, "%s: %s: %s", c->path, jpath, msg);
	else
		snprintf(c->err, c->errlen, "%s: %s", c->path, msg);
	return -1;
}

/* A short rendering of a JSON value for messages: at most ~40 characters. */
static void show(const cJSON *v, char *buf, size_t len)
{
	char *s = cJSON_PrintUnformatted(v);

	if (!s) {
		snprintf(buf, len, "(unprintable)");
		return;
	}
	if (strlen(s) > 40)
		snprintf(buf, len, "%.37s...", s);
	else
		snprintf(buf, len, "%s", s);
	free(s);
}

/* out = base "." key (or key alone), truncated to len. */
static void join(char *out, size_t len, const char *base, const char *key)
{
	size_t n = 0;
	const char *parts[3] = {base && *base ? base : "", base && *base ? "." : "", key};
	int i;

	for (i = 0; i < 3; i++) {
		size_t k = strlen(parts[i]);

		if (k > len - 1 - n)
			k = len - 1 - n;
		memcpy(out + n, parts[i], k);
		n += k;
	}
	out[n] = '\0';
}

static void join_index(char *out, size_t len, const char *base, int i)
{
	snprintf(out, len, "%s[%d]", base, i);
}

/* Unknown and repeated keys of an object. allowed is NULL-terminated. */
static int check_keys(struct ctx *c, const cJSON *obj, const char *jpath,
		      const char *const *allowed, const char *hint)
{
	const cJSON *k, *k2;
	char sub[256];

	for (k = obj->child; k; k = k->next) {
		const char *const *a;

		for (a = allowed; *a; a++)
			if (!strcmp(*a, k->string))
				break;
		if (!*a) {
			join(sub, sizeof(sub), jpath, k->string);
			return fail(c, sub, "unknown key '%s'%s%s", k->string, hint ? " " : "",
				    hint ? hint : "");
		}
		for (k2 = obj->child; k2 != k; k2 = k2->next)
			if (!strcmp(k2->string, k->string)) {
				join(sub, sizeof(sub), jpath, k->string);
				return fail(c, sub, "key '%s' appears twice", k->string);
			}
	}
	return 0;
}

static int want_object(struct ctx *c, const cJSON *v, const char *jpath)
{
	char got[64];

	if (cJSON_IsObject(v))
		return 0;
	show(v, got, sizeof(got));
	return fail(c, jpath, "expected an object, got %s", got);
}

static int want_array(struct ctx *c, const cJSON *v, const char *jpath, int nonempty)
{
	char got[64];

	if (!cJSON_IsArray(v)) {
		show(v, got, sizeof(got));
		return fail(c, jpath, "expected a list, got %s", got);
	}
	if (nonempty && !v->child)
		return fail(c, jpath, "expected a non-empty list");
	return 0;
}

/* A JSON integer in [min, max]. */
static int get_int(struct ctx *c, const cJSON *v, const char *jpath, long long min, long long max,
		   const char *what, long long *out)
{
	char got[64];

	if (cJSON_IsNumber(v)) {
		double d = v->valuedouble;

		if (isfinite(d) && d == floor(d) && d >= (double)min && d <= (double)max) {
			*out = (long long)d;
			return 0;
		}
	}
	show(v, got, sizeof(got));
	/* an integer past a large limit: name the limit (a small one is in `what`) */
	if (cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble > (double)max &&
	    v->valuedouble == floor(v->valuedouble) && max >= 1000)
		return fail(c, jpath, "expected %s, got %s, over the limit of %lld", what, got,
			    max);
	return fail(c, jpath, "expected %s, got %s", what, got);
}

static int get_string(struct ctx *c, const cJSON *v, const char *jpath, const char **out)
{
	char got[64];

	if (cJSON_IsString(v) && v->valuestring) {
		*out = v->valuestring;
		return 0;
	}
	show(v, got, sizeof(got));
	return fail(c, jpath, "expected a string, got %s", got);
}

static int kernel_index(struct ctx *c, const char *name, const char *jpath, long long *out)
{
	struct sweep_spec *s = c->spec;
	enum lb_attn a;
	enum lb_norm n;
	int i;

	for (i = 0; i < s->nkernels; i++)
		if (!strcmp(s->kernels[i].name, name)) {
			*out = i;
			return 0;
		}
	if (strlen(name) >= sizeof(s->kernels[0].name) || lb_kernel_name_map(name, &a, &n)) {
		char known[256];
		enum lb_attn x;

		if (!lb_attn_parse(name, &x)) /* ours, not the paper's: say where it goes */
			return fail(c, jpath,
				    "unknown kernel \"%s\" (known: %s); '%s' is an attention "
				    "kernel: give it under 'attention' with 'norm'",
				    name, lb_kernel_names_list(known, sizeof(known)), name);
		return fail(c, jpath, "unknown kernel \"%.60s\" (known: %s)", name,
			    lb_kernel_names_list(known, sizeof(known)));
	}
	struct spec_kernel *k = realloc(s->kernels, (size_t)(s->nkernels + 1) * sizeof(*k));

	if (!k)
		return fail(c, jpath, "out of memory");
	s->kernels = k;
	snprintf(k[s->nkernels].name, sizeof(k[0].name), "%s", name);
	k[s->nkernels].attention = a;
	k[s->nkernels].norm = n;
	*out = s->nkernels++;
	return 0;
}

/* A value of stage_layers: a list of positive integers, layers per pipeline stage (model
 * chunk) in pipeline order; kept in the spec's table, *out its index. Whether it fits
 * the layout (one entry per stage, summing to the layers) is a layout rule: the planner
 * lists a layout it does not fit as invalid, with the reason. */
static int split_index(struct ctx *c, const cJSON *v, const char *jpath, long long *out)
{
	struct sweep_spec *s = c->spec;
	struct spec_split sp, *t;
	const cJSON *e;
	char got[64], sub[300];
	int i;

	if (!cJSON_IsArray(v)) {
		show(v, got, sizeof(got));
		return fail(c, jpath,
			    "expected a list of layers per stage (e.g. [7, 8, 8, 7]), got %s%s",
			    got,
			    cJSON_IsNumber(v) ? " (a grid or zip axis lists splits: [[7, 8, 8, 7], "
						"[8, 7, 7, 8]])"
					      : "");
	}
	memset(&sp, 0, sizeof(sp));
	for (e = v->child, i = 0; e; e = e->next, i++) {
		long long x;

		join_index(sub, sizeof(sub), jpath, i);
		if (i == LB_MAX_STAGES)
			return fail(c, jpath, "more than %d stages", LB_MAX_STAGES);
		if (get_int(c, e, sub, 1, POS_MAX,
			    "a positive number of layers (every stage needs one)", &x))
			return -1;
		sp.layers[i] = (int)x;
	}
	if (i == 0)
		return fail(c, jpath, "expected layers per stage (e.g. [7, 8, 8, 7]), got []");
	sp.n = i;
	for (i = 0; i < s->nsplits; i++)
		if (s->splits[i].n == sp.n &&
		    !memcmp(s->splits[i].layers, sp.layers, (size_t)sp.n * sizeof(int))) {
			*out = i;
			return 0;
		}
	t = realloc(s->splits, (size_t)(s->nsplits + 1) * sizeof(*t));
	if (!t)
		return fail(c, jpath, "out of memory");
	s->splits = t;
	s->splits[s->nsplits] = sp;
	*out = s->nsplits++;
	return 0;
}

/* One value of a field. */
static int field_value(struct ctx *c, int f, const cJSON *v, const char *jpath, long long *out)
{
	const struct lb_field_info *fi = f < LB_NFIELDS ? &lb_fields[f] : NULL;
	char got[64], what[160];
	long long x;

	if (f == SF_GPUS)
		return get_int(c, v, jpath, 1, POS_MAX, "a positive integer", out);
	if (f == SF_KERNEL) {
		const char *s = NULL;

		if (get_string(c, v, jpath, &s))
			return -1;
		return kernel_index(c, s, jpath, out);
	}
	switch (fi->kind) {
	case LB_FK_BOOL:
		if (cJSON_IsBool(v)) {
			*out = cJSON_IsTrue(v);
			return 0;
		}
		return get_int(c, v, jpath, fi->lo, fi->hi, "0, 1, true or false", out);
	case LB_FK_ZERO:
		return get_int(c, v, jpath, fi->lo, fi->hi, "a ZeRO stage (0, 1 or 2)", out);
	case LB_FK_CHUNKS:
		snprintf(what, sizeof(what), "a number of model chunks per stage (%lld to %lld)",
			 fi->lo, fi->hi);
		return get_int(c, v, jpath, fi->lo, fi->hi, what, out);
	case LB_FK_SPLIT:
		return split_index(c, v, jpath, out);
	case LB_FK_ENUM:
		if (cJSON_IsString(v) && v->valuestring &&
		    (x = lb_field_enum_index(f, v->valuestring)) >= 0) {
			*out = x;
			return 0;
		}
		show(v, got, sizeof(got));
		return fail(c, jpath, "expected %s, got %s",
			    lb_field_expect(f, 1, what, sizeof(what)), got);
	default: /* the integers */
		return get_int(c, v, jpath, fi->lo, fi->hi,
			       lb_field_expect(f, 0, what, sizeof(what)), out);
	}
}

/* The fields a spec sets, for messages: "layers, hidden, ..., dp, gpus, ..., norm, kernel,
 * ...": the spec's own beside the layout fields they stand for. */
static const char *field_list(char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int f = 0; f < LB_NFIELDS && used < len; f++) {
		if (!field_settable(f))
			continue;
		used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
					 lb_fields[f].key);
		if (f == SF_DP && used < len)
			used += (size_t)snprintf(buf + used, len - used, ", gpus");
		if (f == SF_NORM && used < len)
			used += (size_t)snprintf(buf + used, len - used, ", kernel");
	}
	return buf;
}

static int field_of_key(struct ctx *c, const char *key, const char *jpath)
{
	int f = find_field(key);
	char list[512];

	if (f >= 0)
		return f;
	if (!strcmp(key, "model") || !strcmp(key, "models"))
		fail(c, jpath, "the model is chosen by the top-level 'model' or 'models' key");
	else if (!strcmp(key, "nodes") || !strcmp(key, "gpus_per_node"))
		fail(c, jpath,
		     "'%s' is derived (gpus and cluster.gpus_per_node); give 'gpus' instead", key);
	else if (!strcmp(key, "steps") || !strcmp(key, "warmup") || !strcmp(key, "seed"))
		fail(c, jpath, "'%s' is a run setting; put it under 'run'", key);
	else
		fail(c, jpath, "unknown field '%s' (fields: %s)", key,
		     field_list(list, sizeof(list)));
	return -1;
}

/* Member k of object obj (at jpath) as a layout field: its path into sub, the field, and
 * no second member of the same name before it. The field, or -1 (c->err set). */
static int member_field(struct ctx *c, const cJSON *obj, const cJSON *k, const char *jpath,
			char *sub, size_t len)
{
	int f;

	join(sub, len, jpath, k->string);
	if ((f = field_of_key(c, k->string, sub)) < 0)
		return -1;
	for (const cJSON *k2 = obj->child; k2 != k; k2 = k2->next)
		if (!strcmp(k2->string, k->string))
			return fail(c, sub, "key '%s' appears twice", k->string);
	return f;
}

static struct spec_group *add_group(struct ctx *c, struct spec_part *p, const char *jpath)
{
	struct spec_group *g = realloc(p->groups, (size_t)(p->ngroups + 1) * sizeof(*g));

	if (!g) {
		fail(c, jpath, "out of memory");
		return NULL;
	}
	p->groups = g;
	g = &p->groups[p->ngroups++];
	memset(g, 0, sizeof(*g));
	snprintf(g->path, sizeof(g->path), "%s", jpath);
	return g;
}

/* Fill group g's values from the lists of object obj (one grid key: obj is the key). */
static int fill_group(struct ctx *c, struct spec_group *g, const cJSON *const *lists, const int *fs,
		      int nf, const char *const *paths)
{
	int j, k, len = cJSON_GetArraySize(lists[0]);
	char sub[300];

	for (j = 1; j < nf; j++) {
		int lj = cJSON_GetArraySize(lists[j]);

		if (lj != len)
			return fail(c, paths[j],
				    "%d values, but %s has %d (zipped lists have "
				    "equal lengths)",
				    lj, paths[0], len);
	}
	if (len > MAX_LIST)
		return fail(c, paths[0], "%d values; at most %d", len, MAX_LIST);
	g->nf = nf;
	g->len = len;
	g->vals = malloc((size_t)len * (size_t)nf * sizeof(*g->vals));
	if (!g->vals)
		return fail(c, paths[0], "out of memory");
	for (j = 0; j < nf; j++) {
		const cJSON *v;

		g->fields[j] = fs[j];
		k = 0;
		for (v = lists[j]->child; v; v = v->next, k++) {
			join_index(sub, sizeof(sub), paths[j], k);
			if (field_value(c, fs[j], v, sub, &g->vals[(size_t)k * nf + j]))
				return -1;
		}
	}
	return 0;
}

/* An object of layout fields: "fixed" (grid 0) gives each one value, "grid" (grid 1) a list
 * of values, a group of its own. */
static int parse_fields(struct ctx *c, const cJSON *obj, const char *jpath, struct spec_part *p,
			int grid)
{
	const cJSON *k;
	char sub[256];

	if (want_object(c, obj, jpath))
		return -1;
	for (k = obj->child; k; k = k->next) {
		struct spec_group *g;
		const char *paths[1] = {sub};
		int f;

		if ((f = member_field(c, obj, k, jpath, sub, sizeof(sub))) < 0)
			return -1;
		if (!grid) {
			if (field_value(c, f, k, sub, &p->fixed[f]))
				return -1;
			p->has_fixed[f] = 1;
		} else if (want_array(c, k, sub, 1) || !(g = add_group(c, p, sub)) ||
			   fill_group(c, g, &k, &f, 1, paths)) {
			return -1;
		}
	}
	return 0;
}

static int parse_fixed(struct ctx *c, const cJSON *obj, const char *jpath, struct spec_part *p)
{
	return parse_fields(c, obj, jpath, p, 0);
}

static int parse_grid(struct ctx *c, const cJSON *obj, const char *jpath, struct spec_part *p)
{
	return parse_fields(c, obj, jpath, p, 1);
}

static int parse_zip(struct ctx *c, const cJSON *arr, const char *jpath, struct spec_part *p)
{
	const cJSON *o;
	int i = 0;

	if (want_array(c, arr, jpath, 0))
		return -1;
	for (o = arr->child; o; o = o->next, i++) {
		const cJSON *lists[SF_NFIELDS], *k;
		char opath[128], paths[SF_NFIELDS][256];
		const char *pp[SF_NFIELDS];
		int fs[SF_NFIELDS], nf = 0;
		struct spec_group *g;

		join_index(opath, sizeof(opath), jpath, i);
		if (want_object(c, o, opath))
			return -1;
		if (!o->child)
			return fail(c, opath, "expected an object of lists, got {}");
		for (k = o->child; k; k = k->next) {
			int f = member_field(c, o, k, opath, paths[nf], sizeof(paths[nf]));

			if (f < 0 || want_array(c, k, paths[nf], 1))
				return -1;
			lists[nf] = k;
			fs[nf] = f;
			pp[nf] = paths[nf];
			nf++;
		}
		g = add_group(c, p, opath);
		if (!g)
			return -1;
		if (fill_group(c, g, lists, fs, nf, pp))
			return -1;
	}
	return 0;
}

static int parse_where(struct ctx *c, const cJSON *v, const char *jpath, struct spec_part *p)
{
	const char *names[SV_NVARS];
	struct expr_vars vars = {names, SV_NVARS, where_enum_value};
	const char *src = NULL;
	char msg[256];

	var_names(names);
	if (get_string(c, v, jpath, &src))
		return -1;
	join(p->where_path, sizeof(p->where_path), "", jpath);
	if (expr_compile(src, &vars, &p->where, msg, sizeof(msg)))
		return fail(c, jpath, "%s", msg);
	return 0;
}

/* Where each field is set within one part: 0 nowhere, 1 fixed, 2 a group. */
static int part_fields(struct ctx *c, const struct spec_part *p, const char *base,
		       unsigned char *where)
{
	int f, g, j;

	for (f = 0; f < SF_NFIELDS; f++)
		where[f] = p->has_fixed[f] ? 1 : 0;
	for (g = 0; g < p->ngroups; g++)
		for (j = 0; j < p->groups[g].nf; j++) {
			f = p->groups[g].fields[j];
			if (where[f])
				return fail(c, p->groups[g].path, "'%s' is also given in %s%s%s",
					    field_name(f), base, *base ? "." : "",
					    where[f] == 1 ? "fixed" : "another grid/zip entry");
			where[f] = 2;
		}
	return 0;
}

static int kernel_conflict(struct ctx *c, const unsigned char *set, const char *jpath)
{
	if (set[SF_KERNEL] && (set[SF_ATTENTION] || set[SF_NORM]))
		return fail(c, jpath, "'kernel' sets attention and norm; do not also give '%s'",
			    set[SF_ATTENTION] ? "attention" : "norm");
	return 0;
}

static const char *const part_keys[] = {"fixed", "grid", "zip", "where", NULL};

/* The reader of each of part_keys, in its order. */
typedef int part_reader(struct ctx *c, const cJSON *v, const char *jpath, struct spec_part *p);
static part_reader *const part_readers[] = {parse_fixed, parse_grid, parse_zip, parse_where};
_Static_assert(sizeof(part_readers) / sizeof(part_readers[0]) + 1 ==
		   sizeof(part_keys) / sizeof(part_keys[0]),
	       "a reader for each of part_keys");

static int parse_part_keys(struct ctx *c, const cJSON *obj, const char *base, struct spec_part *p)
{
	const cJSON *v;
	char sub[256];

	for (int k = 0; part_keys[k]; k++) {
		if (!(v = cJSON_GetObjectItemCaseSensitive(obj, part_keys[k])))
			continue;
		join(sub, sizeof(sub), base, part_keys[k]);
		if (part_readers[k](c, v, sub, p))
			return -1;
	}
	return 0;
}

static int parse_union(struct ctx *c, const cJSON *arr)
{
	struct sweep_spec *s = c->spec;
	unsigned char top[SF_NFIELDS], mem[SF_NFIELDS], all[SF_NFIELDS];
	const cJSON *o;
	char opath[64];
	int i = 0, f;

	if (want_array(c, arr, "union", 1))
		return -1;
	if (part_fields(c, &s->top, "", top))
		return -1;
	s->members = calloc((size_t)cJSON_GetArraySize(arr), sizeof(*s->members));
	if (!s->members)
		return fail(c, "union", "out of memory");
	for (o = arr->child; o; o = o->next, i++) {
		struct spec_part *m = &s->members[i];

		s->nmembers = i + 1;
		join_index(opath, sizeof(opath), "union", i);
		if (want_object(c, o, opath) ||
		    check_keys(c, o, opath, part_keys,
			       "(a union member has fixed, grid, zip, where)"))
			return -1;
		if (parse_part_keys(c, o, opath, m))
			return -1;
		if (part_fields(c, m, opath, mem))
			return -1;
		for (f = 0; f < SF_NFIELDS; f++) {
			if (mem[f] && top[f] == 2)
				return fail(c, opath,
					    "'%s' is swept at the top level; a union member may "
					    "only override fixed values",
					    field_name(f));
			all[f] = mem[f] ? mem[f] : top[f];
		}
		if (kernel_conflict(c, all, opath))
			return -1;
	}
	return 0;
}

/* Time limit: minutes (a JSON integer or a string of digits), "H:MM:SS" or "D-HH:MM:SS".
 * Seconds round up to a whole minute. */
static int parse_time_limit(struct ctx *c, const cJSON *v, const char *jpath, int *minutes)
{
	long long m, d = 0, h, mi, sec;
	const char *s = NULL, *p;
	char got[64], *end;

	if (cJSON_IsNumber(v))
		return get_int(c, v, jpath, 1, 366LL * 24 * 60, "minutes (a positive integer)", &m)
			   ? -1
			   : (*minutes = (int)m, 0);
	if (get_string(c, v, jpath, &s))
		return -1;
	show(v, got, sizeof(got));
	p = s;
	if (*p >= '0' && *p <= '9' && !strpbrk(p, ":-")) {
		m = strtoll(p, &end, 10);
		if (*end || m < 1 || m > 366LL * 24 * 60)
			goto bad;
		*minutes = (int)m;
		return 0;
	}
	if (strchr(p, '-')) {
		if (!(*p >= '0' && *p <= '9'))
			goto bad;
		d = strtoll(p, &end, 10);
		if (*end != '-' || d < 0 || d > 365)
			goto bad;
		p = end + 1;
	}
	if (!(*p >= '0' && *p <= '9'))
		goto bad;
	h = strtoll(p, &end, 10);
	if (*end != ':' || h < 0 || h > (d ? 23 : 8784) || end - p > 4)
		goto bad;
	p = end + 1;
	if (!(p[0] >= '0' && p[0] <= '9' && p[1] >= '0' && p[1] <= '9' && p[2] == ':'))
		goto bad;
	mi = (p[0] - '0') * 10 + (p[1] - '0');
	p += 3;
	if (!(p[0] >= '0' && p[0] <= '9' && p[1] >= '0' && p[1] <= '9' && p[2] == '\0'))
		goto bad;
	sec = (p[0] - '0') * 10 + (p[1] - '0');
	if (mi > 59 || sec > 59)
		goto bad;
	m = ((d * 24 + h) * 60 + mi) + (sec ? 1 : 0);
	if (m < 1 || m > 366LL * 24 * 60)
		goto bad;
	*minutes = (int)m;
	return 0;
bad:
	return fail(c, jpath,
		    "expected minutes, \"HH:MM:SS\" or \"D-HH:MM:SS\" (at most 366 days), got %s",
		    got);
}

/* A string for a fixed-size field that must be a name. */
/* cluster.KEY, when given: a positive number (at most 1e6) of unit into *out. */
static int get_positive(struct ctx *c, const cJSON *obj, const char *key, const char *unit,
			double *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	char got[64], path[64];

	if (!v)
		return 0;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble <= 0 ||
	    v->valuedouble > 1e6) {
		show(v, got, sizeof(got));
		snprintf(path, sizeof(path), "cluster.%s", key);
		return fail(c, path, "expected a positive number of %s, got %s", unit, got);
	}
	*out = v->valuedouble;
	return 0;
}

/* A name the spec got wrong: what a name is (more: what else may be given), the limit. */
static int name_fail(struct ctx *c, const cJSON *v, const char *jpath, const char *more, size_t len)
{
	char got[64];

	show(v, got, sizeof(got));
	return fail(
	    c, jpath,
	    "expected a name of letters, digits, '_', '.' and '-'%s (at most %zu%s), got %s", more,
	    len - 1, *more ? " in all" : "", got);
}

static int get_name(struct ctx *c, const cJSON *v, const char *jpath, char *out, size_t len)
{
	const char *s = NULL;

	if (get_string(c, v, jpath, &s))
		return -1;
	if (!lb_name_ok(s, len))
		return name_fail(c, v, jpath, "", len);
	snprintf(out, len, "%s", s);
	return 0;
}

/* "--option" or "--option=value": option [a-z][a-z0-9-]*, value [A-Za-z0-9_.,:/@%+=-]*. */
static int sbatch_option_ok(const char *s)
{
	const char *p = s;

	if (strncmp(p, "--", 2))
		return 0;
	p += 2;
	if (!(*p >= 'a' && *p <= 'z'))
		return 0;
	while ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-')
		p++;
	if (!*p)
		return 1;
	if (*p != '=')
		return 0;
	for (p++; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("_.,:/@%+=-", *p)))
			return 0;
	return strlen(s) < 256;
}

static int env_name_ok(const char *s)
{
	const char *p = s;

	if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_'))
		return 0;
	for (p++; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_'))
			return 0;
	return p - s < 128;
}

static int push_str(struct ctx *c, char ***arr, int *n, const char *s, const char *jpath)
{
	char **a = realloc(*arr, (size_t)(*n + 1) * sizeof(*a));

	if (!a)
		return fail(c, jpath, "out of memory");
	*arr = a;
	a[*n] = strdup(s);
	if (!a[*n])
		return fail(c, jpath, "out of memory");
	(*n)++;
	return 0;
}

/* cluster.partition: a name, or several separated by ',' (Slurm tries them in turn);
 * each as get_name checks one, the whole list at most len - 1 characters. */
static int get_partitions(struct ctx *c, const cJSON *v, char *out, size_t len)
{
	const char *s = NULL, *p;
	char one[64];
	int ok;

	if (get_string(c, v, "cluster.partition", &s))
		return -1;
	ok = strlen(s) < len;
	for (p = s; ok; p += strcspn(p, ",") + 1) {
		size_t n = strcspn(p, ",");

		snprintf(one, sizeof(one), "%.*s", (int)(n < sizeof(one) ? n : 0), p);
		ok = n < sizeof(one) && lb_name_ok(one, sizeof(one));
		if (!p[n])
			break;
	}
	if (!ok)
		return name_fail(c, v, "cluster.partition", ", or several separated by ','", len);
	snprintf(out, len, "%s", s);
	return 0;
}

/* 1 if an sbatch option asks for GPUs: --gpus, --gpus-per-*, or --gres naming gpu. */
static int extra_requests_gpus(const char *opt)
{
	const char *p;

	if (!strcmp(opt, "--gpus") || !strncmp(opt, "--gpus=", 7) ||
	    !strncmp(opt, "--gpus-per-", 11))
		return 1;
	if (strncmp(opt, "--gres=", 7))
		return 0;
	for (p = opt + 7;; p++) {
		if (!strncmp(p, "gpu", 3) && (p[3] == '\0' || p[3] == ':' || p[3] == ','))
			return 1;
		if (!(p = strchr(p, ',')))
			return 0;
	}
}

/*
 * The job script already asks for cluster.gpus_per_node GPUs (#SBATCH --gpus-per-node, or
 * --gres with gpu_request); a second request in sbatch_extra makes sbatch refuse the job
 * (or take one of them), so it is an error here, with the gpu_request that says it.
 */
static int check_gpu_extra(struct ctx *c, const struct sweep_cluster *cl)
{
	char sub[64], fix[96];
	int gres = !strncmp(cl->gpu_request, "gres", 4);

	if (!strcmp(cl->device, "cpu"))
		return 0; /* no GPUs are requested for the CPU backend */
	for (int i = 0; i < cl->n_sbatch_extra; i++) {
		const char *o = cl->sbatch_extra[i];
		const char *t = !strncmp(o, "--gres=gpu:", 11) ? o + 11 : NULL;
		size_t n = t ? strcspn(t, ":,") : 0;

		if (!extra_requests_gpus(o))
			continue;
		/* "--gres=gpu:a100:8" names a type: suggest "gres:a100"; "--gres=gpu:8" none */
		if (t && t[n] == ':' && n > 0 && n < 48)
			snprintf(fix, sizeof(fix), "\"gpu_request\": \"gres:%.*s\"", (int)n, t);
		else
			snprintf(fix, sizeof(fix), "\"gpu_request\": \"gres\" (or \"gres:TYPE\")");
		snprintf(sub, sizeof(sub), "cluster.sbatch_extra[%d]", i);
		if (gres)
			return fail(c, sub,
				    "'%s' requests GPUs, and so does cluster.gpu_request '%s' "
				    "(#SBATCH --gres=gpu:...): Slurm rejects the job; drop it from "
				    "sbatch_extra",
				    o, cl->gpu_request);
		return fail(c, sub,
			    "'%s' requests GPUs beside the rendered #SBATCH --gpus-per-node, "
			    "which Slurm rejects: drop it from sbatch_extra and set %s in the "
			    "cluster",
			    o, fix);
	}
	return 0;
}

/* A check of string s, entry e of an array at jpath: 0, or -1 saying why not. */
typedef int string_check(struct ctx *c, const cJSON *e, const char *jpath, const char *s);

/* An array of strings at jpath, each one that check passes added to *list (*n of them). */
static int get_strings(struct ctx *c, const cJSON *v, const char *jpath, string_check *check,
		       char ***list, int *n)
{
	const cJSON *e;
	char sub[300];
	int i;

	if (want_array(c, v, jpath, 0))
		return -1;
	for (e = v->child, i = 0; e; e = e->next, i++) {
		const char *s = NULL;

		join_index(sub, sizeof(sub), jpath, i);
		if (get_string(c, e, sub, &s) || check(c, e, sub, s) ||
		    push_str(c, list, n, s, sub))
			return -1;
	}
	return 0;
}

static int check_sbatch_extra(struct ctx *c, const cJSON *e, const char *jpath, const char *s)
{
	char got[64];

	if (sbatch_option_ok(s))
		return 0;
	show(e, got, sizeof(got));
	return fail(c, jpath,
		    "%s is not an sbatch option of the form \"--option=value\" (option: a-z, 0-9, "
		    "'-'; value: letters, digits and _.,:/@%%+=-; no spaces, quotes or shell "
		    "characters)",
		    got);
}

static int check_setup(struct ctx *c, const cJSON *e, const char *jpath, const char *s)
{
	if (strpbrk(s, "\n\r") || strlen(s) > 4096)
		return fail(c, jpath, "one shell line per entry: no newlines (at most 4096 bytes)");
	return 0;
}

/* A string at jpath that ok accepts, into out; else "expected WANT, got ...". */
static int get_word(struct ctx *c, const cJSON *v, const char *jpath, int (*ok)(const char *s),
		    const char *want, char *out, size_t len)
{
	const char *s = NULL;
	char got[64];

	if (get_string(c, v, jpath, &s))
		return -1;
	if (!ok(s)) {
		show(v, got, sizeof(got));
		return fail(c, jpath, "expected %s, got %s", want, got);
	}
	snprintf(out, len, "%s", s);
	return 0;
}

static int device_ok(const char *s)
{
	return !strcmp(s, "cuda") || !strcmp(s, "cpu");
}

static int memory_model_ok(const char *s)
{
	return !strcmp(s, "trainer") || !strcmp(s, "paper");
}

static int gpu_request_ok(const char *s)
{
	return !strcmp(s, "gpus-per-node") || !strcmp(s, "gres") ||
	       (!strncmp(s, "gres:", 5) && lb_name_ok(s + 5, 48));
}

static int parse_cluster(struct ctx *c, const cJSON *obj)
{
	static const char *const keys[] = {
	    "partition",   "account", "qos",	       "time_limit",  "gpus_per_node",
	    "gpu_mem_gib", "gpu",     "cpus_per_task", "exclusive",   "sbatch_extra",
	    "env",	   "setup",   "device",	       "gpu_request", "memory_model",
	    "peak_tflops", NULL};
	struct sweep_cluster *cl = &c->spec->cluster;
	const cJSON *v, *e;
	char sub[300], got[64];
	long long x;

	if (want_object(c, obj, "cluster") || check_keys(c, obj, "cluster", keys, NULL))
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "partition")) &&
	    get_partitions(c, v, cl->partition, sizeof(cl->partition)))
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "account")) &&
	    get_name(c, v, "cluster.account", cl->account, sizeof(cl->account)))
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "qos")) &&
	    get_name(c, v, "cluster.qos", cl->qos, sizeof(cl->qos)))
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "time_limit")) &&
	    parse_time_limit(c, v, "cluster.time_limit", &cl->time_limit_min))
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "gpus_per_node"))) {
		if (get_int(c, v, "cluster.gpus_per_node", 1, 1024, "a positive integer", &x))
			return -1;
		cl->gpus_per_node = (int)x;
	}
	if (get_positive(c, obj, "gpu_mem_gib", "GiB", &cl->gpu_mem_gib) ||
	    get_positive(c, obj, "peak_tflops", "TFLOP/s", &cl->peak_tflops))
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "gpu"))) {
		const char *s = NULL, *p;

		if (get_string(c, v, "cluster.gpu", &s))
			return -1;
		for (p = s; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			      (*p >= '0' && *p <= '9') || strchr(" _.+-", *p)))
				break;
		if (!*s || *p || strlen(s) >= sizeof(cl->gpu)) {
			show(v, got, sizeof(got));
			return fail(c, "cluster.gpu",
				    "expected a product name of letters, digits, spaces and "
				    "'_.+-' (at most %zu), got %s",
				    sizeof(cl->gpu) - 1, got);
		}
		snprintf(cl->gpu, sizeof(cl->gpu), "%s", s);
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "cpus_per_task"))) {
		if (get_int(c, v, "cluster.cpus_per_task", 0, 4096, "a non-negative integer", &x))
			return -1;
		cl->cpus_per_task = (int)x;
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "exclusive"))) {
		if (!cJSON_IsBool(v)) {
			show(v, got, sizeof(got));
			return fail(c, "cluster.exclusive", "expected true or false, got %s", got);
		}
		cl->exclusive = cJSON_IsTrue(v);
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "sbatch_extra")) &&
	    get_strings(c, v, "cluster.sbatch_extra", check_sbatch_extra, &cl->sbatch_extra,
			&cl->n_sbatch_extra))
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "env"))) {
		if (want_object(c, v, "cluster.env"))
			return -1;
		for (e = v->child; e; e = e->next) {
			const cJSON *k2;
			const char *s = NULL;
			char *pair;
			size_t n;

			join(sub, sizeof(sub), "cluster.env", e->string);
			if (!env_name_ok(e->string)) {
				snprintf(sub, sizeof(sub), "cluster.env");
				return fail(
				    c, sub,
				    "'%.60s' is not a variable name ([A-Za-z_][A-Za-z0-9_]*)",
				    e->string);
			}
			for (k2 = v->child; k2 != e; k2 = k2->next)
				if (!strcmp(k2->string, e->string))
					return fail(c, sub, "key '%s' appears twice", e->string);
			if (get_string(c, e, sub, &s))
				return -1;
			if (strpbrk(s, "\n\r") || strlen(s) > 4096)
				return fail(c, sub,
					    "a value may not contain newlines (at most "
					    "4096 bytes)");
			n = strlen(e->string) + strlen(s) + 2;
			pair = malloc(n);
			if (!pair)
				return fail(c, sub, "out of memory");
			snprintf(pair, n, "%s=%s", e->string, s);
			if (push_str(c, &cl->env, &cl->n_env, pair, sub)) {
				free(pair);
				return -1;
			}
			free(pair);
		}
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "setup")) &&
	    get_strings(c, v, "cluster.setup", check_setup, &cl->setup, &cl->n_setup))
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "device")) &&
	    get_word(c, v, "cluster.device", device_ok, "\"cuda\" or \"cpu\"", cl->device,
		     sizeof(cl->device)))
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "memory_model"))) {
		char mm[16];

		if (get_word(c, v, "cluster.memory_model", memory_model_ok,
			     "\"trainer\" (what layoutbench-train allocates) or \"paper\" (the "
			     "paper's stack)",
			     mm, sizeof(mm)))
			return -1;
		cl->memory_paper = !strcmp(mm, "paper");
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "gpu_request")) &&
	    get_word(c, v, "cluster.gpu_request", gpu_request_ok,
		     "\"gpus-per-node\", \"gres\" or \"gres:TYPE\" (TYPE: letters, digits, '_', "
		     "'.' and '-', e.g. \"gres:a100\")",
		     cl->gpu_request, sizeof(cl->gpu_request)))
		return -1;
	return check_gpu_extra(c, cl);
}

/* run.KEY, an optimizer setting, when given: a number from 0 to 1e6 into *out, and its
 * bit into the spec's optim.given. */
static int get_optim(struct ctx *c, const cJSON *obj, const char *key, const char *want,
		     unsigned bit, double *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	char got[64], path[64];

	if (!v)
		return 0;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 ||
	    v->valuedouble > 1e6) {
		show(v, got, sizeof(got));
		snprintf(path, sizeof(path), "run.%s", key);
		return fail(c, path, "expected %s, at most 1e+06, got %s", want, got);
	}
	*out = v->valuedouble;
	c->spec->optim.given |= bit;
	return 0;
}

static int parse_run(struct ctx *c, const cJSON *obj)
{
	static const char *const keys[] = {"steps",	   "warmup", "seed", "lr",
					   "weight_decay", "clip",   NULL};
	struct sweep_spec *s = c->spec;
	struct sweep_optim *o = &s->optim;
	const cJSON *v;
	long long x;

	if (want_object(c, obj, "run") || check_keys(c, obj, "run", keys, NULL) ||
	    get_optim(c, obj, "lr", "a learning rate >= 0 (e.g. 1e-4)", SWEEP_OPTIM_LR, &o->lr) ||
	    get_optim(c, obj, "weight_decay", "a weight decay >= 0 (the trainer's default is 0.1)",
		      SWEEP_OPTIM_WD, &o->weight_decay) ||
	    get_optim(c, obj, "clip", "a gradient-norm clip >= 0 (0 turns it off)",
		      SWEEP_OPTIM_CLIP, &o->clip))
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "steps"))) {
		if (get_int(c, v, "run.steps", 1, 1000000000, "a positive integer", &x))
			return -1;
		s->steps = (int)x;
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "warmup"))) {
		if (get_int(c, v, "run.warmup", 0, 1000000000, "a non-negative integer", &x))
			return -1;
		s->warmup = (int)x;
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(obj, "seed"))) {
		if (get_int(c, v, "run.seed", 0, 9007199254740992LL,
			    "a non-negative integer (at most 2^53)", &x))
			return -1;
		s->seed = (unsigned long long)x;
	}
	return 0;
}

static int parse_models(struct ctx *c, const cJSON *root)
{
	struct sweep_spec *s = c->spec;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
	const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "models");
	const cJSON *ov = cJSON_GetObjectItemCaseSensitive(root, "model_overrides");
	const cJSON *list[1], *v;
	const cJSON *const *items;
	int n, i;
	char sub[128], got[64];

	if (m && ms)
		return fail(c, "models", "give 'model' or 'models', not both");
	if (!m && !ms)
		return fail(c, NULL, "missing 'model' (a preset name such as \"llama-13b\")");
	if (m) {
		list[0] = m;
		items = list;
		n = 1;
	} else {
		if (want_array(c, ms, "models", 1))
			return -1;
		n = cJSON_GetArraySize(ms);
		if (n > 1000)
			return fail(c, "models", "%d models; at most 1000", n);
		items = NULL;
	}
	s->models = calloc((size_t)n, sizeof(*s->models));
	s->model_index = calloc((size_t)n, sizeof(*s->model_index));
	if (!s->models || !s->model_index)
		return fail(c, "models", "out of memory");
	v = m ? m : ms->child;
	for (i = 0; i < n; i++, v = m ? NULL : v->next) {
		const char *name = NULL;
		const char *const *names = lb_model_preset_names();
		int k;

		if (m)
			snprintf(sub, sizeof(sub), "model");
		else
			join_index(sub, sizeof(sub), "models", i);
		if (get_string(c, items ? items[0] : v, sub, &name))
			return -1;
		if (lb_model_preset(name, &s->models[i])) {
			char known[512];
			size_t used = 0;

			known[0] = '\0';
			for (k = 0; names[k] && used < sizeof(known); k++)
				used += (size_t)snprintf(known + used, sizeof(known) - used, "%s%s",
							 k ? ", " : "", names[k]);
			show(items ? items[0] : v, got, sizeof(got));
			return fail(c, sub, "unknown model preset %s (known: %s)", got, known);
		}
		for (k = 0; names[k]; k++)
			if (!strcmp(names[k], name))
				s->model_index[i] = k;
		for (k = 0; k < i; k++)
			if (s->model_index[k] == s->model_index[i])
				return fail(c, sub, "model '%s' is listed twice", name);
		s->nmodels = i + 1;
	}
	if (ov) {
		const char *keys[LB_NFIELDS + 1];
		char hint[256] = "(model fields:";
		const cJSON *k;
		int nk = 0;

		for (int f = 0; f < LB_NFIELDS; f++) /* the model's shape: not its name */
			if (lb_fields[f].in_model && lb_fields[f].kind != LB_FK_NAME) {
				snprintf(hint + strlen(hint), sizeof(hint) - strlen(hint), "%s %s",
					 nk ? "," : "", lb_fields[f].key);
				keys[nk++] = lb_fields[f].key;
			}
		keys[nk] = NULL;
		snprintf(hint + strlen(hint), sizeof(hint) - strlen(hint), ")");
		if (want_object(c, ov, "model_overrides") ||
		    check_keys(c, ov, "model_overrides", keys, hint))
			return -1;
		for (k = ov->child; k; k = k->next) {
			int f = find_field(k->string);
			long long x;

			join(sub, sizeof(sub), "model_overrides", k->string);
			if (field_value(c, f, k, sub, &x))
				return -1;
			for (i = 0; i < s->nmodels; i++) {
				struct lb_layout l;
				int mha = s->models[i].n_kv_heads == s->models[i].n_heads;

				l.model = s->models[i];
				lb_field_set(&l, f, x);
				/* without grouped-query attention, kv heads follow */
				if (f == SF_HEADS && mha &&
				    !cJSON_GetObjectItemCaseSensitive(ov, "kv_heads"))
					l.model.n_kv_heads = (int)x;
				s->models[i] = l.model;
			}
		}
	}
	return 0;
}

/* An escaped NUL (\u0000) would silently cut a cJSON string short. */
/* The first byte after a parsed value that is not white space, or NULL: text after the
 * spec's object is an error, not ignored (two objects, a stray word). */
static const char *json_rest(const char *p, const char *end)
{
	while (p && p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p && p < end ? p : NULL;
}

/* The deepest nesting of arrays and objects in text[0..n), strings skipped: to tell a
 * parse that stopped at cJSON's nesting limit from a syntax error. */
static int json_depth(const char *text, size_t n)
{
	int depth = 0, most = 0, in_str = 0;

	for (size_t i = 0; i < n; i++) {
		char ch = text[i];

		if (in_str) {
			if (ch == '\\')
				i++;
			else if (ch == '"')
				in_str = 0;
		} else if (ch == '"') {
			in_str = 1;
		} else if (ch == '[' || ch == '{') {
			if (++depth > most)
				most = depth;
		} else if (ch == ']' || ch == '}') {
			depth--;
		}
	}
	return most;
}

static int has_nul_escape(const char *text, size_t len)
{
	size_t i, k;

	for (i = 0; i + 6 <= len; i++) {
		if (text[i] != '\\' || (text[i + 1] != 'u' && text[i + 1] != 'U') ||
		    strncmp(text + i + 2, "0000", 4))
			continue;
		for (k = 0; k < i && text[i - 1 - k] == '\\'; k++)
			;
		if (k % 2 == 0)
			return 1;
	}
	return 0;
}

int spec_parse(const char *path, const char *text, size_t len, struct sweep_spec *out, char *err,
	       size_t errlen)
{
	static const char *const keys[] = {
	    "name", "description", "model", "models", "model_overrides",   "fixed",   "grid",
	    "zip",  "union",	   "where", "run",    "step_time_guess_s", "cluster", NULL};
	struct ctx c = {path ? path : "-", err, errlen, out};
	const cJSON *v;
	cJSON *root;
	const char *end = NULL;
	unsigned char set[SF_NFIELDS];

	memset(out, 0, sizeof(*out));
	snprintf(out->path, sizeof(out->path), "%s", c.path);
	out->steps = -1;
	out->warmup = -1;
	out->seed = 1;
	snprintf(out->cluster.device, sizeof(out->cluster.device), "cuda");
	out->cluster.gpus_per_node = 8;
	if (!text) {
		fail(&c, NULL, "no text");
		return -1;
	}
	if (memchr(text, '\0', len)) {
		fail(&c, NULL, "contains a NUL byte");
		return -1;
	}
	if (has_nul_escape(text, len)) {
		fail(&c, NULL, "contains \\u0000 in a string; NUL characters are not allowed");
		return -1;
	}
	root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (!root || json_rest(end, text + len)) {
		const char *at = root ? json_rest(end, text + len) : cJSON_GetErrorPtr();
		size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : 0;
		size_t line = 1, col = 1, i;
		int deep = !root && json_depth(text, off) >= CJSON_NESTING_LIMIT;

		for (i = 0; i < off; i++) {
			if (text[i] == '\n') {
				line++;
				col = 1;
			} else {
				col++;
			}
		}
		if (root)
			fail(&c, NULL,
			     "line %zu, column %zu: text after the spec's closing '}' (a spec is "
			     "one JSON object)",
			     line, col);
		else if (deep)
			fail(&c, NULL,
			     "line %zu, column %zu: JSON nested deeper than %d levels, the "
			     "reader's limit",
			     line, col, CJSON_NESTING_LIMIT);
		else
			fail(&c, NULL, "line %zu, column %zu: not valid JSON", line, col);
		cJSON_Delete(root);
		return -1;
	}
	if (want_object(&c, root, "(top level)") ||
	    check_keys(&c, root, "", keys,
		       "(keys: name, description, model, models, model_overrides, fixed, grid, "
		       "zip, union, where, run, step_time_guess_s, cluster)"))
		goto out_free;
	if (!(v = cJSON_GetObjectItemCaseSensitive(root, "name"))) {
		fail(&c, NULL,
		     "missing 'name' (1 to 63 letters, digits, '.', '_' or '-', starting with a "
		     "letter or a digit)");
		goto out_free;
	}
	if (cJSON_IsString(v)) { /* the one rule for sweep names (common/util.h) */
		char nerr[256];

		if (lb_sweep_name_check(v->valuestring, nerr, sizeof(nerr))) {
			fail(&c, "name", "%s", nerr);
			goto out_free;
		}
	}
	if (get_name(&c, v, "name", out->name, sizeof(out->name)))
		goto out_free;
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "description"))) {
		const char *s = NULL;

		if (get_string(&c, v, "description", &s))
			goto out_free;
		snprintf(out->description, sizeof(out->description), "%s", s);
	}
	if (parse_models(&c, root))
		goto out_free;
	if (parse_part_keys(&c, root, "", &out->top))
		goto out_free;
	if (part_fields(&c, &out->top, "", set) || kernel_conflict(&c, set, "grid"))
		goto out_free;
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "union")) && parse_union(&c, v))
		goto out_free;
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "run")) && parse_run(&c, v))
		goto out_free;
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "step_time_guess_s"))) {
		if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble <= 0 ||
		    v->valuedouble > 1e7) {
			char got[64];

			show(v, got, sizeof(got));
			fail(&c, "step_time_guess_s",
			     "expected a positive number of seconds, got %s", got);
			goto out_free;
		}
		out->step_time_guess_s = v->valuedouble;
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "cluster")) && parse_cluster(&c, v))
		goto out_free;
	cJSON_Delete(root);
	return 0;
out_free:
	cJSON_Delete(root);
	spec_free(out);
	return -1;
}

void spec_cluster_release(struct sweep_cluster *cl)
{
	int i;

	for (i = 0; i < cl->n_sbatch_extra; i++)
		free(cl->sbatch_extra[i]);
	free(cl->sbatch_extra);
	for (i = 0; i < cl->n_env; i++)
		free(cl->env[i]);
	free(cl->env);
	for (i = 0; i < cl->n_setup; i++)
		free(cl->setup[i]);
	free(cl->setup);
	cl->sbatch_extra = cl->env = cl->setup = NULL;
	cl->n_sbatch_extra = cl->n_env = cl->n_setup = 0;
}

static void part_release(struct spec_part *p)
{
	int g;

	for (g = 0; g < p->ngroups; g++)
		free(p->groups[g].vals);
	free(p->groups);
	expr_free(p->where);
	p->groups = NULL;
	p->ngroups = 0;
	p->where = NULL;
}

void spec_free(struct sweep_spec *s)
{
	int i;

	if (!s)
		return;
	free(s->models);
	free(s->model_index);
	part_release(&s->top);
	for (i = 0; i < s->nmembers; i++)
		part_release(&s->members[i]);
	free(s->members);
	free(s->kernels);
	free(s->splits);
	spec_cluster_release(&s->cluster);
	s->models = NULL;
	s->model_index = NULL;
	s->members = NULL;
	s->kernels = NULL;
	s->splits = NULL;
	s->nsplits = 0;
	s->nmodels = s->nmembers = s->nkernels = 0;
}
