/*
 * Unit tests of grid expansion and planning (sweeps/sweep.c): cartesian product order,
 * zip, union with member overrides, derived dp / gpus / nodes, `where` (dropped and
 * counted), the kernel pseudo-field and its labels, virtual stages and explicit layer
 * splits as axes, duplicate merging, invalid and oom statuses with reasons, the point
 * limit, and loading embedded specs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sweeps/sweep.h"

static struct sweep_plan plan_ok(const char *text)
{
	struct sweep_plan p;
	char err[1024] = "";

	if (sweep_plan_text("t.json", text, strlen(text), &p, err, sizeof(err)))
		fail_msg("plan failed: %s", err);
	return p;
}

#define HEAD "\"name\": \"t\", \"model\": \"tiny\", "

static void test_product_order(void **state)
{
	struct sweep_plan p = plan_ok("{" HEAD "\"grid\": {\"tp\": [1, 2], \"pp\": [1, 2, 4]},"
				      "\"cluster\": {\"gpus_per_node\": 8}}");
	static const int tp[] = {1, 1, 1, 2, 2, 2}, pp[] = {1, 2, 4, 1, 2, 4};
	size_t i;

	(void)state;
	assert_int_equal(p.n_entries, 6);
	for (i = 0; i < 6; i++) {
		assert_int_equal(p.entries[i].layout.tp, tp[i]);
		assert_int_equal(p.entries[i].layout.pp, pp[i]);
		assert_int_equal(p.entries[i].layout.dp, 1); /* no gpus: dp defaults to 1 */
	}
	assert_int_equal(p.n_ok + p.n_oom + p.n_invalid, 6);
	assert_string_equal(p.name, "t");
	sweep_plan_free(&p);
}

static void test_zip(void **state)
{
	struct sweep_plan p =
	    plan_ok("{" HEAD "\"grid\": {\"micro_batch\": [1, 2]},"
		    "\"zip\": [{\"tp\": [1, 2, 4], \"pp\": [4, 2, 1]}], \"fixed\": {\"gpus\": 8},"
		    "\"cluster\": {\"gpus_per_node\": 8}}");
	size_t i;

	(void)state;
	assert_int_equal(p.n_entries, 6);
	for (i = 0; i < 6; i++) {
		const struct lb_layout *l = &p.entries[i].layout;

		assert_int_equal(l->tp * l->pp, 4);
		assert_int_equal(l->dp, 2); /* derived: 8 / (tp * pp) */
		assert_int_equal(l->micro_batch, i < 3 ? 1 : 2);
	}
	sweep_plan_free(&p);
}

static void test_union(void **state)
{
	struct sweep_plan p =
	    plan_ok("{" HEAD "\"fixed\": {\"micro_batch\": 2, \"checkpointing\": \"full\"},"
		    "\"grid\": {\"tp\": [1, 2]},"
		    "\"union\": [{\"grid\": {\"kernel\": [\"torch\", \"fused\"]}},"
		    "{\"fixed\": {\"micro_batch\": 1, \"checkpointing\": \"none\"},"
		    "\"grid\": {\"kernel\": [\"flash_attention2 + RMS kernel\"]}}],"
		    "\"cluster\": {\"gpus_per_node\": 8}}");

	(void)state;
	assert_int_equal(p.n_entries, 6);
	/* member 0: tp x kernel, mb 2, full */
	assert_int_equal(p.entries[0].layout.micro_batch, 2);
	assert_int_equal(p.entries[0].layout.checkpointing, LB_CKPT_FULL);
	assert_int_equal(p.entries[0].layout.attention, LB_ATTN_NAIVE);
	assert_int_equal(p.entries[0].layout.norm, LB_NORM_UNFUSED);
	assert_string_equal(p.entries[0].label, "torch");
	assert_int_equal(p.entries[1].layout.attention, LB_ATTN_FUSED_SOFTMAX);
	assert_string_equal(p.entries[1].label, "fused");
	assert_int_equal(p.entries[2].layout.tp, 2);
	/* member 1 overrides the top-level fixed values */
	assert_int_equal(p.entries[4].layout.micro_batch, 1);
	assert_int_equal(p.entries[4].layout.checkpointing, LB_CKPT_NONE);
	assert_int_equal(p.entries[4].layout.attention, LB_ATTN_FLASH);
	assert_int_equal(p.entries[4].layout.norm, LB_NORM_FUSED);
	assert_string_equal(p.entries[4].label, "flash_attention2 + RMS kernel");
	assert_int_equal(p.entries[5].layout.tp, 2);
	sweep_plan_free(&p);
}

