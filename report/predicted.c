/*
 * The predicted-against-measured figure (report/predicted.h): runs read as calibrate reads
 * them, each predicted on its sweep's machine, then a table of scores, the pairs of runs a
 * pipeline cannot make (results/calibrate.h), a table of runs and, on the HTML page, the
 * scatter drawn by gnuplot (report/plot.h runs it).
 */
#include "report/predicted.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/machine.h"
#include "common/predict.h"
#include "common/util.h"
#include "report/load.h"
#include "report/plot.h"
#include "report/render.h"
#include "results/calibrate.h"

/* One run with its prediction. */
struct pred_run {
	size_t row;	/* into the calib_set */
	double pred_s;	/* NaN: not predicted */
	char why[160];	/* when not predicted */
};

/* One sweep's runs and their machine. */
struct pred_sweep {
	const char *name;
	char machine[64];
	int calibrated;
	char note[256]; /* no machine: why */
	size_t n_runs, n_pred;
	struct lb_pred_score score;
	int left_other; /* failed runs other than OOM */
};

static int load_sweeps(sqlite3 *db, const char *sweep, char ***names, size_t *n, char *err,
		       size_t errlen)
{
	sqlite3_stmt *st = NULL;
	size_t cap = 0;
	int rc;

	*names = NULL;
	*n = 0;
	if (report_load_prepare(db,
				"SELECT DISTINCT sweep FROM runs WHERE status = 'ok' AND "
				"(?1 IS NULL OR sweep = ?1) ORDER BY sweep",
				sweep, &st)) {
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (lb_grow(names, *n, &cap, 8, sizeof(**names)))
			goto out_oom;
		(*names)[*n] = strdup((const char *)sqlite3_column_text(st, 0));
		if (!(*names)[*n])
			goto out_oom;
		(*n)++;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
		return -1;
	}
	return 0;
out_oom:
	sqlite3_finalize(st);
	snprintf(err, errlen, "out of memory");
	return -1;
}

static void md_header(struct lb_strbuf *sb)
{
	lb_strbuf_adds(sb, "| sweep | machine | runs | predicted | left out | mean abs error | "
			   "worst | Spearman | MFU of predicted best | best MFU | gap (points) |\n"
			   "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
			   "---: |\n");
}

static void md_score(struct lb_strbuf *sb, const struct pred_sweep *w)
{
	lb_strbuf_addf(sb, "| %s | %s | %zu | %zu | %d | ", w->name, w->machine[0] ? w->machine : "-",
		       w->n_runs, w->n_pred, w->left_other);
	if (!w->n_pred) {
		lb_strbuf_addf(sb, "- | - | - | - | - | - |\n");
		return;
	}
	lb_strbuf_addf(sb, "%.2f%% | %.2f%% | %.3f | %.2f%% | %.2f%% | %.2f |\n",
		       100.0 * w->score.mean_abs, 100.0 * w->score.max_abs, w->score.spearman,
		       100.0 * w->score.mfu_of_predicted_best, 100.0 * w->score.mfu_best,
		       100.0 * (w->score.mfu_best - w->score.mfu_of_predicted_best));
}

/* The gnuplot script of the scatter: one point set per sweep, the line predicted =
 * measured and the band of +-5%. */
