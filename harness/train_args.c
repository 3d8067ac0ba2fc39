/*
 * layoutbench-train's command line: the table of the trainer's own flags, read with the
 * layout's by the one command-line parser (common/cmdline.h), the usage made from both,
 * and the checks that refuse what this build cannot run, each with the fix. See train.h,
 * docs/trainer.md.
 */
#include "harness/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cmdline.h"
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

#define STR_(x) #x
#define STR(x)	STR_(x)

/* The trainer's own flags (the layout's are common/layout_fields.def's). */
enum {
	T_DEVICE,
	T_RUN_DIR,
	T_DATA,
	T_DATA_DTYPE,
	T_LR,
	T_WEIGHT_DECAY,
	T_CLIP,
	T_MEM_LIMIT,
	T_NPROC_PER_NODE,
	T_COMM_TIMEOUT,
	T_PEAK_TFLOPS,
	T_GPU_COMM,
	T_BOOTSTRAP,
	T_PIPELINE_SCHEDULE,
	T_GRAD_BUCKET,
	T_GRAD_OVERLAP,
	T_PIPE_OVERLAP,
	T_CUDA_GRAPHS,
	T_DUMP_PARAMS,
	T_QUIET,
	T_HELP,
};

static const struct lb_option train_opts[] = {
    LB_CHOICE(T_DEVICE, "device", NULL, "cpu|cuda", "cpu", 0,
	      "backend (default cpu; cuda: a build where nvcc was found)"),
    LB_TEXT(T_RUN_DIR, "run-dir", "DIR", NULL,
	    "where run-<run_uid>.jsonl goes (default .; created)"),
    LB_TEXT(T_DATA, "data", "FILE", NULL,
	    "flat binary token ids, sequences packed back to back (default: a synthetic stream "
	    "from the seed)"),
    LB_CHOICE(T_DATA_DTYPE, "data-dtype", NULL, "u16|u32", "u16", 0, "width of the ids in --data"),
    LB_NUMBER(T_LR, "lr", "X", STR(LB_TRAIN_DEFAULT_LR), 0, 1e300, "constant AdamW learning rate"),
    LB_NUMBER(T_WEIGHT_DECAY, "weight-decay", "X", STR(LB_TRAIN_DEFAULT_WD), 0, 1e6,
	      "AdamW decoupled weight decay on matrices"),
    LB_NUMBER(T_CLIP, "clip", "X", STR(LB_TRAIN_DEFAULT_CLIP), 0, 1e300,
	      "global gradient-norm clip, 0 off"),
    LB_BYTES(T_MEM_LIMIT, "mem-limit", "BYTES", NULL, 0, 9.2e18,
	     "cap on the CPU allocator (K, M, G, T suffixes); an allocation above it fails the "
	     "run as oom (exit 3); default $LAYOUTBENCH_MEM_LIMIT, else none"),
    LB_WHOLE(T_NPROC_PER_NODE, "nproc-per-node", "N", "1", 1, 1024,
	     "ranks this process starts without srun"),
    LB_NUMBER(T_COMM_TIMEOUT, "comm-timeout", "S", STR(LB_TRAIN_DEFAULT_COMM_TIMEOUT), 0.001, 1e7,
	      "seconds before a silent peer is a timeout"),
    LB_NUMBER(T_PEAK_TFLOPS, "peak-tflops", "X", NULL, 1e-6, 1e6,
	      "dense bf16 peak per GPU (TFLOP/s) to record for MFU, for a GPU the peak table "
	      "lacks (default: the table's; none on a CPU)"),
    LB_CHOICE(T_GPU_COMM, "gpu-comm", NULL, "auto|nccl|staged", "auto", 0,
	      "with --device cuda and several ranks: NCCL, or staged through host memory (ranks "
	      "that share a GPU); auto (default): staged when a node has more ranks than visible "
	      "GPUs, else nccl"),
    LB_CHOICE(T_BOOTSTRAP, "bootstrap", NULL, "auto|file|pmi2", "auto", 0,
	      "across nodes, how the ranks get rank 0's NCCL id: a file in the run directory, "
	      "or Slurm's PMI2 (srun --mpi=pmi2); auto (default): pmi2 when srun started the "
	      "rank with it, else file"),
    LB_CHOICE(T_PIPELINE_SCHEDULE, "pipeline-schedule", NULL, LB_SCHED_CHOICES, "1f1b", 0,
	      "pipeline schedule with --pp > 1 (default 1f1b; --virtual-stages N > 1 runs "
	      "interleaved, which needs it)"),
    LB_BYTES(T_GRAD_BUCKET, "grad-bucket", "N", NULL, 1, 1099511627776.0,
	     "elements per data-parallel gradient bucket (K, M, G suffixes; default 40000000, "
	     "common/model.h)"),
    LB_CHOICE(T_GRAD_OVERLAP, "grad-overlap", NULL, "0|1", "1", 0,
	      "reduce each bucket during the backward, on a second stream (1, default), or on "
	      "the compute stream (0)"),
    LB_CHOICE(T_PIPE_OVERLAP, "pipe-overlap", NULL, "0|1", "1", 0,
	      "pipeline sends and receives on a stream of their own (1, default), or on the "
	      "compute stream (0)"),
    LB_CHOICE(T_CUDA_GRAPHS, "cuda-graphs", NULL, "0|1", "0", 0,
	      "1: capture each micro-batch's forward and backward and the optimizer as CUDA "
	      "graphs and replay them; 0 (default, or $LAYOUTBENCH_CUDA_GRAPHS): launch every "
	      "kernel"),
    LB_TEXT(T_DUMP_PARAMS, "dump-params", "FILE", NULL,
	    "testing aid: write the whole model's fp32 parameters after the last step (rank 0)"),
    LB_SWITCH(T_QUIET, "quiet", 0, "no progress line per step on stderr"),
    LB_SWITCH(T_HELP, "help", 0, "this text"),
    LB_OPT_END,
};