static void test_derived(void **state)
{
	struct sweep_plan p =
	    plan_ok("{" HEAD "\"fixed\": {\"global_batch\": 64}, \"grid\": {\"gpus\": [4, 16, 24],"
		    "\"tp\": [2, 3]}, \"cluster\": {\"gpus_per_node\": 8}}");
	const struct plan_entry *e = p.entries;

	(void)state;
	assert_int_equal(p.n_entries, 6);
	/* 4 GPUs, tp 2: dp 2, a partial node */
	assert_int_equal(e[0].layout.dp, 2);
	assert_int_equal(e[0].layout.gpus_per_node, 4);
	assert_int_equal(e[0].layout.nodes, 1);
	assert_int_equal(e[0].status, PLAN_OK);
	/* 4 GPUs, tp 3: not divisible */
	assert_int_equal(e[1].status, PLAN_INVALID);
	assert_string_equal(e[1].reason, "gpus=4 is not divisible by tp*pp=3");
	/* 16 GPUs, tp 2: dp 8 on two nodes */
	assert_int_equal(e[2].layout.dp, 8);
	assert_int_equal(e[2].layout.gpus_per_node, 8);
	assert_int_equal(e[2].layout.nodes, 2);
	/* 24 GPUs, tp 3: dp 8, but tp=3 does not divide 4 heads (the layout rule's reason) */
	assert_int_equal(e[5].layout.dp, 8);
	assert_int_equal(e[5].layout.nodes, 3);
	assert_int_equal(e[5].status, PLAN_INVALID);
	assert_string_equal(e[5].reason, "tp=3 does not divide 4 heads");
	sweep_plan_free(&p);

	/* gpus and dp both given and inconsistent: the layout rule flags it */
	p = plan_ok("{" HEAD "\"fixed\": {\"gpus\": 16, \"dp\": 1, \"tp\": 2},"
		    "\"cluster\": {\"gpus_per_node\": 8}}");
	assert_int_equal(p.n_entries, 1);
	assert_int_equal(p.entries[0].status, PLAN_INVALID);
	assert_non_null(strstr(p.entries[0].reason, "gpus_per_node*nodes=16 but tp*pp*dp=2"));
	sweep_plan_free(&p);
}

static void test_where(void **state)
{
	struct sweep_plan p =
	    plan_ok("{" HEAD "\"fixed\": {\"gpus\": 8, \"global_batch\": 32},"
		    "\"grid\": {\"tp\": [1, 2, 4], \"micro_batch\": [1, 2, 4]},"
		    "\"where\": \"accum >= 4 and divides(tp, heads) and gpus_per_node == 8\","
		    "\"cluster\": {\"gpus_per_node\": 8}}");
	size_t i;

	(void)state;
	/* dp = 8/tp; accum = 32/(mb*dp): tp1: 4,2,1; tp2: 8,4,2; tp4: 16,8,4 */
	assert_int_equal(p.n_entries, 6);
	assert_int_equal(p.n_filtered, 3);
	for (i = 0; i < p.n_entries; i++)
		assert_true(32 / (p.entries[i].layout.micro_batch * p.entries[i].layout.dp) >= 4);
	sweep_plan_free(&p);

	/* union members: the top-level where and the member's both apply */
	p = plan_ok("{" HEAD "\"grid\": {\"tp\": [1, 2, 4]}, \"where\": \"tp < 4\","
		    "\"union\": [{\"fixed\": {\"micro_batch\": 1}, \"where\": \"tp == 1\"},"
		    "{\"fixed\": {\"micro_batch\": 2}}], \"cluster\": {\"gpus_per_node\": 8}}");
	assert_int_equal(p.n_entries, 3);
	assert_int_equal(p.n_filtered, 3);
	assert_int_equal(p.entries[0].layout.tp, 1);
	assert_int_equal(p.entries[1].layout.micro_batch, 2);
	sweep_plan_free(&p);

	/* enum comparisons and the model name */
	p = plan_ok("{\"name\": \"t\", \"models\": [\"tiny\", \"tiny-deep\"],"
		    "\"grid\": {\"attention\": [\"naive\", \"flash\"]},"
		    "\"where\": \"attention == \\\"flash\\\" and model == \\\"tiny-deep\\\"\"}");
	assert_int_equal(p.n_entries, 1);
	assert_string_equal(p.entries[0].layout.model.name, "tiny-deep");
	assert_int_equal(p.entries[0].layout.attention, LB_ATTN_FLASH);
	sweep_plan_free(&p);
}

