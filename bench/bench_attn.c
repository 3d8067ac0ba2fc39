/*
 * The attention variant sweep: what cuDNN's fused attention can reach at one shape beyond
 * the plan the trainer picks (lb_cuda_cudnn_sweep, harness/cuda/attention_cudnn.cu). For
 * each variant of the forward and backward graphs (the trainer's; as cuDNN's own frontend
 * builds them; the backward with the row sums inside the graph or the dQ accumulator
 * reordered alone; the dP-workspace backward, dQ straight into bf16) every engine
 * configuration cuDNN offers is made a plan, checked against the trainer's plan's outputs
 * and timed: the heuristic's lists (modes A, B, fallback), every engine with its default
 * knobs, and the knobs of the variant's fastest engine through their ranges (tile shapes,
 * CTA counts, stream-K: how an engine spreads the causal mask's rows over the SMs).
 *
 *   bench_attn [--b B] [--s S] [--heads N] [--kv-heads N] [--d D] [--max-s SECONDS]
 *
 * Defaults: one sequence of 2048 tokens, 40 heads of 128 (Llama-13B width), 120 s. Prints
 * the trainer's own plans (TRAINER), a line per plan (SWEEP: direction, variant, candidate,
 * engine, workspace MiB, ms, TFLOP/s, check, cuDNN's JSON of the plan), the fastest of each
 * variant (VARIANT), the fastest checked plan of each direction and both together (BEST),
 * and RESULT lines for bench/run.sh. FLOPs as bench_kernels counts them: causal, 4 B nh S^2
 * D / 2 forward, 2.5 times that backward. Without the CUDA backend or a GPU it says why and
 * exits 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "harness/ops.h"
#ifdef LB_WITH_CUDA
#include "bench/cuda_bench.h"
#endif

static void usage(void)
{
	fprintf(stderr, "usage: bench_attn [--b B] [--s S] [--heads N] [--kv-heads N] [--d D] "
			"[--max-s SECONDS]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int b = 1, s = 2048, nh = 40, nkv = -1, d = 128;
	double max_s = 120;
	const struct lb_ops *o;
	char err[256] = "";

	for (int i = 1; i < argc; i++) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;

		if (!v)
			usage();
		if (!strcmp(f, "--b"))
			bad = lb_parse_int(v, 1, 64, &b);
		else if (!strcmp(f, "--s"))
			bad = lb_parse_int(v, 16, 1 << 17, &s);
		else if (!strcmp(f, "--heads"))
			bad = lb_parse_int(v, 1, 1024, &nh);
		else if (!strcmp(f, "--kv-heads"))
			bad = lb_parse_int(v, 1, 1024, &nkv);
		else if (!strcmp(f, "--d"))
			bad = lb_parse_int(v, 8, 256, &d);
		else if (!strcmp(f, "--max-s"))
			bad = lb_parse_double(v, 1, 3600, &max_s);
		else
			usage();
		if (bad) {
			fprintf(stderr, "error: %s '%s': not a number in its range\n", f, v);
			return 2;
		}
		i++;
	}
	if (nkv < 0)
		nkv = nh;
	if (nh % nkv) {
		fprintf(stderr, "error: --kv-heads %d does not divide --heads %d\n", nkv, nh);
		return 2;
	}
	o = lb_ops_find("cuda");
	if (!o) {
		printf("skip: built without the CUDA backend (nvcc not found at build time)\n");
		return 0;
	}
	if (o->init && o->init(0, err, sizeof(err))) {
		printf("skip: %s\n", err);
		return 0;
	}
#ifdef LB_WITH_CUDA
	{
		double trainer, best;
		int rc = lb_cuda_cudnn_sweep(b, s, nh, nkv, d, max_s, stdout, &trainer, &best);

		printf("RESULT\tattention fwd+bwd, trainer's cudnn plans, B%d S%d nh%d D%d\t%.1f\t"
		       "TFLOP/s\t>= 400 at S 2048\tINFO\n",
		       b, s, nh, d, trainer);
		printf("RESULT\tattention fwd+bwd, fastest cudnn plan of the sweep, B%d S%d nh%d "
		       "D%d\t%.1f\tTFLOP/s\t>= 400 at S 2048\tINFO\n",
		       b, s, nh, d, best);
		return rc ? 1 : 0;
	}
#else
	return 0;
#endif
}
