/*
 * The arithmetic on models (presets: common/preset.h) and layouts: parameter count, FLOPs per token (the
 * paper's PaLM count and the hardware count with recomputation), the GPU peak table,
 * and the memory-per-GPU estimate used to prune layouts. Pure functions, libc only:
 * the CLI, the SQL views' inputs (the trainer's run-log header) and the planner all
 * take their numbers from here. Formulas and sources: docs/memory-model.md and
 * docs/flops.md.
 */
#ifndef LB_MODEL_H
#define LB_MODEL_H

#include <stdint.h>

#include "common/layout.h"

/* Every parameter: embedding, per-layer (QKV with GQA, output, gate/up/down, two norms),
 * final norm, and the LM head unless tied. */
int64_t lb_param_count(const struct lb_model *m);

/* The two conventions of a model FLOP count (docs/flops.md): which parameters N holds. */
enum lb_flops_count {
	LB_FLOPS_PALM = 0, /* every parameter, the input embedding lookup's included: PaLM's
			      count, the paper's MFU (the default everywhere) */
	LB_FLOPS_NO_EMBED, /* without the input embedding lookup, which is a gather and no
			      matmul (Megatron-LM's and torchtitan's count): N less the
			      embedding table, V*h, unless it is tied to the head (whose
			      matmul is real and stays counted) */
};

/* Model FLOPs per token in convention c: 6*N + 12*L*h*s (Chowdhery et al. 2022, appendix
 * B), attention not halved for causality, recomputation not counted; N as c says. The
 * one home of both counts. */
double lb_flops_per_token_as(const struct lb_model *m, int seq_len, enum lb_flops_count c);

/* Model FLOPs per token, PaLM as the paper uses it (LB_FLOPS_PALM): N = lb_param_count,
 * embedding and untied head included. */
double lb_flops_per_token(const struct lb_model *m, int seq_len);

/* Hardware FLOPs per token: the model count plus recomputed forward passes
 * (full checkpointing: one more forward of every layer, 2*N_layers_params + 4*L*h*s
 * per token; selective: the attention core's forward, 4*L*h*s). */
double lb_hw_flops_per_token(const struct lb_layout *l);

/* Per optimizer step: per-token count * global_batch * seq_len (lb_flops_per_step: PaLM's,
 * the paper's; _as: in convention c). */
double lb_flops_per_step(const struct lb_layout *l);
double lb_flops_per_step_as(const struct lb_layout *l, enum lb_flops_count c);
double lb_hw_flops_per_step(const struct lb_layout *l);

/* Dense bf16 peak, TFLOP/s, by GPU product name as reported by the driver or written in
 * a spec ("A100", "NVIDIA A100-SXM4-80GB", "H100", "NVIDIA H200", ...). Returns 0 and
 * sets *tflops, or -1 when unknown (never a guess). */
int lb_gpu_peak_tflops(const char *product, double *tflops);
/* 1 if the table knows product (with a peak, or known to have none: V100), else 0: an
 * unknown name may be a misspelling ("A1OO"). */
int lb_gpu_known(const char *product);
/* The products the table knows, "GH200, H200 NVL, H200, ..." (snprintf's contract). */
int lb_gpu_names(char *buf, size_t len);
/* A product name as the GPU tables match it: lower case, '-' and '_' as ' ', cut to
 * len - 1 bytes, into buf (returned). */
char *lb_gpu_name_norm(const char *product, char *buf, size_t len);

/* Memory per GPU, bytes, of the most loaded rank: the largest of the first pipeline
 * stage (embedding, the most micro-batches in flight), the first stage with the larger
 * share of an uneven split (lb_stage_layers) and the last stage (head, loss); with an
 * explicit split or virtual stages (the interleaved schedule's in-flight chunk passes),
 * the largest of every stage. */
struct lb_mem_estimate {
	double weights;	    /* bf16 parameters of this rank's shard */
	double grads;	    /* bf16/fp32 gradient buffers */
	double optimizer;   /* fp32 master + two Adam moments, / dp under ZeRO-1 */
	double activations; /* by checkpointing mode and attention kernel, TP/SP sharded,
			       times the micro-batches in flight (1F1B: pp - i on stage i;
			       interleaved: 2(pp-i-1) + (v-1)pp + 1 chunk passes of 1/v of
			       the stage) */
	double logits;	    /* LM-head logits and loss buffers (last stage) */
	double workspace;   /* allocator fragmentation, NCCL buffers, cuBLAS workspace */
	double total;
};
void lb_memory_estimate(const struct lb_layout *l, struct lb_mem_estimate *out);

/*
 * The memory layoutbench-train itself allocates on its most loaded rank, buffer for
 * buffer (common/memory_trainer.c mirrors harness/model.c, train_step.c and optim.c):
 * gpu 1 for the CUDA backend (bf16 act buffers, its cuBLASLt workspace), 0 for the CPU
 * backend (fp32); gpipe 1 for --pipeline-schedule gpipe. The fields split it as the
 * paper model does (weights: the act-typed parameters; grads: fp32 main gradients;
 * optimizer: fp32 master weights, moments, ZeRO's gradient shard; activations: the
 * micro-batches in flight; logits: the last stage's head and loss buffers; workspace:
 * the backward's and the kernels' scratch; ZeRO-2's gradient slots sized for the default
 * bucket, LB_GRAD_BUCKET_DEFAULT). It does not count what the CUDA runtime,
 * cuBLASLt and NCCL hold outside the trainer's allocator (LB_TRAINER_GPU_RESERVE_GIB).
 * 0, or -1 for a layout the trainer cannot build.
 */
int lb_memory_trainer(const struct lb_layout *l, int gpu, int gpipe, struct lb_mem_estimate *out);
/* Elements per data-parallel gradient bucket, unless the trainer is told otherwise
 * (--grad-bucket; harness/gradsync.h): Megatron-LM's default. */
#define LB_GRAD_BUCKET_DEFAULT 40000000u
/* GiB a GPU loses outside the trainer's allocator: the CUDA context, cuBLASLt's and NCCL's
 * own buffers: a margin the planner adds to lb_memory_trainer on a GPU. */
#define LB_TRAINER_GPU_RESERVE_GIB 1.0

/* The margin used when pruning: a layout is predicted to fit when
 * total <= gpu_mem_bytes * LB_MEM_USABLE_FRACTION. 1.0: the estimate carries its own
 * margin (a 1 GiB workspace term) and was calibrated with this predicate against the
 * paper's runs on 80 GiB A100s (docs/memory-model.md). */
#define LB_MEM_USABLE_FRACTION 1.0

#endif
