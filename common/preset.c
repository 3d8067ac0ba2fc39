/*
 * The model presets (preset.h): one table, from which both the lookup and the list of
 * names are made.
 */
#include "common/preset.h"

#include <stdio.h>
#include <string.h>

/* Llama shapes: Touvron et al. 2023 (LLaMA, table 2; Llama 2 for 70B), vocabulary 32000
 * with an untied head. Tiny presets: CPU shapes that split by tp, pp in {1, 2, 4}.
 * X(name, layers, hidden, heads, kv_heads, ffn, vocab, tied) */
#define PRESETS(X)                                                                                 \
	X("llama-7b", 32, 4096, 32, 32, 11008, 32000, 0)                                           \
	X("llama-13b", 40, 5120, 40, 40, 13824, 32000, 0)                                          \
	X("llama-30b", 60, 6656, 52, 52, 17920, 32000, 0)                                          \
	X("llama-65b", 80, 8192, 64, 64, 22016, 32000, 0)                                          \
	X("llama-70b", 80, 8192, 64, 8, 28672, 32000, 0)                                           \
	X("tiny", 4, 64, 4, 4, 128, 256, 0)                                                        \
	X("tiny-gqa", 4, 64, 8, 4, 128, 256, 0)                                                    \
	X("tiny-deep", 8, 64, 4, 4, 128, 256, 0)                                                   \
	X("tiny-tied", 4, 64, 4, 4, 128, 256, 1)

struct preset {
	const char *name;
	int layers, hidden, heads, kv_heads, ffn, vocab, tied;
};

#define PRESET_ROW(...) {__VA_ARGS__},
static const struct preset presets[] = {PRESETS(PRESET_ROW)};
#define PRESET_NAME(name, ...) name,
static const char *const preset_names[] = {PRESETS(PRESET_NAME) NULL};
#define NPRESETS (sizeof(presets) / sizeof(presets[0]))

int lb_model_preset(const char *name, struct lb_model *m)
{
	size_t i;

	if (!name)
		return -1;
	for (i = 0; i < NPRESETS; i++) {
		const struct preset *p = &presets[i];

		if (strcmp(name, p->name))
			continue;
		memset(m, 0, sizeof(*m));
		snprintf(m->name, sizeof(m->name), "%s", p->name);
		m->n_layers = p->layers;
		m->hidden = p->hidden;
		m->n_heads = p->heads;
		m->n_kv_heads = p->kv_heads;
		m->ffn = p->ffn;
		m->vocab = p->vocab;
		m->tied = p->tied;
		return 0;
	}
	return -1;
}

const char *const *lb_model_preset_names(void)
{
	return preset_names;
}
