/*
 * The backend registry (ops.h lb_ops_find): which ops tables this build has, by name. The
 * one file outside harness/cuda/ that knows whether the build has the CUDA backend
 * (LB_WITH_CUDA, set by the Makefile when it finds nvcc); everything else asks here, and
 * what a backend can do beyond the CPU's is an optional member of its tables.
 */
#include <string.h>

#include "harness/ops.h"

const struct lb_ops *lb_ops_find(const char *name)
{
	if (!strcmp(name, "cpu"))
		return lb_ops_cpu();
	if (!strcmp(name, "cpu-f64"))
		return lb_ops_cpu_f64();
#ifdef LB_WITH_CUDA
	if (!strcmp(name, "cuda"))
		return lb_ops_cuda();
#endif
	return NULL;
}

int lb_ops_have_cuda(void)
{
#ifdef LB_WITH_CUDA
	return 1;
#else
	return 0;
#endif
}