static void scatter_script(struct lb_strbuf *sb, const struct calib_set *s,
			   const struct pred_run *runs, const struct pred_sweep *sw, size_t nsw)
{
	double lo = INFINITY, hi = 0;
	const char *const *pal;
	size_t npal = plot_palette(&pal);

	for (size_t i = 0; i < s->n; i++) {
		if (isnan(runs[i].pred_s))
			continue;
		double a = fmin(runs[i].pred_s, s->rows[i].step_s),
		       b = fmax(runs[i].pred_s, s->rows[i].step_s);
		lo = fmin(lo, a);
		hi = fmax(hi, b);
	}
	if (!(hi > 0))
		lo = 0.1, hi = 1;
	lo *= 0.9, hi *= 1.1;
	lb_strbuf_addf(sb, "set terminal svg size 720,640 dynamic font 'sans,11'\n"
			   "set xlabel 'measured seconds per step'\nset ylabel 'predicted seconds per step'\n"
			   "set logscale xy\nset xrange [%g:%g]\nset yrange [%g:%g]\nset grid\n"
			   "set key outside bottom center horizontal maxrows 4 font 'sans,9'\n"
			   "set size ratio -1\n",
		       lo, hi, lo, hi);
	for (size_t k = 0; k < nsw; k++) {
		lb_strbuf_addf(sb, "$s%zu << EOD\n", k);
		for (size_t i = 0; i < s->n; i++)
			if (s->rows[i].group == sw[k].name && !isnan(runs[i].pred_s))
				lb_strbuf_addf(sb, "%.6g %.6g\n", s->rows[i].step_s, runs[i].pred_s);
		lb_strbuf_adds(sb, "EOD\n");
	}
	lb_strbuf_adds(sb, "plot x with lines lc rgb '#444444' title 'predicted = measured', "
			   "1.05*x with lines dt 2 lc rgb '#999999' title '+-5%', "
			   "0.95*x with lines dt 2 lc rgb '#999999' notitle");
	for (size_t k = 0; k < nsw; k++) {
		char t[128];
		size_t j = 0;

		/* a title without quotes or backslashes (gnuplot string) */
		for (const char *c = sw[k].name; *c && j + 1 < sizeof(t); c++)
			t[j++] = (*c == '\'' || *c == '\\') ? '_' : *c;
		t[j] = '\0';
		if (sw[k].n_pred)
			lb_strbuf_addf(sb, ", $s%zu with points pt 7 ps 0.6 lc rgb '%s' title '%s'", k,
				       pal[k % npal], t);
	}
	lb_strbuf_adds(sb, "\n");
}

/* The pairs of runs over the pipeline bound (calib_bound_pairs): calibrate's markdown table
 * (calib_bound_md), or an HTML one; nothing when there are none. */
static void bound_table(struct lb_strbuf *out, const struct calib_set *s,
			const struct calib_bound_pair *over, size_t n_over, int html)
{
	if (!n_over)
		return;
	lb_strbuf_adds(out, html ? "<h3>Runs a pipeline cannot make</h3>\n<p class=\"note\">"
				 : "\nRuns a pipeline cannot make: ");
	lb_strbuf_addf(out, CALIB_BOUND_WHAT ".", 100.0 * CALIB_BOUND_SLACK);
	if (!html) {
		lb_strbuf_adds(out, "\n\n");
		calib_bound_md(out, s, over, n_over, render_md_escape);
		return;
	}
	lb_strbuf_adds(out, "</p>\n<table>\n<tr><th>sweep</th><th>label</th><th>larger's layout"
			    "</th><th>tp</th><th>pp</th><th>dp</th><th>ckpt</th><th>micro-batches"
			    "</th><th>step s</th><th>ratio</th><th>bound</th><th>over</th></tr>\n");
	for (size_t i = 0; i < n_over; i++) {
		const struct calib_bound_pair *q = &over[i];
		const struct lb_fit_row *lo = &s->rows[q->lo], *hi = &s->rows[q->hi];
		double ratio = q->hi_s / q->lo_s;

		lb_strbuf_adds(out, "<tr><td>");
		render_html_escape(out, lo->group);
		lb_strbuf_adds(out, "</td><td>");
		render_html_escape(out, lo->label[0] ? lo->label : "-");
		lb_strbuf_addf(out,
			       "</td><td>%s</td><td class=\"num\">%d</td><td class=\"num\">%d</td>"
			       "<td class=\"num\">%d</td><td>%s</td><td>%d -&gt; %d</td><td>%.4g "
			       "-&gt; %.4g</td><td class=\"num\">%.3f</td><td class=\"num\">%.3f</td>"
			       "<td class=\"num\">%+.1f%%</td></tr>\n",
			       s->layout_id[q->hi], lo->layout.tp, lo->layout.pp, lo->layout.dp,
			       lb_ckpt_name(lo->layout.checkpointing), lo->layout.micro_batch,
			       hi->layout.micro_batch, q->lo_s, q->hi_s, ratio, q->bound,
			       100.0 * (ratio / q->bound - 1.0));
	}
	lb_strbuf_adds(out, "</table>\n");
}

