/*
 * Text renderings of report figures: CSV, markdown and the HTML page (see
 * report/render.h). A figure is first turned into one table of cells (table_build: the
 * columns of its kind, one row per bar, or per run in the phases figure, each cell with
 * its text for the page and its text for CSV); the three writers only lay that table out,
 * so the formats cannot disagree on a value, a layout field or a failure.
 */
#include "report/render.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What each figure's bars are; a group is one sweep's runs of one model, sequence length
 * and GPU count. */
static const char *const definitions[REPORT_KIND_COUNT] = {
    [REPORT_KERNELS] =
	"Per sweep, model, sequence length and GPU count, the best run of each kernel label.",
    [REPORT_CHECKPOINTING] = "Per sweep, model, sequence length and GPU count, the best "
			     "checkpointed run (enabled) against the best run "
			     "without checkpointing (disabled) whose kernels are not "
			     "FlashAttention-2 with the RMSNorm kernel.",
    [REPORT_MICROBATCH] = "Per sweep, model, sequence length and GPU count, among FlashAttention-2 "
			  "runs without the RMSNorm kernel, the "
			  "best run of each micro-batch size; labels (checkpointing, TP, PP).",
    [REPORT_TP_PP] = "Per sweep, model, sequence length and GPU count, FlashAttention-2 with the "
		     "RMSNorm kernel, micro-batch 1, no "
		     "checkpointing: the best run of each (TP, PP).",
    [REPORT_SEQPAR] = "Per sweep, model, sequence length and GPU count that tried sequence "
		      "parallelism, the best run with it on against "
		      "the best run with it off.",
    [REPORT_RMS] = "Per sweep, model, sequence length and GPU count, the best FlashAttention-2 run "
		   "with the RMSNorm kernel (rms_best), "
		   "the best without it (no_rms_best), and the best without it at rms_best's "
		   "(micro-batch, TP, PP) (no_rms_at_rms_layout).",
    [REPORT_BEST] = "Per model, sequence length and GPU count, the best layout over all sweeps "
		    "(the best_layout view).",
    [REPORT_PHASES] = "Per sweep, model, sequence length and GPU count, each ok run of ours: mean "
		      "steady-state step time and its "
		      "standard deviation over the steps, mean phase times of rank 0 in seconds "
		      "(forward, backward, optimizer, exposed communication, pipeline bubble), "
		      "peak memory and the per-rank peaks (min-max MiB over the ranks).",
    [REPORT_MEMORY] = "Per sweep, model, sequence length and GPU count, each run of ours that "
		      "fit or ran out of memory: its peak as the trainer's allocator counted it "
		      "(the most loaded rank's) against the planner's model of the trainer "
		      "(memory_model \"trainer\", without the 1 GiB the planner adds on a GPU "
		      "for the CUDA runtime; the 1F1B schedule and the default gradient bucket "
		      "assumed), and the device's own reading of its peak (what cudaMemGetInfo "
		      "and nvidia-smi see, where the run recorded it) against what the planner "
		      "plans (the model plus that 1 GiB).",
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
    [REPORT_MEMORY] = "label",
};

const char *render_kind_definition(enum report_kind k)
{
	return k < REPORT_KIND_COUNT ? definitions[k] : "";
}

const char *render_series_header(enum report_kind k)
{
	return k < REPORT_KIND_COUNT ? series_headers[k] : "";
}

/* ---- escapers ---- */

