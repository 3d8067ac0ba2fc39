/*
 * Text renderings of report figures: CSV, markdown and the HTML page (see
 * report/render.h). Every cell of every format comes from the same few helpers, so the
 * three formats always agree on a bar's value, layout and failure.
 */
#include "report/render.h"

#include <stdio.h>
#include <string.h>

const char render_csv_header[] = "group,series,mfu,micro_batch,tp,pp,checkpointing";

const char render_csv_phases_header[] =
    "group,label,micro_batch,tp,pp,dp,sequence_parallel,step_time_s,forward_s,backward_s,"
    "optimizer_s,comm_exposed_s,bubble_s,peak_mem_mib,rank_peak_mem_min_mib,"
    "rank_peak_mem_max_mib,ranks";

static const char *const definitions[REPORT_KIND_COUNT] = {
    [REPORT_KERNELS] = "Per sweep, the best run of each kernel label.",
    [REPORT_CHECKPOINTING] =
	"Per sweep, the best checkpointed run (enabled) against the best run without "
	"checkpointing (disabled) whose kernels are not FlashAttention-2 with the RMSNorm "
	"kernel.",
    [REPORT_MICROBATCH] = "Per sweep, among FlashAttention-2 runs without the RMSNorm kernel, "
			  "the best run of each micro-batch size; labels (checkpointing, TP, PP).",
    [REPORT_TP_PP] = "Per sweep, FlashAttention-2 with the RMSNorm kernel, micro-batch 1, no "
		     "checkpointing: the best run of each (TP, PP).",
    [REPORT_SEQPAR] = "Per sweep that tried sequence parallelism, the best run with it on "
		      "against the best run with it off.",
    [REPORT_RMS] = "Per sweep, the best FlashAttention-2 run with the RMSNorm kernel "
		   "(rms_best), the best without it (no_rms_best), and the best without it at "
		   "rms_best's (micro-batch, TP, PP) (no_rms_at_rms_layout).",
    [REPORT_BEST] = "Per model, sequence length and GPU count, the best layout over all sweeps "
		    "(the best_layout view).",
    [REPORT_PHASES] = "Per sweep, each ok run of ours: mean steady-state step time and phase "
		      "times of rank 0 in seconds (forward, backward, optimizer, exposed "
		      "communication, pipeline bubble), peak memory and the per-rank peaks "
		      "(min-max MiB over the ranks).",
};

static const char *const series_headers[REPORT_KIND_COUNT] = {
    [REPORT_KERNELS] = "kernel",
    [REPORT_CHECKPOINTING] = "checkpointing",
    [REPORT_MICROBATCH] = "micro-batch",
    [REPORT_TP_PP] = "TP,PP",
    [REPORT_SEQPAR] = "sequence parallel",
    [REPORT_RMS] = "bar",
    [REPORT_BEST] = "kernel",
    [REPORT_PHASES] = "label",
};

const char *render_kind_definition(enum report_kind k)
{
	return k < REPORT_KIND_COUNT ? definitions[k] : "";
}

/* ---- escapers ---- */

void render_html_escape(struct lb_strbuf *sb, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '&':
			lb_strbuf_adds(sb, "&amp;");
			break;
		case '<':
			lb_strbuf_adds(sb, "&lt;");
			break;
		case '>':
			lb_strbuf_adds(sb, "&gt;");
			break;
		case '"':
			lb_strbuf_adds(sb, "&quot;");
			break;
		case '\'':
			lb_strbuf_adds(sb, "&#39;");
			break;
		default:
			lb_strbuf_add(sb, s, 1);
		}
	}
}

void render_md_escape(struct lb_strbuf *sb, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '|')
			lb_strbuf_adds(sb, "\\|");
		else if (*s == '\n' || *s == '\r')
			lb_strbuf_adds(sb, " ");
		else
			lb_strbuf_add(sb, s, 1);
	}
}

void render_csv_field(struct lb_strbuf *sb, const char *s)
{
	if (!s)
		return;
	if (!strpbrk(s, ",\"\r\n")) {
		lb_strbuf_adds(sb, s);
		return;
	}
	lb_strbuf_adds(sb, "\"");
	for (; *s; s++) {
		if (*s == '"')
			lb_strbuf_adds(sb, "\"\"");
		else
			lb_strbuf_add(sb, s, 1);
	}
	lb_strbuf_adds(sb, "\"");
}

