#!/usr/bin/env python3
"""PyTorch peer of layoutbench-train, for the side-by-side comparison of docs/performance.md.

It trains the same Llama model as our C/CUDA trainer (harness/model.c) on one GPU, with the
same training recipe as the paper's stack (Hagemann et al. 2023, arXiv 2311.05610) and our
trainer, written the way a PyTorch user would write it, so that our step time can be set
beside what eager PyTorch and torch.compile reach on the same GPU for the same work.

Model (matches harness/model.c):
  token embedding (V, H); per layer
    x = x + wo(attn(rope(wqkv(rmsnorm(x)))))        wqkv: H -> (nh + 2*nkv)*D, no bias
    x = x + wdown(silu(gate) * up), gate|up = wgu(rmsnorm(x)),  wgu: H -> 2F (gate first)
  final RMSNorm; LM head (V, H), untied unless --tied 1; cross-entropy averaged over tokens.
  RMSNorm eps 1e-5 with a gain; RoPE theta 10000 on the interleaved pairs (2i, 2i+1) of each
  head (not the half-split convention); GQA: query head h reads kv head h // (nh / nkv);
  causal attention through F.scaled_dot_product_attention(is_causal=True).
  Init: normal std 0.02, the output projections wo and wdown 0.02 / sqrt(2 * layers), norm
  gains 1.

Training, two recipes (--recipe):
  autocast (the default): fp32 parameters under bf16 autocast, the way most PyTorch users
    write mixed precision: every weight is cast to bf16 on every micro-batch, gradients
    are fp32, fused AdamW steps on the fp32 parameters;
  bf16: bf16 parameters and bf16 gradients, with an fp32 master copy of every parameter
    that fused AdamW updates (the gradients cast to fp32 into buffers made once), the copy
    cast back to bf16 after each step; no autocast. Our trainer's recipe (bf16 weights,
    fp32 masters), with bf16 gradients where ours keeps fp32 main gradients: no more work
    than ours, so the stronger peer.
Both: fused AdamW (lr 3e-4, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on matrices:
embedding, projections, head; not on the norm gains, as in our trainer), global
gradient-norm clipping to 1.0 (of the fp32 gradients), --global-batch sequences per
optimizer step in micro-batches of --micro-batch (gradient accumulation, loss scaled by
1/micro-batches). RMSNorm runs in fp32 and returns its input's dtype.
Data: by default uniform random token ids (torch.randint, seed 1234), a fresh global batch
for every step, all generated on the GPU once before the first step (a pool of at most 1
GiB, cycled if --steps needs more). On random tokens the loss starts near ln V + 1 with this
init (11.40 for the defaults) and falls slowly towards ln V and no further (11.38 after 6
steps): flat, not diverged. With --data FILE, the token file layoutbench-train reads with
--data (docs/trainer.md, "Data"): flat uint16 (--data-dtype u16) or uint32 ids, sequence g is
tokens [g*S, g*S + S] wrapping at the end, step k's global batch sequences [k*GB, (k+1)*GB),
an id >= --vocab an error; so both sides train on the same tokens. --make-data FILE
--data-tokens N writes such a file (u16 below 65536 ids, else u32) and exits: a fixed random
Markov chain like the trainer's synthetic stream (each id has four successors, the first
taken with probability 3/4), learnable, so the loss falls on both sides.

Timing: torch.cuda.synchronize() before and after each optimizer step, wall clock
(time.perf_counter) in between. The first --warmup steps (torch.compile compiles in the first
one) are excluded; --steps counts all steps, warm-up included. Peak memory is
torch.cuda.max_memory_allocated() over the whole run, warm-up included (like our run logs).

MFU, exactly as the paper (PaLM, Chowdhery et al. 2022, appendix B) and docs/flops.md:
  flops_per_token = 6 * N + 12 * L * H * S
    N: every parameter, embedding and untied head included; L layers; H hidden; S seq len
    (attention term not halved for the causal mask; recomputation not counted)
  tokens_per_s    = global_batch * seq_len / mean step time
  MFU             = tokens_per_s * flops_per_token / peak,  peak = 989e12 (H200 dense bf16;
                    --peak-tflops overrides)
and beside it mfu_no_embed, the same without the input embedding lookup (N less the
embedding table, V * H, unless tied: Megatron-LM's and torchtitan's count, docs/flops.md).

SDPA backend: which kernel F.scaled_dot_product_attention dispatches to for the model's
attention (its shape, bf16, causal, with gradients), found after the run by profiling one
forward and backward of it: flash, efficient, cudnn or math (unknown where the profile
names none).

Output: one summary line, e.g.
  peer=torch mode=compile recipe=bf16 seq=2048 mbs=1 gbs=16 step_s=1.234 std_s=0.010
  tokens_per_s=26543 mfu=0.494 mfu_no_embed=0.467 peak_mem_gib=40.1 loss_first=10.4
  loss_last=9.8 sdpa=flash
(compile_mode=M appended for a non-default --compile-mode) with status=oom (or
status=error, status=diverged) appended instead of crashing when the run fails, and the
same fields as one JSON object in --json-out FILE. Exit code as layoutbench-train: 0 ok,
1 error, 2 usage, 3 oom, 5 diverged (non-finite loss).

Example:
  python3 bench/peer_torch.py --mode compile --recipe bf16 --layers 8 --json-out peer.json
"""

