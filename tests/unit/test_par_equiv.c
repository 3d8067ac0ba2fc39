/*
 * The equivalence suite of the parallel trainer: every layout with tp, pp, dp in {1, 2, 4}
 * and tp*pp*dp <= 8 on the tiny preset, sequence parallelism on and off (tp > 1), ZeRO
 * stage 0, 1 and 2 (dp > 1), each checkpointing mode, runs 3 optimizer steps (seq 16, global
 * batch 8, micro-batch 1) through lb_train_main itself (the --nproc-per-node launcher
 * forks the ranks from this process) and must give the single-rank run's loss at every
 * step to 1e-5 relative and, after the 3 steps, its parameters (--dump-params, the whole
 * model gathered by rank 0) to 1e-5 relative in the L2 norm of the whole model, 1e-4 per
 * tensor, and no element off by more than 5% of the learning rate. Also GPipe, the
 * tiny-gqa preset (grouped-query attention split over tp) and the tiny-tied preset (the
 * tied embedding's two copies summed between first and last stage), uneven pipeline
 * stages (pp not dividing the layers), explicit layer splits (--stage-layers), and the
 * interleaved 1F1B schedule (--virtual-stages: pp=2 and pp=4 with 2 and 3 chunks per
 * stage, with tp, SP, dp, ZeRO-1 and 2, each checkpointing mode, a tied embedding, uneven
 * chunks and an explicit split of the chunks). Every other run reduces its data-parallel
 * gradients in buckets of one layer each (--grad-bucket 1: a reduction per layer during
 * the backward, ZeRO-2's two slots reused across layers and micro-batches), the others in
 * the default buckets (the whole stage in one; with virtual stages one per model chunk).
 *
 * Why norms and not element by element: AdamW divides each gradient element by its own
 * running RMS, so an element whose gradient nearly cancels has its update decided by
 * rounding; another summation order (a tp all-reduce, a dp sum) moves such an element
 * by up to about 1.5% of the learning rate (measured: 4.4e-5 at lr 3e-3, tp=4), and a
 * small tensor holding one such element can reach 4e-5 relative, while the whole model
 * agrees to about 2e-6. A wrong gradient moves an element by the order of the learning
 * rate per step: the element bound (5% of it) and the per-tensor bound catch that. The
 * losses are compared one by one.
 * LB_PAR_SUBSET=1 runs a quarter of the layouts (for the sanitizer build).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/model.h"
#include "harness/train.h"

#define STEPS 3
#define TOL   1e-5

struct run_out {
	double loss[STEPS];
	int n_loss;
	float *params; /* the whole model, single-rank order */
	size_t n_params;
};

static char tmpdir[256];
static int n_ran, n_bad;

static void out_free(struct run_out *r)
{
	free(r->params);
	memset(r, 0, sizeof(*r));
}

/* The losses of the run log in dir. */
static int read_losses(const char *dir, struct run_out *r)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[8192], line[8192];
	FILE *f = NULL;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "run-", 4)) {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			f = fopen(path, "r");
			break;
		}
	closedir(d);
	if (!f)
		return -1;
	r->n_loss = 0;
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "\"loss\":");

		if (strstr(line, "\"type\":\"step\"") && p && r->n_loss < STEPS)
			r->loss[r->n_loss++] = strtod(p + 7, NULL);
	}
	fclose(f);
	return r->n_loss == STEPS ? 0 : -1;
}

static int read_params(const char *path, struct run_out *r)
{
	FILE *f = fopen(path, "rb");
	long n;

	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	r->n_params = (size_t)n / sizeof(float);
	r->params = malloc((size_t)n + 1);
	if (!r->params || fread(r->params, 1, (size_t)n, f) != (size_t)n) {
		fclose(f);
		return -1;
	}
	fclose(f);
	return 0;
}

/* Run one layout through lb_train_main; 0 with the losses and parameters. */
static int run(const struct lb_layout *l, enum lb_sched_kind sched, const char *tag,
	       struct run_out *r)
{
	struct lb_train_opts o;
	char cmd[8300];
	int rc;

