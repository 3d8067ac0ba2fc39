/*
 * The plan's writers (sweeps/plan_print.h): a table, CSV or JSON of every layout with its
 * status, and the summary. `layoutbench plan` (cli/plan.c) is their shell.
 */
#include "sweeps/plan_print.h"

#include "common/model.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/layout.h"
#include "common/util.h"

#define NPRED	  3 /* predicted step_s, mfu, gpu_h */
#define NCOLS_MAX (LB_NFIELDS + 5 + NPRED)
#define GPUS	  (-1) /* the column of the GPUs a layout's job allocates */

/*
 * The columns of a plan entry: its id; the layout's, which are the fields with a heading
 * (common/layout_fields.def) in their order and the GPUs after the global batch; its
 * label, memory and status. layout_cols fills cols with the fields (GPUS for the GPUs)
 * and returns their number; the entry's cells are then id, those, label, mem_gib, status.
 */
static int layout_cols(int *cols)
{
	int n = 0;

	for (int f = 0; f < LB_NFIELDS; f++) {
		if (!lb_fields[f].head)
			continue;
		cols[n++] = f;
		if (f == LB_FLD_GLOBAL_BATCH)
			cols[n++] = GPUS;
	}
	return n;
}

/* The entry printed k-th. */
static size_t at(const struct plan_print_opts *o, size_t k)
{
	return o && o->order ? o->order[k] : k;
}

/* The prediction of entry i, or NULL. */
static const struct plan_pred *pred_of(const struct plan_print_opts *o, size_t i)
{
	if (!o || !o->pred || !o->pred->p || !o->pred->p[i].ok)
		return NULL;
	return &o->pred->p[i];
}

static int with_pred(const struct plan_print_opts *o)
{
	return o && o->pred && o->pred->p;
}

/* The prediction's cells: step seconds, MFU, GPU-hours ("-" or "" without). */
static void pred_cells(const struct plan_pred *q, char (*cells)[192], int for_table)
{
	if (!q) {
		for (int i = 0; i < NPRED; i++)
			snprintf(cells[i], 192, "%s", for_table ? "-" : "");
		return;
	}
	snprintf(cells[0], 192, q->step_s < 10 ? "%.3f" : "%.2f", q->step_s);
	snprintf(cells[1], 192, for_table ? "%.1f%%" : "%.4f", for_table ? 100.0 * q->mfu : q->mfu);
	snprintf(cells[2], 192, q->gpu_hours < 10 ? "%.3f" : "%.1f", q->gpu_hours);
}

/* GPUs a layout's job allocates (tp*pp*dp for a valid layout). */
static long long entry_gpus(const struct plan_entry *e)
{
	return (long long)e->layout.gpus_per_node * e->layout.nodes; /* past 2^31 too */
}

/* The cells of entry e (layout_cols' order); nc: their number. */
static int format_cells(const struct plan_entry *e, char cells[NCOLS_MAX][192], int for_table)
{
	const struct lb_layout *l = &e->layout;
	int cols[LB_NFIELDS + 1], nl = layout_cols(cols), c = 0;

	snprintf(cells[c++], 192, "%s", e->id);
	for (int k = 0; k < nl; k++, c++) {
		if (cols[k] == GPUS) {
			snprintf(cells[c], 192, "%lld", entry_gpus(e));
			continue;
		}
		lb_field_text(l, cols[k], cells[c], 192);
		if (for_table && cols[k] == LB_FLD_PP) {
			/* the pipeline's shape: "4x2" virtual stages, "4 [7,8,8,7]" a split */
			size_t n = strlen(cells[c]);

			if (lb_layout_chunks(l) > 1)
				n += (size_t)snprintf(cells[c] + n, 192 - n, "x%d",
						      l->virtual_stages);
			for (int i = 0;
			     lb_layout_split_explicit(l) && i < l->n_stage_layers && n < 180; i++)
				n += (size_t)snprintf(cells[c] + n, 192 - n, "%s%d", i ? "," : " [",
						      l->stage_layers[i]);
			if (lb_layout_split_explicit(l) && n < 190)
				snprintf(cells[c] + n, 192 - n, "]");
		}
	}
	snprintf(cells[c++], 192, "%s", e->label[0] || !for_table ? e->label : "-");
	if (e->status == PLAN_INVALID)
		snprintf(cells[c++], 192, "%s", for_table ? "-" : "");
	else
		snprintf(cells[c++], 192, e->mem_gib >= 0.1 || e->mem_gib <= 0 ? "%.1f" : "%.2g",
			 e->mem_gib); /* a tiny layout's 0.0041, not 0.0 */
	switch (e->status) {
	case PLAN_OK:
		snprintf(cells[c], 192, "ok");
		break;
	case PLAN_OOM:
		if (for_table)
			snprintf(cells[c], 192, "oom: %s", e->reason);
		else
			snprintf(cells[c], 192, "oom");
		break;
	case PLAN_INVALID:
		snprintf(cells[c], 192, "invalid: %s", e->reason);
		break;
	}
	return c + 1;
}

