/*
 * The planner: a parsed spec (sweeps/spec.c) expanded into its grid points, each turned
 * into a layout record and judged. Per union member (or the top level alone), models are
 * the outermost loop and the grid/zip groups an odometer whose last group varies
 * fastest. A point gets the preset with its overrides, the fixed values, its own values,
 * the derived dp / gpus / nodes and the run settings; `where` drops it or keeps it; then
 * lb_layout_check (invalid, with its reason) and lb_memory_estimate against the GPU's
 * memory (oom, with "needs X GiB of Y GiB") decide its status. A point whose layout id
 * repeats an earlier one is merged into it. No per-point allocation: entries live in one
 * growing array, duplicates are found with an open-addressing table of ids.
 */
#include "sweeps/sweep.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/embed.h"
#include "common/model.h"
#include "sweeps/spec.h"

#define GIB	       (1024.0 * 1024.0 * 1024.0)
#define SPEC_MAX_BYTES (16u << 20)

const char *plan_status_name(enum plan_status s)
{
	switch (s) {
	case PLAN_OK:
		return "ok";
	case PLAN_OOM:
		return "oom";
	case PLAN_INVALID:
		return "invalid";
	}
	return "?";
}

/* One part of the spec as expanded: the top level merged with a union member. */
struct merged {
	long long fixed[SF_NFIELDS];
	unsigned char has_fixed[SF_NFIELDS];
	unsigned char has[SF_NFIELDS]; /* fixed or swept */
	const struct spec_group **groups;
	int ngroups;
	const struct spec_part *wparts[2]; /* parts whose `where` applies */
	int nwhere;
};

/* Open-addressing set of layout ids -> entry index. */
struct idset {
	uint64_t *keys;
	uint32_t *idx; /* entry index + 1; 0 = empty */
	size_t cap, n;
};

static int idset_grow(struct idset *s)
{
	size_t cap = s->cap ? s->cap * 2 : 1024, i;
	uint64_t *keys = calloc(cap, sizeof(*keys));
	uint32_t *idx = calloc(cap, sizeof(*idx));

	if (!keys || !idx) {
		free(keys);
		free(idx);
		return -1;
	}
	for (i = 0; i < s->cap; i++) {
		size_t j;

		if (!s->idx[i])
			continue;
		for (j = s->keys[i] & (cap - 1); idx[j]; j = (j + 1) & (cap - 1))
			;
		keys[j] = s->keys[i];
		idx[j] = s->idx[i];
	}
	free(s->keys);
	free(s->idx);
	s->keys = keys;
	s->idx = idx;
	s->cap = cap;
	return 0;
}

static void idset_release(struct idset *s)
{
	free(s->keys);
	free(s->idx);
	memset(s, 0, sizeof(*s));
}

struct planner {
	const struct sweep_spec *spec;
	struct sweep_plan *plan;
	size_t cap;
	struct idset ids;
	char *err;
	size_t errlen;
	size_t point; /* 0-based index of the point being planned */
};

static void set_field(const struct sweep_spec *s, struct lb_layout *l, int f, long long v,
		      long long *gpus, const char **label)
{
	switch (f) {
	case SF_LAYERS:
		l->model.n_layers = (int)v;
		break;
	case SF_HIDDEN:
		l->model.hidden = (int)v;
		break;
	case SF_HEADS:
		l->model.n_heads = (int)v;
		break;
	case SF_KV_HEADS:
		l->model.n_kv_heads = (int)v;
		break;
	case SF_FFN:
		l->model.ffn = (int)v;
		break;
	case SF_VOCAB:
		l->model.vocab = (int)v;
		break;
	case SF_TIED:
		l->model.tied = (int)v;
		break;
	case SF_SEQ_LEN:
		l->seq_len = (int)v;
		break;
	case SF_GLOBAL_BATCH:
		l->global_batch = (int)v;
		break;
	case SF_MICRO_BATCH:
		l->micro_batch = (int)v;
		break;
	case SF_TP:
		l->tp = (int)v;
		break;
	case SF_PP:
		l->pp = (int)v;
		break;
	case SF_DP:
		l->dp = (int)v;
		break;
	case SF_GPUS:
		*gpus = v;
		break;
	case SF_SEQUENCE_PARALLEL:
		l->sequence_parallel = (int)v;
		break;
	case SF_ZERO_STAGE:
		l->zero_stage = (int)v;
		break;
	case SF_CHECKPOINTING:
		l->checkpointing = (enum lb_ckpt)v;
		break;
	case SF_ATTENTION:
		l->attention = (enum lb_attn)v;
		break;
	case SF_NORM:
		l->norm = (enum lb_norm)v;
		break;
	case SF_KERNEL:
		l->attention = s->kernels[v].attention;
		l->norm = s->kernels[v].norm;
		*label = s->kernels[v].name;
		break;
	}
}