	memset(r, 0, sizeof(*r));
	lb_train_opts_init(&o);
	o.layout = *l;
	o.quiet = 1;
	o.comm_timeout = 30;
	o.schedule = sched;
	o.nproc_per_node = lb_layout_world(l);
	if (n_ran % 2)
		o.grad_bucket = 1;
	snprintf(o.run_dir, sizeof(o.run_dir), "%s/%s", tmpdir, tag);
	snprintf(o.dump_params, sizeof(o.dump_params), "%s/%s.bin", tmpdir, tag);
	rc = lb_train_main(&o);
	if (rc == 0 && read_losses(o.run_dir, r) == 0 && read_params(o.dump_params, r) == 0)
		rc = 0;
	else if (rc == 0)
		rc = -1;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", o.run_dir, o.dump_params);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: cannot remove %s\n", o.run_dir);
	return rc;
}

/* Sizes of the whole model's tensors in the single-rank order, spelled out here
 * independently of model.c: embedding, per layer attn_norm, wqkv, wo, mlp_norm, wgu,
 * wdown, final norm, head (untied). */
static int tensor_sizes(const struct lb_model *md, size_t *sz)
{
	size_t H = (size_t)md->hidden, D = H / (size_t)md->n_heads;
	int n = 0;

	sz[n++] = (size_t)md->vocab * H;
	for (int l = 0; l < md->n_layers; l++) {
		sz[n++] = H;
		sz[n++] = ((size_t)md->n_heads + 2 * (size_t)md->n_kv_heads) * D * H;
		sz[n++] = H * md->n_heads * D;
		sz[n++] = H;
		sz[n++] = 2 * (size_t)md->ffn * H;
		sz[n++] = H * (size_t)md->ffn;
	}
	sz[n++] = H;
	if (!md->tied)
		sz[n++] = (size_t)md->vocab * H;
	return n;
}

/* 0 when r equals ref (losses one by one, parameters per tensor in L2), else the worst
 * relative difference is printed with the layout. */
static int compare(const struct lb_layout *l, const char *what, const struct run_out *ref,
		   const struct run_out *r)
{
	size_t sz[256], off = 0;
	int n = tensor_sizes(&l->model, sz);
	double worst_loss = 0, worst_param = 0, all_num = 0, all_den = 0, worst_abs = 0;
	double lr = LB_TRAIN_DEFAULT_LR;

	for (int s = 0; s < STEPS; s++) {
		double d = fabs(r->loss[s] - ref->loss[s]) / fabs(ref->loss[s]);

		if (d > worst_loss)
			worst_loss = d;
	}
	if (r->n_params != ref->n_params) {
		fprintf(stderr, "FAIL %s: %zu parameters, the single rank has %zu\n", what,
			r->n_params, ref->n_params);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		double num = 0, den = 0;

		for (size_t k = off; k < off + sz[i]; k++) {
			double a = ref->params[k], b = r->params[k];

			num += (a - b) * (a - b);
			den += a * a;
			if (fabs(a - b) > worst_abs)
				worst_abs = fabs(a - b);
		}
		all_num += num;
		all_den += den;
		off += sz[i];
		if (den > 0 && sqrt(num / den) > worst_param)
			worst_param = sqrt(num / den);
	}
	if (off != ref->n_params) {
		fprintf(stderr, "FAIL %s: tensor table covers %zu of %zu\n", what, off,
			ref->n_params);
		return -1;
	}
	if (worst_loss > TOL || sqrt(all_num / all_den) > TOL || worst_param > 10 * TOL ||
	    worst_abs > 0.05 * lr) {
		fprintf(stderr,
			"FAIL %s: loss rel %.3g (tolerance %g), params rel %.3g (%g), worst "
			"tensor rel %.3g (%g), worst element %.3g (%g)\n",
			what, worst_loss, TOL, sqrt(all_num / all_den), TOL, worst_param, 10 * TOL,
			worst_abs, 0.05 * lr);
		return -1;
	}
	return 0;
}

static void base_layout(struct lb_layout *l, const char *preset, enum lb_ckpt ck)
{
	lb_layout_init(l);
	assert_int_equal(lb_model_preset(preset, &l->model), 0);
	l->seq_len = 16;
	l->global_batch = 8;
	l->micro_batch = 1;
	l->steps = STEPS;
	l->warmup = 0;
	l->checkpointing = ck;
}

