/*
 * Unit tests of the report's selection logic (report/report.h) on small hand-made sets of
 * runs: ranking and ties, OOM / failed / running bars, unknown peaks (CPU runs), the kernel
 * classes of imported and own runs, each figure's candidate rules, the sweep filter, and
 * the CSV cells of the results.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "report/plot.h"
#include "report/render.h"
#include "report/report.h"

static long next_id = 1;

/* A measured run of our own: flash + fused, mbs 1, TP 1, PP 1, no ckpt, MFU mfu (< 0:
 * unknown peak) and TFLOP/s tflops. */
static struct report_run mk(const char *sweep, double mfu, double tflops)
{
	struct report_run r;

	memset(&r, 0, sizeof(r));
	r.run_id = next_id++;
	r.sweep = sweep;
	r.label = "flash+fused";
	r.model = "tiny";
	r.checkpointing = "none";
	r.attention = "flash";
	r.norm = "fused";
	r.seq_len = 128;
	r.gpus = 8;
	r.micro_batch = r.tp = r.pp = 1;
	r.dp = 8;
	r.step_time = r.step_time_sd = -1; /* as loaded without steps */
	r.device_peak_mem = r.planned_mem = r.model_mem = -1;
	r.status = REPORT_RUN_OK;
	if (mfu >= 0) {
		r.has_mfu = 1;
		r.mfu = mfu;
	}
	if (tflops >= 0) {
		r.has_tflops = 1;
		r.tflops = tflops;
	}
	return r;
}

static struct report_run failed(const char *sweep, const char *cls)
{
	struct report_run r = mk(sweep, -1, -1);
	r.status = REPORT_RUN_FAILED;
	r.failure_class = cls;
	return r;
}

static void add(struct report_runs *rs, struct report_run r)
{
	assert_int_equal(report_runs_add(rs, &r), 0);
}

/* The first n fields of each line of csv (quoted fields kept whole), into out. */
static void csv_first_fields(const char *csv, int n, struct lb_strbuf *out)
{
	while (*csv) {
		int field = 0, quoted = 0;
		for (; *csv && *csv != '\n'; csv++) {
			if (*csv == '"')
				quoted = !quoted;
			if (*csv == ',' && !quoted && ++field == n)
				break;
			lb_strbuf_add(out, csv, 1);
		}
		csv += strcspn(csv, "\n");
		if (*csv)
			csv++;
		lb_strbuf_adds(out, "\n");
	}
}

/* The figure's CSV (without its header) into buf, each row cut to its first fields fields
 * (0: all). */
static void csv_cut(struct report_runs *rs, enum report_kind k, const char *sweep, char *buf,
		    size_t len, int fields)
{
	struct report_figure f;
	struct lb_strbuf sb = LB_STRBUF_INIT, cut = LB_STRBUF_INIT;

	assert_int_equal(report_figure_build(rs, k, sweep, &f), 0);
	render_csv(&sb, &f);
	const char *body = strchr(lb_strbuf_str(&sb), '\n') + 1;
	if (fields)
		csv_first_fields(body, fields, &cut);
	snprintf(buf, len, "%s", fields ? lb_strbuf_str(&cut) : body);
	lb_strbuf_release(&cut);
	lb_strbuf_release(&sb);
	report_figure_release(&f);
}

/* The seven fields the selection decides: group, series, mfu, micro_batch, tp, pp,
 * checkpointing. */
static void csv_of(struct report_runs *rs, enum report_kind k, const char *sweep, char *buf,
		   size_t len)
{
	csv_cut(rs, k, sweep, buf, len, 7);
}

static void csv_all(struct report_runs *rs, enum report_kind k, const char *sweep, char *buf,
		    size_t len)
{
	csv_cut(rs, k, sweep, buf, len, 0);
}

static void test_kind_names(void **state)
{
	(void)state;
	enum report_kind k;
	for (int i = 0; i < REPORT_KIND_COUNT; i++) {
		assert_int_equal(report_kind_parse(report_kind_name((enum report_kind)i), &k), 0);
		assert_int_equal(k, i);
	}
	assert_int_equal(report_kind_parse("all", &k), -1);
	assert_true(report_kind_plotted(REPORT_KERNELS));
	assert_true(report_kind_plotted(REPORT_PHASES));
	assert_false(report_kind_plotted(REPORT_MEMORY));
	assert_int_equal(report_kind_parse("tp_pp", &k), -1);
}

static void test_intern(void **state)
{
	(void)state;
	struct report_runs rs;
	char name[32];
	const char *first = NULL;

	report_runs_init(&rs);
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "s%d", i % 37);
		const char *p = report_runs_intern(&rs, name);
		assert_non_null(p);
		assert_string_equal(p, name);
		if (i == 0)
			first = p;
	}
	assert_ptr_equal(report_runs_intern(&rs, "s0"), first);
	assert_int_equal(rs.pool_n, 37);
	report_runs_release(&rs);
}

