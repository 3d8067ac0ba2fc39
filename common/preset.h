/*
 * The model's shape (struct lb_model) and the named presets: the Llama shapes the paper
 * trained and tiny CPU shapes. Below the layout record (common/layout.h holds a model),
 * so that the layout can start from a preset and the arithmetic on layouts
 * (common/model.h) sits above both. libc only.
 */
#ifndef LB_PRESET_H
#define LB_PRESET_H

#define LB_NAME_MAX 64

/* Model shape: a preset, possibly with fields overridden. */
struct lb_model {
	char name[LB_NAME_MAX]; /* preset name, e.g. "llama-13b" */
	int n_layers;
	int hidden; /* h */
	int n_heads;
	int n_kv_heads; /* == n_heads without grouped-query attention */
	int ffn;	/* SwiGLU inner size */
	int vocab;
	int tied; /* 1: LM head shares the embedding matrix */
};

/* Presets: llama-7b, llama-13b, llama-30b, llama-65b, llama-70b (GQA, 8 KV heads),
 * and tiny CPU presets ("tiny", "tiny-gqa", "tiny-deep", ...). Returns 0 and fills m,
 * or -1 for an unknown name. */
int lb_model_preset(const char *name, struct lb_model *m);

/* Names of all presets, NULL-terminated. */
const char *const *lb_model_preset_names(void);

#endif