/* A GPU sweep without the GPUs' memory prunes nothing: say so on stderr. */
static void warn_unpruned(const struct sweep_plan *p)
{
	if (p->cluster.gpu_mem_gib <= 0 && strcmp(p->cluster.device, "cpu"))
		fprintf(stderr,
			"warning: plan '%s': cluster.gpu_mem_gib is not set, so no layout was "
			"checked against GPU memory (set it, e.g. 80 for an A100 80GB, 139.8 for "
			"an H200)\n",
			p->name);
}

/* A cluster.gpu the peak table does not know (a misspelling such as "A1OO", or a GPU it
 * lacks) leaves every run's MFU without a peak: say so, with the names it knows, unless
 * the spec gives the peak itself. */
static void warn_unknown_gpu(const struct sweep_plan *p)
{
	char names[256];

	if (!p->cluster.gpu[0] || lb_gpu_known(p->cluster.gpu) || p->cluster.peak_tflops > 0 ||
	    !strcmp(p->cluster.device, "cpu") || !strcasecmp(p->cluster.gpu, "cpu"))
		return;
	lb_gpu_names(names, sizeof(names));
	fprintf(stderr,
		"warning: plan '%s': cluster.gpu '%s' is not a GPU layoutbench knows, so its "
		"runs' MFU will have no peak (known: %s; a misspelling? or set "
		"cluster.peak_tflops)\n",
		p->name, p->cluster.gpu, names);
}

static void print_pred_summary(FILE *f, const struct sweep_plan *p, const struct plan_print_opts *o)
{
	const struct plan_predictions *pp = o ? o->pred : NULL;
	double h = 0;

	if (!pp)
		return;
	if (!pp->p) {
		if (pp->note[0])
			fprintf(f, "%s\n", pp->note);
		return;
	}
	for (size_t i = 0; i < pp->n; i++)
		if (pp->p[i].ok)
			h += pp->p[i].gpu_hours;
	fprintf(f, "predicted on machine '%s' (%s): %zu of %zu ok layouts", pp->machine,
		pp->calibrated ? "calibrated"
		: pp->nominal  ? "nominal tables, uncalibrated"
			       : "measured tables, uncalibrated",
		pp->n_pred, p->n_ok);
	if (pp->n_pred)
		fprintf(f,
			h < 10.0 ? ", %.3f GPU-hours; best MFU %.1f%% (%s)"
				 : ", %.0f GPU-hours; best MFU %.1f%% (%s)",
			h, 100.0 * pp->p[pp->best].mfu, p->entries[pp->best].id);
	fprintf(f, "\n");
	if (pp->n_unpredicted)
		fprintf(f, "%zu ok layout(s) without a prediction; %s\n", pp->n_unpredicted,
			pp->note);
}