static void test_ranking_and_ties(void **state)
{
	(void)state;
	struct report_runs rs;
	struct report_figure f;

	report_runs_init(&rs);
	struct report_run a = mk("s", 0.5, 100), b = mk("s", 0.5, 100), c = mk("s", 0.5, 120);
	/* equal MFU and TFLOP/s: the earlier run wins */
	assert_true(report_run_better(&a, &b));
	assert_false(report_run_better(&b, &a));
	/* equal MFU: higher TFLOP/s wins */
	assert_true(report_run_better(&c, &a));
	/* known MFU beats unknown, whatever the TFLOP/s */
	struct report_run u = mk("s", -1, 999);
	assert_true(report_run_better(&a, &u));
	assert_false(report_run_better(&u, &a));

	b.tp = 2;
	add(&rs, b); /* added first, but a has the lower run_id */
	add(&rs, a);
	assert_int_equal(report_figure_build(&rs, REPORT_KERNELS, NULL, &f), 0);
	assert_int_equal(f.n, 1);
	assert_int_equal(f.bars[0].state, REPORT_BAR_VALUE);
	assert_int_equal(f.bars[0].run->run_id, a.run_id);
	assert_int_equal(f.bars[0].tp, 1);
	report_figure_release(&f);
	report_runs_release(&rs);
}

static void test_failed_bars(void **state)
{
	(void)state;
	struct report_runs rs;
	char csv[1024];

	report_runs_init(&rs);
	/* sweep a: one OOM among other failures -> OOM */
	add(&rs, failed("a", "nccl_error"));
	add(&rs, failed("a", "oom"));
	add(&rs, failed("a", "nccl_error"));
	/* sweep b: no OOM: the most frequent class */
	add(&rs, failed("b", "nccl_error"));
	add(&rs, failed("b", "timeout"));
	add(&rs, failed("b", "timeout"));
	/* sweep c: tie between classes: alphabetical; NULL class counts as error */
	add(&rs, failed("c", "timeout"));
	add(&rs, failed("c", NULL));
	/* sweep d: only running */
	struct report_run r = mk("d", -1, -1);
	r.status = REPORT_RUN_RUNNING;
	add(&rs, r);
	/* sweep e: ok but nothing measured (no steps) */
	add(&rs, mk("e", -1, -1));
	/* sweep f: one measured run beats any number of failures */
	add(&rs, failed("f", "oom"));
	add(&rs, mk("f", 0.1234, 10));
	csv_of(&rs, REPORT_KERNELS, NULL, csv, sizeof(csv));
	assert_string_equal(csv, "a,flash+fused,OOM,,,,\n"
				 "b,flash+fused,FAILED(timeout),,,,\n"
				 "c,flash+fused,FAILED(error),,,,\n"
				 "d,flash+fused,RUNNING,,,,\n"
				 "e,flash+fused,FAILED(unmeasured),,,,\n"
				 "f,flash+fused,12.34,1,1,1,none\n");
	report_runs_release(&rs);
}

static void test_unknown_peak(void **state)
{
	(void)state;
	struct report_runs rs;
	struct report_figure f;
	struct lb_strbuf sb = LB_STRBUF_INIT;
	char csv[512];

	report_runs_init(&rs);
	struct report_run slow = mk("cpu", -1, 0.002), fast = mk("cpu", -1, 0.005);
	fast.tp = 2;
	add(&rs, slow);
	add(&rs, fast);
	csv_of(&rs, REPORT_KERNELS, NULL, csv, sizeof(csv));
	/* ranked by TFLOP/s; MFU cell empty in CSV */
	assert_string_equal(csv, "cpu,flash+fused,,1,2,1,none\n");
	assert_int_equal(report_figure_build(&rs, REPORT_KERNELS, NULL, &f), 0);
	assert_false(report_figure_all_mfu(&f));
	render_md(&sb, &f);
	assert_non_null(strstr(lb_strbuf_str(&sb),
			       "| flash+fused | n/a | n/a | - | 0.005 | - | - | 1 | 2 "
			       "| 1 | 8 | off | none | - |"));
	report_figure_release(&f);
	lb_strbuf_release(&sb);
	report_runs_release(&rs);
}

/* Imported runs are classified by the paper's kernel string, ours by attention + norm. */
static void test_kernel_classes(void **state)
{
	(void)state;
	struct report_run p = mk("s", 0.5, 1);
	p.paper = 1;
	p.label = "flash_attention2 + RMS kernel";
	assert_true(report_run_is_flash_rms(&p));
	assert_false(report_run_is_flash2(&p));
	p.label = "flash_attention2";
	p.norm = "unfused";
	assert_true(report_run_is_flash2(&p));
	p.label = "flash_attentionv1.0.8"; /* same kernels as ours, not FlashAttention-2 */
	assert_false(report_run_is_flash2(&p));
	assert_false(report_run_is_flash_rms(&p));

	struct report_run o = mk("s", 0.5, 1);
	o.label = "my label";
	assert_true(report_run_is_flash_rms(&o));
	o.norm = "unfused";
	assert_true(report_run_is_flash2(&o));
	o.attention = "naive";
	assert_false(report_run_is_flash2(&o));
	/* cuDNN's attention is its own kernel, not FlashAttention-2 */
	o.attention = "cudnn";
	assert_false(report_run_is_flash2(&o));
	o.norm = "fused";
	assert_false(report_run_is_flash_rms(&o));
}