static int plan_fail(struct planner *pl, const char *jpath, const char *msg)
{
	snprintf(pl->err, pl->errlen, "%s: %s: %s", pl->spec->path, jpath, msg);
	return -1;
}

/* Add a judged point, or merge it into the entry with the same layout id. */
static int record(struct planner *pl, const struct plan_entry *e)
{
	struct sweep_plan *p = pl->plan;
	struct idset *s = &pl->ids;
	uint64_t key = strtoull(e->id, NULL, 16);
	size_t j;

	if ((s->n + 1) * 2 > s->cap && idset_grow(s))
		return plan_fail(pl, "(plan)", "out of memory");
	for (j = key & (s->cap - 1); s->idx[j]; j = (j + 1) & (s->cap - 1)) {
		struct plan_entry *old;
		size_t n;

		if (s->keys[j] != key)
			continue;
		old = &p->entries[s->idx[j] - 1];
		if (!lb_layout_equal(&old->layout, &e->layout))
			continue; /* a hash collision: a different layout */
		p->n_duplicates++;
		if (e->label[0]) {
			const char *hit = strstr(old->label, e->label);
			size_t ln = strlen(e->label);
			int listed = hit && (hit == old->label || hit[-1] == '|') &&
				     (hit[ln] == '\0' || hit[ln] == '|');

			n = strlen(old->label);
			if (!listed && n + 1 + ln < sizeof(old->label))
				snprintf(old->label + n, sizeof(old->label) - n, "%s%s",
					 n ? "|" : "", e->label);
		}
		return 0;
	}
	if (p->n_entries == pl->cap) {
		size_t cap = pl->cap ? pl->cap * 2 : 64;
		struct plan_entry *ne = realloc(p->entries, cap * sizeof(*ne));

		if (!ne)
			return plan_fail(pl, "(plan)", "out of memory");
		p->entries = ne;
		pl->cap = cap;
	}
	if (p->n_entries >= UINT32_MAX - 1)
		return plan_fail(pl, "(plan)", "too many entries");
	p->entries[p->n_entries] = *e;
	s->keys[j] = key;
	s->idx[j] = (uint32_t)(p->n_entries + 1);
	s->n++;
	p->n_entries++;
	switch (e->status) {
	case PLAN_OK:
		p->n_ok++;
		break;
	case PLAN_OOM:
		p->n_oom++;
		break;
	case PLAN_INVALID:
		p->n_invalid++;
		break;
	}
	return 0;
}

