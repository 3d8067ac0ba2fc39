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

#define LB_NAME_MAX 64
#define LB_ID_LEN 16 /* hex digits of the layout id */

enum lb_ckpt { LB_CKPT_NONE = 0, LB_CKPT_FULL, LB_CKPT_SELECTIVE };
enum lb_attn { LB_ATTN_NAIVE = 0, LB_ATTN_FUSED_SOFTMAX, LB_ATTN_FLASH };
enum lb_norm { LB_NORM_UNFUSED = 0, LB_NORM_FUSED };

/* Model shape: a preset, possibly with fields overridden. */
struct lb_model {
	char name[LB_NAME_MAX]; /* preset name, e.g. "llama-13b" */
	int n_layers;
	int hidden;     /* h */
	int n_heads;
	int n_kv_heads; /* == n_heads without grouped-query attention */
	int ffn;        /* SwiGLU inner size */
	int vocab;
	int tied;       /* 1: LM head shares the embedding matrix */
};

struct lb_layout {
	struct lb_model model;
	int seq_len;      /* tokens per sequence */
	int global_batch; /* sequences per optimizer step */
	int micro_batch;  /* sequences per micro-batch per data-parallel rank */
	int tp, pp, dp;
	int gpus_per_node;
	int nodes;
	int sequence_parallel; /* 0/1 */
	int zero_stage;        /* 0, 1 (optimizer state sharded over dp) or 2 (gradients too) */
	enum lb_ckpt checkpointing;
	enum lb_attn attention;
	enum lb_norm norm;
	/* run settings: not part of the id */
	int steps;
	int warmup; /* steps excluded from steady-state statistics */
	uint64_t seed;
};

/* Fill with defaults: model "tiny" preset, seq 128, batch 8, mb 1, tp=pp=dp=1,
 * 1 GPU per node, 1 node, no SP, zero 0, ckpt none, flash, fused, steps 10, warmup 2,
 * seed 1. */
void lb_layout_init(struct lb_layout *l);

/* Total GPUs (ranks): tp * pp * dp. */
int lb_layout_world(const struct lb_layout *l);

/* Gradient accumulation steps: global_batch / (micro_batch * dp); 0 if not integral. */
int lb_layout_accum_steps(const struct lb_layout *l);

/*
 * Pipeline stages: which layers stage `stage` of l->pp holds, [*lo, *hi). The one split
 * rule, used by the trainer, the memory model and the validity check: with L layers on p
 * stages every stage gets floor(L/p) layers and the remainder r = L mod p goes one each
 * to r consecutive stages in the middle, starting at stage (p - r + 1) / 2, so the first
 * stage (which also holds the embedding and, under 1F1B, the most micro-batches in
 * flight) and the last (the final norm, the head and the loss with its logits) keep the
 * smaller share. When the p - r small stages cannot be shared evenly between the two
 * ends, the front gets the extra one. 60 layers on 8 stages: 7 7 8 8 8 8 7 7; on 16:
 * 3 3 4 (twelve times) 3 3; 6 on 4: 1 2 2 1; 4 on 3: 1 2 1. When p divides L every stage
 * gets L/p, the split Megatron-LM makes. Returns 0, or -1 (lo and hi untouched) when
 * p < 1, p > L or stage is not in [0, p).
 */
int lb_stage_layers(const struct lb_layout *l, int stage, int *lo, int *hi);

/* Canonical text: "key=value" pairs, space separated, fixed order, every id-bearing field.
 * Returns the length written (snprintf semantics). */
int lb_layout_canonical(const struct lb_layout *l, char *buf, size_t len);

/* Layout id: 16 lower-case hex digits of a 64-bit FNV-1a hash of the canonical text.
 * out must hold LB_ID_LEN + 1 bytes. */
void lb_layout_id(const struct lb_layout *l, char out[LB_ID_LEN + 1]);

/* Enum names ("none|full|selective", "naive|fused_softmax|flash", "unfused|fused").
 * _parse returns 0 on success, -1 on an unknown name. */
const char *lb_ckpt_name(enum lb_ckpt c);
const char *lb_attn_name(enum lb_attn a);
const char *lb_norm_name(enum lb_norm n);
int lb_ckpt_parse(const char *s, enum lb_ckpt *out);
int lb_attn_parse(const char *s, enum lb_attn *out);
int lb_norm_parse(const char *s, enum lb_norm *out);

/*
 * Flags. One parser and one printer, used by the CLI, the job scripts and the trainer.
 * Layout flags: --model NAME (loads the preset, resetting model fields), --layers,
 * --hidden, --heads, --kv-heads, --ffn, --vocab, --tied 0|1, --seq-len, --global-batch,
 * --micro-batch, --tp, --pp, --dp, --gpus-per-node, --nodes, --sequence-parallel 0|1,
 * --zero-stage 0|1|2, --checkpointing, --attention, --norm, --steps, --warmup, --seed.
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
 * record ("--model llama-13b --layers 40 ... --seed 1"). Returns the length
 * (snprintf semantics). */
int lb_layout_to_flags(const struct lb_layout *l, char *buf, size_t len);

/* Usage lines for the layout flags (for --help). */
const char *lb_layout_flags_usage(void);

/* 1 if every field (run settings included) is equal. */
int lb_layout_equal(const struct lb_layout *a, const struct lb_layout *b);

/*
 * Validity rules, each with its reason. Checks the record's internal consistency:
 * positive sizes; heads and KV heads divisible by tp; KV heads divide heads; at least
 * one layer per pipeline stage (pp <= layers; lb_stage_layers splits them);
 * gpus_per_node*nodes == tp*pp*dp; global batch divisible by micro_batch*dp; sequence
 * parallelism needs tp > 1 (and seq_len divisible by tp); vocab divisible by tp; ffn
 * divisible by tp; hidden divisible by heads; head dim even (RoPE); zero_stage in {0,1,2};
 * tp within one node (tp <= gpus_per_node); warmup < steps. Returns 0 if valid, else -1
 * with a reason such as "tp=3 does not divide 40 heads".
 */
int lb_layout_check(const struct lb_layout *l, char *reason, size_t len);

#endif
