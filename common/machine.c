/*
 * Machine files (common/machine.h): the JSON reader (cJSON) that applies a file onto a
 * machine, the loader of shipped and local files with their bases, the writer, and the
 * readers of bench_kernels' CSV and bench_colls' tables.
 *
 * Why one file: it is one format, read from three sources and written back: a key's reader
 * and writer stay beside each other.
 */
#include "common/machine.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/embed.h"
#include "common/model.h"
#include "common/util.h"

static const char *const shipped[] = {"a100-nominal", "a100-paper",   "h100-nominal",
				      "h200",	      "h200-kernels", NULL};

const char *const *lb_machine_shipped(void)
{
	return shipped;
}

/* GPU product names (lower case, '-' and '_' as ' ') to the shipped machine for them, most
 * specific first; variants whose rates differ from the family's have none. */
static const struct {
	const char *pattern;
	const char *machine;
} for_gpu[] = {
    {"h200 nvl", NULL}, {"h200", "h200"},	  {"gh200", NULL},
    {"h100 nvl", NULL}, {"h100 pcie", NULL}, {"h100", "h100-nominal"},
    {"a100", "a100-paper"},
};

const char *lb_machine_for_gpu(const char *gpu)
{
	char norm[128];

	if (!gpu || !*gpu)
		return NULL;
	lb_gpu_name_norm(gpu, norm, sizeof(norm));
	for (size_t i = 0; i < sizeof(for_gpu) / sizeof(for_gpu[0]); i++)
		if (strstr(norm, for_gpu[i].pattern))
			return for_gpu[i].machine;
	return NULL;
}

/* ------------------------------------------------------------------ reading */

struct rd {
	const char *path;
	char *err;
	size_t errlen;
};

static int fail(struct rd *r, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct rd *r, const char *where, const char *fmt, ...)
{
	va_list ap;
	size_t n = (size_t)snprintf(r->err, r->errlen, "%s: %s: ", r->path, where);

	va_start(ap, fmt);
	if (n < r->errlen)
		vsnprintf(r->err + n, r->errlen - n, fmt, ap);
	va_end(ap);
	return -1;
}

/* Every key of object o is one of the NULL-terminated names. */
static int known_keys(struct rd *r, const cJSON *o, const char *where, const char *const *names)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, o)
	{
		int ok = 0;

		for (const char *const *n = names; *n; n++)
			if (it->string && !strcmp(it->string, *n))
				ok = 1;
		if (!ok) {
			char list[512];
			size_t k = 0;

			list[0] = '\0';
			for (const char *const *n = names; *n && k < sizeof(list); n++)
				k += (size_t)snprintf(list + k, sizeof(list) - k, "%s%s",
						      n == names ? "" : ", ", *n);
			return fail(r, where, "unknown key '%s' (known: %s)",
				    it->string ? it->string : "?", list);
		}
	}
	return 0;
}

static int get_num(struct rd *r, const cJSON *o, const char *key, const char *where, double lo,
		   double hi, double *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	char w[160];

	if (!v)
		return 0;
	snprintf(w, sizeof(w), "%s%s%s", where, *where ? "." : "", key);
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return fail(r, w, "expected a number");
	if (v->valuedouble < lo || v->valuedouble > hi)
		return fail(r, w, "%g is outside [%g, %g]", v->valuedouble, lo, hi);
	*out = v->valuedouble;
	return 0;
}

static int get_str(struct rd *r, const cJSON *o, const char *key, char *dst, size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!v)
		return 0;
	if (!cJSON_IsString(v))
		return fail(r, key, "expected a string");
	if (strlen(v->valuestring) >= len)
		return fail(r, key, "longer than %zu bytes", len - 1);
	snprintf(dst, len, "%s", v->valuestring);
	return 0;
}

/* A number in an array row. */
static int row_num(struct rd *r, const cJSON *row, int i, const char *where, double lo, double hi,
		   double *out)
{
	const cJSON *v = cJSON_GetArrayItem(row, i);

	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return fail(r, where, "entry %d: expected a number", i + 1);
	if (v->valuedouble < lo || v->valuedouble > hi)
		return fail(r, where, "entry %d: %g is outside [%g, %g]", i + 1, v->valuedouble, lo,
			    hi);
	*out = v->valuedouble;
	return 0;
}

static int cmp_mem(const void *a, const void *b)
{
	const struct lb_mem_row *x = a, *y = b;

	if (x->kernel != y->kernel)
		return (int)x->kernel - (int)y->kernel;
	return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

/* Sort a kernel's rows by sequence (insertion: at most LB_ATTN_ROWS_MAX). */
static void sort_seq(double *seq, double *tf, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && seq[j] < seq[j - 1]; j--) {
			double a = seq[j], b = tf[j];

			seq[j] = seq[j - 1], tf[j] = tf[j - 1];
			seq[j - 1] = a, tf[j - 1] = b;
		}
}

/* A table of measured rows (gemm.rows, membound.rows): each row [name, numbers...], the
 * name one that parse knows, each number in its range; store puts row i into m, load
 * takes it out (its name returned, its numbers in num). */