static void one(const struct lb_layout *l, enum lb_sched_kind sched, const struct run_out *ref)
{
	char what[256], tag[64], reason[256];
	struct run_out r;
	struct lb_layout x = *l;

	x.gpus_per_node = lb_layout_world(&x);
	x.nodes = 1;
	snprintf(what, sizeof(what), "%s tp=%d pp=%d dp=%d sp=%d zero=%d ckpt=%s sched=%s",
		 x.model.name, x.tp, x.pp, x.dp, x.sequence_parallel, x.zero_stage,
		 lb_ckpt_name(x.checkpointing), lb_sched_name(lb_schedule_effective(&x, sched)));
	if (x.virtual_stages > 1 || x.n_stage_layers) {
		size_t n = strlen(what);

		n += (size_t)snprintf(what + n, sizeof(what) - n, " v=%d", x.virtual_stages);
		for (int i = 0; i < x.n_stage_layers && n < sizeof(what); i++)
			n += (size_t)snprintf(what + n, sizeof(what) - n, "%s%d",
					      i ? "," : " split=", x.stage_layers[i]);
	}
	if (lb_layout_check(&x, reason, sizeof(reason))) {
		fprintf(stderr, "invalid (not run) %s: %s\n", what, reason);
		return;
	}
	snprintf(tag, sizeof(tag), "run%d", n_ran);
	n_ran++;
	if (run(&x, sched, tag, &r)) {
		fprintf(stderr, "FAIL %s: the run failed\n", what);
		n_bad++;
		return;
	}
	if (compare(&x, what, ref, &r))
		n_bad++;
	out_free(&r);
}

static void test_every_layout_equals_one_rank(void **state)
{
	static const int sizes[] = {1, 2, 4};
	const enum lb_ckpt cks[] = {LB_CKPT_NONE, LB_CKPT_FULL, LB_CKPT_SELECTIVE};
	int subset = getenv("LB_PAR_SUBSET") && !strcmp(getenv("LB_PAR_SUBSET"), "1"), k = 0;

	n_ran = n_bad = 0;
	for (int c = 0; c < 3; c++) {
		struct lb_layout l;
		struct run_out ref;

		base_layout(&l, "tiny", cks[c]);
		assert_int_equal(run(&l, LB_SCHED_1F1B, "ref", &ref), 0);
		for (int a = 0; a < 3; a++)
			for (int b = 0; b < 3; b++)
				for (int d = 0; d < 3; d++) {
					int tp = sizes[a], pp = sizes[b], dp = sizes[d];

					if (tp * pp * dp > 8 || tp * pp * dp == 1)
						continue;
					for (int sp = 0; sp <= (tp > 1); sp++)
						for (int z = 0; z <= (dp > 1 ? 2 : 0); z++) {
							if (subset && k++ % 4)
								continue;
							l.tp = tp;
							l.pp = pp;
							l.dp = dp;
							l.sequence_parallel = sp;
							l.zero_stage = z;
							one(&l, LB_SCHED_1F1B, &ref);
						}
				}
		/* GPipe, with and without the other sizes */
		l.tp = 1, l.dp = 1, l.sequence_parallel = 0, l.zero_stage = 0;
		for (int pp = 2; pp <= 4; pp *= 2) {
			l.pp = pp;
			one(&l, LB_SCHED_GPIPE, &ref);
		}
		l.tp = 2, l.pp = 2, l.dp = 2, l.sequence_parallel = 1, l.zero_stage = 1;
		one(&l, LB_SCHED_GPIPE, &ref);
		out_free(&ref);
	}
	printf("layouts run: %d, differing: %d\n", n_ran, n_bad);
	assert_int_equal(n_bad, 0);
	assert_true(n_ran >= (subset ? 25 : 100));
}

