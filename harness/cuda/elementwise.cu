/*
 * The CUDA table's elementwise ops (harness/ops.h add, acc, scale): one grid-stride launch
 * each, 16-byte vector accesses where every pointer allows them.
 */
#include "harness/cuda/core.cuh"

/* ------------------------------------------------------------------------------------------
 * Elementwise ops. Each kernel does the vector part (16 bytes per access, when every
 * pointer is 16-byte aligned) and then the scalar tail in one grid-stride launch; when
 * a pointer is not aligned the vector part is empty and the tail is everything.
 * ------------------------------------------------------------------------------------------ */

/* out = a + b (bf16), summed in fp32 and rounded once. */
static __global__ void add_kernel(act_t *out, const act_t *a, const act_t *b, size_t n, size_t nvec)
{
	for (size_t i = GRID_START; i < nvec; i += GRID_STEP) {
		bf16x8 x = ((const bf16x8 *)a)[i], y = ((const bf16x8 *)b)[i], z;

#pragma unroll
		for (int j = 0; j < 8; j++)
			z.v[j] =
			    __float2bfloat16(__bfloat162float(x.v[j]) + __bfloat162float(y.v[j]));
		((bf16x8 *)out)[i] = z;
	}
	for (size_t i = nvec * 8 + GRID_START; i < n; i += GRID_STEP)
		out[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

void lbc_add(void *out, const void *a, const void *b, size_t n)
{
	size_t nvec = aligned(out, 16) && aligned(a, 16) && aligned(b, 16) ? n / 8 : 0;

	if (!n)
		return;
	add_kernel<<<grid_for(nvec + (n - nvec * 8)), THREADS, 0, lbc_stream()>>>(
	    (act_t *)out, (const act_t *)a, (const act_t *)b, n, nvec);
	LBC_LAUNCHED();
}

/* y += x (f32). */
static __global__ void acc_kernel(float *y, const float *x, size_t n, size_t nvec)
{
	for (size_t i = GRID_START; i < nvec; i += GRID_STEP) {
		float4 u = ((const float4 *)y)[i], v = ((const float4 *)x)[i];

		u.x += v.x;
		u.y += v.y;
		u.z += v.z;
		u.w += v.w;
		((float4 *)y)[i] = u;
	}
	for (size_t i = nvec * 4 + GRID_START; i < n; i += GRID_STEP)
		y[i] += x[i];
}

void lbc_acc(void *y, const void *x, size_t n)
{
	size_t nvec = aligned(y, 16) && aligned(x, 16) ? n / 4 : 0;

	if (!n)
		return;
	acc_kernel<<<grid_for(nvec + (n - nvec * 4)), THREADS, 0, lbc_stream()>>>(
	    (float *)y, (const float *)x, n, nvec);
	LBC_LAUNCHED();
}

/* x *= s (f32), the product in double and rounded once, as the CPU reference does. */
static __global__ void scale_kernel(float *x, double s, size_t n, size_t nvec)
{
	for (size_t i = GRID_START; i < nvec; i += GRID_STEP) {
		float4 u = ((const float4 *)x)[i];

		u.x = (float)(u.x * s);
		u.y = (float)(u.y * s);
		u.z = (float)(u.z * s);
		u.w = (float)(u.w * s);
		((float4 *)x)[i] = u;
	}
	for (size_t i = nvec * 4 + GRID_START; i < n; i += GRID_STEP)
		x[i] = (float)(x[i] * s);
}

void lbc_scale(void *x, double s, size_t n)
{
	size_t nvec = aligned(x, 16) ? n / 4 : 0;

	if (!n)
		return;
	scale_kernel<<<grid_for(nvec + (n - nvec * 4)), THREADS, 0, lbc_stream()>>>((float *)x, s,
										    n, nvec);
	LBC_LAUNCHED();
}