struct row_table {
	const char *where;		/* "gemm.rows" */
	const char *shape;		/* "[op, m, n, k, tflops]" */
	int n_num;			/* numbers after the name */
	double lo[4], hi[4];		/* their ranges, in the shape's order */
	int (*parse)(const char *name); /* the name's index, or -1 */
	const char *unknown;		/* the message for a name parse refuses */
	int max;			/* rows at the most */
	void (*store)(struct lb_machine *m, int i, int name, const double *num);
	const char *(*load)(const struct lb_machine *m, int i, double *num);
};

static void store_gemm(struct lb_machine *m, int i, int op, const double *v)
{
	m->gemm[i] = (struct lb_gemm_row){(enum lb_gemm_op)op, v[0], v[1], v[2], v[3]};
}

static const char *load_gemm(const struct lb_machine *m, int i, double *v)
{
	const struct lb_gemm_row *g = &m->gemm[i];

	v[0] = g->m, v[1] = g->n, v[2] = g->k, v[3] = g->tflops;
	return lb_gemm_op_name(g->op);
}

static void store_mem(struct lb_machine *m, int i, int kernel, const double *v)
{
	m->mem[i] = (struct lb_mem_row){(enum lb_memk)kernel, v[0], v[1]};
}

static const char *load_mem(const struct lb_machine *m, int i, double *v)
{
	v[0] = m->mem[i].bytes, v[1] = m->mem[i].gbps;
	return lb_memk_name(m->mem[i].kernel);
}

static const struct row_table gemm_rows = {
    .where = "gemm.rows",
    .shape = "[op, m, n, k, tflops]",
    .n_num = 4,
    .lo = {1, 1, 1, 1e-3},
    .hi = {1e9, 1e9, 1e9, 1e6},
    .parse = lb_gemm_op_parse,
    .unknown = "op: expected fwd, dgrad or wgrad",
    .max = LB_MACHINE_GEMM_MAX,
    .store = store_gemm,
    .load = load_gemm,
};
static const struct row_table mem_rows = {
    .where = "membound.rows",
    .shape = "[kernel, bytes, gbps]",
    .n_num = 2,
    .lo = {1, 1e-3},
    .hi = {1e15, 1e6},
    .parse = lb_memk_parse,
    .unknown = "unknown kernel (bench_kernels' names: rmsnorm.fused.fwd, ...)",
    .max = LB_MACHINE_MEM_MAX,
    .store = store_mem,
    .load = load_mem,
};

/* o's "rows" as table t says, replacing m's rows (their count in *n); absent, m's stay. */
static int read_rows(struct rd *r, const cJSON *o, const struct row_table *t, struct lb_machine *m,
		     int *n)
{
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(o, "rows"), *row;

	if (!rows)
		return 0;
	if (!cJSON_IsArray(rows))
		return fail(r, t->where, "expected an array of %s", t->shape);
	if (cJSON_GetArraySize(rows) > t->max)
		return fail(r, t->where, "more than %d rows", t->max);
	*n = 0;
	cJSON_ArrayForEach(row, rows)
	{
		const cJSON *first = cJSON_GetArrayItem(row, 0);
		double num[4];
		char w[48];
		int name;

		snprintf(w, sizeof(w), "%s[%d]", t->where, *n);
		if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != t->n_num + 1)
			return fail(r, w, "expected %s", t->shape);
		name = cJSON_IsString(first) ? t->parse(first->valuestring) : -1;
		if (name < 0)
			return fail(r, w, "%s", t->unknown);
		for (int j = 0; j < t->n_num; j++)
			if (row_num(r, row, j + 1, w, t->lo[j], t->hi[j], &num[j]))
				return -1;
		t->store(m, (*n)++, name, num);
	}
	return 0;
}

static int read_gemm(struct rd *r, const cJSON *g, struct lb_machine *m)
{
	static const char *const keys[] = {"efficiency", "half_dim", "rows", NULL};

	if (!cJSON_IsObject(g))
		return fail(r, "gemm", "expected an object");
	if (known_keys(r, g, "gemm", keys) ||
	    get_num(r, g, "efficiency", "gemm", 1e-3, 1.0, &m->gemm_efficiency) ||
	    get_num(r, g, "half_dim", "gemm", 0.0, 1e6, &m->gemm_half_dim))
		return -1;
	return read_rows(r, g, &gemm_rows, m, &m->n_gemm);
}

static int read_rates(struct rd *r, const cJSON *a, const char *w, double *seq, double *tf,
		      int *n)
{
	const cJSON *row;
	int i = 0;

	if (!cJSON_IsArray(a))
		return fail(r, w, "expected an array of [seq, tflops]");
	if (cJSON_GetArraySize(a) > LB_ATTN_ROWS_MAX)
		return fail(r, w, "more than %d rows", LB_ATTN_ROWS_MAX);
	*n = 0;
	cJSON_ArrayForEach(row, a)
	{
		char ww[96];

		snprintf(ww, sizeof(ww), "%s[%d]", w, i++);
		if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != 2)
			return fail(r, ww, "expected [seq, tflops]");
		if (row_num(r, row, 0, ww, 1, 1e8, &seq[*n]) ||
		    row_num(r, row, 1, ww, 1e-3, 1e6, &tf[*n]))
			return -1;
		for (int j = 0; j < *n; j++)
			if (seq[j] == seq[*n])
				return fail(r, ww, "sequence %g given twice", seq[*n]);
		(*n)++;
	}
	sort_seq(seq, tf, *n);
	return 0;
}

