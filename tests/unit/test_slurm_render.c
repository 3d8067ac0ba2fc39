/*
 * Unit tests of job-script rendering: the one quoting function, safe names and paths,
 * grouping layouts by resource shape, splitting at MaxArraySize, the throttle, hostile
 * spec values rejected (names, partitions, env names, sbatch options) or quoted (env
 * values), and the failure classes; cpus_per_task passed on to srun, the GPU request
 * (cluster.gpu_request), and the log folder created by plan --render.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "harness/trainlog.h"
#include "slurm/classify.h"
#include "slurm/exec.h"
#include "slurm/render.h"
#include "sweeps/sweep.h"

static char *quote(const char *s)
{
	struct lb_strbuf sb = LB_STRBUF_INIT;
	slurm_shell_quote(&sb, s);
	return lb_strbuf_detach(&sb);
}

static void test_quote(void **state)
{
	char *q;
	(void)state;
	q = quote("plain");
	assert_string_equal(q, "'plain'");
	free(q);
	q = quote("it's");
	assert_string_equal(q, "'it'\\''s'");
	free(q);
	q = quote("");
	assert_string_equal(q, "''");
	free(q);
	q = quote("$(id) `id` ; rm -rf / \n\"x\"");
	assert_string_equal(q, "'$(id) `id` ; rm -rf / \n\"x\"'");
	free(q);
	q = quote("''");
	assert_string_equal(q, "''\\'''\\'''");
	free(q);
}

static void test_safe(void **state)
{
	(void)state;
	assert_true(slurm_safe_name("paper-13b_2k.v1"));
	assert_false(slurm_safe_name(""));
	assert_false(slurm_safe_name("-x"));
	assert_false(slurm_safe_name(".x"));
	assert_false(slurm_safe_name("a b"));
	assert_false(slurm_safe_name("a;b"));
	assert_false(slurm_safe_name("a$(id)"));
	assert_true(slurm_safe_path("/home/u/runs-1/x_y.z"));
	assert_false(slurm_safe_path("/home/u/my runs"));
	assert_false(slurm_safe_path("/tmp/`id`"));
	assert_false(slurm_safe_path("/tmp/a\nb"));
}

/* A plan of n layouts; layouts i with i % shapes == k get k+1 nodes. */
static void make_plan(struct sweep_plan *p, size_t n, int shapes)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "unit");
	snprintf(p->cluster.device, sizeof(p->cluster.device), "cuda");
	p->cluster.time_limit_min = 30;
	p->entries = calloc(n, sizeof(*p->entries));
	p->n_entries = n;
	for (size_t i = 0; i < n; i++) {
		struct plan_entry *e = &p->entries[i];
		lb_layout_init(&e->layout);
		e->layout.nodes = (int)(i % (size_t)shapes) + 1;
		e->layout.gpus_per_node = 4;
		e->layout.dp = e->layout.nodes * 4;
		e->layout.seed = i; /* distinct ids are not needed here */
		snprintf(e->id, sizeof(e->id), "%016zx", i);
		e->status = PLAN_OK;
	}
	p->n_ok = n;
}

static const struct slurm_render_opts opts = {"/scratch/runs", "/opt/lb/bin/layoutbench-train", 0,
					      0};

static void test_grouping(void **state)
{
	struct sweep_plan p;
	struct slurm_batch b;
	char err[256];
	(void)state;

	make_plan(&p, 10, 2);
	p.entries[3].status = PLAN_OOM;
	assert_int_equal(slurm_render_batch(&p, NULL, 0, &opts, &b, err, sizeof(err)), 0);
	assert_int_equal(b.n_arrays, 2);
	assert_int_equal(b.n_tasks, 9);
	assert_int_equal(b.arrays[0].nodes, 1);
	assert_int_equal(b.arrays[0].n_tasks, 5);
	assert_int_equal(b.arrays[1].nodes, 2);
	assert_int_equal(b.arrays[1].n_tasks, 4); /* entry 3 (oom) left out */
	assert_int_equal(b.arrays[1].gpus_per_node, 4);
	assert_string_equal(b.arrays[0].array_spec, "0-4");
	assert_non_null(strstr(b.arrays[1].script, "#SBATCH --nodes=2\n"));
	assert_non_null(strstr(b.arrays[1].script, "#SBATCH --gpus-per-node=4\n"));
	assert_non_null(strstr(b.arrays[1].script, "#SBATCH --time=30\n"));
	assert_non_null(strstr(b.arrays[0].script, "export NCCL_NVLS_ENABLE=0\n"));
	assert_non_null(strstr(b.arrays[0].script, "3) layout=0000000000000006\n"));
	assert_null(strstr(b.arrays[1].script, "layout=0000000000000003"));
	assert_string_equal(b.arrays[0].out_path, "/scratch/runs/unit/logs/a0-%A_%a.out");
	slurm_batch_free(&b);

	/* a selection: only those entries, an oom one refused */
	size_t sel[2] = {0, 5};
	assert_int_equal(slurm_render_batch(&p, sel, 2, &opts, &b, err, sizeof(err)), 0);
	assert_int_equal(b.n_tasks, 2);
	assert_int_equal(b.n_arrays, 2);
	assert_string_equal(b.arrays[0].array_spec, "0");
	assert_string_equal(b.arrays[0].job_name, "unit.0000000000000000");
	slurm_batch_free(&b);
	sel[1] = 3;
	assert_int_equal(slurm_render_batch(&p, sel, 2, &opts, &b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "oom"));
	sweep_plan_free(&p);
}

