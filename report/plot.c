/*
 * gnuplot plots of report figures (see report/plot.h): the script generator places every
 * bar itself (x positions, colours, labels) so that clusters, OOM markers and the
 * annotations above bars look the same in every figure, and the runner feeds the script
 * to gnuplot through a pipe while draining its output (poll), so neither side can block
 * the other whatever the sizes.
 */
#include "report/plot.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report/render.h"

/* Twenty colours that no reader confuses: the ten Tableau colours, then ten picked one by
 * one as the farthest (CIE L*a*b*) from every colour before them and from white, at
 * moderate chroma. Any two differ by a colour distance (CIE76 delta E) of at least 25
 * (tests/unit/test_report_render.c checks it); Tableau 20's light variants, used before,
 * came as close as 4 (#76b7b2 and #86bcb6 read as one colour). Series 21 and on take the
 * colours again with a hatched fill (plot_series_style). */
static const char *const palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
				      "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
				      "#4433aa", "#bb0088", "#dd88ff", "#005544", "#0088ff",
				      "#555500", "#773300", "#00ddaa", "#882244", "#00ccff"};
#define NPALETTE (sizeof(palette) / sizeof(palette[0]))

/* gnuplot fill patterns for the passes through the palette after the first (solid). */
static const int hatches[] = {4, 5, 2, 6, 7, 1};
#define NHATCHES (sizeof(hatches) / sizeof(hatches[0]))

size_t plot_palette(const char *const **colours)
{
	*colours = palette;
	return NPALETTE;
}

void plot_series_style(size_t k, const char **colour, int *pattern)
{
	size_t pass = k / NPALETTE;

	*colour = palette[k % NPALETTE];
	*pattern = pass ? hatches[(pass - 1) % NHATCHES] : 0;
}

/* The fill of series k: "solid 0.9" or "pattern N" (both with the dark border). */
static void gp_fill(struct lb_strbuf *sb, size_t k)
{
	const char *colour;
	int pattern;

	plot_series_style(k, &colour, &pattern);
	if (pattern)
		lb_strbuf_addf(sb, "fs pattern %d border lc rgb '#333333'", pattern);
	else
		lb_strbuf_adds(sb, "fs solid 0.9 border lc rgb '#333333'");
}

/* A gnuplot single-quoted string: only ' is special (doubled); control bytes dropped. */
static void gp_quote(struct lb_strbuf *sb, const char *s)
{
	lb_strbuf_adds(sb, "'");
	for (; s && *s; s++) {
		if (*s == '\'')
			lb_strbuf_adds(sb, "''");
		else if ((unsigned char)*s >= 0x20 && *s != 0x7f)
			lb_strbuf_add(sb, s, 1);
	}
	lb_strbuf_adds(sb, "'");
}

/* A gnuplot double-quoted string of s wrapped into lines of about width bytes, broken at
 * each '\n' and after '_', '-', '/' or ' ' where possible (" and \ escaped, other control
 * bytes dropped). Returns the number of lines. */
static int gp_wrapped(struct lb_strbuf *sb, const char *s, size_t width)
{
	size_t col = 0;
	int lines = 1;

	lb_strbuf_adds(sb, "\"");
	for (; s && *s; s++) {
		if (*s == '\n' && s[1]) {
			lb_strbuf_adds(sb, "\\n");
			col = 0;
			lines++;
			continue;
		}
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			continue;
		if (*s == '"' || *s == '\\')
			lb_strbuf_adds(sb, "\\");
		lb_strbuf_add(sb, s, 1);
		col++;
		int brk = strchr("_-/ ", *s) != NULL;
		size_t next = strcspn(s + 1, "_-/ \n");
		if (s[1] && ((brk && col + next + 1 > width) || col >= width + 8)) {
			lb_strbuf_adds(sb, "\\n");
			col = 0;
			lines++;
		}
	}
	lb_strbuf_adds(sb, "\"");
	return lines;
}

/* A datablock string column: double quotes, with " \ and control bytes replaced, so the
 * text can neither end the column nor the block. */
static void gp_data_text(struct lb_strbuf *sb, const char *s)
{
	lb_strbuf_adds(sb, "\"");
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			lb_strbuf_adds(sb, "'");
		else if ((unsigned char)*s < 0x20 || *s == 0x7f)
			lb_strbuf_adds(sb, " ");
		else
			lb_strbuf_add(sb, s, 1);
	}
	lb_strbuf_adds(sb, "\"");
}

/* Index of series s in the figure's series list. */
static size_t series_index(const char **list, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (list[i] == s)
			return i;
	return 0;
}