/* ---- cells shared by the formats ---- */

static void int_cell(int v, const char *unknown, char *buf, size_t len)
{
	if (v < 0)
		snprintf(buf, len, "%s", unknown);
	else
		snprintf(buf, len, "%d", v);
}

static void tflops_cell(const struct report_bar *b, char *buf, size_t len)
{
	/* two decimals like MFU; three significant digits below 1 (CPU runs) */
	if (b->state == REPORT_BAR_VALUE && b->run->has_tflops)
		snprintf(buf, len, b->run->tflops >= 1 ? "%.2f" : "%.3g", b->run->tflops);
	else
		snprintf(buf, len, "-");
}

static const char *ckpt_cell(const struct report_bar *b)
{
	return b->checkpointing ? b->checkpointing : "";
}

void render_bar_annotation(const struct report_figure *f, const struct report_bar *b, char *buf,
			   size_t len)
{
	if (b->state != REPORT_BAR_VALUE) {
		buf[0] = 0;
		return;
	}
	if (f->kind == REPORT_MICROBATCH)
		snprintf(buf, len, "(%s,%d,%d)", b->run->checkpointing, b->run->tp, b->run->pp);
	else
		snprintf(buf, len, "(%d,%d,%d)", b->run->micro_batch, b->run->tp, b->run->pp);
}

/* ---- the phases figure: one row per run ---- */

#define MIB (1024.0 * 1024.0)

/* Seconds: three significant digits (md, html) or six (csv); unknown as given. */
static void secs_cell(double v, int csv, const char *unknown, char *buf, size_t len)
{
	if (v < 0)
		snprintf(buf, len, "%s", unknown);
	else
		snprintf(buf, len, csv ? "%.6g" : "%.3g", v);
}

static void mib_cell(long long bytes, int csv, const char *unknown, char *buf, size_t len)
{
	if (bytes < 0)
		snprintf(buf, len, "%s", unknown);
	else
		snprintf(buf, len, csv ? "%.3f" : "%.1f", (double)bytes / MIB);
}

/* "12.3–14.5 MiB over 2 ranks" (one rank: "12.3 MiB over 1 rank"); unknown as given. */
static void rank_mem_cell(const struct report_run *r, const char *unknown, char *buf, size_t len)
{
	if (!r->rank_n)
		snprintf(buf, len, "%s", unknown);
	else if (r->rank_mem_min == r->rank_mem_max)
		snprintf(buf, len, "%.1f MiB over %d rank%s", (double)r->rank_mem_min / MIB,
			 r->rank_n, r->rank_n == 1 ? "" : "s");
	else
		snprintf(buf, len, "%.1f\xe2\x80\x93%.1f MiB over %d ranks",
			 (double)r->rank_mem_min / MIB, (double)r->rank_mem_max / MIB, r->rank_n);
}

/* The cells of a phases row after the label: mbs, TP, PP, DP, SP, step, 5 phases, peak,
 * per-rank peaks (md/html: 12 cells, the last "min–max MiB over N ranks"). */
#define PHASE_CELLS 12
static void phases_cells(const struct report_run *r, char cells[PHASE_CELLS][64])
{
	snprintf(cells[0], 64, "%d", r->micro_batch);
	snprintf(cells[1], 64, "%d", r->tp);
	snprintf(cells[2], 64, "%d", r->pp);
	snprintf(cells[3], 64, "%d", r->dp);
	snprintf(cells[4], 64, "%s", r->sequence_parallel ? "on" : "off");
	secs_cell(r->step_time, 0, "-", cells[5], 64);
	for (int k = 0; k < REPORT_PHASE_COUNT; k++)
		secs_cell(r->phase[k], 0, "-", cells[6 + k], 64);
	mib_cell(r->peak_mem, 0, "-", cells[11], 64);
}

static const char *const phases_headers[PHASE_CELLS + 2] = {"label",
							    "mbs",
							    "TP",
							    "PP",
							    "DP",
							    "SP",
							    "step s",
							    "forward s",
							    "backward s",
							    "optimizer s",
							    "exposed comm s",
							    "bubble s",
							    "peak MiB",
							    "rank peaks"};

