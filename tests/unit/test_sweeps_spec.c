/*
 * Unit tests of spec errors (sweeps/spec.c): every fault class names the file, the JSON
 * path and the fault; unknown and repeated keys; conflicting fields; and hostile strings
 * in the cluster fields that reach a job script (shell metacharacters, command
 * substitution, backticks, newlines, quotes, NUL) are rejected.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sweeps/sweep.h"

/* Plan text and expect failure with err containing want. */
static void bad(const char *text, const char *want)
{
	struct sweep_plan p;
	char err[1024] = "";

	if (!sweep_plan_text("x.json", text, strlen(text), &p, err, sizeof(err))) {
		sweep_plan_free(&p);
		fail_msg("planned, but wanted error '%s' for: %s", want, text);
	}
	assert_null(p.entries);
	if (!strstr(err, want))
		fail_msg("error '%s'\n  does not contain '%s'\n  for: %s", err, want, text);
	if (strncmp(err, "x.json: ", 8))
		fail_msg("error '%s' does not start with the file name", err);
}

static void good(const char *text)
{
	struct sweep_plan p;
	char err[1024] = "";

	if (sweep_plan_text("x.json", text, strlen(text), &p, err, sizeof(err)))
		fail_msg("wanted success, got '%s' for: %s", err, text);
	sweep_plan_free(&p);
}

#define H "\"name\": \"x\", \"model\": \"tiny\""

static void test_exact_message(void **state)
{
	struct sweep_plan p;
	char err[512];
	const char *t = "{" H ", \"grid\": {\"tp\": [1, 2, \"two\"]}}";

	(void)state;
	assert_int_equal(sweep_plan_text("sweeps/specs/x.json", t, strlen(t), &p, err, sizeof(err)),
			 -1);
	assert_string_equal(
	    err, "sweeps/specs/x.json: grid.tp[2]: expected a positive integer, got \"two\"");
}

static void test_json_and_top_level(void **state)
{
	(void)state;
	bad("{\"name\": \"x\",\n \"model\": }", "x.json: line 2, column 11: not valid JSON");
	bad("[1, 2]", "x.json: (top level): expected an object, got [1,2]");
	bad("{\"model\": \"tiny\"}", "x.json: missing 'name'");
	bad("{\"name\": \"x\"}", "x.json: missing 'model'");
	bad("{" H ", \"grdi\": {}}", "x.json: grdi: unknown key 'grdi'");
	bad("{" H ", \"name\": \"y\"}", "x.json: name: key 'name' appears twice");
	bad("{" H ", \"models\": [\"tiny\"]}", "models: give 'model' or 'models', not both");
	bad("{\"name\": \"x\", \"model\": \"llama-1b\"}",
	    "model: unknown model preset \"llama-1b\"");
	bad("{\"name\": \"x\", \"models\": [\"tiny\", 3]}", "models[1]: expected a string, got 3");
	bad("{\"name\": \"x\", \"models\": [\"tiny\", \"tiny\"]}",
	    "models[1]: model 'tiny' is listed twice");
	bad("{\"name\": \"x\", \"models\": []}", "models: expected a non-empty list");
	bad("{" H ", \"description\": 5}", "description: expected a string, got 5");
	bad("{" H ", \"step_time_guess_s\": -1}", "step_time_guess_s: expected a positive number");
	bad("{" H ", \"model_overrides\": {\"layer\": 2}}",
	    "model_overrides.layer: unknown key 'layer'");
	bad("{" H ", \"model_overrides\": {\"layers\": 0}}",
	    "model_overrides.layers: expected a positive integer, got 0");
}

