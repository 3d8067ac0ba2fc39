/*
 * A plan's predictions and orders (sweeps/plan_predict.h): the machine found for the
 * spec, common/predict.h on every layout that fits (one memo of the per-layer costs for
 * the whole grid), and the sort.
 */
#include "sweeps/plan_predict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/machine.h"

int plan_machine(const struct sweep_plan *p, const char *name, struct lb_machine *m, char *note,
		 size_t notelen, char *err, size_t errlen)
{
	const char *gpu = p->cluster.gpu;

	note[0] = '\0';
	if (!name) {
		if (!strcmp(p->cluster.device, "cpu"))
			return 0; /* the model is of GPUs; a CPU sweep has no prediction to show */
		name = lb_machine_for_gpu(gpu);
		if (!name) {
			snprintf(note, notelen,
				 "no step-time prediction: no machine is shipped for GPU '%s' (measure "
				 "one: bench_kernels --csv, then layoutbench calibrate --kernels CSV; "
				 "give it with --machine FILE)",
				 gpu[0] ? gpu : "(cluster.gpu not set)");
			return 0;
		}
	}
	if (lb_machine_load(name, m, err, errlen))
		return -1;
	return 1;
}

int plan_predict(const struct sweep_plan *p, const struct lb_machine *m, const char *note,
		 struct plan_predictions *out, char *err, size_t errlen)
{
	struct lb_predict_cache cache;

	memset(out, 0, sizeof(*out));
	out->n = p->n_entries;
	if (note)
		snprintf(out->note, sizeof(out->note), "%s", note);
	if (!m)
		return 0;
	snprintf(out->machine, sizeof(out->machine), "%s", m->name);
	out->calibrated = m->calibrated;
	out->nominal = m->nominal;
	out->p = calloc(p->n_entries ? p->n_entries : 1, sizeof(*out->p));
	if (!out->p) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	lb_predict_cache_init(&cache);
	for (size_t i = 0; i < p->n_entries; i++) {
		const struct plan_entry *e = &p->entries[i];
		struct plan_pred *pp = &out->p[i];
		struct lb_prediction pr;
		char why[256];

		if (e->status != PLAN_OK)
			continue;
		if (lb_predict(m, &e->layout, e->label, &cache, &pr, why, sizeof(why))) {
			if (!out->n_unpredicted++)
				snprintf(out->note, sizeof(out->note), "layout %s not predicted: %s",
					 e->id, why);
			continue;
		}
		pp->ok = 1;
		pp->step_s = pr.step_s;
		pp->mfu = pr.mfu;
		pp->gpu_hours = pr.step_s * e->layout.steps * lb_layout_world(&e->layout) / 3600.0;
		if (!out->n_pred++ || pr.mfu > out->p[out->best].mfu)
			out->best = i;
	}
	lb_predict_cache_release(&cache);
	return 0;
}

void plan_predictions_free(struct plan_predictions *pp)
{
	free(pp->p);
	memset(pp, 0, sizeof(*pp));
}

int plan_sort_parse(const char *name, enum plan_sort *s)
{
	static const char *const names[] = {"spec", "mfu", "time", "gpu-hours"};

	for (int i = 0; i < 4; i++)
		if (name && !strcmp(name, names[i])) {
			*s = (enum plan_sort)i;
			return 0;
		}
	return -1;
}

struct sort_item {
	double key;
	size_t i;
	int has;
};

static int cmp_item(const void *a, const void *b)
{
	const struct sort_item *x = a, *y = b;

	if (x->has != y->has)
		return y->has - x->has; /* predicted first */
	if (x->has && x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

void plan_sort(const struct sweep_plan *p, const struct plan_predictions *pp, enum plan_sort by,
	       size_t *order)
{
	struct sort_item *it;

	for (size_t i = 0; i < p->n_entries; i++)
		order[i] = i;
	if (by == PLAN_SORT_SPEC || !pp->p)
		return;
	it = malloc((p->n_entries ? p->n_entries : 1) * sizeof(*it));
	if (!it)
		return; /* spec order */
	for (size_t i = 0; i < p->n_entries; i++) {
		const struct plan_pred *q = &pp->p[i];

		it[i].i = i;
		it[i].has = q->ok;
		it[i].key = by == PLAN_SORT_MFU ? -q->mfu : by == PLAN_SORT_TIME ? q->step_s
										 : q->gpu_hours;
	}
	qsort(it, p->n_entries, sizeof(*it), cmp_item);
	for (size_t i = 0; i < p->n_entries; i++)
		order[i] = it[i].i;
	free(it);
}

int plan_select_top(const struct sweep_plan *p, const char *machine, size_t k, size_t *sel,
		    size_t *n_sel, char *info, size_t infolen, char *err, size_t errlen)
{
	struct lb_machine *m = malloc(sizeof(*m));
	struct plan_predictions pp = {0};
	size_t *order = malloc((p->n_entries ? p->n_entries : 1) * sizeof(size_t));
	char *chosen = calloc(p->n_entries ? p->n_entries : 1, 1);
	char note[512];
	size_t n = 0, cand = *n_sel;
	double mfu_last = 0;
	int rc = -1, have;

	if (!m || !order || !chosen) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	have = plan_machine(p, machine, m, note, sizeof(note), err, errlen);
	if (have < 0)
		goto out;
	if (!have) {
		snprintf(err, errlen, "--top needs step-time predictions: %s",
			 note[0] ? note : "a CPU sweep has none");
		goto out;
	}
	if (plan_predict(p, m, NULL, &pp, err, errlen))
		goto out;
	for (size_t i = 0; i < *n_sel; i++)
		chosen[sel[i]] = 1;
	plan_sort(p, &pp, PLAN_SORT_MFU, order);
	for (size_t i = 0; i < p->n_entries && n < k; i++) {
		size_t e = order[i];

		if (!chosen[e] || !pp.p[e].ok)
			continue;
		sel[n++] = e;
		mfu_last = pp.p[e].mfu;
	}
	if (!n) {
		snprintf(err, errlen, "--top: none of the %zu layout(s) to submit can be predicted on "
				      "machine '%s'%s%s",
			 cand, m->name, pp.n_unpredicted ? ": " : "",
			 pp.n_unpredicted ? pp.note : "");
		goto out;
	}
	snprintf(info, infolen,
		 "top %zu of %zu layout(s) by predicted MFU on machine '%s' (%s): %.1f%% down to "
		 "%.1f%%",
		 n, cand, m->name, m->calibrated ? "calibrated" : "uncalibrated",
		 100.0 * pp.p[sel[0]].mfu, 100.0 * mfu_last);
	*n_sel = n;
	rc = 0;
out:
	plan_predictions_free(&pp);
	free(m);
	free(order);
	free(chosen);
	return rc;
}