static void csv_phases(struct lb_strbuf *sb, const struct report_figure *f)
{
	char c[8][32];

	lb_strbuf_adds(sb, render_csv_phases_header);
	lb_strbuf_adds(sb, "\n");
	for (size_t i = 0; i < f->n; i++) {
		const struct report_run *r = f->bars[i].run;
		render_csv_field(sb, f->bars[i].group);
		lb_strbuf_adds(sb, ",");
		render_csv_field(sb, r->label);
		lb_strbuf_addf(sb, ",%d,%d,%d,%d,%d", r->micro_batch, r->tp, r->pp, r->dp,
			       r->sequence_parallel);
		secs_cell(r->step_time, 1, "", c[0], sizeof(c[0]));
		lb_strbuf_addf(sb, ",%s", c[0]);
		for (int k = 0; k < REPORT_PHASE_COUNT; k++) {
			secs_cell(r->phase[k], 1, "", c[0], sizeof(c[0]));
			lb_strbuf_addf(sb, ",%s", c[0]);
		}
		mib_cell(r->peak_mem, 1, "", c[0], sizeof(c[0]));
		mib_cell(r->rank_n ? r->rank_mem_min : -1, 1, "", c[1], sizeof(c[1]));
		mib_cell(r->rank_n ? r->rank_mem_max : -1, 1, "", c[2], sizeof(c[2]));
		if (r->rank_n)
			snprintf(c[3], sizeof(c[3]), "%d", r->rank_n);
		else
			c[3][0] = 0;
		lb_strbuf_addf(sb, ",%s,%s,%s,%s\n", c[0], c[1], c[2], c[3]);
	}
}

static void md_phases(struct lb_strbuf *sb, const struct report_figure *f)
{
	char cells[PHASE_CELLS][64], ranks[96];

	for (size_t i = 0; i < f->n; i++) {
		const struct report_bar *b = &f->bars[i];
		if (i == 0 || b->group != f->bars[i - 1].group) {
			lb_strbuf_adds(sb, "\n### ");
			render_md_escape(sb, b->group);
			lb_strbuf_adds(sb, "\n\n|");
			for (int k = 0; k < PHASE_CELLS + 2; k++)
				lb_strbuf_addf(sb, " %s |", phases_headers[k]);
			lb_strbuf_adds(sb, "\n| --- |");
			for (int k = 1; k < PHASE_CELLS + 1; k++)
				lb_strbuf_adds(sb, k == 5 ? " --- |" : " ---: |");
			lb_strbuf_adds(sb, " --- |\n");
		}
		phases_cells(b->run, cells);
		rank_mem_cell(b->run, "-", ranks, sizeof(ranks));
		lb_strbuf_adds(sb, "| ");
		render_md_escape(sb, b->run->label);
		for (int k = 0; k < PHASE_CELLS; k++)
			lb_strbuf_addf(sb, " | %s", cells[k]);
		lb_strbuf_addf(sb, " | %s |\n", ranks);
	}
}

/* ---- CSV ---- */

void render_csv(struct lb_strbuf *sb, const struct report_figure *f)
{
	char mfu[64], mb[16], tp[16], pp[16];

	if (f->kind == REPORT_PHASES) {
		csv_phases(sb, f);
		return;
	}
	lb_strbuf_adds(sb, render_csv_header);
	lb_strbuf_adds(sb, "\n");
	for (size_t i = 0; i < f->n; i++) {
		const struct report_bar *b = &f->bars[i];
		report_bar_mfu_text(b, "", mfu, sizeof(mfu));
		int_cell(b->micro_batch, "", mb, sizeof(mb));
		int_cell(b->tp, "", tp, sizeof(tp));
		int_cell(b->pp, "", pp, sizeof(pp));
		render_csv_field(sb, b->group);
		lb_strbuf_adds(sb, ",");
		render_csv_field(sb, b->series);
		lb_strbuf_addf(sb, ",%s,%s,%s,%s,", mfu, mb, tp, pp);
		render_csv_field(sb, ckpt_cell(b));
		lb_strbuf_adds(sb, "\n");
	}
}

