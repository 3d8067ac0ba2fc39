/*
 * The report's selection logic: runs in, bars out (see report/report.h). Each figure is a
 * key function (which runs are candidates, and which bar of their sweep they compete for)
 * plus one rule for picking a bar's winner, shared by every figure: the measured candidate
 * that ranks highest (report_run_better), else OOM when any candidate ran out of memory,
 * else FAILED with the most frequent failure class, else RUNNING.
 */
#include "report/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kernel_names.h"
#include "common/layout.h"
#include "common/util.h"

static const struct {
	const char *name;
	const char *title;
	int table_only; /* 1: the figure is its tables, without a plot */
} kinds[REPORT_KIND_COUNT] = {
#define KIND_ROW(id, name, title, table_only) [REPORT_##id] = {name, title, table_only},
    REPORT_KINDS(KIND_ROW)};

const char *report_kind_name(enum report_kind k)
{
	return k < REPORT_KIND_COUNT ? kinds[k].name : "?";
}

const char *report_kind_title(enum report_kind k)
{
	return k < REPORT_KIND_COUNT ? kinds[k].title : "?";
}

int report_kind_plotted(enum report_kind k)
{
	return k < REPORT_KIND_COUNT && !kinds[k].table_only;
}

int report_kind_parse(const char *s, enum report_kind *k)
{
	for (int i = 0; i < REPORT_KIND_COUNT; i++)
		if (!strcmp(s, kinds[i].name)) {
			*k = (enum report_kind)i;
			return 0;
		}
	return -1;
}

const char *report_health_name(enum report_health h)
{
	return results_health_name((enum results_health)h);
}

enum report_health report_health_parse(const char *text)
{
	for (int h = REPORT_HEALTH_OK; text && h <= REPORT_HEALTH_DIVERGED; h++)
		if (!strcmp(text, report_health_name((enum report_health)h)))
			return (enum report_health)h;
	return REPORT_HEALTH_UNKNOWN;
}

/* ---- the set of runs and its string pool ---- */

void report_runs_init(struct report_runs *rs)
{
	memset(rs, 0, sizeof(*rs));
}

void report_runs_release(struct report_runs *rs)
{
	for (size_t i = 0; i < rs->pool_cap; i++)
		free(rs->pool[i]);
	free(rs->pool);
	free(rs->v);
	report_runs_init(rs);
}

static int pool_grow(struct report_runs *rs)
{
	size_t cap = rs->pool_cap ? rs->pool_cap * 2 : 64;
	char **t = calloc(cap, sizeof(*t));

	if (!t)
		return -1;
	for (size_t i = 0; i < rs->pool_cap; i++) {
		char *s = rs->pool[i];
		if (!s)
			continue;
		size_t h = (size_t)lb_fnv1a64(s, strlen(s)) & (cap - 1);
		while (t[h])
			h = (h + 1) & (cap - 1);
		t[h] = s;
	}
	free(rs->pool);
	rs->pool = t;
	rs->pool_cap = cap;
	return 0;
}

const char *report_runs_intern(struct report_runs *rs, const char *s)
{
	size_t len, h;

	if (!s)
		s = "";
	if ((rs->pool_n + 1) * 2 > rs->pool_cap && pool_grow(rs))
		return NULL;
	len = strlen(s);
	h = (size_t)lb_fnv1a64(s, len) & (rs->pool_cap - 1);
	while (rs->pool[h]) {
		if (!strcmp(rs->pool[h], s))
			return rs->pool[h];
		h = (h + 1) & (rs->pool_cap - 1);
	}
	rs->pool[h] = malloc(len + 1);
	if (!rs->pool[h])
		return NULL;
	memcpy(rs->pool[h], s, len + 1);
	rs->pool_n++;
	return rs->pool[h];
}

