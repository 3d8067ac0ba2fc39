/*
 * The paper's kernel names and the kernels they stand for (common/kernel_names.h).
 */
#include "common/kernel_names.h"

#include <stdio.h>
#include <string.h>

const struct lb_kernel_name lb_kernel_names[] = {
    {"torch", LB_ATTN_NAIVE, LB_NORM_UNFUSED},
    {"fused", LB_ATTN_FUSED_SOFTMAX, LB_NORM_UNFUSED},
    {"flash_attention", LB_ATTN_FLASH, LB_NORM_UNFUSED},
    {"flash_attentionv1.0.8", LB_ATTN_FLASH, LB_NORM_UNFUSED},
    {LB_KERNEL_FLASH2, LB_ATTN_FLASH, LB_NORM_UNFUSED},
    {LB_KERNEL_FLASH2_RMS, LB_ATTN_FLASH, LB_NORM_FUSED},
};
const size_t lb_kernel_name_count = sizeof(lb_kernel_names) / sizeof(lb_kernel_names[0]);

int lb_kernel_name_index(const char *name)
{
	if (!name)
		return -1;
	for (size_t i = 0; i < lb_kernel_name_count; i++)
		if (!strcmp(name, lb_kernel_names[i].name))
			return (int)i;
	return -1;
}

int lb_kernel_name_map(const char *name, enum lb_attn *attn, enum lb_norm *norm)
{
	int i = lb_kernel_name_index(name);

	if (i < 0)
		return -1;
	*attn = lb_kernel_names[i].attention;
	*norm = lb_kernel_names[i].norm;
	return 0;
}

char *lb_kernel_names_list(char *buf, size_t len)
{
	size_t o = 0;

	if (len)
		buf[0] = '\0';
	for (size_t i = 0; i < lb_kernel_name_count && o < len; i++) {
		const char *n = lb_kernel_names[i].name;
		o += (size_t)snprintf(buf + o, len - o, strchr(n, ' ') ? "%s\"%s\"" : "%s%s",
				      i ? ", " : "", n);
	}
	return buf;
}