void render_html_escape(struct lb_strbuf *sb, const char *s)
{
	static const char *const entity[256] = {
	    ['&'] = "&amp;", ['<'] = "&lt;", ['>'] = "&gt;", ['"'] = "&quot;", ['\''] = "&#39;",
	};

	for (; s && *s; s++) {
		const char *e = entity[(unsigned char)*s];

		if (e)
			lb_strbuf_adds(sb, e);
		else
			lb_strbuf_add(sb, s, 1);
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

/* ---- the table: every format's cells, built once per figure ---- */

/*
 * A figure as a table: its columns (a header for the page, a header for CSV, either may be
 * absent), then one row per bar (per run in the phases figure), each cell holding its text
 * for the page (markdown and HTML: "-" or "n/a" where unknown, short numbers) and its text
 * for CSV ("" where unknown, more digits). Cell texts live in one arena, NUL-separated, so
 * a table costs a handful of allocations whatever its size.
 */
#define TABLE_MAX_COLS 32

enum cell_class { CELL_TEXT = 0, CELL_NUM, CELL_FAIL }; /* HTML class: none, num, fail */

struct column {
	const char *head; /* markdown and HTML header; NULL: a CSV-only column */
	const char *csv;  /* CSV header; NULL: not in CSV */
	int csv_at;	  /* place among the CSV columns (0-based); -1 when csv is NULL */
	int num;	  /* 1: a number column (right-aligned) */
};

struct cell {
	size_t text, csv;    /* offsets of the page's and CSV's texts in the arena */
	enum cell_class cls; /* the HTML class of this cell */
};

struct row {
	const char *group; /* heading of the row's group (pool string); NULL: one table */
};

struct table {
	struct column cols[TABLE_MAX_COLS];
	int ncols;
	int csv_order[TABLE_MAX_COLS]; /* column index of each CSV column, in order */
	int ncsv;
	struct cell *cells; /* nrows * ncols, row by row */
	struct row *rows;
	size_t nrows, ncells, cap_rows, cap_cells;
	struct lb_strbuf arena;
	int failed; /* out of memory */
};

static void table_init(struct table *t)
{
	memset(t, 0, sizeof(*t));
	lb_strbuf_init(&t->arena);
	lb_strbuf_add(&t->arena, "", 1); /* offset 0: the empty text */
}

static void table_release(struct table *t)
{
	free(t->cells);
	free(t->rows);
	lb_strbuf_release(&t->arena);
}

/* Add a column in page order; csv_at: its place in CSV (-1 when not there). */
static void table_col(struct table *t, const char *head, const char *csv, int csv_at, int num)
{
	if (t->ncols == TABLE_MAX_COLS) {
		t->failed = 1;
		return;
	}
	t->cols[t->ncols++] = (struct column){head, csv, csv ? csv_at : -1, num};
}

/* Add the n columns cols in page order (csv_at as in table_col). */
static void table_cols(struct table *t, const struct column *cols, size_t n)
{
	for (size_t k = 0; k < n; k++)
		table_col(t, cols[k].head, cols[k].csv, cols[k].csv_at, cols[k].num);
}
#define TABLE_COLS(t, cols) table_cols(t, cols, sizeof(cols) / sizeof((cols)[0]))

/* Fix the CSV order once every column is added. */
static void table_columns_done(struct table *t)
{
	t->ncsv = 0;
	for (int at = 0; at < t->ncols; at++)
		for (int k = 0; k < t->ncols; k++)
			if (t->cols[k].csv && t->cols[k].csv_at == at)
				t->csv_order[t->ncsv++] = k;
}

static void table_row(struct table *t, const char *group)
{
	if (!t->failed && lb_grow(&t->rows, t->nrows, &t->cap_rows, 64, sizeof(*t->rows)))
		t->failed = 1;
	if (t->failed)
		return;
	t->rows[t->nrows++] = (struct row){group};
}

static size_t arena_add(struct table *t, const char *s)
{
	size_t off = t->arena.len;

	if (!s || !*s)
		return 0;
	lb_strbuf_add(&t->arena, s, strlen(s) + 1);
	return off;
}

/* The next cell of the current row: text on the page, csv in CSV (NULL: the same text). */
static void table_cell(struct table *t, const char *text, const char *csv, enum cell_class cls)
{
	if (!t->failed && lb_grow(&t->cells, t->ncells, &t->cap_cells, 1024, sizeof(*t->cells)))
		t->failed = 1;
	if (t->failed)
		return;
	struct cell *c = &t->cells[t->ncells++];
	c->text = arena_add(t, text);
	c->csv = csv && (!text || strcmp(csv, text)) ? arena_add(t, csv) : c->text;
	c->cls = cls;
}

static const char *cell_text(const struct table *t, size_t row, int col, int csv)
{
	const struct cell *c = &t->cells[row * (size_t)t->ncols + (size_t)col];
	return lb_strbuf_str(&t->arena) + (csv ? c->csv : c->text);
}

/* ---- cells shared by the figures ---- */

static void int_cell(int v, const char *unknown, char *buf, size_t len)
{
	if (v < 0)
		snprintf(buf, len, "%s", unknown);
	else
		snprintf(buf, len, "%d", v);
}

/* An integer column: "-" on the page and "" in CSV when unknown (v < 0). */
static void table_int(struct table *t, int v)
{
	char text[16], csv[16];

	int_cell(v, "-", text, sizeof(text));
	int_cell(v, "", csv, sizeof(csv));
	table_cell(t, text, csv, CELL_NUM);
}

static void tflops_cell(const struct report_bar *b, char *buf, size_t len)
{
	/* two decimals like MFU; three significant digits below 1 (CPU runs) */
	if (b->state == REPORT_BAR_VALUE && b->run->has_tflops)
		snprintf(buf, len, b->run->tflops >= 1 ? "%.2f" : "%.3g", b->run->tflops);
	else
		snprintf(buf, len, "-");
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

#define MIB (1024.0 * 1024.0)

/* Seconds: three significant digits (page) or six (csv); unknown as given. */
static void secs_cell(double v, int csv, const char *unknown, char *buf, size_t len)
{
	if (v < 0)
		snprintf(buf, len, "%s", unknown);
	else
		snprintf(buf, len, csv ? "%.6g" : "%.3g", v);
}

static void table_secs(struct table *t, double v)
{
	char text[32], csv[32];

	secs_cell(v, 0, "-", text, sizeof(text));
	secs_cell(v, 1, "", csv, sizeof(csv));
	table_cell(t, text, csv, CELL_NUM);
}

/* MiB: one decimal (page) or three (csv); unknown (bytes < 0) as given. */
static void mib_cell(long long bytes, int csv, const char *unknown, char *buf, size_t len)
{
	if (bytes < 0)
		snprintf(buf, len, "%s", unknown);
	else
		snprintf(buf, len, csv ? "%.3f" : "%.1f", (double)bytes / MIB);
}

static void table_mib(struct table *t, long long bytes, int page, int csv)
{
	char text[32], c[32];

	mib_cell(bytes, 0, "-", text, sizeof(text));
	mib_cell(bytes, 1, "", c, sizeof(c));
	table_cell(t, page ? text : NULL, csv ? c : NULL, CELL_NUM);
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

/* ---- the figures as tables ---- */

/* An MFU's standard deviation (a fraction) in points: two decimals on the page, three in
 * CSV; unknown (< 0) "-" / "". */
static void table_mfu_sd(struct table *t, double sd)
{
	char text[32], csv[32];

	if (sd < 0) {
		table_cell(t, "-", "", CELL_NUM);
		return;
	}
	snprintf(text, sizeof(text), "%.2f", sd * 100.0);
	snprintf(csv, sizeof(csv), "%.3f", sd * 100.0);
	table_cell(t, text, csv, CELL_NUM);
}

/* A step time's standard deviation, seconds: two significant digits on the page, six in
 * CSV; unknown (< 0) "-" / "". */
static void table_step_sd(struct table *t, double sd)
{
	char text[32], csv[32];

	if (sd < 0) {
		table_cell(t, "-", "", CELL_NUM);
		return;
	}
	snprintf(text, sizeof(text), "%.2g", sd);
	snprintf(csv, sizeof(csv), "%.6g", sd);
	table_cell(t, text, csv, CELL_NUM);
}

/* Sequence parallelism: "on"/"off" on the page, 1/0 in CSV; unknown (v < 0) "-" / "". */
static void table_sp(struct table *t, int v)
{
	if (v < 0)
		table_cell(t, "-", "", CELL_TEXT);
	else
		table_cell(t, v ? "on" : "off", v ? "1" : "0", CELL_TEXT);
}

/* A CSV-only integer, "" when unknown (v < 0). */
static void table_csv_int(struct table *t, int v)
{
	char csv[16];

	int_cell(v, "", csv, sizeof(csv));
	table_cell(t, NULL, csv, CELL_NUM);
}

/* The CSV-only columns that name a bar's scope: model, seq_len, gpus (their sources src,
 * src + 1, src + 2), and a row's cells for them. */
static void scope_cols(struct table *t, int src)
{
	table_col(t, NULL, "model", src, 0);
	table_col(t, NULL, "seq_len", src + 1, 1);
	table_col(t, NULL, "gpus", src + 2, 1);
}

static void scope_cells(struct table *t, const struct report_bar *b)
{
	table_cell(t, NULL, b->model, CELL_TEXT);
	table_csv_int(t, b->seq_len);
	table_csv_int(t, b->gpus);
}

/* The layout's columns, as every figure shows them: mbs, TP, PP, DP, SP and checkpointing;
 * csv_at: their places in CSV, in that order. */
static void layout_cols(struct table *t, const int csv_at[6])
{
	static const struct column cols[6] = {{"mbs", "micro_batch", 0, 1},
					      {"TP", "tp", 0, 1},
					      {"PP", "pp", 0, 1},
					      {"DP", "dp", 0, 1},
					      {"SP", "sequence_parallel", 0, 0},
					      {"ckpt", "checkpointing", 0, 0}};

	for (int k = 0; k < 6; k++)
		table_col(t, cols[k].head, cols[k].csv, csv_at[k], cols[k].num);
}

/*
 * The bar figures' columns. CSV: the first seven as they always were (group, series, mfu,
 * micro_batch, tp, pp, checkpointing), then dp, sequence_parallel, model, seq_len, gpus,
 * tflops_per_gpu, mfu_sd, step_time_s, step_time_sd_s, steps, mfu_no_embed, health. The
 * page: the series (best: model, sequence length, GPUs first), MFU, MFU without the input
 * embedding lookup, MFU's sd, TFLOP/s, step time and its sd, the layout, the run's health,
 * (best: the sweep).
 */
static void bar_columns(struct table *t, enum report_kind kind)
{
	static const int layout_at[6] = {3, 4, 5, 7, 8, 6};
	static const struct column measures[] = {
	    {"MFU %", "mfu", 2, 1},	      {"MFU % no emb", "mfu_no_embed", 17, 1},
	    {"MFU sd", "mfu_sd", 13, 1},      {"TFLOP/s/GPU", "tflops_per_gpu", 12, 1},
	    {"step s", "step_time_s", 14, 1}, {"step sd", "step_time_sd_s", 15, 1},
	};
	int best = kind == REPORT_BEST;

	table_col(t, NULL, "group", 0, 0);
	if (best) {
		table_col(t, "model", "model", 9, 0);
		table_col(t, "seq len", "seq_len", 10, 1);
		table_col(t, "GPUs", "gpus", 11, 1);
	} else {
		table_col(t, series_headers[kind], "series", 1, 0);
	}
	TABLE_COLS(t, measures);
	if (best)
		table_col(t, "kernel", "series", 1, 0);
	layout_cols(t, layout_at);
	table_col(t, "health", "health", 18, 0);
	if (best) {
		table_col(t, "sweep", NULL, -1, 0);
	} else {
		scope_cols(t, 9);
	}
	table_col(t, NULL, "steps", 16, 1);
	table_columns_done(t);
}

/* MFU without the input embedding lookup: percent, two decimals; where unknown, "n/a" when
 * the MFU column is n/a too (a run without a peak), "-" otherwise (no run, or an imported
 * run without the count); "" in CSV. */
static void table_mfu_no_embed(struct table *t, const struct report_run *r)
{
	char text[32];

	if (!r || !r->has_mfu_no_embed) {
		table_cell(t, r && !r->has_mfu ? "n/a" : "-", "", CELL_NUM);
		return;
	}
	snprintf(text, sizeof(text), "%.2f", r->mfu_no_embed * 100.0);
	table_cell(t, text, NULL, CELL_NUM);
}

/* A run's health: "ok", "flat", "diverged"; "-" / "" unknown. */
static void table_health(struct table *t, const struct report_run *r)
{
	const char *h = r ? report_health_name(r->health) : NULL;

	table_cell(t, h ? h : "-", h ? h : "",
		   h && r->health == REPORT_HEALTH_DIVERGED ? CELL_FAIL : CELL_TEXT);
}

/* Bars: a table per group; best: one table. A bar without a winner shows the layout fields
 * that define it and "-" elsewhere. */
static void table_bars(struct table *t, const struct report_figure *f)
{
	int best = f->kind == REPORT_BEST;
	char mfu[64], mfu_csv[64], text[32], csv[32];

	bar_columns(t, f->kind);
	for (size_t i = 0; i < f->n; i++) {
		const struct report_bar *b = &f->bars[i];
		const struct report_run *r = b->state == REPORT_BAR_VALUE ? b->run : NULL;

		table_row(t, best ? NULL : b->group);
		table_cell(t, NULL, best ? b->group : b->sweep, CELL_TEXT);
		if (best) {
			table_cell(t, b->model, NULL, CELL_TEXT);
			table_int(t, b->seq_len);
			table_int(t, b->gpus);
		} else {
			table_cell(t, b->series, NULL, CELL_TEXT);
		}
		report_bar_mfu_text(b, "n/a", mfu, sizeof(mfu));
		report_bar_mfu_text(b, "", mfu_csv, sizeof(mfu_csv));
		table_cell(t, mfu, mfu_csv, r ? CELL_NUM : CELL_FAIL);
		table_mfu_no_embed(t, r);
		table_mfu_sd(t, report_bar_mfu_sd(b));
		tflops_cell(b, text, sizeof(text));
		if (r && r->has_tflops)
			snprintf(csv, sizeof(csv), "%.6g", r->tflops);
		else
			csv[0] = 0;
		table_cell(t, text, csv, CELL_NUM);
		table_secs(t, r ? r->step_time : -1);
		table_step_sd(t, report_bar_step_sd(b));
		if (best)
			table_cell(t, b->series, NULL, CELL_TEXT);
		table_int(t, b->micro_batch);
		table_int(t, b->tp);
		table_int(t, b->pp);
		table_int(t, r ? r->dp : -1);
		table_sp(t, r ? r->sequence_parallel : -1);
		table_cell(t, b->checkpointing ? b->checkpointing : "-",
			   b->checkpointing ? b->checkpointing : "", CELL_TEXT);
		table_health(t, r);
		if (best) {
			table_cell(t, b->sweep, NULL, CELL_TEXT);
		} else {
			scope_cells(t, b);
		}
		table_csv_int(t, r && r->n_steps > 0 ? r->n_steps : -1);
	}
}

/* A row of a per-run figure (phases, memory), up to its layout: the group (CSV: the sweep),
 * the run's id, label, mbs, TP, PP, DP, SP and checkpointing. */
static void run_cells(struct table *t, const struct report_bar *b)
{
	const struct report_run *r = b->run;
	char num[32];

	table_row(t, b->group);
	table_cell(t, NULL, b->sweep, CELL_TEXT);
	snprintf(num, sizeof(num), "%ld", r->run_id);
	table_cell(t, num, NULL, CELL_NUM);
	table_cell(t, r->label, NULL, CELL_TEXT);
	table_int(t, r->micro_batch);
	table_int(t, r->tp);
	table_int(t, r->pp);
	table_int(t, r->dp);
	table_sp(t, r->sequence_parallel);
	table_cell(t, r->checkpointing, NULL, CELL_TEXT);
}

/*
 * The phases: one row per run, a table per group. CSV: the seventeen columns it always had
 * (group ... ranks), then checkpointing, model, seq_len, gpus, run_id, step_time_sd_s,
 * steps, health.
 */
static void table_phases(struct table *t, const struct report_figure *f)
{
	static const int layout_at[6] = {2, 3, 4, 5, 6, 17};
	static const struct column run[] = {
	    {NULL, "group", 0, 0}, {"run", "run_id", 21, 1}, {"label", "label", 1, 0}};
	/* the step time, its sd and its phases (enum report_phase's order) */
	static const struct column times[2 + REPORT_PHASE_COUNT] = {
	    {"step s", "step_time_s", 7, 1},	   {"step sd", "step_time_sd_s", 22, 1},
	    {"forward s", "forward_s", 8, 1},	   {"backward s", "backward_s", 9, 1},
	    {"optimizer s", "optimizer_s", 10, 1}, {"exposed comm s", "comm_exposed_s", 11, 1},
	    {"bubble s", "bubble_s", 12, 1},
	};
	static const struct column mem[] = {{"peak MiB", "peak_mem_mib", 13, 1},
					    {"rank peaks", NULL, -1, 0},
					    {NULL, "rank_peak_mem_min_mib", 14, 1},
					    {NULL, "rank_peak_mem_max_mib", 15, 1},
					    {NULL, "ranks", 16, 1},
					    {"health", "health", 24, 0}};
	char ranks[96];

	TABLE_COLS(t, run);
	layout_cols(t, layout_at);
	TABLE_COLS(t, times);
	TABLE_COLS(t, mem);
	scope_cols(t, 18);
	table_col(t, NULL, "steps", 23, 1);
	table_columns_done(t);
	for (size_t i = 0; i < f->n; i++) {
		const struct report_bar *b = &f->bars[i];
		const struct report_run *r = b->run;
		run_cells(t, b);
		table_secs(t, r->step_time);
		table_step_sd(t, report_bar_step_sd(b));
		for (int k = 0; k < REPORT_PHASE_COUNT; k++)
			table_secs(t, r->phase[k]);
		table_mib(t, r->peak_mem, 1, 1);
		rank_mem_cell(r, "-", ranks, sizeof(ranks));
		table_cell(t, ranks, NULL, CELL_TEXT);
		table_mib(t, r->rank_n ? r->rank_mem_min : -1, 0, 1);
		table_mib(t, r->rank_n ? r->rank_mem_max : -1, 0, 1);
		table_csv_int(t, r->rank_n ? r->rank_n : -1);
		table_health(t, r);
		scope_cells(t, b);
		table_csv_int(t, r->n_steps > 0 ? r->n_steps : -1);
	}
}

/*
 * Memory: one row per run, a table per group. CSV: group, run_id, label, micro_batch, tp,
 * pp, dp, sequence_parallel, checkpointing, attention, norm, peak_mem_mib (the counted
 * peak; empty: out of memory), model_mem_mib, error_pct (counted less model, percent of
 * the counted), status (ok or oom), model, seq_len, gpus, planned_mem_mib (the model plus
 * the GPU reserve: what the planner plans), device_peak_mem_mib (the device's reading;
 * empty when not recorded), device_minus_planned_mib.
 */
static void table_memory(struct table *t, const struct report_figure *f)
{
	static const int layout_at[6] = {3, 4, 5, 6, 7, 8};
	static const struct column run[] = {
	    {NULL, "group", 0, 0}, {"run", "run_id", 1, 1}, {"label", "label", 2, 0}};
	static const struct column mem[] = {
	    {NULL, "attention", 9, 0},
	    {NULL, "norm", 10, 0},
	    {"counted MiB", "peak_mem_mib", 11, 1},
	    {"model MiB", "model_mem_mib", 12, 1},
	    {"counted - model", "error_pct", 13, 1},
	    {"planned MiB", "planned_mem_mib", 18, 1},
	    {"device MiB", "device_peak_mem_mib", 19, 1},
	    {"device - planned MiB", "device_minus_planned_mib", 20, 1},
	    {NULL, "status", 14, 0}};
	char num[32], csv[32];

	TABLE_COLS(t, run);
	layout_cols(t, layout_at);
	TABLE_COLS(t, mem);
	scope_cols(t, 15);
	table_columns_done(t);
	for (size_t i = 0; i < f->n; i++) {
		const struct report_bar *b = &f->bars[i];
		const struct report_run *r = b->run;
		int fit = b->state == REPORT_BAR_VALUE;

		run_cells(t, b);
		table_cell(t, NULL, r->attention, CELL_TEXT);
		table_cell(t, NULL, r->norm, CELL_TEXT);
		if (fit)
			table_mib(t, r->peak_mem, 1, 1);
		else
			table_cell(t, "OOM", "", CELL_FAIL);
		table_mib(t, r->model_mem, 1, 1);
		if (fit && r->peak_mem > 0) {
			double e = 100.0 * ((double)r->peak_mem - (double)r->model_mem) /
				   (double)r->peak_mem;

			snprintf(num, sizeof(num), "%+.2f%%", e);
			snprintf(csv, sizeof(csv), "%.4f", e);
			table_cell(t, num, csv, CELL_NUM);
		} else {
			table_cell(t, "-", "", CELL_NUM);
		}
		table_mib(t, r->planned_mem > 0 ? r->planned_mem : -1, 1, 1);
		table_mib(t, r->device_peak_mem > 0 ? r->device_peak_mem : -1, 1, 1);
		if (r->device_peak_mem > 0 && r->planned_mem > 0) {
			double d = ((double)r->device_peak_mem - (double)r->planned_mem) / MIB;

			snprintf(num, sizeof(num), "%+.1f", d);
			snprintf(csv, sizeof(csv), "%.3f", d);
			table_cell(t, num, csv, CELL_NUM);
		} else {
			table_cell(t, "-", "", CELL_NUM);
		}
		table_cell(t, NULL, fit ? "ok" : "oom", CELL_TEXT);
		scope_cells(t, b);
	}
}

/* Build f's table (caller releases it); 0, or -1 when out of memory. */
static int table_build(struct table *t, const struct report_figure *f)
{
	table_init(t);
	if (f->kind == REPORT_PHASES)
		table_phases(t, f);
	else if (f->kind == REPORT_MEMORY)
		table_memory(t, f);
	else
		table_bars(t, f);
	return t->failed || t->arena.failed ? -1 : 0;
}

/* ---- the writers ---- */

static void csv_write(struct lb_strbuf *sb, const struct table *t)
{
	for (int k = 0; k < t->ncsv; k++) {
		if (k)
			lb_strbuf_adds(sb, ",");
		lb_strbuf_adds(sb, t->cols[t->csv_order[k]].csv);
	}
	lb_strbuf_adds(sb, "\n");
	for (size_t r = 0; r < t->nrows; r++) {
		for (int k = 0; k < t->ncsv; k++) {
			if (k)
				lb_strbuf_adds(sb, ",");
			render_csv_field(sb, cell_text(t, r, t->csv_order[k], 1));
		}
		lb_strbuf_adds(sb, "\n");
	}
}

/* 1 when row r starts a table: the first row shown, or a new group. */
static int starts_table(const struct table *t, size_t r, size_t prev)
{
	return prev == (size_t)-1 || t->rows[r].group != t->rows[prev].group;
}

/* What a markup puts around each part of a table, in the order they are written: a group's
 * heading, the header row and its cells, markdown's alignment row (none in HTML), a row, a
 * cell by its class, and after a table; then how it escapes text. */
struct markup {
	const char *group[2];
	const char *head_row[2], *head[2];
	const char *align[2]; /* a text and a number column's; NULL: no alignment row */
	const char *row[2], *cell[3], *cell_end;
	const char *table_end;
	void (*escape)(struct lb_strbuf *sb, const char *s);
};

static const struct markup markdown = {
    .group = {"\n### ", "\n"},
    .head_row = {"\n|", "\n|"},
    .head = {" ", " |"},
    .align = {" --- |", " ---: |"},
    .row = {"|", "\n"},
    .cell = {" ", " ", " "},
    .cell_end = " |",
    .table_end = "",
    .escape = render_md_escape,
};

static const struct markup html = {
    .group = {"<h3>", "</h3>\n"},
    .head_row = {"<table>\n<tr>", "</tr>\n"},
    .head = {"<th>", "</th>"},
    .row = {"<tr>", "</tr>\n"},
    .cell = {[CELL_TEXT] = "<td>",
	     [CELL_NUM] = "<td class=\"num\">",
	     [CELL_FAIL] = "<td class=\"fail\">"},
    .cell_end = "</td>",
    .table_end = "</table>\n",
    .escape = render_html_escape,
};

/* open, text escaped, close */
static void markup_add(struct lb_strbuf *sb, const struct markup *m, const char *open,
		       const char *text, const char *close)
{
	lb_strbuf_adds(sb, open);
	m->escape(sb, text);
	lb_strbuf_adds(sb, close);
}

/* t in markup m: a table per group, each with its heading and header row. */
static void markup_write(struct lb_strbuf *sb, const struct table *t, const struct markup *m)
{
	size_t prev = (size_t)-1;

	for (size_t r = 0; r < t->nrows; r++) {
		if (starts_table(t, r, prev)) {
			if (prev != (size_t)-1)
				lb_strbuf_adds(sb, m->table_end);
			if (t->rows[r].group)
				markup_add(sb, m, m->group[0], t->rows[r].group, m->group[1]);
			lb_strbuf_adds(sb, m->head_row[0]);
			for (int k = 0; k < t->ncols; k++)
				if (t->cols[k].head)
					markup_add(sb, m, m->head[0], t->cols[k].head, m->head[1]);
			lb_strbuf_adds(sb, m->head_row[1]);
			if (m->align[0]) {
				for (int k = 0; k < t->ncols; k++)
					if (t->cols[k].head)
						lb_strbuf_adds(sb, m->align[t->cols[k].num != 0]);
				lb_strbuf_adds(sb, "\n");
			}
		}
		lb_strbuf_adds(sb, m->row[0]);
		for (int k = 0; k < t->ncols; k++)
			if (t->cols[k].head)
				markup_add(sb, m,
					   m->cell[t->cells[r * (size_t)t->ncols + (size_t)k].cls],
					   cell_text(t, r, k, 0), m->cell_end);
		lb_strbuf_adds(sb, m->row[1]);
		prev = r;
	}
	if (prev != (size_t)-1)
		lb_strbuf_adds(sb, m->table_end);
}

static void md_write(struct lb_strbuf *sb, const struct table *t)
{
	markup_write(sb, t, &markdown);
}

static void html_write(struct lb_strbuf *sb, const struct table *t)
{
	markup_write(sb, t, &html);
}

/* Lay f's table out with write; out of memory marks sb failed. */
static void write_table(struct lb_strbuf *sb, const struct report_figure *f,
			void (*write)(struct lb_strbuf *, const struct table *))
{
	struct table t;

	if (table_build(&t, f))
		sb->failed = 1;
	else
		write(sb, &t);
	table_release(&t);
}

/* ---- CSV ---- */

void render_csv(struct lb_strbuf *sb, const struct report_figure *f)
{
	write_table(sb, f, csv_write);
}

/* ---- markdown ---- */

/* "N diverged run(s) left out ..." (docs/report.md), or "" when none was. */
static void left_out_note(const struct report_figure *f, char *buf, size_t len)
{
	if (!f->diverged_left_out) {
		buf[0] = 0;
		return;
	}
	snprintf(buf, len,
		 "%zu diverged run%s left out (their loss rose or was not finite; "
		 "--keep-diverged keeps them, marked).",
		 f->diverged_left_out, f->diverged_left_out == 1 ? "" : "s");
}

void render_md(struct lb_strbuf *sb, const struct report_figure *f)
{
	char note[160];

	lb_strbuf_addf(sb, "## %s (%s)\n\n%s\n", report_kind_title(f->kind),
		       report_kind_name(f->kind), render_kind_definition(f->kind));
	left_out_note(f, note, sizeof(note));
	if (note[0])
		lb_strbuf_addf(sb, "\n%s\n", note);
	if (!f->n) {
		lb_strbuf_adds(sb, "\nNo runs for this figure.\n");
		return;
	}
	write_table(sb, f, md_write);
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
		/* a plot keeps its size (its text stays legible) and scrolls when wider than
		 * the page, rather than shrinking to fit */
		".plot { max-width: 100%; overflow-x: auto; }\n"
		".plot svg { display: block; max-width: none; }\n"
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
	    "own MFU (A100, 312 TFLOP/s). MFU % no emb counts the same without the input "
	    "embedding lookup (N less the untied embedding table: the count of Megatron-LM and "
	    "torchtitan). Where the peak is unknown (CPU runs) MFU reads n/a "
	    "and runs are ranked and plotted by TFLOP/s per GPU. Bars are grouped by sweep, model, "
	    "sequence length and GPU count. Each bar is the best run among its candidates; its "
	    "label gives (micro-batch, TP, PP). OOM: every candidate ran out of memory. The "
	    "spread: step sd is the sample standard deviation of a run's step time over its "
	    "steady-state steps (warmup excluded), MFU sd the same carried over to MFU (MFU "
	    "&times; step sd / mean step time, to first order), in MFU points; - for a run with "
	    "fewer than two such steps, or imported. Health: ok when a run's loss fell (the "
	    "mean of its last quarter of steps more than 1% below its first step's), flat "
	    "within 1%, diverged when it rose by more or was not finite; the bars leave "
	    "diverged runs out unless --keep-diverged, and DIVERGED marks a bar whose every "
	    "measured candidate diverged.</p>\n");
}

/* SVG text, where gnuplot's tooltips (<title> elements: a plot's title) keep the line
 * breaks of a gnuplot string as the two characters '\' 'n': each becomes ", " there
 * ("llama-30b, seq 8192, 128 GPUs"), the rest is copied as it is. */
static void add_svg_text(struct lb_strbuf *sb, const char *p, size_t n)
{
	const char *end = p + n;

	while (p < end) {
		const char *t = strstr(p, "<title>"), *e;

		if (!t || t >= end) {
			lb_strbuf_add(sb, p, (size_t)(end - p));
			return;
		}
		e = strstr(t, "</title>");
		if (!e || e >= end)
			e = end;
		lb_strbuf_add(sb, p, (size_t)(t - p));
		for (; t < e; t++) {
			if (t[0] == '\\' && t + 1 < e && t[1] == 'n') {
				lb_strbuf_adds(sb, ", ");
				t++;
			} else {
				lb_strbuf_add(sb, t, 1);
			}
		}
		p = e;
	}
}

/* The <svg> element of gnuplot's output, without the XML prologue, its <title> (gnuplot's
 * "Gnuplot") the figure's title, so that the plot is named for what it shows. */
static void add_svg(struct lb_strbuf *sb, const char *svg, const char *title)
{
	static const char gp_title[] = "<title>Gnuplot</title>";
	const char *p = strstr(svg, "<svg");
	const char *t;

	if (!p)
		p = svg;
	t = strstr(p, gp_title);
	if (!t) {
		add_svg_text(sb, p, strlen(p));
		return;
	}
	add_svg_text(sb, p, (size_t)(t - p));
	lb_strbuf_adds(sb, "<title>");
	render_html_escape(sb, title);
	lb_strbuf_adds(sb, "</title>");
	t += sizeof(gp_title) - 1;
	add_svg_text(sb, t, strlen(t));
}

void render_html_figure(struct lb_strbuf *sb, const struct report_figure *f, const char *svg,
			const char *note)
{
	lb_strbuf_addf(sb, "<section id=\"%s\">\n<h2>", report_kind_name(f->kind));
	render_html_escape(sb, report_kind_title(f->kind));
	lb_strbuf_adds(sb, "</h2>\n<p class=\"note\">");
	render_html_escape(sb, render_kind_definition(f->kind));
	lb_strbuf_adds(sb, "</p>\n");
	{
		char left[160];

		left_out_note(f, left, sizeof(left));
		if (left[0]) {
			lb_strbuf_adds(sb, "<p class=\"note\">");
			render_html_escape(sb, left);
			lb_strbuf_adds(sb, "</p>\n");
		}
	}
	if (!f->n) {
		lb_strbuf_adds(sb, "<p>No runs for this figure.</p>\n</section>\n");
		return;
	}
	lb_strbuf_adds(sb, "<div class=\"fig\">\n");
	if (!svg && !note) /* a figure without a plot (report_kind_plotted) */
		goto tables;
	lb_strbuf_adds(sb, "<div class=\"plot\">\n");
	if (svg) {
		add_svg(sb, svg, report_kind_title(f->kind));
	} else if (note) {
		lb_strbuf_adds(sb, "<p class=\"note\">");
		render_html_escape(sb, note);
		lb_strbuf_adds(sb, "</p>");
	}
	lb_strbuf_adds(sb, "\n</div>\n");
tables:
	lb_strbuf_adds(sb, "<div class=\"tables\">\n");
	write_table(sb, f, html_write);
	lb_strbuf_adds(sb, "</div>\n</div>\n</section>\n");
}

void render_html_end(struct lb_strbuf *sb)
{
	lb_strbuf_adds(sb, "</body>\n</html>\n");
}