int report_runs_add(struct report_runs *rs, const struct report_run *r)
{
	struct report_run c = *r;

	if (lb_grow(&rs->v, rs->n, &rs->cap, 256, sizeof(*rs->v)))
		return -1;
	c.sweep = report_runs_intern(rs, r->sweep);
	c.label = report_runs_intern(rs, r->label);
	c.model = report_runs_intern(rs, r->model);
	c.checkpointing = report_runs_intern(rs, r->checkpointing);
	c.attention = report_runs_intern(rs, r->attention);
	c.norm = report_runs_intern(rs, r->norm);
	c.failure_class = r->failure_class ? report_runs_intern(rs, r->failure_class) : NULL;
	if (!c.sweep || !c.label || !c.model || !c.checkpointing || !c.attention || !c.norm ||
	    (r->failure_class && !c.failure_class))
		return -1;
	rs->v[rs->n++] = c;
	return 0;
}

int report_run_has_phases(const struct report_run *r)
{
	for (int k = 0; k < REPORT_PHASE_COUNT; k++)
		if (r->phase[k] >= 0)
			return 1;
	return 0;
}

void report_run_set_rank_mem(struct report_run *r, const char *json)
{
	const char *p = json;
	int n = 0;

	r->rank_n = 0;
	if (!p || *p++ != '[')
		return;
	for (;;) {
		char *end;
		long long v;
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == ']')
			break;
		if (*p < '0' || *p > '9')
			return;
		v = strtoll(p, &end, 10);
		if (end == p || v < 0)
			return;
		p = end;
		if (!n || v < r->rank_mem_min)
			r->rank_mem_min = v;
		if (!n || v > r->rank_mem_max)
			r->rank_mem_max = v;
		n++;
	}
	r->rank_n = n;
}

/* ---- ranking and kernel classes ---- */

int report_run_measured(const struct report_run *r)
{
	return r->status == REPORT_RUN_OK && (r->has_mfu || r->has_tflops);
}

int report_run_better(const struct report_run *a, const struct report_run *b)
{
	if (a->has_mfu != b->has_mfu)
		return a->has_mfu;
	if (a->has_mfu && a->mfu != b->mfu)
		return a->mfu > b->mfu;
	if (a->has_tflops != b->has_tflops)
		return a->has_tflops;
	if (a->has_tflops && a->tflops != b->tflops)
		return a->tflops > b->tflops;
	return a->run_id < b->run_id;
}

int report_run_is_flash_rms(const struct report_run *r)
{
	if (r->paper)
		return !strcmp(r->label, LB_KERNEL_FLASH2_RMS);
	return !strcmp(r->attention, "flash") && !strcmp(r->norm, "fused");
}

int report_run_is_flash2(const struct report_run *r)
{
	if (r->paper)
		return !strcmp(r->label, LB_KERNEL_FLASH2);
	return !strcmp(r->attention, "flash") && !strcmp(r->norm, "unfused");
}

static int is_checkpointed(const struct report_run *r)
{
	return strcmp(r->checkpointing, "none") != 0 && r->checkpointing[0];
}

/* Order of kernel bars: the paper's kernels in the paper's order (slowest first), then our
 * "<attention>+<norm>" labels by kernel, then any other label (by name). */
static int kernel_rank(const char *label)
{
	int paper = lb_kernel_name_index(label);
	char attn[32];
	const char *plus;
	enum lb_attn a;
	enum lb_norm n;

	if (paper >= 0)
		return paper;
	plus = strchr(label, '+');
	if (plus && (size_t)(plus - label) < sizeof(attn)) {
		memcpy(attn, label, (size_t)(plus - label));
		attn[plus - label] = 0;
		if (!lb_attn_parse(attn, &a) && !lb_norm_parse(plus + 1, &n))
			return 10 + 2 * (int)a + (int)n;
	}
	return 100;
}

/* ---- building figures ---- */

struct cand {
	const struct report_run *r;
	int k1, k2;	/* bar key, compared first */
	const char *ks; /* bar key text (pool string or NULL), compared last */
};

static int cand_cmp(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;
	int c;

	if (a->k1 != b->k1)
		return a->k1 < b->k1 ? -1 : 1;
	if (a->k2 != b->k2)
		return a->k2 < b->k2 ? -1 : 1;
	if (a->ks != b->ks) {
		c = strcmp(a->ks ? a->ks : "", b->ks ? b->ks : "");
		if (c)
			return c;
	}
	return a->r->run_id < b->r->run_id ? -1 : a->r->run_id > b->r->run_id;
}

