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
#define LB_MAX_VIRTUAL_STAGES 16 /* model chunks per pipeline stage */

enum lb_ckpt { LB_CKPT_NONE = 0, LB_CKPT_FULL, LB_CKPT_SELECTIVE };
/* cudnn: cuDNN's fused flash attention (the GPU backend only); the same math as flash */
enum lb_attn { LB_ATTN_NAIVE = 0, LB_ATTN_FUSED_SOFTMAX, LB_ATTN_FLASH, LB_ATTN_CUDNN };
enum lb_norm { LB_NORM_UNFUSED = 0, LB_NORM_FUSED };

/* The layout's fields by number, in the canonical order (common/layout_fields.def). */
enum lb_field {
#define LB_MODEL_FIELD(ID, ...)	 LB_FLD_##ID,
#define LB_LAYOUT_FIELD(ID, ...) LB_FLD_##ID,
#include "common/layout_fields.def"
	LB_NFIELDS
};

/* The layout record: the model, then the layout fields of common/layout_fields.def (the
 * line of each says what it is). n_stage_layers counts the entries of stage_layers, the
 * explicit layers per model chunk in pipeline order (chunk 0 of stage 0, ..., of stage
 * pp-1, chunk 1 of stage 0, ...), pp * virtual_stages of them; 0: the split rule
 * (lb_chunk_layers). The run settings (steps, warmup, seed) are not part of the id. */
struct lb_layout {
	struct lb_model model;
#define LB_LAYOUT_FIELD(ID, key, member, column, kind, ctype, dflt, attrs, head, names, help)      \
	LB_FIELD_DECL_##kind(ctype, member)
#include "common/layout_fields.def"
};

/* How a field's values read, print and check (common/layout_fields.def says what each
 * holds), the one list: X(ID, words, arg) makes LB_FK_<ID>, what a value is in words for
 * messages ("expected a positive integer") and the value its flag takes in usage ("--tp
 * N"); NULL: the field's own (an ENUM's names, CHUNKS' range). */
#define LB_FIELD_KINDS(X)                                                                          \
	X(NAME, "a model preset", "NAME")                                                          \
	X(POS, "a positive integer", "N")                                                          \
	X(COUNT, "a non-negative integer", "N")                                                    \
	X(BOOL, "0 or 1", "0|1")                                                                   \
	X(ZERO, "0, 1 or 2", "0|1|2") /* 3 reads, and is refused by the check */                   \
	X(CHUNKS, NULL, "N")	      /* a stage's model chunks: 1 to LB_MAX_VIRTUAL_STAGES */     \
	X(ENUM, NULL, NULL)	      /* one of the field's names, stored as its index */          \
	X(SPLIT, "positive integers separated by commas", "A,B,...") /* up to LB_MAX_STAGES */     \
	X(SEED, "an unsigned integer", "N")			     /* 64-bit */
enum lb_field_kind {
#define LB_FK_ID(id, words, arg) LB_FK_##id,
	LB_FIELD_KINDS(LB_FK_ID)
#undef LB_FK_ID
};

#define LB_FA_RUN     1u /* a run setting: not part of the id */
#define LB_FA_DERIVED 2u /* made by the planner from gpus and the cluster */
#define LB_FA_SPARSE  4u /* written only when it differs from its default */

/* One field: the row of common/layout_fields.def. */
struct lb_field_info {
	const char *key;    /* "kv_heads": canonical text, logs, JSON, specs, `where` */
	const char *column; /* "n_kv_heads": the layouts table's column */
	enum lb_field_kind kind;
	unsigned attrs;		  /* LB_FA_* */
	int in_model;		  /* 1: a member of struct lb_model */
	size_t off;		  /* offset of the member in struct lb_layout */
	long long lo, hi;	  /* the range a value reads in (integer kinds) */
	long long dflt;		  /* lb_layout_init's value (not NAME) */
	const char *head;	  /* the plan table's heading; NULL: not in the plan */
	const char *const *names; /* ENUM: its names, n_names of them */
	int n_names;
	const char *help; /* one line of usage */
};
extern const struct lb_field_info lb_fields[LB_NFIELDS];

/* The field whose flag is flag ("--kv-heads", the key with '-' for '_'), or -1. */
int lb_field_find_flag(const char *flag);
/* The flag of field f into buf ("--kv-heads"). Returns buf. */
char *lb_field_flag(int f, char *buf, size_t len);
/* The value of an integer, BOOL, ENUM (its index) or SEED field (as its bits); 0 for
 * NAME and SPLIT. */
long long lb_field_get(const struct lb_layout *l, int f);
/* Set such a field. */
void lb_field_set(struct lb_layout *l, int f, long long v);
/* 1 when field f is written for l: always, but for a sparse field only when it differs
 * from its default (a split: when it is not the rule's). */