static void test_where_runtime_error(void **state)
{
	struct sweep_plan p;
	char err[512];
	const char *t =
	    "{" HEAD "\"grid\": {\"tp\": [1, 2]}, \"union\": [{\"where\": \"1 / (tp - 2)\"}]}";

	(void)state;
	assert_int_equal(sweep_plan_text("t.json", t, strlen(t), &p, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "t.json: union[0].where: column 3: division by zero"));
	assert_null(p.entries);
}

static void test_where_underivable_dp(void **state)
{
	/* gpus=8, tp=3: dp cannot be derived (0); the where divides by it */
	struct sweep_plan p = plan_ok("{" HEAD "\"fixed\": {\"gpus\": 8},"
				      "\"grid\": {\"tp\": [2, 3]}, \"where\": \"gpus / dp >= 1\","
				      "\"cluster\": {\"gpus_per_node\": 8}}");

	(void)state;
	assert_int_equal(p.n_entries, 2);
	assert_int_equal(p.entries[1].status, PLAN_INVALID);
	assert_string_equal(p.entries[1].reason, "gpus=8 is not divisible by tp*pp=3");
	sweep_plan_free(&p);
}

static void test_threads_same_plan(void **state)
{
	const char *t = "{\"name\": \"t\", \"models\": [\"llama-13b\", \"llama-30b\"],"
			"\"fixed\": {\"gpus\": 64},"
			"\"grid\": {\"tp\": [1, 2, 3, 4, 8], \"pp\": [1, 2, 4, 5],"
			"\"micro_batch\": [1, 2, 4]},"
			"\"union\": [{\"grid\": {\"kernel\": [\"torch\", \"flash_attention2\","
			"\"flash_attentionv1.0.8\"]}}, {\"zip\": [{\"seq_len\": [2048, 8192],"
			"\"global_batch\": [2048, 512]}]}],"
			"\"where\": \"accum >= 1 or tp == 3\", \"cluster\": {\"gpu_mem_gib\": 80}}";
	struct sweep_opts o1 = {0, 1}, o3 = {0, 3};
	struct sweep_plan a, b;
	char err[512];

	(void)state;
	assert_int_equal(sweep_plan_text_opts("t", t, strlen(t), &o1, &a, err, sizeof(err)), 0);
	assert_int_equal(sweep_plan_text_opts("t", t, strlen(t), &o3, &b, err, sizeof(err)), 0);
	assert_int_equal(a.n_entries, b.n_entries);
	assert_true(a.n_entries > 100);
	assert_int_equal(a.n_duplicates, b.n_duplicates);
	assert_true(a.n_duplicates > 0);
	assert_int_equal(a.n_filtered, b.n_filtered);
	assert_int_equal(a.n_ok, b.n_ok);
	assert_int_equal(a.n_oom, b.n_oom);
	assert_int_equal(a.n_invalid, b.n_invalid);
	assert_memory_equal(a.entries, b.entries, a.n_entries * sizeof(*a.entries));
	sweep_plan_free(&a);
	sweep_plan_free(&b);
}

