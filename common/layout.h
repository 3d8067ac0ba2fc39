/*
 * The layout record: one parallelization layout of one model, shared by every stage
 * (planner, job scripts, trainer, database). Its canonical text form names every field
 * that changes what is measured; the layout id is a hash of that text, so the same
 * layout is the same row in the spec, the job, the run directory and the database.
 * Run settings (steps, warmup, seed) are carried but are not part of the id.
 * libc only: the trainer links this on compute nodes.
 */
#ifndef LB_LAYOUT_H
#define LB_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "common/preset.h"

#define LB_ID_LEN	      16 /* hex digits of the layout id */
#define LB_MAX_STAGES	      64 /* entries of an explicit layer split (pp * virtual_stages) */
#define LB_MAX_VIRTUAL_STAGES 16 /* model chunks per pipeline stage */

enum lb_ckpt { LB_CKPT_NONE = 0, LB_CKPT_FULL, LB_CKPT_SELECTIVE };
/* cudnn: cuDNN's fused flash attention (the GPU backend only); the same math as flash */
enum lb_attn { LB_ATTN_NAIVE = 0, LB_ATTN_FUSED_SOFTMAX, LB_ATTN_FLASH, LB_ATTN_CUDNN };
enum lb_norm { LB_NORM_UNFUSED = 0, LB_NORM_FUSED };

struct lb_layout {
	struct lb_model model;
	int seq_len;	  /* tokens per sequence */
	int global_batch; /* sequences per optimizer step */
	int micro_batch;  /* sequences per micro-batch per data-parallel rank */
	int tp, pp, dp;
	int gpus_per_node;
	int nodes;
	int sequence_parallel; /* 0/1 */
	int zero_stage;	       /* 0, 1 (optimizer state sharded over dp) or 2 (gradients too) */
	enum lb_ckpt checkpointing;
	enum lb_attn attention;
	enum lb_norm norm;
	int virtual_stages; /* model chunks per pipeline stage: > 1 runs the interleaved
			       1F1B schedule (Megatron's virtual pipeline), stage s holding
			       chunks s, s + pp, s + 2*pp, ... of the pp*virtual_stages
			       chunks in pipeline order; 1: one contiguous block per stage */
	int n_stage_layers; /* 0: the split rule (lb_chunk_layers); else the entries of
			       stage_layers, which must be pp * virtual_stages */
	int stage_layers[LB_MAX_STAGES]; /* explicit layers per model chunk, in pipeline
					    order (chunk 0 of stage 0, ..., of stage pp-1,
					    chunk 1 of stage 0, ...): "7,8,8,7" */
	/* run settings: not part of the id */
	int steps;
	int warmup; /* steps excluded from steady-state statistics */
	uint64_t seed;
};

/* Fill with defaults: model "tiny" preset, seq 128, batch 8, mb 1, tp=pp=dp=1,
 * 1 GPU per node, 1 node, no SP, zero 0, ckpt none, flash, fused, one virtual stage,
 * the split rule, steps 10, warmup 2, seed 1. */
void lb_layout_init(struct lb_layout *l);

/* Total GPUs (ranks): tp * pp * dp. */
int lb_layout_world(const struct lb_layout *l);

/* Gradient accumulation steps: global_batch / (micro_batch * dp); 0 if not integral. */
int lb_layout_accum_steps(const struct lb_layout *l);

/* Model chunks per pipeline stage: virtual_stages, at least 1. */
int lb_layout_chunks(const struct lb_layout *l);

/*
 * Pipeline stages: which layers model chunk `chunk` of stage `stage` holds, [*lo, *hi).
 * The model's L layers are cut into n = pp * virtual_stages chunks in pipeline order;
 * chunk c of stage s is number c*pp + s (with one virtual stage, chunk 0 is the whole
 * stage). The one split rule, used by the trainer, the memory models and the validity
 * check: an explicit split (stage_layers) gives each chunk its entry; otherwise every
 * chunk gets floor(L/n) layers and the remainder r = L mod n goes one each to r
 * consecutive chunks in the middle, starting at chunk (n - r + 1) / 2, so the first
 * (which also holds the embedding and, under 1F1B, the most micro-batches in flight)
 * and the last (the final norm, the head and the loss with its logits) keep the smaller
 * share. When the n - r small chunks cannot be shared evenly between the two ends, the
 * front gets the extra one. 60 layers on 8 stages: 7 7 8 8 8 8 7 7; on 16: 3 3 4 (twelve
 * times) 3 3; 6 on 4: 1 2 2 1; 4 on 3: 1 2 1. When n divides L every chunk gets L/n, the
 * split Megatron-LM makes (it requires the division). Returns 0, or -1 (lo and hi
 * untouched) when pp < 1, n > L, stage is not in [0, pp), chunk not in
 * [0, virtual_stages), or an explicit split does not have n positive entries summing to
 * L.
 */
int lb_chunk_layers(const struct lb_layout *l, int stage, int chunk, int *lo, int *hi);
/* Chunk 0 of stage: the stage's whole block with one virtual stage. Same contract. */
int lb_stage_layers(const struct lb_layout *l, int stage, int *lo, int *hi);
/* Layers stage holds over all its chunks; -1 as lb_chunk_layers fails. */
int lb_stage_layer_count(const struct lb_layout *l, int stage);
/* 1 when the layout carries an explicit split that differs from the rule's (an explicit
 * split equal to the rule's is the same layout: same text, same id). */