static int same_key(const struct cand *a, const struct cand *b)
{
	return a->k1 == b->k1 && a->k2 == b->k2 && a->ks == b->ks;
}

struct builder {
	struct report_runs *rs;
	struct report_figure *fig;
	size_t cap;
	struct cand *cands; /* scratch, one per run of the group */
	int failed;	    /* out of memory */
	int keep_diverged;  /* 1: diverged runs compete for bars */
	char *left;	    /* per run of rs: 1 once counted as left out (diverged) */
};

/* 1 when r is left out of the bar figures: a measured run that diverged. */
static int left_out(const struct builder *b, const struct report_run *r)
{
	return !b->keep_diverged && r->health == REPORT_HEALTH_DIVERGED && report_run_measured(r);
}

/* A new bar of the group titled group, whose sweep, model, sequence length and GPU count
 * are those of run of. */
static struct report_bar *bar_new(struct builder *b, const char *group, const struct report_run *of,
				  const char *series)
{
	struct report_bar *bar;

	if (!b->failed && lb_grow(&b->fig->bars, b->fig->n, &b->cap, 64, sizeof(*b->fig->bars)))
		b->failed = 1;
	if (b->failed)
		return NULL;
	bar = &b->fig->bars[b->fig->n++];
	memset(bar, 0, sizeof(*bar));
	bar->group = group;
	bar->sweep = of->sweep;
	bar->model = of->model;
	bar->seq_len = of->seq_len;
	bar->gpus = of->gpus;
	bar->series = report_runs_intern(b->rs, series);
	if (!bar->series) {
		b->failed = 1;
		b->fig->n--;
		return NULL;
	}
	bar->micro_batch = bar->tp = bar->pp = -1;
	return bar;
}

/* The bar shows run r, in the given state: the run and the layout fields it defines. */
static void bar_take(struct report_bar *bar, const struct report_run *r,
		     enum report_bar_state state)
{
	bar->state = state;
	bar->run = r;
	bar->micro_batch = r->micro_batch;
	bar->tp = r->tp;
	bar->pp = r->pp;
	bar->checkpointing = r->checkpointing;
}

/* Decide a bar from its candidates c[0..n): the best measured run, leaving out diverged
 * ones (unless kept), which are counted once per figure; else DIVERGED when they were all
 * it had that ran, else OOM, FAILED or RUNNING. */
static void pick(struct builder *bd, struct report_bar *bar, const struct cand *c, size_t n)
{
	const struct report_run *best = NULL;
	const char *classes[16];
	size_t counts[16], nclass = 0;
	int oom = 0, failed = 0, diverged = 0;

	for (size_t i = 0; i < n; i++) {
		const struct report_run *r = c[i].r;
		const char *cls;

		if (left_out(bd, r)) {
			size_t at = (size_t)(r - bd->rs->v);
			diverged = 1;
			if (at < bd->rs->n && !bd->left[at]) {
				bd->left[at] = 1;
				bd->fig->diverged_left_out++;
			}
			continue;
		}
		if (report_run_measured(r)) {
			if (!best || report_run_better(r, best))
				best = r;
			continue;
		}
		if (r->status == REPORT_RUN_RUNNING)
			continue;
		failed = 1;
		cls = r->status == REPORT_RUN_OK		? "unmeasured"
		      : r->failure_class && r->failure_class[0] ? r->failure_class
								: "error";
		if (!strcmp(cls, "oom"))
			oom = 1;
		size_t k = 0;
		while (k < nclass && strcmp(classes[k], cls))
			k++;
		if (k == nclass && nclass < 16) {
			classes[nclass] = cls;
			counts[nclass++] = 0;
		}
		if (k < nclass)
			counts[k]++;
	}
	if (best) {
		bar_take(bar, best, REPORT_BAR_VALUE);
	} else if (diverged) {
		bar->state = REPORT_BAR_DIVERGED;
	} else if (oom) {
		bar->state = REPORT_BAR_OOM;
	} else if (failed) {
		size_t m = 0;
		for (size_t k = 1; k < nclass; k++)
			if (counts[k] > counts[m] ||
			    (counts[k] == counts[m] && strcmp(classes[k], classes[m]) < 0))
				m = k;
		bar->state = REPORT_BAR_FAILED;
		bar->failure_class = classes[m];
	} else {
		bar->state = REPORT_BAR_RUNNING;
	}
}

