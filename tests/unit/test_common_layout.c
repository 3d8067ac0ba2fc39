/*
 * Unit tests of the layout record (common/layout.c): defaults, the canonical text and the
 * pinned golden id, enum names, the flag parser and printer (round trip over many random
 * layouts), and every validity rule with its reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kernel_names.h"
#include "common/layout.h"
#include "common/model.h"

static void test_init_defaults(void **state)
{
	struct lb_layout l;
	char reason[256];

	lb_layout_init(&l);
	assert_string_equal(l.model.name, "tiny");
	assert_int_equal(l.model.n_layers, 4);
	assert_int_equal(l.seq_len, 128);
	assert_int_equal(l.global_batch, 8);
	assert_int_equal(l.micro_batch, 1);
	assert_int_equal(lb_layout_world(&l), 1);
	assert_int_equal(lb_layout_accum_steps(&l), 8);
	assert_int_equal(l.attention, LB_ATTN_FLASH);
	assert_int_equal(l.norm, LB_NORM_FUSED);
	assert_int_equal(l.checkpointing, LB_CKPT_NONE);
	assert_int_equal(l.steps, 10);
	assert_int_equal(l.warmup, 2);
	assert_true(l.seed == 1);
	assert_int_equal(lb_layout_check(&l, reason, sizeof(reason)), 0);
	assert_string_equal(reason, "");
}

static void paper_13b(struct lb_layout *l)
{
	lb_layout_init(l);
	assert_int_equal(lb_model_preset("llama-13b", &l->model), 0);
	l->model.vocab = 128000;
	l->seq_len = 2048;
	l->global_batch = 2048;
	l->micro_batch = 1;
	l->tp = 1;
	l->pp = 1;
	l->dp = 32;
	l->gpus_per_node = 8;
	l->nodes = 4;
	l->zero_stage = 1;
}

/* The canonical text and the id are pinned: a change here changes every stored id. */
static void test_canonical_golden(void **state)
{
	struct lb_layout l;
	char buf[1024], id[LB_ID_LEN + 1];
	int n;

	lb_layout_init(&l);
	n = lb_layout_canonical(&l, buf, sizeof(buf));
	assert_string_equal(buf,
			    "model=tiny layers=4 hidden=64 heads=4 kv_heads=4 ffn=128 vocab=256 "
			    "tied=0 seq_len=128 global_batch=8 micro_batch=1 tp=1 pp=1 dp=1 "
			    "gpus_per_node=1 nodes=1 sequence_parallel=0 zero_stage=0 "
			    "checkpointing=none attention=flash norm=fused");
	assert_int_equal(n, (int)strlen(buf));
	lb_layout_id(&l, id);
	assert_string_equal(id, "9d44b25f1e7cb413");

	paper_13b(&l);
	lb_layout_id(&l, id);
	assert_string_equal(id, "97ab0f2e279b4158");
	/* truncated output keeps snprintf semantics */
	n = lb_layout_canonical(&l, buf, 8);
	assert_true(n > 8);
	assert_string_equal(buf, "model=l");
}

static void test_id_ignores_run_settings(void **state)
{
	struct lb_layout a, b;
	char ia[LB_ID_LEN + 1], ib[LB_ID_LEN + 1];

	lb_layout_init(&a);
	b = a;
	b.steps = 100;
	b.warmup = 7;
	b.seed = 12345;
	lb_layout_id(&a, ia);
	lb_layout_id(&b, ib);
	assert_string_equal(ia, ib);
	assert_int_equal(strlen(ia), LB_ID_LEN);
	b.tp = 2;
	lb_layout_id(&b, ib);
	assert_string_not_equal(ia, ib);
	b = a;
	b.norm = LB_NORM_UNFUSED;
	lb_layout_id(&b, ib);
	assert_string_not_equal(ia, ib);
}

static void test_enum_names(void **state)
{
	enum lb_ckpt c;
	enum lb_attn a;
	enum lb_norm n;

	assert_string_equal(lb_ckpt_name(LB_CKPT_SELECTIVE), "selective");
	assert_string_equal(lb_attn_name(LB_ATTN_FUSED_SOFTMAX), "fused_softmax");
	assert_string_equal(lb_norm_name(LB_NORM_UNFUSED), "unfused");
	assert_string_equal(lb_ckpt_name((enum lb_ckpt)9), "invalid");
	assert_int_equal(lb_ckpt_parse("full", &c), 0);
	assert_int_equal(c, LB_CKPT_FULL);
	assert_int_equal(lb_attn_parse("naive", &a), 0);
	assert_int_equal(a, LB_ATTN_NAIVE);
	assert_int_equal(lb_attn_parse("cudnn", &a), 0);
	assert_int_equal(a, LB_ATTN_CUDNN);
	assert_string_equal(lb_attn_name(LB_ATTN_CUDNN), "cudnn");
	assert_int_equal(lb_attn_parse("cuDNN", &a), -1);
	assert_int_equal(lb_norm_parse("fused", &n), 0);
	assert_int_equal(n, LB_NORM_FUSED);
	assert_int_equal(lb_ckpt_parse("Full", &c), -1);
	assert_int_equal(lb_attn_parse("", &a), -1);
	assert_int_equal(lb_norm_parse(NULL, &n), -1);
}