/* ---- markdown ---- */

static void md_best(struct lb_strbuf *sb, const struct report_figure *f)
{
	char mfu[64], tfl[32];

	lb_strbuf_adds(sb, "| model | seq len | GPUs | MFU % | TFLOP/s/GPU | kernel | mbs | TP | "
			   "PP | DP | SP | ckpt | sweep |\n"
			   "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | "
			   "---: | --- | --- |\n");
	for (size_t i = 0; i < f->n; i++) {
		const struct report_bar *b = &f->bars[i];
		const struct report_run *r = b->run;
		if (!r)
			continue;
		report_bar_mfu_text(b, "n/a", mfu, sizeof(mfu));
		tflops_cell(b, tfl, sizeof(tfl));
		lb_strbuf_adds(sb, "| ");
		render_md_escape(sb, r->model);
		lb_strbuf_addf(sb, " | %d | %d | %s | %s | ", r->seq_len, r->gpus, mfu, tfl);
		render_md_escape(sb, r->label);
		lb_strbuf_addf(sb, " | %d | %d | %d | %d | %d | ", r->micro_batch, r->tp, r->pp,
			       r->dp, r->sequence_parallel);
		render_md_escape(sb, r->checkpointing);
		lb_strbuf_adds(sb, " | ");
		render_md_escape(sb, r->sweep);
		lb_strbuf_adds(sb, " |\n");
	}
}

void render_md(struct lb_strbuf *sb, const struct report_figure *f)
{
	char mfu[64], tfl[32], mb[16], tp[16], pp[16], dp[16];

	lb_strbuf_addf(sb, "## %s (%s)\n\n%s\n", report_kind_title(f->kind),
		       report_kind_name(f->kind), render_kind_definition(f->kind));
	if (!f->n) {
		lb_strbuf_adds(sb, "\nNo runs for this figure.\n");
		return;
	}
	if (f->kind == REPORT_BEST) {
		lb_strbuf_adds(sb, "\n");
		md_best(sb, f);
		return;
	}
	if (f->kind == REPORT_PHASES) {
		md_phases(sb, f);
		return;
	}
	for (size_t i = 0; i < f->n; i++) {
		const struct report_bar *b = &f->bars[i];
		if (i == 0 || b->group != f->bars[i - 1].group) {
			lb_strbuf_adds(sb, "\n### ");
			render_md_escape(sb, b->group);
			lb_strbuf_addf(
			    sb,
			    "\n\n| %s | MFU %% | TFLOP/s/GPU | mbs | TP | PP | DP | ckpt "
			    "|\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
			    series_headers[f->kind]);
		}
		report_bar_mfu_text(b, "n/a", mfu, sizeof(mfu));
		tflops_cell(b, tfl, sizeof(tfl));
		int_cell(b->micro_batch, "-", mb, sizeof(mb));
		int_cell(b->tp, "-", tp, sizeof(tp));
		int_cell(b->pp, "-", pp, sizeof(pp));
		int_cell(b->run ? b->run->dp : -1, "-", dp, sizeof(dp));
		lb_strbuf_adds(sb, "| ");
		render_md_escape(sb, b->series);
		lb_strbuf_addf(sb, " | %s | %s | %s | %s | %s | %s | ", mfu, tfl, mb, tp, pp, dp);
		render_md_escape(sb, b->checkpointing ? b->checkpointing : "-");
		lb_strbuf_adds(sb, " |\n");
	}
}

/* ---- HTML ---- */

