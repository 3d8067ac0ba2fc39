/*
 * The layout record: its field table (made from common/layout_fields.def), defaults,
 * canonical text and id, enum names, the one flag parser, printer and usage shared by the
 * CLI, job scripts and trainer, and the validity rules with their reasons. libc only.
 * Canonical text uses fixed integer formats only (no floats, no locale), so the id is the
 * same on every machine.
 *
 * Why one file: everything that is made from the field list inside common/ is here, so
 * that each kind's reading, printing and checking stand together.
 */
#include "common/layout.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cmdline.h"
#include "common/preset.h"
#include "common/util.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ the field table */

/* The names of each ENUM field: <key>_names[]. */
#define UNPAREN(...)		 __VA_ARGS__
#define NAMES_NAME(key, names)	 /* none */
#define NAMES_POS(key, names)	 /* none */
#define NAMES_COUNT(key, names)	 /* none */
#define NAMES_BOOL(key, names)	 /* none */
#define NAMES_ZERO(key, names)	 /* none */
#define NAMES_CHUNKS(key, names) /* none */
#define NAMES_SPLIT(key, names)	 /* none */
#define NAMES_SEED(key, names)	 /* none */
#define NAMES_ENUM(key, names)	 static const char *const key##_names[] = {UNPAREN names};
#define LB_MODEL_FIELD(ID, key, member, column, kind, ctype, dflt, attrs, head, names, help)       \
	NAMES_##kind(key, names)
#define LB_LAYOUT_FIELD(ID, key, member, column, kind, ctype, dflt, attrs, head, names, help)      \
	NAMES_##kind(key, names) _Static_assert(sizeof(ctype) == sizeof(int) ||                    \
						    LB_FK_##kind != LB_FK_ENUM,                    \
						"an ENUM field is stored as an int");
#include "common/layout_fields.def"

/* What each kind reads: the range of its integers, and its default as a number. */
#define POS_MAX		  (1 << 30)
#define LO_NAME		  0
#define HI_NAME		  0
#define LO_POS		  1
#define HI_POS		  POS_MAX
#define LO_COUNT	  0
#define HI_COUNT	  POS_MAX
#define LO_BOOL		  0
#define HI_BOOL		  1
#define LO_ZERO		  0
#define HI_ZERO		  3 /* read, and refused by lb_layout_check with its reason */
#define LO_CHUNKS	  1
#define HI_CHUNKS	  LB_MAX_VIRTUAL_STAGES
#define LO_ENUM		  0
#define HI_ENUM		  0
#define LO_SPLIT	  1
#define HI_SPLIT	  POS_MAX
#define LO_SEED		  0
#define HI_SEED		  LLONG_MAX
#define DFLT_NAME(d)	  0
#define DFLT_POS(d)	  (d)
#define DFLT_COUNT(d)	  (d)
#define DFLT_BOOL(d)	  (d)
#define DFLT_ZERO(d)	  (d)
#define DFLT_CHUNKS(d)	  (d)
#define DFLT_ENUM(d)	  (d)
#define DFLT_SPLIT(d)	  (d)
#define DFLT_SEED(d)	  (d)
#define NAMEV_NAME(key)	  NULL, 0
#define NAMEV_POS(key)	  NULL, 0
#define NAMEV_COUNT(key)  NULL, 0
#define NAMEV_BOOL(key)	  NULL, 0
#define NAMEV_ZERO(key)	  NULL, 0
#define NAMEV_CHUNKS(key) NULL, 0
#define NAMEV_SPLIT(key)  NULL, 0
#define NAMEV_SEED(key)	  NULL, 0
#define NAMEV_ENUM(key)	  key##_names, (int)NELEM(key##_names)

#define FIELD_ROW(in_model, path, ID, key, column, kind, dflt, attrs, head, help)                  \
	[LB_FLD_##ID] = {#key,	    #column,	       LB_FK_##kind,                               \
			 attrs,	    in_model,	       offsetof(struct lb_layout, path),           \
			 LO_##kind, HI_##kind,	       DFLT_##kind(dflt),                          \
			 head,	    NAMEV_##kind(key), help},
const struct lb_field_info lb_fields[LB_NFIELDS] = {
#define LB_MODEL_FIELD(ID, key, member, column, kind, ctype, dflt, attrs, head, names, help)       \
	FIELD_ROW(1, model.member, ID, key, column, kind, dflt, attrs, head, help)
#define LB_LAYOUT_FIELD(ID, key, member, column, kind, ctype, dflt, attrs, head, names, help)      \
	FIELD_ROW(0, member, ID, key, column, kind, dflt, attrs, head, help)
#include "common/layout_fields.def"
};

int lb_field_find_flag(const char *flag)
{
	if (!flag || strncmp(flag, "--", 2))
		return -1;
	for (int f = 0; f < LB_NFIELDS; f++) {
		const char *k = lb_fields[f].key, *p = flag + 2;

		while (*k && (*k == *p || (*k == '_' && *p == '-')))
			k++, p++;
		if (!*k && !*p)
			return f;
	}
	return -1;
}

char *lb_field_flag(int f, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "--%s", lb_fields[f].key);

	for (size_t i = 2; i < n && i < len; i++)
		if (buf[i] == '_')
			buf[i] = '-';
	return buf;
}