static int pick(const int *v, int n)
{
	return v[rand() % n];
}

static void random_layout(struct lb_layout *l)
{
	const char *const *names = lb_model_preset_names();
	int npresets = 0;
	static const int small[] = {1, 2, 3, 4, 8, 16, 64};

	while (names[npresets])
		npresets++;
	lb_layout_init(l);
	lb_model_preset(names[rand() % npresets], &l->model);
	if (rand() % 3 == 0)
		l->model.vocab = 128000;
	if (rand() % 5 == 0)
		l->model.tied = !l->model.tied;
	if (rand() % 7 == 0)
		l->model.n_layers = 1 + rand() % 100;
	l->seq_len = 1 << (rand() % 14);
	l->global_batch = 1 + rand() % 4096;
	l->micro_batch = pick(small, 7);
	l->tp = pick(small, 7);
	l->pp = pick(small, 7);
	l->dp = pick(small, 7);
	l->gpus_per_node = pick(small, 7);
	l->nodes = pick(small, 7);
	l->sequence_parallel = rand() % 2;
	l->zero_stage = rand() % 2;
	l->checkpointing = (enum lb_ckpt)(rand() % 3);
	l->attention = (enum lb_attn)(rand() % 3);
	l->norm = (enum lb_norm)(rand() % 2);
	if (rand() % 4 == 0)
		l->virtual_stages = 1 + rand() % LB_MAX_VIRTUAL_STAGES;
	if (rand() % 4 == 0) { /* a split, right or wrong for the layout: printed as given */
		l->n_stage_layers = 1 + rand() % LB_MAX_STAGES;
		for (int i = 0; i < l->n_stage_layers; i++)
			l->stage_layers[i] = 1 + rand() % 100;
	}
	l->steps = 1 + rand() % 1000;
	l->warmup = rand() % 10;
	l->seed = ((uint64_t)rand() << 33) ^ ((uint64_t)rand() << 2) ^ (uint64_t)rand();
}

/* Split the printer's text into argv (the printer never emits quotes or tabs). */
static int split(char *s, char **argv, int max)
{
	int n = 0;
	char *save = NULL, *tok;

	for (tok = strtok_r(s, " ", &save); tok && n < max; tok = strtok_r(NULL, " ", &save))
		argv[n++] = tok;
	return n;
}

static void test_flags_round_trip(void **state)
{
	struct lb_layout a, b;
	char buf[4096], err[256];
	char *argv[128], *rest[128];
	int argc, nrest, i, n;

	srand(20231110);
	for (i = 0; i < 2000; i++) {
		random_layout(&a);
		n = lb_layout_to_flags(&a, buf, sizeof(buf));
		assert_true(n > 0 && (size_t)n < sizeof(buf));
		argc = split(buf, argv, 128);
		lb_layout_init(&b);
		assert_int_equal(
		    lb_layout_parse_args(&b, argc, argv, rest, &nrest, err, sizeof(err)), 0);
		assert_int_equal(nrest, 0);
		assert_true(lb_layout_equal(&a, &b));
	}
}

static void test_parse_args_forms(void **state)
{
	struct lb_layout l;
	char err[256];
	char *argv[] = {
	    "--model=llama-13b",    "run",    "--tp", "2",	"--pp=4", "-v", "--vocab", "128000",
	    "--checkpointing=full", "--seed", "0x10", "--out=x"};
	char *rest[12];
	int nrest;

	lb_layout_init(&l);
	assert_int_equal(lb_layout_parse_args(&l, 12, argv, rest, &nrest, err, sizeof(err)), 0);
	assert_string_equal(l.model.name, "llama-13b");
	assert_int_equal(l.model.hidden, 5120);
	assert_int_equal(l.model.vocab, 128000);
	assert_int_equal(l.tp, 2);
	assert_int_equal(l.pp, 4);
	assert_int_equal(l.checkpointing, LB_CKPT_FULL);
	assert_true(l.seed == 16);
	assert_int_equal(nrest, 3);
	assert_string_equal(rest[0], "run");
	assert_string_equal(rest[1], "-v");
	assert_string_equal(rest[2], "--out=x");
}