static void test_values(void **state)
{
	(void)state;
	bad("{" H ", \"grid\": {\"tp\": [1.5]}}",
	    "grid.tp[0]: expected a positive integer, got 1.5");
	bad("{" H ", \"grid\": {\"tp\": [-2]}}", "grid.tp[0]: expected a positive integer, got -2");
	bad("{" H ", \"grid\": {\"tp\": [2147483648]}}", "grid.tp[0]: expected a positive integer");
	bad("{" H ", \"grid\": {\"tp\": 2}}", "grid.tp: expected a list, got 2");
	bad("{" H ", \"grid\": {\"tp\": []}}", "grid.tp: expected a non-empty list");
	bad("{" H ", \"grid\": [1]}", "grid: expected an object, got [1]");
	bad("{" H ", \"grid\": {\"tpp\": [1]}}", "grid.tpp: unknown field 'tpp'");
	bad("{" H ", \"grid\": {\"nodes\": [1]}}", "grid.nodes: 'nodes' is derived");
	bad("{" H ", \"grid\": {\"steps\": [1]}}", "grid.steps: 'steps' is a run setting");
	bad("{" H ", \"fixed\": {\"model\": \"tiny\"}}", "fixed.model: the model is chosen by");
	bad("{" H ", \"fixed\": {\"checkpointing\": \"every_layer\"}}",
	    "fixed.checkpointing: expected \"none\", \"full\" or \"selective\", got "
	    "\"every_layer\"");
	bad("{" H ", \"grid\": {\"attention\": [\"flash\", \"flash3\"]}}",
	    "grid.attention[1]: expected \"naive\", \"fused_softmax\", \"flash\" or "
	    "\"cudnn\"");
	bad("{" H ", \"fixed\": {\"norm\": 1}}",
	    "fixed.norm: expected \"unfused\" or \"fused\", got 1");
	bad("{" H ", \"grid\": {\"kernel\": [\"cudnn\"]}}",
	    "grid.kernel[0]: unknown kernel \"cudnn\"");
	bad("{" H ", \"grid\": {\"kernel\": [\"cudnn\"]}}",
	    "; 'cudnn' is an attention kernel: give it under 'attention' with 'norm'");
	bad("{" H ", \"grid\": {\"kernel\": [\"flash_attention2\", \"flash\"]}}",
	    "grid.kernel[1]: unknown kernel \"flash\" (known: torch, fused, ");
	bad("{" H ", \"fixed\": {\"sequence_parallel\": 2}}",
	    "fixed.sequence_parallel: expected 0, 1, true or false, got 2");
	bad("{" H ", \"fixed\": {\"zero_stage\": 4}}", "fixed.zero_stage: expected a ZeRO stage");
	bad("{" H ", \"fixed\": {\"tp\": 1, \"tp\": 2}}", "fixed.tp: key 'tp' appears twice");
	bad("{" H ", \"run\": {\"steps\": 0}}", "run.steps: expected a positive integer, got 0");
	bad("{" H ", \"run\": {\"warmup\": -1}}", "run.warmup: expected a non-negative integer");
	bad("{" H ", \"run\": {\"seeds\": 1}}", "run.seeds: unknown key 'seeds'");
	/* the optimizer settings the job scripts pass to the trainer */
	bad("{" H ", \"run\": {\"lr\": -0.001}}",
	    "run.lr: expected a learning rate >= 0 (e.g. 1e-4), at most 1e+06, got -0.001");
	bad("{" H ", \"run\": {\"lr\": \"1e-4\"}}", "run.lr: expected a learning rate >= 0");
	bad("{" H ", \"run\": {\"weight_decay\": -1}}", "run.weight_decay: expected a weight decay");
	bad("{" H ", \"run\": {\"clip\": 1e7}}", "run.clip: expected a gradient-norm clip >= 0");
	{
		struct sweep_plan p;
		char err[512];
		const char *t = "{" H ", \"run\": {\"lr\": 1e-4, \"clip\": 0}}";

		assert_int_equal(sweep_plan_text("x.json", t, strlen(t), &p, err, sizeof(err)), 0);
		assert_int_equal(p.optim.given, SWEEP_OPTIM_LR | SWEEP_OPTIM_CLIP);
		assert_true(p.optim.lr == 1e-4 && p.optim.clip == 0);
		sweep_plan_free(&p);
		t = "{" H "}";
		assert_int_equal(sweep_plan_text("x.json", t, strlen(t), &p, err, sizeof(err)), 0);
		assert_int_equal(p.optim.given, 0);
		sweep_plan_free(&p);
	}
	good("{" H ", \"fixed\": {\"sequence_parallel\": true, \"tied\": false, \"tp\": 2}}");
	/* the pipeline's shape: model chunks per stage, an explicit split */
	bad("{" H ", \"grid\": {\"virtual_stages\": [2, 0]}}",
	    "grid.virtual_stages[1]: expected a number of model chunks per stage (1 to 16), got 0");
	bad("{" H ", \"fixed\": {\"virtual_stages\": 17}}",
	    "fixed.virtual_stages: expected a number of model chunks per stage");
	bad("{" H ", \"fixed\": {\"stage_layers\": [2, 0]}}",
	    "fixed.stage_layers[1]: expected a positive number of layers (every stage needs one), "
	    "got 0");
	bad("{" H ", \"fixed\": {\"stage_layers\": [2, 1.5]}}",
	    "fixed.stage_layers[1]: expected a positive number of layers");
	bad("{" H ", \"fixed\": {\"stage_layers\": []}}",
	    "fixed.stage_layers: expected layers per stage (e.g. [7, 8, 8, 7]), got []");
	bad("{" H ", \"fixed\": {\"stage_layers\": \"2,2\"}}",
	    "fixed.stage_layers: expected a list of layers per stage (e.g. [7, 8, 8, 7]), got "
	    "\"2,2\"");
	bad("{" H ", \"grid\": {\"stage_layers\": [2, 2]}}",
	    "grid.stage_layers[0]: expected a list of layers per stage (e.g. [7, 8, 8, 7]), got 2 "
	    "(a grid or zip axis lists splits: [[7, 8, 8, 7], [8, 7, 7, 8]])");
	bad("{" H ", \"grid\": {\"stage_layers\": [[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
	    "1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
	    "1, "
	    "1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]]}}",
	    "grid.stage_layers[0]: more than 64 stages");
	bad("{" H ", \"where\": \"stage_layers == 1\"}",
	    "where: column 1: unknown identifier 'stage_layers'");
	good("{" H ", \"fixed\": {\"pp\": 2, \"stage_layers\": [1, 3]}, \"where\": "
	     "\"virtual_stages == 1\"}");
}