/* Candidate key of run r for figure kind; returns 0 when r is not a candidate. */
static int cand_key(enum report_kind kind, const struct report_run *r, struct cand *c)
{
	c->r = r;
	c->k1 = c->k2 = 0;
	c->ks = NULL;
	switch (kind) {
	case REPORT_KERNELS:
		c->k1 = kernel_rank(r->label);
		c->ks = r->label;
		return 1;
	case REPORT_CHECKPOINTING:
		if (is_checkpointed(r)) {
			c->k1 = 1;
			return 1;
		}
		return !report_run_is_flash_rms(r);
	case REPORT_MICROBATCH:
		c->k1 = r->micro_batch;
		return report_run_is_flash2(r);
	case REPORT_TP_PP:
		c->k1 = r->tp;
		c->k2 = r->pp;
		return report_run_is_flash_rms(r) && r->micro_batch == 1 && !is_checkpointed(r);
	case REPORT_SEQPAR:
		c->k1 = r->sequence_parallel ? 1 : 0;
		return 1;
	default:
		return 0;
	}
}

static void series_name(enum report_kind kind, const struct cand *c, char *buf, size_t len)
{
	switch (kind) {
	case REPORT_KERNELS:
		snprintf(buf, len, "%s", c->ks);
		break;
	case REPORT_CHECKPOINTING:
		snprintf(buf, len, "%s", c->k1 ? "enabled" : "disabled");
		break;
	case REPORT_MICROBATCH:
		snprintf(buf, len, "%d", c->k1);
		break;
	case REPORT_TP_PP:
		snprintf(buf, len, "%d,%d", c->k1, c->k2);
		break;
	case REPORT_SEQPAR:
		snprintf(buf, len, "%s", c->k1 ? "on" : "off");
		break;
	default:
		buf[0] = 0;
	}
}

/* One group (the runs g[0..n), titled group) of a keyed figure. */
static void build_keyed(struct builder *b, enum report_kind kind, const char *group,
			const struct report_run **g, size_t n)
{
	size_t nc = 0, i, j;
	char series[64];

	if (kind == REPORT_SEQPAR) {
		int any_on = 0;
		for (i = 0; i < n; i++)
			any_on |= g[i]->sequence_parallel != 0;
		if (!any_on)
			return;
	}
	for (i = 0; i < n; i++)
		if (cand_key(kind, g[i], &b->cands[nc]))
			nc++;
	qsort(b->cands, nc, sizeof(*b->cands), cand_cmp);
	for (i = 0; i < nc; i = j) {
		for (j = i + 1; j < nc && same_key(&b->cands[i], &b->cands[j]); j++)
			;
		const char *sname = series;
		if (kind == REPORT_KERNELS)
			sname = b->cands[i].ks;
		else
			series_name(kind, &b->cands[i], series, sizeof(series));
		struct report_bar *bar = bar_new(b, group, g[0], sname);
		if (!bar)
			return;
		if (kind == REPORT_MICROBATCH)
			bar->micro_batch = b->cands[i].k1;
		if (kind == REPORT_TP_PP) {
			bar->micro_batch = 1;
			bar->tp = b->cands[i].k1;
			bar->pp = b->cands[i].k2;
			bar->checkpointing = report_runs_intern(b->rs, "none");
		}
		bar->order1 = b->cands[i].k1;
		bar->order2 = b->cands[i].k2;
		pick(b, bar, &b->cands[i], j - i);
	}
}

