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
#include <math.h>

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
	r.seq_len = 2048;
	r.step_time = 26.5;
	r.step_time_sd = -1; /* imported: no steps */
	r.status = REPORT_RUN_OK;
	r.has_mfu = r.has_tflops = 1;
	r.mfu = 0.7057311797718144;
	r.has_mfu_no_embed = 1;
	r.mfu_no_embed = 0.661;
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
	assert_non_null(strstr(md, "### llama-13b, seq 2048, 64 GPUs (sweep sweep<1>)\n"));
	assert_non_null(
	    strstr(md, "| kernel | MFU % | MFU % no emb | MFU sd | TFLOP/s/GPU | step s | "
		       "step sd | mbs | TP | PP | DP | SP | ckpt | health |\n| --- | ---: | "
		       "---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | "
		       "--- | --- |\n"));
	assert_non_null(
	    strstr(md, "| flash_attention2 + RMS kernel | 70.57 | 66.10 | - | 219.84 | 26.5 "
		       "| - | 1 | 1 | 1 | 64 | off | none | - |\n"));
	assert_non_null(strstr(md,
			       "| evil\" '<script>alert(1)</script> EOD \\|x | OOM | - | - | - | - "
			       "| - | - | - | - | - | - | - | - |\n"));
	/* no diverged run was left out: no note */
	assert_null(strstr(md, "left out"));
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
	render_html_figure(
	    &sb, &f, "<?xml version=\"1.0\"?>\n<!DOCTYPE svg>\n<svg>x<title>Gnuplot</title></svg>",
	    NULL);
	render_html_end(&sb);
	const char *h = lb_strbuf_str(&sb);
	assert_null(strstr(h, "<script>"));
	assert_null(strstr(h, "<?xml"));
	/* the plot is named for its figure, not for gnuplot */
	assert_non_null(
	    strstr(h, "<svg>x<title>Figure 1: attention and RMSNorm kernels</title></svg>"));
	assert_non_null(strstr(h, "&lt;script&gt;"));
	assert_non_null(strstr(h, "<h3>llama-13b, seq 2048, 64 GPUs (sweep sweep&lt;1&gt;)</h3>"));
	/* plots keep their size and scroll: their text is never shrunk */
	assert_non_null(strstr(h, ".plot svg { display: block; max-width: none; }"));
	assert_non_null(strstr(h, ".plot { max-width: 100%; overflow-x: auto; }"));
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
	const char *block = strstr(s, "$bars0 << EOD\n");
	assert_non_null(block);
	const char *end = strstr(block, "\nEOD\n");
	assert_non_null(end);
	/* exactly two data lines in the block */
	int lines = 0;
	for (const char *p = block + strlen("$bars0 << EOD\n"); p <= end; p++)
		lines += *p == '\n';
	assert_int_equal(lines, 2);
	/* a title and both axes' titles; the group named by model, sequence length, GPUs */
	assert_non_null(strstr(s, "set title 'Figure 1: attention and RMSNorm kernels'"));
	assert_non_null(strstr(s, "set xlabel 'kernel per group: model, sequence length, GPUs'"));
	assert_non_null(strstr(s, "\"llama-13b\\nseq 2048\\n64 GPUs\""));
	assert_null(strstr(s, "sweep<1>"));
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

/* CIE L*a*b* of an sRGB colour "#rrggbb" (D65). */
static void lab(const char *hex, double out[3])
{
	double c[3], xyz[3];

	for (int i = 0; i < 3; i++) {
		char two[3] = {hex[1 + 2 * i], hex[2 + 2 * i], 0};
		double v = (double)strtol(two, NULL, 16) / 255.0;
		c[i] = v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4);
	}
	xyz[0] = (0.4124 * c[0] + 0.3576 * c[1] + 0.1805 * c[2]) / 0.95047;
	xyz[1] = 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
	xyz[2] = (0.0193 * c[0] + 0.1192 * c[1] + 0.9505 * c[2]) / 1.08883;
	for (int i = 0; i < 3; i++)
		xyz[i] = xyz[i] > 0.008856 ? cbrt(xyz[i]) : 7.787 * xyz[i] + 16.0 / 116.0;
	out[0] = 116 * xyz[1] - 16;
	out[1] = 500 * (xyz[0] - xyz[1]);
	out[2] = 200 * (xyz[1] - xyz[2]);
}