static void test_kernels_order(void **state)
{
	(void)state;
	struct report_runs rs;
	char csv[1024];
	const char *paper[] = {"flash_attention2 + RMS kernel", "torch", "zzz", "flash_attention2",
			       "fused"};

	report_runs_init(&rs);
	for (size_t i = 0; i < 5; i++) {
		struct report_run r = mk("p", 0.1 * (double)(i + 1), 1);
		r.paper = 1;
		r.label = paper[i];
		add(&rs, r);
	}
	struct report_run r = mk("q", 0.3, 1);
	r.label = "naive+unfused";
	r.attention = "naive";
	r.norm = "unfused";
	add(&rs, r);
	add(&rs, mk("q", 0.5, 1));
	r = mk("q", 0.6, 1); /* cuDNN's attention: its own bars, after flash */
	r.label = "cudnn+fused";
	r.attention = "cudnn";
	add(&rs, r);
	r = mk("q", 0.35, 1);
	r.label = "cudnn+unfused";
	r.attention = "cudnn";
	r.norm = "unfused";
	add(&rs, r);
	r = mk("q", 0.4, 1);
	r.label = "a, \"quoted\" label";
	add(&rs, r);
	csv_of(&rs, REPORT_KERNELS, NULL, csv, sizeof(csv));
	assert_string_equal(csv, "p,torch,20.00,1,1,1,none\n"
				 "p,fused,50.00,1,1,1,none\n"
				 "p,flash_attention2,40.00,1,1,1,none\n"
				 "p,flash_attention2 + RMS kernel,10.00,1,1,1,none\n"
				 "p,zzz,30.00,1,1,1,none\n"
				 "q,naive+unfused,30.00,1,1,1,none\n"
				 "q,flash+fused,50.00,1,1,1,none\n"
				 "q,cudnn+unfused,35.00,1,1,1,none\n"
				 "q,cudnn+fused,60.00,1,1,1,none\n"
				 "q,\"a, \"\"quoted\"\" label\",40.00,1,1,1,none\n");
	report_runs_release(&rs);
}

static void test_checkpointing(void **state)
{
	(void)state;
	struct report_runs rs;
	char csv[512];

	report_runs_init(&rs);
	add(&rs, mk("s", 0.70, 1)); /* flash + fused, no ckpt: not a 'disabled' candidate */
	struct report_run r = mk("s", 0.55, 1);
	r.norm = "unfused";
	r.micro_batch = 2;
	add(&rs, r);
	r = mk("s", 0.50, 1); /* flash + fused with ckpt: an 'enabled' candidate */
	r.checkpointing = "full";
	r.pp = 2;
	add(&rs, r);
	r = mk("s", 0.45, 1);
	r.checkpointing = "selective";
	add(&rs, r);
	csv_of(&rs, REPORT_CHECKPOINTING, NULL, csv, sizeof(csv));
	assert_string_equal(csv, "s,disabled,55.00,2,1,1,none\n"
				 "s,enabled,50.00,1,1,2,full\n");
	/* cuDNN's attention with the RMS kernel is not FlashAttention-2 + RMS kernel: a
	 * 'disabled' candidate like any other kernel */
	r = mk("s", 0.60, 1);
	r.label = "cudnn+fused";
	r.attention = "cudnn";
	r.tp = 2;
	add(&rs, r);
	csv_of(&rs, REPORT_CHECKPOINTING, NULL, csv, sizeof(csv));
	assert_string_equal(csv, "s,disabled,60.00,1,2,1,none\n"
				 "s,enabled,50.00,1,1,2,full\n");
	report_runs_release(&rs);
}

static void test_microbatch(void **state)
{
	(void)state;
	struct report_runs rs;
	char csv[512];
	struct report_figure f;
	char ann[64];

	report_runs_init(&rs);
	struct report_run r = mk("s", 0.40, 1);
	r.norm = "unfused";
	add(&rs, r);
	r = mk("s", 0.45, 1);
	r.norm = "unfused";
	r.checkpointing = "full";
	r.tp = 2;
	add(&rs, r);
	r = failed("s", "oom");
	r.norm = "unfused";
	r.micro_batch = 8;
	add(&rs, r);
	r = mk("s", 0.90, 1); /* flash + fused: not a candidate */
	r.micro_batch = 4;
	add(&rs, r);
	r.norm = "unfused"; /* nor cuDNN's attention */
	r.attention = "cudnn";
	add(&rs, r);
	r = mk("s", 0.38, 1);
	r.norm = "unfused";
	r.micro_batch = 2;
	add(&rs, r);
	csv_of(&rs, REPORT_MICROBATCH, NULL, csv, sizeof(csv));
	assert_string_equal(csv, "s,1,45.00,1,2,1,full\n"
				 "s,2,38.00,2,1,1,none\n"
				 "s,8,OOM,8,,,\n");
	assert_int_equal(report_figure_build(&rs, REPORT_MICROBATCH, NULL, &f), 0);
	render_bar_annotation(&f, &f.bars[0], ann, sizeof(ann));
	assert_string_equal(ann, "(full,2,1)");
	render_bar_annotation(&f, &f.bars[2], ann, sizeof(ann));
	assert_string_equal(ann, "");
	report_figure_release(&f);
	report_runs_release(&rs);
}

static void test_tp_pp(void **state)
{
	(void)state;
	struct report_runs rs;
	char csv[512];

	report_runs_init(&rs);
	struct report_run r = mk("s", 0.40, 1);
	r.tp = 2;
	r.pp = 4;
	add(&rs, r);
	r.run_id = next_id++;
	r.mfu = 0.42; /* same layout measured twice: the better attempt */
	add(&rs, r);
	r = failed("s", "oom");
	r.tp = 1;
	r.pp = 2;
	add(&rs, r);
	r = mk("s", 0.99, 1); /* micro-batch 2: not a candidate */
	r.micro_batch = 2;
	add(&rs, r);
	r = mk("s", 0.99, 1); /* checkpointed: not a candidate */
	r.checkpointing = "full";
	add(&rs, r);
	r = mk("s", 0.99, 1); /* cuDNN's attention: not FlashAttention-2 */
	r.attention = "cudnn";
	r.tp = 2;
	r.pp = 4;
	add(&rs, r);
	r = mk("s", 0.30, 1);
	r.tp = 10; /* numeric order: after 2 */
	add(&rs, r);
	csv_of(&rs, REPORT_TP_PP, NULL, csv, sizeof(csv));
	assert_string_equal(csv, "s,\"1,2\",OOM,1,1,2,none\n"
				 "s,\"2,4\",42.00,1,2,4,none\n"
				 "s,\"10,1\",30.00,1,10,1,none\n");
	report_runs_release(&rs);
}

