/*
 * libFuzzer target: arbitrary bytes as a machine file applied onto a working machine
 * (lb_machine_apply_text), as bench_kernels' CSV and as bench_colls' output; whatever
 * tables survive must predict a layout without crashing, hanging or leaking (a refusal
 * with a reason is fine, a step time must be finite and positive when one is given).
 */
// fuzz-sources: common/*.c results/paper_csv.c @embed
// fuzz-libs: -lcjson -lm -lpthread
// fuzz-seeds: common/machines/*.json docs/results/h200/targets/kernels.csv
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/machine.h"
#include "common/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct lb_machine base;

static void base_init(void)
{
	lb_machine_init(&base);
	base.peak_tflops = 312;
	base.copy_gbps = 2000;
	base.nvlink_gbps = 300;
	base.node_gbps = 25;
	base.n_attn = 1;
	strcpy(base.attn[0].name, "flash");
	base.attn[0].scale = 1;
	base.attn[0].n_fwd = base.attn[0].n_bwd = 1;
	base.attn[0].fwd_seq[0] = base.attn[0].bwd_seq[0] = 2048;
	base.attn[0].fwd_tflops[0] = base.attn[0].bwd_tflops[0] = 150;
}

static void predict_one(const struct lb_machine *m)
{
	struct lb_layout l;
	struct lb_prediction p;
	char why[256];

	lb_layout_init(&l);
	lb_model_preset("llama-7b", &l.model);
	l.seq_len = 2048, l.global_batch = 16, l.tp = 2, l.pp = 2, l.dp = 2;
	l.gpus_per_node = 8, l.micro_batch = 2;
	if (!lb_predict(m, &l, "flash_attentionv1.0.8", NULL, &p, why, sizeof(why)) &&
	    !(p.step_s > 0 && isfinite(p.step_s)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct lb_machine m;
	char err[512], b[64];
	int skipped;

	if (size > 65536)
		return 0;
	if (!base.peak_tflops)
		base_init();
	m = base;
	if (!lb_machine_apply_text(&m, (const char *)data, size, "fuzz", b, sizeof(b), err,
				   sizeof(err)))
		predict_one(&m);
	m = base;
	if (!lb_machine_from_kernels_csv(&m, (const char *)data, size, &skipped, err, sizeof(err)))
		predict_one(&m);
	m = base;
	if (!lb_machine_from_colls(&m, (const char *)data, size, err, sizeof(err)))
		predict_one(&m);
	return 0;
}