/* The spec's optimizer settings reach the trainer in both branches of a script (srun and
 * by hand); settings not given are left out, so the trainer keeps its defaults. */
static void test_optim_flags(void **state)
{
	struct sweep_plan p;
	struct slurm_batch b;
	char err[256];
	const char *s, *hit;
	int n = 0;
	(void)state;

	make_plan(&p, 2, 1);
	assert_int_equal(slurm_render_batch(&p, NULL, 0, &opts, &b, err, sizeof(err)), 0);
	assert_null(strstr(b.arrays[0].script, "--lr"));
	assert_null(strstr(b.arrays[0].script, "--clip"));
	slurm_batch_free(&b);
	p.optim.lr = 1e-4;
	p.optim.weight_decay = 0.25;
	p.optim.clip = 0;
	p.optim.given = SWEEP_OPTIM_LR | SWEEP_OPTIM_CLIP;
	assert_int_equal(slurm_render_batch(&p, NULL, 0, &opts, &b, err, sizeof(err)), 0);
	s = b.arrays[0].script;
	for (hit = s; (hit = strstr(hit, " --lr 0.0001 --clip 0 --run-dir ")); hit++)
		n++;
	assert_int_equal(n, 2);
	assert_null(strstr(s, "--weight-decay"));
	slurm_batch_free(&b);
	sweep_plan_free(&p);
}

static void test_split_and_throttle(void **state)
{
	struct sweep_plan p;
	struct slurm_batch b;
	struct slurm_render_opts o = opts;
	char err[256];
	(void)state;

	make_plan(&p, 2500, 1);
	assert_int_equal(slurm_render_batch(&p, NULL, 0, &o, &b, err, sizeof(err)), 0);
	assert_int_equal(b.n_arrays, 3); /* 1001 + 1001 + 498 */
	assert_int_equal(b.arrays[0].n_tasks, 1001);
	assert_string_equal(b.arrays[0].array_spec, "0-1000");
	assert_int_equal(b.arrays[2].n_tasks, 498);
	assert_int_equal(b.n_tasks, 2500);
	slurm_batch_free(&b);
	o.max_array = 100;
	o.throttle = 8;
	assert_int_equal(slurm_render_batch(&p, NULL, 0, &o, &b, err, sizeof(err)), 0);
	assert_int_equal(b.n_arrays, 25);
	assert_string_equal(b.arrays[0].array_spec, "0-99%8");
	assert_non_null(strstr(b.arrays[0].script, "#SBATCH --array=0-99%8\n"));
	slurm_batch_free(&b);
	sweep_plan_free(&p);
}

static int render_err(struct sweep_plan *p, char *err, size_t len)
{
	struct slurm_batch b;
	int rc = slurm_render_batch(p, NULL, 0, &opts, &b, err, len);
	if (rc == 0)
		slurm_batch_free(&b);
	return rc;
}