static void test_seqpar(void **state)
{
	(void)state;
	struct report_runs rs;
	char csv[512];

	report_runs_init(&rs);
	add(&rs, mk("nosp", 0.5, 1)); /* a sweep that never tried SP: no group */
	struct report_run r = mk("sp", 0.50, 1);
	add(&rs, r);
	r = mk("sp", 0.52, 1);
	r.sequence_parallel = 1;
	r.tp = 2;
	add(&rs, r);
	r = mk("sp", 0.60, 1);
	r.sequence_parallel = 1;
	r.status = REPORT_RUN_FAILED;
	r.failure_class = "oom";
	add(&rs, r);
	csv_of(&rs, REPORT_SEQPAR, NULL, csv, sizeof(csv));
	assert_string_equal(csv, "sp,off,50.00,1,1,1,none\n"
				 "sp,on,52.00,1,2,1,none\n");
	report_runs_release(&rs);
}

static void test_rms(void **state)
{
	(void)state;
	struct report_runs rs;
	char csv[512];

	report_runs_init(&rs);
	struct report_run r = mk("s", 0.70, 1); /* rms best at (1,1,1) */
	add(&rs, r);
	r = mk("s", 0.55, 1); /* no-RMS best at (1,1,2) */
	r.norm = "unfused";
	r.pp = 2;
	add(&rs, r);
	r = mk("s", 0.49, 1); /* best no-RMS at (1,1,1), checkpointed */
	r.norm = "unfused";
	r.checkpointing = "full";
	add(&rs, r);
	r = mk("s", 0.48, 1);
	r.norm = "unfused";
	add(&rs, r);
	r = mk("s", 0.99, 1); /* other kernels: no part in it */
	r.attention = "naive";
	add(&rs, r);
	r.attention = "cudnn";
	add(&rs, r);
	r.norm = "unfused";
	add(&rs, r);
	/* a sweep whose RMS runs all failed: no at-layout bar */
	add(&rs, failed("t", "oom"));
	r = mk("t", 0.3, 1);
	r.norm = "unfused";
	add(&rs, r);
	csv_of(&rs, REPORT_RMS, NULL, csv, sizeof(csv));
	assert_string_equal(csv, "s,rms_best,70.00,1,1,1,none\n"
				 "s,no_rms_best,55.00,1,1,2,none\n"
				 "s,no_rms_at_rms_layout,49.00,1,1,1,full\n"
				 "t,rms_best,OOM,,,,\n"
				 "t,no_rms_best,30.00,1,1,1,none\n");
	report_runs_release(&rs);
}

static void test_sweep_filter_and_best(void **state)
{
	(void)state;
	struct report_runs rs;
	char csv[512];

	report_runs_init(&rs);
	add(&rs, mk("b", 0.2, 1));
	add(&rs, mk("a", 0.3, 1));
	csv_of(&rs, REPORT_KERNELS, "b", csv, sizeof(csv));
	assert_string_equal(csv, "b,flash+fused,20.00,1,1,1,none\n");
	csv_of(&rs, REPORT_KERNELS, "nope", csv, sizeof(csv));
	assert_string_equal(csv, "");
	/* best: one bar per row, grouped by model/seq_len/gpus */
	struct report_run r = mk("c", 0.4, 1);
	r.model = "llama-13b";
	r.seq_len = 2048;
	r.gpus = 64;
	r.label = "flash_attention2 + RMS kernel";
	add(&rs, r);
	csv_of(&rs, REPORT_BEST, NULL, csv, sizeof(csv));
	assert_string_equal(csv,
			    "llama-13b/2048/64,flash_attention2 + RMS kernel,40.00,1,1,1,none\n"
			    "tiny/128/8,flash+fused,30.00,1,1,1,none\n"
			    "tiny/128/8,flash+fused,20.00,1,1,1,none\n");
	report_runs_release(&rs);
}

/* report_runs_best: the best_layout view's rule (per model, seq_len, gpus; ok runs only;
 * MFU, then TFLOP/s, then run_id; unmeasured ok runs last). */
static void test_runs_best(void **state)
{
	(void)state;
	struct report_runs rs, best;
	char csv[512];

	report_runs_init(&rs);
	report_runs_init(&best);
	struct report_run r = failed("x", "oom");
	r.gpus = 16; /* only failed runs at 16 GPUs: no row */
	add(&rs, r);
	add(&rs, mk("x", -1, -1)); /* ok, unmeasured */
	r = mk("y", -1, 5);	   /* unknown MFU, known TFLOP/s (another sweep) */
	r.tp = 2;
	add(&rs, r);
	r = mk("x", 0.1, 1); /* known MFU beats any TFLOP/s */
	r.pp = 4;
	add(&rs, r);
	r = mk("z", -1, -1); /* a group with only an unmeasured ok run: kept, as the view does */
	r.seq_len = 256;
	add(&rs, r);
	r = mk("x", 0.9, 1);
	r.status = REPORT_RUN_RUNNING;
	add(&rs, r);
	assert_int_equal(report_runs_best(&rs, &best), 0);
	assert_int_equal(best.n, 2);
	csv_of(&best, REPORT_BEST, NULL, csv, sizeof(csv));
	assert_string_equal(csv, "tiny/128/8,flash+fused,10.00,1,1,4,none\n"
				 "tiny/256/8,flash+fused,FAILED(unmeasured),,,,\n");
	report_runs_release(&best);
	report_runs_release(&rs);
}