static int read_attention(struct rd *r, const cJSON *a, struct lb_machine *m, int calibration)
{
	static const char *const keys[] = {"kernels", "variants", NULL};
	static const char *const kkeys[] = {"fwd", "bwd", "scale", NULL};
	const cJSON *ks, *k, *vs, *v;

	if (!cJSON_IsObject(a))
		return fail(r, "attention", "expected an object");
	if (known_keys(r, a, "attention", keys))
		return -1;
	ks = cJSON_GetObjectItemCaseSensitive(a, "kernels");
	if (ks && !cJSON_IsObject(ks))
		return fail(r, "attention.kernels", "expected an object of kernels");
	cJSON_ArrayForEach(k, ks)
	{
		struct lb_attn_kernel *ak = lb_machine_attn_mut(m, k->string);
		const cJSON *f, *b;
		char w[96];

		snprintf(w, sizeof(w), "attention.kernels.%s", k->string);
		if (!cJSON_IsObject(k))
			return fail(r, w, "expected an object");
		if (strlen(k->string) >= sizeof(ak->name) || !*k->string)
			return fail(r, w, "a kernel name of 1 to %zu bytes", sizeof(ak->name) - 1);
		if (known_keys(r, k, w, kkeys))
			return -1;
		if (!ak) {
			if (m->n_attn == LB_MACHINE_ATTN_MAX)
				return fail(r, w, "more than %d kernels", LB_MACHINE_ATTN_MAX);
			ak = &m->attn[m->n_attn++];
			memset(ak, 0, sizeof(*ak));
			snprintf(ak->name, sizeof(ak->name), "%s", k->string);
			ak->scale = 1.0;
		}
		f = cJSON_GetObjectItemCaseSensitive(k, "fwd");
		b = cJSON_GetObjectItemCaseSensitive(k, "bwd");
		if (f) {
			char ww[128];

			snprintf(ww, sizeof(ww), "%s.fwd", w);
			if (read_rates(r, f, ww, ak->fwd_seq, ak->fwd_tflops, &ak->n_fwd))
				return -1;
		}
		if (b) {
			char ww[128];

			snprintf(ww, sizeof(ww), "%s.bwd", w);
			if (read_rates(r, b, ww, ak->bwd_seq, ak->bwd_tflops, &ak->n_bwd))
				return -1;
		}
		if (cJSON_GetObjectItemCaseSensitive(k, "scale")) {
			if (get_num(r, k, "scale", w, LB_ATTN_SCALE_MIN, LB_ATTN_SCALE_MAX,
				    &ak->scale))
				return -1;
			ak->fitted = calibration;
		}
	}
	vs = cJSON_GetObjectItemCaseSensitive(a, "variants");
	if (vs && !cJSON_IsObject(vs))
		return fail(r, "attention.variants", "expected an object label: kernel");
	cJSON_ArrayForEach(v, vs)
	{
		struct lb_attn_variant *av = NULL;
		char w[96];

		snprintf(w, sizeof(w), "attention.variants.%s", v->string);
		if (!cJSON_IsString(v) || strlen(v->valuestring) >= sizeof(av->kernel))
			return fail(r, w, "expected a kernel name");
		if (strlen(v->string) >= sizeof(av->label))
			return fail(r, w, "label longer than %zu bytes", sizeof(av->label) - 1);
		for (int i = 0; i < m->n_variants; i++)
			if (!strcmp(m->variants[i].label, v->string))
				av = &m->variants[i];
		if (!av) {
			if (m->n_variants == LB_MACHINE_VARIANT_MAX)
				return fail(r, w, "more than %d variants", LB_MACHINE_VARIANT_MAX);
			av = &m->variants[m->n_variants++];
		}
		snprintf(av->label, sizeof(av->label), "%s", v->string);
		snprintf(av->kernel, sizeof(av->kernel), "%s", v->valuestring);
	}
	return 0;
}

static int read_membound(struct rd *r, const cJSON *o, struct lb_machine *m)
{
	static const char *const keys[] = {"copy_gbps", "efficiency", "kernel_efficiency", "rows",
					   NULL};
	const cJSON *ke, *it;

	if (!cJSON_IsObject(o))
		return fail(r, "membound", "expected an object");
	if (known_keys(r, o, "membound", keys) ||
	    get_num(r, o, "copy_gbps", "membound", 1e-3, 1e6, &m->copy_gbps) ||
	    get_num(r, o, "efficiency", "membound", 1e-3, 1.5, &m->mem_efficiency))
		return -1;
	ke = cJSON_GetObjectItemCaseSensitive(o, "kernel_efficiency");
	if (ke && !cJSON_IsObject(ke))
		return fail(r, "membound.kernel_efficiency", "expected an object kernel: fraction");
	cJSON_ArrayForEach(it, ke)
	{
		int k = lb_memk_parse(it->string);
		char w[96];

		snprintf(w, sizeof(w), "membound.kernel_efficiency.%s", it->string);
		if (k < 0)
			return fail(r, w, "unknown kernel (bench_kernels' names: rmsnorm.fused.fwd, ...)");
		if (!cJSON_IsNumber(it) || !(it->valuedouble > 0) || it->valuedouble > 1.5)
			return fail(r, w, "expected a fraction in (0, 1.5]");
		m->mem_kernel_efficiency[k] = it->valuedouble;
	}
	if (read_rows(r, o, &mem_rows, m, &m->n_mem))
		return -1;
	qsort(m->mem, (size_t)m->n_mem, sizeof(m->mem[0]), cmp_mem);
	return 0;
}

