/*
 * The step-time model (common/predict.h) and machine files (common/machine.h): the
 * arithmetic on invariants that hold whatever the tables say (recomputation adds one
 * forward; tensor parallelism splits the GEMMs; the interleaved schedule divides the
 * bubble by its virtual stages; a measured GEMM row corrects the parametric rate), the
 * attention variants, the fit recovering terms it generated, the scores, and the machine
 * files: the shipped ones load, a written file reads back to the same predictions, bad
 * files are refused with the key named, bench_kernels' CSV and bench_colls' tables read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/machine.h"
#include "common/model.h"
#include "common/predict.h"

/* A machine where only GEMMs cost: every GEMM at one rate (no dimension factor), links,
 * memory and attention so fast that they vanish beside them. */
static void gemm_only(struct lb_machine *m)
{
	lb_machine_init(m);
	snprintf(m->name, sizeof(m->name), "gemm-only");
	m->peak_tflops = 100.0;
	m->gemm_efficiency = 1.0;
	m->gemm_half_dim = 0.0;
	m->copy_gbps = 1e12;
	m->nvlink_gbps = 1e12;
	m->node_gbps = 1e12;
	m->n_attn = 1;
	snprintf(m->attn[0].name, sizeof(m->attn[0].name), "flash");
	m->attn[0].scale = 1.0;
	m->attn[0].n_fwd = m->attn[0].n_bwd = 1;
	m->attn[0].fwd_seq[0] = m->attn[0].bwd_seq[0] = 1024;
	m->attn[0].fwd_tflops[0] = m->attn[0].bwd_tflops[0] = 1e9;
}

static void llama13(struct lb_layout *l)
{
	lb_layout_init(l);
	lb_model_preset("llama-13b", &l->model);
	l->seq_len = 2048;
	l->global_batch = 64;
	l->micro_batch = 1;
	l->gpus_per_node = 8;
	l->nodes = 1;
	l->dp = 8;
}

static double step(const struct lb_machine *m, const struct lb_layout *l)
{
	struct lb_prediction p;
	char why[256];

	if (lb_predict(m, l, NULL, NULL, &p, why, sizeof(why)))
		fail_msg("lb_predict: %s", why);
	return p.step_s;
}

static void close_rel(double a, double b, double tol)
{
	if (!(fabs(a - b) <= tol * fabs(b)))
		fail_msg("%.9g is not within %g of %.9g", a, tol, b);
}

/* Full checkpointing runs each layer's forward again: with only GEMMs costing, every layer
 * moves from forward + backward (1 + 2) to 1 + 2 + 1 GEMM FLOPs; the head is not
 * recomputed. */
static void test_recompute(void **state)
{
	struct lb_machine m;
	struct lb_layout l;
	double none, full, head, layers, h = 5120, f = 13824;

	gemm_only(&m);
	llama13(&l);
	none = step(&m, &l);
	l.checkpointing = LB_CKPT_FULL;
	full = step(&m, &l);
	/* forward FLOPs of a micro-batch: the head's 2 T h V, the layers' 2 T (4 h^2 + 3 h f)
	 * each; a step without recomputation three times that, with it the layers' four */
	head = 2.0 * 2048 * h * 32000;
	layers = 40 * 2.0 * 2048 * (4 * h * h + 3 * h * f);
	close_rel(full / none, (3 * head + 4 * layers) / (3 * head + 3 * layers), 1e-4);
	l.checkpointing = LB_CKPT_SELECTIVE; /* only the attention core again: free here */
	close_rel(step(&m, &l), none, 1e-4);
}

/* Tensor parallelism splits every GEMM by t; with free links, tp 2 at half the data
 * parallelism (twice the micro-batches per rank) takes the same time. */
static void test_tp_split(void **state)
{
	struct lb_machine m;
	struct lb_layout l;
	double t1;

	gemm_only(&m);
	llama13(&l);
	t1 = step(&m, &l);
	l.tp = 2;
	l.dp = 4;
	close_rel(step(&m, &l), t1, 1e-3);
}

/* Where the ranks sit is the layout's: the same layout on nodes of 2 GPUs reduces its
 * gradients over the node link, on nodes of 8 over NVLink. */