/* Grouped-query attention split over tp, and a tied embedding over pp. */
static void test_gqa_and_tied(void **state)
{
	static const int lay[][5] = {/* tp pp dp sp zero */
				     {2, 1, 1, 0, 0}, {4, 1, 1, 1, 0}, {2, 2, 2, 1, 1},
				     {4, 2, 1, 0, 0}, {1, 4, 2, 0, 1}, {1, 2, 1, 0, 0},
				     {2, 2, 2, 1, 2}, {1, 4, 2, 0, 2}};
	const char *presets[] = {"tiny-gqa", "tiny-tied"};

	n_ran = n_bad = 0;
	for (int p = 0; p < 2; p++) {
		struct lb_layout l;
		struct run_out ref;

		base_layout(&l, presets[p], LB_CKPT_NONE);
		assert_int_equal(run(&l, LB_SCHED_1F1B, "ref", &ref), 0);
		for (size_t i = 0; i < sizeof(lay) / sizeof(lay[0]); i++) {
			l.tp = lay[i][0];
			l.pp = lay[i][1];
			l.dp = lay[i][2];
			l.sequence_parallel = lay[i][3];
			l.zero_stage = lay[i][4];
			one(&l, i % 2 ? LB_SCHED_GPIPE : LB_SCHED_1F1B, &ref);
		}
		out_free(&ref);
	}
	printf("gqa and tied layouts run: %d, differing: %d\n", n_ran, n_bad);
	assert_int_equal(n_bad, 0);
	assert_int_equal(n_ran, 16);
}

/* Micro-batches of 2 sequences: SP slices the (B*S) tokens of a micro-batch. */
static void test_micro_batch_2(void **state)
{
	static const int lay[][5] = {/* tp pp dp sp zero */
				     {2, 1, 1, 1, 0}, {4, 2, 1, 1, 0}, {2, 2, 2, 1, 1},
				     {1, 2, 2, 0, 1}, {2, 1, 2, 1, 2}, {1, 2, 2, 0, 2}};
	struct lb_layout l;
	struct run_out ref;

	n_ran = n_bad = 0;
	base_layout(&l, "tiny", LB_CKPT_SELECTIVE);
	l.micro_batch = 2;
	assert_int_equal(run(&l, LB_SCHED_1F1B, "ref", &ref), 0);
	for (size_t i = 0; i < sizeof(lay) / sizeof(lay[0]); i++) {
		l.tp = lay[i][0];
		l.pp = lay[i][1];
		l.dp = lay[i][2];
		l.sequence_parallel = lay[i][3];
		l.zero_stage = lay[i][4];
		one(&l, LB_SCHED_1F1B, &ref);
	}
	out_free(&ref);
	printf("micro-batch 2 layouts run: %d, differing: %d\n", n_ran, n_bad);
	assert_int_equal(n_bad, 0);
	assert_int_equal(n_ran, 6);
}

/* Uneven pipeline stages (common/layout.c's lb_stage_layers: the remainder to the middle
 * stages): 6 layers on 4 stages (1 2 2 1), 4 on 3 (1 2 1), tiny-deep's 8 on 3 (2 3 3)
 * and on 5 (1 2 2 2 1), with tp, SP, dp and ZeRO-1, every checkpointing mode, GPipe, and
 * a tied embedding whose copies sit on uneven end stages. */