static void test_flag_errors(void **state)
{
	struct lb_layout l;
	char err[512];
	char *argv1[] = {"--tp"};
	char *rest[4];
	int nrest;

	lb_layout_init(&l);
	assert_int_equal(lb_layout_set_flag(&l, "--tp", "two", err, sizeof(err)), -1);
	assert_string_equal(err, "--tp: expected a positive integer, got 'two'");
	assert_int_equal(lb_layout_set_flag(&l, "--tp", "0", err, sizeof(err)), -1);
	assert_int_equal(lb_layout_set_flag(&l, "--tp", "3x", err, sizeof(err)), -1);
	assert_int_equal(lb_layout_set_flag(&l, "--tp", " 3", err, sizeof(err)), -1);
	assert_int_equal(lb_layout_set_flag(&l, "--tp", "99999999999", err, sizeof(err)), -1);
	assert_int_equal(lb_layout_set_flag(&l, "--warmup", "-1", err, sizeof(err)), -1);
	assert_int_equal(lb_layout_set_flag(&l, "--warmup", "0", err, sizeof(err)), 1);
	assert_int_equal(lb_layout_set_flag(&l, "--tied", "2", err, sizeof(err)), -1);
	assert_string_equal(err, "--tied: expected 0 or 1, got '2'");
	assert_int_equal(lb_layout_set_flag(&l, "--attention", "xformers", err, sizeof(err)), -1);
	assert_string_equal(err, "--attention: expected naive, fused_softmax, flash or cudnn, got "
				 "'xformers'");
	assert_int_equal(lb_layout_set_flag(&l, "--seed", "-1", err, sizeof(err)), -1);
	assert_int_equal(lb_layout_set_flag(&l, "--model", "gpt-2", err, sizeof(err)), -1);
	assert_string_equal(err, "--model: unknown preset 'gpt-2' (known: llama-7b, llama-13b, "
				 "llama-30b, llama-65b, llama-70b, tiny, tiny-gqa, tiny-deep, "
				 "tiny-tied)");
	assert_int_equal(lb_layout_set_flag(&l, "--nope", "1", err, sizeof(err)), 0);
	assert_int_equal(lb_layout_set_flag(&l, "--tp", NULL, err, sizeof(err)), -1);
	assert_int_equal(lb_layout_parse_args(&l, 1, argv1, rest, &nrest, err, sizeof(err)), -1);
	assert_string_equal(err, "--tp: missing value");
	/* a failed flag leaves the record alone */
	assert_int_equal(l.tp, 1);
	assert_non_null(strstr(lb_layout_flags_usage(), "--sequence-parallel"));
}

static void test_model_flag_resets_fields(void **state)
{
	struct lb_layout l;
	char err[256];

	lb_layout_init(&l);
	assert_int_equal(lb_layout_set_flag(&l, "--vocab", "999", err, sizeof(err)), 1);
	assert_int_equal(lb_layout_set_flag(&l, "--model", "llama-70b", err, sizeof(err)), 1);
	assert_int_equal(l.model.vocab, 32000);
	assert_int_equal(l.model.n_kv_heads, 8);
}

/* A valid 64-GPU layout that each case below breaks in exactly one way. */
static void base(struct lb_layout *l)
{
	lb_layout_init(l);
	lb_model_preset("llama-13b", &l->model);
	l->seq_len = 2048;
	l->global_batch = 2048;
	l->micro_batch = 1;
	l->tp = 2;
	l->pp = 2;
	l->dp = 16;
	l->gpus_per_node = 8;
	l->nodes = 8;
}

struct rule_case {
	const char *reason;
	void (*mutate)(struct lb_layout *l);
};

static void m_layers0(struct lb_layout *l)
{
	l->model.n_layers = 0;
}
static void m_mb_neg(struct lb_layout *l)
{
	l->micro_batch = -1;
}
static void m_steps0(struct lb_layout *l)
{
	l->steps = 0;
}
static void m_warmup_neg(struct lb_layout *l)
{
	l->warmup = -1;
}
static void m_tied2(struct lb_layout *l)
{
	l->model.tied = 2;
}
static void m_sp2(struct lb_layout *l)
{
	l->sequence_parallel = 2;
}
static void m_ckpt(struct lb_layout *l)
{
	l->checkpointing = (enum lb_ckpt)5;
}
static void m_attn(struct lb_layout *l)
{
	l->attention = (enum lb_attn)5;
}
static void m_norm(struct lb_layout *l)
{
	l->norm = (enum lb_norm)5;
}
static void m_zero3(struct lb_layout *l)
{
	l->zero_stage = 3;
}
static void m_hidden(struct lb_layout *l)
{
	l->model.hidden = 5004;
}
static void m_headdim_odd(struct lb_layout *l)
{
	l->model.hidden = 120;
	l->model.n_heads = 8;
	l->model.n_kv_heads = 8;
	l->model.ffn = 256;
}
static void m_kv(struct lb_layout *l)
{
	l->model.n_kv_heads = 6;
}
static void m_tp3(struct lb_layout *l)
{
	l->tp = 3;
	l->dp = 1;
	l->gpus_per_node = 6;
	l->nodes = 1;
	l->global_batch = 2049;
}
static void m_tp_kv(struct lb_layout *l)
{
	l->model.n_kv_heads = 5;
	l->model.n_heads = 40;
}
static void m_ffn(struct lb_layout *l)
{
	l->model.ffn = 13825;
}
static void m_vocab(struct lb_layout *l)
{
	l->model.vocab = 32001;
}
static void m_pp41(struct lb_layout *l)
{
	l->pp = 41;
	l->dp = 1;
	l->gpus_per_node = 2;
	l->nodes = 41;
}
static void m_tp_node(struct lb_layout *l)
{
	l->tp = 8;
	l->dp = 4;
	l->gpus_per_node = 4;
	l->nodes = 16;
}
static void m_world(struct lb_layout *l)
{
	l->dp = 8;
}
static void m_batch(struct lb_layout *l)
{
	l->micro_batch = 3;
}
static void m_sp_tp1(struct lb_layout *l)
{
	l->sequence_parallel = 1;
	l->tp = 1;
	l->dp = 32;
}
static void m_sp_seq(struct lb_layout *l)
{
	l->sequence_parallel = 1;
	l->seq_len = 2049;
}
static void m_warmup(struct lb_layout *l)
{
	l->warmup = 10;
	l->steps = 10;
}

