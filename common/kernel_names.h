/*
 * The paper's kernel names: the "kernel" column of its sheets and the `kernel`
 * pseudo-field of a sweep spec, each the attention and RMSNorm kernels it stands for.
 * One table, in the paper's order (slowest first), read by the spec parser, the importer
 * and the report's bar order.
 */
#ifndef LB_KERNEL_NAMES_H
#define LB_KERNEL_NAMES_H

#include <stddef.h>

#include "common/layout.h"

/* The two names the report's figures single out. */
#define LB_KERNEL_FLASH2     "flash_attention2"
#define LB_KERNEL_FLASH2_RMS "flash_attention2 + RMS kernel"

struct lb_kernel_name {
	const char *name;	/* verbatim, e.g. "flash_attention2 + RMS kernel" */
	enum lb_attn attention; /* torch = naive, fused = fused softmax, flash_* = flash;
				   none is cudnn (the paper ran no cuDNN attention) */
	enum lb_norm norm;	/* fused only for "+ RMS kernel" */
};

/* The table, in the paper's order, and its length. */
extern const struct lb_kernel_name lb_kernel_names[];
extern const size_t lb_kernel_name_count;

/* The position of name in lb_kernel_names (0 = slowest), or -1 when it is not a paper
 * kernel (NULL included). */
int lb_kernel_name_index(const char *name);

/* The kernels of a paper kernel name: 0 and *attn, *norm set, or -1 for an unknown name
 * (NULL included; *attn and *norm left alone). */
int lb_kernel_name_map(const char *name, enum lb_attn *attn, enum lb_norm *norm);

/* The names as a list for messages into buf (truncated to len): `torch, fused, ...,
 * "flash_attention2 + RMS kernel"` (a name with a space in double quotes). Returns buf. */
char *lb_kernel_names_list(char *buf, size_t len);

#endif