/* The RMSNorm comparison for one group. */
static void build_rms(struct builder *b, const char *group, const struct report_run **g, size_t n)
{
	size_t nr = 0, nf = 0, i;
	struct cand *rms = b->cands, *flash2 = b->cands + n;
	struct report_bar *bar;

	for (i = 0; i < n; i++) {
		struct cand c = {g[i], 0, 0, NULL};
		if (report_run_is_flash_rms(g[i]))
			rms[nr++] = c;
		else if (report_run_is_flash2(g[i]))
			flash2[nf++] = c;
	}
	if (!nr && !nf)
		return;
	const struct report_run *rbest = NULL;
	if (nr) {
		bar = bar_new(b, group, g[0], "rms_best");
		if (!bar)
			return;
		pick(b, bar, rms, nr);
		rbest = bar->run;
	}
	if (nf) {
		bar = bar_new(b, group, g[0], "no_rms_best");
		if (!bar)
			return;
		bar->order1 = 1;
		pick(b, bar, flash2, nf);
	}
	if (rbest) {
		size_t m = 0;
		for (i = 0; i < nf; i++)
			if (flash2[i].r->micro_batch == rbest->micro_batch &&
			    flash2[i].r->tp == rbest->tp && flash2[i].r->pp == rbest->pp)
				flash2[m++] = flash2[i];
		if (m) {
			bar = bar_new(b, group, g[0], "no_rms_at_rms_layout");
			if (!bar)
				return;
			bar->order1 = 2;
			bar->micro_batch = rbest->micro_batch;
			bar->tp = rbest->tp;
			bar->pp = rbest->pp;
			pick(b, bar, flash2, m);
		}
	}
}

/* Model, sequence length, GPU count: the order of groups and of the best table. */
static int shape_cmp(const struct report_run *a, const struct report_run *b)
{
	int c = a->model == b->model ? 0 : strcmp(a->model, b->model);

	if (c)
		return c;
	if (a->seq_len != b->seq_len)
		return a->seq_len < b->seq_len ? -1 : 1;
	if (a->gpus != b->gpus)
		return a->gpus < b->gpus ? -1 : 1;
	return 0;
}

/* Group order: model, sequence length, GPU count, sweep; 0 when a and b share a group. */
static int group_cmp(const struct report_run *a, const struct report_run *b)
{
	int c = shape_cmp(a, b);

	if (c)
		return c;
	return a->sweep == b->sweep ? 0 : strcmp(a->sweep, b->sweep);
}

int report_run_by_id(const void *pa, const void *pb)
{
	const struct report_run *a = *(const struct report_run *const *)pa;
	const struct report_run *b = *(const struct report_run *const *)pb;

	return a->run_id < b->run_id ? -1 : a->run_id > b->run_id;
}

static int run_by_group(const void *pa, const void *pb)
{
	int c =
	    group_cmp(*(const struct report_run *const *)pa, *(const struct report_run *const *)pb);

	return c ? c : report_run_by_id(pa, pb);
}

static void group_name(const char *model, int seq_len, int gpus, char *buf, size_t len)
{
	snprintf(buf, len, "%s, seq %d, %d GPU%s", model, seq_len, gpus, gpus == 1 ? "" : "s");
}

void report_bar_group_name(const struct report_bar *b, char *buf, size_t len)
{
	group_name(b->model ? b->model : "", b->seq_len, b->gpus, buf, len);
}

static int run_by_best_group(const void *pa, const void *pb)
{
	const struct report_run *a = *(const struct report_run *const *)pa;
	const struct report_run *b = *(const struct report_run *const *)pb;
	int c = shape_cmp(a, b);

	if (c)
		return c;
	if (a != b)
		return report_run_better(a, b) ? -1 : 1;
	return 0;
}

int report_runs_best(const struct report_runs *rs, struct report_runs *out)
{
	return report_runs_best_opts(rs, 0, out, NULL);
}

int report_runs_best_opts(const struct report_runs *rs, int keep_diverged, struct report_runs *out,
			  size_t *left_out)
{
	const struct report_run **v = malloc((rs->n ? rs->n : 1) * sizeof(*v));
	size_t n = 0, left = 0;
	int rc = 0;

	if (!v)
		return -1;
	for (size_t i = 0; i < rs->n; i++) {
		if (rs->v[i].status != REPORT_RUN_OK)
			continue;
		if (!keep_diverged && rs->v[i].health == REPORT_HEALTH_DIVERGED) {
			left++;
			continue;
		}
		v[n++] = &rs->v[i];
	}
	if (left_out)
		*left_out = left;
	qsort(v, n, sizeof(*v), run_by_best_group);
	for (size_t i = 0; i < n && !rc; i++)
		if (i == 0 || strcmp(v[i]->model, v[i - 1]->model) ||
		    v[i]->seq_len != v[i - 1]->seq_len || v[i]->gpus != v[i - 1]->gpus)
			rc = report_runs_add(out, v[i]);
	free(v);
	return rc;
}

