/*
 * The layout record: defaults, canonical text and id, enum names, the one flag parser
 * and printer shared by the CLI, job scripts and trainer, and the validity rules with
 * their reasons. libc only. Canonical text uses fixed integer formats only (no floats,
 * no locale), so the id is the same on every machine.
 */
#include "common/layout.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "common/preset.h"
#include "common/util.h"

void lb_layout_init(struct lb_layout *l)
{
	memset(l, 0, sizeof(*l));
	lb_model_preset("tiny", &l->model);
	l->seq_len = 128;
	l->global_batch = 8;
	l->micro_batch = 1;
	l->tp = 1;
	l->pp = 1;
	l->dp = 1;
	l->gpus_per_node = 1;
	l->nodes = 1;
	l->sequence_parallel = 0;
	l->zero_stage = 0;
	l->checkpointing = LB_CKPT_NONE;
	l->attention = LB_ATTN_FLASH;
	l->norm = LB_NORM_FUSED;
	l->virtual_stages = 1;
	l->n_stage_layers = 0;
	l->steps = 10;
	l->warmup = 2;
	l->seed = 1;
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

/* ",virtual_stages" and the split as they appear in the canonical text and the flags:
 * fmt_v / fmt_s wrap the values (" virtual_stages=%d", " --virtual-stages %d"). */
static int pipeline_suffix(const struct lb_layout *l, char *buf, size_t len, const char *fmt_v,
			   const char *sep_s)
{
	size_t used = 0;
	int n;

	if (len)
		buf[0] = '\0';
#define ADD(...)                                                                                   \
	do {                                                                                       \
		n = snprintf(used < len ? buf + used : NULL, used < len ? len - used : 0,          \
			     __VA_ARGS__);                                                         \
		if (n < 0)                                                                         \
			return -1;                                                                 \
		used += (size_t)n;                                                                 \
	} while (0)
	if (lb_layout_chunks(l) > 1)
		ADD(fmt_v, l->virtual_stages);
	if (lb_layout_split_explicit(l)) {
		int k = l->n_stage_layers < LB_MAX_STAGES ? l->n_stage_layers : LB_MAX_STAGES;

		ADD("%s", sep_s);
		for (int i = 0; i < k; i++)
			ADD("%s%d", i ? "," : "", l->stage_layers[i]);
	}
#undef ADD
	return (int)used;
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

/* key (a literal: " layers=") and v in decimal, as "%d" writes it */
#define put_kv(b, key, v) put_kv_n(b, key, sizeof(key) - 1, v)
static void put_kv_n(struct tbuf *b, const char *key, size_t klen, int v)
{
	char d[12];
	int n = 12;
	unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;

	put_n(b, key, klen);
	do
		d[--n] = (char)('0' + u % 10);
	while ((u /= 10) && n > 1);
	if (v < 0)
		d[--n] = '-';
	put_n(b, d + n, (size_t)(12 - n));
}

int lb_layout_canonical(const struct lb_layout *l, char *buf, size_t len)
{
	const struct lb_model *m = &l->model;
	char pipe[LB_MAX_STAGES * 12 + 64];
	struct tbuf b = {buf, len, 0};

	if (pipeline_suffix(l, pipe, sizeof(pipe), " virtual_stages=%d", " stage_layers=") < 0)
		pipe[0] = '\0';
	put_s(&b, "model=");
	put_s(&b, m->name);
	put_kv(&b, " layers=", m->n_layers);
	put_kv(&b, " hidden=", m->hidden);
	put_kv(&b, " heads=", m->n_heads);
	put_kv(&b, " kv_heads=", m->n_kv_heads);
	put_kv(&b, " ffn=", m->ffn);
	put_kv(&b, " vocab=", m->vocab);
	put_kv(&b, " tied=", m->tied);
	put_kv(&b, " seq_len=", l->seq_len);
	put_kv(&b, " global_batch=", l->global_batch);
	put_kv(&b, " micro_batch=", l->micro_batch);
	put_kv(&b, " tp=", l->tp);
	put_kv(&b, " pp=", l->pp);
	put_kv(&b, " dp=", l->dp);
	put_kv(&b, " gpus_per_node=", l->gpus_per_node);
	put_kv(&b, " nodes=", l->nodes);
	put_kv(&b, " sequence_parallel=", l->sequence_parallel);
	put_kv(&b, " zero_stage=", l->zero_stage);
	put_s(&b, " checkpointing=");
	put_s(&b, lb_ckpt_name(l->checkpointing));
	put_s(&b, " attention=");
	put_s(&b, lb_attn_name(l->attention));
	put_s(&b, " norm=");
	put_s(&b, lb_norm_name(l->norm));
	put_s(&b, pipe);
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

static const char *const ckpt_names[] = {"none", "full", "selective"};
static const char *const attn_names[] = {"naive", "fused_softmax", "flash", "cudnn"};
static const char *const norm_names[] = {"unfused", "fused"};
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

const char *lb_ckpt_name(enum lb_ckpt c)
{
	return (unsigned)c < NELEM(ckpt_names) ? ckpt_names[c] : "invalid";
}

const char *lb_attn_name(enum lb_attn a)
{
	return (unsigned)a < NELEM(attn_names) ? attn_names[a] : "invalid";
}

int lb_attn_saves_lse(enum lb_attn a)
{
	return a == LB_ATTN_FLASH || a == LB_ATTN_CUDNN;
}

int lb_attn_gpu_only(enum lb_attn a)
{
	return a == LB_ATTN_CUDNN;
}

const char *lb_norm_name(enum lb_norm n)
{
	return (unsigned)n < NELEM(norm_names) ? norm_names[n] : "invalid";
}

static int name_index(const char *s, const char *const *names, size_t n)
{
	size_t i;

	if (!s)
		return -1;
	for (i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return (int)i;
	return -1;
}

int lb_ckpt_parse(const char *s, enum lb_ckpt *out)
{
	int i = name_index(s, ckpt_names, NELEM(ckpt_names));

	if (i < 0)
		return -1;
	*out = (enum lb_ckpt)i;
	return 0;
}

int lb_attn_parse(const char *s, enum lb_attn *out)
{
	int i = name_index(s, attn_names, NELEM(attn_names));

	if (i < 0)
		return -1;
	*out = (enum lb_attn)i;
	return 0;
}

int lb_norm_parse(const char *s, enum lb_norm *out)
{
	int i = name_index(s, norm_names, NELEM(norm_names));

	if (i < 0)
		return -1;
	*out = (enum lb_norm)i;
	return 0;
}

/* The flag table: one row per layout flag. */
enum flag_kind {
	F_MODEL,  /* preset name */
	F_POS,	  /* integer >= 1 */
	F_NONNEG, /* integer >= 0 */
	F_BOOL,	  /* 0 or 1 */
	F_ZERO,	  /* ZeRO stage: 0..3 parsed, lb_layout_check keeps {0,1,2} */
	F_CKPT,
	F_ATTN,
	F_NORM,
	F_U64,
	F_SPLIT,   /* comma-separated positive integers */
	F_VSTAGES, /* 1..LB_MAX_VIRTUAL_STAGES */
};

struct flag_def {
	const char *name;
	enum flag_kind kind;
	size_t off; /* offset of the field in struct lb_layout */
};

#define OFF(f) offsetof(struct lb_layout, f)
static const struct flag_def flags[] = {
    {"--model", F_MODEL, 0},
    {"--layers", F_POS, OFF(model.n_layers)},
    {"--hidden", F_POS, OFF(model.hidden)},
    {"--heads", F_POS, OFF(model.n_heads)},
    {"--kv-heads", F_POS, OFF(model.n_kv_heads)},
    {"--ffn", F_POS, OFF(model.ffn)},
    {"--vocab", F_POS, OFF(model.vocab)},
    {"--tied", F_BOOL, OFF(model.tied)},
    {"--seq-len", F_POS, OFF(seq_len)},
    {"--global-batch", F_POS, OFF(global_batch)},
    {"--micro-batch", F_POS, OFF(micro_batch)},
    {"--tp", F_POS, OFF(tp)},
    {"--pp", F_POS, OFF(pp)},
    {"--dp", F_POS, OFF(dp)},
    {"--gpus-per-node", F_POS, OFF(gpus_per_node)},
    {"--nodes", F_POS, OFF(nodes)},
    {"--sequence-parallel", F_BOOL, OFF(sequence_parallel)},
    {"--zero-stage", F_ZERO, OFF(zero_stage)},
    {"--checkpointing", F_CKPT, OFF(checkpointing)},
    {"--attention", F_ATTN, OFF(attention)},
    {"--norm", F_NORM, OFF(norm)},
    {"--virtual-stages", F_VSTAGES, OFF(virtual_stages)},
    {"--stage-layers", F_SPLIT, OFF(stage_layers)},
    {"--steps", F_POS, OFF(steps)},
    {"--warmup", F_NONNEG, OFF(warmup)},
    {"--seed", F_U64, OFF(seed)},
};
#undef OFF

static const struct flag_def *flag_find(const char *name)
{
	size_t i;

	for (i = 0; i < NELEM(flags); i++)
		if (!strcmp(name, flags[i].name))
			return &flags[i];
	return NULL;
}

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
static int set_split(struct lb_layout *l, const char *name, const char *value, char *err,
		     size_t errlen)
{
	int vals[LB_MAX_STAGES], n = 0;
	const char *p = value;

	if (!*value || !strcmp(value, "rule")) {
		l->n_stage_layers = 0;
		return 1;
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
	return 1;
}

int lb_layout_set_flag(struct lb_layout *l, const char *name, const char *value, char *err,
		       size_t errlen)
{
	const struct flag_def *f = flag_find(name);
	char *base = (char *)l;
	int *ip = NULL;
	int v;

	if (!f)
		return 0;
	if (!value) {
		snprintf(err, errlen, "%s: missing value", name);
		return -1;
	}
	if (f->kind != F_MODEL && f->kind != F_U64 && f->kind != F_SPLIT)
		ip = (int *)(base + f->off);
	switch (f->kind) {
	case F_MODEL: {
		struct lb_model m;
		char list[512];

		if (lb_model_preset(value, &m)) {
			preset_list(list, sizeof(list));
			snprintf(err, errlen, "%s: unknown preset '%s' (known: %s)", name, value,
				 list);
			return -1;
		}
		l->model = m;
		return 1;
	}
	case F_POS:
		if (lb_parse_int(value, 1, 1 << 30, &v)) {
			snprintf(err, errlen, "%s: expected a positive integer, got '%s'", name,
				 value);
			return -1;
		}
		*ip = v;
		return 1;
	case F_NONNEG:
		if (lb_parse_int(value, 0, 1 << 30, &v)) {
			snprintf(err, errlen, "%s: expected a non-negative integer, got '%s'", name,
				 value);
			return -1;
		}
		*ip = v;
		return 1;
	case F_BOOL:
		if (lb_parse_int(value, 0, 1, &v)) {
			snprintf(err, errlen, "%s: expected 0 or 1, got '%s'", name, value);
			return -1;
		}
		*ip = v;
		return 1;
	case F_ZERO:
		if (lb_parse_int(value, 0, 3, &v)) {
			snprintf(err, errlen, "%s: expected 0, 1 or 2, got '%s'", name, value);
			return -1;
		}
		*ip = v;
		return 1;
	case F_CKPT:
		if (lb_ckpt_parse(value, &l->checkpointing)) {
			snprintf(err, errlen, "%s: expected none, full or selective, got '%s'",
				 name, value);
			return -1;
		}
		return 1;
	case F_ATTN:
		if (lb_attn_parse(value, &l->attention)) {
			snprintf(err, errlen,
				 "%s: expected naive, fused_softmax, flash or cudnn, got '%s'",
				 name, value);
			return -1;
		}
		return 1;
	case F_NORM:
		if (lb_norm_parse(value, &l->norm)) {
			snprintf(err, errlen, "%s: expected unfused or fused, got '%s'", name,
				 value);
			return -1;
		}
		return 1;
	case F_U64:
		if (lb_parse_u64(value, &l->seed)) {
			snprintf(err, errlen, "%s: expected an unsigned integer, got '%s'", name,
				 value);
			return -1;
		}
		return 1;
	case F_VSTAGES:
		if (lb_parse_int(value, 1, LB_MAX_VIRTUAL_STAGES, &v)) {
			snprintf(err, errlen, "%s: expected an integer from 1 to %d, got '%s'",
				 name, LB_MAX_VIRTUAL_STAGES, value);
			return -1;
		}
		*ip = v;
		return 1;
	case F_SPLIT:
		return set_split(l, name, value, err, errlen);
	}
	return 0;
}

int lb_layout_parse_args(struct lb_layout *l, int argc, char **argv, char **rest, int *nrest,
			 char *err, size_t errlen)
{
	char name[64];
	const char *value;
	int i;

	*nrest = 0;
	for (i = 0; i < argc; i++) {
		const char *a = argv[i];
		const char *eq = strncmp(a, "--", 2) ? NULL : strchr(a, '=');
		size_t nlen = eq ? (size_t)(eq - a) : strlen(a);

		if (nlen >= sizeof(name)) {
			rest[(*nrest)++] = argv[i];
			continue;
		}
		memcpy(name, a, nlen);
		name[nlen] = '\0';
		if (!flag_find(name)) {
			rest[(*nrest)++] = argv[i];
			continue;
		}
		if (eq) {
			value = eq + 1;
		} else if (i + 1 < argc) {
			value = argv[++i];
		} else {
			snprintf(err, errlen, "%s: missing value", name);
			return -1;
		}
		if (lb_layout_set_flag(l, name, value, err, errlen) < 0)
			return -1;
	}
	return 0;
}

int lb_layout_to_flags(const struct lb_layout *l, char *buf, size_t len)
{
	const struct lb_model *m = &l->model;
	char pipe[LB_MAX_STAGES * 12 + 64];

	if (pipeline_suffix(l, pipe, sizeof(pipe), " --virtual-stages %d", " --stage-layers ") < 0)
		pipe[0] = '\0';
	return snprintf(buf, len,
			"--model %s --layers %d --hidden %d --heads %d --kv-heads %d --ffn %d "
			"--vocab %d --tied %d --seq-len %d --global-batch %d --micro-batch %d "
			"--tp %d --pp %d --dp %d --gpus-per-node %d --nodes %d "
			"--sequence-parallel %d --zero-stage %d --checkpointing %s --attention %s "
			"--norm %s%s --steps %d --warmup %d --seed %llu",
			m->name, m->n_layers, m->hidden, m->n_heads, m->n_kv_heads, m->ffn,
			m->vocab, m->tied, l->seq_len, l->global_batch, l->micro_batch, l->tp,
			l->pp, l->dp, l->gpus_per_node, l->nodes, l->sequence_parallel,
			l->zero_stage, lb_ckpt_name(l->checkpointing), lb_attn_name(l->attention),
			lb_norm_name(l->norm), pipe, l->steps, l->warmup,
			(unsigned long long)l->seed);
}

const char *lb_layout_flags_usage(void)
{
	return "layout flags (\"--flag VALUE\" or \"--flag=VALUE\"):\n"
	       "  --model NAME            model preset (llama-7b, llama-13b, llama-30b, "
	       "llama-65b,\n"
	       "                          llama-70b, tiny, tiny-gqa, tiny-deep, tiny-tied); "
	       "comes first\n"
	       "  --layers N --hidden N --heads N --kv-heads N --ffn N --vocab N --tied 0|1\n"
	       "                          override the preset's shape\n"
	       "  --seq-len N             tokens per sequence\n"
	       "  --global-batch N        sequences per optimizer step\n"
	       "  --micro-batch N         sequences per micro-batch per data-parallel rank\n"
	       "  --tp N --pp N --dp N    tensor, pipeline and data-parallel sizes\n"
	       "  --gpus-per-node N --nodes N\n"
	       "  --sequence-parallel 0|1 Megatron sequence parallelism (needs tp > 1)\n"
	       "  --zero-stage 0|1|2      ZeRO over dp: 1 shards the optimizer state, 2 the\n"
	       "                          gradients as well\n"
	       "  --checkpointing none|full|selective\n"
	       "  --attention naive|fused_softmax|flash|cudnn\n"
	       "  --norm unfused|fused    RMSNorm kernel\n"
	       "  --virtual-stages N      model chunks per pipeline stage (default 1); N > 1\n"
	       "                          runs the interleaved 1F1B schedule\n"
	       "  --stage-layers A,B,...  layers of each pipeline stage (pp*N entries, in\n"
	       "                          pipeline order), in place of the even split\n"
	       "  --steps N --warmup N --seed N   run settings (not part of the layout id)\n";
}

/* 1 when a and b split their layers alike (lb_layout_equal's other fields equal). */
static int same_split(const struct lb_layout *a, const struct lb_layout *b)
{
	char sa[LB_MAX_STAGES * 12 + 64], sb[LB_MAX_STAGES * 12 + 64];

	if (lb_layout_chunks(a) != lb_layout_chunks(b))
		return 0;
	if (pipeline_suffix(a, sa, sizeof(sa), " v%d", " s") < 0 ||
	    pipeline_suffix(b, sb, sizeof(sb), " v%d", " s") < 0)
		return 0;
	return !strcmp(sa, sb);
}

int lb_layout_equal(const struct lb_layout *a, const struct lb_layout *b)
{
	const struct lb_model *x = &a->model, *y = &b->model;

	return same_split(a, b) && !strcmp(x->name, y->name) && x->n_layers == y->n_layers &&
	       x->hidden == y->hidden && x->n_heads == y->n_heads &&
	       x->n_kv_heads == y->n_kv_heads && x->ffn == y->ffn && x->vocab == y->vocab &&
	       x->tied == y->tied && a->seq_len == b->seq_len &&
	       a->global_batch == b->global_batch && a->micro_batch == b->micro_batch &&
	       a->tp == b->tp && a->pp == b->pp && a->dp == b->dp &&
	       a->gpus_per_node == b->gpus_per_node && a->nodes == b->nodes &&
	       a->sequence_parallel == b->sequence_parallel && a->zero_stage == b->zero_stage &&
	       a->checkpointing == b->checkpointing && a->attention == b->attention &&
	       a->norm == b->norm && a->steps == b->steps && a->warmup == b->warmup &&
	       a->seed == b->seed;
}

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		if (len)                                                                           \
			snprintf(reason, len, __VA_ARGS__);                                        \
		return -1;                                                                         \
	} while (0)

int lb_layout_check(const struct lb_layout *l, char *reason, size_t len)
{
	const struct lb_model *m = &l->model;
	const struct {
		const char *name;
		int v;
	} pos[] = {
	    {"layers", m->n_layers},
	    {"hidden", m->hidden},
	    {"heads", m->n_heads},
	    {"kv_heads", m->n_kv_heads},
	    {"ffn", m->ffn},
	    {"vocab", m->vocab},
	    {"seq_len", l->seq_len},
	    {"global_batch", l->global_batch},
	    {"micro_batch", l->micro_batch},
	    {"tp", l->tp},
	    {"pp", l->pp},
	    {"dp", l->dp},
	    {"gpus_per_node", l->gpus_per_node},
	    {"nodes", l->nodes},
	    {"steps", l->steps},
	};
	long long world, gpus, per;
	size_t i;

	if (len)
		reason[0] = '\0';
	for (i = 0; i < NELEM(pos); i++)
		if (pos[i].v <= 0)
			FAIL("%s=%d must be positive", pos[i].name, pos[i].v);
	if (l->warmup < 0)
		FAIL("warmup=%d must not be negative", l->warmup);
	if (m->tied != 0 && m->tied != 1)
		FAIL("tied=%d must be 0 or 1", m->tied);
	if (l->sequence_parallel != 0 && l->sequence_parallel != 1)
		FAIL("sequence_parallel=%d must be 0 or 1", l->sequence_parallel);
	if ((unsigned)l->checkpointing >= NELEM(ckpt_names))
		FAIL("checkpointing=%d is not none, full or selective", (int)l->checkpointing);
	if ((unsigned)l->attention >= NELEM(attn_names))
		FAIL("attention=%d is not naive, fused_softmax, flash or cudnn", (int)l->attention);
	if ((unsigned)l->norm >= NELEM(norm_names))
		FAIL("norm=%d is not unfused or fused", (int)l->norm);
	if (l->zero_stage < 0 || l->zero_stage > 2)
		FAIL("zero_stage=%d is not supported (0, 1 or 2)", l->zero_stage);
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