static int read_links(struct rd *r, const cJSON *o, struct lb_machine *m)
{
	static const char *const keys[] = {"gpus_per_node", "nvlink_gbps", "nvlink_latency_us",
					   "node_gbps",	    "node_latency_us", NULL};
	double gpn = m->gpus_per_node, nl = m->nvlink_lat_s * 1e6, dl = m->node_lat_s * 1e6;

	if (!cJSON_IsObject(o))
		return fail(r, "links", "expected an object");
	if (known_keys(r, o, "links", keys) ||
	    get_num(r, o, "gpus_per_node", "links", 1, 1024, &gpn) ||
	    get_num(r, o, "nvlink_gbps", "links", 1e-3, 1e6, &m->nvlink_gbps) ||
	    get_num(r, o, "nvlink_latency_us", "links", 0, 1e6, &nl) ||
	    get_num(r, o, "node_gbps", "links", 1e-3, 1e6, &m->node_gbps) ||
	    get_num(r, o, "node_latency_us", "links", 0, 1e6, &dl))
		return -1;
	if (gpn != floor(gpn))
		return fail(r, "links.gpus_per_node", "expected a whole number");
	m->gpus_per_node = (int)gpn;
	m->nvlink_lat_s = nl * 1e-6;
	m->node_lat_s = dl * 1e-6;
	return 0;
}

static int read_fit(struct rd *r, const cJSON *o, struct lb_machine *m, int calibration)
{
	const cJSON *it;

	if (!cJSON_IsObject(o))
		return fail(r, "fit", "expected an object of terms");
	cJSON_ArrayForEach(it, o)
	{
		int t = lb_fit_term_find(it->string);
		char w[96];

		snprintf(w, sizeof(w), "fit.%s", it->string);
		if (t < 0) {
			char list[768];
			size_t k = 0;

			for (int i = 0; i < LB_FIT_COUNT && k < sizeof(list); i++)
				k += (size_t)snprintf(list + k, sizeof(list) - k, "%s%s",
						      i ? ", " : "", lb_fit_terms[i].name);
			return fail(r, w, "unknown term (known: %s)", list);
		}
		if (get_num(r, o, it->string, "fit", lb_fit_terms[t].min, lb_fit_terms[t].max,
			    &m->fit[t]))
			return -1;
		m->fitted[t] = calibration;
	}
	return 0;
}

static int read_stack(struct rd *r, const cJSON *o, struct lb_machine *m)
{
	static const char *const keys[] = {"grad_bytes", "param_bytes", "optimizer_bytes", NULL};

	if (!cJSON_IsObject(o))
		return fail(r, "stack", "expected an object");
	return known_keys(r, o, "stack", keys) ||
		       get_num(r, o, "grad_bytes", "stack", 0, 64, &m->grad_bytes) ||
		       get_num(r, o, "param_bytes", "stack", 0, 64, &m->param_bytes) ||
		       get_num(r, o, "optimizer_bytes", "stack", 0, 1024, &m->optimizer_bytes)
		   ? -1
		   : 0;
}

