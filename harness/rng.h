/*
 * The counter-based normal draws behind the model's initialisation (harness/model.c): a
 * standard normal from (seed, key, index) alone, so every shard of every layout, on every
 * backend, draws the same full model. splitmix64 (Steele et al. 2014) mixes the counter;
 * Box-Muller on two 53-bit uniforms makes the normal. Shared by the C backends and the
 * CUDA kernels (LB_HD marks the functions for both).
 */
#ifndef LB_HARNESS_RNG_H
#define LB_HARNESS_RNG_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define LB_HD __host__ __device__
#else
#define LB_HD
#endif

static inline LB_HD uint64_t lb_splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static inline LB_HD double lb_normal_at(uint64_t seed, int key, uint64_t idx)
{
	uint64_t a = lb_splitmix64(seed ^ lb_splitmix64((uint64_t)key * 0x100000001b3ULL ^ idx));
	uint64_t b = lb_splitmix64(a);
	double u1 = ((a >> 11) + 1.0) / 9007199254740993.0; /* (0, 1] */
	double u2 = (b >> 11) / 9007199254740992.0;

	return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

#endif