static void test_placement(void **state)
{
	struct lb_machine m;
	struct lb_layout l;
	struct lb_prediction in, across;
	char why[256];

	gemm_only(&m);
	m.node_gbps = 1.0; /* a slow link between nodes */
	llama13(&l);
	l.tp = 2, l.dp = 4;
	assert_int_equal(lb_predict(&m, &l, NULL, NULL, &in, why, sizeof(why)), 0);
	l.gpus_per_node = 2, l.nodes = 4;
	assert_int_equal(lb_predict(&m, &l, NULL, NULL, &across, why, sizeof(why)), 0);
	assert_true(in.dp_s < 1e-3);
	/* without ZeRO an all-reduce of fp32 gradients: 3/4 of 2 x 4 bytes of the whole
	 * model (each node holds both tensor-parallel halves) over 1 GB/s; with ZeRO-1 a
	 * reduce-scatter of them and an all-gather of bf16 parameters, 4 + 2 bytes */
	close_rel(across.dp_s, 0.75 * 8.0 * lb_param_count(&l.model) / 1e9, 1e-3);
	l.zero_stage = 1;
	assert_int_equal(lb_predict(&m, &l, NULL, NULL, &across, why, sizeof(why)), 0);
	close_rel(across.dp_s, 0.75 * 6.0 * lb_param_count(&l.model) / 1e9, 1e-3);
}

/* The interleaved schedule: v virtual stages divide the fill and drain by v. */
static void test_interleaved_bubble(void **state)
{
	struct lb_machine m;
	struct lb_layout l;
	struct lb_prediction p1, p2;
	char why[256];

	gemm_only(&m);
	llama13(&l);
	l.model.n_layers = 8;
	l.pp = 2;
	l.dp = 4;
	assert_int_equal(lb_predict(&m, &l, NULL, NULL, &p1, why, sizeof(why)), 0);
	l.virtual_stages = 2;
	assert_int_equal(lb_predict(&m, &l, NULL, NULL, &p2, why, sizeof(why)), 0);
	assert_true(p1.bubble_s > 0);
	close_rel(p2.bubble_s, p1.bubble_s / 2.0, 1e-6);
	close_rel(p2.pipeline_s - p2.bubble_s, p1.pipeline_s - p1.bubble_s, 1e-6);
}

/* The pipeline bound: (N + (p-1) b2/v) / (N + (p-1) b1/v) for the same layout at a larger
 * micro-batch, 1 without a pipeline, 0 for another layout or a smaller micro-batch; and the
 * model's own pipeline never breaks it where a sample's cost does not grow with the
 * micro-batch (GEMMs at one rate). */
static void test_pipeline_bound(void **state)
{
	struct lb_machine m;
	struct lb_layout lo, hi;

	(void)state;
	llama13(&lo);
	lo.model.n_layers = 8;
	lo.pp = 2;
	lo.dp = 4;
	lo.nodes = 1;
	hi = lo;
	hi.micro_batch = 8; /* N = 64 / 4 = 16 samples a rank */
	close_rel(lb_pipeline_bound(&lo, &hi), (16.0 + 8) / (16.0 + 1), 1e-12);
	assert_true(lb_pipeline_bound(&hi, &lo) == 0);
	assert_true(lb_pipeline_bound(&lo, &lo) == 0);
	gemm_only(&m);
	assert_true(step(&m, &hi) / step(&m, &lo) <= lb_pipeline_bound(&lo, &hi) * (1 + 1e-9));
	assert_true(step(&m, &hi) > step(&m, &lo));
	lo.virtual_stages = hi.virtual_stages = 2;
	close_rel(lb_pipeline_bound(&lo, &hi), (16.0 + 8 / 2.0) / (16.0 + 1 / 2.0), 1e-12);
	assert_true(step(&m, &hi) / step(&m, &lo) <= lb_pipeline_bound(&lo, &hi) * (1 + 1e-9));
	hi.tp = 2;
	hi.dp = 2;
	assert_true(lb_pipeline_bound(&lo, &hi) == 0);
	lo.pp = hi.pp = 1;
	lo.virtual_stages = hi.virtual_stages = 1;
	hi.tp = 1;
	hi.dp = 4;
	close_rel(lb_pipeline_bound(&lo, &hi), 1.0, 1e-12);
}

/* A measured GEMM row at twice the parametric rate, at every shape the layer has, halves
 * the GEMMs' time; a row of another op changes nothing. */
