/*
 * `layoutbench report`: the thin shell around the report's core. Parses the options, opens
 * the results database (results/db.h), reads the views (report/load.h), builds the figures
 * (report/report.h), renders them (report/render.h, report/plot.h) and writes them to
 * stdout or files in --out. Formats and file names: docs/report.md.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cmdline.h"
#include "common/util.h"
#include "results/db.h"
#include "report/cmd.h"
#include "report/halving.h"
#include "report/load.h"
#include "report/plot.h"
#include "report/predicted.h"
#include "report/render.h"
#include "report/report.h"

/* The figures --figure takes: the report's (report/report.h), then these three. */
#define FIGURE_PREDICTED "predicted" /* report/predicted.h */
#define FIGURE_ALL	 "all"
/* clang-format off */
#define FIGURE_CHOICES (&(REPORT_KINDS(REPORT_KIND_BAR) "|" FIGURE_PREDICTED "|" \
			  REPORT_HALVING_NAME "|" FIGURE_ALL)[1]) /* "kernels|...|all" */
/* clang-format on */

/* The ids of its options (struct lb_option.id). */
enum { OPT_DB, OPT_SWEEP, OPT_FIGURE, OPT_FORMAT, OPT_OUT, OPT_KEEP_DIVERGED, OPT_MACHINE };

static const struct lb_option report_opts[] = {
    LB_OPTION_DB(OPT_DB),
    LB_OPTION_SWEEP(OPT_SWEEP),
    LB_CHOICE(OPT_FIGURE, "figure", NULL, FIGURE_CHOICES, NULL, LB_OPT_REQUIRED,
	      "the figure (the paper's figures 1-5, rms, best, phases, memory, predicted, the "
	      "rungs of a successive halving) or all"),
    LB_CHOICE(OPT_FORMAT, "format", NULL, "md|csv|html", "md", 0,
	      "markdown tables, CSV, or one HTML page with the plots"),
    LB_TEXT(OPT_OUT, "out", "DIR", NULL, "write files into DIR (default stdout)"),
    LB_SWITCH(OPT_KEEP_DIVERGED, "keep-diverged", 0,
	      "let runs whose loss diverged compete for the bars and the best layouts, marked "
	      "(default: left out, and counted)"),
    LB_OPTION_MACHINE(OPT_MACHINE),
    LB_OPT_END,
};

enum format { FMT_MD, FMT_CSV, FMT_HTML };

struct options {
	const char *db;
	const char *sweep;
	const char *out;
	const char *machine; /* --figure predicted: the machine predicted on */
	int predicted;	     /* 1: --figure predicted (report/predicted.h) */
	enum format format;
	int kinds[REPORT_KIND_COUNT]; /* 1: figure requested */
	int all;
	struct report_build_opts build; /* keep_diverged */
	int halving; /* 1: the halving section (report/halving.h; with all: where there is one) */
};

/* The options from the parsed line a (choices checked by the table above). Returns 0, or
 * the exit status after an error (reported). */
static int read_options(const struct lb_args *a, struct options *o)
{
	const char *fig = a->str[OPT_FIGURE], *fmt = a->str[OPT_FORMAT];

	memset(o, 0, sizeof(*o));
	o->db = a->str[OPT_DB];
	o->sweep = a->str[OPT_SWEEP];
	o->out = a->str[OPT_OUT];
	o->build.keep_diverged = a->given[OPT_KEEP_DIVERGED] > 0;
	o->machine = a->str[OPT_MACHINE];
	if (o->machine && strcmp(fig, FIGURE_PREDICTED)) {
		fprintf(stderr, "error: --machine is for --figure predicted\n");
		lb_usage(a->cmd);
		return 2;
	}
	if (!strcmp(fig, FIGURE_PREDICTED)) {
		o->predicted = 1;
	} else if (!strcmp(fig, FIGURE_ALL)) {
		o->all = 1;
		o->halving = 1;
		for (int k = 0; k < REPORT_KIND_COUNT; k++)
			o->kinds[k] = 1;
	} else if (!strcmp(fig, REPORT_HALVING_NAME)) {
		o->halving = 1;
	} else {
		enum report_kind k;
		if (report_kind_parse(fig, &k)) { /* a choice the table has and the report not */
			fprintf(stderr, "error: figure '%s' is not built\n", fig);
			return 1;
		}
		o->kinds[k] = 1;
	}
	o->format = !strcmp(fmt, "csv") ? FMT_CSV : !strcmp(fmt, "html") ? FMT_HTML : FMT_MD;
	return 0;
}

/* Write text to dir/name (dir NULL: stdout). A file is written whole or not at all (a
 * temporary file renamed over it: a full disk leaves no cut-off report that looks
 * complete); on a terminal, control characters from run logs and specs (a label's
 * escape sequence) are shown as \xHH, not done. Returns 0 or -1 (reported, with the OS's
 * reason and the path). */