/* A bar's height on the plot's axis: MFU in percent or TFLOP/s per GPU; 0 when unknown
 * or failed. */
static double bar_height(const struct report_bar *b, int use_mfu)
{
	if (b->state != REPORT_BAR_VALUE)
		return 0;
	if (use_mfu)
		return b->run->mfu * 100.0;
	return b->run->has_tflops ? b->run->tflops : 0;
}

/* Geometry: a bar is one x unit wide; a group takes at least GROUP_MIN_UNITS (room for its
 * name) with its bars centred, and groups are GROUP_GAP units apart. Text sizes are in SVG
 * pixels; the page shows plots at their size (scrolling when wider), so they are the
 * sizes a reader sees. */
#define GROUP_MIN_UNITS 4.0
#define GROUP_GAP	1.0
#define PX_PER_UNIT	30
#define FONT		"sans,12" /* axis titles, key */
#define TITLE_FONT	"sans,14" /* the figure's title */
#define TICK_FONT	"sans,11" /* group names, run names */
#define LABEL_FONT	"sans,10" /* the value and layout above each bar */
#define PLOT_HEIGHT	600
#define MAX_WIDTH	6000

static int plot_width(double units)
{
	int width = (int)(300 + PX_PER_UNIT * units);

	return width < 800 ? 800 : width > MAX_WIDTH ? MAX_WIDTH : width;
}

/* A group of a figure: its bars, and whether its name needs its sweep. */
struct group_ref {
	size_t first, last; /* bars [first, last] */
	int ambiguous;	    /* another group shares its model, sequence length and GPUs */
};

/* The figure's groups (caller frees); NULL when out of memory or no bars. */
static struct group_ref *groups_of(const struct report_figure *f, size_t *ng)
{
	struct group_ref *g = malloc((f->n ? f->n : 1) * sizeof(*g));
	size_t n = 0;

	*ng = 0;
	if (!g)
		return NULL;
	for (size_t i = 0; i < f->n; i++) {
		if (i && f->bars[i].group == f->bars[i - 1].group) {
			g[n - 1].last = i;
			continue;
		}
		g[n++] = (struct group_ref){i, i, 0};
	}
	for (size_t a = 0; a < n; a++)
		for (size_t b = a + 1; b < n; b++) {
			const struct report_bar *x = &f->bars[g[a].first],
						*y = &f->bars[g[b].first];
			if (x->model == y->model && x->seq_len == y->seq_len && x->gpus == y->gpus)
				g[a].ambiguous = g[b].ambiguous = 1;
		}
	*ng = n;
	return g;
}

/* A group's name under its bars, one item a line: model, "seq N", "N GPUs", and the sweep
 * when another group of the figure has the same three (wrapped at width). Returns the
 * number of lines. */
static int gp_group_name(struct lb_strbuf *sb, const struct report_bar *b, int ambiguous,
			 size_t width)
{
	char text[512];

	snprintf(text, sizeof(text), "%s\nseq %d\n%d GPU%s%s%s", b->model ? b->model : "",
		 b->seq_len, b->gpus, b->gpus == 1 ? "" : "s", ambiguous ? "\n" : "",
		 ambiguous ? b->sweep : "");
	return gp_wrapped(sb, text, width);
}

/* The phases figure: one stacked bar per run (rank 0's mean phase times, seconds; an
 * unknown phase counts 0), a cluster per group named under it, each bar named
 * "<label>, <ckpt>[, SP] (mbs,TP,PP,DP) #<run id>" (the run id makes every name unique:
 * two runs of one layout are two bars). */
