#!/usr/bin/env python3
"""PyTorch's attention kernels at the trainer's shapes, beside bench_kernels' attention rows.

Times F.scaled_dot_product_attention forward + backward, causal, bf16, in the layout our
trainer's attention reads (batch, heads, seq, head dim), with one backend at a time (cuDNN's
fused attention, FlashAttention-2), and counts FLOPs exactly as bench_kernels does:
forward 4*B*H*S*S*D / 2 (two matmuls, halved for the causal mask), backward 2.5 times that.
The time is the least of 3 rounds of --iters back-to-back fwd+bwd calls (bench_kernels
times its own the same way), so both sides meet the same clocks.

Prints one RESULT line per backend and sequence length (the format of bench/run.sh):
  RESULT<TAB>torch sdpa cudnn fwd+bwd S2048<TAB>405.1<TAB>TFLOP/s<TAB>cudnn 91900
A backend PyTorch cannot run at a shape prints "skip" in place of the figure and why.
Exit 0 unless torch or a GPU is missing (exit 1).
"""

import argparse
import sys
import time

try:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError as e:  # pragma: no cover - the device image has torch
    print(f"error: PyTorch is needed ({e})", file=sys.stderr)
    sys.exit(1)


def fwd_bwd_seconds(q, k, v, dout, backend, iters):
    best = float("inf")
    with sdpa_kernel([backend]):
        for _ in range(3):
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(iters):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                o.backward(dout)
            torch.cuda.synchronize()
            best = min(best, (time.perf_counter() - t) / iters)
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seq", type=int, nargs="+", default=[2048, 8192])
    p.add_argument("--heads", type=int, default=40)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--iters", type=int, default=20)
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("error: no CUDA GPU visible to PyTorch", file=sys.stderr)
        return 1
    cudnn_ver = torch.backends.cudnn.version()
    backends = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]
    for s in a.seq:
        shape = (a.batch, a.heads, s, a.head_dim)
        g = torch.Generator(device="cuda").manual_seed(1)
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=g)
                   .requires_grad_() for _ in range(3))
        dout = torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=g)
        flops = 3.5 * 4 * a.batch * a.heads * s * s * a.head_dim / 2
        for name, be in backends:
            what = f"torch sdpa {name} fwd+bwd S{s}"
            try:
                fwd_bwd_seconds(q, k, v, dout, be, 2)  # plans, autotuning, first-call work
                sec = fwd_bwd_seconds(q, k, v, dout, be, a.iters)
            except RuntimeError as e:
                why = str(e).splitlines()[0][:80]
                print(f"RESULT\t{what}\tskip\t-\t{why}")
                continue
            note = f"cudnn {cudnn_ver}" if name == "cudnn" else f"torch {torch.__version__}"
            print(f"RESULT\t{what}\t{flops / sec / 1e12:.1f}\tTFLOP/s\t{note}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
