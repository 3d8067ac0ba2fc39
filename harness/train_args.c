/*
 * layoutbench-train's command line: the options (the layout flags through
 * common/layout.h's parser, plus the trainer's own), their usage text, and the checks that
 * refuse what this build cannot run, each with the fix. See train.h, docs/trainer.md.
 */
#include "harness/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "harness/comm/bootstrap.h"
#include "harness/comm/comm_cuda.h"
#include "harness/comm/comm_shm.h"

/* --- flags --- */

void lb_train_opts_init(struct lb_train_opts *o)
{
	memset(o, 0, sizeof(*o));
	lb_layout_init(&o->layout);
	snprintf(o->run_dir, sizeof(o->run_dir), ".");
	o->data_elem = 2;
	o->lr = LB_TRAIN_DEFAULT_LR;
	o->weight_decay = LB_TRAIN_DEFAULT_WD;
	o->clip = LB_TRAIN_DEFAULT_CLIP;
	o->nproc_per_node = 1;
	o->comm_timeout = LB_TRAIN_DEFAULT_COMM_TIMEOUT;
	o->grad_bucket = LB_GRAD_BUCKET_DEFAULT;
	o->grad_overlap = 1;
	o->pipe_overlap = 1;
	o->cuda_graphs = 0;
}

const char *lb_train_usage(void)
{
	static char buf[8192];

	snprintf(
	    buf, sizeof(buf),
	    "usage: layoutbench-train [layout flags] [trainer flags]\n\n%s\n"
	    "trainer flags:\n"
	    "  --device cpu|cuda       backend (default cpu; cuda: a build where nvcc was found)\n"
	    "  --run-dir DIR           where run-<run_uid>.jsonl goes (default .; created)\n"
	    "  --data FILE             flat binary token ids, sequences packed back to back\n"
	    "                          (default: a synthetic stream from the seed)\n"
	    "  --data-dtype u16|u32    width of the ids in --data (default u16)\n"
	    "  --lr X                  constant AdamW learning rate (default %g)\n"
	    "  --weight-decay X        AdamW decoupled weight decay on matrices (default %g)\n"
	    "  --clip X                global gradient-norm clip, 0 off (default %g)\n"
	    "  --mem-limit BYTES       cap on the CPU allocator (K, M, G, T suffixes); an\n"
	    "                          allocation above it fails the run as oom (exit 3);\n"
	    "                          default $LAYOUTBENCH_MEM_LIMIT, else none\n"
	    "  --nproc-per-node N      ranks this process starts without srun (default 1)\n"
	    "  --comm-timeout S        seconds before a silent peer is a timeout (default %g)\n"
	    "  --peak-tflops X         dense bf16 peak per GPU (TFLOP/s) to record for MFU, for a\n"
	    "                          GPU the peak table lacks (default: the table's; none on\n"
	    "                          a CPU)\n"
	    "  --gpu-comm auto|nccl|staged  with --device cuda and several ranks: NCCL, or\n"
	    "                          staged through host memory (ranks that share a GPU);\n"
	    "                          auto (default): staged when a node has more ranks than\n"
	    "                          visible GPUs, else nccl\n"
	    "  --bootstrap auto|file|pmi2  across nodes, how the ranks get rank 0's NCCL id:\n"
	    "                          a file in the run directory, or Slurm's PMI2 (srun\n"
	    "                          --mpi=pmi2); auto (default): pmi2 when srun started\n"
	    "                          the rank with it, else file\n"
	    "  --pipeline-schedule 1f1b|gpipe|interleaved  pipeline schedule with --pp > 1\n"
	    "                          (default 1f1b; --virtual-stages N > 1 runs interleaved,\n"
	    "                          which needs it)\n"
	    "  --grad-bucket N         elements per data-parallel gradient bucket (default\n"
	    "                          %u; K, M, G suffixes)\n"
	    "  --grad-overlap 0|1      reduce each bucket during the backward, on a second\n"
	    "                          stream (1, default), or on the compute stream (0)\n"
	    "  --pipe-overlap 0|1      pipeline sends and receives on a stream of their own\n"
	    "                          (1, default), or on the compute stream (0)\n"
	    "  --cuda-graphs 0|1       1: capture each micro-batch's forward and backward and\n"
	    "                          the optimizer as CUDA graphs and replay them; 0 (default,\n"
	    "                          or $LAYOUTBENCH_CUDA_GRAPHS): launch every kernel\n"
	    "  --dump-params FILE      testing aid: write the whole model's fp32 parameters\n"
	    "                          after the last step (rank 0)\n"
	    "  --quiet                 no progress line per step on stderr\n"
	    "  --help                  this text\n\n"
	    "exit status: 0 ok, 1 error, 2 usage, 3 oom, 4 nccl_error, 5 diverged, 6 timeout,\n"
	    "128+N killed by signal N\n",
	    lb_layout_flags_usage(), LB_TRAIN_DEFAULT_LR, LB_TRAIN_DEFAULT_WD,
	    LB_TRAIN_DEFAULT_CLIP, LB_TRAIN_DEFAULT_COMM_TIMEOUT, LB_GRAD_BUCKET_DEFAULT);
	return buf;
}