static void plot_phases_script(struct lb_strbuf *sb, const struct report_figure *f)
{
	static const char *const names[REPORT_PHASE_COUNT] = {
	    "forward", "backward", "optimizer", "exposed communication", "pipeline bubble"};
	struct lb_strbuf cmd = LB_STRBUF_INIT;
	char text[320];
	size_t ng = 0, longest = 0;
	struct group_ref *g = groups_of(f, &ng);
	int lines = 1;

	if (!g) {
		sb->failed = 1;
		return;
	}
	lb_strbuf_addf(sb,
		       "set terminal svg size %d,%d noenhanced font '" FONT "' background "
		       "'white'\n",
		       plot_width(2.0 * (double)f->n + 2.0 * (double)ng), PLOT_HEIGHT + 100);
	for (size_t k = 0; k < ng; k++) {
		lb_strbuf_addf(sb, "$g%zu << EOD\n", k);
		for (size_t i = g[k].first; i <= g[k].last; i++) {
			const struct report_run *r = f->bars[i].run;
			snprintf(text, sizeof(text), "%s, %s%s (%d,%d,%d,%d) #%ld", r->label,
				 r->checkpointing, r->sequence_parallel ? ", SP" : "",
				 r->micro_batch, r->tp, r->pp, r->dp, r->run_id);
			gp_data_text(sb, text);
			if (strlen(text) > longest)
				longest = strlen(text);
			for (int p = 0; p < REPORT_PHASE_COUNT; p++)
				lb_strbuf_addf(sb, " %.9g", r->phase[p] >= 0 ? r->phase[p] : 0.0);
			lb_strbuf_adds(sb, "\n");
		}
		lb_strbuf_adds(sb, "EOD\n");
	}
	lb_strbuf_adds(sb, "set style data histograms\n"
			   "set style fill solid 0.9 border lc rgb '#333333'\n"
			   "set boxwidth 0.75 relative\n"
			   "set grid ytics lc rgb '#dddddd'\n"
			   "set border 3\nset tics nomirror\n"
			   "set key outside top left horizontal samplen 1.5\n"
			   "set yrange [0:*]\n"
			   "set xtics rotate by -30 font '" TICK_FONT "'\n"
			   "set ylabel 'seconds per step (mean, rank 0)'\n"
			   "set title font '" TITLE_FONT "'\nset title ");
	gp_quote(sb, report_kind_title(f->kind));
	lb_strbuf_adds(sb, "\n");
	lb_strbuf_adds(&cmd, "plot");
	for (size_t k = 0; k < ng; k++) {
		lb_strbuf_addf(&cmd, "%s newhistogram ", k ? ", \\\n" : "");
		int n = gp_group_name(&cmd, &f->bars[g[k].first], g[k].ambiguous, 24);
		if (n > lines)
			lines = n;
		lb_strbuf_adds(&cmd, " lt 1");
		for (int p = 0; p < REPORT_PHASE_COUNT; p++) {
			lb_strbuf_addf(&cmd, ", \\\n $g%zu using %d%s lc rgb '%s' ", k, p + 2,
				       p ? "" : ":xtic(1)", palette[p]);
			if (k) {
				lb_strbuf_adds(&cmd, "notitle");
			} else {
				lb_strbuf_adds(&cmd, "title ");
				gp_quote(&cmd, names[p]);
			}
		}
	}
	lb_strbuf_adds(&cmd, "\n");
	/* room under the axis: the slanted run names (half their length drops, at about
	 * two characters a line), the cluster names and the axis title */
	/* gnuplot writes the cluster names below the axis title, centred on their middle
	 * line: the offset moves their first line under the title */
	lb_strbuf_addf(sb,
		       "set style histogram rowstacked title font '" TICK_FONT "' offset 0,%g\n"
		       "set xlabel 'run: kernels, checkpointing (micro-batch,TP,PP,DP) #run id; "
		       "under each cluster its model, sequence length and GPUs'\n",
		       -(lines / 2.0 + 1));
	lb_strbuf_addf(sb, "set bmargin %d\n", (int)(longest / 4) + lines + 4);
	if (cmd.failed)
		sb->failed = 1;
	else
		lb_strbuf_add(sb, cmd.buf, cmd.len);
	lb_strbuf_release(&cmd);
	free(g);
}