static void test_structure(void **state)
{
	(void)state;
	bad("{" H ", \"zip\": [{\"tp\": [1, 2], \"pp\": [1]}]}",
	    "zip[0].pp: 1 values, but zip[0].tp has 2 (zipped lists have equal lengths)");
	bad("{" H ", \"zip\": {\"tp\": [1]}}", "zip: expected a list");
	bad("{" H ", \"zip\": [{}]}", "zip[0]: expected an object of lists");
	bad("{" H ", \"zip\": [{\"tp\": [1]}, {\"tp\": [2]}]}",
	    "zip[1]: 'tp' is also given in another grid/zip entry");
	bad("{" H ", \"fixed\": {\"tp\": 1}, \"grid\": {\"tp\": [1]}}",
	    "grid.tp: 'tp' is also given in fixed");
	bad("{" H ", \"grid\": {\"kernel\": [\"torch\"], \"attention\": [\"flash\"]}}",
	    "'kernel' sets attention and norm; do not also give 'attention'");
	bad("{" H ", \"union\": [{\"grid\": {\"kernel\": [\"torch\"]}, \"fixed\": {\"norm\": "
	    "\"fused\"}}]}",
	    "union[0]: 'kernel' sets attention and norm; do not also give 'norm'");
	bad("{" H ", \"grid\": {\"tp\": [1]}, \"union\": [{\"grid\": {\"tp\": [2]}}]}",
	    "union[0]: 'tp' is swept at the top level");
	bad("{" H ", \"union\": [{\"model\": \"tiny\"}]}", "union[0].model: unknown key 'model'");
	bad("{" H ", \"union\": []}", "union: expected a non-empty list");
	bad("{" H ", \"union\": [{\"grid\": {\"tp\": [\"x\"]}}]}",
	    "union[0].grid.tp[0]: expected a positive integer, got \"x\"");
	bad("{" H ", \"where\": \"tp +\"}",
	    "x.json: where: column 5: unexpected end of expression");
	bad("{" H ", \"where\": \"kernel == 1\"}", "where: column 1: unknown identifier 'kernel'");
	bad("{" H ", \"union\": [{\"where\": \"tp == == 1\"}]}", "union[0].where: column 7:");
	bad("{" H ", \"where\": 1}", "where: expected a string, got 1");
}

