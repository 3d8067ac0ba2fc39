/*
 * The CPU reference backend of the ops table: harness/ops_cpu_impl.h instantiated in
 * float (the trainer's "cpu" device) and in double (the gradient checks), plus the host
 * helpers every backend shares (the RoPE table, scratch sizes).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "harness/ops.h"
#include "harness/rng.h"

/* The reference's inner loops (axpy rows of the matmul, elementwise passes) are written to
 * vectorize; GCC's -O2 cost model leaves loops of unknown trip count scalar, so this file
 * asks for the loop vectorizer. Results stay deterministic (no reassociation). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif

#define REAL	  float
#define FN(name)  name##_f32
#define EXP	  expf
#define OPS_NAME  "cpu"
#define OPS_DTYPE LB_F32
#include "harness/ops_cpu_impl.h"
#undef REAL
#undef FN
#undef EXP
#undef OPS_NAME
#undef OPS_DTYPE

#define REAL	  double
#define FN(name)  name##_f64
#define EXP	  exp
#define OPS_NAME  "cpu-f64"
#define OPS_DTYPE LB_F64
#include "harness/ops_cpu_impl.h"
#undef REAL
#undef FN
#undef EXP
#undef OPS_NAME
#undef OPS_DTYPE

const struct lb_ops *lb_ops_cpu(void)
{
	return &table_f32;
}

const struct lb_ops *lb_ops_cpu_f64(void)
{
	return &table_f64;
}

/* RoPE angles as in Llama (Su et al. 2021, eq. 34; theta = 10000). */
double *lb_rope_table_host(int s, int d)
{
	double *cs = malloc((size_t)s * d * sizeof(*cs));

	if (!cs)
		return NULL;
	for (int pos = 0; pos < s; pos++)
		for (int i = 0; i < d / 2; i++) {
			double ang = pos * pow(10000.0, -2.0 * i / d);

			cs[(size_t)pos * d + 2 * i] = cos(ang);
			cs[(size_t)pos * d + 2 * i + 1] = sin(ang);
		}
	return cs;
}
