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

/* Tableau 20 (the ten Tableau colours, then their light variants); series cycle through
 * it, so figures with up to 20 series never repeat a colour. */
static const char *const palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
				      "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
				      "#a0cbe8", "#ffbe7d", "#8cd17d", "#86bcb6", "#f1ce63",
				      "#d4a6c8", "#fabfd2", "#d7b5a6", "#79706e", "#499894"};
#define NPALETTE (sizeof(palette) / sizeof(palette[0]))

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

/* A gnuplot double-quoted string of s wrapped into lines of about width bytes, broken after
 * '_', '-', '/' or ' ' where possible (" and \ escaped, control bytes dropped). Returns the
 * number of lines. */
static int gp_wrapped(struct lb_strbuf *sb, const char *s, size_t width)
{
	size_t col = 0;
	int lines = 1;

	lb_strbuf_adds(sb, "\"");
	for (; s && *s; s++) {
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			continue;
		if (*s == '"' || *s == '\\')
			lb_strbuf_adds(sb, "\\");
		lb_strbuf_add(sb, s, 1);
		col++;
		int brk = strchr("_-/ ", *s) != NULL;
		size_t next = strcspn(s + 1, "_-/ ");
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
 * wrapped name) with its bars centred, and groups are GROUP_GAP units apart. */
#define GROUP_MIN_UNITS 4.0
#define GROUP_GAP	1.0
#define PX_PER_UNIT	28

/* The phases figure: one stacked bar per run (rank 0's mean phase times, seconds; an
 * unknown phase counts 0), labelled "<group> (mbs,TP,PP,DP)". */
static void plot_phases_script(struct lb_strbuf *sb, const struct report_figure *f)
{
	static const char *const names[REPORT_PHASE_COUNT] = {
	    "forward", "backward", "optimizer", "exposed communication", "pipeline bubble"};
	char text[320];
	int width = (int)(260 + 2 * PX_PER_UNIT * (double)f->n);

	if (width < 760)
		width = 760;
	if (width > 4000)
		width = 4000;
	lb_strbuf_addf(sb,
		       "set terminal svg size %d,560 noenhanced font 'sans,11' background "
		       "'white'\n$data << EOD\n",
		       width);
	for (size_t i = 0; i < f->n; i++) {
		const struct report_run *r = f->bars[i].run;
		snprintf(text, sizeof(text), "%s (%d,%d,%d,%d)", f->bars[i].group, r->micro_batch,
			 r->tp, r->pp, r->dp);
		gp_data_text(sb, text);
		for (int k = 0; k < REPORT_PHASE_COUNT; k++)
			lb_strbuf_addf(sb, " %.9g", r->phase[k] >= 0 ? r->phase[k] : 0.0);
		lb_strbuf_adds(sb, "\n");
	}
	lb_strbuf_adds(sb, "EOD\n"
			   "set style data histograms\n"
			   "set style histogram rowstacked\n"
			   "set style fill solid 0.9 border lc rgb '#333333'\n"
			   "set boxwidth 0.75 relative\n"
			   "set grid ytics lc rgb '#dddddd'\n"
			   "set border 3\nset tics nomirror\n"
			   "set key outside right top vertical samplen 1.5\n"
			   "set yrange [0:*]\n"
			   "set xtics rotate by -30 font 'sans,9'\n"
			   "set bmargin 8\n"
			   "set ylabel 'seconds per step (mean, rank 0)'\n"
			   "set title ");
	gp_quote(sb, report_kind_title(f->kind));
	lb_strbuf_adds(sb, "\nplot");
	for (int k = 0; k < REPORT_PHASE_COUNT; k++) {
		lb_strbuf_addf(sb, "%s $data using %d%s lc rgb '%s' title ", k ? ", \\\n " : "",
			       k + 2, k ? "" : ":xtic(1)", palette[k]);
		gp_quote(sb, names[k]);
	}
	lb_strbuf_adds(sb, "\n");
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
	size_t nseries = report_figure_series(f, &series);
	double x = 0, ymax = 0;
	int maxlines = 1;
	char text[160], ann[96], val[64];

	if ((f->n && !series) || !xs) {
		sb->failed = 1;
		goto out_free;
	}
	for (size_t i = 0, j; i < f->n; i = j) {
		for (j = i + 1; j < f->n && f->bars[j].group == f->bars[i].group; j++)
			;
		double slot = (double)(j - i) < GROUP_MIN_UNITS ? GROUP_MIN_UNITS : (double)(j - i);
		double start = x + (slot - (double)(j - i)) / 2 + 0.5;
		for (size_t k = i; k < j; k++) {
			const struct report_bar *b = &f->bars[k];
			xs[k] = start + (double)(k - i);
			if (bar_height(b, use_mfu) > ymax)
				ymax = bar_height(b, use_mfu);
		}
		x += slot + GROUP_GAP;
	}
	x -= GROUP_GAP;
	int width = (int)(260 + PX_PER_UNIT * x);
	if (width < 760)
		width = 760;
	if (width > 4000)
		width = 4000;

	lb_strbuf_addf(sb,
		       "set terminal svg size %d,560 noenhanced font 'sans,11' background "
		       "'white'\n",
		       width);
	/* Three blocks: the boxes, the labels above measured bars, the labels of failed bars
	 * (written at the base). Separate blocks rather than NaN filters: gnuplot 5.4 crashes
	 * on a labels plot whose only point is filtered out. */
	size_t nvalue = 0, nfail = 0;
	lb_strbuf_adds(sb, "$bars << EOD\n");
	for (size_t i = 0; i < f->n; i++) {
		const struct report_bar *b = &f->bars[i];
		size_t si = series_index(series, nseries, b->series);
		lb_strbuf_addf(sb, "%g %.6f %zu\n", xs[i], bar_height(b, use_mfu),
			       si % NPALETTE + 1);
	}
	lb_strbuf_adds(sb, "EOD\n$values << EOD\n");
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
	lb_strbuf_adds(sb, "set style fill solid 0.9 border lc rgb '#333333'\n"
			   "set boxwidth 0.85 absolute\n"
			   "set grid ytics lc rgb '#dddddd'\n"
			   "set border 3\nset tics nomirror\n"
			   "set key outside right top vertical samplen 1.5\n");
	lb_strbuf_addf(sb, "set ylabel %s\n",
		       use_mfu ? "'MFU [%]'" : "'TFLOP/s per GPU (model FLOPs)'");
	lb_strbuf_addf(sb, "set yrange [0:%g]\n", ymax > 0 ? ymax * 1.5 : (use_mfu ? 100 : 1));
	lb_strbuf_addf(sb, "set xrange [0:%g]\n", x > 0 ? x : 1);
	lb_strbuf_adds(sb, "set xtics font 'sans,10' (");
	for (size_t i = 0, first = 1; i < f->n; i++) {
		if (i && f->bars[i].group == f->bars[i - 1].group)
			continue;
		size_t j = i;
		while (j + 1 < f->n && f->bars[j + 1].group == f->bars[i].group)
			j++;
		if (!first)
			lb_strbuf_adds(sb, ", ");
		first = 0;
		int lines = gp_wrapped(sb, f->bars[i].group, 16);
		if (lines > maxlines)
			maxlines = lines;
		lb_strbuf_addf(sb, " %g", (xs[i] + xs[j]) / 2);
	}
	lb_strbuf_adds(sb, ")\n");
	lb_strbuf_addf(sb, "set bmargin %d\n", maxlines + 2);
	lb_strbuf_adds(sb, "set title ");
	gp_quote(sb, report_kind_title(f->kind));
	lb_strbuf_adds(sb, "\nplot $bars using 1:2:3 with boxes lc variable notitle");
	if (nvalue)
		lb_strbuf_adds(sb, ", \\\n  $values using 1:2:3 with labels rotate by 90 left "
				   "offset 0,0.4 font 'sans,9' notitle");
	if (nfail)
		lb_strbuf_adds(sb, ", \\\n  $failures using 1:2:3 with labels rotate by 90 left "
				   "offset 0,0.4 font 'sans,9' tc rgb '#b00000' notitle");
	for (size_t k = 0; k < nseries; k++) {
		lb_strbuf_addf(sb, ", \\\n  NaN with boxes lt %zu title ", k % NPALETTE + 1);
		gp_quote(sb, series[k]);
	}
	lb_strbuf_adds(sb, "\n");
out_free:
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