void plot_script(struct lb_strbuf *sb, const struct report_figure *f)
{
	if (f->kind == REPORT_PHASES) {
		plot_phases_script(sb, f);
		return;
	}
	int use_mfu = report_figure_all_mfu(f);
	const char **series = NULL;
	double *xs = calloc(f->n ? f->n : 1, sizeof(*xs));
	size_t nseries = report_figure_series(f, &series), ng = 0;
	struct group_ref *g = groups_of(f, &ng);
	double x = 0, ymax = 0;
	int maxlines = 1;
	char text[160], ann[96], val[64];

	if ((f->n && !series) || !xs || !g) {
		sb->failed = 1;
		goto out_free;
	}
	for (size_t k = 0; k < ng; k++) {
		size_t i = g[k].first, j = g[k].last + 1;
		double slot = (double)(j - i) < GROUP_MIN_UNITS ? GROUP_MIN_UNITS : (double)(j - i);
		double start = x + (slot - (double)(j - i)) / 2 + 0.5;
		for (size_t b = i; b < j; b++) {
			xs[b] = start + (double)(b - i);
			if (bar_height(&f->bars[b], use_mfu) > ymax)
				ymax = bar_height(&f->bars[b], use_mfu);
		}
		x += slot + GROUP_GAP;
	}
	x -= GROUP_GAP;

	lb_strbuf_addf(sb,
		       "set terminal svg size %d,%d noenhanced font '" FONT "' background "
		       "'white'\n",
		       plot_width(x), PLOT_HEIGHT);
	/* The boxes, one block per pass through the palette (solid, then hatched), the labels
	 * above measured bars, the labels of failed bars (written at the base). Separate
	 * blocks rather than NaN filters: gnuplot 5.4 crashes on a labels plot whose only
	 * point is filtered out. */
	size_t nvalue = 0, nfail = 0, passes = nseries ? (nseries - 1) / NPALETTE + 1 : 1;
	for (size_t pass = 0; pass < passes; pass++) {
		lb_strbuf_addf(sb, "$bars%zu << EOD\n", pass);
		for (size_t i = 0; i < f->n; i++) {
			const struct report_bar *b = &f->bars[i];
			size_t si = series_index(series, nseries, b->series);
			if (si / NPALETTE != pass)
				continue;
			lb_strbuf_addf(sb, "%g %.6f %zu\n", xs[i], bar_height(b, use_mfu),
				       si % NPALETTE + 1);
		}
		lb_strbuf_adds(sb, "EOD\n");
	}
	lb_strbuf_adds(sb, "$values << EOD\n");
	for (size_t i = 0; i < f->n; i++) {
		const struct report_bar *b = &f->bars[i];
		double y = bar_height(b, use_mfu);
		if (b->state != REPORT_BAR_VALUE)
			continue;
		render_bar_annotation(f, b, ann, sizeof(ann));
		if (use_mfu)
			snprintf(val, sizeof(val), "%.2f", y);
		else if (b->run->has_tflops)
			snprintf(val, sizeof(val), y >= 1 ? "%.1f" : "%.3g", y);
		else
			snprintf(val, sizeof(val), "n/a");
		snprintf(text, sizeof(text), "%s %s", val, ann);
		lb_strbuf_addf(sb, "%g %.6f ", xs[i], y);
		gp_data_text(sb, text);
		lb_strbuf_adds(sb, "\n");
		nvalue++;
	}
	lb_strbuf_adds(sb, "EOD\n$failures << EOD\n");
	for (size_t i = 0; i < f->n; i++) {
		const struct report_bar *b = &f->bars[i];
		if (b->state == REPORT_BAR_VALUE)
			continue;
		report_bar_mfu_text(b, "n/a", text, sizeof(text));
		lb_strbuf_addf(sb, "%g 0 ", xs[i]);
		gp_data_text(sb, text);
		lb_strbuf_adds(sb, "\n");
		nfail++;
	}
	lb_strbuf_adds(sb, "EOD\n");
	for (size_t k = 0; k < NPALETTE; k++)
		lb_strbuf_addf(sb, "set linetype %zu lc rgb '%s'\n", k + 1, palette[k]);
	lb_strbuf_adds(sb, "set boxwidth 0.85 absolute\n"
			   "set grid ytics lc rgb '#dddddd'\n"
			   "set border 3\nset tics nomirror\n"
			   "set key outside top left horizontal samplen 1.5\n");
	lb_strbuf_addf(sb, "set ylabel %s\n",
		       use_mfu ? "'MFU [%]'" : "'TFLOP/s per GPU (model FLOPs)'");
	lb_strbuf_addf(sb, "set yrange [0:%g]\n", ymax > 0 ? ymax * 1.5 : (use_mfu ? 100 : 1));
	lb_strbuf_addf(sb, "set xrange [0:%g]\n", x > 0 ? x : 1);
	lb_strbuf_adds(sb, "set xtics font '" TICK_FONT "' (");
	for (size_t k = 0; k < ng; k++) {
		if (k)
			lb_strbuf_adds(sb, ", ");
		int lines = gp_group_name(sb, &f->bars[g[k].first], g[k].ambiguous, 16);
		if (lines > maxlines)
			maxlines = lines;
		lb_strbuf_addf(sb, " %g", (xs[g[k].first] + xs[g[k].last]) / 2);
	}
	lb_strbuf_adds(sb, ")\n");
	/* the axis title under the group names (gnuplot leaves room for one line of tics) */
	lb_strbuf_adds(sb, "set xlabel ");
	snprintf(text, sizeof(text), "%s per group: model, sequence length, GPUs",
		 f->kind == REPORT_BEST ? "best layout's kernel" : render_series_header(f->kind));
	gp_quote(sb, text);
	lb_strbuf_addf(sb, " offset 0,%d\n", -(maxlines - 1));
	lb_strbuf_addf(sb, "set bmargin %d\n", maxlines + 4);
	lb_strbuf_adds(sb, "set title font '" TITLE_FONT "'\nset title ");
	gp_quote(sb, report_kind_title(f->kind));
	lb_strbuf_adds(sb, "\nplot ");
	for (size_t pass = 0; pass < passes; pass++) {
		lb_strbuf_addf(sb, "%s$bars%zu using 1:2:3 with boxes lc variable ",
			       pass ? ", \\\n  " : "", pass);
		gp_fill(sb, pass * NPALETTE);
		lb_strbuf_adds(sb, " notitle");
	}
	if (nvalue)
		lb_strbuf_adds(sb, ", \\\n  $values using 1:2:3 with labels rotate by 90 left "
				   "offset 0,0.4 font '" LABEL_FONT "' notitle");
	if (nfail)
		lb_strbuf_adds(sb, ", \\\n  $failures using 1:2:3 with labels rotate by 90 left "
				   "offset 0,0.4 font '" LABEL_FONT "' tc rgb '#b00000' notitle");
	for (size_t k = 0; k < nseries; k++) {
		lb_strbuf_addf(sb, ", \\\n  NaN with boxes lt %zu ", k % NPALETTE + 1);
		gp_fill(sb, k);
		lb_strbuf_adds(sb, " title ");
		gp_quote(sb, series[k]);
	}
	lb_strbuf_adds(sb, "\n");
out_free:
	free(g);
	free(xs);
	free(series);
}