static void test_duplicates(void **state)
{
	struct sweep_plan p = plan_ok(
	    "{" HEAD "\"grid\": {\"kernel\": [\"flash_attentionv1.0.8\", \"flash_attention2\", "
	    "\"torch\", \"flash_attention\"], \"micro_batch\": [1, 2]}}");

	(void)state;
	/* the three FlashAttention versions are one layout: merged, labels joined */
	assert_int_equal(p.n_entries, 4);
	assert_int_equal(p.n_duplicates, 4);
	assert_string_equal(p.entries[0].label,
			    "flash_attentionv1.0.8|flash_attention2|flash_attention");
	assert_int_equal(p.entries[0].layout.micro_batch, 1);
	assert_int_equal(p.entries[1].layout.micro_batch, 2);
	assert_string_equal(p.entries[2].label, "torch");
	assert_int_equal(p.n_ok + p.n_oom + p.n_invalid, p.n_entries);
	sweep_plan_free(&p);

	/* the same point twice in a union: merged once, counted */
	p = plan_ok("{" HEAD "\"union\": [{\"fixed\": {\"tp\": 1}}, {\"fixed\": {\"tp\": 1}}]}");
	assert_int_equal(p.n_entries, 1);
	assert_int_equal(p.n_duplicates, 1);
	sweep_plan_free(&p);
}

static void test_status(void **state)
{
	struct sweep_plan p = plan_ok("{" HEAD "\"fixed\": {\"seq_len\": 64, \"global_batch\": 8},"
				      "\"grid\": {\"tp\": [1, 3]}, \"cluster\": "
				      "{\"gpus_per_node\": 8, \"gpu_mem_gib\": 0.001}}");

	(void)state;
	assert_int_equal(p.n_entries, 2);
	assert_int_equal(p.entries[0].status, PLAN_OOM);
	assert_non_null(strstr(p.entries[0].reason, "needs "));
	assert_non_null(strstr(p.entries[0].reason, " GiB of 0.0 GiB"));
	assert_true(p.entries[0].mem_gib > 0.001);
	assert_int_equal(p.entries[1].status, PLAN_INVALID);
	assert_string_equal(p.entries[1].reason, "tp=3 does not divide 4 heads");
	assert_int_equal(p.n_oom, 1);
	assert_int_equal(p.n_invalid, 1);
	assert_string_equal(sweep_status_name(PLAN_OK), "ok");
	assert_string_equal(sweep_status_name(PLAN_OOM), "oom");
	assert_string_equal(sweep_status_name(PLAN_INVALID), "invalid");
	sweep_plan_free(&p);

	/* no gpu_mem_gib: no pruning, memory still estimated */
	p = plan_ok("{" HEAD "\"fixed\": {\"seq_len\": 64}}");
	assert_int_equal(p.entries[0].status, PLAN_OK);
	assert_true(p.entries[0].mem_gib > 0);
	sweep_plan_free(&p);
}

/* virtual_stages and stage_layers are axes like the others: each point carries them,
 * the id tells them apart, and a split that does not fit the layout is invalid with its
 * reason (wrong count, wrong sum), not a spec error. */
static void test_pipeline_fields(void **state)
{
	struct sweep_plan p = plan_ok(
	    "{\"name\": \"t\", \"model\": \"tiny-deep\", \"fixed\": {\"global_batch\": 8}, "
	    "\"grid\": {\"pp\": [2, 4], \"virtual_stages\": [1, 2]},"
	    "\"union\": [{}, {\"grid\": {\"stage_layers\": [[3, 5], [1, 3, 3, 1], [2, 2, 2, 1], "
	    "[2, 2, 2, 2]]}}],"
	    "\"cluster\": {\"gpus_per_node\": 8}}");
	static const struct {
		int pp, v;
		const char *reason; /* "" ok */
	} want[] = {
	    {2, 1, ""},
	    {2, 2, ""},
	    {4, 1, ""},
	    {4, 2, ""},
	    {2, 1, ""}, /* [3, 5] */
	    {2, 1, "stage_layers has 4 entries; pp=2 needs one per stage"},
	    {2, 1, "stage_layers has 4 entries; pp=2 needs one per stage"},
	    {2, 1, "stage_layers has 4 entries; pp=2 needs one per stage"},
	    {2, 2, "stage_layers has 2 entries; pp*virtual_stages=4 needs one per model chunk"},
	    {2, 2, ""}, /* [1, 3, 3, 1] */
	    {2, 2, "stage_layers sum to 7 layers; the model has 8"},
	    /* [2, 2, 2, 2] on pp=2 v=2 is the rule's split: the point merges into {2, 2} */
	    {4, 1, "stage_layers has 2 entries; pp=4 needs one per stage"},
	    {4, 1, ""}, /* [1, 3, 3, 1] */
	    {4, 1, "stage_layers sum to 7 layers; the model has 8"},
	    /* [2, 2, 2, 2] on pp=4: the rule's */
	    {4, 2, "stage_layers has 2 entries; pp*virtual_stages=8 needs one per model chunk"},
	    {4, 2, "stage_layers has 4 entries; pp*virtual_stages=8 needs one per model chunk"},
	    {4, 2, "stage_layers has 4 entries; pp*virtual_stages=8 needs one per model chunk"},
	    {4, 2, "stage_layers has 4 entries; pp*virtual_stages=8 needs one per model chunk"},
	};
	size_t i;

	(void)state;
	assert_int_equal(p.n_entries, sizeof(want) / sizeof(want[0]));
	assert_int_equal(p.n_duplicates, 2);
	for (i = 0; i < p.n_entries; i++) {
		const struct plan_entry *e = &p.entries[i];

		assert_int_equal(e->layout.pp, want[i].pp);
		assert_int_equal(e->layout.virtual_stages, want[i].v);
		if (strcmp(e->reason, want[i].reason))
			fail_msg("entry %zu: want '%s', got '%s'", i, want[i].reason, e->reason);
		assert_int_equal(e->status, *want[i].reason ? PLAN_INVALID : PLAN_OK);
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(p.entries[j].id, e->id);
	}
	assert_int_equal(p.entries[4].layout.n_stage_layers, 2);
	assert_int_equal(p.entries[4].layout.stage_layers[1], 5);
	sweep_plan_free(&p);
}