static void test_cluster_errors(void **state)
{
	(void)state;
	bad("{" H ", \"cluster\": {\"nodes\": 2}}", "cluster.nodes: unknown key 'nodes'");
	bad("{" H ", \"cluster\": {\"time_limit\": \"25:61:00\"}}",
	    "cluster.time_limit: expected minutes, \"HH:MM:SS\" or \"D-HH:MM:SS\"");
	bad("{" H ", \"cluster\": {\"time_limit\": 0}}", "cluster.time_limit: expected minutes");
	bad("{" H ", \"cluster\": {\"time_limit\": \"1-25:00:00\"}}", "cluster.time_limit:");
	bad("{" H ", \"cluster\": {\"gpus_per_node\": 0}}",
	    "cluster.gpus_per_node: expected a positive integer");
	bad("{" H ", \"cluster\": {\"gpu_mem_gib\": \"80\"}}",
	    "cluster.gpu_mem_gib: expected a positive number of GiB");
	bad("{" H ", \"cluster\": {\"device\": \"rocm\"}}",
	    "cluster.device: expected \"cuda\" or \"cpu\", got \"rocm\"");
	bad("{" H ", \"cluster\": {\"exclusive\": 1}}",
	    "cluster.exclusive: expected true or false");
	bad("{" H ", \"cluster\": {\"env\": [1]}}", "cluster.env: expected an object");
	bad("{" H ", \"cluster\": {\"env\": {\"A\": 1}}}",
	    "cluster.env.A: expected a string, got 1");
	bad("{" H ", \"cluster\": {\"setup\": \"module load x\"}}",
	    "cluster.setup: expected a list");
	bad("{" H ", \"cluster\": {\"peak_tflops\": 0}}",
	    "cluster.peak_tflops: expected a positive number of TFLOP/s, got 0");
	bad("{" H ", \"cluster\": {\"peak_tflops\": \"fast\"}}",
	    "cluster.peak_tflops: expected a positive number of TFLOP/s");
	good("{" H ", \"cluster\": {\"peak_tflops\": 383}}");
	good("{" H ", \"cluster\": {\"time_limit\": \"90\"}}");
	good("{" H ", \"cluster\": {\"time_limit\": \"12:00:00\"}}");
	good("{" H ", \"cluster\": {\"time_limit\": \"2-00:00:00\"}}");
}