static int *int_at(struct lb_layout *l, int f)
{
	return (int *)((char *)l + lb_fields[f].off);
}

static const int *cint_at(const struct lb_layout *l, int f)
{
	return (const int *)((const char *)l + lb_fields[f].off);
}

long long lb_field_get(const struct lb_layout *l, int f)
{
	switch (lb_fields[f].kind) {
	case LB_FK_NAME:
	case LB_FK_SPLIT:
		return 0;
	case LB_FK_SEED:
		return (long long)*(const uint64_t *)((const char *)l + lb_fields[f].off);
	default:
		return *cint_at(l, f);
	}
}

void lb_field_set(struct lb_layout *l, int f, long long v)
{
	switch (lb_fields[f].kind) {
	case LB_FK_NAME:
	case LB_FK_SPLIT:
		return;
	case LB_FK_SEED:
		*(uint64_t *)((char *)l + lb_fields[f].off) = (uint64_t)v;
		return;
	default:
		*int_at(l, f) = (int)v;
	}
}

int lb_field_shown(const struct lb_layout *l, int f)
{
	if (!(lb_fields[f].attrs & LB_FA_SPARSE))
		return 1;
	if (lb_fields[f].kind == LB_FK_SPLIT)
		return lb_layout_split_explicit(l);
	return lb_field_get(l, f) != lb_fields[f].dflt;
}

static const char *enum_name(int f, long long v)
{
	return v >= 0 && v < lb_fields[f].n_names ? lb_fields[f].names[v] : "invalid";
}

int lb_field_enum_index(int f, const char *s)
{
	return lb_name_index(lb_fields[f].names, lb_fields[f].n_names, s);
}

int lb_field_text(const struct lb_layout *l, int f, char *buf, size_t len)
{
	const struct lb_field_info *fi = &lb_fields[f];
	size_t used = 0;

	switch (fi->kind) {
	case LB_FK_NAME:
		return snprintf(buf, len, "%s", (const char *)l + fi->off);
	case LB_FK_ENUM:
		return snprintf(buf, len, "%s", enum_name(f, lb_field_get(l, f)));
	case LB_FK_SEED:
		return snprintf(buf, len, "%llu", (unsigned long long)lb_field_get(l, f));
	case LB_FK_SPLIT:
		if (len)
			buf[0] = '\0';
		for (int i = 0; i < l->n_stage_layers && i < LB_MAX_STAGES; i++)
			used += (size_t)snprintf(used < len ? buf + used : NULL,
						 used < len ? len - used : 0, "%s%d", i ? "," : "",
						 l->stage_layers[i]);
		return (int)used;
	default:
		return snprintf(buf, len, "%lld", lb_field_get(l, f));
	}
}

/* Field f's names into buf, sep between two, last before the final one: "a, b or c"
 * (quote: "\"a\", \"b\" or \"c\"") in messages, "a|b|c" in usage. */
static char *join_names(int f, const char *sep, const char *last, int quote, char *buf, size_t len)
{
	const struct lb_field_info *fi = &lb_fields[f];
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	for (int i = 0; i < fi->n_names && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s%s%s",
					 i == 0			? ""
					 : i == fi->n_names - 1 ? last
								: sep,
					 quote ? "\"" : "", fi->names[i], quote ? "\"" : "");
	return buf;
}

static char *names_words(int f, int quote, char *buf, size_t len)
{
	return join_names(f, ", ", " or ", quote, buf, len);
}

/* What each kind reads, in words for messages and as the value a flag takes in usage
 * (LB_FIELD_KINDS); an ENUM field's come from its names, and CHUNKS words its range. */
#define KIND_TEXT(id, words, arg) {words, arg},
static const struct {
	const char *expect, *arg;
} kind_text[] = {LB_FIELD_KINDS(KIND_TEXT)};
#undef KIND_TEXT

char *lb_field_expect(int f, int quote, char *buf, size_t len)
{
	switch (lb_fields[f].kind) {
	case LB_FK_CHUNKS:
		snprintf(buf, len, "an integer from %lld to %lld", lb_fields[f].lo,
			 lb_fields[f].hi);
		break;
	case LB_FK_ENUM:
		names_words(f, quote, buf, len);
		break;
	default:
		snprintf(buf, len, "%s", kind_text[lb_fields[f].kind].expect);
	}
	return buf;
}