static void print_summary(FILE *f, const struct sweep_plan *p, const struct plan_print_opts *o)
{
	warn_unpruned(p);
	warn_unknown_gpu(p);
	fprintf(f, "plan '%s': %zu layouts: %zu ok, %zu oom, %zu invalid", p->name, p->n_entries,
		p->n_ok, p->n_oom, p->n_invalid);
	if (p->n_filtered && p->n_duplicates)
		fprintf(f, " (%zu points dropped by where, %zu duplicates merged)", p->n_filtered,
			p->n_duplicates);
	else if (p->n_filtered)
		fprintf(f, " (%zu points dropped by where)", p->n_filtered);
	else if (p->n_duplicates)
		fprintf(f, " (%zu duplicates merged)", p->n_duplicates);
	fprintf(f, "\n");
	if (p->step_time_guess_s > 0) {
		double h = sweep_gpu_hours(p, NULL, 0);

		fprintf(f, h < 10.0 ? "estimate: %.3f" : "estimate: %.0f", h);
		fprintf(f, " GPU-hours for the %zu ok layouts at %g s per step\n", p->n_ok,
			p->step_time_guess_s);
	}
	print_pred_summary(f, p, o);
}

static void write_table(FILE *f, const struct sweep_plan *p, const struct plan_print_opts *o)
{
	static const char *const pred_heads[NPRED] = {"step_s", "mfu", "gpu_h"};
	const char *heads[NCOLS_MAX];
	int right[NCOLS_MAX], col[NCOLS_MAX], lc[LB_NFIELDS + 1];
	char cells[NCOLS_MAX][192], base[NCOLS_MAX][192];
	size_t w[NCOLS_MAX], i;
	int c, k, nl = layout_cols(lc), ne = nl + 4, np = with_pred(o) ? NPRED : 0, nc = ne + np;

	/* the columns shown, in order: the entry's but its status, the prediction's, the
	 * status; text left, numbers right */
	heads[0] = "id";
	right[0] = 0;
	for (k = 0; k < nl; k++) {
		heads[1 + k] = lc[k] == GPUS ? "gpus" : lb_fields[lc[k]].head;
		right[1 + k] = lc[k] == GPUS || (lb_fields[lc[k]].kind != LB_FK_NAME &&
						 lb_fields[lc[k]].kind != LB_FK_ENUM);
	}
	heads[nl + 1] = "label", right[nl + 1] = 0;
	heads[nl + 2] = "mem_gib", right[nl + 2] = 1;
	for (k = 0; k < np; k++)
		heads[ne - 1 + k] = pred_heads[k], right[ne - 1 + k] = 1;
	heads[nc - 1] = "status", right[nc - 1] = 0;
	for (c = 0; c < nc; c++) {
		col[c] = c < ne - 1 ? c : c < nc - 1 ? -1 : ne - 1; /* -1: a prediction's */
		w[c] = strlen(heads[c]);
	}
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1)
			for (c = 0; c < nc; c++) {
				if (c == nc - 1)
					fprintf(f, "%s\n", heads[c]);
				else
					fprintf(f, right[c] ? "%*s  " : "%-*s  ", (int)w[c],
						heads[c]);
			}
		for (i = 0; i < p->n_entries; i++) {
			size_t e = at(o, i);

			format_cells(&p->entries[e], base, 1);
			pred_cells(pred_of(o, e), &cells[ne - 1], 1);
			for (c = 0; c < nc; c++) {
				const char *t = col[c] >= 0 ? base[col[c]] : cells[c];

				if (pass == 0) {
					if (strlen(t) > w[c])
						w[c] = strlen(t);
				} else if (c == nc - 1) {
					fprintf(f, "%s\n", t);
				} else {
					fprintf(f, right[c] ? "%*s  " : "%-*s  ", (int)w[c], t);
				}
			}
		}
	}
}

static void csv_field(FILE *f, const char *s, int last)
{
	lb_csv_put(f, s);
	fputc(last ? '\n' : ',', f);
}