static void m_v0(struct lb_layout *l)
{
	l->virtual_stages = 0;
}
static void m_v_pp1(struct lb_layout *l)
{
	l->pp = 1;
	l->dp = 32;
	l->virtual_stages = 2;
}
static void m_v_layers(struct lb_layout *l)
{
	l->pp = 4;
	l->dp = 8;
	l->virtual_stages = 16;
}
static void m_v_accum(struct lb_layout *l)
{
	l->pp = 4;
	l->dp = 8;
	l->global_batch = 2040;
	l->virtual_stages = 2;
}
static void m_split_count(struct lb_layout *l)
{
	l->n_stage_layers = 3;
	l->stage_layers[0] = l->stage_layers[1] = 13;
	l->stage_layers[2] = 14;
}
static void m_split_count_v(struct lb_layout *l)
{
	l->virtual_stages = 2;
	l->n_stage_layers = 2;
	l->stage_layers[0] = l->stage_layers[1] = 20;
}
static void m_split_zero(struct lb_layout *l)
{
	l->n_stage_layers = 2;
	l->stage_layers[0] = 40;
	l->stage_layers[1] = 0;
}
static void m_split_sum(struct lb_layout *l)
{
	l->n_stage_layers = 2;
	l->stage_layers[0] = 19;
	l->stage_layers[1] = 20;
}

static const struct rule_case rules[] = {
    {"layers=0 must be positive", m_layers0},
    {"micro_batch=-1 must be positive", m_mb_neg},
    {"steps=0 must be positive", m_steps0},
    {"warmup=-1 must not be negative", m_warmup_neg},
    {"tied=2 must be 0 or 1", m_tied2},
    {"sequence_parallel=2 must be 0 or 1", m_sp2},
    {"checkpointing=5 is not none, full or selective", m_ckpt},
    {"attention=5 is not naive, fused_softmax, flash or cudnn", m_attn},
    {"norm=5 is not unfused or fused", m_norm},
    {"zero_stage=3 is not supported (0, 1 or 2)", m_zero3},
    {"40 heads do not divide hidden=5004", m_hidden},
    {"head dim 15 (hidden=120 / 8 heads) is odd; rope needs an even head dim", m_headdim_odd},
    {"6 kv heads do not divide 40 heads", m_kv},
    {"tp=3 does not divide 40 heads", m_tp3},
    {"tp=2 does not divide 5 kv heads", m_tp_kv},
    {"tp=2 does not divide ffn=13825", m_ffn},
    {"tp=2 does not divide vocab=32001", m_vocab},
    {"pp=41 exceeds 40 layers; every pipeline stage needs at least one layer", m_pp41},
    {"tp=8 exceeds gpus_per_node=4; tensor parallelism stays within one node", m_tp_node},
    {"gpus_per_node*nodes=64 but tp*pp*dp=32", m_world},
    {"global_batch=2048 is not divisible by micro_batch*dp=48", m_batch},
    {"sequence_parallel=1 needs tp > 1", m_sp_tp1},
    {"sequence_parallel=1 needs seq_len=2049 divisible by tp=2", m_sp_seq},
    {"warmup=10 must be below steps=10", m_warmup},
    {"virtual_stages=0 is not in 1..16", m_v0},
    {"virtual_stages=2 needs pp > 1 (the interleaved schedule splits pipeline stages)", m_v_pp1},
    {"pp*virtual_stages=64 exceeds 40 layers; every model chunk needs at least one layer",
     m_v_layers},
    {"virtual_stages=2 needs the micro-batches per step (global_batch/(micro_batch*dp)=255) "
     "to be a multiple of pp=4 (the interleaved schedule's rule)",
     m_v_accum},
    {"stage_layers has 3 entries; pp=2 needs one per stage", m_split_count},
    {"stage_layers has 2 entries; pp*virtual_stages=4 needs one per model chunk", m_split_count_v},
    {"stage_layers[1]=0; every stage needs at least one layer", m_split_zero},
    {"stage_layers sum to 39 layers; the model has 40", m_split_sum},
};

