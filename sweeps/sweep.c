/*
 * The planner: a parsed spec (sweeps/spec.c) expanded into its grid points, each turned
 * into a layout record and judged. Per union member (or the top level alone), models are
 * the outermost loop and the grid/zip groups an odometer whose last group varies
 * fastest. A point gets the preset with its overrides, the fixed values, its own values,
 * the derived dp / gpus / nodes and the run settings; `where` drops it or keeps it; then
 * lb_layout_check (invalid, with its reason) and lb_memory_estimate against the GPU's
 * memory (oom, with "needs X GiB of Y GiB") decide its status. A point whose layout id
 * repeats an earlier one is merged into it. No per-point allocation: every point has a
 * slot in one array, judged in parallel (threads take contiguous ranges of the point
 * index space, so the result does not depend on the thread count); one pass in point
 * order then drops filtered points, merges duplicates (an open-addressing table of ids)
 * and compacts.
 */
#include "sweeps/sweep.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/embed.h"
#include "common/model.h"
#include "common/util.h"
#include "sweeps/spec.h"

#define GIB	       (1024.0 * 1024.0 * 1024.0)
#define SPEC_MAX_BYTES (16u << 20)

const char *sweep_status_name(enum plan_status s)
{
	static const char *const names[] = {
	    [PLAN_OK] = "ok",
	    [PLAN_OOM] = "oom",
	    [PLAN_INVALID] = "invalid",
	};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
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

static void set_field(const struct sweep_spec *s, struct lb_layout *l, int f, long long v,
		      long long *gpus, const char **label)
{
	switch (f) {
	case SF_GPUS:
		*gpus = v;
		break;
	case SF_KERNEL:
		l->attention = s->kernels[v].attention;
		l->norm = s->kernels[v].norm;
		*label = s->kernels[v].name;
		break;
	case SF_STAGE_LAYERS:
		l->n_stage_layers = s->splits[v].n;
		memcpy(l->stage_layers, s->splits[v].layers,
		       (size_t)s->splits[v].n * sizeof(l->stage_layers[0]));
		break;
	default: /* a layout field */
		lb_field_set(l, f, v);
	}
}

/* Work shared by the judging threads: read-only but for each thread's own slots. */
struct planner {
	const struct sweep_spec *spec;
	const struct merged *parts;
	const size_t *part_off; /* first global point index of each part; [nparts] = total */
	int nparts;
	struct plan_entry *entries; /* one slot per point, by global index */
	uint64_t *keys;		    /* layout id as a number, per point */
	unsigned char *kept;	    /* 1: the point passed `where` */
};

/* One thread's range of points and its outcome. */
struct worker {
	const struct planner *pl;
	size_t begin, end;
	size_t err_point; /* first point whose `where` failed; SIZE_MAX = none */
	char err[320];
	const char *err_path;
};

static uint64_t id_key(const char *id)
{
	uint64_t k = 0;
	int i;

	for (i = 0; i < LB_ID_LEN && id[i]; i++) {
		char c = id[i];

		k = (k << 4) | (uint64_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
	}
	return k;
}

/* 1 when a and b print the same with dig decimals (the planner's threads call it: no
 * shared buffers). */
static int same_at(double a, double b, int dig)
{
	char x[32], y[32];

	snprintf(x, sizeof(x), "%.*f", dig, a);
	snprintf(y, sizeof(y), "%.*f", dig, b);
	return !strcmp(x, y);
}

/* Judge one point into e: derived values, where, validity, memory. Returns 1 kept, 0
 * dropped by where, -1 when where cannot be evaluated (w->err set). Thread-safe. */
static int judge_point(struct worker *w, const struct merged *m, int model, struct lb_layout *l,
		       long long gpus, const char *label, size_t point, struct plan_entry *e)
{
	const struct sweep_spec *s = w->pl->spec;
	const struct sweep_cluster *cl = &s->cluster;
	const char *derr = NULL;
	char dbuf[160];
	int i;

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
		long long tpp = (long long)l->tp * l->pp; /* each at most 2^30: no overflow */

		if (l->dp > 0 && tpp > INT_MAX / l->dp) { /* tpp * dp would overflow, or not fit */
			snprintf(dbuf, sizeof(dbuf),
				 "tp*pp*dp=%d*%d*%d GPUs is more than %d, the most a layout has",
				 l->tp, l->pp, l->dp, INT_MAX);
			derr = dbuf;
			gpus = INT_MAX;
		} else {
			gpus = tpp * l->dp;
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
	for (i = 0; i < m->nwhere; i++) {
		long long v[SV_NVARS];
		char msg[200];
		int truth;

		for (int f = 0; f < LB_NFIELDS; f++)
			v[f] = lb_field_get(l, f);
		v[SF_MODEL] = s->model_index[model];
		v[SF_STAGE_LAYERS] = -1;
		v[SF_GPUS] = gpus;
		v[SF_KERNEL] = -1;
		v[SV_ACCUM] = lb_layout_accum_steps(l);
		if (expr_eval(m->wparts[i]->where, v, &truth, msg, sizeof(msg))) {
			if (derr)
				break; /* dp is underivable (0): list the point with that reason */
			snprintf(w->err, sizeof(w->err),
				 "%s (at point %zu: tp=%d pp=%d dp=%d micro_batch=%d)", msg,
				 point + 1, l->tp, l->pp, l->dp, l->micro_batch);
			w->err_path = m->wparts[i]->where_path;
			w->err_point = point;
			return -1;
		}
		if (!truth)
			return 0;
	}
	memset(e, 0, sizeof(*e)); /* no stale bytes in the returned entries */
	e->layout = *l;
	if (label)
		snprintf(e->label, sizeof(e->label), "%s", label);
	lb_layout_id(l, e->id);
	e->status = PLAN_OK;
	if (derr) {
		e->status = PLAN_INVALID;
		snprintf(e->reason, sizeof(e->reason), "%s", derr);
	} else if (lb_layout_check(l, e->reason, sizeof(e->reason))) {
		e->status = PLAN_INVALID;
	} else if (lb_attn_gpu_only(l->attention) && !strcmp(cl->device, "cpu")) {
		/* cuDNN's attention exists on the GPU backend only; the trainer refuses it */
		e->status = PLAN_INVALID;
		snprintf(e->reason, sizeof(e->reason),
			 "attention 'cudnn' needs the GPU backend (device \"cuda\"); the CPU "
			 "backend runs 'flash'");
	} else {
		struct lb_mem_estimate est;
		double cap = cl->gpu_mem_gib * LB_MEM_USABLE_FRACTION;

		if (cl->memory_paper) {
			lb_memory_estimate(l, &est);
			e->mem_gib = est.total / GIB;
		} else { /* what our trainer allocates, plus the CUDA runtime's own on a GPU */
			int gpu = strcmp(cl->device, "cpu") != 0;

			lb_memory_trainer(l, gpu, 0, &est);
			e->mem_gib = est.total / GIB + (gpu ? LB_TRAINER_GPU_RESERVE_GIB : 0.0);
		}
		if (cl->gpu_mem_gib > 0 && e->mem_gib > cap) {
			e->status = PLAN_OOM;
			int dig = 1; /* enough digits that the two numbers differ */

			while (dig < 4 && same_at(e->mem_gib, cap, dig))
				dig++;
			snprintf(e->reason, sizeof(e->reason), "needs %.*f GiB of %.*f GiB", dig,
				 e->mem_gib, dig, cap);
		}
	}
	return 1;
}

/* The base layout of a model in a part: preset, overrides, fixed values, run settings. */
static void part_base(const struct sweep_spec *s, const struct merged *m, int model,
		      struct lb_layout *base, long long *gpus, const char **label)
{
	int f;

	lb_layout_init(base);
	base->model = s->models[model];
	if (s->steps > 0)
		base->steps = s->steps;
	if (s->warmup >= 0)
		base->warmup = s->warmup;
	base->seed = s->seed;
	*gpus = 0;
	*label = NULL;
	for (f = 0; f < SF_NFIELDS; f++)
		if (m->has_fixed[f])
			set_field(s, base, f, m->fixed[f], gpus, label);
}

/* Judge the points [w->begin, w->end) of the global index space. */
static void *work(void *arg)
{
	struct worker *w = arg;
	const struct planner *pl = w->pl;
	const struct sweep_spec *s = pl->spec;
	size_t g = w->begin;
	int p = 0;

	while (g < w->end) {
		const struct merged *m;
		struct lb_layout base;
		long long base_gpus;
		const char *base_label;
		int idx[2 * SF_NFIELDS]; /* a field is swept once per part: groups <= fields */
		size_t per_model = 1, local, end;
		int model, gi;

		while (pl->part_off[p + 1] <= g)
			p++;
		m = &pl->parts[p];
		end = pl->part_off[p + 1] < w->end ? pl->part_off[p + 1] : w->end;
		for (gi = 0; gi < m->ngroups; gi++)
			per_model *= (size_t)m->groups[gi]->len;
		local = g - pl->part_off[p];
		model = (int)(local / per_model);
		local %= per_model;
		for (gi = m->ngroups - 1; gi >= 0; gi--) {
			idx[gi] = (int)(local % (size_t)m->groups[gi]->len);
			local /= (size_t)m->groups[gi]->len;
		}
		part_base(s, m, model, &base, &base_gpus, &base_label);
		for (; g < end; g++) {
			struct lb_layout l = base;
			long long gpus = base_gpus;
			const char *label = base_label;
			int r;

			for (gi = 0; gi < m->ngroups; gi++) {
				const struct spec_group *gr = m->groups[gi];
				const long long *row = &gr->vals[(size_t)idx[gi] * (size_t)gr->nf];
				int f;

				for (f = 0; f < gr->nf; f++)
					set_field(s, &l, gr->fields[f], row[f], &gpus, &label);
			}
			r = judge_point(w, m, model, &l, gpus, label, g, &pl->entries[g]);
			if (r < 0)
				return NULL;
			pl->kept[g] = (unsigned char)r;
			if (r)
				pl->keys[g] = id_key(pl->entries[g].id);
			for (gi = m->ngroups - 1; gi >= 0; gi--) {
				if (++idx[gi] < m->groups[gi]->len)
					break;
				idx[gi] = 0;
			}
			if (gi < 0 && g + 1 < end) {
				model++;
				part_base(s, m, model, &base, &base_gpus, &base_label);
			}
		}
	}
	return NULL;
}

/* 1 if label is one of the '|'-separated labels of list. */
static int label_listed(const char *list, const char *label)
{
	size_t ln = strlen(label);
	const char *p = list;

	for (;;) {
		const char *bar = strchr(p, '|');
		size_t n = bar ? (size_t)(bar - p) : strlen(p);

		if (n == ln && !strncmp(p, label, ln))
			return 1;
		if (!bar)
			return 0;
		p = bar + 1;
	}
}

/* In point order: drop filtered points, merge duplicates, compact, count. */
static int merge_points(const struct planner *pl, size_t total, struct sweep_plan *out)
{
	struct idset ids;
	size_t g, n = 0;

	memset(&ids, 0, sizeof(ids));
	for (g = 0; g < total; g++) {
		struct plan_entry *e = &pl->entries[g];
		uint64_t key = pl->keys[g];
		int dup = 0;
		size_t j;

		if (!pl->kept[g]) {
			out->n_filtered++;
			continue;
		}
		if ((ids.n + 1) * 2 > ids.cap && idset_grow(&ids)) {
			idset_release(&ids);
			return -1;
		}
		for (j = key & (ids.cap - 1); ids.idx[j]; j = (j + 1) & (ids.cap - 1)) {
			struct plan_entry *old;

			if (ids.keys[j] != key)
				continue;
			old = &pl->entries[ids.idx[j] - 1];
			if (!lb_layout_equal(&old->layout, &e->layout))
				continue; /* a hash collision: a different layout */
			dup = 1;
			out->n_duplicates++;
			if (e->label[0]) {
				size_t ln = strlen(e->label), on = strlen(old->label);

				if (!label_listed(old->label, e->label) &&
				    on + 1 + ln < sizeof(old->label)) {
					if (on)
						old->label[on++] = '|';
					memcpy(old->label + on, e->label, ln + 1);
				}
			}
			break;
		}
		if (dup)
			continue;
		if (n != g)
			pl->entries[n] = *e;
		ids.keys[j] = key;
		ids.idx[j] = (uint32_t)(n + 1);
		ids.n++;
		switch (pl->entries[n].status) {
		case PLAN_OK:
			out->n_ok++;
			break;
		case PLAN_OOM:
			out->n_oom++;
			break;
		case PLAN_INVALID:
			out->n_invalid++;
			break;
		}
		n++;
	}
	idset_release(&ids);
	out->n_entries = n;
	return 0;
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

void sweep_plan_free(struct sweep_plan *p)
{
	if (!p)
		return;
	free(p->entries);
	spec_cluster_release(&p->cluster);
	memset(p, 0, sizeof(*p));
}

/* Threads for a plan of total points: the online CPUs (at most 16), one for small plans. */
static int thread_count(const struct sweep_opts *opts, size_t total)
{
	long n;

	if (opts && opts->threads > 0)
		n = opts->threads;
	else if (total < 20000)
		n = 1;
	else
		n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		n = 1;
	if (n > 16)
		n = 16;
	if ((size_t)n > total)
		n = total ? (long)total : 1;
	return (int)n;
}

int sweep_plan_text_opts(const char *path, const char *text, size_t len,
			 const struct sweep_opts *opts, struct sweep_plan *out, char *err,
			 size_t errlen)
{
	size_t max = opts && opts->max_points ? opts->max_points : SWEEP_MAX_POINTS;
	struct worker workers[16];
	pthread_t tids[16];
	struct sweep_spec spec;
	struct merged *parts = NULL;
	size_t *off = NULL;
	struct planner pl;
	size_t total = 0, first_err = SIZE_MAX;
	int nparts, i, nthreads, rc = -1;

	memset(out, 0, sizeof(*out));
	memset(&pl, 0, sizeof(pl));
	if (spec_parse(path, text, len, &spec, err, errlen))
		return -1;
	nparts = spec.nmembers ? spec.nmembers : 1;
	parts = calloc((size_t)nparts, sizeof(*parts));
	off = calloc((size_t)nparts + 1, sizeof(*off));
	if (!parts || !off) {
		snprintf(err, errlen, "%s: out of memory", spec.path);
		goto out_parts;
	}
	for (i = 0; i < nparts; i++) {
		size_t n;

		if (build_merged(&spec, spec.nmembers ? &spec.members[i] : NULL, &parts[i])) {
			snprintf(err, errlen, "%s: out of memory", spec.path);
			goto out_parts;
		}
		n = count_points(&spec, &parts[i]);
		total = n > SIZE_MAX - total ? SIZE_MAX : total + n;
		off[i + 1] = total;
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
	pl.spec = &spec;
	pl.parts = parts;
	pl.part_off = off;
	pl.nparts = nparts;
	pl.entries = malloc(total * sizeof(*pl.entries));
	pl.keys = malloc(total * sizeof(*pl.keys));
	pl.kept = malloc(total);
	if (!pl.entries || !pl.keys || !pl.kept) {
		snprintf(err, errlen, "%s: out of memory for %zu points", spec.path, total);
		goto out_points;
	}
	/* judge the points in parallel, each thread a contiguous range of indices */
	nthreads = thread_count(opts, total);
	for (i = 0; i < nthreads; i++) {
		workers[i].pl = &pl;
		workers[i].begin = total * (size_t)i / (size_t)nthreads;
		workers[i].end = total * (size_t)(i + 1) / (size_t)nthreads;
		workers[i].err_point = SIZE_MAX;
		workers[i].err[0] = '\0';
		workers[i].err_path = NULL;
	}
	for (i = 1; i < nthreads; i++)
		if (pthread_create(&tids[i], NULL, work, &workers[i])) {
			int k;

			/* run this range here instead */
			work(&workers[i]);
			for (k = i + 1; k < nthreads; k++)
				work(&workers[k]);
			nthreads = i;
			break;
		}
	work(&workers[0]);
	for (i = 1; i < nthreads; i++)
		pthread_join(tids[i], NULL);
	nthreads = thread_count(opts, total);
	for (i = 0; i < nthreads; i++)
		if (workers[i].err_point < first_err)
			first_err = workers[i].err_point;
	for (i = 0; i < nthreads; i++)
		if (workers[i].err_point == first_err && first_err != SIZE_MAX) {
			snprintf(err, errlen, "%s: %s: %s", spec.path, workers[i].err_path,
				 workers[i].err);
			goto out_points;
		}
	if (merge_points(&pl, total, out)) {
		snprintf(err, errlen, "%s: out of memory", spec.path);
		goto out_points;
	}
	out->entries = pl.entries;
	pl.entries = NULL;
	if (out->n_entries && out->n_entries < total / 2) {
		struct plan_entry *shrunk =
		    realloc(out->entries, out->n_entries * sizeof(*out->entries));

		if (shrunk)
			out->entries = shrunk;
	}
	snprintf(out->name, sizeof(out->name), "%s", spec.name);
	snprintf(out->description, sizeof(out->description), "%s", spec.description);
	out->step_time_guess_s = spec.step_time_guess_s;
	out->optim = spec.optim;
	out->cluster = spec.cluster; /* the plan takes the cluster's heap parts */
	memset(&spec.cluster, 0, sizeof(spec.cluster));
	rc = 0;
out_points:
	free(pl.entries);
	free(pl.keys);
	free(pl.kept);
	if (rc)
		memset(out, 0, sizeof(*out));
out_parts:
	for (i = 0; parts && i < nparts; i++)
		free(parts[i].groups);
	free(parts);
	free(off);
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

char *sweep_spec_read(const char *spec_arg, char *name, size_t namelen, size_t *len, char *err,
		      size_t errlen)
{
	const char *text;
	struct stat st;
	char *buf;
	FILE *f;

	if (!spec_arg || !*spec_arg) {
		snprintf(err, errlen, "no spec given");
		return NULL;
	}
	if (!strcmp(spec_arg, "-")) {
		snprintf(name, namelen, "-");
		return read_all(stdin, "-", &buf, len, err, errlen) ? NULL : buf;
	}
	if (!stat(spec_arg, &st) || strchr(spec_arg, '/')) {
		snprintf(name, namelen, "%s", spec_arg);
		f = fopen(spec_arg, "rb");
		if (!f) {
			snprintf(err, errlen, "cannot open '%s': %s", spec_arg, strerror(errno));
			return NULL;
		}
		int rc = read_all(f, spec_arg, &buf, len, err, errlen);
		fclose(f);
		return rc ? NULL : buf;
	}
	snprintf(name, namelen, "sweeps/specs/%s", spec_arg);
	text = lb_embedded(name, len);
	if (!text) {
		snprintf(name, namelen, "sweeps/specs/%s.json", spec_arg);
		text = lb_embedded(name, len);
	}
	if (!text) {
		snprintf(err, errlen,
			 "'%s': no such file, and no spec of that name is built in (built in: "
			 "the names in sweeps/specs/, e.g. 'quickstart')",
			 spec_arg);
		return NULL;
	}
	return lb_text_dup(text, *len, err, errlen);
}

int sweep_plan_load(const char *spec_arg, struct sweep_plan *out, char *err, size_t errlen)
{
	char name[512];
	size_t len;
	int rc;

	memset(out, 0, sizeof(*out));
	char *text = sweep_spec_read(spec_arg, name, sizeof(name), &len, err, errlen);
	if (!text)
		return -1;
	rc = sweep_plan_text(name, text, len, out, err, errlen);
	free(text);
	return rc;
}

double sweep_gpu_hours(const struct sweep_plan *p, const size_t *entries, size_t n)
{
	double h = 0.0;

	if (p->step_time_guess_s <= 0)
		return -1.0;
	if (!entries)
		n = p->n_entries;
	for (size_t i = 0; i < n; i++) {
		const struct plan_entry *e = &p->entries[entries ? entries[i] : i];
		if (entries || e->status == PLAN_OK)
			h += p->step_time_guess_s * e->layout.steps * lb_layout_world(&e->layout) /
			     3600.0;
	}
	return h;
}
