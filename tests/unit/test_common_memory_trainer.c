/*
 * lb_memory_trainer (common/memory_trainer.c) against the trainer itself: for layouts of
 * every kind (tp, pp with even and uneven stages, dp, sequence parallelism, ZeRO-1,
 * checkpointing none/selective/full, each attention kernel and norm, micro-batches,
 * GPipe, tied and grouped-query models), the CPU backend's counted peak in the run log
 * (every rank's, "rank_peak_mem_bytes", or "peak_mem_bytes" for one rank) equals the
 * model's CPU prediction for the most loaded rank to within 0.01% (explicit layer splits
 * and the interleaved schedule's chunks included): the model mirrors the
 * trainer's buffers one by one, so any buffer added, dropped or resized in the trainer
 * without the model fails here. The GPU sizes (bf16 act buffers, the CUDA backend's
 * scratch) are checked against measured H200 peaks in docs/results/h200/README.md.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/layout.h"
#include "common/model.h"
#include "harness/train.h"

static char tmpdir[256];

/* The largest per-rank peak of the run's first step, from its log. */
static double logged_peak(const char *dir)
{
	char cmd[600], line[1 << 16];
	double best = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "grep -h '\"type\":\"step\"' %s/run-*.jsonl | head -n 1", dir);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	if (fgets(line, sizeof(line), p)) {
		char *a = strstr(line, "\"rank_peak_mem_bytes\":[");

		if (a) {
			a += strlen("\"rank_peak_mem_bytes\":[");
			while (*a && *a != ']') {
				double v = strtod(a, &a);

				if (v > best)
					best = v;
				if (*a == ',')
					a++;
			}
		} else if ((a = strstr(line, "\"peak_mem_bytes\":"))) {
			best = strtod(a + strlen("\"peak_mem_bytes\":"), NULL);
		}
	}
	pclose(p);
	return best;
}

struct cas {
	const char *args;
	int gpipe;
};

static const struct cas cases[] = {
    {"--model tiny --seq-len 32 --global-batch 4 --micro-batch 1", 0},
    {"--model tiny --seq-len 32 --global-batch 4 --micro-batch 2 --norm unfused", 0},
    {"--model tiny --seq-len 32 --global-batch 4 --micro-batch 1 --attention naive", 0},
    {"--model tiny --seq-len 32 --global-batch 4 --micro-batch 1 --attention fused_softmax "
     "--checkpointing selective",
     0},
    {"--model tiny --seq-len 32 --global-batch 4 --micro-batch 1 --attention naive --checkpointing "
     "full --norm unfused",
     0},
    {"--model tiny-gqa --seq-len 48 --global-batch 4 --micro-batch 1 --checkpointing selective", 0},
    {"--model tiny-tied --seq-len 32 --global-batch 4 --micro-batch 1", 0},
    {"--model tiny --seq-len 32 --global-batch 4 --micro-batch 1 --tp 2", 0},
    {"--model tiny --seq-len 32 --global-batch 4 --micro-batch 1 --tp 2 --sequence-parallel 1 "
     "--norm unfused",
     0},
    {"--model tiny --seq-len 32 --global-batch 8 --micro-batch 1 --pp 2", 0},
    {"--model tiny --seq-len 32 --global-batch 8 --micro-batch 1 --pp 2", 1},
    {"--model tiny --seq-len 32 --global-batch 8 --micro-batch 1 --pp 3", 0},
    {"--model tiny-tied --seq-len 32 --global-batch 8 --micro-batch 1 --pp 2 --checkpointing full",
     0},
    {"--model tiny --seq-len 32 --global-batch 8 --micro-batch 1 --dp 2", 0},
    {"--model tiny --seq-len 32 --global-batch 8 --micro-batch 1 --dp 2 --zero-stage 1", 0},
    {"--model tiny --seq-len 32 --global-batch 8 --micro-batch 2 --tp 2 --pp 2 --dp 2 --zero-stage "
     "1 --sequence-parallel 1",
     0},
    {"--model tiny --seq-len 32 --global-batch 8 --micro-batch 1 --dp 2 --zero-stage 2", 0},
    {"--model tiny-tied --seq-len 32 --global-batch 8 --micro-batch 1 --dp 4 --zero-stage 2", 0},
    {"--model tiny-gqa --seq-len 48 --global-batch 8 --micro-batch 1 --dp 4 --zero-stage 1", 0},
    {"--model tiny --seq-len 32 --global-batch 8 --micro-batch 2 --tp 2 --pp 2 --dp 2 --zero-stage "
     "2 --sequence-parallel 1",
     0},
    {"--model tiny-tied --seq-len 32 --global-batch 8 --micro-batch 1 --pp 2 --dp 2 --zero-stage 2",
     0},
    /* explicit splits and the interleaved schedule's chunks and slots */
    {"--model tiny-deep --seq-len 32 --global-batch 8 --micro-batch 1 --pp 2 --stage-layers 2,6",
     0},
    {"--model tiny-deep --seq-len 32 --global-batch 8 --micro-batch 1 --pp 3 --stage-layers 4,2,2 "
     "--checkpointing selective",
     0},
    {"--model tiny --seq-len 32 --global-batch 8 --micro-batch 1 --pp 2 --virtual-stages 2", 0},
    {"--model tiny-deep --seq-len 32 --global-batch 8 --micro-batch 1 --pp 4 --virtual-stages 2 "
     "--checkpointing full",
     0},
    {"--model tiny-deep --seq-len 32 --global-batch 12 --micro-batch 1 --pp 2 --virtual-stages 3 "
     "--norm unfused",
     0},
    {"--model tiny-tied --seq-len 32 --global-batch 8 --micro-batch 1 --pp 2 --virtual-stages 2 "
     "--tp 2 --sequence-parallel 1",
     0},
    {"--model tiny-deep --seq-len 32 --global-batch 8 --micro-batch 1 --pp 2 --virtual-stages 2 "
     "--stage-layers 1,3,3,1 --dp 2 --zero-stage 1",
     0},
    {"--model tiny-deep --seq-len 32 --global-batch 8 --micro-batch 1 --pp 2 --virtual-stages 2 "
     "--dp 2 --zero-stage 2",
     0},
};

