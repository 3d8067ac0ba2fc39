/*
 * The parsed form of a sweep spec (JSON, format in docs/spec.md): models, fixed values,
 * grid axes and zipped groups (both stored as groups of fields advanced together), union
 * members, `where` constraints, run settings and the target cluster. spec_parse() does
 * every spec-level check (types, ranges, unknown keys, hostile strings) and names the
 * JSON path of each fault; layout facts (validity, memory) are left to common/ and
 * applied by the planner (sweeps/sweep.c).
 */
#ifndef LB_SPEC_H
#define LB_SPEC_H

#include <stddef.h>

#include "common/layout.h"
#include "sweeps/expr.h"
#include "sweeps/sweep.h"

/* Fields of a spec: every layout field by its number (common/layout_fields.def: SF_TP is
 * LB_FLD_TP), then the spec's own two. A spec sets in fixed / grid / zip the layout fields
 * that are neither the model (the top-level 'model' key chooses it), derived
 * (gpus_per_node, nodes) nor run settings ('run' gives them), and its own. */
enum spec_field {
#define LB_MODEL_FIELD(ID, ...)	 SF_##ID = LB_FLD_##ID,
#define LB_LAYOUT_FIELD(ID, ...) SF_##ID = LB_FLD_##ID,
#include "common/layout_fields.def"
	SF_GPUS = LB_NFIELDS, /* tp*pp*dp: dp is derived from it */
	SF_KERNEL,	      /* attention x norm, kept as the entry's label */
	SF_NFIELDS
};

/* Variables of `where`: the fields (model: the preset's index, compared with a string,
 * model == "llama-13b"; not kernel, stage_layers, nor the run settings), then these. */
enum spec_var {
	SV_ACCUM = SF_NFIELDS, /* global_batch / (micro_batch * dp); 0 when not integral */
	SV_NVARS
};

/* A value of the kernel pseudo-field: one of the paper's kernel strings, mapped onto
 * attention x norm by lb_kernel_name_map (common/kernel_names.h). */
struct spec_kernel {
	char name[48]; /* "flash_attention2 + RMS kernel" */
	enum lb_attn attention;
	enum lb_norm norm;
};

/* A value of the stage_layers field: layers per pipeline stage (model chunk); a value of
 * SF_STAGE_LAYERS is an index into sweep_spec.splits. */
struct spec_split {
	int n;
	int layers[LB_MAX_STAGES];
};

/* Fields advanced together: one grid axis (nf = 1) or one zip object. */
struct spec_group {
	int nf;
	int fields[SF_NFIELDS];
	int len;	 /* points along this group */
	long long *vals; /* len * nf values, row k at vals[k * nf] */
	char path[64];	 /* JSON path for messages ("grid.tp", "zip[0]") */
};

/* Values fixed for every point, and the groups of one part of the spec. */
struct spec_part {
	long long fixed[SF_NFIELDS];
	unsigned char has_fixed[SF_NFIELDS];
	struct spec_group *groups;
	int ngroups;
	struct expr *where;  /* NULL = no constraint */
	char where_path[64]; /* "where", "union[2].where" */
};

struct sweep_spec {
	char path[256]; /* for messages */
	char name[LB_NAME_MAX];
	char description[512];
	struct lb_model *models; /* presets with model_overrides applied */
	int *model_index;	 /* preset index of each model (for where: model == "...") */
	int nmodels;
	struct spec_part top;
	struct spec_part *members; /* union members; none = top alone */
	int nmembers;
	struct spec_kernel *kernels; /* values of the kernel field; a value is an index */
	int nkernels;
	struct spec_split *splits; /* values of the stage_layers field; likewise */
	int nsplits;
	int steps, warmup;
	unsigned long long seed;
	struct sweep_optim optim; /* run.lr, run.weight_decay, run.clip */
	double step_time_guess_s;
	struct sweep_cluster cluster;
};

/* Parse a spec text. Returns 0 (caller frees with spec_free), or -1 with err set to
 * "PATH: JSON.PATH: fault". */
int spec_parse(const char *path, const char *text, size_t len, struct sweep_spec *out, char *err,
	       size_t errlen);

void spec_free(struct sweep_spec *s);

/* Free the heap parts of a cluster (sbatch_extra, env, setup). */
void spec_cluster_release(struct sweep_cluster *c);

#endif