int lb_machine_apply_text(struct lb_machine *m, const char *text, size_t len, const char *path,
			  char *base, size_t baselen, char *err, size_t errlen)
{
	static const char *const keys[] = {
	    "format",	"name",	    "gpu",	"nominal", "description", "source", "base",
	    "peak_tflops", "gemm", "attention", "membound", "links",	   "stack",  "fit",
	    "calibration", NULL};
	struct rd r = {path ? path : "machine", err, errlen};
	cJSON *root = cJSON_ParseWithLength(text, len);
	const cJSON *v;
	int rc = -1, calibration;
	char fmt[64] = "";

	if (base && baselen)
		base[0] = '\0';
	if (!root) {
		const char *at = cJSON_GetErrorPtr();

		snprintf(err, errlen, "%s: not valid JSON near byte %ld", r.path,
			 at ? (long)(at - text) : 0L);
		return -1;
	}
	if (!cJSON_IsObject(root)) {
		fail(&r, "top level", "expected an object");
		goto out;
	}
	if (known_keys(&r, root, "top level", keys) || get_str(&r, root, "format", fmt, sizeof(fmt)))
		goto out;
	if (strcmp(fmt, LB_MACHINE_FORMAT)) {
		fail(&r, "format", "expected \"%s\"", LB_MACHINE_FORMAT);
		goto out;
	}
	calibration = cJSON_GetObjectItemCaseSensitive(root, "calibration") != NULL;
	if (get_str(&r, root, "name", m->name, sizeof(m->name)) ||
	    get_str(&r, root, "gpu", m->gpu, sizeof(m->gpu)) ||
	    get_str(&r, root, "description", m->description, sizeof(m->description)) ||
	    get_str(&r, root, "source", m->source, sizeof(m->source)) ||
	    get_num(&r, root, "peak_tflops", "", 1e-3, 1e7, &m->peak_tflops))
		goto out;
	if (base && get_str(&r, root, "base", base, baselen))
		goto out;
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "nominal"))) {
		if (!cJSON_IsBool(v)) {
			fail(&r, "nominal", "expected true or false");
			goto out;
		}
		m->nominal = cJSON_IsTrue(v);
	}
	if (((v = cJSON_GetObjectItemCaseSensitive(root, "gemm")) && read_gemm(&r, v, m)) ||
	    ((v = cJSON_GetObjectItemCaseSensitive(root, "attention")) &&
	     read_attention(&r, v, m, calibration)) ||
	    ((v = cJSON_GetObjectItemCaseSensitive(root, "membound")) && read_membound(&r, v, m)) ||
	    ((v = cJSON_GetObjectItemCaseSensitive(root, "links")) && read_links(&r, v, m)) ||
	    ((v = cJSON_GetObjectItemCaseSensitive(root, "stack")) && read_stack(&r, v, m)) ||
	    ((v = cJSON_GetObjectItemCaseSensitive(root, "fit")) && read_fit(&r, v, m, calibration)))
		goto out;
	if (calibration) {
		if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "calibration"))) {
			fail(&r, "calibration", "expected an object");
			goto out;
		}
		m->calibrated = 1;
	}
	rc = 0;
out:
	cJSON_Delete(root);
	return rc;
}

/* The text of a machine by name or path (caller frees); what was opened into used. */
static char *machine_text(const char *arg, size_t *len, char *used, size_t usedlen, char *err,
			  size_t errlen)
{
	struct stat sb;
	char *buf = NULL, key[256];
	const char *data;

	if (stat(arg, &sb) == 0) {
		if (lb_read_file(arg, &buf, len)) {
			snprintf(err, errlen, "cannot read machine file '%s'", arg);
			return NULL;
		}
		snprintf(used, usedlen, "%s", arg);
		return buf;
	}
	snprintf(key, sizeof(key), "%s%s%s", LB_MACHINE_DIR, arg,
		 strstr(arg, ".json") ? "" : ".json");
	data = strchr(arg, '/') ? NULL : lb_embedded(key, len);
	if (!data) {
		size_t k = (size_t)snprintf(err, errlen, "unknown machine '%s' (shipped: ", arg);

		for (const char *const *n = shipped; *n && k < errlen; n++)
			k += (size_t)snprintf(err + k, errlen - k, "%s%s", n == shipped ? "" : ", ",
					      *n);
		if (k < errlen)
			snprintf(err + k, errlen - k, "; or give a machine file's path)");
		return NULL;
	}
	buf = lb_text_dup(data, *len, err, errlen);
	if (buf)
		snprintf(used, usedlen, "%s", key);
	return buf;
}

static int load_depth(const char *arg, struct lb_machine *m, int depth, char *err, size_t errlen)
{
	char used[512], base[64], name[64];
	size_t len = 0;
	char *text;
	struct lb_machine probe;
	int rc;

	if (depth > 4) {
		snprintf(err, errlen, "machine '%s': bases nested more than 4 deep", arg);
		return -1;
	}
	text = machine_text(arg, &len, used, sizeof(used), err, errlen);
	if (!text)
		return -1;
	/* the base first: read this file once to learn it */
	lb_machine_init(&probe);
	rc = lb_machine_apply_text(&probe, text, len, used, base, sizeof(base), err, errlen);
	if (rc)
		goto out;
	lb_machine_init(m);
	if (base[0]) {
		char berr[512];

		if (load_depth(base, m, depth + 1, berr, sizeof(berr))) {
			snprintf(err, errlen, "%s: base '%s': %s", used, base, berr);
			rc = -1;
			goto out;
		}
		/* a calibration's fit is its own: the base's calibration flags do not carry */
		m->calibrated = 0;
		memset(m->fitted, 0, sizeof(m->fitted));
		for (int i = 0; i < m->n_attn; i++)
			m->attn[i].fitted = 0;
	}
	snprintf(name, sizeof(name), "%s", m->name);
	rc = lb_machine_apply_text(m, text, len, used, NULL, 0, err, errlen);
	snprintf(m->base, sizeof(m->base), "%s", base);
	if (!rc && !m->name[0])
		snprintf(m->name, sizeof(m->name), "%s", name[0] ? name : arg);
out:
	free(text);
	return rc;
}

int lb_machine_load(const char *name_or_path, struct lb_machine *m, char *err, size_t errlen)
{
	if (!name_or_path || !*name_or_path) {
		snprintf(err, errlen, "no machine named");
		return -1;
	}
	return load_depth(name_or_path, m, 0, err, errlen);
}

/* ------------------------------------------------------------------ writing */

