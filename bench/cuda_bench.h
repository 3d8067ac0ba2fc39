/*
 * Micro-benchmarks of the CUDA backend, for the benchmark tools only (never the trainer):
 * the row-major GEMM of the ops table (lbc_gemm) timed as cached, or with any one of the
 * candidates cuBLASLt's heuristic proposes, so a bench can report TFLOP/s next to the best
 * candidate; and the device-to-device copy bandwidth, the measured ceiling that the
 * memory-bound kernels (norms, SwiGLU, AdamW, ...) are compared against; and the memory
 * in use as the device reports it; a kernel that stalls the stream (the watchdog's test).
 * Implemented in bench/cuda_bench.cu, which the benchmarks and the tests link and the
 * trainer does not; every function needs the "cuda" table's init first and returns a
 * negative value when it was not done or an allocation or a call failed.
 */
#ifndef LB_CUDA_BENCH_H
#define LB_CUDA_BENCH_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds per call of C (m, n) = op(A) op(B), row-major, natural leading dims, batch 1,
 * bf16 A and B (random, allocated and freed here), C bf16 or, when c_f32, float; beta 1
 * when accum (C += op(A) op(B), as the model's weight gradients accumulate), else 0:
 * the algo-th result of the heuristic list (0 = the heuristic's first choice), or the one
 * lbc_gemm caches and uses when algo is -1. Mean over iters calls timed with events
 * after 3 warm-up calls. The product is checked afterwards (sampled entries against a
 * direct dot product; when accumulating, of one more call into a zeroed C): -2 when it is
 * wrong; -1 when that index does not exist or an allocation or the call fails. */
double lb_cuda_gemm_seconds(int m, int n, int k, int ta, int tb, int c_f32, int accum, int algo,
			    int iters);

/* How many candidates the heuristic returns for that problem (asked for up to 16). */
int lb_cuda_gemm_n_algos(int m, int n, int k, int ta, int tb, int c_f32, int accum);

/* Device-to-device cudaMemcpyAsync of `bytes`, timed over iters copies after a warm-up:
 * bytes read plus written per second (2 * bytes / seconds per copy). */
double lb_cuda_copy_bandwidth(size_t bytes, int iters);

/* Bytes of device memory in use on this GPU by every process (cudaMemGetInfo: total -
 * free), so a test can set the allocator's counters against what the device reports. */
double lb_cuda_mem_used(void);

/* Enqueue on the backend's stream a kernel that spins for `seconds` of GPU time: the
 * stream makes no progress meanwhile, as when a device call hangs (the communicator
 * watchdog's test). 0, or -1 when the launch failed. */
int lb_cuda_stall(double seconds);

/* The attention variant sweep at one shape (B sequences of S tokens, nh query and nkv
 * key-value heads of dim d, causal): every variant of cuDNN's forward and backward graphs
 * (the trainer's; as cuDNN's frontend builds them; the dP-workspace backward; ...) with every
 * engine configuration cuDNN offers for it (its heuristic's lists, every engine with its
 * default knobs, the knobs of the fastest engine through their ranges), each plan's outputs
 * checked against the trainer's plan's and timed. Tab-separated lines to out: TRAINER (the
 * trainer's own plans), SWEEP per plan, VARIANT per variant, BEST per direction and for
 * forward + backward (flushed as they come). Stops starting plans after max_s seconds.
 * *trainer and *best (TFLOP/s forward + backward: the trainer's plans, the fastest checked
 * ones; -1 when unknown). 0, or -1 (no cuDNN, out of memory). Implemented in
 * bench/cudnn_sweep.cu. */
int lb_cuda_cudnn_sweep(int b, int s, int nh, int nkv, int d, double max_s, FILE *out,
			double *trainer, double *best);

#ifdef __cplusplus
}
#endif

#endif