static void test_mfu_text_rounding(void **state)
{
	(void)state;
	struct report_run r = mk("s", 0.7057311797718144, 1);
	struct report_bar b;
	char buf[32];

	memset(&b, 0, sizeof(b));
	b.state = REPORT_BAR_VALUE;
	b.run = &r;
	report_bar_mfu_text(&b, "n/a", buf, sizeof(buf));
	assert_string_equal(buf, "70.57");
	r.has_mfu = 0;
	report_bar_mfu_text(&b, "n/a", buf, sizeof(buf));
	assert_string_equal(buf, "n/a");
}

/* A run with no phase times, step time or memory (as loaded from NULL columns). */
static struct report_run unphased(struct report_run r)
{
	r.step_time = -1;
	for (int k = 0; k < REPORT_PHASE_COUNT; k++)
		r.phase[k] = -1;
	r.peak_mem = -1;
	return r;
}

/* The phases figure: a row per ok run of ours in sweeps where some run has phase times;
 * imported and failed runs are left out; md shows the per-rank peaks as min-max MiB. */
static void test_phases(void **state)
{
	(void)state;
	struct report_runs rs;
	struct report_figure f;
	struct lb_strbuf sb = LB_STRBUF_INIT;
	char csv[1024];

	report_runs_init(&rs);
	struct report_run a = unphased(mk("a", -1, 0.01));
	a.run_id = 101;
	a.step_time = 0.5;
	a.step_time_sd = 0.0125;
	a.n_steps = 10;
	a.phase[REPORT_PHASE_FORWARD] = 0.125;
	a.phase[REPORT_PHASE_BACKWARD] = 0.25;
	a.phase[REPORT_PHASE_OPTIMIZER] = 0.0625;
	a.phase[REPORT_PHASE_COMM] = 0.03125;
	a.phase[REPORT_PHASE_BUBBLE] = 0;
	a.tp = 2;
	a.dp = 4;
	a.peak_mem = 2 * 1048576;
	a.health = REPORT_HEALTH_OK;
	report_run_set_rank_mem(&a, "[1048576,2097152]");
	assert_int_equal(a.rank_n, 2);
	add(&rs, a);
	struct report_run a2 = unphased(mk("a", -1, 0.02)); /* no phases: a row of '-' */
	a2.run_id = 102;
	a2.step_time = 0.25;
	add(&rs, a2);
	struct report_run a3 = unphased(failed("a", "oom"));
	add(&rs, a3);
	struct report_run pa = mk("a", 0.5, 100); /* imported: left out, phases or not */
	pa.paper = 1;
	add(&rs, pa);
	add(&rs, unphased(mk("b", -1, 0.01))); /* no run with phases: no group */
	struct report_run pc = mk("c", 0.5, 100);
	pc.paper = 1;
	add(&rs, pc);

	csv_all(&rs, REPORT_PHASES, NULL, csv, sizeof(csv));
	assert_string_equal(csv, "a,flash+fused,1,2,1,4,0,0.5,0.125,0.25,0.0625,0.03125,0,2.000,"
				 "1.000,2.000,2,none,tiny,128,8,101,0.0125,10,ok\n"
				 "a,flash+fused,1,1,1,8,0,0.25,,,,,,,,,,none,tiny,128,8,102,,,\n");
	csv_of(&rs, REPORT_PHASES, "b", csv, sizeof(csv));
	assert_string_equal(csv, "");

	assert_int_equal(report_figure_build(&rs, REPORT_PHASES, NULL, &f), 0);
	render_md(&sb, &f);
	assert_non_null(strstr(lb_strbuf_str(&sb), "### tiny, seq 128, 8 GPUs (sweep a)\n"));
	assert_non_null(strstr(lb_strbuf_str(&sb), "| 101 | flash+fused | 1 | 2 | 1 | 4 | off | "
						   "none | 0.5 | 0.013 | 0.125 | 0.25 | 0.0625 | "
						   "0.0312 | 0 | 2.0 | 1.0\xe2\x80\x93"
						   "2.0 MiB over 2 ranks | ok |\n"));
	assert_non_null(strstr(lb_strbuf_str(&sb), "| 102 | flash+fused | 1 | 1 | 1 | 8 | off | "
						   "none | 0.25 | - | - | - | - | - | - | - | - "
						   "| - |\n"));
	assert_null(strstr(lb_strbuf_str(&sb), "### b"));
	assert_null(strstr(lb_strbuf_str(&sb), "### c"));
	lb_strbuf_release(&sb);
	render_html_figure(&sb, &f, NULL, NULL);
	assert_non_null(strstr(lb_strbuf_str(&sb), "<th>rank peaks</th>"));
	assert_null(strstr(lb_strbuf_str(&sb), "class=\"plot\""));
	lb_strbuf_release(&sb);
	/* the plot: one stacked bar per run, unknown phases as 0 */
	plot_script(&sb, &f);
	assert_non_null(strstr(lb_strbuf_str(&sb), "set style histogram rowstacked"));
	/* each bar named uniquely (the run id), its group named under the cluster */
	assert_non_null(strstr(lb_strbuf_str(&sb),
			       "\"flash+fused, none (1,2,1,4) #101\" 0.125 0.25 "
			       "0.0625 0.03125 0\n"));
	assert_non_null(
	    strstr(lb_strbuf_str(&sb), "\"flash+fused, none (1,1,1,8) #102\" 0 0 0 0 0\n"));
	assert_non_null(strstr(lb_strbuf_str(&sb), "newhistogram \"tiny\\nseq 128\\n8 GPUs\""));
	assert_non_null(strstr(lb_strbuf_str(&sb), "$g0 using 6 lc rgb"));
	assert_non_null(strstr(lb_strbuf_str(&sb), "set xlabel 'run: "));
	assert_non_null(strstr(lb_strbuf_str(&sb), "set ylabel 'seconds per step"));
	lb_strbuf_release(&sb);
	report_figure_release(&f);

	/* unreadable rank arrays are unknown */
	report_run_set_rank_mem(&a, "[1,x]");
	assert_int_equal(a.rank_n, 0);
	report_run_set_rank_mem(&a, NULL);
	assert_int_equal(a.rank_n, 0);
	report_run_set_rank_mem(&a, "[7]");
	assert_int_equal(a.rank_n, 1);
	assert_int_equal(a.rank_mem_min, 7);
	report_runs_release(&rs);
}