void render_html_begin(struct lb_strbuf *sb, const char *title)
{
	lb_strbuf_adds(sb, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
			   "<title>");
	render_html_escape(sb, title);
	lb_strbuf_adds(
	    sb, "</title>\n<style>\n"
		"body { font-family: sans-serif; margin: 2em; color: #222; }\n"
		"section { margin-bottom: 3em; }\n"
		".fig { display: flex; flex-wrap: wrap; gap: 2em; align-items: flex-start; }\n"
		".plot svg { max-width: 100%; height: auto; }\n"
		"table { border-collapse: collapse; margin-bottom: 1em; font-size: 0.9em; }\n"
		"th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; }\n"
		"td.num { text-align: right; font-variant-numeric: tabular-nums; }\n"
		"td.fail { color: #b00; text-align: right; }\n"
		"h3 { font-size: 1em; margin: 1em 0 0.3em; }\n"
		".note { color: #555; max-width: 60em; }\n"
		"</style>\n</head>\n<body>\n<h1>");
	render_html_escape(sb, title);
	lb_strbuf_adds(
	    sb,
	    "</h1>\n<p class=\"note\">MFU (model FLOPs utilization) is the model's FLOPs per "
	    "optimizer step (the PaLM count, 6N + 12&middot;L&middot;h&middot;s per token, "
	    "recomputation not counted) divided by the mean steady-state step time, the GPU "
	    "count and the GPU's dense bf16 peak. Runs imported from the paper show the paper's "
	    "own MFU (A100, 312 TFLOP/s). Where the peak is unknown (CPU runs) MFU reads n/a "
	    "and runs are ranked and plotted by TFLOP/s per GPU. Each bar is the best run among "
	    "its candidates; its label gives (micro-batch, TP, PP). OOM: every candidate ran "
	    "out of memory.</p>\n");
}

static void html_cell(struct lb_strbuf *sb, const char *cls, const char *text)
{
	lb_strbuf_addf(sb, "<td%s%s%s>", cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "");
	render_html_escape(sb, text);
	lb_strbuf_adds(sb, "</td>");
}

static void html_best(struct lb_strbuf *sb, const struct report_figure *f)
{
	char mfu[64], tfl[32], num[32];

	lb_strbuf_adds(sb, "<table>\n<tr><th>model</th><th>seq len</th><th>GPUs</th><th>MFU "
			   "%</th><th>TFLOP/s/GPU</th><th>kernel</th><th>mbs</th><th>TP</th>"
			   "<th>PP</th><th>DP</th><th>SP</th><th>ckpt</th><th>sweep</th></tr>\n");
	for (size_t i = 0; i < f->n; i++) {
		const struct report_bar *b = &f->bars[i];
		const struct report_run *r = b->run;
		if (!r)
			continue;
		report_bar_mfu_text(b, "n/a", mfu, sizeof(mfu));
		tflops_cell(b, tfl, sizeof(tfl));
		lb_strbuf_adds(sb, "<tr>");
		html_cell(sb, NULL, r->model);
		snprintf(num, sizeof(num), "%d", r->seq_len);
		html_cell(sb, "num", num);
		snprintf(num, sizeof(num), "%d", r->gpus);
		html_cell(sb, "num", num);
		html_cell(sb, "num", mfu);
		html_cell(sb, "num", tfl);
		html_cell(sb, NULL, r->label);
		int vals[] = {r->micro_batch, r->tp, r->pp, r->dp, r->sequence_parallel};
		for (size_t k = 0; k < sizeof(vals) / sizeof(vals[0]); k++) {
			snprintf(num, sizeof(num), "%d", vals[k]);
			html_cell(sb, "num", num);
		}
		html_cell(sb, NULL, r->checkpointing);
		html_cell(sb, NULL, r->sweep);
		lb_strbuf_adds(sb, "</tr>\n");
	}
	lb_strbuf_adds(sb, "</table>\n");
}

static void html_phases(struct lb_strbuf *sb, const struct report_figure *f)
{
	char cells[PHASE_CELLS][64], ranks[96];

	for (size_t i = 0; i < f->n; i++) {
		const struct report_bar *b = &f->bars[i];
		if (i == 0 || b->group != f->bars[i - 1].group) {
			if (i)
				lb_strbuf_adds(sb, "</table>\n");
			lb_strbuf_adds(sb, "<h3>");
			render_html_escape(sb, b->group);
			lb_strbuf_adds(sb, "</h3>\n<table>\n<tr>");
			for (int k = 0; k < PHASE_CELLS + 2; k++)
				lb_strbuf_addf(sb, "<th>%s</th>", phases_headers[k]);
			lb_strbuf_adds(sb, "</tr>\n");
		}
		phases_cells(b->run, cells);
		rank_mem_cell(b->run, "-", ranks, sizeof(ranks));
		lb_strbuf_adds(sb, "<tr>");
		html_cell(sb, NULL, b->run->label);
		for (int k = 0; k < PHASE_CELLS; k++)
			html_cell(sb, k == 4 ? NULL : "num", cells[k]);
		html_cell(sb, NULL, ranks);
		lb_strbuf_adds(sb, "</tr>\n");
	}
	if (f->n)
		lb_strbuf_adds(sb, "</table>\n");
}