static void write_csv(FILE *f, const struct sweep_plan *p, const struct plan_print_opts *o)
{
	char cells[NCOLS_MAX][192], pc[NPRED][192];
	int lc[LB_NFIELDS + 1], nl = layout_cols(lc), c, wp = with_pred(o);
	size_t i;

	/* the contract's columns: the id and the layout's, the memory and status, then label
	 * and the oom/invalid reason, then the prediction */
	fprintf(f, "id");
	for (c = 0; c < nl; c++)
		fprintf(f, ",%s", lc[c] == GPUS ? "gpus" : lb_fields[lc[c]].key);
	fprintf(f, ",mem_gib,status,label,reason%s\n",
		wp ? ",predicted_step_s,predicted_mfu,predicted_gpu_hours" : "");
	for (i = 0; i < p->n_entries; i++) {
		size_t e = at(o, i);

		format_cells(&p->entries[e], cells, 0);
		for (c = 0; c <= nl; c++)
			csv_field(f, cells[c], 0);
		csv_field(f, cells[nl + 2], 0);
		csv_field(f, cells[nl + 3], 0);
		csv_field(f, cells[nl + 1], 0);
		csv_field(f, p->entries[e].status == PLAN_OK ? "" : p->entries[e].reason, !wp);
		if (wp) {
			pred_cells(pred_of(o, e), pc, 0);
			for (c = 0; c < NPRED; c++)
				csv_field(f, pc[c], c == NPRED - 1);
		}
	}
}

/* Two decimals; below 0.1 (a tiny model's few MiB) two significant digits instead, so
 * that no estimate reads 0. */
static double round2(double x)
{
	if (x > 0 && x < 0.1) {
		double scale = pow(10.0, 1.0 - floor(log10(x)));

		return round(x * scale) / scale;
	}
	return round(x * 100.0) / 100.0;
}

/* A number field of a JSON object, for tables of them. */
struct field {
	const char *key;
	double value;
};

static void add_numbers(cJSON *o, const struct field *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cJSON_AddNumberToObject(o, f[i].key, f[i].value);
}

/* key: v where it is known, else null (an unknown is not a zero). */
static void add_known(cJSON *o, const char *key, int known, double v)
{
	if (known)
		cJSON_AddNumberToObject(o, key, v);
	else
		cJSON_AddNullToObject(o, key);
}

static cJSON *entry_json(const struct plan_entry *e, const struct plan_pred *q, int wp)
{
	const struct lb_layout *l = &e->layout;
	const struct lb_model *m = &l->model;
	cJSON *o = cJSON_CreateObject(), *lo, *mo;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "id", e->id);
	cJSON_AddStringToObject(o, "label", e->label);
	cJSON_AddStringToObject(o, "status", sweep_status_name(e->status));
	cJSON_AddStringToObject(o, "reason", e->reason);
	add_known(o, "mem_gib", e->status != PLAN_INVALID, round2(e->mem_gib));
	cJSON_AddNumberToObject(o, "gpus", (double)entry_gpus(e));
	cJSON_AddNumberToObject(o, "accum", lb_layout_accum_steps(l));
	lo = cJSON_AddObjectToObject(o, "layout");
	mo = cJSON_AddObjectToObject(o, "model");
	if (lo)
		cJSON_AddStringToObject(lo, "model", m->name);
	if (mo)
		cJSON_AddStringToObject(mo, "name", m->name);
	/* the fields in order: the model's shape in "model" (tied as a boolean), the rest in
	 * "layout"; a sparse field only when it differs from its default */
	for (int f = 0; f < LB_NFIELDS; f++) {
		const struct lb_field_info *fi = &lb_fields[f];
		cJSON *to = fi->in_model ? mo : lo;
		char t[64];

		if (!to || fi->kind == LB_FK_NAME || !lb_field_shown(l, f))
			continue;
		lb_field_text(l, f, t, sizeof(t));
		if (fi->kind == LB_FK_ENUM)
			cJSON_AddStringToObject(to, fi->key, t);
		else if (fi->kind == LB_FK_SPLIT)
			cJSON_AddItemToObject(
			    to, fi->key, cJSON_CreateIntArray(l->stage_layers, l->n_stage_layers));
		else if (fi->kind == LB_FK_BOOL && fi->in_model)
			cJSON_AddBoolToObject(to, fi->key, lb_field_get(l, f));
		else if (fi->kind == LB_FK_SEED)
			cJSON_AddNumberToObject(to, fi->key, (double)(uint64_t)lb_field_get(l, f));
		else
			cJSON_AddNumberToObject(to, fi->key, (double)lb_field_get(l, f));
	}
	if (wp && q) {
		cJSON *po = cJSON_AddObjectToObject(o, "predicted");
		const struct field pf[] = {{"step_s", round(q->step_s * 1e4) / 1e4},
					   {"mfu", round(q->mfu * 1e4) / 1e4},
					   {"gpu_hours", round(q->gpu_hours * 1e4) / 1e4}};

		if (po)
			add_numbers(po, pf, sizeof(pf) / sizeof(pf[0]));
	} else if (wp) {
		cJSON_AddNullToObject(o, "predicted");
	}
	return o;
}