static void test_cpu_peaks(void **state)
{
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct lb_train_opts o;
		struct lb_mem_estimate est;
		char args[512], *argv[64], dir[400], err[512], cmd[600];
		int argc = 0, rc;
		double got;

		lb_train_opts_init(&o);
		snprintf(args, sizeof(args), "%s --steps 1 --warmup 0", cases[i].args);
		argv[argc++] = "layoutbench-train";
		for (char *t = strtok(args, " "); t && argc < 63; t = strtok(NULL, " "))
			argv[argc++] = t;
		argv[argc] = NULL;
		rc = lb_train_parse_args(&o, argc, argv, err, sizeof(err));
		assert_int_equal(rc, 0);
		o.quiet = 1;
		o.comm_timeout = 30;
		o.schedule = cases[i].gpipe ? LB_SCHED_GPIPE : LB_SCHED_1F1B;
		o.nproc_per_node = lb_layout_world(&o.layout);
		o.layout.gpus_per_node = o.nproc_per_node; /* one node holds every rank */
		snprintf(dir, sizeof(dir), "%s/c%zu", tmpdir, i);
		snprintf(o.run_dir, sizeof(o.run_dir), "%s", dir);
		assert_int_equal(lb_train_main(&o), 0);
		got = logged_peak(dir);
		assert_int_equal(lb_memory_trainer(&o.layout, 0, cases[i].gpipe, &est), 0);
		printf("  %-100s%s logged %10.0f B, model %10.0f B (%+.4f%%)\n", cases[i].args,
		       cases[i].gpipe ? " gpipe" : "", got, est.total,
		       100.0 * (est.total - got) / got);
		if (!(got > 0) || est.total < got * 0.9999 || est.total > got * 1.0001)
			bad++;
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "warning: cannot remove %s\n", dir);
	}
	assert_int_equal(bad, 0);
}

/* The GPU model differs where the backend does: act buffers are bf16 (half the CPU's) and
 * the CUDA backend adds its cuBLASLt workspace. */
static void test_gpu_sizes(void **state)
{
	struct lb_layout l;
	struct lb_mem_estimate c, g;
	char err[256];
	const char *argv[] = {"--model",	"llama-13b", "--layers",      "8",
			      "--vocab",	"32000",     "--seq-len",     "2048",
			      "--global-batch", "16",	     "--micro-batch", "1"};
	char *rest[12];
	int nrest = 0;

	(void)state;
	lb_layout_init(&l);
	assert_int_equal(
	    lb_layout_parse_args(&l, 12, (char **)argv, rest, &nrest, err, sizeof(err)), 0);
	assert_int_equal(lb_memory_trainer(&l, 0, 0, &c), 0);
	assert_int_equal(lb_memory_trainer(&l, 1, 0, &g), 0);
	assert_true(g.weights * 2.0 == c.weights);
	assert_true(g.grads == c.grads && g.optimizer == c.optimizer);
	/* 13B width, 8 layers: 18 bytes per parameter of weights, gradients, optimizer */
	assert_true((g.weights + g.grads + g.optimizer) / 2.87e9 > 17.5);
	assert_true((g.weights + g.grads + g.optimizer) / 2.87e9 < 18.5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cpu_peaks),
	    cmocka_unit_test(test_gpu_sizes),
	};
	const char *t = getenv("TMPDIR");

	snprintf(tmpdir, sizeof(tmpdir), "%s/lb-memtrainer-XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(tmpdir))
		return 1;
	{
		int rc = cmocka_run_group_tests(tests, NULL, NULL);
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "warning: cannot remove %s\n", tmpdir);
		return rc;
	}
}