static void test_model_overrides_and_run(void **state)
{
	struct sweep_plan p =
	    plan_ok("{\"name\": \"t\", \"model\": \"llama-13b\","
		    "\"model_overrides\": {\"layers\": 8, \"vocab\": 128000, \"tied\": false,"
		    "\"heads\": 20}, \"run\": {\"steps\": 7, \"warmup\": 3, \"seed\": 42},"
		    "\"fixed\": {\"seq_len\": 2048}}");
	const struct lb_layout *l = &p.entries[0].layout;

	(void)state;
	assert_int_equal(l->model.n_layers, 8);
	assert_int_equal(l->model.vocab, 128000);
	assert_int_equal(l->model.n_heads, 20);
	assert_int_equal(l->model.n_kv_heads, 20); /* follows heads without GQA */
	assert_int_equal(l->model.hidden, 5120);
	assert_int_equal(l->steps, 7);
	assert_int_equal(l->warmup, 3);
	assert_int_equal(l->seed, 42);
	assert_int_equal(l->seq_len, 2048);
	assert_int_equal(strlen(p.entries[0].id), 16);
	sweep_plan_free(&p);
}

static void test_cluster_fields(void **state)
{
	struct sweep_plan p =
	    plan_ok("{" HEAD "\"cluster\": {\"partition\": \"gpu-a100\", \"account\": \"proj_1\","
		    "\"qos\": \"normal\", \"time_limit\": \"1-02:03:04\", \"gpus_per_node\": 4,"
		    "\"gpu_mem_gib\": 131.3, \"gpu\": \"NVIDIA H200\", \"cpus_per_task\": 16,"
		    "\"exclusive\": true, \"sbatch_extra\": [\"--constraint=a100\","
		    "\"--mail-type=END\"], \"env\": {\"NCCL_DEBUG\": \"WARN\", \"X\": \"a'b $c\"},"
		    "\"setup\": [\"module load cuda/12.4\"], \"device\": \"cpu\"},"
		    "\"step_time_guess_s\": 2.5}");
	const struct sweep_cluster *c = &p.cluster;

	(void)state;
	assert_string_equal(c->partition, "gpu-a100");
	assert_string_equal(c->account, "proj_1");
	assert_string_equal(c->qos, "normal");
	assert_int_equal(c->time_limit_min, (24 + 2) * 60 + 3 + 1); /* seconds round up */
	assert_int_equal(c->gpus_per_node, 4);
	assert_true(c->gpu_mem_gib > 131.29 && c->gpu_mem_gib < 131.31);
	assert_string_equal(c->gpu, "NVIDIA H200");
	assert_int_equal(c->cpus_per_task, 16);
	assert_int_equal(c->exclusive, 1);
	assert_int_equal(c->n_sbatch_extra, 0 + 2);
	assert_string_equal(c->sbatch_extra[1], "--mail-type=END");
	assert_int_equal(c->n_env, 2);
	assert_string_equal(c->env[1], "X=a'b $c");
	assert_int_equal(c->n_setup, 1);
	assert_string_equal(c->device, "cpu");
	assert_true(p.step_time_guess_s == 2.5);
	sweep_plan_free(&p);
}