static cJSON *string_array(char **s, int n)
{
	cJSON *a = cJSON_CreateArray();
	int i;

	for (i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(s[i]));
	return a;
}

/* cJSON_Print with every byte that is not UTF-8 as \ufffd: valid JSON whatever a spec's
 * strings hold (cJSON copies them as they are). Caller frees. */
static char *fixed_print(const cJSON *v)
{
	char *t = cJSON_Print(v), *f = t ? lb_json_utf8_fix(t) : NULL;

	free(t);
	return f;
}

static int write_json(FILE *f, const struct sweep_plan *p, const struct plan_print_opts *o)
{
	const struct sweep_cluster *cl = &p->cluster;
	cJSON *root = cJSON_CreateObject(), *c, *s;
	char *text = NULL, *tail;
	size_t i;
	int rc = -1;

	if (!root)
		return -1;
	cJSON_AddStringToObject(root, "name", p->name);
	cJSON_AddStringToObject(root, "description", p->description);
	add_known(root, "step_time_guess_s", p->step_time_guess_s > 0, p->step_time_guess_s);
	c = cJSON_AddObjectToObject(root, "cluster");
	if (c) {
		cJSON_AddStringToObject(c, "partition", cl->partition);
		cJSON_AddStringToObject(c, "account", cl->account);
		cJSON_AddStringToObject(c, "qos", cl->qos);
		cJSON_AddNumberToObject(c, "time_limit_min", cl->time_limit_min);
		cJSON_AddNumberToObject(c, "gpus_per_node", cl->gpus_per_node);
		cJSON_AddNumberToObject(c, "gpu_mem_gib", cl->gpu_mem_gib);
		cJSON_AddStringToObject(c, "gpu", cl->gpu);
		add_known(c, "peak_tflops", cl->peak_tflops > 0, cl->peak_tflops);
		cJSON_AddNumberToObject(c, "cpus_per_task", cl->cpus_per_task);
		cJSON_AddBoolToObject(c, "exclusive", cl->exclusive);
		cJSON_AddItemToObject(c, "sbatch_extra",
				      string_array(cl->sbatch_extra, cl->n_sbatch_extra));
		cJSON_AddItemToObject(c, "env", string_array(cl->env, cl->n_env));
		cJSON_AddItemToObject(c, "setup", string_array(cl->setup, cl->n_setup));
		cJSON_AddStringToObject(c, "device", cl->device);
	}
	s = cJSON_AddObjectToObject(root, "summary");
	if (s) {
		double gh = sweep_gpu_hours(p, NULL, 0); /* < 0: no step time guess */

		cJSON_AddNumberToObject(s, "layouts", (double)p->n_entries);
		cJSON_AddNumberToObject(s, "ok", (double)p->n_ok);
		cJSON_AddNumberToObject(s, "oom", (double)p->n_oom);
		cJSON_AddNumberToObject(s, "invalid", (double)p->n_invalid);
		cJSON_AddNumberToObject(s, "filtered", (double)p->n_filtered);
		cJSON_AddNumberToObject(s, "duplicates", (double)p->n_duplicates);
		add_known(s, "gpu_hours", gh >= 0, round(gh * 1e4) / 1e4);
	}
	if (o && o->pred) {
		const struct plan_predictions *pp = o->pred;
		cJSON *po = cJSON_AddObjectToObject(root, "prediction");

		if (po) {
			double h = 0;

			for (size_t j = 0; pp->p && j < pp->n; j++)
				if (pp->p[j].ok)
					h += pp->p[j].gpu_hours;
			if (pp->p)
				cJSON_AddStringToObject(po, "machine", pp->machine);
			else
				cJSON_AddNullToObject(po, "machine");
			cJSON_AddBoolToObject(po, "calibrated", pp->calibrated);
			cJSON_AddBoolToObject(po, "nominal", pp->nominal);
			cJSON_AddNumberToObject(po, "predicted", (double)pp->n_pred);
			add_known(po, "gpu_hours", pp->p != NULL, round(h * 1e4) / 1e4);
			cJSON_AddStringToObject(po, "note", pp->note);
		}
	}
	/* the entries stream one at a time into the place of an empty array, in the layout
	 * cJSON_Print gives the whole (two tabs deeper): memory stays that of one entry */
	if (!cJSON_AddArrayToObject(root, "entries"))
		goto out_delete;
	text = fixed_print(root); /* a spec's strings may hold invalid UTF-8 */
	cJSON_Delete(root);
	root = NULL;
	tail = text ? strrchr(text, '[') : NULL;
	if (!tail || strcmp(tail, "[]\n}"))
		goto out_free;
	fwrite(text, 1, (size_t)(tail - text) + 1, f);
	for (i = 0; i < p->n_entries; i++) {
		size_t k = at(o, i);
		cJSON *e = entry_json(&p->entries[k], pred_of(o, k), with_pred(o));
		char *et = e ? fixed_print(e) : NULL;

		cJSON_Delete(e);
		if (!et)
			goto out_free;
		if (i)
			fputs(", ", f);
		for (const char *ln = et, *nl; *ln; ln = nl + 1) {
			nl = strchr(ln, '\n');
			if (!nl) {
				fputs(ln, f);
				break;
			}
			fwrite(ln, 1, (size_t)(nl - ln) + 1, f);
			fputs("\t\t", f);
		}
		free(et);
	}
	fputs("]\n}\n", f);
	rc = 0;
out_free:
	free(text);
out_delete:
	cJSON_Delete(root);
	return rc;
}