static void put_str(FILE *f, const char *key, const char *v, int comma)
{
	char buf[2 * LB_MACHINE_TEXT + 8];

	lb_json_escape(v, buf, sizeof(buf));
	fprintf(f, "  \"%s\": %s%s\n", key, buf, comma ? "," : "");
}

/* %.6g, but a whole number as such */
static void num(FILE *f, double v)
{
	if (v == floor(v) && fabs(v) < 1e15)
		fprintf(f, "%.0f", v);
	else
		fprintf(f, "%.10g", v);
}

/* sep, then "key": v */
static void key_num(FILE *f, const char *sep, const char *key, double v)
{
	fprintf(f, "%s\"%s\": ", sep, key);
	num(f, v);
}

static void write_rates(FILE *f, const char *key, const double *seq, const double *tf, int n)
{
	fprintf(f, "\"%s\": [", key);
	for (int i = 0; i < n; i++) {
		fprintf(f, "%s[", i ? ", " : "");
		num(f, seq[i]);
		fprintf(f, ", ");
		num(f, tf[i]);
		fprintf(f, "]");
	}
	fprintf(f, "]");
}

/* A table's rows as read_rows reads them: [name, numbers...], one a line. */
static void write_rows(FILE *f, const struct row_table *t, const struct lb_machine *m, int n)
{
	for (int i = 0; i < n; i++) {
		double v[4];

		fprintf(f, "%s\n    [\"%s\"", i ? "," : "", t->load(m, i, v));
		for (int j = 0; j < t->n_num; j++) {
			fprintf(f, ", ");
			num(f, v[j]);
		}
		fprintf(f, "]");
	}
}

int lb_machine_write(FILE *f, const struct lb_machine *m, const struct lb_machine *base,
		     const char *calib_json)
{
	int first;

	fprintf(f, "{\n  \"format\": \"%s\",\n", LB_MACHINE_FORMAT);
	put_str(f, "name", m->name, 1);
	put_str(f, "gpu", m->gpu, 1);
	if (base)
		put_str(f, "base", base->name, 1);
	put_str(f, "description", m->description, 1);
	if (!base) {
		put_str(f, "source", m->source, 1);
		fprintf(f, "  \"nominal\": %s,\n  \"peak_tflops\": ", m->nominal ? "true" : "false");
		num(f, m->peak_tflops);
		fprintf(f, ",\n  \"gemm\": {");
		key_num(f, "", "efficiency", m->gemm_efficiency);
		key_num(f, ", ", "half_dim", m->gemm_half_dim);
		fprintf(f, ", \"rows\": [");
		write_rows(f, &gemm_rows, m, m->n_gemm);
		fprintf(f, "]},\n");
	}
	fprintf(f, "  \"attention\": {\"kernels\": {");
	first = 1;
	for (int i = 0; i < m->n_attn; i++) {
		const struct lb_attn_kernel *k = &m->attn[i];

		if (base && !k->fitted)
			continue;
		fprintf(f, "%s\n    \"%s\": {", first ? "" : ",", k->name);
		first = 0;
		if (!base) {
			write_rates(f, "fwd", k->fwd_seq, k->fwd_tflops, k->n_fwd);
			fprintf(f, ", ");
			write_rates(f, "bwd", k->bwd_seq, k->bwd_tflops, k->n_bwd);
			if (k->scale != 1.0)
				fprintf(f, ", ");
		}
		if (base || k->scale != 1.0)
			key_num(f, "", "scale", k->scale);
		fprintf(f, "}");
	}
	fprintf(f, "}");
	if (m->n_variants) {
		fprintf(f, ",\n    \"variants\": {");
		for (int i = 0; i < m->n_variants; i++)
			fprintf(f, "%s\"%s\": \"%s\"", i ? ", " : "", m->variants[i].label,
				m->variants[i].kernel);
		fprintf(f, "}");
	}
	fprintf(f, "},\n");
	if (!base) {
		fprintf(f, "  \"membound\": {");
		key_num(f, "", "copy_gbps", m->copy_gbps);
		key_num(f, ", ", "efficiency", m->mem_efficiency);
		fprintf(f, ", \"kernel_efficiency\": {");
		first = 1;
		for (int k = 0; k < LB_MEMK_COUNT; k++)
			if (m->mem_kernel_efficiency[k] > 0) {
				key_num(f, first ? "" : ", ", lb_memk_name(k),
					m->mem_kernel_efficiency[k]);
				first = 0;
			}
		fprintf(f, "}, \"rows\": [");
		write_rows(f, &mem_rows, m, m->n_mem);
		fprintf(f, "]},\n  \"links\": {\"gpus_per_node\": %d", m->gpus_per_node);
		key_num(f, ", ", "nvlink_gbps", m->nvlink_gbps);
		key_num(f, ", ", "nvlink_latency_us", m->nvlink_lat_s * 1e6);
		key_num(f, ", ", "node_gbps", m->node_gbps);
		key_num(f, ", ", "node_latency_us", m->node_lat_s * 1e6);
		fprintf(f, "},\n  \"stack\": {");
		key_num(f, "", "grad_bytes", m->grad_bytes);
		key_num(f, ", ", "param_bytes", m->param_bytes);
		key_num(f, ", ", "optimizer_bytes", m->optimizer_bytes);
		fprintf(f, "},\n");
	}
	fprintf(f, "  \"fit\": {");
	first = 1;
	for (int i = 0; i < LB_FIT_COUNT; i++) {
		if (base && !m->fitted[i])
			continue;
		fprintf(f, "%s\n    \"%s\": ", first ? "" : ",", lb_fit_terms[i].name);
		fprintf(f, "%.10g", m->fit[i]);
		first = 0;
	}
	fprintf(f, "}%s\n", calib_json ? "," : "");
	if (calib_json)
		fprintf(f, "  \"calibration\": %s\n", calib_json);
	fprintf(f, "}\n");
	return ferror(f) ? -1 : 0;
}