static void test_every_rule(void **state)
{
	struct lb_layout l;
	char reason[256];
	size_t i;

	base(&l);
	assert_int_equal(lb_layout_check(&l, reason, sizeof(reason)), 0);
	for (i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		base(&l);
		rules[i].mutate(&l);
		reason[0] = '\0';
		if (lb_layout_check(&l, reason, sizeof(reason)) != -1 ||
		    strcmp(reason, rules[i].reason))
			fail_msg("case %zu: want '%s', got '%s'", i, rules[i].reason, reason);
	}
	/* the reason buffer may be absent */
	base(&l);
	l.tp = 3;
	assert_int_equal(lb_layout_check(&l, NULL, 0), -1);
}

static void test_sequence_parallel_valid(void **state)
{
	struct lb_layout l;
	char reason[256];

	base(&l);
	l.sequence_parallel = 1;
	assert_int_equal(lb_layout_check(&l, reason, sizeof(reason)), 0);
}

/* Uneven pipelines are valid: pp only has to leave every stage a layer. */
static void test_uneven_pipeline_valid(void **state)
{
	struct lb_layout l;
	char reason[256];

	base(&l);
	lb_model_preset("llama-30b", &l.model);
	l.tp = 1;
	l.dp = 1;
	l.global_batch = 7;
	l.gpus_per_node = 1;
	for (int pp = 1; pp <= 60; pp++) {
		l.pp = pp;
		l.nodes = pp;
		if (lb_layout_check(&l, reason, sizeof(reason)))
			fail_msg("pp=%d over 60 layers: %s", pp, reason);
	}
	l.pp = 7;
	l.nodes = 7;
	assert_int_equal(lb_layout_check(&l, reason, sizeof(reason)), 0);
	l.pp = 61;
	l.nodes = 61;
	assert_int_equal(lb_layout_check(&l, reason, sizeof(reason)), -1);
	assert_string_equal(reason, "pp=61 exceeds 60 layers; every pipeline stage needs at least "
				    "one layer");
	/* the trainer's own example: 6 layers on 8 stages */
	lb_layout_init(&l);
	l.model.n_layers = 6;
	l.pp = 8;
	l.gpus_per_node = 8;
	assert_int_equal(lb_layout_check(&l, reason, sizeof(reason)), -1);
	assert_string_equal(reason, "pp=8 exceeds 6 layers; every pipeline stage needs at least "
				    "one layer");
}

/* The split rule: floor(L/p) layers each, the remainder to the middle stages. */
static void test_stage_layers(void **state)
{
	static const struct {
		int layers, pp;
		const char *sizes;
	} cases[] = {
	    {60, 8, "7 7 8 8 8 8 7 7"}, {60, 16, "3 3 4 4 4 4 4 4 4 4 4 4 4 4 3 3"},
	    {6, 4, "1 2 2 1"},		{4, 3, "1 2 1"},
	    {8, 8, "1 1 1 1 1 1 1 1"},	{40, 4, "10 10 10 10"},
	    {7, 4, "1 2 2 2"},		{5, 2, "2 3"},
	    {9, 5, "1 2 2 2 2"},	{11, 5, "2 2 3 2 2"},
	    {12, 5, "2 2 3 3 2"},	{5, 1, "5"},
	};
	struct lb_layout l;
	int lo, hi;

	lb_layout_init(&l);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char got[256];
		size_t used = 0;
		int next = 0;

		l.model.n_layers = cases[c].layers;
		l.pp = cases[c].pp;
		got[0] = '\0';
		for (int s = 0; s < l.pp; s++) {
			assert_int_equal(lb_stage_layers(&l, s, &lo, &hi), 0);
			/* contiguous, in order, covering every layer once */
			assert_int_equal(lo, next);
			assert_true(hi > lo);
			next = hi;
			used += (size_t)snprintf(got + used, sizeof(got) - used, "%s%d",
						 s ? " " : "", hi - lo);
		}
		assert_int_equal(next, cases[c].layers);
		if (strcmp(got, cases[c].sizes))
			fail_msg("%d layers on %d stages: want '%s', got '%s'", cases[c].layers,
				 cases[c].pp, cases[c].sizes, got);
	}
	/* every split of up to 64 layers: sizes differ by at most one, ends get the smaller */
	for (int n = 1; n <= 64; n++)
		for (int p = 1; p <= n; p++) {
			int q = n / p, next = 0;

			l.model.n_layers = n;
			l.pp = p;
			for (int s = 0; s < p; s++) {
				assert_int_equal(lb_stage_layers(&l, s, &lo, &hi), 0);
				assert_int_equal(lo, next);
				assert_true(hi - lo == q || hi - lo == q + 1);
				next = hi;
			}
			assert_int_equal(next, n);
			assert_int_equal(lb_stage_layers(&l, 0, &lo, &hi), 0);
			if (p - n % p >= 1)
				assert_int_equal(hi - lo, q);
			assert_int_equal(lb_stage_layers(&l, p - 1, &lo, &hi), 0);
			if (p - n % p >= 2)
				assert_int_equal(hi - lo, q);
		}
	/* out of range: stage outside [0, pp), pp above the layers, pp 0 */
	l.model.n_layers = 6;
	l.pp = 4;
	lo = hi = -7;
	assert_int_equal(lb_stage_layers(&l, 4, &lo, &hi), -1);
	assert_int_equal(lb_stage_layers(&l, -1, &lo, &hi), -1);
	assert_int_equal(lo, -7);
	l.pp = 7;
	assert_int_equal(lb_stage_layers(&l, 0, &lo, &hi), -1);
	l.pp = 0;
	assert_int_equal(lb_stage_layers(&l, 0, &lo, &hi), -1);
}

