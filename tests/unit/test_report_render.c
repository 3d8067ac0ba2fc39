/*
 * Unit tests of the report's renderers (report/render.h) and plots (report/plot.h):
 * escaping in every format, the markdown and HTML tables of a small figure, the gnuplot
 * script's sanitising of hostile labels, and running gnuplot (missing, failing, working).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "report/plot.h"
#include "report/render.h"
#include "report/report.h"

static void escaped(void (*fn)(struct lb_strbuf *, const char *), const char *in, const char *want)
{
	struct lb_strbuf sb = LB_STRBUF_INIT;
	fn(&sb, in);
	assert_string_equal(lb_strbuf_str(&sb), want);
	lb_strbuf_release(&sb);
}

static void test_escapes(void **state)
{
	(void)state;
	escaped(render_html_escape, "<a href='x'>&\"", "&lt;a href=&#39;x&#39;&gt;&amp;&quot;");
	escaped(render_md_escape, "a|b\nc", "a\\|b c");
	escaped(render_csv_field, "plain", "plain");
	escaped(render_csv_field, "2,4", "\"2,4\"");
	escaped(render_csv_field, "say \"hi\"", "\"say \"\"hi\"\"\"");
	escaped(render_csv_field, "two\nlines", "\"two\nlines\"");
}

/* A figure of one sweep with a measured bar, an OOM bar and a hostile label. */
static void make_figure(struct report_runs *rs, struct report_figure *f)
{
	struct report_run r;

	report_runs_init(rs);
	memset(&r, 0, sizeof(r));
	r.run_id = 1;
	r.sweep = "sweep<1>";
	r.label = "flash_attention2 + RMS kernel";
	r.model = "llama-13b";
	r.checkpointing = "none";
	r.attention = "flash";
	r.norm = "fused";
	r.paper = 1;
	r.gpus = 64;
	r.micro_batch = r.tp = r.pp = 1;
	r.dp = 64;
	r.status = REPORT_RUN_OK;
	r.has_mfu = r.has_tflops = 1;
	r.mfu = 0.7057311797718144;
	r.tflops = 219.84;
	assert_int_equal(report_runs_add(rs, &r), 0);
	r.run_id = 2;
	r.label = "evil\" '<script>alert(1)</script>\nEOD\n|x";
	r.status = REPORT_RUN_FAILED;
	r.failure_class = "oom";
	assert_int_equal(report_runs_add(rs, &r), 0);
	assert_int_equal(report_figure_build(rs, REPORT_KERNELS, NULL, f), 0);
	assert_int_equal(f->n, 2);
}

static void test_md(void **state)
{
	(void)state;
	struct report_runs rs;
	struct report_figure f;
	struct lb_strbuf sb = LB_STRBUF_INIT;

	make_figure(&rs, &f);
	render_md(&sb, &f);
	const char *md = lb_strbuf_str(&sb);
	assert_non_null(strstr(md, "## Figure 1: attention and RMSNorm kernels (kernels)\n"));
	assert_non_null(strstr(md, "### sweep<1>\n"));
	assert_non_null(strstr(md, "| flash_attention2 + RMS kernel | 70.57 | 219.84 | 1 | 1 | 1 | "
				   "64 | none |\n"));
	assert_non_null(strstr(
	    md, "| evil\" '<script>alert(1)</script> EOD \\|x | OOM | - | - | - | - | - | - |\n"));
	lb_strbuf_release(&sb);
	report_figure_release(&f);
	report_runs_release(&rs);
}

static void test_html(void **state)
{
	(void)state;
	struct report_runs rs;
	struct report_figure f;
	struct lb_strbuf sb = LB_STRBUF_INIT;

	make_figure(&rs, &f);
	render_html_begin(&sb, "t");
	render_html_figure(&sb, &f, "<?xml version=\"1.0\"?>\n<!DOCTYPE svg>\n<svg>x</svg>", NULL);
	render_html_end(&sb);
	const char *h = lb_strbuf_str(&sb);
	assert_null(strstr(h, "<script>"));
	assert_null(strstr(h, "<?xml"));
	assert_non_null(strstr(h, "<svg>x</svg>"));
	assert_non_null(strstr(h, "&lt;script&gt;"));
	assert_non_null(strstr(h, "<h3>sweep&lt;1&gt;</h3>"));
	assert_non_null(strstr(h, ">70.57<"));
	assert_non_null(strstr(h, "<td class=\"fail\">OOM</td>"));
	assert_non_null(strstr(h, "</html>\n"));
	lb_strbuf_release(&sb);

	/* no plot: the note instead */
	render_html_figure(&sb, &f, NULL, "No plot: gnuplot not found.");
	assert_non_null(strstr(lb_strbuf_str(&sb), "No plot: gnuplot not found."));
	assert_null(strstr(lb_strbuf_str(&sb), "<svg"));
	lb_strbuf_release(&sb);
	report_figure_release(&f);
	report_runs_release(&rs);
}