int plan_format_parse(const char *s, enum plan_format *fmt)
{
	static const char *const names[] = {"table", "csv", "json"};

	for (int i = 0; i < 3; i++)
		if (s && !strcmp(s, names[i])) {
			*fmt = (enum plan_format)i;
			return 0;
		}
	return -1;
}

int plan_print(FILE *out, FILE *diag, const struct sweep_plan *p, enum plan_format fmt, char *err,
	       size_t errlen)
{
	return plan_print_ex(out, diag, p, fmt, NULL, err, errlen);
}

int plan_print_ex(FILE *out, FILE *diag, const struct sweep_plan *p, enum plan_format fmt,
		  const struct plan_print_opts *o, char *err, size_t errlen)
{
	switch (fmt) {
	case PLAN_TABLE:
		write_table(out, p, o);
		print_summary(out, p, o);
		break;
	case PLAN_CSV:
		write_csv(out, p, o);
		fflush(out); /* the summary after the rows when both go to one stream */
		print_summary(diag, p, o);
		break;
	case PLAN_JSON:
		if (write_json(out, p, o)) {
			snprintf(err, errlen, "plan '%s': out of memory writing json", p->name);
			return -1;
		}
		fflush(out);
		print_summary(diag, p, o);
		break;
	}
	if (fflush(out) || ferror(out)) {
		snprintf(err, errlen, "writing the plan failed");
		return -1;
	}
	return 0;
}