/* Model chunks (virtual stages): the rule over pp * v chunks in pipeline order, stage s
 * holding chunks s, s + pp, ...; an explicit split gives each chunk its entry. */
static void test_chunk_layers(void **state)
{
	struct lb_layout l;
	char reason[256];
	int lo, hi;

	lb_layout_init(&l);
	l.model.n_layers = 8;
	l.pp = 2;
	l.virtual_stages = 3; /* 6 chunks: 1 1 2 2 1 1 */
	l.gpus_per_node = 2;
	assert_int_equal(lb_layout_check(&l, reason, sizeof(reason)), 0);
	assert_int_equal(lb_layout_chunks(&l), 3);
	assert_int_equal(lb_chunk_layers(&l, 0, 0, &lo, &hi), 0); /* chunk 0 */
	assert_true(lo == 0 && hi == 1);
	assert_int_equal(lb_chunk_layers(&l, 1, 0, &lo, &hi), 0); /* chunk 1 */
	assert_true(lo == 1 && hi == 2);
	assert_int_equal(lb_chunk_layers(&l, 0, 1, &lo, &hi), 0); /* chunk 2 */
	assert_true(lo == 2 && hi == 4);
	assert_int_equal(lb_chunk_layers(&l, 1, 1, &lo, &hi), 0); /* chunk 3 */
	assert_true(lo == 4 && hi == 6);
	assert_int_equal(lb_chunk_layers(&l, 1, 2, &lo, &hi), 0); /* chunk 5 */
	assert_true(lo == 7 && hi == 8);
	assert_int_equal(lb_chunk_layers(&l, 1, 3, &lo, &hi), -1);
	assert_int_equal(lb_stage_layer_count(&l, 0), 4);
	assert_int_equal(lb_stage_layer_count(&l, 1), 4);
	/* an explicit split of the chunks */
	assert_int_equal(
	    lb_layout_set_flag(&l, "--stage-layers", "1,1,3,1,1,1", reason, sizeof(reason)), 1);
	assert_int_equal(lb_layout_check(&l, reason, sizeof(reason)), 0);
	assert_int_equal(lb_chunk_layers(&l, 0, 1, &lo, &hi), 0);
	assert_true(lo == 2 && hi == 5);
	assert_int_equal(lb_stage_layer_count(&l, 0), 5);
	/* a split of the wrong length is no split: nothing to cut by */
	l.virtual_stages = 2;
	assert_int_equal(lb_chunk_layers(&l, 0, 0, &lo, &hi), -1);
	assert_int_equal(lb_stage_layer_count(&l, 0), -1);
}

/* The canonical text is built by plain appends: the same bytes as the one snprintf it
 * replaced, for every field at its extremes (negative and INT_MIN included), and the same
 * snprintf contract when the buffer is short. */