/* "llama-7b, llama-13b, ..." into buf. */
static void preset_list(char *buf, size_t len)
{
	const char *const *names = lb_model_preset_names();
	size_t used = 0;
	int n;

	buf[0] = '\0';
	for (; *names; names++) {
		n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", *names);
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
	}
}

/* --stage-layers A,B,...: positive integers, at most LB_MAX_STAGES; "" or "rule" clears
 * the split (back to the rule). The record changes only when the whole list parses. */
static int parse_split(struct lb_layout *l, const char *name, const char *value, char *err,
		       size_t errlen)
{
	int vals[LB_MAX_STAGES], n = 0;
	const char *p = value;

	if (!*value || !strcmp(value, "rule")) {
		l->n_stage_layers = 0;
		return 0;
	}
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t k = comma ? (size_t)(comma - p) : strlen(p);
		char item[16];

		if (n == LB_MAX_STAGES) {
			snprintf(err, errlen, "%s: more than %d entries in '%.200s'", name,
				 LB_MAX_STAGES, value);
			return -1;
		}
		if (k == 0 || k >= sizeof(item)) {
			snprintf(err, errlen,
				 "%s: expected positive integers separated by commas (layers per "
				 "stage, e.g. 7,8,8,7), got '%.200s'",
				 name, value);
			return -1;
		}
		memcpy(item, p, k);
		item[k] = '\0';
		if (lb_parse_int(item, 1, 1 << 30, &vals[n])) {
			snprintf(err, errlen,
				 "%s: entry %d is '%s'; every stage needs a positive number of "
				 "layers (e.g. 7,8,8,7)",
				 name, n + 1, item);
			return -1;
		}
		n++;
		if (!comma)
			break;
		p = comma + 1;
	}
	memcpy(l->stage_layers, vals, (size_t)n * sizeof(vals[0]));
	l->n_stage_layers = n;
	return 0;
}

int lb_field_parse(struct lb_layout *l, int f, const char *flag, const char *text, char *err,
		   size_t errlen)
{
	const struct lb_field_info *fi = &lb_fields[f];
	char what[128];
	uint64_t u;
	int v;

	switch (fi->kind) {
	case LB_FK_NAME: {
		struct lb_model m;
		char list[512];

		if (lb_model_preset(text, &m)) {
			preset_list(list, sizeof(list));
			snprintf(err, errlen, "%s: unknown preset '%s' (known: %s)", flag, text,
				 list);
			return -1;
		}
		l->model = m;
		return 0;
	}
	case LB_FK_SPLIT:
		return parse_split(l, flag, text, err, errlen);
	case LB_FK_ENUM:
		if ((v = lb_field_enum_index(f, text)) < 0)
			break;
		lb_field_set(l, f, v);
		return 0;
	case LB_FK_SEED:
		if (lb_parse_u64(text, &u))
			break;
		lb_field_set(l, f, (long long)u);
		return 0;
	default:
		if (lb_parse_int(text, (int)fi->lo, (int)fi->hi, &v))
			break;
		lb_field_set(l, f, v);
		return 0;
	}
	snprintf(err, errlen, "%s: expected %s, got '%s'", flag,
		 lb_field_expect(f, 0, what, sizeof(what)), text);
	return -1;
}

/* ------------------------------------------------------------------ the record */

/* What lb_layout_init does for a field of each kind: a model field is its preset's, a
 * layout field its default; a split starts as the rule (none). */
#define INIT_MODEL_NAME(l, d)  lb_model_preset(d, &(l)->model);
#define INIT_MODEL_POS(l, d)   /* the preset's */
#define INIT_MODEL_BOOL(l, d)  /* the preset's */
#define INIT_MODEL_COUNT(l, d) /* the preset's */
#define INIT_MODEL_ENUM(l, d)  /* the preset's */
#define INIT_NAME(m, d)	       /* a model field only */
#define INIT_POS(m, d)	       m = d;
#define INIT_COUNT(m, d)       m = d;
#define INIT_BOOL(m, d)	       m = d;
#define INIT_ZERO(m, d)	       m = d;
#define INIT_CHUNKS(m, d)      m = d;
#define INIT_ENUM(m, d)	       m = d;
#define INIT_SEED(m, d)	       m = d;
#define INIT_SPLIT(m, d)       /* zeroed: the rule */

void lb_layout_init(struct lb_layout *l)
{
	memset(l, 0, sizeof(*l));
#define LB_MODEL_FIELD(ID, key, member, column, kind, ctype, dflt, attrs, head, names, help)       \
	INIT_MODEL_##kind(l, dflt)
#define LB_LAYOUT_FIELD(ID, key, member, column, kind, ctype, dflt, attrs, head, names, help)      \
	INIT_##kind(l->member, dflt)
#include "common/layout_fields.def"
}