/* Twenty series, twenty colours no reader confuses (CIE76 delta E >= 25 between any two,
 * and >= 20 from the white page); past twenty, the colours again with hatches, so no two
 * series of a figure look alike. */
static void test_palette(void **state)
{
	(void)state;
	const char *const *pal;
	size_t n = plot_palette(&pal);
	double a[3], b[3], white[3];

	assert_true(n >= 20);
	lab("#ffffff", white);
	for (size_t i = 0; i < n; i++) {
		lab(pal[i], a);
		assert_true(sqrt(pow(a[0] - white[0], 2) + pow(a[1] - white[1], 2) +
				 pow(a[2] - white[2], 2)) >= 20);
		for (size_t j = i + 1; j < n; j++) {
			lab(pal[j], b);
			double de =
			    sqrt(pow(a[0] - b[0], 2) + pow(a[1] - b[1], 2) + pow(a[2] - b[2], 2));
			if (de < 25)
				fail_msg("colours %zu (%s) and %zu (%s) differ by delta E %.1f", i,
					 pal[i], j, pal[j], de);
		}
	}
	for (size_t i = 0; i < 3 * n; i++)
		for (size_t j = i + 1; j < 3 * n; j++) {
			const char *ci, *cj;
			int pi, pj;
			plot_series_style(i, &ci, &pi);
			plot_series_style(j, &cj, &pj);
			assert_false(!strcmp(ci, cj) && pi == pj);
		}

	/* a figure of 24 series (TP x PP): 20 solid, 4 hatched, each in the key as drawn */
	struct report_runs rs;
	struct report_figure f;
	struct lb_strbuf sb = LB_STRBUF_INIT;
	struct report_run r;
	static const int tps[] = {1, 2, 4, 8}, pps[] = {1, 2, 4, 8, 16, 32};
	report_runs_init(&rs);
	memset(&r, 0, sizeof(r));
	r.sweep = "s";
	r.label = "flash+fused";
	r.model = "m";
	r.checkpointing = "none";
	r.attention = "flash";
	r.norm = "fused";
	r.micro_batch = 1;
	r.gpus = 256;
	r.status = REPORT_RUN_OK;
	r.has_mfu = 1;
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 6; j++) {
			r.run_id = 1 + i * 6 + j;
			r.tp = tps[i];
			r.pp = pps[j];
			r.mfu = 0.3 + 0.01 * (i * 6 + j);
			assert_int_equal(report_runs_add(&rs, &r), 0);
		}
	assert_int_equal(report_figure_build(&rs, REPORT_TP_PP, NULL, &f), 0);
	assert_int_equal(f.n, 24);
	plot_script(&sb, &f);
	const char *s = lb_strbuf_str(&sb);
	assert_non_null(strstr(s, "$bars1 << EOD\n"));
	assert_non_null(strstr(s, "$bars1 using 1:2:3 with boxes lc variable fs pattern"));
	assert_non_null(
	    strstr(s, "NaN with boxes lt 1 fs solid 0.9 border lc rgb '#333333' title '1,1'"));
	/* series 21 (the 21st in order, TP 8 PP 4) takes colour 1 hatched */
	assert_non_null(
	    strstr(s, "NaN with boxes lt 1 fs pattern 4 border lc rgb '#333333' title '8,4'"));
	if (system("command -v gnuplot >/dev/null 2>&1") == 0) { /* and gnuplot draws it */
		char *svg = NULL, err[256];
		assert_int_equal(plot_run(s, &svg, err, sizeof(err)), 0);
		assert_non_null(strstr(svg, "8,4"));
		free(svg);
	}
	lb_strbuf_release(&sb);
	report_figure_release(&f);
	report_runs_release(&rs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_escapes),  cmocka_unit_test(test_md),
	    cmocka_unit_test(test_html),     cmocka_unit_test(test_plot_script),
	    cmocka_unit_test(test_plot_run), cmocka_unit_test(test_palette),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