static void html_tables(struct lb_strbuf *sb, const struct report_figure *f)
{
	char mfu[64], tfl[32], cell[16];

	if (f->kind == REPORT_BEST) {
		html_best(sb, f);
		return;
	}
	if (f->kind == REPORT_PHASES) {
		html_phases(sb, f);
		return;
	}
	for (size_t i = 0; i < f->n; i++) {
		const struct report_bar *b = &f->bars[i];
		if (i == 0 || b->group != f->bars[i - 1].group) {
			if (i)
				lb_strbuf_adds(sb, "</table>\n");
			lb_strbuf_adds(sb, "<h3>");
			render_html_escape(sb, b->group);
			lb_strbuf_adds(sb, "</h3>\n<table>\n<tr><th>");
			render_html_escape(sb, series_headers[f->kind]);
			lb_strbuf_adds(sb, "</th><th>MFU %</th><th>TFLOP/s/GPU</th><th>mbs</th>"
					   "<th>TP</th><th>PP</th><th>DP</th><th>ckpt</th></tr>\n");
		}
		report_bar_mfu_text(b, "n/a", mfu, sizeof(mfu));
		tflops_cell(b, tfl, sizeof(tfl));
		lb_strbuf_adds(sb, "<tr>");
		html_cell(sb, NULL, b->series);
		html_cell(sb, b->state == REPORT_BAR_VALUE ? "num" : "fail", mfu);
		html_cell(sb, "num", tfl);
		int_cell(b->micro_batch, "-", cell, sizeof(cell));
		html_cell(sb, "num", cell);
		int_cell(b->tp, "-", cell, sizeof(cell));
		html_cell(sb, "num", cell);
		int_cell(b->pp, "-", cell, sizeof(cell));
		html_cell(sb, "num", cell);
		int_cell(b->run ? b->run->dp : -1, "-", cell, sizeof(cell));
		html_cell(sb, "num", cell);
		html_cell(sb, NULL, b->checkpointing ? b->checkpointing : "-");
		lb_strbuf_adds(sb, "</tr>\n");
	}
	if (f->n)
		lb_strbuf_adds(sb, "</table>\n");
}

/* The <svg> element of gnuplot's output, without the XML prologue. */
static const char *svg_element(const char *svg)
{
	const char *p = strstr(svg, "<svg");
	return p ? p : svg;
}

void render_html_figure(struct lb_strbuf *sb, const struct report_figure *f, const char *svg,
			const char *note)
{
	lb_strbuf_addf(sb, "<section id=\"%s\">\n<h2>", report_kind_name(f->kind));
	render_html_escape(sb, report_kind_title(f->kind));
	lb_strbuf_adds(sb, "</h2>\n<p class=\"note\">");
	render_html_escape(sb, render_kind_definition(f->kind));
	lb_strbuf_adds(sb, "</p>\n");
	if (!f->n) {
		lb_strbuf_adds(sb, "<p>No runs for this figure.</p>\n</section>\n");
		return;
	}
	lb_strbuf_adds(sb, "<div class=\"fig\">\n");
	if (!svg && !note) /* a figure without a plot (phases) */
		goto tables;
	lb_strbuf_adds(sb, "<div class=\"plot\">\n");
	if (svg) {
		lb_strbuf_adds(sb, svg_element(svg));
	} else if (note) {
		lb_strbuf_adds(sb, "<p class=\"note\">");
		render_html_escape(sb, note);
		lb_strbuf_adds(sb, "</p>");
	}
	lb_strbuf_adds(sb, "\n</div>\n");
tables:
	lb_strbuf_adds(sb, "<div class=\"tables\">\n");
	html_tables(sb, f);
	lb_strbuf_adds(sb, "</div>\n</div>\n</section>\n");
}

void render_html_end(struct lb_strbuf *sb)
{
	lb_strbuf_adds(sb, "</body>\n</html>\n");
}