int lb_parse_bytes(const char *s, uint64_t *out)
{
	char num[64];
	size_t n = strlen(s);
	uint64_t mul = 1, v;

	if (n == 0 || n >= sizeof(num))
		return -1;
	memcpy(num, s, n + 1);
	switch (num[n - 1]) {
	case 'K':
	case 'k':
		mul = 1ULL << 10;
		break;
	case 'M':
	case 'm':
		mul = 1ULL << 20;
		break;
	case 'G':
	case 'g':
		mul = 1ULL << 30;
		break;
	case 'T':
	case 't':
		mul = 1ULL << 40;
		break;
	default:
		break;
	}
	if (mul != 1)
		num[n - 1] = '\0';
	if (lb_parse_u64(num, &v) || (v && v > UINT64_MAX / mul))
		return -1;
	*out = v * mul;
	return 0;
}

/* Trainer flags: name, takes a value. */
static const struct {
	const char *name;
	int has_value;
} train_flags[] = {
    {"--device", 1},
    {"--run-dir", 1},
    {"--data", 1},
    {"--data-dtype", 1},
    {"--lr", 1},
    {"--weight-decay", 1},
    {"--clip", 1},
    {"--mem-limit", 1},
    {"--nproc-per-node", 1},
    {"--comm-timeout", 1},
    {"--peak-tflops", 1},
    {"--gpu-comm", 1},
    {"--bootstrap", 1},
    {"--quiet", 0},
    {"--help", 0},
    {"--pipeline-schedule", 1},
    {"--dump-params", 1},
    {"--grad-bucket", 1},
    {"--grad-overlap", 1},
    {"--pipe-overlap", 1},
    {"--cuda-graphs", 1},
};