static int emit(const char *dir, const char *name, const struct lb_strbuf *sb)
{
	struct lb_strbuf vis = LB_STRBUF_INIT;
	const char *text = lb_strbuf_str(sb);
	size_t len = sb->len;
	char path[4096], err[4400];
	int rc = 0;

	if (sb->failed) {
		fprintf(stderr, "error: out of memory rendering the report\n");
		return -1;
	}
	if (dir) {
		lb_path_join(path, sizeof(path), dir, name); /* "rep/": no "rep//report.html" */
		if (lb_write_file_atomic(path, text, len, err, sizeof(err))) {
			fprintf(stderr, "error: %s\n", err);
			return -1;
		}
		fprintf(stderr, "wrote %s\n", path);
		return 0;
	}
	if (isatty(fileno(stdout)) && lb_text_needs_escape(text, len, 1)) {
		lb_strbuf_add_visible(&vis, text, len, 1);
		if (vis.failed) {
			fprintf(stderr, "error: out of memory rendering the report\n");
			return -1;
		}
		text = lb_strbuf_str(&vis);
		len = vis.len;
	}
	if (fwrite(text, 1, len, stdout) != len || fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "error: cannot write the report to standard output: %s\n",
			strerror(errno));
		rc = -1;
	}
	lb_strbuf_release(&vis);
	return rc;
}

/* The HTML page: every figure with its plot. Returns 0, or 1 when a plot failed (the page
 * is still written, with the failure noted). */
static int render_page(struct lb_strbuf *page, const struct report_figure *figs, const int *kinds,
		       const struct report_halvings *hs)
{
	int rc = 0, missing_said = 0;
	char err[256], note[320];

	render_html_begin(page, "layoutbench report");
	for (int k = 0; k < REPORT_KIND_COUNT; k++) {
		struct lb_strbuf script = LB_STRBUF_INIT;
		char *svg = NULL;
		const char *why = NULL;

		if (!kinds[k])
			continue;
		if (figs[k].n && report_kind_plotted((enum report_kind)k)) {
			plot_script(&script, &figs[k]);
			int prc = script.failed
				      ? PLOT_ERR_FAILED
				      : plot_run(lb_strbuf_str(&script), &svg, err, sizeof(err));
			if (prc == PLOT_ERR_MISSING) {
				if (!missing_said)
					fprintf(stderr,
						"warning: %s; the report has its tables but no "
						"plots\n",
						err);
				missing_said = 1;
				snprintf(note, sizeof(note), "No plot: %s.", err);
				why = note;
			} else if (prc) {
				fprintf(stderr, "error: figure '%s': %s\n",
					report_kind_name((enum report_kind)k), err);
				snprintf(note, sizeof(note), "No plot: %s.", err);
				why = note;
				rc = 1;
			}
		}
		render_html_figure(page, &figs[k], svg, why);
		free(svg);
		lb_strbuf_release(&script);
	}
	if (hs)
		report_halving_html(page, hs);
	render_html_end(page);
	return rc;
}