int report_predicted(sqlite3 *db, const char *sweep, const char *machine,
		     enum report_pred_format fmt, struct lb_strbuf *out, char *err, size_t errlen)
{
	char **names = NULL;
	size_t nsw = 0;
	struct calib_set set = {0};
	struct pred_run *runs = NULL;
	struct pred_sweep *sw = NULL;
	struct lb_machine *m = malloc(sizeof(*m));
	struct calib_bound_pair *over = NULL;
	size_t *idx = NULL, n_over = 0;
	int rc = -1;

	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (load_sweeps(db, sweep, &names, &nsw, err, errlen))
		goto out;
	if (!nsw) {
		snprintf(err, errlen, "no ok run%s%s%s to predict (collect or import runs first)",
			 sweep ? " in sweep '" : "", sweep ? sweep : "", sweep ? "'" : "");
		goto out;
	}
	if (calib_load(db, (const char *const *)names, nsw, &set, err, errlen))
		goto out;
	if (fmt != REPORT_PRED_CSV && calib_bound_pairs(&set, &over, &n_over)) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	runs = calloc(set.n ? set.n : 1, sizeof(*runs));
	sw = calloc(nsw, sizeof(*sw));
	idx = malloc((set.n ? set.n : 1) * sizeof(size_t));
	if (!runs || !sw || !idx) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t k = 0; k < nsw; k++) {
		struct lb_predict_cache cache;
		const char *mn = machine;
		char gpu[64] = "";
		size_t n = 0, np = 0;

		sw[k].name = set.sweeps[k];
		sw[k].left_other = set.counts[k].other;
		for (size_t i = 0; i < set.n; i++)
			if (set.rows[i].group == set.sweeps[k])
				idx[n++] = i;
		sw[k].n_runs = n;
		if (!mn) { /* the machine shipped for the GPU the sweep's runs name */
			sqlite3_stmt *st = NULL;

			if (sqlite3_prepare_v2(db,
					       "SELECT gpu FROM runs WHERE sweep = ?1 AND status = 'ok' "
					       "AND gpu IS NOT NULL LIMIT 1",
					       -1, &st, NULL) == SQLITE_OK) {
				sqlite3_bind_text(st, 1, set.sweeps[k], -1, SQLITE_TRANSIENT);
				if (sqlite3_step(st) == SQLITE_ROW)
					snprintf(gpu, sizeof(gpu), "%s", sqlite3_column_text(st, 0));
			}
			sqlite3_finalize(st);
			mn = lb_machine_for_gpu(gpu);
		}
		for (size_t i = 0; i < n; i++)
			runs[idx[i]].pred_s = NAN;
		if (!mn) {
			snprintf(sw[k].note, sizeof(sw[k].note),
				 "no machine is shipped for GPU '%s' (give --machine NAME|FILE)",
				 gpu[0] ? gpu : "unknown");
			continue;
		}
		if (lb_machine_load(mn, m, err, errlen))
			goto out;
		snprintf(sw[k].machine, sizeof(sw[k].machine), "%s", m->name);
		sw[k].calibrated = m->calibrated;
		lb_predict_cache_init(&cache);
		for (size_t i = 0; i < n; i++) {
			struct lb_prediction p;
			struct pred_run *r = &runs[idx[i]];

			if (lb_predict(m, &set.rows[idx[i]].layout, set.rows[idx[i]].label, &cache, &p,
				       r->why, sizeof(r->why)))
				continue;
			r->pred_s = p.step_s;
			np++;
		}
		lb_predict_cache_release(&cache);
		sw[k].n_pred = np;
		calib_score(m, &set, idx, n, &sw[k].score, &np);
	}

	rc = 0;
	if (fmt == REPORT_PRED_CSV) {
		lb_strbuf_adds(out, "sweep,machine,layout_id,label,micro_batch,tp,pp,dp,"
				    "sequence_parallel,checkpointing,attention,norm,measured_step_s,"
				    "predicted_step_s,relative_error\n");
		for (size_t i = 0; i < set.n; i++) {
			const struct lb_fit_row *r = &set.rows[i];
			const struct lb_layout *l = &r->layout;
			size_t k = 0;

			while (k < nsw && sw[k].name != r->group)
				k++;
			render_csv_field(out, r->group);
			lb_strbuf_adds(out, ",");
			render_csv_field(out, k < nsw ? sw[k].machine : "");
			lb_strbuf_addf(out, ",%s,", set.layout_id[i]);
			render_csv_field(out, r->label);
			lb_strbuf_addf(out, ",%d,%d,%d,%d,%d,%s,%s,%s,%.6g,", l->micro_batch, l->tp,
				       l->pp, l->dp, l->sequence_parallel,
				       lb_ckpt_name(l->checkpointing), lb_attn_name(l->attention),
				       lb_norm_name(l->norm), r->step_s);
			if (isnan(runs[i].pred_s))
				lb_strbuf_adds(out, ",\n");
			else
				lb_strbuf_addf(out, "%.6g,%.6f\n", runs[i].pred_s,
					       (runs[i].pred_s - r->step_s) / r->step_s);
		}
		goto out;
	}
	if (fmt == REPORT_PRED_HTML) {
		struct lb_strbuf script = LB_STRBUF_INIT;
		char *svg = NULL, perr[256];
		int prc;

		render_html_begin(out, "layoutbench: predicted against measured");
		scatter_script(&script, &set, runs, sw, nsw);
		prc = script.failed ? PLOT_ERR_FAILED
				    : plot_run(lb_strbuf_str(&script), &svg, perr, sizeof(perr));
		lb_strbuf_release(&script);
		lb_strbuf_adds(out, "<section>\n<h2>Predicted against measured step times</h2>\n"
				    "<p class=\"note\">Each point is one ok run: its mean steady-state "
				    "step time (x) and the step time the machine predicts for its "
				    "layout (y); the dashed lines are 5% off. docs/prediction.md gives "
				    "the model.</p>\n<div class=\"plot\">");
		if (prc == 0) {
			lb_strbuf_adds(out, svg);
		} else {
			lb_strbuf_adds(out, "<p class=\"note\">No plot: ");
			render_html_escape(out, perr);
			lb_strbuf_adds(out, ".</p>");
			if (prc != PLOT_ERR_MISSING)
				rc = 1;
			fprintf(stderr, "%s: %s\n", prc == PLOT_ERR_MISSING ? "warning" : "error",
				perr);
		}
		free(svg);
		lb_strbuf_adds(out, "</div>\n<table>\n<tr><th>sweep</th><th>machine</th><th>runs"
				    "</th><th>predicted</th><th>left out</th><th>mean abs error</th>"
				    "<th>worst</th><th>Spearman</th><th>MFU of predicted best</th>"
				    "<th>best MFU</th><th>gap (points)</th></tr>\n");
		for (size_t k = 0; k < nsw; k++) {
			const struct pred_sweep *w = &sw[k];

			lb_strbuf_adds(out, "<tr><td>");
			render_html_escape(out, w->name);
			lb_strbuf_adds(out, "</td><td>");
			render_html_escape(out, w->machine[0] ? w->machine : w->note);
			lb_strbuf_addf(out, "</td><td class=\"num\">%zu</td><td class=\"num\">%zu</td>"
					    "<td class=\"num\">%d</td>",
				       w->n_runs, w->n_pred, w->left_other);
			if (w->n_pred)
				lb_strbuf_addf(out,
					       "<td class=\"num\">%.2f%%</td><td class=\"num\">%.2f%%"
					       "</td><td class=\"num\">%.3f</td><td class=\"num\">%.2f%%"
					       "</td><td class=\"num\">%.2f%%</td><td class=\"num\">%.2f"
					       "</td></tr>\n",
					       100.0 * w->score.mean_abs, 100.0 * w->score.max_abs,
					       w->score.spearman, 100.0 * w->score.mfu_of_predicted_best,
					       100.0 * w->score.mfu_best,
					       100.0 * (w->score.mfu_best - w->score.mfu_of_predicted_best));
			else
				lb_strbuf_adds(out, "<td colspan=\"6\">-</td></tr>\n");
		}
		lb_strbuf_adds(out, "</table>\n");
		bound_table(out, &set, over, n_over, 1);
		lb_strbuf_adds(out, "</section>\n");
		render_html_end(out);
		goto out;
	}
	lb_strbuf_adds(out, "# Predicted against measured step times\n\nPer sweep, every ok run's "
			    "mean steady-state step time against the one its machine predicts for "
			    "its layout (docs/prediction.md), read as calibrate reads them: a run "
			    "whose loss rose is left out when a healthy run of its layout is there. "
			    "Left out: runs that failed other than by running out of memory.\n\n");
	md_header(out);
	for (size_t k = 0; k < nsw; k++)
		md_score(out, &sw[k]);
	for (size_t k = 0; k < nsw; k++) {
		if (sw[k].note[0])
			lb_strbuf_addf(out, "\n%s: %s\n", sw[k].name, sw[k].note);
		if (set.counts[k].rose || set.counts[k].rose_left)
			lb_strbuf_addf(out,
				       "\n%s: runs whose loss rose (diverged): %d shown (no healthy run "
				       "of their layout), %d left out (a healthy run of their layout is "
				       "shown)\n",
				       sw[k].name, set.counts[k].rose, set.counts[k].rose_left);
	}
	bound_table(out, &set, over, n_over, 0);
	lb_strbuf_adds(out, "\n| sweep | layout | label | mb | tp | pp | dp | sp | ckpt | "
			    "attention | norm | measured s | predicted s | error |\n"
			    "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | "
			    "---: | ---: | ---: |\n");
	for (size_t i = 0; i < set.n; i++) {
		const struct lb_fit_row *r = &set.rows[i];
		const struct lb_layout *l = &r->layout;

		lb_strbuf_addf(out, "| %s | %s | ", r->group, set.layout_id[i]);
		render_md_escape(out, r->label[0] ? r->label : "-");
		lb_strbuf_addf(out, " | %d | %d | %d | %d | %d | %s | %s | %s | %.4g | ", l->micro_batch,
			       l->tp, l->pp, l->dp, l->sequence_parallel,
			       lb_ckpt_name(l->checkpointing), lb_attn_name(l->attention),
			       lb_norm_name(l->norm), r->step_s);
		if (isnan(runs[i].pred_s)) {
			lb_strbuf_adds(out, "- | ");
			render_md_escape(out, runs[i].why[0] ? runs[i].why : "no machine");
			lb_strbuf_adds(out, " |\n");
		} else {
			lb_strbuf_addf(out, "%.4g | %+.2f%% |\n", runs[i].pred_s,
				       100.0 * (runs[i].pred_s - r->step_s) / r->step_s);
		}
	}
out:
	for (size_t k = 0; k < nsw; k++)
		free(names[k]);
	free(names);
	free(runs);
	free(sw);
	free(idx);
	free(over);
	free(m);
	calib_set_free(&set);
	return rc;
}