/* The phases figure for one group: a row per ok run of ours, when any has phase times. */
/* A bar of the per-run figures (phases, memory): the run itself, in the given state, with
 * its label as the series and its layout fields. NULL when out of memory. */
static struct report_bar *run_bar(struct builder *b, const char *group, const struct report_run *r,
				  enum report_bar_state state)
{
	struct report_bar *bar = bar_new(b, group, r, r->label);

	if (bar)
		bar_take(bar, r, state);
	return bar;
}

static void build_phases(struct builder *b, const char *group, const struct report_run **g,
			 size_t n)
{
	int any = 0;

	for (size_t i = 0; i < n; i++)
		if (!g[i]->paper && g[i]->status == REPORT_RUN_OK && report_run_has_phases(g[i]))
			any = 1;
	if (!any)
		return;
	for (size_t i = 0; i < n; i++) {
		if (g[i]->paper || g[i]->status != REPORT_RUN_OK)
			continue;
		if (!run_bar(b, group, g[i], REPORT_BAR_VALUE))
			return;
	}
}

/* 1 when the memory figure shows r: a run of ours with a model figure that fit (a peak) or
 * ran out of memory. */
static int memory_shown(const struct report_run *r)
{
	if (r->paper || r->model_mem < 0)
		return 0;
	if (r->status == REPORT_RUN_OK)
		return r->peak_mem >= 0;
	return r->status == REPORT_RUN_FAILED && r->failure_class &&
	       !strcmp(r->failure_class, "oom");
}

static void build_memory(struct builder *b, const char *group, const struct report_run **g,
			 size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!memory_shown(g[i]))
			continue;
		if (!run_bar(b, group, g[i],
			     g[i]->status == REPORT_RUN_OK ? REPORT_BAR_VALUE : REPORT_BAR_OOM))
			return;
	}
}

static void build_best(struct builder *b, const struct report_run **v, size_t n)
{
	char group[256];

	qsort(v, n, sizeof(*v), run_by_best_group);
	for (size_t i = 0; i < n; i++) {
		snprintf(group, sizeof(group), "%s/%d/%d", v[i]->model, v[i]->seq_len, v[i]->gpus);
		const char *gp = report_runs_intern(b->rs, group);
		if (!gp) {
			b->failed = 1;
			return;
		}
		struct report_bar *bar = bar_new(b, gp, v[i], v[i]->label);
		if (!bar)
			return;
		bar->order1 = kernel_rank(v[i]->label);
		struct cand c = {v[i], 0, 0, NULL};
		pick(b, bar, &c, 1);
	}
}

int report_figure_build(struct report_runs *rs, enum report_kind kind, const char *sweep,
			struct report_figure *out)
{
	static const struct report_build_opts defaults;

	return report_figure_build_opts(rs, kind, sweep, &defaults, out);
}

int report_figure_build_opts(struct report_runs *rs, enum report_kind kind, const char *sweep,
			     const struct report_build_opts *o, struct report_figure *out)
{
	struct builder b = {rs, out, 0, NULL, 0, o->keep_diverged, NULL};
	const struct report_run **v = NULL;
	size_t n = 0, i, j;

	memset(out, 0, sizeof(*out));
	out->kind = kind;
	if (rs->n) {
		v = malloc(rs->n * sizeof(*v));
		b.cands = malloc(2 * rs->n * sizeof(*b.cands));
		b.left = calloc(rs->n, 1);
		if (!v || !b.cands || !b.left) {
			b.failed = 1;
			goto out_free;
		}
	}
	for (i = 0; i < rs->n; i++)
		if (!sweep || !strcmp(rs->v[i].sweep, sweep))
			v[n++] = &rs->v[i];
	if (kind == REPORT_BEST) {
		build_best(&b, v, n);
		goto out_free;
	}
	qsort(v, n, sizeof(*v), run_by_group);
	for (i = 0; i < n && !b.failed; i = j) {
		char title[512], name[256];
		for (j = i + 1; j < n && !group_cmp(v[j], v[i]); j++)
			;
		group_name(v[i]->model, v[i]->seq_len, v[i]->gpus, name, sizeof(name));
		snprintf(title, sizeof(title), "%s (sweep %s)", name, v[i]->sweep);
		const char *group = report_runs_intern(rs, title);
		if (!group) {
			b.failed = 1;
			break;
		}
		if (kind == REPORT_RMS)
			build_rms(&b, group, v + i, j - i);
		else if (kind == REPORT_PHASES)
			build_phases(&b, group, v + i, j - i);
		else if (kind == REPORT_MEMORY)
			build_memory(&b, group, v + i, j - i);
		else
			build_keyed(&b, kind, group, v + i, j - i);
	}
out_free:
	free(b.cands);
	free(b.left);
	free(v);
	if (b.failed)
		report_figure_release(out);
	return b.failed ? -1 : 0;
}