static void test_gemm_rows(void **state)
{
	struct lb_machine m;
	struct lb_layout l;
	double base;
	const double shapes[5][2] = {{15360, 5120}, {5120, 5120}, {27648, 5120}, {5120, 13824},
				     {32000, 5120}};

	gemm_only(&m);
	llama13(&l);
	base = step(&m, &l);
	m.gemm[m.n_gemm++] = (struct lb_gemm_row){LB_GEMM_FWD, 1, 1, 1, 1e-3}; /* far away */
	for (int i = 0; i < 5; i++) {
		double n = shapes[i][0], k = shapes[i][1];

		m.gemm[m.n_gemm++] = (struct lb_gemm_row){LB_GEMM_FWD, 2048, n, k, 200.0};
		m.gemm[m.n_gemm++] = (struct lb_gemm_row){LB_GEMM_DGRAD, 2048, k, n, 200.0};
		m.gemm[m.n_gemm++] = (struct lb_gemm_row){LB_GEMM_WGRAD, n, k, 2048, 200.0};
	}
	close_rel(step(&m, &l), base / 2.0, 1e-3);
}

/* A label the machine maps to another kernel takes that kernel's rates; an attention
 * kernel without rates cannot be predicted, and the reason names it. */
static void test_variants(void **state)
{
	struct lb_machine m;
	struct lb_layout l;
	struct lb_prediction p1, p2;
	char why[256];

	lb_machine_load("a100-paper", &m, why, sizeof(why));
	llama13(&l);
	l.model.vocab = 128000;
	assert_int_equal(lb_predict(&m, &l, "flash_attention2", NULL, &p1, why, sizeof(why)), 0);
	assert_int_equal(lb_predict(&m, &l, "flash_attentionv1.0.8", NULL, &p2, why, sizeof(why)),
			 0);
	assert_true(p2.attn_s > p1.attn_s);
	assert_true(p2.step_s > p1.step_s);
	l.attention = LB_ATTN_CUDNN;
	assert_int_equal(lb_predict(&m, &l, NULL, NULL, &p1, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "no rate for attention 'cudnn'"));
}

/* The memo of per-layer costs gives the same answer as computing them. */
static void test_cache(void **state)
{
	struct lb_machine m;
	struct lb_predict_cache c;
	struct lb_layout l;
	char why[256];
	int n = 0;

	assert_int_equal(lb_machine_load("a100-paper", &m, why, sizeof(why)), 0);
	lb_predict_cache_init(&c);
	llama13(&l);
	l.model.vocab = 128000;
	l.global_batch = 512;
	for (int tp = 1; tp <= 4; tp *= 2)
		for (int pp = 1; pp <= 4; pp *= 2)
			for (int mb = 1; mb <= 2; mb++)
				for (int rep = 0; rep < 2; rep++) {
					struct lb_prediction a, b;

					if (tp * pp > 8)
						continue;
					l.tp = tp, l.pp = pp, l.dp = 8 / (tp * pp);
					l.micro_batch = mb;
					assert_int_equal(lb_predict(&m, &l, NULL, NULL, &a, why, sizeof(why)),
							 0);
					assert_int_equal(lb_predict(&m, &l, NULL, &c, &b, why, sizeof(why)),
							 0);
					assert_true(a.step_s == b.step_s);
					n++;
				}
	assert_true(n > 10);
	assert_true(c.hits > 0);
	lb_predict_cache_release(&c);
}