static void test_hostile_strings(void **state)
{
	static const char *const hostile[] = {
	    "; rm -rf /", "$(id)", "`id`", "a\\nb", "a'b", "a\\\"b",
	    "a b",	  "x|y",   "x&y",  "a\\rb", "a>b",
	};
	char text[512];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		const char *h = hostile[i];

		snprintf(text, sizeof(text), "{\"name\": \"%s\", \"model\": \"tiny\"}", h);
		bad(text, "name: sweep name");
		bad(text, "a sweep name is 1 to 63 letters, digits");
		snprintf(text, sizeof(text), "{" H ", \"cluster\": {\"partition\": \"%s\"}}", h);
		bad(text, "cluster.partition: expected a name of letters, digits");
		snprintf(text, sizeof(text), "{" H ", \"cluster\": {\"account\": \"%s\"}}", h);
		bad(text, "cluster.account: expected a name");
		snprintf(text, sizeof(text), "{" H ", \"cluster\": {\"qos\": \"%s\"}}", h);
		bad(text, "cluster.qos: expected a name");
		snprintf(text, sizeof(text), "{" H ", \"cluster\": {\"gpu\": \"A100%s\"}}", h);
		if (strcmp(h, "a b")) /* a space is fine in a product name */
			bad(text, "cluster.gpu: expected a product name");
		snprintf(text, sizeof(text),
			 "{" H ", \"cluster\": {\"sbatch_extra\": [\"--comment=x%s\"]}}", h);
		bad(text, "cluster.sbatch_extra[0]:");
		bad(text, "is not an sbatch option of the form");
		snprintf(text, sizeof(text), "{" H ", \"cluster\": {\"env\": {\"A%s\": \"1\"}}}",
			 h);
		bad(text, "cluster.env: 'A");
	}
	bad("{" H ", \"cluster\": {\"sbatch_extra\": [\"-x\"]}}", "cluster.sbatch_extra[0]");
	bad("{" H ", \"cluster\": {\"sbatch_extra\": [\"--Comment=x\"]}}",
	    "cluster.sbatch_extra[0]");
	bad("{" H ", \"cluster\": {\"sbatch_extra\": [\"--comment=a\", \"--x $(id)\"]}}",
	    "cluster.sbatch_extra[1]");
	bad("{" H ", \"cluster\": {\"env\": {\"1A\": \"x\"}}}", "'1A' is not a variable name");
	bad("{" H ", \"cluster\": {\"env\": {\"A\": \"x\\ny\"}}}",
	    "cluster.env.A: a value may not contain newlines");
	bad("{" H ", \"cluster\": {\"env\": {\"A\": \"x\\u0000y\"}}}",
	    "NUL characters are not allowed");
	bad("{" H ", \"cluster\": {\"setup\": [\"module load a\\nrm -rf /\"]}}",
	    "cluster.setup[0]: one shell line per entry: no newlines");
	bad("{" H ", \"cluster\": {\"setup\": [\"ok\", \"a\\rb\"]}}", "cluster.setup[1]");
	bad("{\"name\": \"a\\u0000b\", \"model\": \"tiny\"}", "NUL characters are not allowed");
	/* names at the length limit */
	bad("{\"name\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\", "
	    "\"model\": \"tiny\"}",
	    "name: sweep name 'aaaaaaaaaaaaaaaaaaaa...' is 64 characters long: a sweep name is 1 "
	    "to 63 letters, digits, '.', '_' or '-', starting with a letter or a digit");
	/* names that pass the character set but not as a folder or a job name */
	bad("{\"name\": \".\", \"model\": \"tiny\"}", "name: sweep name '.' starts with '.'");
	bad("{\"name\": \"..\", \"model\": \"tiny\"}", "name: sweep name '..' starts with '.'");
	bad("{\"name\": \"-rf\", \"model\": \"tiny\"}", "name: sweep name '-rf' starts with '-'");
	bad("{\"name\": \".hidden\", \"model\": \"tiny\"}", "starting with a letter or a digit");
	good("{\"name\": \"a..b-c_d.9\", \"model\": \"tiny\"}");
	/* env values are arbitrary text (the renderer quotes them); setup lines are shell */
	good("{" H ", \"cluster\": {\"env\": {\"A_1\": \"$(id) `x` ; 'q' \\\"\"}}}");
	good("{" H ", \"cluster\": {\"setup\": [\"module load cuda/12.4 && echo $HOME\"]}}");
	good("{" H ", \"cluster\": {\"sbatch_extra\": [\"--gres=nvme:1\", \"--nice\", "
	     "\"--mail-user=a.b@c.org\", \"--constraint=a100,80gb\"]}}");
}