/* Judge one point: derived values, where, validity, memory. */
static int plan_point(struct planner *pl, const struct merged *m, int model, struct lb_layout *l,
		      long long gpus, const char *label)
{
	const struct sweep_spec *s = pl->spec;
	const struct sweep_cluster *cl = &s->cluster;
	struct plan_entry e;
	const char *derr = NULL;
	char dbuf[160];
	int w;

	memset(&e, 0, sizeof(e));
	/* heads without kv_heads: a model without grouped-query attention keeps kv = heads */
	if (m->has[SF_HEADS] && !m->has[SF_KV_HEADS] &&
	    s->models[model].n_kv_heads == s->models[model].n_heads)
		l->model.n_kv_heads = l->model.n_heads;
	/* derived: dp from gpus, or gpus from tp*pp*dp */
	if (m->has[SF_GPUS] && !m->has[SF_DP]) {
		long long tpp = (long long)l->tp * l->pp;

		if (gpus % tpp) {
			snprintf(dbuf, sizeof(dbuf), "gpus=%lld is not divisible by tp*pp=%lld",
				 gpus, tpp);
			derr = dbuf;
			l->dp = 0;
		} else {
			l->dp = (int)(gpus / tpp);
		}
	} else if (!m->has[SF_GPUS]) {
		gpus = (long long)l->tp * l->pp * l->dp;
		if (gpus > INT_MAX) {
			snprintf(dbuf, sizeof(dbuf), "tp*pp*dp=%lld GPUs is too many", gpus);
			derr = dbuf;
			gpus = INT_MAX;
		}
	}
	if (gpus < cl->gpus_per_node) {
		l->gpus_per_node = (int)gpus;
		l->nodes = 1;
	} else {
		l->gpus_per_node = cl->gpus_per_node;
		l->nodes = (int)((gpus + cl->gpus_per_node - 1) / cl->gpus_per_node);
	}
	/* where: dropped points are counted, not listed */
	for (w = 0; w < m->nwhere; w++) {
		long long v[SV_NVARS];
		char msg[200], full[300];
		int truth;

		v[SF_LAYERS] = l->model.n_layers;
		v[SF_HIDDEN] = l->model.hidden;
		v[SF_HEADS] = l->model.n_heads;
		v[SF_KV_HEADS] = l->model.n_kv_heads;
		v[SF_FFN] = l->model.ffn;
		v[SF_VOCAB] = l->model.vocab;
		v[SF_TIED] = l->model.tied;
		v[SF_SEQ_LEN] = l->seq_len;
		v[SF_GLOBAL_BATCH] = l->global_batch;
		v[SF_MICRO_BATCH] = l->micro_batch;
		v[SF_TP] = l->tp;
		v[SF_PP] = l->pp;
		v[SF_DP] = l->dp;
		v[SF_GPUS] = gpus;
		v[SF_SEQUENCE_PARALLEL] = l->sequence_parallel;
		v[SF_ZERO_STAGE] = l->zero_stage;
		v[SF_CHECKPOINTING] = l->checkpointing;
		v[SF_ATTENTION] = l->attention;
		v[SF_NORM] = l->norm;
		v[SF_KERNEL] = -1;
		v[SV_GPUS_PER_NODE] = l->gpus_per_node;
		v[SV_NODES] = l->nodes;
		v[SV_ACCUM] = lb_layout_accum_steps(l);
		v[SV_MODEL] = s->model_index[model];
		if (expr_eval(m->wparts[w]->where, v, &truth, msg, sizeof(msg))) {
			snprintf(full, sizeof(full),
				 "%s (at point %zu: tp=%d pp=%d dp=%d "
				 "micro_batch=%d)",
				 msg, pl->point + 1, l->tp, l->pp, l->dp, l->micro_batch);
			return plan_fail(pl, m->wparts[w]->where_path, full);
		}
		if (!truth) {
			pl->plan->n_filtered++;
			return 0;
		}
	}
	e.layout = *l;
	if (label)
		snprintf(e.label, sizeof(e.label), "%s", label);
	lb_layout_id(l, e.id);
	if (derr) {
		e.status = PLAN_INVALID;
		snprintf(e.reason, sizeof(e.reason), "%s", derr);
	} else if (lb_layout_check(l, e.reason, sizeof(e.reason))) {
		e.status = PLAN_INVALID;
	} else {
		struct lb_mem_estimate est;
		double cap = cl->gpu_mem_gib * LB_MEM_USABLE_FRACTION;

		lb_memory_estimate(l, &est);
		e.mem_gib = est.total / GIB;
		if (cl->gpu_mem_gib > 0 && e.mem_gib > cap) {
			e.status = PLAN_OOM;
			snprintf(e.reason, sizeof(e.reason), "needs %.1f GiB of %.1f GiB",
				 e.mem_gib, cap);
		}
	}
	return record(pl, &e);
}

static int build_merged(const struct sweep_spec *s, const struct spec_part *mem, struct merged *m)
{
	int f, g, n = 0;

	memset(m, 0, sizeof(*m));
	m->groups =
	    malloc(sizeof(*m->groups) * (size_t)(s->top.ngroups + (mem ? mem->ngroups : 0) + 1));
	if (!m->groups)
		return -1;
	for (f = 0; f < SF_NFIELDS; f++) {
		if (s->top.has_fixed[f]) {
			m->fixed[f] = s->top.fixed[f];
			m->has_fixed[f] = 1;
		}
		if (mem && mem->has_fixed[f]) {
			m->fixed[f] = mem->fixed[f];
			m->has_fixed[f] = 1;
		}
		m->has[f] = m->has_fixed[f];
	}
	for (g = 0; g < s->top.ngroups; g++)
		m->groups[n++] = &s->top.groups[g];
	for (g = 0; mem && g < mem->ngroups; g++)
		m->groups[n++] = &mem->groups[g];
	m->ngroups = n;
	for (g = 0; g < n; g++)
		for (f = 0; f < m->groups[g]->nf; f++)
			m->has[m->groups[g]->fields[f]] = 1;
	if (s->top.where)
		m->wparts[m->nwhere++] = &s->top;
	if (mem && mem->where)
		m->wparts[m->nwhere++] = mem;
	return 0;
}