/* a * b * c, saturated to the long long range (records may hold anything). */
static long long mul3(long long a, long long b, long long c)
{
	long long ab, abc;

	if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc))
		return (a < 0) ^ (b < 0) ^ (c < 0) ? LLONG_MIN : LLONG_MAX;
	return abc;
}

int lb_layout_world(const struct lb_layout *l)
{
	long long w = mul3(l->tp, l->pp, l->dp);

	return w > INT_MAX ? INT_MAX : (w < INT_MIN ? INT_MIN : (int)w);
}

int lb_layout_accum_steps(const struct lb_layout *l)
{
	long long per = (long long)l->micro_batch * l->dp;

	if (per <= 0 || l->global_batch <= 0 || l->global_batch % per)
		return 0;
	return (int)(l->global_batch / per);
}

int lb_layout_chunks(const struct lb_layout *l)
{
	return l->virtual_stages > 1 ? l->virtual_stages : 1;
}

/* The rule: chunk i of n over L layers (0 <= i < n <= L). */
static void rule_split(int n_layers, int n, int i, int *lo, int *hi)
{
	int q = n_layers / n, r = n_layers % n, big, before;

	big = (n - r + 1) / 2; /* the first chunk with q + 1 layers (when r > 0) */
	/* chunks before this one that hold an extra layer */
	before = i < big ? 0 : (i - big < r ? i - big : r);
	*lo = i * q + before;
	*hi = *lo + q + (i >= big && i < big + r);
}

/* 1 when the explicit split has n positive entries summing to the layers. */
static int split_valid(const struct lb_layout *l, int n)
{
	long long sum = 0;

	if (l->n_stage_layers != n)
		return 0;
	for (int i = 0; i < n; i++) {
		if (l->stage_layers[i] < 1)
			return 0;
		sum += l->stage_layers[i];
	}
	return sum == l->model.n_layers;
}

int lb_chunk_layers(const struct lb_layout *l, int stage, int chunk, int *lo, int *hi)
{
	int p = l->pp, v = lb_layout_chunks(l), L = l->model.n_layers, n, i, a = 0;

	if (p < 1 || v > LB_MAX_VIRTUAL_STAGES || stage < 0 || stage >= p || chunk < 0 ||
	    chunk >= v || (long long)p * v > L)
		return -1;
	n = p * v;
	i = chunk * p + stage;
	if (l->n_stage_layers == 0) {
		rule_split(L, n, i, lo, hi);
		return 0;
	}
	if (!split_valid(l, n))
		return -1;
	for (int k = 0; k < i; k++)
		a += l->stage_layers[k];
	*lo = a;
	*hi = a + l->stage_layers[i];
	return 0;
}

int lb_stage_layers(const struct lb_layout *l, int stage, int *lo, int *hi)
{
	return lb_chunk_layers(l, stage, 0, lo, hi);
}

int lb_stage_layer_count(const struct lb_layout *l, int stage)
{
	int n = 0, lo, hi;

	for (int c = 0; c < lb_layout_chunks(l); c++) {
		if (lb_chunk_layers(l, stage, c, &lo, &hi))
			return -1;
		n += hi - lo;
	}
	return n;
}

int lb_layout_split_explicit(const struct lb_layout *l)
{
	int n = l->pp * lb_layout_chunks(l), lo, hi;

	if (l->n_stage_layers == 0)
		return 0;
	if (l->pp < 1 || l->n_stage_layers != n || n > l->model.n_layers)
		return 1;
	for (int i = 0; i < n; i++) {
		rule_split(l->model.n_layers, n, i, &lo, &hi);
		if (l->stage_layers[i] != hi - lo)
			return 1;
	}
	return 0;
}

/* A text built with snprintf's contract (the length it needs; truncated, NUL-terminated
 * within len) by plain appends: the canonical text is made for every point of a grid, and
 * one snprintf of its 21 fields cost more than the rest of judging a point. */
struct tbuf {
	char *p;
	size_t len, used;
};

static void put_n(struct tbuf *b, const char *s, size_t n)
{
	if (b->used + n < b->len)
		memcpy(b->p + b->used, s, n);
	else
		for (size_t i = 0; i < n; i++)
			if (b->used + i + 1 < b->len)
				b->p[b->used + i] = s[i];
	b->used += n;
}

static void put_s(struct tbuf *b, const char *s)
{
	put_n(b, s, strlen(s));
}