/* Rows made by the model with known terms: the fit finds them again from other values. */
static void test_fit_recovers(void **state)
{
	struct lb_machine truth, m;
	struct lb_fit_row rows[64];
	struct lb_fit_opts o;
	struct lb_fit_result r;
	char err[256];
	size_t n = 0;

	assert_int_equal(lb_machine_load("a100-nominal", &truth, err, sizeof(err)), 0);
	truth.fit[LB_FIT_gemm_scale] = 1.3;
	truth.fit[LB_FIT_tp_scale] = 2.0;
	truth.fit[LB_FIT_layer_s] = 0.001;
	truth.fit[LB_FIT_step_s] = 0.5;
	for (int tp = 1; tp <= 8; tp *= 2)
		for (int mb = 1; mb <= 4; mb *= 2)
			for (int ck = 0; ck < 2; ck++) {
				struct lb_fit_row *row = &rows[n];
				struct lb_prediction p;

				memset(row, 0, sizeof(*row));
				llama13(&row->layout);
				row->layout.model.vocab = 128000;
				row->layout.global_batch = 256;
				row->layout.tp = tp;
				row->layout.dp = 8 / tp;
				row->layout.micro_batch = mb;
				row->layout.checkpointing = ck ? LB_CKPT_FULL : LB_CKPT_NONE;
				assert_int_equal(lb_predict(&truth, &row->layout, NULL, NULL, &p, err,
							    sizeof(err)),
						 0);
				row->step_s = p.step_s;
				n++;
			}
	m = truth;
	m.fit[LB_FIT_gemm_scale] = 1.0;
	m.fit[LB_FIT_tp_scale] = 1.0;
	m.fit[LB_FIT_layer_s] = 0.0;
	m.fit[LB_FIT_step_s] = 0.0;
	memset(&o, 0, sizeof(o));
	o.free[LB_FIT_gemm_scale] = o.free[LB_FIT_tp_scale] = 1;
	o.free[LB_FIT_layer_s] = o.free[LB_FIT_step_s] = 1;
	o.max_iter = 200;
	assert_int_equal(lb_predict_fit(&m, rows, n, &o, NULL, &r, err, sizeof(err)), 0);
	assert_int_equal(r.n_params, 4);
	close_rel(m.fit[LB_FIT_gemm_scale], 1.3, 1e-3);
	close_rel(m.fit[LB_FIT_tp_scale], 2.0, 1e-3);
	close_rel(m.fit[LB_FIT_layer_s], 0.001, 1e-2);
	close_rel(m.fit[LB_FIT_step_s], 0.5, 1e-2);
	assert_true(r.max_abs < 1e-5);
	assert_true(m.fitted[LB_FIT_gemm_scale] && !m.fitted[LB_FIT_mem_scale]);
	/* a one-GPU grid cannot tell the link terms apart */
	for (size_t i = 0; i < n; i++)
		rows[i].layout.tp = 1, rows[i].layout.dp = 1, rows[i].layout.gpus_per_node = 1;
	lb_fit_identifiable(&m, rows, n, &o);
	assert_true(o.free[LB_FIT_gemm_scale]);
	assert_false(o.free[LB_FIT_tp_scale]);
	assert_false(o.free[LB_FIT_dp_scale]);
	assert_false(o.free[LB_FIT_dp_exposed]); /* never by itself: see LB_FIT_TERMS */
}

static void test_scores(void **state)
{
	const double a[5] = {1, 2, 3, 4, 5}, b[5] = {5, 4, 3, 2, 1}, c[5] = {1, 1, 2, 3, 3};
	const double ps[3] = {10, 11, 12}, ms[3] = {10, 12, 9};
	const double pm[3] = {0.6, 0.5, 0.4}, mm[3] = {0.55, 0.45, 0.65};
	struct lb_pred_score s;

	assert_true(fabs(lb_spearman(a, a, 5) - 1.0) < 1e-12);
	assert_true(fabs(lb_spearman(a, b, 5) + 1.0) < 1e-12);
	/* ties take their mean rank: ranks of c are 0.5 0.5 2 3.5 3.5 */
	assert_true(fabs(lb_spearman(a, c, 5) - 0.9486832980505138) < 1e-12);
	assert_true(isnan(lb_spearman(a, (const double[5]){1, 1, 1, 1, 1}, 5)));
	lb_pred_score(ps, ms, pm, mm, 3, &s);
	assert_int_equal(s.predicted_best, 0);
	assert_int_equal(s.measured_best, 2);
	close_rel(s.mfu_best - s.mfu_of_predicted_best, 0.10, 1e-9);
	close_rel(s.max_abs, 3.0 / 9.0, 1e-12);
	close_rel(s.mean_abs, (0 + 1.0 / 12 + 3.0 / 9) / 3, 1e-12);
}

/* ---- machine files ---- */