static int run_report(const struct lb_args *a)
{
	struct options o;
	struct report_runs runs, best;
	struct report_halvings halvings = {0};
	struct report_figure figs[REPORT_KIND_COUNT];
	struct lb_strbuf sb = LB_STRBUF_INIT;
	sqlite3 *db = NULL;
	struct stat stbuf;
	char err[512];
	const char *path;
	int rc = 1, need_runs = 0;
	size_t best_left = 0;

	memset(figs, 0, sizeof(figs));
	report_runs_init(&runs);
	report_runs_init(&best);
	int prc = read_options(a, &o);
	if (prc)
		return prc;
	path = o.db ? o.db : results_default_db();
	if (stat(path, &stbuf)) {
		fprintf(stderr,
			"error: database '%s' not found: collect or import runs first "
			"('layoutbench collect', 'layoutbench import'), or pass --db PATH\n",
			path);
		return 1;
	}
	if (o.out && mkdir(o.out, 0777) && errno != EEXIST) {
		fprintf(stderr, "error: cannot create '%s': %s\n", o.out, strerror(errno));
		return 1;
	}
	/* a reader: needs no write access, runs no migration (results/db.h) */
	if (results_db_open(path, RESULTS_DB_READ, &db, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err); /* err names the database */
		return 1;
	}
	/* a misspelled --sweep is an error, not an empty report */
	if (o.sweep && results_sweep_check(db, path, o.sweep, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		goto out_release;
	}
	if (o.predicted) {
		static const char *const names[] = {"predicted.md", "predicted.csv", "predicted.html"};
		enum report_pred_format pf = o.format == FMT_CSV    ? REPORT_PRED_CSV
					     : o.format == FMT_HTML ? REPORT_PRED_HTML
								    : REPORT_PRED_MD;

		rc = report_predicted(db, o.sweep, o.machine, pf, &sb, err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "error: %s\n", err);
			rc = 1;
		} else if (emit(o.out, names[pf], &sb)) {
			rc = 1;
		}
		goto out_release;
	}
	/* best alone over every sweep reads the best_layout view; with other figures (whose
	 * run_summary rows are read anyway) or --sweep, the same rule groups those rows here
	 * (report_runs_best) instead of evaluating run_summary a second time inside the view */
	for (int k = 0; k < REPORT_KIND_COUNT; k++)
		if (o.kinds[k] && k != REPORT_BEST)
			need_runs = 1;
	if (o.sweep || o.build.keep_diverged) /* the view leaves diverged runs out */
		need_runs = 1;
	if (need_runs && report_load_runs(db, o.sweep, &runs, err, sizeof(err))) {
		fprintf(stderr, "error: database '%s': %s\n", path, err);
		goto out_release;
	}
	/* the memory figure's model column, only when it is wanted (a model per layout) */
	if (o.kinds[REPORT_MEMORY] && report_load_model_mem(db, o.sweep, &runs, err, sizeof(err))) {
		fprintf(stderr, "error: database '%s': %s\n", path, err);
		goto out_release;
	}
	if (o.kinds[REPORT_BEST]) {
		int brc =
		    need_runs
			? report_runs_best_opts(&runs, o.build.keep_diverged, &best, &best_left)
			: report_load_best(db, NULL, &best, err, sizeof(err)) ||
			      report_load_diverged(db, NULL, &best_left, err, sizeof(err));
		if (brc) {
			fprintf(stderr, "error: database '%s': %s\n", path,
				need_runs ? "out of memory" : err);
			goto out_release;
		}
	}
	for (int k = 0; k < REPORT_KIND_COUNT; k++) {
		if (!o.kinds[k])
			continue;
		if (report_figure_build_opts(k == REPORT_BEST ? &best : &runs, (enum report_kind)k,
					     o.sweep, &o.build, &figs[k])) {
			fprintf(stderr, "error: out of memory building figure '%s'\n",
				report_kind_name((enum report_kind)k));
			goto out_release;
		}
		if (k == REPORT_BEST)
			figs[k].diverged_left_out = best_left;
		/* CSV has no room for a note: the count goes to stderr */
		if (o.format == FMT_CSV && figs[k].diverged_left_out)
			fprintf(stderr,
				"report: figure '%s': %zu diverged run%s left out "
				"(--keep-diverged keeps them)\n",
				report_kind_name((enum report_kind)k), figs[k].diverged_left_out,
				figs[k].diverged_left_out == 1 ? "" : "s");
	}

	if (o.halving && report_halving_load(db, o.sweep, &halvings, err, sizeof(err))) {
		fprintf(stderr, "error: database '%s': %s\n", path, err);
		goto out_release;
	}
	/* `all` shows the section where there is a halving; `halving` always */
	const struct report_halvings *hs = o.halving && (halvings.n || !o.all) ? &halvings : NULL;

	rc = 0;
	switch (o.format) {
	case FMT_CSV:
		for (int k = 0; k < REPORT_KIND_COUNT && !rc; k++) {
			char name[64];
			if (!o.kinds[k])
				continue;
			if (!o.out && o.all)
				lb_strbuf_addf(&sb, "%s# figure: %s\n", sb.len ? "\n" : "",
					       report_kind_name((enum report_kind)k));
			render_csv(&sb, &figs[k]);
			if (o.out) {
				snprintf(name, sizeof(name), "%s.csv",
					 report_kind_name((enum report_kind)k));
				rc = emit(o.out, name, &sb) ? 1 : 0;
				lb_strbuf_release(&sb);
			}
		}
		if (hs && !rc) {
			if (!o.out && o.all)
				lb_strbuf_addf(&sb, "%s# figure: halving\n", sb.len ? "\n" : "");
			report_halving_csv(&sb, hs);
			if (o.out) {
				rc = emit(o.out, "halving.csv", &sb) ? 1 : 0;
				lb_strbuf_release(&sb);
			}
		}
		if (!o.out && !rc)
			rc = emit(NULL, NULL, &sb) ? 1 : 0;
		break;
	case FMT_MD:
		lb_strbuf_adds(&sb, "# layoutbench report\n");
		for (int k = 0; k < REPORT_KIND_COUNT; k++) {
			if (!o.kinds[k])
				continue;
			lb_strbuf_adds(&sb, "\n");
			render_md(&sb, &figs[k]);
		}
		if (hs) {
			lb_strbuf_adds(&sb, "\n");
			report_halving_md(&sb, hs);
		}
		rc = emit(o.out, "report.md", &sb) ? 1 : 0;
		break;
	case FMT_HTML:
		rc = render_page(&sb, figs, o.kinds, hs);
		if (emit(o.out, "report.html", &sb))
			rc = 1;
		break;
	}

out_release:
	report_halving_release(&halvings);
	lb_strbuf_release(&sb);
	for (int k = 0; k < REPORT_KIND_COUNT; k++)
		report_figure_release(&figs[k]);
	report_runs_release(&best);
	report_runs_release(&runs);
	results_close(db);
	return rc;
}

const struct lb_command cmd_report =
    LB_COMMAND("report", NULL, 0, 0, 0, report_opts, run_report,
	       "the paper's tables and figures, and predicted against measured step times");