/* ------------------------------------------------------------------ measurement tools */

/* Split a CSV line (no quotes in bench_kernels' output) into at most n fields in place. */
static int split_csv(char *line, char **f, int n)
{
	int k = 0;

	while (k < n) {
		f[k++] = line;
		line = strchr(line, ',');
		if (!line)
			break;
		*line++ = '\0';
	}
	return k;
}

/* The number after tag (as "m" in "T2048 m2048 n15360") among the words of s. */
static int shape_num(const char *s, const char *tag, double *out)
{
	size_t tl = strlen(tag);

	for (const char *p = s; *p;) {
		while (*p == ' ')
			p++;
		if (!strncmp(p, tag, tl) && isdigit((unsigned char)p[tl])) {
			char w[32];
			size_t k = 0;

			p += tl;
			while (p[k] && p[k] != ' ' && k + 1 < sizeof(w)) {
				w[k] = p[k];
				k++;
			}
			w[k] = '\0';
			return lb_parse_double(w, 1, 1e12, out);
		}
		while (*p && *p != ' ')
			p++;
	}
	return -1;
}

static int add_attn_rate(struct lb_machine *m, const char *kernel, int bwd, double seq,
			 double tflops)
{
	struct lb_attn_kernel *k = lb_machine_attn_mut(m, kernel);
	int *n;
	double *xs, *ys;

	if (!k) {
		if (m->n_attn == LB_MACHINE_ATTN_MAX)
			return -1;
		k = &m->attn[m->n_attn++];
		memset(k, 0, sizeof(*k));
		snprintf(k->name, sizeof(k->name), "%s", kernel);
		k->scale = 1.0;
	}
	n = bwd ? &k->n_bwd : &k->n_fwd;
	xs = bwd ? k->bwd_seq : k->fwd_seq;
	ys = bwd ? k->bwd_tflops : k->fwd_tflops;
	for (int i = 0; i < *n; i++)
		if (xs[i] == seq) { /* measured twice: the later row */
			ys[i] = tflops;
			return 0;
		}
	if (*n == LB_ATTN_ROWS_MAX)
		return -1;
	xs[*n] = seq;
	ys[(*n)++] = tflops;
	sort_seq(xs, ys, *n);
	return 0;
}