static int set_train_flag(struct lb_train_opts *o, const char *name, const char *v, char *err,
			  size_t errlen)
{
	if (!strcmp(name, "--device")) {
		if (!strcmp(v, "cpu"))
			o->device_cuda = 0;
		else if (!strcmp(v, "cuda"))
			o->device_cuda = 1;
		else
			goto bad_enum;
	} else if (!strcmp(name, "--run-dir")) {
		if (!*v || strlen(v) >= sizeof(o->run_dir))
			goto bad;
		snprintf(o->run_dir, sizeof(o->run_dir), "%s", v);
	} else if (!strcmp(name, "--data")) {
		if (!*v || strlen(v) >= sizeof(o->data_path))
			goto bad;
		snprintf(o->data_path, sizeof(o->data_path), "%s", v);
	} else if (!strcmp(name, "--data-dtype")) {
		if (!strcmp(v, "u16"))
			o->data_elem = 2;
		else if (!strcmp(v, "u32"))
			o->data_elem = 4;
		else
			goto bad_enum;
	} else if (!strcmp(name, "--lr")) {
		if (lb_parse_double(v, 0.0, 1e300, &o->lr))
			goto bad;
	} else if (!strcmp(name, "--weight-decay")) {
		if (lb_parse_double(v, 0.0, 1e6, &o->weight_decay))
			goto bad;
	} else if (!strcmp(name, "--clip")) {
		if (lb_parse_double(v, 0.0, 1e300, &o->clip))
			goto bad;
	} else if (!strcmp(name, "--mem-limit")) {
		if (lb_parse_bytes(v, &o->mem_limit))
			goto bad;
	} else if (!strcmp(name, "--nproc-per-node")) {
		if (lb_parse_int(v, 1, 1024, &o->nproc_per_node))
			goto bad;
	} else if (!strcmp(name, "--comm-timeout")) {
		if (lb_parse_double(v, 0.001, 1e7, &o->comm_timeout))
			goto bad;
	} else if (!strcmp(name, "--peak-tflops")) {
		if (lb_parse_double(v, 1e-6, 1e6, &o->peak_tflops))
			goto bad;
	} else if (!strcmp(name, "--gpu-comm")) {
		if (!strcmp(v, "auto"))
			o->gpu_comm = LB_GPU_COMM_AUTO;
		else if (!strcmp(v, "nccl"))
			o->gpu_comm = LB_GPU_COMM_NCCL;
		else if (!strcmp(v, "staged"))
			o->gpu_comm = LB_GPU_COMM_STAGED;
		else
			goto bad_enum;
	} else if (!strcmp(name, "--bootstrap")) {
		enum lb_bootstrap b;

		if (lb_bootstrap_parse(v, &b))
			goto bad_enum;
		o->bootstrap = b;
	} else if (!strcmp(name, "--pipeline-schedule")) {
		if (lb_sched_parse(v, &o->schedule))
			goto bad_enum;
	} else if (!strcmp(name, "--grad-bucket")) {
		if (lb_parse_bytes(v, &o->grad_bucket) || o->grad_bucket == 0 ||
		    o->grad_bucket > (1ULL << 40))
			goto bad;
	} else if (!strcmp(name, "--grad-overlap")) {
		if (strcmp(v, "0") && strcmp(v, "1"))
			goto bad_enum;
		o->grad_overlap = v[0] == '1';
	} else if (!strcmp(name, "--pipe-overlap")) {
		if (strcmp(v, "0") && strcmp(v, "1"))
			goto bad_enum;
		o->pipe_overlap = v[0] == '1';
	} else if (!strcmp(name, "--cuda-graphs")) {
		if (strcmp(v, "0") && strcmp(v, "1"))
			goto bad_enum;
		o->cuda_graphs = v[0] == '1';
	} else if (!strcmp(name, "--dump-params")) {
		if (!*v || strlen(v) >= sizeof(o->dump_params))
			goto bad;
		snprintf(o->dump_params, sizeof(o->dump_params), "%s", v);
	}
	return 0;
bad:
	snprintf(err, errlen, "%s: invalid value '%s'", name, v);
	return -1;
bad_enum:
	snprintf(err, errlen, "%s: unknown value '%s' (expected %s)", name, v,
		 !strcmp(name, "--device")		? "cpu or cuda"
		 : !strcmp(name, "--pipeline-schedule") ? "1f1b, gpipe or interleaved"
		 : !strcmp(name, "--gpu-comm")		? "auto, nccl or staged"
		 : !strcmp(name, "--grad-overlap")	? "0 or 1"
		 : !strcmp(name, "--pipe-overlap")	? "0 or 1"
		 : !strcmp(name, "--cuda-graphs")	? "0 or 1"
		 : !strcmp(name, "--bootstrap")		? "auto, file or pmi2"
							: "u16 or u32");
	return -1;
}

/* 1 if argv[1..argc) holds the flag, as "--flag" or "--flag=value". */
static int has_flag(int argc, char **argv, const char *flag)
{
	size_t n = strlen(flag);

	for (int i = 1; i < argc; i++)
		if (!strncmp(argv[i], flag, n) && (argv[i][n] == '\0' || argv[i][n] == '='))
			return 1;
	return 0;
}

