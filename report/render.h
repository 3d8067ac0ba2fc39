/*
 * Rendering of report figures as text: CSV (one row per bar), markdown (a table per
 * figure and group) and a self-contained HTML page (a heading per figure, its plot as
 * inline SVG from report/plot.h beside its tables). Pure: figures in, text appended to a
 * string buffer; the caller decides where it goes. Formats: docs/report.md.
 */
#ifndef LB_RENDER_H
#define LB_RENDER_H

#include "common/util.h"
#include "report/report.h"

/* The header line, then one row per bar: "group,series,mfu,micro_batch,tp,pp,checkpointing,
 * dp,sequence_parallel,model,seq_len,gpus,tflops_per_gpu,mfu_sd,step_time_s,step_time_sd_s,
 * steps" (group: the sweep; best: "model/seq_len/gpus"). The phases figure:
 * "group,label,micro_batch,tp,pp,dp,sequence_parallel,step_time_s,forward_s,backward_s,
 * optimizer_s,comm_exposed_s,bubble_s,peak_mem_mib,rank_peak_mem_min_mib,
 * rank_peak_mem_max_mib,ranks,checkpointing,model,seq_len,gpus,run_id,step_time_sd_s,steps",
 * one row per run. mfu: percent with two decimals, "" when the peak is unknown, "OOM",
 * "FAILED(<class>)" or "RUNNING"; mfu_sd in percent points; seconds with six significant
 * digits, MiB with three decimals; "" when unknown. Fields holding a comma, quote or
 * newline are quoted (RFC 4180). Formats: docs/report.md. */
void render_csv(struct lb_strbuf *sb, const struct report_figure *f);

/* "## <title>" with a one-line definition, then per group "### <group>" and a table:
 * series, MFU %, MFU sd, TFLOP/s/GPU, step s, step sd, mbs, TP, PP, DP, SP, ckpt (best: one
 * table of every row, with model, sequence length, GPUs and sweep). */
void render_md(struct lb_strbuf *sb, const struct report_figure *f);

/* The page: render_html_begin, one render_html_figure per figure, render_html_end.
 * svg: the figure's plot (an <svg> element; a leading XML declaration or doctype is
 * dropped) or NULL; note: shown instead of the plot when svg is NULL (may be NULL). */
void render_html_begin(struct lb_strbuf *sb, const char *title);
void render_html_figure(struct lb_strbuf *sb, const struct report_figure *f, const char *svg,
			const char *note);
void render_html_end(struct lb_strbuf *sb);

/* Escapers, appending to sb: HTML text and attribute values (&<>"'), a markdown table
 * cell (| and newlines), a CSV field (quoted when needed). */
void render_html_escape(struct lb_strbuf *sb, const char *s);
void render_md_escape(struct lb_strbuf *sb, const char *s);
void render_csv_field(struct lb_strbuf *sb, const char *s);

/* The bar's annotation as plotted above it: "(mbs,TP,PP)", e.g. "(1,2,2)"; for the
 * micro-batch figure "(ckpt,TP,PP)", e.g. "(none,1,2)"; "" when nothing ran. */
void render_bar_annotation(const struct report_figure *f, const struct report_bar *b, char *buf,
			   size_t len);

/* The one-line definition of a figure (what its bars are). */
const char *render_kind_definition(enum report_kind k);
/* What a figure's series are, as its table's first header says: "kernel", "TP,PP", ... */
const char *render_series_header(enum report_kind k);

#endif