int lb_machine_from_kernels_csv(struct lb_machine *m, const char *text, size_t len, int *skipped,
				char *err, size_t errlen)
{
	char *buf = lb_text_dup(text, len, err, errlen), *line, *next;
	int lineno = 0, rc = -1, have_header = 0;

	*skipped = 0;
	if (!buf)
		return -1;
	m->n_gemm = 0;
	m->n_mem = 0;
	m->n_attn = 0;
	m->copy_gbps = 0;
	for (line = buf; line && *line; line = next) {
		char *f[12];
		int nf;
		double achieved, work;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		if (*line && line[strlen(line) - 1] == '\r')
			line[strlen(line) - 1] = '\0';
		if (!*line)
			continue;
		nf = split_csv(line, f, 12);
		if (!have_header) {
			if (nf < 9 || strcmp(f[0], "kernel") || strcmp(f[5], "achieved") ||
			    strcmp(f[8], "check")) {
				snprintf(err, errlen,
					 "line %d: not bench_kernels --csv output (expected the "
					 "header kernel,shape,time_us,work,unit,achieved,ceiling,"
					 "pct_of_ceiling,check)",
					 lineno);
				goto out;
			}
			have_header = 1;
			continue;
		}
		if (nf < 9) {
			snprintf(err, errlen, "line %d: %d fields, expected 9 or more", lineno, nf);
			goto out;
		}
		if (strcmp(f[8], "ok")) {
			(*skipped)++;
			continue;
		}
		if (lb_parse_double(f[5], 1e-9, 1e9, &achieved) ||
		    lb_parse_double(f[3], 1e-9, 1e18, &work)) {
			snprintf(err, errlen, "line %d: '%s': achieved '%s' or work '%s' is not a "
					      "positive number",
				 lineno, f[0], f[5], f[3]);
			goto out;
		}
		if (!strncmp(f[0], "gemm.", 5)) {
			const char *dot = strrchr(f[0], '.');
			int op = dot ? lb_gemm_op_parse(dot + 1) : -1;
			struct lb_gemm_row *g;

			if (op < 0) {
				snprintf(err, errlen, "line %d: '%s': no op (fwd, dgrad, wgrad)", lineno,
					 f[0]);
				goto out;
			}
			if (m->n_gemm == LB_MACHINE_GEMM_MAX) {
				snprintf(err, errlen, "line %d: more than %d GEMM rows", lineno,
					 LB_MACHINE_GEMM_MAX);
				goto out;
			}
			g = &m->gemm[m->n_gemm];
			g->op = (enum lb_gemm_op)op;
			g->tflops = achieved;
			if (shape_num(f[1], "m", &g->m) || shape_num(f[1], "n", &g->n) ||
			    shape_num(f[1], "k", &g->k)) {
				snprintf(err, errlen, "line %d: '%s': no m, n, k in shape '%s'", lineno,
					 f[0], f[1]);
				goto out;
			}
			m->n_gemm++;
		} else if (!strncmp(f[0], "attn.", 5)) {
			double seq;
			int bwd = strstr(f[0], ".bwd") != NULL, bad = 0;

			if (shape_num(f[1], "S", &seq)) {
				snprintf(err, errlen, "line %d: '%s': no S in shape '%s'", lineno, f[0],
					 f[1]);
				goto out;
			}
			if (!strcmp(f[0], "attn.naive.fwd"))
				bad = add_attn_rate(m, "naive", 0, seq, achieved);
			else if (!strcmp(f[0], "attn.fused.fwd"))
				bad = add_attn_rate(m, "fused_softmax", 0, seq, achieved);
			else if (!strcmp(f[0], "attn.probs.bwd"))
				bad = add_attn_rate(m, "naive", 1, seq, achieved) ||
				      add_attn_rate(m, "fused_softmax", 1, seq, achieved);
			else {
				char kn[32];
				const char *a = f[0] + 5, *d = strchr(a, '.');

				snprintf(kn, sizeof(kn), "%.*s", d ? (int)(d - a) : (int)strlen(a), a);
				bad = add_attn_rate(m, kn, bwd, seq, achieved);
			}
			if (bad) {
				snprintf(err, errlen, "line %d: '%s': too many attention kernels or "
						      "sequences",
					 lineno, f[0]);
				goto out;
			}
		} else {
			int k = lb_memk_parse(f[0]);

			if (k < 0) { /* a row this model has no use for */
				(*skipped)++;
				continue;
			}
			if (m->n_mem == LB_MACHINE_MEM_MAX) {
				snprintf(err, errlen, "line %d: more than %d memory-bound rows", lineno,
					 LB_MACHINE_MEM_MAX);
				goto out;
			}
			{
				double ceil;

				/* the memory rows' ceiling is the 2 GiB copy's rate */
				if (!lb_parse_double(f[6], 1e-9, 1e9, &ceil) && ceil > m->copy_gbps)
					m->copy_gbps = ceil;
			}
			m->mem[m->n_mem].kernel = (enum lb_memk)k;
			m->mem[m->n_mem].bytes = work;
			m->mem[m->n_mem].gbps = achieved;
			m->n_mem++;
		}
	}
	if (!have_header) {
		snprintf(err, errlen, "empty: not bench_kernels --csv output");
		goto out;
	}
	qsort(m->mem, (size_t)m->n_mem, sizeof(m->mem[0]), cmp_mem);
	rc = 0;
out:
	free(buf);
	return rc;
}

int lb_machine_from_colls(struct lb_machine *m, const char *text, size_t len, char *err,
			  size_t errlen)
{
	char *buf = lb_text_dup(text, len, err, errlen), *line, *next;
	int ranks = 0, in_ar = 0, rc = -1;
	double small_b = 0, small_us = 0, big_b = 0, big_bus = 0;

	if (!buf)
		return -1;
	for (line = buf; line && *line; line = next) {
		double b, cnt, us, alg, bus;
		char type[16];

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (sscanf(line, "# comm %*[^,], %d rank", &ranks) == 1)
			continue;
		if (line[0] == '#') {
			if (strstr(line, "# all_reduce"))
				in_ar = 1;
			else if (strstr(line, "# reduce_scatter") || strstr(line, "# all_gather") ||
				 strstr(line, "# sendrecv"))
				in_ar = 0;
			continue;
		}
		if (!in_ar ||
		    sscanf(line, " %lf %lf %15s %lf %lf %lf", &b, &cnt, type, &us, &alg, &bus) != 6)
			continue;
		if (!small_b || b < small_b)
			small_b = b, small_us = us;
		if (b > big_b)
			big_b = b, big_bus = bus;
	}
	if (ranks < 2) {
		snprintf(err, errlen, "bench_colls output of %d rank(s): a link needs 2 or more "
				      "(run it with --nproc 2 or more on one node)",
			 ranks);
		goto out;
	}
	if (!big_b || !(big_bus > 0)) {
		snprintf(err, errlen, "no all_reduce table with a bus bandwidth (run bench_colls "
				      "with --op all or --op all_reduce)");
		goto out;
	}
	m->nvlink_gbps = big_bus;
	m->nvlink_lat_s = small_us * 1e-6 / (2.0 * (ranks - 1));
	rc = 0;
out:
	free(buf);
	return rc;
}