/* cluster.partition lists several names with ','; each is checked as one name. */
static void test_partition_list(void **state)
{
	struct sweep_plan p;
	char err[512];
	const char *t = "{" H ", \"cluster\": {\"partition\": \"gpu,gpu-long.2\"}}";
	(void)state;
	assert_int_equal(sweep_plan_text("x.json", t, strlen(t), &p, err, sizeof(err)), 0);
	assert_string_equal(p.cluster.partition, "gpu,gpu-long.2");
	sweep_plan_free(&p);
	good("{" H ", \"cluster\": {\"partition\": \"gpu\"}}");
	bad("{" H ", \"cluster\": {\"partition\": \"gpu,\"}}",
	    "cluster.partition: expected a name of letters, digits, '_', '.' and '-', or "
	    "several separated by ','");
	bad("{" H ", \"cluster\": {\"partition\": \",gpu\"}}", "cluster.partition:");
	bad("{" H ", \"cluster\": {\"partition\": \"a,,b\"}}", "cluster.partition:");
	bad("{" H ", \"cluster\": {\"partition\": \"a, b\"}}", "cluster.partition:");
	bad("{" H ", \"cluster\": {\"partition\": \"a,b;id\"}}", "cluster.partition:");
	bad("{" H ", \"cluster\": {\"partition\": \"\"}}", "cluster.partition:");
	/* at most 63 characters in all */
	bad("{" H ", \"cluster\": {\"partition\": "
	    "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"}}",
	    "(at most 63 in all)");
}

/* cluster.gpu_request, and GPU requests in sbatch_extra that would clash with it. */
static void test_gpu_request(void **state)
{
	struct sweep_plan p;
	char err[512];
	const char *t = "{" H ", \"cluster\": {\"gpu_request\": \"gres:h100_80gb\", "
			"\"sbatch_extra\": [\"--gres-flags=enforce-binding\"]}}";
	(void)state;
	assert_int_equal(sweep_plan_text("x.json", t, strlen(t), &p, err, sizeof(err)), 0);
	assert_string_equal(p.cluster.gpu_request, "gres:h100_80gb");
	sweep_plan_free(&p);
	good("{" H ", \"cluster\": {\"gpu_request\": \"gpus-per-node\"}}");
	good("{" H ", \"cluster\": {\"gpu_request\": \"gres\"}}");
	bad("{" H ", \"cluster\": {\"gpu_request\": \"gpus\"}}",
	    "cluster.gpu_request: expected \"gpus-per-node\", \"gres\" or \"gres:TYPE\"");
	bad("{" H ", \"cluster\": {\"gpu_request\": \"gres:\"}}", "cluster.gpu_request:");
	bad("{" H ", \"cluster\": {\"gpu_request\": \"gres:a100:8\"}}", "cluster.gpu_request:");
	bad("{" H ", \"cluster\": {\"gpu_request\": \"gres:$(id)\"}}", "cluster.gpu_request:");
	bad("{" H ", \"cluster\": {\"gpu_request\": 8}}", "cluster.gpu_request: expected a string");
	/* a GPU request in sbatch_extra beside the default --gpus-per-node: the conflict and
	 * the fix */
	bad("{" H ", \"cluster\": {\"sbatch_extra\": [\"--mem=0\", \"--gres=gpu:a100:8\"]}}",
	    "x.json: cluster.sbatch_extra[1]: '--gres=gpu:a100:8' requests GPUs beside the "
	    "rendered #SBATCH --gpus-per-node, which Slurm rejects: drop it from sbatch_extra "
	    "and set \"gpu_request\": \"gres:a100\" in the cluster");
	bad("{" H ", \"cluster\": {\"sbatch_extra\": [\"--gres=gpu:8\"]}}",
	    "set \"gpu_request\": \"gres\" (or \"gres:TYPE\")");
	bad("{" H ", \"cluster\": {\"sbatch_extra\": [\"--gres=nvme:1,gpu\"]}}",
	    "requests GPUs beside the rendered #SBATCH --gpus-per-node");
	bad("{" H ", \"cluster\": {\"sbatch_extra\": [\"--gpus=8\"]}}",
	    "cluster.sbatch_extra[0]: '--gpus=8' requests GPUs");
	bad("{" H ", \"cluster\": {\"sbatch_extra\": [\"--gpus-per-node=8\"]}}",
	    "cluster.sbatch_extra[0]: '--gpus-per-node=8' requests GPUs");
	bad("{" H ", \"cluster\": {\"gpu_request\": \"gpus-per-node\", "
	    "\"sbatch_extra\": [\"--gpus\"]}}",
	    "'--gpus' requests GPUs");
	bad("{" H ", \"cluster\": {\"gpu_request\": \"gres:a100\", "
	    "\"sbatch_extra\": [\"--gres=gpu:a100:8\"]}}",
	    "'--gres=gpu:a100:8' requests GPUs, and so does cluster.gpu_request 'gres:a100'");
	/* not GPU requests: other gres, gres flags; and no GPUs at all on the CPU backend */
	good("{" H ", \"cluster\": {\"sbatch_extra\": [\"--gres=nvme:1\", "
	     "\"--gres-flags=enforce-binding\", \"--gpu-bind=closest\"]}}");
	good("{" H ", \"cluster\": {\"device\": \"cpu\", \"sbatch_extra\": [\"--gres=gpu:1\"]}}");
}