/* Points of one merged part before `where`, saturating at SIZE_MAX. */
static size_t count_points(const struct sweep_spec *s, const struct merged *m)
{
	size_t n = (size_t)s->nmodels;
	int g;

	for (g = 0; g < m->ngroups; g++) {
		size_t len = (size_t)m->groups[g]->len;

		if (len && n > SIZE_MAX / len)
			return SIZE_MAX;
		n *= len;
	}
	return n;
}

static int expand_part(struct planner *pl, const struct merged *m)
{
	const struct sweep_spec *s = pl->spec;
	int idx[2 * SF_NFIELDS]; /* a field is swept once per part: groups <= fields */
	int i, f, g;

	for (i = 0; i < s->nmodels; i++) {
		struct lb_layout base;
		long long base_gpus = 0;
		const char *base_label = NULL;

		lb_layout_init(&base);
		base.model = s->models[i];
		if (s->steps > 0)
			base.steps = s->steps;
		if (s->warmup >= 0)
			base.warmup = s->warmup;
		base.seed = s->seed;
		for (f = 0; f < SF_NFIELDS; f++)
			if (m->has_fixed[f])
				set_field(s, &base, f, m->fixed[f], &base_gpus, &base_label);
		memset(idx, 0, sizeof(idx));
		for (;;) {
			struct lb_layout l = base;
			long long gpus = base_gpus;
			const char *label = base_label;

			for (g = 0; g < m->ngroups; g++) {
				const struct spec_group *gr = m->groups[g];
				const long long *row = &gr->vals[(size_t)idx[g] * (size_t)gr->nf];

				for (f = 0; f < gr->nf; f++)
					set_field(s, &l, gr->fields[f], row[f], &gpus, &label);
			}
			if (plan_point(pl, m, i, &l, gpus, label))
				return -1;
			pl->point++;
			for (g = m->ngroups - 1; g >= 0; g--) {
				if (++idx[g] < m->groups[g]->len)
					break;
				idx[g] = 0;
			}
			if (g < 0)
				break;
		}
	}
	return 0;
}

void sweep_plan_free(struct sweep_plan *p)
{
	if (!p)
		return;
	free(p->entries);
	spec_cluster_release(&p->cluster);
	memset(p, 0, sizeof(*p));
}

int sweep_plan_text_opts(const char *path, const char *text, size_t len,
			 const struct sweep_opts *opts, struct sweep_plan *out, char *err,
			 size_t errlen)
{
	size_t max = opts && opts->max_points ? opts->max_points : SWEEP_MAX_POINTS;
	struct sweep_spec spec;
	struct merged *parts = NULL;
	struct planner pl;
	size_t total = 0;
	int nparts, i, rc = -1;

	memset(out, 0, sizeof(*out));
	if (spec_parse(path, text, len, &spec, err, errlen))
		return -1;
	nparts = spec.nmembers ? spec.nmembers : 1;
	parts = calloc((size_t)nparts, sizeof(*parts));
	if (!parts) {
		snprintf(err, errlen, "%s: out of memory", spec.path);
		goto out_spec;
	}
	for (i = 0; i < nparts; i++) {
		size_t n;

		if (build_merged(&spec, spec.nmembers ? &spec.members[i] : NULL, &parts[i])) {
			snprintf(err, errlen, "%s: out of memory", spec.path);
			goto out_parts;
		}
		n = count_points(&spec, &parts[i]);
		total = n > SIZE_MAX - total ? SIZE_MAX : total + n;
	}
	if (total > max) {
		if (total == SIZE_MAX)
			snprintf(err, errlen,
				 "%s: grid: the spec expands to too many points (limit %zu); "
				 "narrow the grid or split the sweep",
				 spec.path, max);
		else
			snprintf(err, errlen,
				 "%s: grid: the spec expands to %zu points (limit %zu); narrow "
				 "the grid or split the sweep",
				 spec.path, total, max);
		goto out_parts;
	}
	memset(&pl, 0, sizeof(pl));
	pl.spec = &spec;
	pl.plan = out;
	pl.err = err;
	pl.errlen = errlen;
	if (total) {
		out->entries = malloc(total * sizeof(*out->entries));
		if (!out->entries) {
			snprintf(err, errlen, "%s: out of memory for %zu points", spec.path, total);
			goto out_parts;
		}
		pl.cap = total;
	}
	for (i = 0; i < nparts; i++)
		if (expand_part(&pl, &parts[i]))
			goto out_ids;
	snprintf(out->name, sizeof(out->name), "%s", spec.name);
	snprintf(out->description, sizeof(out->description), "%s", spec.description);
	out->step_time_guess_s = spec.step_time_guess_s;
	out->cluster = spec.cluster; /* the plan takes the cluster's heap parts */
	memset(&spec.cluster, 0, sizeof(spec.cluster));
	rc = 0;
out_ids:
	idset_release(&pl.ids);
	if (rc)
		sweep_plan_free(out);
out_parts:
	for (i = 0; i < nparts; i++)
		free(parts[i].groups);
	free(parts);
out_spec:
	spec_free(&spec);
	return rc;
}

