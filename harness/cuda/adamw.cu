/*
 * The CUDA table's optimizer (harness/ops.h adamw, adamw_scalars, clip_scale, adamw_dev):
 * AdamW fused into one pass, and its per-step scalars kept in device memory.
 */
#include <math.h>
#include <string.h>

#include "harness/cuda/core.cuh"

/* ------------------------------------------------------------------------------------------
 * AdamW (Loshchilov & Hutter 2019, Algorithm 2, with Adam's bias corrections, Kingma &
 * Ba 2015, Algorithm 1): the CPU reference's formula (harness/ops_cpu_impl.h) in fp32,
 * fused into one pass over master, grad, m, v (f32) and param (bf16). The bias
 * corrections c1 = 1 - b1^step, c2 = 1 - b2^step are computed on the host in double.
 * ------------------------------------------------------------------------------------------ */

struct adamw_args {
	float lr, b1, b2, omb1, omb2, c1, c2, eps, wd, gs; /* omb1 = 1 - b1, omb2 = 1 - b2 */
};

/* One element: updates m, v; returns the new master weight. */
static __device__ __forceinline__ float adamw_elem(float &m, float &v, float w, float grad,
						   const adamw_args &a)
{
	float g = grad * a.gs;

	m = a.b1 * m + a.omb1 * g;
	v = a.b2 * v + a.omb2 * g * g;
	return w - a.lr * ((m / a.c1) / (sqrtf(v / a.c2) + a.eps) + a.wd * w);
}

/* DEV: c1, c2 and the gradient scale from sc (adamw_dev) instead of a. */
template <int DEV>
static __global__ void adamw_kernel(act_t *param, float *master, const float *grad, float *m,
				    float *v, size_t n, size_t nvec, adamw_args a, const double *sc)
{
	if (DEV) {
		a.c1 = (float)sc[0];
		a.c2 = (float)sc[1];
		a.gs = (float)sc[2];
	}
	for (size_t i = GRID_START; i < nvec; i += GRID_STEP) {
		float4 w = ((const float4 *)master)[i], g = ((const float4 *)grad)[i];
		float4 mi = ((const float4 *)m)[i], vi = ((const float4 *)v)[i];
		bf16x4 p;

		w.x = adamw_elem(mi.x, vi.x, w.x, g.x, a);
		w.y = adamw_elem(mi.y, vi.y, w.y, g.y, a);
		w.z = adamw_elem(mi.z, vi.z, w.z, g.z, a);
		w.w = adamw_elem(mi.w, vi.w, w.w, g.w, a);
		p.v[0] = __float2bfloat16(w.x);
		p.v[1] = __float2bfloat16(w.y);
		p.v[2] = __float2bfloat16(w.z);
		p.v[3] = __float2bfloat16(w.w);
		((float4 *)master)[i] = w;
		((float4 *)m)[i] = mi;
		((float4 *)v)[i] = vi;
		((bf16x4 *)param)[i] = p;
	}
	for (size_t i = nvec * 4 + GRID_START; i < n; i += GRID_STEP) {
		float mi = m[i], vi = v[i];
		float w = adamw_elem(mi, vi, master[i], grad[i], a);

		m[i] = mi;
		v[i] = vi;
		master[i] = w;
		param[i] = __float2bfloat16(w);
	}
}

/* The constant part of the arguments; c1, c2 and gs are the caller's. */
static adamw_args adamw_make(double lr, double b1, double b2, double eps, double wd)
{
	adamw_args a;

	memset(&a, 0, sizeof(a));
	a.lr = (float)lr;
	a.b1 = (float)b1;
	a.b2 = (float)b2;
	a.omb1 = (float)(1.0 - b1);
	a.omb2 = (float)(1.0 - b2);
	a.eps = (float)eps;
	a.wd = (float)wd;
	return a;
}

static size_t adamw_nvec(const void *param, const void *master, const void *grad, const void *m,
			 const void *v, size_t n)
{
	return aligned(master, 16) && aligned(grad, 16) && aligned(m, 16) && aligned(v, 16) &&
		       aligned(param, 8)
		   ? n / 4
		   : 0;
}

void lbc_adamw(void *param, void *master, const void *grad, void *m, void *v, size_t n, double lr,
	       double b1, double b2, double eps, double wd, int step, double grad_scale)
{
	adamw_args a = adamw_make(lr, b1, b2, eps, wd);
	size_t nvec = adamw_nvec(param, master, grad, m, v, n);

	if (!n)
		return;
	a.c1 = (float)(1.0 - pow(b1, step));
	a.c2 = (float)(1.0 - pow(b2, step));
	a.gs = (float)grad_scale;
	adamw_kernel<0><<<grid_for(nvec + (n - nvec * 4)), THREADS, 0, lbc_stream()>>>(
	    (act_t *)param, (float *)master, (const float *)grad, (float *)m, (float *)v, n, nvec,
	    a, NULL);
	LBC_LAUNCHED();
}

/* AdamW's step scalars in device memory (ops.h adamw_scalars, clip_scale, adamw_dev): the
 * same values as cuda_adamw computes on the host (c1, c2 in double on the host, rounded to
 * float in the kernel; the clip factor in double), read by the kernel from sc, so a
 * captured optimizer serves every step and no step waits for its gradient norm. */
static __global__ void adamw_scalars_kernel(double *sc, double c1, double c2, double gs,
					    double step)
{
	sc[0] = c1;
	sc[1] = c2;
	if (gs >= 0)
		sc[2] = gs;
	sc[3] = step;
}

void lbc_adamw_scalars(void *sc, int step, double b1, double b2, double grad_scale)
{
	adamw_scalars_kernel<<<1, 1, 0, lbc_stream()>>>(
	    (double *)sc, 1.0 - pow(b1, step), 1.0 - pow(b2, step), grad_scale, (double)step);
	LBC_LAUNCHED();
}

/* lb_optim_clip_scale (harness/optim.c) on the device, in double: sqrt and the division
 * are correctly rounded there as on the host. */
static __global__ void clip_scale_kernel(double *sc, const double *sq, double clip)
{
	double norm = sqrt(sq[0]);

	sc[2] = (clip <= 0 || !(norm > clip)) ? 1.0 : clip / norm;
}

void lbc_clip_scale(void *sc, const void *sq, double clip)
{
	clip_scale_kernel<<<1, 1, 0, lbc_stream()>>>((double *)sc, (const double *)sq, clip);
	LBC_LAUNCHED();
}

void lbc_adamw_dev(void *param, void *master, const void *grad, void *m, void *v, size_t n,
		   double lr, double b1, double b2, double eps, double wd, const void *sc)
{
	adamw_args a = adamw_make(lr, b1, b2, eps, wd);
	size_t nvec = adamw_nvec(param, master, grad, m, v, n);

	if (!n)
		return;
	adamw_kernel<1><<<grid_for(nvec + (n - nvec * 4)), THREADS, 0, lbc_stream()>>>(
	    (act_t *)param, (float *)master, (const float *)grad, (float *)m, (float *)v, n, nvec,
	    a, (const double *)sc);
	LBC_LAUNCHED();
}