static void test_hostile(void **state)
{
	struct sweep_plan p;
	char err[512];
	char *env[] = {"GOOD=$(id) `id`; rm -rf / 'q' \"d\"", NULL};
	char *badenv[] = {"BAD;X=1"};
	char *extra[] = {"--mem=1000"};
	char *badextra[] = {"--comment=x;id"};
	struct slurm_batch b;
	(void)state;

	make_plan(&p, 2, 1);
	snprintf(p.cluster.partition, sizeof(p.cluster.partition), "gpu;rm -rf /");
	assert_int_equal(render_err(&p, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cluster.partition 'gpu;rm -rf /'"));
	p.cluster.partition[0] = '\0';
	snprintf(p.cluster.account, sizeof(p.cluster.account), "a\nb");
	assert_int_equal(render_err(&p, err, sizeof(err)), -1);
	p.cluster.account[0] = '\0';
	snprintf(p.cluster.qos, sizeof(p.cluster.qos), "$(id)");
	assert_int_equal(render_err(&p, err, sizeof(err)), -1);
	p.cluster.qos[0] = '\0';
	snprintf(p.name, sizeof(p.name), "x`id`");
	assert_int_equal(render_err(&p, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "sweep name 'x`id`'"));
	snprintf(p.name, sizeof(p.name), "unit");
	snprintf(p.entries[0].layout.model.name, sizeof(p.entries[0].layout.model.name), "t;id");
	assert_int_equal(render_err(&p, err, sizeof(err)), -1);
	snprintf(p.entries[0].layout.model.name, sizeof(p.entries[0].layout.model.name), "tiny");
	p.cluster.env = badenv;
	p.cluster.n_env = 1;
	assert_int_equal(render_err(&p, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cluster.env[0]"));
	p.cluster.sbatch_extra = badextra;
	p.cluster.n_sbatch_extra = 1;
	p.cluster.n_env = 0;
	assert_int_equal(render_err(&p, err, sizeof(err)), -1);
	p.cluster.sbatch_extra = extra;
	p.cluster.env = env;
	p.cluster.n_env = 1;
	assert_int_equal(slurm_render_batch(&p, NULL, 0, &opts, &b, err, sizeof(err)), 0);
	assert_non_null(
	    strstr(b.arrays[0].script, "export GOOD='$(id) `id`; rm -rf / '\\''q'\\'' \"d\"'\n"));
	assert_non_null(strstr(b.arrays[0].script, "#SBATCH --mem=1000\n"));
	slurm_batch_free(&b);
	/* a runs folder with a space cannot go into #SBATCH --output */
	struct slurm_render_opts o = opts;
	o.runs_dir = "/tmp/my runs";
	p.cluster.n_env = 0;
	p.cluster.n_sbatch_extra = 0;
	assert_int_equal(slurm_render_batch(&p, NULL, 0, &o, &b, err, sizeof(err)), -1);
	p.cluster.env = NULL;
	p.cluster.sbatch_extra = NULL;
	sweep_plan_free(&p);
}

static void test_spec_nvls(void **state)
{
	struct sweep_plan p;
	struct slurm_batch b;
	char err[256];
	char *env[] = {"NCCL_NVLS_ENABLE=1"};
	(void)state;
	make_plan(&p, 1, 1);
	p.cluster.env = env;
	p.cluster.n_env = 1;
	assert_int_equal(slurm_render_batch(&p, NULL, 0, &opts, &b, err, sizeof(err)), 0);
	assert_null(strstr(b.arrays[0].script, "NCCL_NVLS_ENABLE=0"));
	assert_non_null(strstr(b.arrays[0].script, "export NCCL_NVLS_ENABLE='1'\n"));
	slurm_batch_free(&b);
	p.cluster.env = NULL;
	p.cluster.n_env = 0;
	sweep_plan_free(&p);
}

static void test_classify(void **state)
{
	struct slurm_class_in in = {0};
	(void)state;
	in.state = "COMPLETED";
	in.exit_code = 0;
	in.has_run = 1;
	in.run_status = "ok";
	in.run_class = "";
	assert_string_equal(slurm_classify(&in), "");
	in.has_run = 0;
	assert_string_equal(slurm_classify(&in), "launch_error");
	in.state = "FAILED";
	in.exit_code = 3;
	assert_string_equal(slurm_classify(&in), "oom");
	in.exit_code = 127;
	assert_string_equal(slurm_classify(&in), "launch_error");
	in.exit_code = 1;
	in.has_run = 1;
	in.run_status = "failed";
	in.run_class = "oom";
	assert_string_equal(slurm_classify(&in), "oom");
	in.run_class = "nccl_error";
	assert_string_equal(slurm_classify(&in), "failed");
	in.state = "TIMEOUT";
	assert_string_equal(slurm_classify(&in), "timeout");
	in.state = "CANCELLED";
	assert_string_equal(slurm_classify(&in), "cancelled");
	in.state = "NODE_FAIL";
	assert_string_equal(slurm_classify(&in), "node_fail");
	in.state = "PREEMPTED";
	assert_string_equal(slurm_classify(&in), "preempted");
	in.state = "OUT_OF_MEMORY";
	assert_string_equal(slurm_classify(&in), "oom");
	/* purged: the run log decides, else unknown */
	in.state = "";
	in.exit_code = -1;
	in.has_run = 1;
	in.run_status = "ok";
	in.run_class = "";
	assert_string_equal(slurm_classify(&in), "");
	assert_string_equal(slurm_purged_state(&in), "COMPLETED");
	in.run_status = "failed";
	in.run_class = "oom";
	assert_string_equal(slurm_classify(&in), "oom");
	assert_string_equal(slurm_purged_state(&in), "FAILED");
	in.has_run = 0;
	assert_string_equal(slurm_classify(&in), "unknown");
	assert_string_equal(slurm_purged_state(&in), "UNKNOWN");
	in.exit_code = 127;
	assert_string_equal(slurm_classify(&in), "launch_error");
	assert_true(slurm_class_valid("oom"));
	assert_false(slurm_class_valid("nccl_error"));
	/* completed, but the run log stops without its end record: a failure */
	in.state = "COMPLETED";
	in.exit_code = 0;
	in.has_run = 1;
	in.run_status = "running";
	in.run_class = "";
	assert_string_equal(slurm_classify(&in), "failed");
	/* the class of a run closed without its end record: the scheduler's verdict, else the
	 * trainer's exit status read through the trainer's own table */
	const char *cls[] = {"oom", "nccl_error", "diverged", "timeout", "io_error", "error"};
	for (size_t i = 0; i < sizeof(cls) / sizeof(cls[0]); i++)
		assert_string_equal(slurm_run_end_class("failed", lb_class_exit_code(cls[i])),
				    cls[i]);
	assert_string_equal(slurm_run_end_class("", 0), "error");
	assert_string_equal(slurm_run_end_class("failed", 143), "killed");
	assert_string_equal(slurm_run_end_class("failed", -1), "killed");
	assert_string_equal(slurm_run_end_class("cancelled", 7), "killed");
	assert_string_equal(slurm_run_end_class("timeout", 143), "timeout");
	assert_string_equal(slurm_run_end_class("oom", -1), "oom");
}

/* cpus_per_task reaches srun through SRUN_CPUS_PER_TASK (srun does not inherit sbatch's
 * --cpus-per-task since Slurm 22.05), exported before the srun line; unset: nothing. */
static void test_cpus_per_task(void **state)
{
	struct sweep_plan p;
	struct slurm_batch b;
	char err[256];
	(void)state;
	make_plan(&p, 1, 1);
	assert_int_equal(slurm_render_batch(&p, NULL, 0, &opts, &b, err, sizeof(err)), 0);
	assert_null(strstr(b.arrays[0].script, "SRUN_CPUS_PER_TASK"));
	assert_null(strstr(b.arrays[0].script, "--cpus-per-task"));
	slurm_batch_free(&b);
	p.cluster.cpus_per_task = 12;
	assert_int_equal(slurm_render_batch(&p, NULL, 0, &opts, &b, err, sizeof(err)), 0);
	const char *sc = b.arrays[0].script;
	const char *ex = strstr(sc, "\nexport SRUN_CPUS_PER_TASK=${SLURM_CPUS_PER_TASK:-12}\n");
	const char *srun = strstr(sc, "\"${LB_SRUN:-srun}\"");
	assert_non_null(strstr(sc, "#SBATCH --cpus-per-task=12\n"));
	assert_non_null(ex);
	assert_non_null(srun);
	assert_true(ex < srun);
	slurm_batch_free(&b);
	sweep_plan_free(&p);
}

/* cluster.peak_tflops reaches the trainer (--peak-tflops, on both of its lines: under
 * srun and without Slurm); unset: nothing. */
static void test_peak_override(void **state)
{
	struct sweep_plan p;
	struct slurm_batch b;
	char err[256];
	(void)state;
	make_plan(&p, 1, 1);
	assert_int_equal(slurm_render_batch(&p, NULL, 0, &opts, &b, err, sizeof(err)), 0);
	assert_null(strstr(b.arrays[0].script, "--peak-tflops"));
	slurm_batch_free(&b);
	p.cluster.peak_tflops = 383;
	assert_int_equal(slurm_render_batch(&p, NULL, 0, &opts, &b, err, sizeof(err)), 0);
	const char *first = strstr(b.arrays[0].script, " --peak-tflops 383 --run-dir");
	assert_non_null(first);
	assert_non_null(strstr(first + 1, " --peak-tflops 383 --run-dir"));
	slurm_batch_free(&b);
	sweep_plan_free(&p);
}

/* cluster.gpu_request: --gpus-per-node (default), --gres=gpu:N, --gres=gpu:TYPE:N; never
 * both; nothing for the CPU backend; an unsafe type refused. */
static void test_gpu_request(void **state)
{
	struct sweep_plan p;
	struct slurm_batch b;
	char err[256];
	static const char *const req[] = {"", "gpus-per-node", "gres", "gres:a100"};
	static const char *const want[] = {"#SBATCH --gpus-per-node=4\n",
					   "#SBATCH --gpus-per-node=4\n", "#SBATCH --gres=gpu:4\n",
					   "#SBATCH --gres=gpu:a100:4\n"};
	(void)state;
	make_plan(&p, 1, 1);
	for (int i = 0; i < 4; i++) {
		snprintf(p.cluster.gpu_request, sizeof(p.cluster.gpu_request), "%s", req[i]);
		assert_int_equal(slurm_render_batch(&p, NULL, 0, &opts, &b, err, sizeof(err)), 0);
		assert_non_null(strstr(b.arrays[0].script, want[i]));
		if (i >= 2)
			assert_null(strstr(b.arrays[0].script, "#SBATCH --gpus-per-node"));
		else
			assert_null(strstr(b.arrays[0].script, "#SBATCH --gres"));
		slurm_batch_free(&b);
	}
	snprintf(p.cluster.device, sizeof(p.cluster.device), "cpu");
	assert_int_equal(slurm_render_batch(&p, NULL, 0, &opts, &b, err, sizeof(err)), 0);
	assert_null(strstr(b.arrays[0].script, "#SBATCH --gres"));
	assert_null(strstr(b.arrays[0].script, "#SBATCH --gpus"));
	slurm_batch_free(&b);
	snprintf(p.cluster.device, sizeof(p.cluster.device), "cuda");
	snprintf(p.cluster.gpu_request, sizeof(p.cluster.gpu_request), "gres:a;id");
	assert_int_equal(render_err(&p, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cluster.gpu_request 'gres:a;id'"));
	snprintf(p.cluster.gpu_request, sizeof(p.cluster.gpu_request), "gpus");
	assert_int_equal(render_err(&p, err, sizeof(err)), -1);
	sweep_plan_free(&p);
}

/* plan --render creates <runs>/<sweep>/logs, the folder of #SBATCH --output: Slurm does
 * not, and a job whose output file cannot be opened fails without a log. */
static void test_render_plan_logs(void **state)
{
	struct sweep_plan p;
	char tmpl[] = "/tmp/lb-render-XXXXXX", runs[128], dir[128], logs[160], err[512];
	struct stat st;
	(void)state;
	assert_non_null(mkdtemp(tmpl));
	snprintf(runs, sizeof(runs), "%s/runs", tmpl);
	snprintf(dir, sizeof(dir), "%s/scripts", tmpl);
	snprintf(logs, sizeof(logs), "%s/unit/logs", runs);
	setenv("LAYOUTBENCH_RUNS", runs, 1);
	setenv("LAYOUTBENCH_TRAIN", "/opt/lb/bin/layoutbench-train", 1);
	make_plan(&p, 2, 1);
	assert_int_not_equal(stat(logs, &st), 0);
	assert_int_equal(slurm_render_plan(&p, dir, err, sizeof(err)), 0);
	assert_int_equal(stat(logs, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	/* again: the folder exists, still fine */
	assert_int_equal(slurm_render_plan(&p, dir, err, sizeof(err)), 0);
	sweep_plan_free(&p);
	unsetenv("LAYOUTBENCH_RUNS");
	unsetenv("LAYOUTBENCH_TRAIN");
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpl);
	assert_int_equal(system(cmd), 0);
}

static void test_env_secrets(void **state)
{
	size_t n = 0;
	(void)state;
	setenv("SLURM_JWT", "secret-jwt", 1);
	setenv("SLURMRESTD_TOKEN", "secret-token", 1);
	char **env = exec_job_environ(&n);
	assert_non_null(env);
	assert_true(n > 0);
	for (size_t i = 0; i < n; i++) {
		assert_null(strstr(env[i], "secret-jwt"));
		assert_null(strstr(env[i], "secret-token"));
	}
	free(env);
	assert_true(exec_state_final("COMPLETED"));
	assert_false(exec_state_final("PENDING"));
	assert_false(exec_state_final(""));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quote),
	    cmocka_unit_test(test_safe),
	    cmocka_unit_test(test_grouping),
	    cmocka_unit_test(test_optim_flags),
	    cmocka_unit_test(test_split_and_throttle),
	    cmocka_unit_test(test_hostile),
	    cmocka_unit_test(test_spec_nvls),
	    cmocka_unit_test(test_classify),
	    cmocka_unit_test(test_env_secrets),
	    cmocka_unit_test(test_cpus_per_task),
	    cmocka_unit_test(test_gpu_request),
	    cmocka_unit_test(test_peak_override),
	    cmocka_unit_test(test_render_plan_logs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