static void test_shipped(void **state)
{
	struct lb_machine m;
	char err[512];

	for (const char *const *n = lb_machine_shipped(); *n; n++) {
		if (lb_machine_load(*n, &m, err, sizeof(err)))
			fail_msg("%s", err);
		assert_string_equal(m.name, *n);
		assert_true(m.peak_tflops > 0);
		assert_true(m.n_attn > 0);
	}
	assert_int_equal(lb_machine_load("a100-paper", &m, err, sizeof(err)), 0);
	assert_true(m.calibrated && m.nominal); /* fitted terms on nominal tables */
	assert_string_equal(m.base, "a100-nominal");
	assert_true(m.fitted[LB_FIT_gemm_scale]);
	assert_int_equal(lb_machine_load("a100-nominal", &m, err, sizeof(err)), 0);
	assert_false(m.calibrated);
	assert_int_equal(lb_machine_load("h200", &m, err, sizeof(err)), 0);
	assert_true(m.calibrated && !m.nominal && m.n_gemm == 30);
	assert_int_equal(lb_machine_load("no-such", &m, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown machine 'no-such' (shipped: a100-nominal"));
	assert_string_equal(lb_machine_for_gpu("A100"), "a100-paper");
	assert_string_equal(lb_machine_for_gpu("NVIDIA A100-SXM4-80GB"), "a100-paper");
	assert_string_equal(lb_machine_for_gpu("NVIDIA H200"), "h200");
	assert_string_equal(lb_machine_for_gpu("H100"), "h100-nominal");
	assert_null(lb_machine_for_gpu("H100 PCIe"));
	assert_null(lb_machine_for_gpu("V100"));
	assert_null(lb_machine_for_gpu(""));
}

/* Written and read back (a table, and a calibration onto its base), the machine predicts
 * the same step to the precision written. */
static void test_write_read(void **state)
{
	struct lb_machine m, base, back;
	struct lb_layout l;
	char err[512], basename[64], *text = NULL;
	size_t len = 0;
	FILE *f;

	assert_int_equal(lb_machine_load("h200", &m, err, sizeof(err)), 0);
	assert_int_equal(lb_machine_load("h200-kernels", &base, err, sizeof(err)), 0);
	lb_layout_init(&l);
	lb_model_preset("llama-13b", &l.model);
	l.model.n_layers = 8, l.model.vocab = 32000, l.seq_len = 4096, l.global_batch = 8;
	l.micro_batch = 2, l.attention = LB_ATTN_CUDNN;
	for (int calib = 0; calib < 2; calib++) {
		f = open_memstream(&text, &len);
		assert_int_equal(lb_machine_write(f, &m, calib ? &base : NULL,
						  calib ? "{\"runs\": 1}" : NULL),
				 0);
		fclose(f);
		if (calib)
			back = base;
		else
			lb_machine_init(&back);
		if (lb_machine_apply_text(&back, text, len, "mem", basename, sizeof(basename), err,
					  sizeof(err)))
			fail_msg("%s", err);
		assert_string_equal(basename, calib ? "h200-kernels" : "");
		close_rel(step(&back, &l), step(&m, &l), 1e-8);
		free(text);
		text = NULL;
	}
}

static void bad_file(const char *json, const char *want)
{
	struct lb_machine m;
	char err[512];

	lb_machine_init(&m);
	assert_int_equal(lb_machine_apply_text(&m, json, strlen(json), "x.json", NULL, 0, err,
					       sizeof(err)),
			 -1);
	if (!strstr(err, want))
		fail_msg("error '%s' does not say '%s'", err, want);
}

static void test_bad_files(void **state)
{
	bad_file("[1]", "x.json: top level: expected an object");
	bad_file("{\"format\": \"other\"}", "format: expected \"layoutbench-machine\"");
	bad_file("{\"format\": \"layoutbench-machine\", \"gpus\": 8}", "unknown key 'gpus'");
	bad_file("{\"format\": \"layoutbench-machine\", \"fit\": {\"gemm_scale\": 9}}",
		 "fit.gemm_scale: 9 is outside [0.5, 3]");
	bad_file("{\"format\": \"layoutbench-machine\", \"fit\": {\"speed\": 1}}",
		 "fit.speed: unknown term (known: gemm_scale");
	bad_file("{\"format\": \"layoutbench-machine\", \"gemm\": {\"rows\": [[\"up\", 1, 2, 3, 4]]}}",
		 "gemm.rows[0]: op: expected fwd, dgrad or wgrad");
	bad_file("{\"format\": \"layoutbench-machine\", \"membound\": {\"rows\": [[\"memcpy\", 1, "
		 "2]]}}",
		 "membound.rows[0]: unknown kernel");
	bad_file("{\"format\": \"layoutbench-machine\", \"attention\": {\"kernels\": {\"flash\": "
		 "{\"fwd\": [[2048, 1], [2048, 2]]}}}}",
		 "sequence 2048 given twice");
	bad_file("{\"format\": \"layoutbench-machine\", \"links\": {\"gpus_per_node\": 2.5}}",
		 "links.gpus_per_node: expected a whole number");
	bad_file("{\"format\": ", "not valid JSON");
}

static void test_kernels_csv(void **state)
{
	static const char csv[] =
	    "kernel,shape,time_us,work,unit,achieved,ceiling,pct_of_ceiling,check\n"
	    "gemm.qkv.fwd,T2048 m2048 n15360 k5120 NT,416.2,3.2e+11,TFLOP/s,773.9,782.3,98.9,ok\n"
	    "gemm.qkv.wgrad,T2048 m15360 n5120 k2048 TN f32+=,445.9,3.2e+11,TFLOP/s,722.4,763,94,ok\n"
	    "gemm.out.fwd,T2048 m2048 n5120 k5120 NT,141.4,1e+11,TFLOP/s,759.0,771,98,wrong\n"
	    "rmsnorm.fused.fwd,T2048 H5120,13.6,4.19615e+07,GB/s,3085.4,4278.7,72.1,ok\n"
	    "rmsnorm.fused.fwd,T8192 H5120,44.6,1.67815e+08,GB/s,3762.0,4278.7,87.9,ok\n"
	    "attn.probs.bwd,B1 S2048 nh40 D128 causal,753.8,1.07e+11,TFLOP/s,142.4,800,17.8,ok\n"
	    "attn.flash.fwd,B1 S8192 nh40 D128 causal,2841,6.87e+11,TFLOP/s,241.9,800,30.2,ok\n"
	    "attn.flash.fwd,B1 S2048 nh40 D128 causal,204.7,4.29e+10,TFLOP/s,209.8,800,26.2,ok\n";
	static const char colls[] =
	    "# comm nccl, 4 rank(s), float, 10 iterations after 3 warm-up\n#\n# all_reduce\n"
	    "#      size(B)        count   type     time(us)      algbw      busbw   check\n"
	    "          1024          256  float        20.00       0.05       0.08     ok\n"
	    "     268435456     67108864  float      1500.00     178.96     268.44     ok\n"
	    "#\n# all_gather\n          1024          256  float        10.00       0.10       0.08  ok\n";
	struct lb_machine m;
	char err[256];
	int skipped;

	lb_machine_init(&m);
	assert_int_equal(lb_machine_from_kernels_csv(&m, csv, strlen(csv), &skipped, err, sizeof(err)),
			 0);
	assert_int_equal(skipped, 1);
	assert_int_equal(m.n_gemm, 2);
	assert_int_equal(m.gemm[1].op, LB_GEMM_WGRAD);
	assert_true(m.gemm[1].m == 15360 && m.gemm[1].n == 5120 && m.gemm[1].k == 2048);
	assert_int_equal(m.n_mem, 2);
	assert_true(m.mem[0].bytes < m.mem[1].bytes);
	assert_true(fabs(m.copy_gbps - 4278.7) < 1e-9);
	/* the probabilities' backward serves naive and fused softmax; rows sorted by sequence */
	assert_non_null(lb_machine_attn_mut(&m, "naive"));
	assert_int_equal(lb_machine_attn_mut(&m, "fused_softmax")->n_bwd, 1);
	assert_int_equal(lb_machine_attn_mut(&m, "flash")->n_fwd, 2);
	assert_true(lb_machine_attn_mut(&m, "flash")->fwd_seq[0] == 2048);
	assert_int_equal(lb_machine_from_kernels_csv(&m, "a,b\n", 4, &skipped, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not bench_kernels --csv output"));
	assert_int_equal(lb_machine_from_colls(&m, colls, strlen(colls), err, sizeof(err)), 0);
	assert_true(fabs(m.nvlink_gbps - 268.44) < 1e-9);
	assert_true(fabs(m.nvlink_lat_s - 20e-6 / 6) < 1e-12);
	assert_int_equal(lb_machine_from_colls(&m, "# comm nccl, 1 rank(s)\n", 23, err, sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "a link needs 2 or more"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_recompute),	  cmocka_unit_test(test_tp_split),
	    cmocka_unit_test(test_placement),
	    cmocka_unit_test(test_interleaved_bubble), cmocka_unit_test(test_gemm_rows),
	    cmocka_unit_test(test_pipeline_bound),
	    cmocka_unit_test(test_variants),	  cmocka_unit_test(test_cache),
	    cmocka_unit_test(test_fit_recovers),	  cmocka_unit_test(test_scores),
	    cmocka_unit_test(test_shipped),	  cmocka_unit_test(test_write_read),
	    cmocka_unit_test(test_bad_files),	  cmocka_unit_test(test_kernels_csv),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