import os

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_OOM, EXIT_DIVERGED = 0, 1, 2, 3, 5
RECIPES = ("autocast", "bf16")
RMS_EPS = 1e-5
ROPE_THETA = 10000.0
INIT_STD = 0.02
SEED = 1234
DATA_POOL_BYTES = 1 << 30


# --------------------------------------------------------------------------- model


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.dim = dim

    def forward(self, x):
        # computed in fp32, returned in the input's dtype (fp32 under autocast, whose
        # residual stream is fp32; bf16 in the bf16 recipe)
        return F.rms_norm(x.float(), (self.dim,), self.weight.float(), RMS_EPS).type_as(x)


def rope_tables(seq_len, head_dim, device):
    """cos, sin of shape (S, D/2): angle pos * theta^(-2i/D), as lb_rope_table_host."""
    i = torch.arange(head_dim // 2, dtype=torch.float64, device=device)
    inv_freq = ROPE_THETA ** (-2.0 * i / head_dim)
    pos = torch.arange(seq_len, dtype=torch.float64, device=device)
    ang = torch.outer(pos, inv_freq)
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope(x, cos, sin):
    """x: (B, S, n, D); rotates the interleaved pairs (2i, 2i+1) of each head."""
    b, s, n, d = x.shape
    xp = x.float().reshape(b, s, n, d // 2, 2)
    a, c = xp[..., 0], xp[..., 1]
    co = cos[:s].view(1, s, 1, d // 2)
    si = sin[:s].view(1, s, 1, d // 2)
    out = torch.stack((a * co - c * si, a * si + c * co), dim=-1)
    return out.reshape(b, s, n, d).type_as(x)


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.nh, self.nkv = a.heads, a.kv_heads
        self.d = a.hidden // a.heads
        self.ffn = a.ffn
        self.gqa_sdpa = a.gqa == "sdpa"
        self.attn_norm = RMSNorm(a.hidden)
        self.wqkv = nn.Linear(a.hidden, (self.nh + 2 * self.nkv) * self.d, bias=False)
        self.wo = nn.Linear(self.nh * self.d, a.hidden, bias=False)
        self.mlp_norm = RMSNorm(a.hidden)
        self.wgu = nn.Linear(a.hidden, 2 * a.ffn, bias=False)
        self.wdown = nn.Linear(a.ffn, a.hidden, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        nh, nkv, d = self.nh, self.nkv, self.d
        qkv = self.wqkv(self.attn_norm(x))
        q, k, v = qkv.split((nh * d, nkv * d, nkv * d), dim=-1)
        q = apply_rope(q.view(b, s, nh, d), cos, sin).transpose(1, 2)
        k = apply_rope(k.view(b, s, nkv, d), cos, sin).transpose(1, 2)
        v = v.view(b, s, nkv, d).transpose(1, 2)
        if nkv != nh and self.gqa_sdpa:
            # SDPA groups the same way: query head h reads kv head h // (nh / nkv)
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            if nkv != nh:
                # query head h reads kv head h // (nh / nkv), as the trainer
                k = k.repeat_interleave(nh // nkv, dim=1)
                v = v.repeat_interleave(nh // nkv, dim=1)
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(att.transpose(1, 2).reshape(b, s, nh * d))
        gate, up = self.wgu(self.mlp_norm(x)).split((self.ffn, self.ffn), dim=-1)
        x = x + self.wdown(F.silu(gate) * up)
        return x


class Llama(nn.Module):
    def __init__(self, a, device):
        super().__init__()
        self.embed = nn.Embedding(a.vocab, a.hidden)
        self.layers = nn.ModuleList(Block(a) for _ in range(a.layers))
        self.norm = RMSNorm(a.hidden)
        self.tied = bool(a.tied)
        self.head = None if self.tied else nn.Linear(a.hidden, a.vocab, bias=False)
        cos, sin = rope_tables(a.seq_len, a.hidden // a.heads, device)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self._init(a.layers)

    @torch.no_grad()
    def _init(self, n_layers):
        out_std = INIT_STD / math.sqrt(2.0 * n_layers)  # GPT-2 residual scaling
        for name, p in self.named_parameters():
            if p.dim() < 2:
                p.fill_(1.0)  # norm gains
            elif name.endswith("wo.weight") or name.endswith("wdown.weight"):
                p.normal_(0.0, out_std)
            else:
                p.normal_(0.0, INIT_STD)

    def forward(self, idx, targets):
        x = self.embed(idx)  # fp32 residual stream
        for layer in self.layers:
            x = layer(x, self.rope_cos, self.rope_sin)
        x = self.norm(x)
        if self.tied:
            logits = F.linear(x, self.embed.weight)
        else:
            logits = self.head(x)
        # cross-entropy in fp32 (autocast does this too), mean over the tokens
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


# --------------------------------------------------------------------------- run


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="PyTorch peer of layoutbench-train (see the module docstring)")
    p.add_argument("--hidden", type=int, default=5120)
    p.add_argument("--heads", type=int, default=40)
    p.add_argument("--kv-heads", type=int, default=40)
    p.add_argument("--ffn", type=int, default=13824)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--global-batch", type=int, default=16,
                   help="sequences per optimizer step")
    p.add_argument("--micro-batch", type=int, default=1,
                   help="sequences per forward/backward (gradient accumulation)")
    p.add_argument("--steps", type=int, default=10, help="optimizer steps, warm-up included")
    p.add_argument("--warmup", type=int, default=3, help="first steps excluded from timing")
    p.add_argument("--mode", choices=("eager", "compile"), default="eager")
    p.add_argument("--recipe", choices=RECIPES, default="autocast",
                   help="autocast: fp32 parameters under bf16 autocast; bf16: bf16 parameters "
                        "and gradients, an fp32 master copy for fused AdamW")
    p.add_argument("--compile-mode", default="default",
                   help="torch.compile mode: default, reduce-overhead, max-autotune, "
                        "max-autotune-no-cudagraphs (only with --mode compile)")
    p.add_argument("--gqa", choices=("expand", "sdpa"), default="expand",
                   help="with --kv-heads < --heads: expand the kv heads (repeat_interleave) "
                        "or pass enable_gqa=True to scaled_dot_product_attention")
    p.add_argument("--tied", type=int, choices=(0, 1), default=0,
                   help="1: the LM head shares the embedding")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0, help="gradient-norm clip, 0 off")
    p.add_argument("--peak-tflops", type=float, default=989.0,
                   help="dense bf16 peak of the GPU in TFLOP/s (H200: 989)")
    p.add_argument("--json-out", metavar="FILE", default=None)
    p.add_argument("--data", metavar="FILE", default=None,
                   help="token file as layoutbench-train --data reads it (default: uniform "
                        "random ids)")
    p.add_argument("--data-dtype", choices=("u16", "u32"), default="u16")
    p.add_argument("--make-data", metavar="FILE", default=None,
                   help="write a Markov-chain token file of --data-tokens ids for --vocab "
                        "and exit")
    p.add_argument("--data-tokens", type=int, default=1 << 20)
    a = p.parse_args(argv)

    def bad(msg):
        p.error(msg)  # exits 2

    for name in ("hidden", "heads", "kv_heads", "ffn", "layers", "vocab", "seq_len",
                 "global_batch", "micro_batch", "steps"):
        if getattr(a, name) <= 0:
            bad(f"--{name.replace('_', '-')} must be positive")
    if a.warmup < 0 or a.warmup >= a.steps:
        bad("--warmup must be in [0, --steps)")
    if a.hidden % a.heads:
        bad("--hidden must be a multiple of --heads")
    if (a.hidden // a.heads) % 2:
        bad("the head dimension (--hidden / --heads) must be even for RoPE")
    if a.heads % a.kv_heads:
        bad("--heads must be a multiple of --kv-heads")
    if a.global_batch % a.micro_batch:
        bad("--global-batch must be a multiple of --micro-batch")
    if a.peak_tflops <= 0:
        bad("--peak-tflops must be positive")
    if a.data_tokens < 2:
        bad("--data-tokens must be at least 2")
    return a


# --------------------------------------------------------------------------- data


def markov_tokens(vocab, n, seed=SEED):
    """n ids of a fixed random Markov chain over vocab ids: each id has four successors,
    the first taken with probability 3/4, else one of the other three."""
    import random
    rng = random.Random(seed)
    succ = [[rng.randrange(vocab) for _ in range(4)] for _ in range(vocab)]
    out = [0] * n
    cur = rng.randrange(vocab)
    for i in range(n):
        out[i] = cur
        r = rng.random()
        cur = succ[cur][0 if r < 0.75 else 1 + min(2, int((r - 0.75) * 12))]
    return out


def write_tokens(path, ids, vocab):
    """ids as a flat file in the host byte order: u16 where every id fits, else u32;
    returns the dtype name."""
    from array import array
    code, name = ("H", "u16") if vocab <= 1 << 16 else ("I", "u32")
    with open(path, "wb") as f:
        array(code, ids).tofile(f)
    return name


def file_batches(path, dtype, vocab, seq, gbs, steps):
    """What layoutbench-train --data reads: for each step k the sequences
    [k*gbs, (k+1)*gbs), sequence g the seq + 1 ids from g*seq on, wrapping at the file's
    end. Raises ValueError naming the file, the id and its offsets on an id >= vocab, and
    on a file that is not a whole number of ids (at least 2)."""
    from array import array
    code, elem = ("H", 2) if dtype == "u16" else ("I", 4)
    ids = array(code)
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) % elem or len(raw) // elem < 2:
        raise ValueError(f"data file '{path}': size {len(raw)} is not a whole number of "
                         f"{dtype} token ids (at least 2)")
    ids.frombytes(raw)
    n = len(ids)
    out = []
    for k in range(steps):
        batch = []
        for g in range(k * gbs, (k + 1) * gbs):
            p = (g * seq) % n
            s = [ids[(p + i) % n] for i in range(seq + 1)]
            for i, v in enumerate(s):
                if v >= vocab:
                    off = (p + i) % n
                    raise ValueError(f"data file '{path}': token id {v} at token offset "
                                     f"{off} (byte offset {off * elem}) is >= vocab {vocab}")
            batch.append(s)
        out.append(batch)
    return out


def flops_per_token(n_params, a, no_embed=False):
    """PaLM's count (docs/flops.md); no_embed: without the input embedding lookup (N less
    the embedding table unless it is tied to the head), Megatron-LM's and torchtitan's."""
    n = n_params - (a.vocab * a.hidden if no_embed and not a.tied else 0)
    return 6.0 * n + 12.0 * a.layers * a.hidden * a.seq_len


def param_count_formula(a):
    """lb_param_count (common/model.c), as a cross-check of the model built here."""
    h, d = a.hidden, a.hidden // a.heads
    qkv = (a.heads + 2 * a.kv_heads) * d
    layer = h + qkv * h + h * a.heads * d + h + 2 * a.ffn * h + h * a.ffn
    n = a.layers * layer + a.vocab * h + h
    if not a.tied:
        n += a.vocab * h
    return n


def is_oom(e):
    if isinstance(e, torch.cuda.OutOfMemoryError):
        return True
    # torch.compile wraps errors raised while compiling (BackendCompilerFailed, ...)
    cause = e
    for _ in range(8):
        if cause is None:
            break
        if isinstance(cause, torch.cuda.OutOfMemoryError) or "out of memory" in str(cause).lower():
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def fmt(v, spec):
    return "nan" if v is None else format(v, spec)


def json_safe(v):
    """NaN and inf are not JSON: null instead."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, list):
        return [json_safe(x) for x in v]
    if isinstance(v, dict):
        return {k: json_safe(x) for k, x in v.items()}
    return v


def summary_line(r):
    parts = [
        "peer=torch",
        f"mode={r['mode']}",
        f"recipe={r['recipe']}",
        f"seq={r['seq_len']}",
        f"mbs={r['micro_batch']}",
        f"gbs={r['global_batch']}",
        f"step_s={fmt(r['step_s'], '.3f')}",
        f"std_s={fmt(r['std_s'], '.3f')}",
        f"tokens_per_s={fmt(r['tokens_per_s'], '.0f')}",
        f"mfu={fmt(r['mfu'], '.3f')}",
        f"mfu_no_embed={fmt(r['mfu_no_embed'], '.3f')}",
        f"peak_mem_gib={fmt(r['peak_mem_gib'], '.1f')}",
        f"loss_first={fmt(r['loss_first'], '.4g')}",
        f"loss_last={fmt(r['loss_last'], '.4g')}",
        f"sdpa={r['sdpa_backend'] or 'unknown'}",
    ]
    if r.get("data"):
        parts.append("data=file")
    if r["mode"] == "compile" and r["compile_mode"] not in ("", "default"):
        parts.append(f"compile_mode={r['compile_mode']}")
    if r["gqa"] != "expand" and r["kv_heads"] != r["heads"]:
        parts.append(f"gqa={r['gqa']}")
    if r["status"] != "ok":
        parts.append(f"status={r['status']}")
    return " ".join(parts)


# what the profile of an SDPA call names, most specific first
SDPA_OPS = (("cudnn", "cudnn"), ("flash", "flash"), ("efficient", "efficient"),
            ("math", "math"))


def sdpa_backend_of(names):
    """The backend a profile's event names show (aten::_scaled_dot_product_flash_attention,
    ..._efficient_attention, ..._cudnn_attention, ..._attention_math), or None."""
    for name in names:
        n = name.lower()
        if "scaled_dot_product" not in n and "sdpa" not in n:
            continue
        for key, backend in SDPA_OPS:
            if key in n:
                return backend
    return None


def sdpa_backend(a, dev):
    """The kernel F.scaled_dot_product_attention picks for the model's attention: one
    forward and backward of it, bf16 at the model's shape (micro-batch, heads, seq, head
    dim; the kv heads as the model passes them), causal, profiled."""
    try:
        from torch.profiler import ProfilerActivity, profile
        d = a.hidden // a.heads
        gqa = a.kv_heads != a.heads and a.gqa == "sdpa"
        nkv = a.kv_heads if gqa else a.heads
        q = torch.randn(a.micro_batch, a.heads, a.seq_len, d, device=dev, dtype=torch.bfloat16,
                        requires_grad=True)
        k = torch.randn(a.micro_batch, nkv, a.seq_len, d, device=dev, dtype=torch.bfloat16,
                        requires_grad=True)
        v = torch.randn_like(k, requires_grad=True)
        kw = {"enable_gqa": True} if gqa else {}
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
        with profile(activities=acts) as prof:
            F.scaled_dot_product_attention(q, k, v, is_causal=True, **kw).sum().backward()
            if dev.type == "cuda":
                torch.cuda.synchronize()
        return sdpa_backend_of(e.name for e in prof.events()) or "unknown"
    except Exception as e:  # noqa: BLE001 - the run's figures stand without it
        print(f"peer_torch: warning: the SDPA backend is unknown: {type(e).__name__}: {e}",
              file=sys.stderr)
        return "unknown"


def train(a, r):
    dev = torch.device("cuda")
    torch.manual_seed(SEED)
    torch.cuda.manual_seed(SEED)

    with torch.device(dev):
        model = Llama(a, dev)
    n_params = sum(p.numel() for p in model.parameters())
    r["params"] = n_params
    r["flops_per_token"] = flops_per_token(n_params, a)
    r["flops_per_token_no_embed"] = flops_per_token(n_params, a, no_embed=True)
    if n_params != param_count_formula(a):
        print(f"peer_torch: warning: {n_params} parameters, common/model.c counts "
              f"{param_count_formula(a)}", file=sys.stderr)

    params = list(model.parameters())
    if a.recipe == "bf16":
        # the fp32 master copy AdamW steps on, with fp32 gradient buffers made once; the
        # model's own parameters (and so its gradients) become bf16
        masters = [p.detach().float().clone() for p in params]
        for m in masters:
            m.grad = torch.zeros_like(m)
        with torch.no_grad():  # the parameters only: the RoPE tables stay fp32
            for p in params:
                p.data = p.data.to(torch.bfloat16)
        stepped = masters
    else:
        masters = None
        stepped = params
    decay = [p for p in stepped if p.dim() >= 2]
    no_decay = [p for p in stepped if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": a.weight_decay},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)

    if a.mode == "compile":
        mode = None if a.compile_mode in ("", "default") else a.compile_mode
        fwd = torch.compile(model, mode=mode)
    else:
        fwd = model

    # random ids for every step, made on the GPU once (seq_len + 1 for the shift); a pool
    # of at most DATA_POOL_BYTES, cycled when --steps needs more
    if a.data:  # the trainer's token file: every step's batch, read once
        n_pool = a.steps
        data = torch.tensor(file_batches(a.data, a.data_dtype, a.vocab, a.seq_len,
                                         a.global_batch, a.steps), dtype=torch.long,
                            device=dev)
    else:
        per_step = a.global_batch * (a.seq_len + 1) * 8
        n_pool = max(1, min(a.steps, DATA_POOL_BYTES // per_step))
        gen = torch.Generator(device=dev)
        gen.manual_seed(SEED)
        data = torch.randint(0, a.vocab, (n_pool, a.global_batch, a.seq_len + 1), device=dev,
                             generator=gen, dtype=torch.long)
    n_micro = a.global_batch // a.micro_batch
    amp = a.recipe == "autocast"

    torch.cuda.reset_peak_memory_stats()
    times, losses = [], []
    for step in range(a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        batch = data[step % n_pool]
        loss_sum = torch.zeros((), device=dev, dtype=torch.float32)
        for i in range(n_micro):
            mb = batch[i * a.micro_batch:(i + 1) * a.micro_batch]
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                loss = fwd(mb[:, :-1], mb[:, 1:])
            (loss / n_micro).backward()
            loss_sum += loss.detach()
        if masters is not None:  # bf16 gradients into the fp32 masters' buffers
            torch._foreach_copy_([m.grad for m in masters], [p.grad for p in params])
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(stepped, a.clip, foreach=True)
        opt.step()
        if masters is not None:  # the updated masters back into the bf16 parameters
            with torch.no_grad():  # in place on leaves that require grad: outside autograd
                torch._foreach_copy_(params, masters)
            model.zero_grad(set_to_none=True)
        else:
            opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0

        loss_v = loss_sum.item() / n_micro
        losses.append(loss_v)
        if step >= a.warmup:
            times.append(dt)
        print(f"step {step}: loss {loss_v:.4f} time {dt:.3f} s"
              f"{' (warmup)' if step < a.warmup else ''}", file=sys.stderr, flush=True)
        r["loss_first"] = losses[0]
        r["loss_last"] = loss_v
        r["peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
        if not math.isfinite(loss_v):
            r["status"] = "diverged"
            return EXIT_DIVERGED

    mean = statistics.fmean(times)
    r["step_s"] = mean
    r["std_s"] = statistics.stdev(times) if len(times) > 1 else 0.0
    r["n_timed_steps"] = len(times)
    r["tokens_per_s"] = a.global_batch * a.seq_len / mean
    r["mfu"] = r["tokens_per_s"] * r["flops_per_token"] / (a.peak_tflops * 1e12)
    r["mfu_no_embed"] = r["tokens_per_s"] * r["flops_per_token_no_embed"] / (a.peak_tflops * 1e12)
    r["param_dtype"] = str(params[0].dtype).replace("torch.", "")
    r["sdpa_backend"] = sdpa_backend(a, dev)
    r["peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
    r["step_times_s"] = times
    r["losses"] = losses
    r["status"] = "ok"
    return EXIT_OK


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    if a.make_data:
        dtype = write_tokens(a.make_data, markov_tokens(a.vocab, a.data_tokens), a.vocab)
        print(f"peer_torch: wrote {a.data_tokens} {dtype} token ids of a Markov chain over "
              f"{a.vocab} to {a.make_data}", file=sys.stderr)
        return EXIT_OK
    r = {
        "peer": "torch", "mode": a.mode, "recipe": a.recipe,
        "compile_mode": a.compile_mode if a.mode == "compile" else None,
        "hidden": a.hidden, "heads": a.heads, "kv_heads": a.kv_heads, "ffn": a.ffn,
        "layers": a.layers, "vocab": a.vocab, "tied": a.tied, "gqa": a.gqa,
        "seq_len": a.seq_len, "micro_batch": a.micro_batch, "global_batch": a.global_batch,
        "steps": a.steps, "warmup": a.warmup, "peak_tflops": a.peak_tflops,
        "step_s": None, "std_s": None, "tokens_per_s": None, "mfu": None,
        "mfu_no_embed": None, "sdpa_backend": None, "param_dtype": None,
        "peak_mem_gib": None, "loss_first": None, "loss_last": None,
        "params": None, "flops_per_token": None, "status": "error", "message": None,
        "torch": torch.__version__, "gpu": None, "data": a.data,
    }
    rc = EXIT_ERROR
    try:
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device")
        r["gpu"] = torch.cuda.get_device_name(0)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        rc = train(a, r)
    except Exception as e:  # noqa: BLE001 - reported, not raised
        if is_oom(e):
            r["status"], rc = "oom", EXIT_OOM
        else:
            r["status"], rc = "error", EXIT_ERROR
        r["message"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:500]
        print(f"peer_torch: {r['status']}: {r['message']}", file=sys.stderr)
        try:
            if torch.cuda.is_available():
                r["peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
        except Exception:  # noqa: BLE001
            pass

    line = summary_line(r)
    print(line, flush=True)
    r["summary"] = line
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(json_safe(r), f, indent=2)
            f.write("\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())
