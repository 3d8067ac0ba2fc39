/*
 * The model's shape (struct lb_model) and the named presets: the Llama shapes the paper
 * trained and tiny CPU shapes. Below the layout record (common/layout.h holds a model),
 * so that the layout can start from a preset and the arithmetic on layouts
 * (common/model.h) sits above both. libc only.
 */
#ifndef LB_PRESET_H
#define LB_PRESET_H

#define LB_NAME_MAX   64
#define LB_MAX_STAGES 64 /* entries of an explicit layer split (pp * virtual_stages) */

/* A field's member by its kind (common/layout_fields.def). */
#define LB_FIELD_DECL_NAME(t, m)   char m[LB_NAME_MAX];
#define LB_FIELD_DECL_POS(t, m)	   t m;
#define LB_FIELD_DECL_COUNT(t, m)  t m;
#define LB_FIELD_DECL_BOOL(t, m)   t m;
#define LB_FIELD_DECL_ZERO(t, m)   t m;
#define LB_FIELD_DECL_CHUNKS(t, m) t m;
#define LB_FIELD_DECL_ENUM(t, m)   t m;
#define LB_FIELD_DECL_SEED(t, m)   t m;
#define LB_FIELD_DECL_SPLIT(t, m)                                                                  \
	int n_##m;                                                                                 \
	t m[LB_MAX_STAGES];

/* Model shape: a preset, possibly with fields overridden. The members are the model
 * fields of common/layout_fields.def (name: the preset's, "llama-13b"; n_layers, hidden,
 * n_heads, n_kv_heads == n_heads without grouped-query attention, ffn: SwiGLU inner
 * size, vocab, tied: 1 when the LM head shares the embedding matrix). */
struct lb_model {
#define LB_MODEL_FIELD(ID, key, member, column, kind, ctype, dflt, attrs, head, names, help)       \
	LB_FIELD_DECL_##kind(ctype, member)
#include "common/layout_fields.def"
};

/* Presets: llama-7b, llama-13b, llama-30b, llama-65b, llama-70b (GQA, 8 KV heads),
 * and tiny CPU presets ("tiny", "tiny-gqa", "tiny-deep", ...). Returns 0 and fills m,
 * or -1 for an unknown name. */
int lb_model_preset(const char *name, struct lb_model *m);

/* Names of all presets, NULL-terminated. */
const char *const *lb_model_preset_names(void);

#endif