/* The memory figure: a row per run of ours with a model figure that fit (its peak against
 * the model, the difference in percent of the peak) or ran out of memory (OOM, the model's
 * figure); other failures, imported runs and runs without a model figure are left out. */
static void test_memory(void **state)
{
	(void)state;
	struct report_runs rs;
	struct report_figure f;
	struct lb_strbuf sb = LB_STRBUF_INIT;
	char csv[1024];

	report_runs_init(&rs);
	struct report_run a = mk("m", 0.5, 100);
	a.run_id = 201;
	a.peak_mem = 100 * 1048576LL;
	a.model_mem = 99 * 1048576LL;
	a.planned_mem = (99 + 1024) * 1048576LL; /* a GPU run: the 1 GiB reserve planned */
	a.device_peak_mem = (99 + 1024) * 1048576LL + 300 * 1048576LL;
	add(&rs, a);
	struct report_run o = failed("m", "oom");
	o.run_id = 202;
	o.peak_mem = -1;
	o.model_mem = 300 * 1048576LL;
	add(&rs, o);
	struct report_run t = failed("m", "timeout"); /* not a memory outcome */
	t.model_mem = 1048576;
	add(&rs, t);
	struct report_run u = mk("m", 0.5, 100); /* no model figure (no flags) */
	u.peak_mem = 1048576;
	u.model_mem = -1;
	add(&rs, u);
	struct report_run p = mk("m", 0.5, 100); /* imported */
	p.paper = 1;
	p.peak_mem = p.model_mem = 1048576;
	add(&rs, p);

	csv_all(&rs, REPORT_MEMORY, NULL, csv, sizeof(csv));
	assert_string_equal(csv, "m,201,flash+fused,1,1,1,8,0,none,flash,fused,100.000,99.000,"
				 "1.0000,ok,tiny,128,8,1123.000,1423.000,300.000\n"
				 "m,202,flash+fused,1,1,1,8,0,none,flash,fused,,300.000,,oom,tiny,"
				 "128,8,,,\n");
	assert_int_equal(report_figure_build(&rs, REPORT_MEMORY, NULL, &f), 0);
	render_md(&sb, &f);
	assert_non_null(strstr(lb_strbuf_str(&sb),
			       "| 201 | flash+fused | 1 | 1 | 1 | 8 | off | "
			       "none | 100.0 | 99.0 | +1.00% | 1123.0 | 1423.0 | "
			       "+300.0 |\n"));
	assert_non_null(strstr(lb_strbuf_str(&sb), "| 202 | flash+fused | 1 | 1 | 1 | 8 | off | "
						   "none | OOM | 300.0 | - | - | - | - |\n"));
	lb_strbuf_release(&sb);
	report_figure_release(&f);
	report_runs_release(&rs);
}

/* Diverged runs: left out of every bar figure unless kept, counted once per figure however
 * many bars they were candidates of; a bar with nothing else measured is DIVERGED; flat
 * runs and runs of unknown health compete; a failure of class diverged stays a failure;
 * with keep_diverged they compete and are marked. */