void report_figure_release(struct report_figure *f)
{
	free(f->bars);
	f->bars = NULL;
	f->n = 0;
}

size_t report_figure_groups(const struct report_figure *f)
{
	size_t g = 0;

	for (size_t i = 0; i < f->n; i++)
		if (i == 0 || f->bars[i].group != f->bars[i - 1].group)
			g++;
	return g;
}

static int bar_series_cmp(const void *pa, const void *pb)
{
	const struct report_bar *a = *(const struct report_bar *const *)pa;
	const struct report_bar *b = *(const struct report_bar *const *)pb;

	if (a->order1 != b->order1)
		return a->order1 < b->order1 ? -1 : 1;
	if (a->order2 != b->order2)
		return a->order2 < b->order2 ? -1 : 1;
	return a->series == b->series ? 0 : strcmp(a->series, b->series);
}

size_t report_figure_series(const struct report_figure *f, const char ***series)
{
	const struct report_bar **v;
	size_t n = 0;

	*series = NULL;
	if (!f->n)
		return 0;
	v = malloc(f->n * sizeof(*v));
	*series = malloc(f->n * sizeof(**series));
	if (!v || !*series) {
		free(v);
		free(*series);
		*series = NULL;
		return 0;
	}
	for (size_t i = 0; i < f->n; i++)
		v[i] = &f->bars[i];
	qsort(v, f->n, sizeof(*v), bar_series_cmp);
	for (size_t i = 0; i < f->n; i++)
		if (!n || (*series)[n - 1] != v[i]->series)
			(*series)[n++] = v[i]->series;
	free(v);
	return n;
}

int report_figure_all_mfu(const struct report_figure *f)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->bars[i].state == REPORT_BAR_VALUE && !f->bars[i].run->has_mfu)
			return 0;
	return 1;
}

double report_bar_step_sd(const struct report_bar *b)
{
	if (b->state != REPORT_BAR_VALUE || b->run->step_time_sd < 0 || b->run->n_steps < 2)
		return -1;
	return b->run->step_time_sd;
}

double report_bar_mfu_sd(const struct report_bar *b)
{
	double sd = report_bar_step_sd(b);

	if (sd < 0 || !b->run->has_mfu || !(b->run->step_time > 0))
		return -1;
	return b->run->mfu * sd / b->run->step_time;
}

void report_bar_mfu_text(const struct report_bar *b, const char *unknown_text, char *buf,
			 size_t len)
{
	switch (b->state) {
	case REPORT_BAR_VALUE:
		if (b->run->has_mfu)
			snprintf(buf, len, "%.2f", b->run->mfu * 100.0);
		else
			snprintf(buf, len, "%s", unknown_text);
		break;
	case REPORT_BAR_OOM:
		snprintf(buf, len, "OOM");
		break;
	case REPORT_BAR_FAILED:
		snprintf(buf, len, "FAILED(%s)", b->failure_class);
		break;
	case REPORT_BAR_RUNNING:
		snprintf(buf, len, "RUNNING");
		break;
	case REPORT_BAR_DIVERGED:
		snprintf(buf, len, "DIVERGED");
		break;
	}
}