static const struct lb_command train_command = {
    .name = "layoutbench-train",
    .max_operands = -1, /* a stray word is an unknown flag (below) */
    .summary = "train a Llama under one layout and write its run log",
    .options = train_opts,
    .word = "flag",
};

const char *lb_train_usage(void)
{
	static char buf[16384];
	struct lb_strbuf sb = LB_STRBUF_INIT;

	lb_strbuf_addf(&sb, "usage: layoutbench-train [layout flags] [trainer flags]\n\n%s\n",
		       lb_layout_flags_usage());
	lb_strbuf_adds(&sb, "trainer flags:\n");
	lb_options_help(&sb, train_opts);
	lb_strbuf_adds(&sb,
		       "\nexit status: 0 ok, 1 error, 2 usage, 3 oom, 4 nccl_error, 5 diverged, "
		       "6 timeout,\n128+N killed by signal N\n");
	snprintf(buf, sizeof(buf), "%s", sb.failed ? "" : lb_strbuf_str(&sb));
	lb_strbuf_release(&sb);
	return buf;
}

/* Copy a path flag's value into its buffer: 0, or -1 (err) when it does not fit. */
static int take_path(char *dst, size_t len, const char *flag, const char *v, char *err,
		     size_t errlen)
{
	if (strlen(v) >= len) {
		snprintf(err, errlen, "%s: the path is %zu bytes; at most %zu", flag, strlen(v),
			 len - 1);
		return -1;
	}
	snprintf(dst, len, "%s", v);
	return 0;
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
	const char *env = getenv("LAYOUTBENCH_MEM_LIMIT");
	const char *graphs = getenv("LAYOUTBENCH_CUDA_GRAPHS");
	struct lb_flag_group layout;
	struct lb_args a;
	int rc = 0;

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
	lb_layout_flag_group(&o->layout, &layout);
	switch (lb_args_scan(&train_command, &layout, argc, argv, &a, err, errlen)) {
	case LB_ARGS_OK:
		break;
	case LB_ARGS_UNKNOWN:
		snprintf(err + strlen(err), errlen - strlen(err),
			 " (see 'layoutbench-train --help')");
		/* fall through */
	default:
		rc = -1;
		goto out_release_args;
	}
	if (a.n_operands) {
		snprintf(err, errlen, "unknown flag '%s' (see 'layoutbench-train --help')",
			 a.operands[0]);
		rc = -1;
		goto out_release_args;
	}
	/* what was given; the rest keeps lb_train_opts_init's (and the environment's) */
	if (a.given[T_DEVICE])
		o->device_cuda = a.num[T_DEVICE] == 1;
	if (a.given[T_RUN_DIR] &&
	    take_path(o->run_dir, sizeof(o->run_dir), "--run-dir", a.str[T_RUN_DIR], err, errlen))
		rc = -1;
	if (a.given[T_DATA] &&
	    take_path(o->data_path, sizeof(o->data_path), "--data", a.str[T_DATA], err, errlen))
		rc = -1;
	if (a.given[T_DUMP_PARAMS] && take_path(o->dump_params, sizeof(o->dump_params),
						"--dump-params", a.str[T_DUMP_PARAMS], err, errlen))
		rc = -1;
	if (a.given[T_DATA_DTYPE])
		o->data_elem = a.num[T_DATA_DTYPE] ? 4 : 2;
	if (a.given[T_LR])
		o->lr = a.dbl[T_LR];
	if (a.given[T_WEIGHT_DECAY])
		o->weight_decay = a.dbl[T_WEIGHT_DECAY];
	if (a.given[T_CLIP])
		o->clip = a.dbl[T_CLIP];
	if (a.given[T_MEM_LIMIT])
		o->mem_limit = (uint64_t)a.num[T_MEM_LIMIT];
	if (a.given[T_NPROC_PER_NODE])
		o->nproc_per_node = (int)a.num[T_NPROC_PER_NODE];
	if (a.given[T_COMM_TIMEOUT])
		o->comm_timeout = a.dbl[T_COMM_TIMEOUT];
	if (a.given[T_PEAK_TFLOPS])
		o->peak_tflops = a.dbl[T_PEAK_TFLOPS];
	if (a.given[T_GPU_COMM]) /* the choices in enum lb_gpu_comm's order */
		o->gpu_comm = (int)a.num[T_GPU_COMM];
	if (a.given[T_BOOTSTRAP]) /* likewise enum lb_bootstrap's */
		o->bootstrap = (int)a.num[T_BOOTSTRAP];
	if (a.given[T_PIPELINE_SCHEDULE]) /* and enum lb_sched_kind's */
		o->schedule = (enum lb_sched_kind)a.num[T_PIPELINE_SCHEDULE];
	if (a.given[T_GRAD_BUCKET])
		o->grad_bucket = (uint64_t)a.num[T_GRAD_BUCKET];
	if (a.given[T_GRAD_OVERLAP])
		o->grad_overlap = (int)a.num[T_GRAD_OVERLAP];
	if (a.given[T_PIPE_OVERLAP])
		o->pipe_overlap = (int)a.num[T_PIPE_OVERLAP];
	if (a.given[T_CUDA_GRAPHS])
		o->cuda_graphs = (int)a.num[T_CUDA_GRAPHS];
	if (a.given[T_QUIET])
		o->quiet = 1;
	/* the ranks this process starts are the node: --nproc-per-node N without
	 * --gpus-per-node or --nodes means N GPUs on one node */
	if (!rc && o->nproc_per_node > 1 && !has_flag(argc, argv, "--gpus-per-node") &&
	    !has_flag(argc, argv, "--nodes")) {
		o->layout.gpus_per_node = o->nproc_per_node;
		o->layout.nodes = 1;
	}
out_release_args:
	lb_args_release(&a);
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