static void test_canonical_as_snprintf(void **state)
{
	static const int vals[] = {0, 1, -1, 7, 10, 99, 100, 12345, INT_MAX, INT_MIN, -40};
	char got[2048], want[2048];
	struct lb_layout l;

	(void)state;
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		int v = vals[i], ng, nw;

		lb_layout_init(&l);
		lb_model_preset("llama-13b", &l.model);
		l.model.n_layers = v;
		l.model.vocab = v == INT_MIN ? INT_MAX : -v;
		l.tp = v;
		l.dp = v / 3;
		l.nodes = v;
		l.zero_stage = v % 3;
		l.checkpointing = (enum lb_ckpt)(i % 3);
		nw = snprintf(want, sizeof(want),
			      "model=%s layers=%d hidden=%d heads=%d kv_heads=%d ffn=%d vocab=%d "
			      "tied=%d seq_len=%d global_batch=%d micro_batch=%d tp=%d pp=%d dp=%d "
			      "gpus_per_node=%d nodes=%d sequence_parallel=%d zero_stage=%d "
			      "checkpointing=%s attention=%s norm=%s",
			      l.model.name, l.model.n_layers, l.model.hidden, l.model.n_heads,
			      l.model.n_kv_heads, l.model.ffn, l.model.vocab, l.model.tied,
			      l.seq_len, l.global_batch, l.micro_batch, l.tp, l.pp, l.dp,
			      l.gpus_per_node, l.nodes, l.sequence_parallel, l.zero_stage,
			      lb_ckpt_name(l.checkpointing), lb_attn_name(l.attention),
			      lb_norm_name(l.norm));
		ng = lb_layout_canonical(&l, got, sizeof(got));
		assert_int_equal(ng, nw);
		assert_string_equal(got, want);
		for (size_t cut = 0; cut < 40; cut += 7) { /* truncated as snprintf truncates */
			memset(got, 'x', sizeof(got));
			assert_int_equal(lb_layout_canonical(&l, got, cut), nw);
			if (cut)
				assert_memory_equal(got, want, cut - 1);
			if (cut)
				assert_int_equal(got[cut - 1], '\0');
			assert_int_equal(got[cut], 'x');
		}
	}
}

/* virtual_stages and stage_layers in the canonical text, the id and the flags: only where
 * they change the layout, so a split equal to the rule's is the same layout. */
static void test_pipeline_fields(void **state)
{
	struct lb_layout a, b;
	char buf[1024], ia[LB_ID_LEN + 1], ib[LB_ID_LEN + 1], err[256];
	char *argv[128], *rest[128];
	int argc, nrest;

	paper_13b(&a);
	a.pp = 4;
	a.dp = 8;
	lb_layout_id(&a, ia);
	b = a;
	assert_int_equal(lb_layout_set_flag(&b, "--stage-layers", "10,10,10,10", err, sizeof(err)),
			 1);
	assert_int_equal(b.n_stage_layers, 4);
	assert_false(lb_layout_split_explicit(&b));
	lb_layout_id(&b, ib);
	assert_string_equal(ia, ib);
	assert_true(lb_layout_equal(&a, &b));
	assert_int_equal(lb_layout_set_flag(&b, "--stage-layers", "9,11,11,9", err, sizeof(err)),
			 1);
	assert_true(lb_layout_split_explicit(&b));
	lb_layout_canonical(&b, buf, sizeof(buf));
	assert_non_null(strstr(buf, " norm=fused stage_layers=9,11,11,9"));
	lb_layout_id(&b, ib);
	assert_string_not_equal(ia, ib);
	assert_false(lb_layout_equal(&a, &b));
	b.virtual_stages = 2;
	b.n_stage_layers = 0;
	lb_layout_canonical(&b, buf, sizeof(buf));
	assert_non_null(strstr(buf, " norm=fused virtual_stages=2"));
	lb_layout_to_flags(&b, buf, sizeof(buf));
	assert_non_null(strstr(buf, " --norm fused --virtual-stages 2 --steps"));
	/* the flags give the record back */
	assert_int_equal(
	    lb_layout_set_flag(&b, "--stage-layers", "5,5,5,5,5,5,5,5", err, sizeof(err)), 1);
	assert_false(lb_layout_split_explicit(&b)); /* 40 on 8 chunks: the rule's */
	b.stage_layers[0] = 4;
	b.stage_layers[7] = 6;
	lb_layout_to_flags(&b, buf, sizeof(buf));
	assert_non_null(strstr(buf, " --virtual-stages 2 --stage-layers 4,5,5,5,5,5,5,6 "));
	argc = split(buf, argv, 128);
	lb_layout_init(&a);
	assert_int_equal(lb_layout_parse_args(&a, argc, argv, rest, &nrest, err, sizeof(err)), 0);
	assert_true(lb_layout_equal(&a, &b));
	lb_layout_id(&a, ia);
	lb_layout_id(&b, ib);
	assert_string_equal(ia, ib);
	/* "rule" (or nothing) clears the split */
	assert_int_equal(lb_layout_set_flag(&b, "--stage-layers", "rule", err, sizeof(err)), 1);
	assert_int_equal(b.n_stage_layers, 0);
	/* errors: an entry that is not a positive number, too many, a bad count of chunks */
	assert_int_equal(lb_layout_set_flag(&b, "--stage-layers", "7,0,8", err, sizeof(err)), -1);
	assert_string_equal(err, "--stage-layers: entry 2 is '0'; every stage needs a positive "
				 "number of layers (e.g. 7,8,8,7)");
	assert_int_equal(lb_layout_set_flag(&b, "--stage-layers", "7,,8", err, sizeof(err)), -1);
	assert_string_equal(err, "--stage-layers: expected positive integers separated by "
				 "commas (layers per stage, e.g. 7,8,8,7), got '7,,8'");
	assert_int_equal(lb_layout_set_flag(&b, "--stage-layers", "7,x", err, sizeof(err)), -1);
	assert_int_equal(b.n_stage_layers, 0); /* a failed flag leaves the record alone */
	memset(buf, 0, sizeof(buf));
	for (int i = 0; i < LB_MAX_STAGES + 1; i++)
		strcat(buf, i ? ",1" : "1");
	assert_int_equal(lb_layout_set_flag(&b, "--stage-layers", buf, err, sizeof(err)), -1);
	assert_int_equal(lb_layout_set_flag(&b, "--virtual-stages", "0", err, sizeof(err)), -1);
	assert_string_equal(err, "--virtual-stages: expected an integer from 1 to 16, got '0'");
	assert_int_equal(lb_layout_set_flag(&b, "--virtual-stages", "17", err, sizeof(err)), -1);
	assert_non_null(strstr(lb_layout_flags_usage(), "--stage-layers"));
}