static void test_diverged(void **state)
{
	(void)state;
	struct report_runs rs, best;
	struct report_figure f;
	struct report_build_opts keep = {1};
	struct lb_strbuf sb = LB_STRBUF_INIT;
	char csv[2048];
	size_t left = 99;

	report_runs_init(&rs);
	struct report_run fast = mk("d", 0.64, 100), slow = mk("d", 0.62, 97);
	fast.health = REPORT_HEALTH_DIVERGED;
	slow.health = REPORT_HEALTH_FLAT;
	add(&rs, fast);
	add(&rs, slow);
	struct report_run lone = mk("d", 0.70, 110); /* the only run of its label */
	lone.label = "cudnn+fused";
	lone.attention = "cudnn";
	lone.health = REPORT_HEALTH_DIVERGED;
	add(&rs, lone);
	struct report_run fd = failed("d", "diverged");
	fd.label = "naive+unfused";
	fd.health = REPORT_HEALTH_DIVERGED;
	add(&rs, fd);

	csv_all(&rs, REPORT_KERNELS, NULL, csv, sizeof(csv));
	assert_string_equal(csv, "d,naive+unfused,FAILED(diverged),,,,,,,tiny,128,8,,,,,,,\n"
				 "d,flash+fused,62.00,1,1,1,none,8,0,tiny,128,8,97,,,,,,flat\n"
				 "d,cudnn+fused,DIVERGED,,,,,,,tiny,128,8,,,,,,,\n");
	assert_int_equal(report_figure_build(&rs, REPORT_KERNELS, NULL, &f), 0);
	assert_int_equal(f.diverged_left_out, 2);
	render_md(&sb, &f);
	assert_non_null(strstr(lb_strbuf_str(&sb),
			       "\n2 diverged runs left out (their loss rose or was not finite; "
			       "--keep-diverged keeps them, marked).\n"));
	lb_strbuf_release(&sb);
	report_figure_release(&f);

	/* kept: the fast diverged run wins its bar and says so */
	assert_int_equal(report_figure_build_opts(&rs, REPORT_KERNELS, NULL, &keep, &f), 0);
	assert_int_equal(f.diverged_left_out, 0);
	render_md(&sb, &f);
	assert_non_null(strstr(lb_strbuf_str(&sb), "| flash+fused | 64.00 | - | - | 100.00 | - | - "
						   "| 1 | 1 | 1 | 8 | off | none | diverged |\n"));
	assert_non_null(strstr(lb_strbuf_str(&sb), "| cudnn+fused | 70.00 |"));
	assert_null(strstr(lb_strbuf_str(&sb), "left out"));
	lb_strbuf_release(&sb);
	render_html_figure(&sb, &f, NULL, NULL);
	assert_non_null(strstr(lb_strbuf_str(&sb), "<td class=\"fail\">diverged</td>"));
	lb_strbuf_release(&sb);
	report_figure_release(&f);

	/* the RMSNorm comparison: a diverged flash2 run is a candidate of two bars, and is
	 * counted once */
	report_runs_release(&rs);
	report_runs_init(&rs);
	struct report_run rms = mk("r", 0.6, 90), f2 = mk("r", 0.65, 95);
	f2.norm = "unfused";
	f2.label = "flash+unfused";
	f2.health = REPORT_HEALTH_DIVERGED;
	add(&rs, rms);
	add(&rs, f2);
	assert_int_equal(report_figure_build(&rs, REPORT_RMS, NULL, &f), 0);
	assert_int_equal(f.n, 3);
	assert_int_equal(f.bars[1].state, REPORT_BAR_DIVERGED);
	assert_int_equal(f.bars[2].state, REPORT_BAR_DIVERGED);
	assert_int_equal(f.diverged_left_out, 1);
	report_figure_release(&f);

	/* the best layouts: the view's rule leaves diverged runs out and counts them */
	report_runs_init(&best);
	assert_int_equal(report_runs_best_opts(&rs, 0, &best, &left), 0);
	assert_int_equal(left, 1);
	assert_int_equal(best.n, 1);
	assert_true(best.v[0].mfu == 0.6);
	report_runs_release(&best);
	report_runs_init(&best);
	assert_int_equal(report_runs_best_opts(&rs, 1, &best, &left), 0);
	assert_int_equal(left, 0);
	assert_true(best.v[0].mfu == 0.65);
	report_runs_release(&best);
	report_runs_init(&best);
	assert_int_equal(report_runs_best(&rs, &best), 0);
	assert_true(best.v[0].mfu == 0.6);
	report_runs_release(&best);

	/* the per-run figures show every run */
	rs.v[1].step_time = 1;
	rs.v[1].phase[REPORT_PHASE_FORWARD] = 0.5;
	assert_int_equal(report_figure_build(&rs, REPORT_PHASES, NULL, &f), 0);
	assert_int_equal(f.n, 2);
	assert_int_equal(f.diverged_left_out, 0);
	report_figure_release(&f);
	report_runs_release(&rs);
}

/* Groups: one per sweep, model, sequence length and GPU count (runs of one sweep on
 * different GPU counts never share a group), ordered by model, sequence length, GPUs,
 * then sweep; the plot names a group by its model, sequence length and GPUs, and adds the
 * sweep only where two groups share those three. */