int lb_train_parse_args(struct lb_train_opts *o, int argc, char **argv, char *err, size_t errlen)
{
	char **rest;
	int nrest = 0, rc = 0;
	const char *env = getenv("LAYOUTBENCH_MEM_LIMIT");
	const char *graphs = getenv("LAYOUTBENCH_CUDA_GRAPHS");

	if (env && *env && lb_parse_bytes(env, &o->mem_limit)) {
		snprintf(err, errlen, "LAYOUTBENCH_MEM_LIMIT: invalid byte count '%s'", env);
		return -1;
	}
	if (graphs && *graphs) { /* the flag wins */
		if (strcmp(graphs, "0") && strcmp(graphs, "1")) {
			snprintf(err, errlen,
				 "LAYOUTBENCH_CUDA_GRAPHS: unknown value '%s' (expected 0 or 1)",
				 graphs);
			return -1;
		}
		o->cuda_graphs = graphs[0] == '1';
	}
	for (int i = 1; i < argc; i++) /* --help wins over any error */
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(lb_train_usage(), stdout);
			return 1;
		}
	rest = calloc((size_t)argc + 1, sizeof(*rest));
	if (!rest) {
		snprintf(err, errlen, "out of host memory");
		return -1;
	}
	if (lb_layout_parse_args(&o->layout, argc - 1, argv + 1, rest, &nrest, err, errlen)) {
		rc = -1;
		goto out_free_rest;
	}
	for (int i = 0; i < nrest; i++) {
		const char *arg = rest[i], *eq = strchr(arg, '='), *val = NULL;
		char name[64];
		size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
		size_t f;

		if (nlen >= sizeof(name))
			nlen = sizeof(name) - 1;
		memcpy(name, arg, nlen);
		name[nlen] = '\0';
		for (f = 0; f < sizeof(train_flags) / sizeof(train_flags[0]); f++)
			if (!strcmp(train_flags[f].name, name))
				break;
		if (f == sizeof(train_flags) / sizeof(train_flags[0])) {
			snprintf(err, errlen, "unknown flag '%s' (see 'layoutbench-train --help')",
				 arg);
			rc = -1;
			goto out_free_rest;
		}
		if (!train_flags[f].has_value) {
			if (eq) {
				snprintf(err, errlen, "%s takes no value", name);
				rc = -1;
				goto out_free_rest;
			}
			if (!strcmp(name, "--quiet"))
				o->quiet = 1;
			continue;
		}
		if (eq) {
			val = eq + 1;
		} else if (i + 1 < nrest) {
			val = rest[++i];
		} else {
			snprintf(err, errlen, "%s needs a value", name);
			rc = -1;
			goto out_free_rest;
		}
		if (set_train_flag(o, name, val, err, errlen)) {
			rc = -1;
			goto out_free_rest;
		}
	}
	/* the ranks this process starts are the node: --nproc-per-node N without
	 * --gpus-per-node or --nodes means N GPUs on one node */
	if (o->nproc_per_node > 1 && !has_flag(argc, argv, "--gpus-per-node") &&
	    !has_flag(argc, argv, "--nodes")) {
		o->layout.gpus_per_node = o->nproc_per_node;
		o->layout.nodes = 1;
	}
out_free_rest:
	free(rest);
	return rc;
}

int lb_train_check(const struct lb_train_opts *o, char *err, size_t errlen)
{
	const struct lb_layout *l = &o->layout;
	char reason[512];
	int world = lb_layout_world(l);

	if (o->device_cuda && !lb_ops_have_cuda()) {
		snprintf(err, errlen,
			 "--device cuda: this layoutbench-train was built without the CUDA backend "
			 "(nvcc was not found at build time); rebuild with 'make CUDA_HOME=DIR' "
			 "where DIR holds bin/nvcc, or run with --device cpu");
		return -1;
	}
	if (lb_attn_gpu_only(l->attention) && !o->device_cuda) {
		snprintf(err, errlen,
			 "--attention cudnn: cuDNN's fused attention runs on the GPU backend only; "
			 "add --device cuda, or use --attention flash (the same math) on the CPU");
		return -1;
	}
	if (lb_layout_check(l, reason, sizeof(reason))) {
		snprintf(err, errlen, "%s", reason);
		return -1;
	}
	if (o->schedule == LB_SCHED_INTERLEAVED && lb_layout_chunks(l) < 2) {
		snprintf(err, errlen,
			 "--pipeline-schedule interleaved needs --virtual-stages N (N >= 2 model "
			 "chunks per pipeline stage)");
		return -1;
	}
	if (o->schedule == LB_SCHED_GPIPE && lb_layout_chunks(l) > 1) {
		snprintf(err, errlen,
			 "--virtual-stages %d runs the interleaved 1F1B schedule; drop "
			 "--pipeline-schedule gpipe (or the virtual stages)",
			 l->virtual_stages);
		return -1;
	}
	if (world > LB_SHM_MAX_RANKS && (!o->device_cuda || !getenv("SLURM_PROCID"))) {
		snprintf(err, errlen,
			 "tp*pp*dp=%d ranks: the shared-memory communicator joins at most %d "
			 "ranks of one node (more run under srun with --device cuda, through NCCL)",
			 world, LB_SHM_MAX_RANKS);
		return -1;
	}
	if (!getenv("SLURM_PROCID") && o->nproc_per_node != world) {
		snprintf(err, errlen,
			 "--nproc-per-node %d: the layout has tp*pp*dp=%d rank(s); start "
			 "that many (--nproc-per-node %d) or run under srun -n %d",
			 o->nproc_per_node, world, world, world);
		return -1;
	}
	return 0;
}
