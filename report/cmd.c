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

#include "common/cmdline.h"
#include "results/db.h"
#include "report/cmd.h"
#include "report/halving.h"
#include "report/load.h"
#include "report/plot.h"
#include "report/render.h"
#include "report/report.h"

enum format { FMT_MD, FMT_CSV, FMT_HTML };

struct options {
	const char *db;
	const char *sweep;
	const char *out;
	enum format format;
	int kinds[REPORT_KIND_COUNT]; /* 1: figure requested */
	int all;
	int halving; /* 1: the halving section (report/halving.h; with all: where there is one) */
};

/* The options from the parsed line (choices checked by the table in common/cmdline.c). */
static int parse_options(int argc, char **argv, struct options *o)
{
	struct lb_args a;
	const char *fig, *fmt;
	int rc;

	memset(o, 0, sizeof(*o));
	if ((rc = lb_args_parse("report", argc, argv, &a)))
		goto out_release_args;
	o->db = a.str[LB_OPT_DB];
	o->sweep = a.str[LB_OPT_SWEEP];
	o->out = a.str[LB_OPT_OUT];
	fig = a.str[LB_OPT_FIGURE];
	fmt = a.str[LB_OPT_FORMAT];
	if (!strcmp(fig, "all")) {
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
			rc = 1;
			goto out_release_args;
		}
		o->kinds[k] = 1;
	}
	o->format = !strcmp(fmt, "csv") ? FMT_CSV : !strcmp(fmt, "html") ? FMT_HTML : FMT_MD;
out_release_args:
	lb_args_release(&a);
	return rc;
}

/* Write text to dir/name (dir NULL: stdout). Returns 0 or -1 (reported). */
static int emit(const char *dir, const char *name, const struct lb_strbuf *sb)
{
	char path[4096];
	FILE *f = stdout;

	if (sb->failed) {
		fprintf(stderr, "error: out of memory rendering the report\n");
		return -1;
	}
	if (dir) {
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		f = fopen(path, "w");
		if (!f) {
			fprintf(stderr, "error: cannot write '%s': %s\n", path, strerror(errno));
			return -1;
		}
	}
	fwrite(lb_strbuf_str(sb), 1, sb->len, f);
	if (dir) {
		if (fclose(f)) {
			fprintf(stderr, "error: cannot write '%s': %s\n", path, strerror(errno));
			return -1;
		}
		fprintf(stderr, "wrote %s\n", path);
	} else if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "error: cannot write the report to stdout\n");
		return -1;
	}
	return 0;
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
		render_html_halving(page, hs);
	render_html_end(page);
	return rc;
}

int cmd_report(int argc, char **argv)
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

	memset(figs, 0, sizeof(figs));
	report_runs_init(&runs);
	report_runs_init(&best);
	int prc = parse_options(argc, argv, &o);
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
	/* best alone over every sweep reads the best_layout view; with other figures (whose
	 * run_summary rows are read anyway) or --sweep, the same rule groups those rows here
	 * (report_runs_best) instead of evaluating run_summary a second time inside the view */
	for (int k = 0; k < REPORT_KIND_COUNT; k++)
		if (o.kinds[k] && k != REPORT_BEST)
			need_runs = 1;
	if (o.sweep)
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
		int brc = need_runs ? report_runs_best(&runs, &best)
				    : report_load_best(db, NULL, &best, err, sizeof(err));
		if (brc) {
			fprintf(stderr, "error: database '%s': %s\n", path,
				need_runs ? "out of memory" : err);
			goto out_release;
		}
	}
	for (int k = 0; k < REPORT_KIND_COUNT; k++) {
		if (!o.kinds[k])
			continue;
		if (report_figure_build(k == REPORT_BEST ? &best : &runs, (enum report_kind)k,
					o.sweep, &figs[k])) {
			fprintf(stderr, "error: out of memory building figure '%s'\n",
				report_kind_name((enum report_kind)k));
			goto out_release;
		}
	}

	if (o.halving && report_halvings_load(db, o.sweep, &halvings, err, sizeof(err))) {
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
			render_halving_csv(&sb, hs);
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
			render_halving_md(&sb, hs);
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
	report_halvings_release(&halvings);
	lb_strbuf_release(&sb);
	for (int k = 0; k < REPORT_KIND_COUNT; k++)
		report_figure_release(&figs[k]);
	report_runs_release(&best);
	report_runs_release(&runs);
	results_close(db);
	return rc;
}