int sweep_plan_text(const char *path, const char *text, size_t len, struct sweep_plan *out,
		    char *err, size_t errlen)
{
	return sweep_plan_text_opts(path, text, len, NULL, out, err, errlen);
}

/* Read a whole stream (at most SPEC_MAX_BYTES). Caller frees *text. */
static int read_all(FILE *f, const char *name, char **text, size_t *len, char *err, size_t errlen)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);

	if (!buf) {
		snprintf(err, errlen, "%s: out of memory", name);
		return -1;
	}
	for (;;) {
		size_t got;

		if (n + 1 >= cap) {
			char *nb;

			if (cap >= SPEC_MAX_BYTES) {
				snprintf(err, errlen, "%s: larger than %u MiB; not a sweep spec",
					 name, SPEC_MAX_BYTES >> 20);
				free(buf);
				return -1;
			}
			nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				snprintf(err, errlen, "%s: out of memory", name);
				return -1;
			}
			buf = nb;
			cap *= 2;
		}
		got = fread(buf + n, 1, cap - 1 - n, f);
		n += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "cannot read '%s': %s", name, strerror(errno));
		free(buf);
		return -1;
	}
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return 0;
}

int sweep_plan_file(const char *path, struct sweep_plan *out, char *err, size_t errlen)
{
	char *text;
	size_t len;
	FILE *f;
	int rc;

	memset(out, 0, sizeof(*out));
	f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
		return -1;
	}
	rc = read_all(f, path, &text, &len, err, errlen);
	fclose(f);
	if (rc)
		return -1;
	rc = sweep_plan_text(path, text, len, out, err, errlen);
	free(text);
	return rc;
}

int sweep_plan_load(const char *spec_arg, struct sweep_plan *out, char *err, size_t errlen)
{
	char name[512];
	const char *text;
	struct stat st;
	size_t len;

	memset(out, 0, sizeof(*out));
	if (!spec_arg || !*spec_arg) {
		snprintf(err, errlen, "no spec given");
		return -1;
	}
	if (!strcmp(spec_arg, "-")) {
		char *buf;
		int rc;

		if (read_all(stdin, "-", &buf, &len, err, errlen))
			return -1;
		rc = sweep_plan_text("-", buf, len, out, err, errlen);
		free(buf);
		return rc;
	}
	if (!stat(spec_arg, &st) || strchr(spec_arg, '/'))
		return sweep_plan_file(spec_arg, out, err, errlen);
	snprintf(name, sizeof(name), "sweeps/specs/%s", spec_arg);
	text = lb_embedded(name, &len);
	if (!text) {
		snprintf(name, sizeof(name), "sweeps/specs/%s.json", spec_arg);
		text = lb_embedded(name, &len);
	}
	if (!text) {
		snprintf(err, errlen,
			 "'%s': no such file, and no spec of that name is built in (built in: "
			 "the names in sweeps/specs/, e.g. 'quickstart')",
			 spec_arg);
		return -1;
	}
	return sweep_plan_text(name, text, len, out, err, errlen);
}