int lb_layout_split_explicit(const struct lb_layout *l);

/* Canonical text: "key=value" pairs, space separated, fixed order, every id-bearing field.
 * virtual_stages and stage_layers follow the others and only when they change the
 * layout (virtual_stages > 1; a split other than the rule's), so every layout without
 * them keeps the id it had before they existed. Returns the length written (snprintf
 * semantics). */
int lb_layout_canonical(const struct lb_layout *l, char *buf, size_t len);

/* Layout id: 16 lower-case hex digits of a 64-bit FNV-1a hash of the canonical text.
 * out must hold LB_ID_LEN + 1 bytes. */
void lb_layout_id(const struct lb_layout *l, char out[LB_ID_LEN + 1]);

/* Enum names ("none|full|selective", "naive|fused_softmax|flash|cudnn", "unfused|fused").
 * _parse returns 0 on success, -1 on an unknown name. */
const char *lb_ckpt_name(enum lb_ckpt c);
const char *lb_attn_name(enum lb_attn a);
const char *lb_norm_name(enum lb_norm n);
int lb_ckpt_parse(const char *s, enum lb_ckpt *out);
int lb_attn_parse(const char *s, enum lb_attn *out);
/* The attention kernel's nature, one home for both: tiled with an online softmax, saving only
 * the log-sum-exp and recomputing the probabilities in the backward (flash, cudnn); and
 * existing on the GPU backend only (cudnn). */
int lb_attn_saves_lse(enum lb_attn a);
int lb_attn_gpu_only(enum lb_attn a);
int lb_norm_parse(const char *s, enum lb_norm *out);

/*
 * Flags. One parser and one printer, used by the CLI, the job scripts and the trainer.
 * Layout flags: --model NAME (loads the preset, resetting model fields), --layers,
 * --hidden, --heads, --kv-heads, --ffn, --vocab, --tied 0|1, --seq-len, --global-batch,
 * --micro-batch, --tp, --pp, --dp, --gpus-per-node, --nodes, --sequence-parallel 0|1,
 * --zero-stage 0|1|2, --checkpointing, --attention, --norm, --virtual-stages N,
 * --stage-layers A,B,... (positive integers, comma separated), --steps, --warmup, --seed.
 * Both "--flag VALUE" and "--flag=VALUE" are accepted. Numbers use strtol with range
 * checks. --model must come before model-field overrides (the printer emits it first).
 */

/* Try one flag. name is the flag without its value ("--tp"); value its argument.
 * Returns 1 if consumed, 0 if name is not a layout flag, -1 on a bad value (err says why,
 * e.g. "--tp: expected a positive integer, got 'two'"). */
int lb_layout_set_flag(struct lb_layout *l, const char *name, const char *value, char *err,
		       size_t errlen);

/* Parse argv[0..argc): layout flags are consumed; any other argument is copied, in order,
 * into rest (caller provides room for argc pointers) and counted in *nrest.
 * Returns 0, or -1 with err set. */
int lb_layout_parse_args(struct lb_layout *l, int argc, char **argv, char **rest, int *nrest,
			 char *err, size_t errlen);

/* Print every layout flag, model first, so that parsing the text back gives an equal
 * record ("--model llama-13b --layers 40 ... --seed 1"); --virtual-stages and
 * --stage-layers only when they change the layout (as in the canonical text). Returns
 * the length (snprintf semantics). */
int lb_layout_to_flags(const struct lb_layout *l, char *buf, size_t len);

/* Usage lines for the layout flags (for --help). */
const char *lb_layout_flags_usage(void);

/* 1 if every field (run settings included) is equal; splits compare by the layers each
 * chunk gets (an explicit split equal to the rule's equals none). */
int lb_layout_equal(const struct lb_layout *a, const struct lb_layout *b);

/*
 * Validity rules, each with its reason. Checks the record's internal consistency:
 * positive sizes; heads and KV heads divisible by tp; KV heads divide heads; at least
 * one layer per pipeline stage (pp <= layers; lb_chunk_layers splits them);
 * virtual_stages in [1, LB_MAX_VIRTUAL_STAGES], > 1 only with pp > 1, with
 * pp*virtual_stages <= layers and the micro-batches per step a multiple of pp (the
 * interleaved schedule's rule, as in Megatron-LM); an explicit split with
 * pp*virtual_stages entries, each at least 1, summing to the layers;
 * gpus_per_node*nodes == tp*pp*dp; global batch divisible by micro_batch*dp; sequence
 * parallelism needs tp > 1 (and seq_len divisible by tp); vocab divisible by tp; ffn
 * divisible by tp; hidden divisible by heads; head dim even (RoPE); zero_stage in {0,1,2};
 * tp within one node (tp <= gpus_per_node); warmup < steps. Returns 0 if valid, else -1
 * with a reason such as "tp=3 does not divide 40 heads".
 */
int lb_layout_check(const struct lb_layout *l, char *reason, size_t len);

#endif