static void test_uneven_stages(void **state)
{
	static const struct {
		const char *preset;
		int layers; /* 0: the preset's */
		enum lb_ckpt ck;
		int tp, pp, dp, sp, zero;
		enum lb_sched_kind sched;
	} lay[] = {
	    {"tiny", 6, LB_CKPT_NONE, 1, 4, 1, 0, 0, LB_SCHED_1F1B},
	    {"tiny", 6, LB_CKPT_NONE, 2, 4, 1, 1, 0, LB_SCHED_1F1B},
	    {"tiny", 6, LB_CKPT_NONE, 1, 4, 2, 0, 1, LB_SCHED_1F1B},
	    {"tiny", 6, LB_CKPT_NONE, 1, 4, 2, 0, 2, LB_SCHED_1F1B},
	    {"tiny", 6, LB_CKPT_NONE, 1, 4, 1, 0, 0, LB_SCHED_GPIPE},
	    {"tiny", 6, LB_CKPT_FULL, 2, 4, 1, 0, 0, LB_SCHED_1F1B},
	    {"tiny", 6, LB_CKPT_FULL, 1, 4, 2, 0, 0, LB_SCHED_1F1B},
	    {"tiny", 4, LB_CKPT_SELECTIVE, 1, 3, 1, 0, 0, LB_SCHED_1F1B},
	    {"tiny", 4, LB_CKPT_SELECTIVE, 2, 3, 1, 1, 0, LB_SCHED_1F1B},
	    {"tiny", 4, LB_CKPT_SELECTIVE, 1, 3, 2, 0, 1, LB_SCHED_1F1B},
	    {"tiny", 4, LB_CKPT_SELECTIVE, 1, 3, 2, 0, 2, LB_SCHED_GPIPE},
	    {"tiny", 4, LB_CKPT_SELECTIVE, 1, 3, 2, 0, 0, LB_SCHED_GPIPE},
	    {"tiny-deep", 0, LB_CKPT_NONE, 1, 3, 1, 0, 0, LB_SCHED_1F1B},
	    {"tiny-deep", 0, LB_CKPT_NONE, 2, 3, 1, 0, 0, LB_SCHED_1F1B},
	    {"tiny-deep", 0, LB_CKPT_NONE, 1, 5, 1, 0, 0, LB_SCHED_1F1B},
	    {"tiny-tied", 6, LB_CKPT_NONE, 1, 4, 1, 0, 0, LB_SCHED_1F1B},
	    {"tiny-tied", 6, LB_CKPT_NONE, 2, 4, 1, 1, 0, LB_SCHED_1F1B},
	};
	struct run_out ref;
	int have_ref = 0;

	memset(&ref, 0, sizeof(ref));
	n_ran = n_bad = 0;
	for (size_t i = 0; i < sizeof(lay) / sizeof(lay[0]); i++) {
		struct lb_layout l;
		int lo, hi;

		base_layout(&l, lay[i].preset, lay[i].ck);
		if (lay[i].layers)
			l.model.n_layers = lay[i].layers;
		/* a new model or checkpointing mode: its own single-rank reference */
		if (!have_ref || strcmp(lay[i].preset, lay[i - 1].preset) ||
		    lay[i].layers != lay[i - 1].layers || lay[i].ck != lay[i - 1].ck) {
			out_free(&ref);
			assert_int_equal(run(&l, LB_SCHED_1F1B, "ref", &ref), 0);
			have_ref = 1;
		}
		l.tp = lay[i].tp;
		l.pp = lay[i].pp;
		l.dp = lay[i].dp;
		l.sequence_parallel = lay[i].sp;
		l.zero_stage = lay[i].zero;
		/* the layouts are uneven, so they test what they claim */
		assert_int_not_equal(l.model.n_layers % l.pp, 0);
		assert_int_equal(lb_stage_layers(&l, 0, &lo, &hi), 0);
		assert_int_equal(hi - lo, l.model.n_layers / l.pp);
		one(&l, lay[i].sched, &ref);
	}
	out_free(&ref);
	printf("uneven-stage layouts run: %d, differing: %d\n", n_ran, n_bad);
	assert_int_equal(n_bad, 0);
	assert_int_equal(n_ran, (int)(sizeof(lay) / sizeof(lay[0])));
}

/* An explicit split in l from text ("3,5"); "" for the rule. */
static void set_split(struct lb_layout *l, const char *split)
{
	char err[256];

	if (*split)
		assert_int_equal(lb_layout_set_flag(l, "--stage-layers", split, err, sizeof(err)),
				 1);
	else
		l->n_stage_layers = 0;
}

/* Explicit layer splits and the interleaved schedule (virtual stages): rank r holds
 * chunks r, r + pp, ... of the pp * v chunks, activations go round the ring v times. */