/* v in decimal, as "%d" writes it */
static void put_int(struct tbuf *b, int v)
{
	char d[12];
	int n = 12;
	unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;

	do
		d[--n] = (char)('0' + u % 10);
	while ((u /= 10) && n > 1);
	if (v < 0)
		d[--n] = '-';
	put_n(b, d + n, (size_t)(12 - n));
}

/* The canonical text's piece of one field, made for each line of the field list so that
 * the compiler sees its key, kind and attributes (the text is made for every point of a
 * grid): " key=value" (the model, first, without the space); nothing for a run setting,
 * nor for a sparse field at its default. */
#define CANON_KEY(key) put_n(&b, " " #key "=", sizeof(" " #key "=") - 1)
#define CANON_SHOWN(attrs, v, dflt)                                                                \
	(!((attrs)&LB_FA_RUN) && (!((attrs)&LB_FA_SPARSE) || (v) != (dflt)))
#define CANON_NAME(f, key, v, dflt, attrs) put_s(&b, #key "="), put_s(&b, v);
#define CANON_INT(f, key, v, dflt, attrs)                                                          \
	if (CANON_SHOWN(attrs, v, dflt)) {                                                         \
		CANON_KEY(key);                                                                    \
		put_int(&b, v);                                                                    \
	}
#define CANON_POS    CANON_INT
#define CANON_COUNT  CANON_INT
#define CANON_BOOL   CANON_INT
#define CANON_ZERO   CANON_INT
#define CANON_CHUNKS CANON_INT
#define CANON_ENUM(f, key, v, dflt, attrs)                                                         \
	if (CANON_SHOWN(attrs, v, dflt)) {                                                         \
		CANON_KEY(key);                                                                    \
		put_s(&b, enum_name(f, v));                                                        \
	}
#define CANON_SEED(f, key, v, dflt, attrs)                                                         \
	if (CANON_SHOWN(attrs, v, dflt)) {                                                         \
		CANON_KEY(key);                                                                    \
		lb_field_text(l, f, t, sizeof(t));                                                 \
		put_s(&b, t);                                                                      \
	}
#define CANON_SPLIT(f, key, v, dflt, attrs)                                                        \
	if (!((attrs)&LB_FA_RUN) && lb_field_shown(l, f)) {                                        \
		CANON_KEY(key);                                                                    \
		lb_field_text(l, f, t, sizeof(t));                                                 \
		put_s(&b, t);                                                                      \
	}

int lb_layout_canonical(const struct lb_layout *l, char *buf, size_t len)
{
	struct tbuf b = {buf, len, 0};
	char t[LB_MAX_STAGES * 12 + 16];

#define LB_MODEL_FIELD(ID, key, member, column, kind, ctype, dflt, attrs, head, names, help)       \
	CANON_##kind(LB_FLD_##ID, key, l->model.member, l->model.member, attrs)
#define LB_LAYOUT_FIELD(ID, key, member, column, kind, ctype, dflt, attrs, head, names, help)      \
	CANON_##kind(LB_FLD_##ID, key, l->member, dflt, attrs)
#include "common/layout_fields.def"
	if (len)
		buf[b.used < len ? b.used : len - 1] = '\0';
	return b.used > INT_MAX ? -1 : (int)b.used;
}