static void test_nul_byte(void **state)
{
	struct sweep_plan p;
	char err[256];
	const char t[] = "{\"name\": \"x\",\0 \"model\": \"tiny\"}";

	(void)state;
	assert_int_equal(sweep_plan_text("x.json", t, sizeof(t) - 1, &p, err, sizeof(err)), -1);
	assert_string_equal(err, "x.json: contains a NUL byte");
}

/* The reader takes one JSON object and names each limit it enforces: text after the
 * object, nesting past cJSON's depth, an integer past 2^30; and a layout whose GPU count
 * does not fit an int is invalid with its reason, not wrapped to 0 or a negative count. */
static void test_reader_limits(void **state)
{
	char *deep;
	struct sweep_plan p;
	char err[1024];
	size_t n = 1100, i, k = 0;

	(void)state;
	bad("{" H "} xyz", "x.json: line 1, column 32: text after the spec's closing '}'");
	bad("{" H "}{\"name\": \"y\", \"model\": \"tiny\"}", "text after the spec's closing '}'");
	good("{" H "}\n  \r\n\t");
	deep = malloc(2 * n + 64);
	assert_non_null(deep);
	k += (size_t)sprintf(deep, "{" H ", \"description\": ");
	for (i = 0; i < n; i++)
		deep[k++] = '[';
	for (i = 0; i < n; i++)
		deep[k++] = ']';
	deep[k++] = '}';
	deep[k] = '\0';
	bad(deep, "JSON nested deeper than 1000 levels, the reader's limit");
	free(deep);
	bad("{" H ", \"fixed\": {\"tp\": 1073741825}}",
	    "fixed.tp: expected a positive integer, got 1073741825, over the limit of 1073741824");
	bad("{" H ", \"grid\": {\"pp\": [1, 4294967296]}}", "over the limit of 1073741824");
	/* 2^30 each: the GPU count is 2^90; 2^16 twice: 2^32 */
	static const char *const big[] = {
	    "{" H ", \"fixed\": {\"seq_len\": 64, \"global_batch\": 8, \"tp\": 1073741824, "
	    "\"pp\": 1073741824, \"dp\": 1073741824}}",
	    "{" H ", \"fixed\": {\"seq_len\": 64, \"global_batch\": 8, \"tp\": 65536, \"pp\": "
	    "65536}}"};
	for (i = 0; i < 2; i++) {
		assert_int_equal(sweep_plan_text("x.json", big[i], strlen(big[i]), &p, err,
						 sizeof(err)),
				 0);
		assert_int_equal(p.n_entries, 1);
		assert_int_equal(p.entries[0].status, PLAN_INVALID);
		if (!strstr(p.entries[0].reason, "GPUs is more than 2147483647"))
			fail_msg("reason: %s", p.entries[0].reason);
		assert_true(p.entries[0].layout.gpus_per_node > 0);
		assert_true(p.entries[0].layout.nodes > 0);
		sweep_plan_free(&p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_exact_message),  cmocka_unit_test(test_json_and_top_level),
	    cmocka_unit_test(test_values),	   cmocka_unit_test(test_structure),
	    cmocka_unit_test(test_cluster_errors), cmocka_unit_test(test_hostile_strings),
	    cmocka_unit_test(test_nul_byte),	   cmocka_unit_test(test_partition_list),
	    cmocka_unit_test(test_gpu_request),	   cmocka_unit_test(test_reader_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