static void test_split_and_interleaved(void **state)
{
	static const struct {
		const char *preset;
		int global_batch;
		enum lb_ckpt ck;
		int tp, pp, dp, sp, zero, v;
		const char *split; /* "" the rule */
	} lay[] = {
	    /* explicit splits, one chunk per stage */
	    {"tiny-deep", 8, LB_CKPT_NONE, 1, 2, 1, 0, 0, 1, "3,5"},
	    {"tiny-deep", 8, LB_CKPT_NONE, 2, 3, 1, 1, 0, 1, "4,2,2"},
	    {"tiny-deep", 8, LB_CKPT_NONE, 1, 4, 2, 0, 1, 1, "1,3,3,1"},
	    /* interleaved: 8 layers in 4 chunks of 2 (pp=2) or 8 of 1 (pp=4) */
	    {"tiny-deep", 8, LB_CKPT_NONE, 1, 2, 1, 0, 0, 2, ""},
	    {"tiny-deep", 8, LB_CKPT_NONE, 2, 2, 1, 1, 0, 2, ""},
	    {"tiny-deep", 8, LB_CKPT_NONE, 1, 2, 2, 0, 1, 2, ""},
	    {"tiny-deep", 8, LB_CKPT_NONE, 2, 2, 2, 0, 0, 2, ""},
	    {"tiny-deep", 8, LB_CKPT_NONE, 1, 4, 1, 0, 0, 2, ""},
	    {"tiny-deep", 8, LB_CKPT_NONE, 2, 4, 1, 1, 0, 2, ""},
	    {"tiny-deep", 8, LB_CKPT_NONE, 1, 4, 2, 0, 1, 2, ""},
	    /* ZeRO-2: a chunk's layer gradients through the slots, micro-batch by micro-batch */
	    {"tiny-deep", 8, LB_CKPT_NONE, 1, 4, 2, 0, 2, 2, ""},
	    {"tiny-deep", 8, LB_CKPT_NONE, 2, 2, 2, 1, 2, 2, ""},
	    /* 3 chunks per stage: 8 layers in 6 chunks (1 1 2 2 1 1), and a split of them */
	    {"tiny-deep", 8, LB_CKPT_NONE, 1, 2, 1, 0, 0, 3, ""},
	    {"tiny-deep", 8, LB_CKPT_NONE, 1, 2, 1, 0, 0, 2, "1,3,3,1"},
	    /* checkpointing modes */
	    {"tiny-deep", 8, LB_CKPT_FULL, 1, 4, 1, 0, 0, 2, ""},
	    {"tiny-deep", 8, LB_CKPT_FULL, 2, 2, 2, 1, 1, 2, ""},
	    {"tiny-deep", 8, LB_CKPT_SELECTIVE, 1, 2, 2, 0, 0, 2, ""},
	    {"tiny-deep", 8, LB_CKPT_SELECTIVE, 2, 4, 1, 0, 0, 2, ""},
	    /* as many micro-batches as stages: every pass is warm-up */
	    {"tiny-deep", 4, LB_CKPT_NONE, 1, 2, 2, 0, 0, 2, ""},
	    /* a tied embedding: its copies on stage 0's first chunk and the last stage's last */
	    {"tiny-tied", 8, LB_CKPT_NONE, 1, 2, 1, 0, 0, 2, ""},
	    {"tiny-tied", 8, LB_CKPT_NONE, 2, 2, 2, 1, 1, 2, ""},
	};
	struct run_out ref;
	int have_ref = 0;

	memset(&ref, 0, sizeof(ref));
	n_ran = n_bad = 0;
	for (size_t i = 0; i < sizeof(lay) / sizeof(lay[0]); i++) {
		struct lb_layout l;

		base_layout(&l, lay[i].preset, lay[i].ck);
		l.global_batch = lay[i].global_batch;
		if (!have_ref || strcmp(lay[i].preset, lay[i - 1].preset) ||
		    lay[i].ck != lay[i - 1].ck || lay[i].global_batch != lay[i - 1].global_batch) {
			out_free(&ref);
			assert_int_equal(run(&l, LB_SCHED_1F1B, "ref", &ref), 0);
			have_ref = 1;
		}
		l.tp = lay[i].tp;
		l.pp = lay[i].pp;
		l.dp = lay[i].dp;
		l.sequence_parallel = lay[i].sp;
		l.zero_stage = lay[i].zero;
		l.virtual_stages = lay[i].v;
		set_split(&l, lay[i].split);
		/* the layouts test what they claim */
		if (*lay[i].split)
			assert_true(lb_layout_split_explicit(&l));
		one(&l, LB_SCHED_1F1B, &ref);
	}
	out_free(&ref);
	printf("split and interleaved layouts run: %d, differing: %d\n", n_ran, n_bad);
	assert_int_equal(n_bad, 0);
	assert_int_equal(n_ran, (int)(sizeof(lay) / sizeof(lay[0])));
}

static int setup(void **state)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/lb-par-equiv-%ld", (long)getpid());
	return mkdir(tmpdir, 0700);
}

static int teardown(void **state)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_layout_equals_one_rank),
	    cmocka_unit_test(test_gqa_and_tied),
	    cmocka_unit_test(test_micro_batch_2),
	    cmocka_unit_test(test_uneven_stages),
	    cmocka_unit_test(test_split_and_interleaved),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