static void test_kernel_map(void **state)
{
	static const struct {
		const char *k;
		enum lb_attn a;
		enum lb_norm n;
	} want[] = {
	    {"torch", LB_ATTN_NAIVE, LB_NORM_UNFUSED},
	    {"fused", LB_ATTN_FUSED_SOFTMAX, LB_NORM_UNFUSED},
	    {"flash_attention", LB_ATTN_FLASH, LB_NORM_UNFUSED},
	    {"flash_attentionv1.0.8", LB_ATTN_FLASH, LB_NORM_UNFUSED},
	    {"flash_attention2", LB_ATTN_FLASH, LB_NORM_UNFUSED},
	    {"flash_attention2 + RMS kernel", LB_ATTN_FLASH, LB_NORM_FUSED},
	};
	enum lb_attn a;
	enum lb_norm n;
	size_t i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		assert_int_equal(lb_kernel_name_map(want[i].k, &a, &n), 0);
		assert_int_equal(a, want[i].a);
		assert_int_equal(n, want[i].n);
	}
	assert_int_equal(lb_kernel_name_map("flash_attention3", &a, &n), -1);
	/* the paper ran no cuDNN attention: no paper name stands for cudnn, and our own
	 * attention names are not paper names */
	for (i = 0; i < lb_kernel_name_count; i++)
		assert_int_not_equal(lb_kernel_names[i].attention, LB_ATTN_CUDNN);
	for (int k = LB_ATTN_NAIVE; k <= LB_ATTN_CUDNN; k++) {
		assert_int_equal(lb_kernel_name_index(lb_attn_name((enum lb_attn)k)), -1);
		assert_int_equal(lb_attn_parse(lb_attn_name((enum lb_attn)k), &a), 0);
		assert_int_equal(a, k);
	}
	assert_int_equal(lb_kernel_name_map("cudnn", &a, &n), -1);
	assert_int_equal(lb_kernel_name_map(NULL, &a, &n), -1);
	/* the table is in the paper's order, slowest first */
	assert_int_equal(lb_kernel_name_index("torch"), 0);
	assert_int_equal(lb_kernel_name_index(LB_KERNEL_FLASH2_RMS), (int)lb_kernel_name_count - 1);
	char list[256];
	assert_string_equal(
	    lb_kernel_names_list(list, sizeof(list)),
	    "torch, fused, flash_attention, flash_attentionv1.0.8, flash_attention2, "
	    "\"flash_attention2 + RMS kernel\"");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_init_defaults),
	    cmocka_unit_test(test_canonical_golden),
	    cmocka_unit_test(test_canonical_as_snprintf),
	    cmocka_unit_test(test_id_ignores_run_settings),
	    cmocka_unit_test(test_enum_names),
	    cmocka_unit_test(test_flags_round_trip),
	    cmocka_unit_test(test_parse_args_forms),
	    cmocka_unit_test(test_flag_errors),
	    cmocka_unit_test(test_model_flag_resets_fields),
	    cmocka_unit_test(test_every_rule),
	    cmocka_unit_test(test_sequence_parallel_valid),
	    cmocka_unit_test(test_uneven_pipeline_valid),
	    cmocka_unit_test(test_stage_layers),
	    cmocka_unit_test(test_chunk_layers),
	    cmocka_unit_test(test_pipeline_fields),
	    cmocka_unit_test(test_kernel_map),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