void lb_layout_id(const struct lb_layout *l, char out[LB_ID_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	char buf[LB_MAX_STAGES * 12 + 1024];
	int n = lb_layout_canonical(l, buf, sizeof(buf));
	size_t used = n < 0 ? 0 : ((size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
	uint64_t h = lb_fnv1a64(buf, used);

	for (int i = LB_ID_LEN - 1; i >= 0; i--, h >>= 4) /* "%016llx" */
		out[i] = hex[h & 15];
	out[LB_ID_LEN] = '\0';
}

/* The ENUM fields' names under their old names. */
const char *lb_ckpt_name(enum lb_ckpt c)
{
	return enum_name(LB_FLD_CHECKPOINTING, c);
}

const char *lb_attn_name(enum lb_attn a)
{
	return enum_name(LB_FLD_ATTENTION, a);
}

const char *lb_norm_name(enum lb_norm n)
{
	return enum_name(LB_FLD_NORM, n);
}

int lb_ckpt_parse(const char *s, enum lb_ckpt *out)
{
	int i = lb_field_enum_index(LB_FLD_CHECKPOINTING, s);

	if (i < 0)
		return -1;
	*out = (enum lb_ckpt)i;
	return 0;
}

int lb_attn_parse(const char *s, enum lb_attn *out)
{
	int i = lb_field_enum_index(LB_FLD_ATTENTION, s);

	if (i < 0)
		return -1;
	*out = (enum lb_attn)i;
	return 0;
}

int lb_norm_parse(const char *s, enum lb_norm *out)
{
	int i = lb_field_enum_index(LB_FLD_NORM, s);

	if (i < 0)
		return -1;
	*out = (enum lb_norm)i;
	return 0;
}

int lb_attn_saves_lse(enum lb_attn a)
{
	return a == LB_ATTN_FLASH || a == LB_ATTN_CUDNN;
}

int lb_attn_gpu_only(enum lb_attn a)
{
	return a == LB_ATTN_CUDNN;
}

/* ------------------------------------------------------------------ flags */

int lb_layout_set_flag(struct lb_layout *l, const char *name, const char *value, char *err,
		       size_t errlen)
{
	int f = lb_field_find_flag(name);

	if (f < 0)
		return 0;
	if (!value) {
		snprintf(err, errlen, "%s: missing value", name);
		return -1;
	}
	return lb_field_parse(l, f, name, value, err, errlen) ? -1 : 1;
}

static int group_known(const char *flag)
{
	return lb_field_find_flag(flag) >= 0;
}

static int group_set(void *ctx, const char *flag, const char *value, char *err, size_t errlen)
{
	return lb_layout_set_flag(ctx, flag, value, err, errlen) < 0 ? -1 : 0;
}

void lb_layout_flag_group(struct lb_layout *l, struct lb_flag_group *g)
{
	g->known = group_known;
	g->set = group_set;
	g->ctx = l;
}

int lb_layout_parse_args(struct lb_layout *l, int argc, char **argv, char **rest, int *nrest,
			 char *err, size_t errlen)
{
	static const struct lb_option none[] = {LB_OPT_END};
	static const struct lb_command line = {.name = "layout flags",
					       .max_operands = -1,
					       .options = none,
					       .flags = LB_CMD_KEEP_UNKNOWN};
	char **v = malloc(((size_t)(argc > 0 ? argc : 0) + 1) * sizeof(*v));
	struct lb_flag_group g;
	struct lb_args a;
	int rc;

	*nrest = 0;
	if (!v) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	v[0] = (char *)line.name; /* the parser's argv[0] */
	for (int i = 0; i < argc; i++)
		v[i + 1] = argv[i];
	lb_layout_flag_group(l, &g);
	rc = lb_args_scan(&line, &g, argc + 1, v, &a, err, errlen);
	for (int i = 0; rc == LB_ARGS_OK && i < a.n_operands; i++)
		rest[(*nrest)++] = a.operands[i];
	lb_args_release(&a);
	free(v);
	return rc == LB_ARGS_OK ? 0 : -1;
}

int lb_layout_to_flags(const struct lb_layout *l, char *buf, size_t len)
{
	size_t used = 0;
	char flag[64], v[LB_MAX_STAGES * 12 + 16];

	if (len)
		buf[0] = '\0';
	for (int f = 0; f < LB_NFIELDS; f++) {
		if (!lb_field_shown(l, f))
			continue;
		lb_field_text(l, f, v, sizeof(v));
		used += (size_t)snprintf(used < len ? buf + used : NULL,
					 used < len ? len - used : 0, "%s%s %s", used ? " " : "",
					 lb_field_flag(f, flag, sizeof(flag)), v);
	}
	return used > INT_MAX ? -1 : (int)used;
}

/* The value a flag takes in usage: "N", "0|1", "none|full|selective". */
static void flag_arg(int f, char *buf, size_t len)
{
	if (lb_fields[f].kind == LB_FK_ENUM)
		join_names(f, "|", "|", 0, buf, len);
	else
		snprintf(buf, len, "%s", kind_text[lb_fields[f].kind].arg);
}

const char *lb_layout_flags_usage(void)
{
	static char out[8192];
	struct lb_strbuf sb = LB_STRBUF_INIT;
	char flag[64], arg[128], help[640], list[512];

	lb_strbuf_adds(&sb, "layout flags (\"--flag VALUE\" or \"--flag=VALUE\"):\n");
	for (int f = 0; f < LB_NFIELDS; f++) {
		const struct lb_field_info *fi = &lb_fields[f];

		lb_field_flag(f, flag, sizeof(flag));
		flag_arg(f, arg, sizeof(arg));
		if (fi->kind == LB_FK_NAME) {
			preset_list(list, sizeof(list));
			snprintf(help, sizeof(help), "%s; one of %s", fi->help, list);
		} else {
			snprintf(help, sizeof(help), "%s%s", fi->help,
				 fi->attrs & LB_FA_RUN ? " (a run setting: not part of the id)"
						       : "");
		}
		lb_strbuf_add_usage(&sb, flag, arg, help);
	}
	snprintf(out, sizeof(out), "%s", sb.failed ? "" : lb_strbuf_str(&sb));
	lb_strbuf_release(&sb);
	return out;
}

/* ------------------------------------------------------------------ equality and checks */

int lb_layout_equal(const struct lb_layout *a, const struct lb_layout *b)
{
	for (int f = 0; f < LB_NFIELDS; f++) {
		const struct lb_field_info *fi = &lb_fields[f];
		char sa[LB_MAX_STAGES * 12 + 16], sb[LB_MAX_STAGES * 12 + 16];

		switch (fi->kind) {
		case LB_FK_NAME:
			if (strcmp((const char *)a + fi->off, (const char *)b + fi->off))
				return 0;
			break;
		case LB_FK_CHUNKS: /* 0 and 1 are both one block per stage */
			if (lb_layout_chunks(a) != lb_layout_chunks(b))
				return 0;
			break;
		case LB_FK_SPLIT: /* by the layers each chunk gets: the rule's equals none */
			if (lb_field_shown(a, f) != lb_field_shown(b, f))
				return 0;
			if (lb_field_shown(a, f)) {
				lb_field_text(a, f, sa, sizeof(sa));
				lb_field_text(b, f, sb, sizeof(sb));
				if (strcmp(sa, sb))
					return 0;
			}
			break;
		default:
			if (lb_field_get(a, f) != lb_field_get(b, f))
				return 0;
		}
	}
	return 1;
}

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		if (len)                                                                           \
			snprintf(reason, len, __VA_ARGS__);                                        \
		return -1;                                                                         \
	} while (0)

/* 1 when field f's value is in its kind's range (the kinds lb_layout_check reads). */
static int field_valid(const struct lb_layout *l, int f)
{
	long long v;

	switch (lb_fields[f].kind) {
	case LB_FK_NAME:
	case LB_FK_SPLIT:
	case LB_FK_CHUNKS:
	case LB_FK_SEED:
		return 1; /* the rules below */
	default:
		v = *cint_at(l, f);
	}
	switch (lb_fields[f].kind) {
	case LB_FK_POS:
		return v > 0;
	case LB_FK_COUNT:
		return v >= 0;
	case LB_FK_BOOL:
		return v == 0 || v == 1;
	case LB_FK_ENUM:
		return v >= 0 && v < lb_fields[f].n_names;
	case LB_FK_ZERO:
		return v >= 0 && v <= 2;
	default:
		return 1;
	}
}

/* 1 when every field is in its range: field_valid of each, made for each line of the field
 * list (a layout is checked for every point of a grid). */
#define VALID_NAME(key, v)   1
#define VALID_POS(key, v)    (v) > 0
#define VALID_COUNT(key, v)  (v) >= 0
#define VALID_BOOL(key, v)   ((v) == 0 || (v) == 1)
#define VALID_ZERO(key, v)   ((v) >= 0 && (v) <= 2)
#define VALID_CHUNKS(key, v) 1
#define VALID_ENUM(key, v)   (unsigned)(v) < NELEM(key##_names)
#define VALID_SPLIT(key, v)  1
#define VALID_SEED(key, v)   1
static int all_valid(const struct lb_layout *l)
{
	return 1
#define LB_MODEL_FIELD(ID, key, member, column, kind, ctype, dflt, attrs, head, names, help)       \
	&&VALID_##kind(key, l->model.member)
#define LB_LAYOUT_FIELD(ID, key, member, column, kind, ctype, dflt, attrs, head, names, help)      \
	&&VALID_##kind(key, l->member)
#include "common/layout_fields.def"
	    ;
}

/* The first field out of its range, kind by kind in this order, with its reason. */
static int field_ranges(const struct lb_layout *l, char *reason, size_t len)
{
	static const enum lb_field_kind order[] = {LB_FK_POS, LB_FK_COUNT, LB_FK_BOOL, LB_FK_ENUM,
						   LB_FK_ZERO};
	char what[128];
	int f;

	if (all_valid(l))
		return 0; /* the common case */
	for (size_t k = 0; k < NELEM(order); k++)
		for (f = 0; f < LB_NFIELDS; f++) {
			const char *key = lb_fields[f].key;
			int v = (int)lb_field_get(l, f);

			if (lb_fields[f].kind != order[k] || field_valid(l, f))
				continue;
			switch (order[k]) {
			case LB_FK_POS:
				FAIL("%s=%d must be positive", key, v);
			case LB_FK_COUNT:
				FAIL("%s=%d must not be negative", key, v);
			case LB_FK_BOOL:
				FAIL("%s=%d must be 0 or 1", key, v);
			case LB_FK_ENUM:
				FAIL("%s=%d is not %s", key, v,
				     names_words(f, 0, what, sizeof(what)));
			default:
				FAIL("%s=%d is not supported (%s)", key, v,
				     lb_field_expect(f, 0, what, sizeof(what)));
			}
		}
	return 0;
}

int lb_layout_check(const struct lb_layout *l, char *reason, size_t len)
{
	const struct lb_model *m = &l->model;
	long long world, gpus, per;
	size_t i;

	if (len)
		reason[0] = '\0';
	if (field_ranges(l, reason, len))
		return -1;
	if (m->hidden % m->n_heads)
		FAIL("%d heads do not divide hidden=%d", m->n_heads, m->hidden);
	if ((m->hidden / m->n_heads) % 2)
		FAIL("head dim %d (hidden=%d / %d heads) is odd; rope needs an even head dim",
		     m->hidden / m->n_heads, m->hidden, m->n_heads);
	if (m->n_heads % m->n_kv_heads)
		FAIL("%d kv heads do not divide %d heads", m->n_kv_heads, m->n_heads);
	if (m->n_heads % l->tp)
		FAIL("tp=%d does not divide %d heads", l->tp, m->n_heads);
	if (m->n_kv_heads % l->tp)
		FAIL("tp=%d does not divide %d kv heads", l->tp, m->n_kv_heads);
	if (m->ffn % l->tp)
		FAIL("tp=%d does not divide ffn=%d", l->tp, m->ffn);
	if (m->vocab % l->tp)
		FAIL("tp=%d does not divide vocab=%d", l->tp, m->vocab);
	if (l->pp > m->n_layers)
		FAIL("pp=%d exceeds %d layers; every pipeline stage needs at least one layer",
		     l->pp, m->n_layers);
	if (l->virtual_stages < 1 || l->virtual_stages > LB_MAX_VIRTUAL_STAGES)
		FAIL("virtual_stages=%d is not in 1..%d", l->virtual_stages, LB_MAX_VIRTUAL_STAGES);
	if (l->virtual_stages > 1) {
		int accum = lb_layout_accum_steps(l);

		if (l->pp < 2)
			FAIL("virtual_stages=%d needs pp > 1 (the interleaved schedule splits "
			     "pipeline stages)",
			     l->virtual_stages);
		if ((long long)l->pp * l->virtual_stages > m->n_layers)
			FAIL("pp*virtual_stages=%lld exceeds %d layers; every model chunk needs "
			     "at least one layer",
			     (long long)l->pp * l->virtual_stages, m->n_layers);
		if (accum > 0 && accum % l->pp)
			FAIL("virtual_stages=%d needs the micro-batches per step "
			     "(global_batch/(micro_batch*dp)=%d) to be a multiple of pp=%d (the "
			     "interleaved schedule's rule)",
			     l->virtual_stages, accum, l->pp);
	}
	if (l->n_stage_layers) {
		long long n = (long long)l->pp * l->virtual_stages, sum = 0;

		if (l->n_stage_layers < 0 || l->n_stage_layers > LB_MAX_STAGES)
			FAIL("stage_layers has %d entries; at most %d", l->n_stage_layers,
			     LB_MAX_STAGES);
		if (l->n_stage_layers != n) {
			if (l->virtual_stages > 1)
				FAIL("stage_layers has %d entries; pp*virtual_stages=%lld needs "
				     "one per model chunk",
				     l->n_stage_layers, n);
			FAIL("stage_layers has %d entries; pp=%d needs one per stage",
			     l->n_stage_layers, l->pp);
		}
		for (i = 0; i < (size_t)l->n_stage_layers; i++) {
			if (l->stage_layers[i] < 1)
				FAIL("stage_layers[%zu]=%d; every stage needs at least one layer",
				     i, l->stage_layers[i]);
			sum += l->stage_layers[i];
		}
		if (sum != m->n_layers)
			FAIL("stage_layers sum to %lld layers; the model has %d", sum, m->n_layers);
	}
	if (l->tp > l->gpus_per_node)
		FAIL("tp=%d exceeds gpus_per_node=%d; tensor parallelism stays within one node",
		     l->tp, l->gpus_per_node);
	world = mul3(l->tp, l->pp, l->dp);
	gpus = (long long)l->gpus_per_node * l->nodes;
	if (gpus != world)
		FAIL("gpus_per_node*nodes=%lld but tp*pp*dp=%lld", gpus, world);
	per = (long long)l->micro_batch * l->dp;
	if (l->global_batch % per)
		FAIL("global_batch=%d is not divisible by micro_batch*dp=%lld", l->global_batch,
		     per);
	if (l->sequence_parallel && l->tp < 2)
		FAIL("sequence_parallel=1 needs tp > 1");
	if (l->sequence_parallel && l->seq_len % l->tp)
		FAIL("sequence_parallel=1 needs seq_len=%d divisible by tp=%d", l->seq_len, l->tp);
	if (l->warmup >= l->steps)
		FAIL("warmup=%d must be below steps=%d", l->warmup, l->steps);
	return 0;
}