int lb_field_shown(const struct lb_layout *l, int f);
/* The value of field f as text ("llama-13b", "4", "flash", "7,8,8,7"): snprintf's
 * contract. */
int lb_field_text(const struct lb_layout *l, int f, char *buf, size_t len);
/* ENUM: the index of name s among field f's names, or -1. */
int lb_field_enum_index(int f, const char *s);
/* What a value of field f must be, for messages: "a positive integer", "0 or 1", "none,
 * full or selective" (quote: each name in double quotes, as JSON writes them). Returns
 * buf. */
char *lb_field_expect(int f, int quote, char *buf, size_t len);
/* Parse text as field f's value into l, as the flags do (f's key in messages is flag,
 * e.g. "--tp"). Returns 0, or -1 with err set ("--tp: expected a positive integer, got
 * 'two'"); l changes only on success. */
int lb_field_parse(struct lb_layout *l, int f, const char *flag, const char *text, char *err,
		   size_t errlen);

/* Fill with every field's default (common/layout_fields.def): the "tiny" preset, one
 * rank, the split rule, ... */
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

/* Canonical text: "key=value" pairs, space separated, in the fields' order, every field
 * but the run settings; a sparse field (virtual_stages, stage_layers) only when it
 * differs from its default, so every layout without it keeps the id it had before the
 * field existed. Returns the length written (snprintf semantics). */
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
 * Flags. One parser and one printer, used by the CLI, the job scripts and the trainer:
 * a flag per field, --key with '-' for '_' (--kv-heads, --stage-layers A,B,...). --model
 * NAME loads the preset, resetting the model's fields, so it must come before their
 * flags (the printer writes it first). Both "--flag VALUE" and "--flag=VALUE" are
 * accepted. Numbers use strtol with range checks.
 */

/* Try one flag. name is the flag without its value ("--tp"); value its argument.
 * Returns 1 if consumed, 0 if name is not a layout flag, -1 on a bad value (err says why,
 * e.g. "--tp: expected a positive integer, got 'two'"). */
int lb_layout_set_flag(struct lb_layout *l, const char *name, const char *value, char *err,
		       size_t errlen);

/* Parse argv[0..argc) with the command-line parser (common/cmdline.h): layout flags are
 * consumed; any other argument is copied, in order, into rest (caller provides room for
 * argc pointers) and counted in *nrest. Returns 0, or -1 with err set. */
int lb_layout_parse_args(struct lb_layout *l, int argc, char **argv, char **rest, int *nrest,
			 char *err, size_t errlen);

/* Print every layout flag, model first, so that parsing the text back gives an equal
 * record ("--model llama-13b --layers 40 ... --seed 1"); a sparse field's only when it
 * differs from its default (as in the canonical text). Returns the length (snprintf
 * semantics). */
int lb_layout_to_flags(const struct lb_layout *l, char *buf, size_t len);

/* The layout flags as a group of flags a command takes beside its table
 * (common/cmdline.h's struct lb_flag_group), setting l. */
struct lb_flag_group;
void lb_layout_flag_group(struct lb_layout *l, struct lb_flag_group *g);

/* Usage lines for the layout flags (for --help), one a flag, made from the fields. */
const char *lb_layout_flags_usage(void);

/* 1 if every field (run settings included) is equal; splits compare by the layers each
 * chunk gets (an explicit split equal to the rule's equals none). */
int lb_layout_equal(const struct lb_layout *a, const struct lb_layout *b);

/*
 * Validity rules, each with its reason. Checks every field's range (its kind's: positive
 * sizes, 0 or 1, a known name, ...), then the record's internal consistency: heads and KV heads
 * divisible by tp; KV heads divide heads; at least one layer per pipeline stage (pp <= layers;
 * lb_chunk_layers splits them); virtual_stages in [1, LB_MAX_VIRTUAL_STAGES], > 1 only with pp > 1,
 * with pp*virtual_stages <= layers and the micro-batches per step a multiple of pp (the interleaved
 * schedule's rule, as in Megatron-LM); an explicit split with pp*virtual_stages entries, each at
 * least 1, summing to the layers; gpus_per_node*nodes == tp*pp*dp; global batch divisible by
 * micro_batch*dp; sequence parallelism needs tp > 1 (and seq_len divisible by tp); vocab divisible
 * by tp; ffn divisible by tp; hidden divisible by heads; head dim even (RoPE); zero_stage in
 * {0,1,2}; tp within one node (tp <= gpus_per_node); warmup < steps. Returns 0 if valid, else -1
 * with a reason such as "tp=3 does not divide 40 heads".
 */
int lb_layout_check(const struct lb_layout *l, char *reason, size_t len);

#endif