static void test_plot_script(void **state)
{
	(void)state;
	struct report_runs rs;
	struct report_figure f;
	struct lb_strbuf sb = LB_STRBUF_INIT;

	make_figure(&rs, &f);
	plot_script(&sb, &f);
	const char *s = lb_strbuf_str(&sb);
	assert_false(sb.failed);
	assert_non_null(strstr(s, "set terminal svg"));
	assert_non_null(strstr(s, "noenhanced"));
	assert_non_null(strstr(s, "\"70.57 (1,1,1)\""));
	assert_non_null(strstr(s, "\"OOM\""));
	assert_non_null(strstr(s, "set ylabel 'MFU [%]'"));
	/* the hostile label: single quotes doubled, no newline, so EOD cannot end a block */
	assert_non_null(strstr(s, "title 'evil\" ''<script>alert(1)</script>EODx'") ||
			strstr(s, "title 'evil\" ''<script>alert(1)</script>EOD|x'"));
	const char *block = strstr(s, "$bars << EOD\n");
	assert_non_null(block);
	const char *end = strstr(block, "\nEOD\n");
	assert_non_null(end);
	/* exactly two data lines in the block */
	int lines = 0;
	for (const char *p = block + strlen("$bars << EOD\n"); p <= end; p++)
		lines += *p == '\n';
	assert_int_equal(lines, 2);
	lb_strbuf_release(&sb);
	report_figure_release(&f);
	report_runs_release(&rs);
}

static void test_plot_run(void **state)
{
	(void)state;
	struct report_runs rs;
	struct report_figure f;
	struct lb_strbuf sb = LB_STRBUF_INIT;
	char *svg = NULL, err[256];

	setenv("LB_GNUPLOT", "/nonexistent/gnuplot", 1);
	assert_int_equal(plot_run("plot x\n", &svg, err, sizeof(err)), PLOT_ERR_MISSING);
	assert_null(svg);
	assert_non_null(strstr(err, "gnuplot not found"));
	unsetenv("LB_GNUPLOT");
	if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
		skip();
		return;
	}
	/* a broken script: gnuplot's failure is reported */
	assert_int_equal(
	    plot_run("set terminal svg\nthis is not gnuplot\n", &svg, err, sizeof(err)),
	    PLOT_ERR_FAILED);
	assert_null(svg);
	/* the real thing, with a script larger than a pipe buffer */
	make_figure(&rs, &f);
	plot_script(&sb, &f);
	for (int i = 0; i < 4000; i++)
		lb_strbuf_adds(&sb, "# padding line so the script exceeds a pipe buffer.....\n");
	lb_strbuf_adds(&sb, "set output\n");
	assert_int_equal(plot_run(lb_strbuf_str(&sb), &svg, err, sizeof(err)), 0);
	assert_non_null(svg);
	assert_non_null(strstr(svg, "<svg"));
	assert_non_null(strstr(svg, "</svg>"));
	assert_non_null(strstr(svg, "70.57 (1,1,1)"));
	assert_null(strstr(svg, "<script>"));
	free(svg);
	lb_strbuf_release(&sb);
	report_figure_release(&f);
	report_runs_release(&rs);

	/* one bar alone, measured or failed (gnuplot 5.4 crashed on a filtered-out single
	 * label point; the script must not trigger it) */
	for (int failed = 0; failed < 2; failed++) {
		struct report_run r;
		report_runs_init(&rs);
		memset(&r, 0, sizeof(r));
		r.run_id = 1;
		r.sweep = r.label = r.model = "x";
		r.checkpointing = "none";
		r.attention = "flash";
		r.norm = "fused";
		r.status = failed ? REPORT_RUN_FAILED : REPORT_RUN_OK;
		r.failure_class = failed ? "oom" : NULL;
		r.has_tflops = !failed;
		r.tflops = 0.002;
		assert_int_equal(report_runs_add(&rs, &r), 0);
		assert_int_equal(report_figure_build(&rs, REPORT_KERNELS, NULL, &f), 0);
		assert_int_equal(f.n, 1);
		plot_script(&sb, &f);
		assert_int_equal(plot_run(lb_strbuf_str(&sb), &svg, err, sizeof(err)), 0);
		assert_non_null(strstr(svg, failed ? "OOM" : "0.002 (0,0,0)"));
		free(svg);
		lb_strbuf_release(&sb);
		report_figure_release(&f);
		report_runs_release(&rs);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_escapes),  cmocka_unit_test(test_md),
	    cmocka_unit_test(test_html),     cmocka_unit_test(test_plot_script),
	    cmocka_unit_test(test_plot_run),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