/* ---- running gnuplot ---- */

int plot_run(const char *script, char **svg, char *err, size_t errlen)
{
	const char *prog = getenv("LB_GNUPLOT");
	int in[2] = {-1, -1}, out[2] = {-1, -1}, ex[2] = {-1, -1};
	struct lb_strbuf sb = LB_STRBUF_INIT;
	struct sigaction ign, old;
	size_t off = 0, len = strlen(script);
	int rc = PLOT_ERR_FAILED, status, child_errno = 0;
	pid_t pid;

	*svg = NULL;
	if (!prog || !*prog)
		prog = "gnuplot";
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(ex, O_CLOEXEC)) {
		snprintf(err, errlen, "cannot create a pipe for gnuplot: %s", strerror(errno));
		goto out_close;
	}
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &ign, &old);
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "cannot start gnuplot: %s", strerror(errno));
		goto out_restore;
	}
	if (pid == 0) {
		char *argv[] = {(char *)prog, NULL};
		signal(SIGPIPE, SIG_DFL);
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
			_exit(127);
		execvp(prog, argv);
		int e = errno;
		if (write(ex[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(ex[1]);
	in[0] = out[1] = ex[1] = -1;
	if (read(ex[0], &child_errno, sizeof(child_errno)) == (ssize_t)sizeof(child_errno)) {
		waitpid(pid, &status, 0);
		if (child_errno == ENOENT || child_errno == EACCES)
			rc = PLOT_ERR_MISSING;
		snprintf(err, errlen,
			 "gnuplot not found ('%s': %s): install it (apt-get install gnuplot-nox) "
			 "or set LB_GNUPLOT",
			 prog, strerror(child_errno));
		goto out_restore;
	}
	fcntl(in[1], F_SETFL, O_NONBLOCK);
	while (out[0] >= 0) {
		struct pollfd p[2] = {{out[0], POLLIN, 0}, {in[1], POLLOUT, 0}};
		int np = in[1] >= 0 ? 2 : 1;
		if (poll(p, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (np == 2 && p[1].revents) {
			ssize_t w = write(in[1], script + off, len - off);
			if (w > 0)
				off += (size_t)w;
			if ((w < 0 && errno != EAGAIN) || off == len) {
				close(in[1]);
				in[1] = -1;
			}
		}
		if (p[0].revents) {
			char buf[65536];
			ssize_t r = read(out[0], buf, sizeof(buf));
			if (r > 0) {
				lb_strbuf_add(&sb, buf, (size_t)r);
			} else if (r == 0 || errno != EINTR) {
				close(out[0]);
				out[0] = -1;
			}
		}
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(err, errlen, "gnuplot exited with status %d",
			 WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
		goto out_restore;
	}
	if (sb.failed || !strstr(lb_strbuf_str(&sb), "</svg>")) {
		snprintf(err, errlen, "gnuplot wrote no SVG");
		goto out_restore;
	}
	*svg = lb_strbuf_detach(&sb);
	rc = *svg ? 0 : PLOT_ERR_FAILED;
out_restore:
	sigaction(SIGPIPE, &old, NULL);
out_close:
	for (int k = 0; k < 2; k++) {
		if (in[k] >= 0)
			close(in[k]);
		if (out[k] >= 0)
			close(out[k]);
		if (ex[k] >= 0)
			close(ex[k]);
	}
	lb_strbuf_release(&sb);
	return rc;
}