static void test_groups(void **state)
{
	(void)state;
	struct report_runs rs;
	struct report_figure f;
	struct lb_strbuf sb = LB_STRBUF_INIT;
	char csv[1024];

	report_runs_init(&rs);
	struct report_run a = mk("s", 0.5, 1), b = mk("s", 0.6, 1), c = mk("s", 0.4, 1),
			  d = mk("t", 0.3, 1);
	b.gpus = 16;
	b.dp = 16;
	c.seq_len = 256;
	add(&rs, b); /* the best of sweep s overall: it must not win the 8-GPU group */
	add(&rs, c);
	add(&rs, a);
	add(&rs, d); /* sweep t: same model, sequence length and GPUs as a */
	csv_cut(&rs, REPORT_KERNELS, NULL, csv, sizeof(csv), 12);
	assert_string_equal(csv, "s,flash+fused,50.00,1,1,1,none,8,0,tiny,128,8\n"
				 "t,flash+fused,30.00,1,1,1,none,8,0,tiny,128,8\n"
				 "s,flash+fused,60.00,1,1,1,none,16,0,tiny,128,16\n"
				 "s,flash+fused,40.00,1,1,1,none,8,0,tiny,256,8\n");
	assert_int_equal(report_figure_build(&rs, REPORT_KERNELS, NULL, &f), 0);
	assert_int_equal(report_figure_groups(&f), 4);
	assert_string_equal(f.bars[0].group, "tiny, seq 128, 8 GPUs (sweep s)");
	assert_string_equal(f.bars[2].group, "tiny, seq 128, 16 GPUs (sweep s)");
	char name[64];
	report_bar_group_name(&f.bars[3], name, sizeof(name));
	assert_string_equal(name, "tiny, seq 256, 8 GPUs");
	render_md(&sb, &f);
	assert_non_null(strstr(lb_strbuf_str(&sb), "### tiny, seq 128, 16 GPUs (sweep s)\n"));
	lb_strbuf_release(&sb);
	plot_script(&sb, &f);
	const char *gp = lb_strbuf_str(&sb);
	assert_non_null(strstr(gp, "\"tiny\\nseq 128\\n8 GPUs\\ns\""));
	assert_non_null(strstr(gp, "\"tiny\\nseq 128\\n8 GPUs\\nt\""));
	assert_non_null(strstr(gp, "\"tiny\\nseq 128\\n16 GPUs\""));
	assert_non_null(strstr(gp, "\"tiny\\nseq 256\\n8 GPUs\""));
	assert_non_null(strstr(gp, "set xlabel 'kernel per group: model, sequence length, GPUs'"));
	assert_non_null(strstr(gp, "set ylabel 'MFU [%]'"));
	assert_non_null(strstr(gp, "set title 'Figure 1: attention and RMSNorm kernels'"));
	lb_strbuf_release(&sb);
	report_figure_release(&f);
	/* --sweep keeps the grouping */
	csv_of(&rs, REPORT_KERNELS, "s", csv, sizeof(csv));
	assert_string_equal(csv, "s,flash+fused,50.00,1,1,1,none\n"
				 "s,flash+fused,60.00,1,1,1,none\n"
				 "s,flash+fused,40.00,1,1,1,none\n");
	report_runs_release(&rs);
}

/* The spread: the step time's standard deviation from the view, carried over to MFU to
 * first order; unknown for imported runs, below two steps, and for failed bars. */
static void test_spread(void **state)
{
	(void)state;
	struct report_runs rs;
	struct report_figure f;
	struct lb_strbuf sb = LB_STRBUF_INIT;
	char csv[1024];

	report_runs_init(&rs);
	struct report_run a = mk("s", 0.5, 100), cpu = mk("c", -1, 0.01);
	a.step_time = 2.0;
	a.step_time_sd = 0.02;
	a.n_steps = 15;
	cpu.step_time = 4.0;
	cpu.step_time_sd = 0.5;
	cpu.n_steps = 3;
	add(&rs, a);
	add(&rs, cpu);
	add(&rs, failed("s", "oom"));
	assert_int_equal(report_figure_build(&rs, REPORT_KERNELS, NULL, &f), 0);
	assert_int_equal(f.n, 2);
	const struct report_bar *ba = f.bars[0].run->sweep[0] == 's' ? &f.bars[0] : &f.bars[1];
	const struct report_bar *bc = ba == &f.bars[0] ? &f.bars[1] : &f.bars[0];
	assert_true(report_bar_step_sd(ba) == 0.02);
	assert_true(report_bar_mfu_sd(ba) > 0.004999 && report_bar_mfu_sd(ba) < 0.005001);
	assert_true(report_bar_step_sd(bc) == 0.5);
	assert_true(report_bar_mfu_sd(bc) < 0); /* no peak: no MFU */
	render_md(&sb, &f);
	assert_non_null(strstr(lb_strbuf_str(&sb),
			       "| flash+fused | 50.00 | - | 0.50 | 100.00 | 2 | 0.02 | 1 | 1 | 1 | "
			       "8 | off | none | - |\n"));
	assert_non_null(strstr(lb_strbuf_str(&sb), "| flash+fused | n/a | n/a | - | 0.01 | 4 | 0.5 | "
						   "1 | 1 | 1 | 8 | off | none | - |\n"));
	lb_strbuf_release(&sb);
	report_figure_release(&f);
	csv_all(&rs, REPORT_KERNELS, "s", csv, sizeof(csv));
	assert_string_equal(csv, "s,flash+fused,50.00,1,1,1,none,8,0,tiny,128,8,100,0.500,2,0.02,"
				 "15,,\n");
	/* one step: no standard deviation; an imported run: none either */
	rs.v[0].n_steps = 1;
	csv_all(&rs, REPORT_KERNELS, "s", csv, sizeof(csv));
	assert_string_equal(csv, "s,flash+fused,50.00,1,1,1,none,8,0,tiny,128,8,100,,2,,1,,\n");
	report_runs_release(&rs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kind_names),
	    cmocka_unit_test(test_memory),
	    cmocka_unit_test(test_diverged),
	    cmocka_unit_test(test_intern),
	    cmocka_unit_test(test_ranking_and_ties),
	    cmocka_unit_test(test_failed_bars),
	    cmocka_unit_test(test_unknown_peak),
	    cmocka_unit_test(test_kernel_classes),
	    cmocka_unit_test(test_kernels_order),
	    cmocka_unit_test(test_checkpointing),
	    cmocka_unit_test(test_microbatch),
	    cmocka_unit_test(test_tp_pp),
	    cmocka_unit_test(test_seqpar),
	    cmocka_unit_test(test_rms),
	    cmocka_unit_test(test_sweep_filter_and_best),
	    cmocka_unit_test(test_mfu_text_rounding),
	    cmocka_unit_test(test_runs_best),
	    cmocka_unit_test(test_phases),
	    cmocka_unit_test(test_groups),
	    cmocka_unit_test(test_spread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