static void test_limit(void **state)
{
	struct sweep_opts o = {100, 0};
	struct sweep_plan p;
	char err[512];
	const char *t = "{" HEAD "\"grid\": {\"tp\": [1,2,3,4,5,6,7,8,9,10,11],"
			"\"pp\": [1,2,3,4,5,6,7,8,9,10]}}";

	(void)state;
	assert_int_equal(sweep_plan_text_opts("t.json", t, strlen(t), &o, &p, err, sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "expands to 110 points (limit 100)"));
	o.max_points = 110;
	assert_int_equal(sweep_plan_text_opts("t.json", t, strlen(t), &o, &p, err, sizeof(err)), 0);
	assert_int_equal(p.n_entries, 110);
	sweep_plan_free(&p);
}

static void test_load(void **state)
{
	struct sweep_plan p;
	char err[512];

	(void)state;
	assert_int_equal(sweep_plan_load("quickstart", &p, err, sizeof(err)), 0);
	assert_string_equal(p.name, "quickstart");
	assert_true(p.n_entries >= 6 && p.n_entries <= 16); /* a handful of tiny layouts */
	assert_int_equal(p.n_ok, p.n_entries);
	assert_string_equal(p.cluster.device, "cpu");
	sweep_plan_free(&p);
	assert_int_equal(sweep_plan_load("paper-13b-2k.json", &p, err, sizeof(err)), 0);
	assert_string_equal(p.name, "paper-13b-2k");
	sweep_plan_free(&p);
	assert_int_equal(sweep_plan_load("no-such-spec", &p, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "'no-such-spec': no such file"));
	assert_int_equal(sweep_plan_load("/nonexistent/x.json", &p, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot open '/nonexistent/x.json'"));
}

/* The shipped attention comparison: 2 sequence lengths x 4 attention kernels, each
 * planned ok on the H200; cudnn's estimate is flash's, its id its own. */
static void test_attention_spec(void **state)
{
	struct sweep_plan p;
	char err[512];
	int seen[2][4] = {{0}};

	(void)state;
	assert_int_equal(sweep_plan_load("h200-attention", &p, err, sizeof(err)), 0);
	assert_string_equal(p.name, "h200-attention");
	assert_int_equal(p.n_entries, 8);
	assert_int_equal(p.n_ok, 8);
	for (size_t i = 0; i < p.n_entries; i++) {
		const struct lb_layout *l = &p.entries[i].layout;
		int s = l->seq_len == 8192;

		assert_true(l->seq_len == 2048 || l->seq_len == 8192);
		assert_int_equal(l->global_batch, s ? 4 : 16);
		assert_int_equal(l->micro_batch, 1);
		assert_int_equal(l->tp * l->pp * l->dp, 1);
		assert_int_equal(l->checkpointing, LB_CKPT_NONE);
		assert_int_equal(l->norm, LB_NORM_FUSED);
		assert_int_equal(l->model.n_layers, 8);
		assert_int_equal(l->model.hidden, 5120);
		seen[s][l->attention]++;
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(p.entries[i].id, p.entries[j].id);
		if (l->attention != LB_ATTN_CUDNN)
			continue;
		for (size_t j = 0; j < p.n_entries; j++)
			if (p.entries[j].layout.seq_len == l->seq_len &&
			    p.entries[j].layout.attention == LB_ATTN_FLASH)
				assert_true(p.entries[j].mem_gib == p.entries[i].mem_gib);
	}
	for (int s = 0; s < 2; s++)
		for (int a = 0; a < 4; a++)
			assert_int_equal(seen[s][a], 1);
	sweep_plan_free(&p);
}

/* The memory probe covers the one-GPU grid: for each of h200-1gpu's points (ok or oom)
 * exactly one probe layout with the same sequence, micro-batch and kernels, one
 * micro-batch per step (global batch = micro-batch), 2 steps, and none pruned for memory
 * (the device says what fits). */
static void test_memory_probe_spec(void **state)
{
	struct sweep_plan g, m;
	char err[512];

	(void)state;
	assert_int_equal(sweep_plan_load("h200-1gpu", &g, err, sizeof(err)), 0);
	assert_int_equal(sweep_plan_load("h200-1gpu-memory", &m, err, sizeof(err)), 0);
	assert_int_equal(m.n_entries, g.n_entries);
	assert_int_equal(m.n_ok, m.n_entries);
	for (size_t i = 0; i < g.n_entries; i++) {
		const struct lb_layout *a = &g.entries[i].layout;
		int found = 0;

		for (size_t j = 0; j < m.n_entries; j++) {
			const struct lb_layout *b = &m.entries[j].layout;

			if (b->seq_len == a->seq_len && b->micro_batch == a->micro_batch &&
			    b->checkpointing == a->checkpointing && b->attention == a->attention &&
			    b->norm == a->norm) {
				found++;
				assert_int_equal(b->global_batch, b->micro_batch);
				assert_int_equal(b->steps, 2);
				assert_int_equal(b->model.n_layers, a->model.n_layers);
				assert_int_equal(b->model.hidden, a->model.hidden);
				assert_int_equal(b->model.vocab, a->model.vocab);
			}
		}
		assert_int_equal(found, 1);
	}
	sweep_plan_free(&m);
	sweep_plan_free(&g);
}

/* cudnn in a spec: a value of the attention axis and of `where`; on the CPU backend its
 * layouts are invalid with the reason (the trainer would refuse them). */
static void test_attention_cudnn(void **state)
{
	static const char *const dev[] = {"cuda", "cpu"};
	char text[512];

	(void)state;
	for (int d = 0; d < 2; d++) {
		snprintf(text, sizeof(text),
			 "{" HEAD "\"fixed\": {\"seq_len\": 64, \"global_batch\": 8},"
			 "\"grid\": {\"attention\": [\"flash\", \"cudnn\"]},"
			 "\"cluster\": {\"device\": \"%s\"}}",
			 dev[d]);
		struct sweep_plan p = plan_ok(text);

		assert_int_equal(p.n_entries, 2);
		assert_int_equal(p.entries[0].layout.attention, LB_ATTN_FLASH);
		assert_int_equal(p.entries[1].layout.attention, LB_ATTN_CUDNN);
		assert_int_equal(p.entries[0].status, PLAN_OK);
		if (d == 0) {
			assert_int_equal(p.entries[1].status, PLAN_OK);
		} else {
			assert_int_equal(p.entries[1].status, PLAN_INVALID);
			assert_string_equal(p.entries[1].reason,
					    "attention 'cudnn' needs the GPU backend (device "
					    "\"cuda\"); the CPU backend runs 'flash'");
		}
		sweep_plan_free(&p);
	}
	struct sweep_plan p =
	    plan_ok("{" HEAD "\"fixed\": {\"seq_len\": 64, \"global_batch\": 8},"
		    "\"grid\": {\"attention\": [\"naive\", \"flash\", \"cudnn\"]},"
		    "\"where\": \"attention != \\\"cudnn\\\"\"}");
	assert_int_equal(p.n_entries, 2);
	assert_int_equal(p.entries[1].layout.attention, LB_ATTN_FLASH);
	sweep_plan_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_product_order),
	    cmocka_unit_test(test_zip),
	    cmocka_unit_test(test_union),
	    cmocka_unit_test(test_derived),
	    cmocka_unit_test(test_where),
	    cmocka_unit_test(test_where_runtime_error),
	    cmocka_unit_test(test_where_underivable_dp),
	    cmocka_unit_test(test_threads_same_plan),
	    cmocka_unit_test(test_duplicates),
	    cmocka_unit_test(test_status),
	    cmocka_unit_test(test_pipeline_fields),
	    cmocka_unit_test(test_model_overrides_and_run),
	    cmocka_unit_test(test_cluster_fields),
	    cmocka_unit_test(test_limit),
	    cmocka_unit_test(test_load),
	    cmocka_unit_test(test_attention_spec),
	    cmocka_unit_test(test_memory_probe_spec),
	    cmocka_unit_test(test_attention_cudnn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
