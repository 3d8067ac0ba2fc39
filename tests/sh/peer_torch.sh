#!/bin/sh
# bench/peer_torch.py's command line and output without PyTorch or a GPU: the module is
# imported against a stand-in `torch` package (just enough names to define its classes),
# then: --recipe takes autocast (the default) and bf16 and refuses anything else (exit 2,
# the other flags unchanged); the summary line and the JSON name the recipe, the SDPA
# backend and MFU without the input embedding lookup; the FLOP counts are docs/flops.md's
# (the H200 cut: 5.4% less without the embedding at seq 2048; tied: the same); the SDPA
# backend is read off a profile's event names; every in-place write into the model's own
# parameters (the bf16 recipe's copy of the masters back) runs under torch.no_grad(), where
# autograd allows it (found by reading the code: a copy outside it failed on the GPU with
# "a leaf Variable that requires grad is being used in an in-place operation"); --data
# reads a token file as layoutbench-train does (sequence g from id g*S, step k's sequences
# from k*GB, wrapping; an id >= vocab and a file of no whole number of ids are errors),
# --make-data writes a Markov chain (fixed by its seed, the first successor about 3/4 of
# the time) that the CPU trainer reads and learns (its loss falls). Training the peer
# itself needs a GPU (bench/gpu).
set -u
command -v python3 >/dev/null 2>&1 || { echo "skip: no python3"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/stub/torch/nn"
cat >"$tmp/stub/torch/__init__.py" <<'PY'
"""A stand-in for torch: the names bench/peer_torch.py uses at import time."""
__version__ = "stub"
def no_grad():
    return lambda f: f
class _Anything:
    def __getattr__(self, name):
        return _Anything()
    def __call__(self, *a, **k):
        return _Anything()
cuda = _Anything()
from . import nn  # noqa: E402
PY
cat >"$tmp/stub/torch/nn/__init__.py" <<'PY'
class Module:
    pass
class Parameter:
    pass
Linear = Embedding = ModuleList = Parameter
PY
: >"$tmp/stub/torch/nn/functional.py"
PYTHONPATH="$tmp/stub" python3 - <<'PY' || exit 1
import io, json, sys, contextlib
sys.path.insert(0, "bench")
import peer_torch as pt

fail = []
def check(ok, what):
    if not ok:
        fail.append(what)

a = pt.parse_args([])
check(a.recipe == "autocast", "default recipe %r" % a.recipe)
b = pt.parse_args(["--recipe", "bf16", "--mode", "compile", "--seq-len", "8192",
                   "--global-batch", "4", "--micro-batch", "1", "--steps", "21", "--warmup", "1"])
check(b.recipe == "bf16" and b.mode == "compile" and b.seq_len == 8192, "bf16 flags")
err = io.StringIO()
try:
    with contextlib.redirect_stderr(err):
        pt.parse_args(["--recipe", "fp8"])
    check(False, "--recipe fp8 accepted")
except SystemExit as e:
    check(e.code == 2, "--recipe fp8 exit %r" % e.code)
    check("invalid choice: 'fp8'" in err.getvalue(), "--recipe fp8 message: " + err.getvalue())

# the FLOP counts (docs/flops.md): the H200 cut, N = 2865320960
n = 2865320960
palm, noemb = pt.flops_per_token(n, a), pt.flops_per_token(n, a, no_embed=True)
check(palm == 6.0 * n + 12.0 * 8 * 5120 * 2048, "PaLM count")
check(palm - noemb == 6.0 * 32000 * 5120, "the embedding's 6*V*h")
check(abs(noemb / palm - 0.94598) < 1e-4, "5.4%% less at seq 2048: %f" % (noemb / palm))
t = pt.parse_args(["--tied", "1"])
check(pt.flops_per_token(n, t, no_embed=True) == pt.flops_per_token(n, t), "tied: the same")

# the summary line names the recipe, MFU without the embedding and the SDPA backend
r = {"mode": "compile", "recipe": "bf16", "seq_len": 2048, "micro_batch": 1,
     "global_batch": 16, "step_s": 0.9, "std_s": 0.01, "tokens_per_s": 36409.0,
     "mfu": 0.5771, "mfu_no_embed": 0.5459, "peak_mem_gib": 40.0, "loss_first": 11.4,
     "loss_last": 10.1, "sdpa_backend": "cudnn", "compile_mode": "default", "gqa": "expand",
     "kv_heads": 40, "heads": 40, "status": "ok"}
line = pt.summary_line(r)
check(line.startswith("peer=torch mode=compile recipe=bf16 seq=2048 "), line)
check(" mfu=0.577 mfu_no_embed=0.546 " in line, line)
check(line.endswith(" loss_last=10.1 sdpa=cudnn"), line)
r["sdpa_backend"], r["status"] = None, "oom"
check(pt.summary_line(r).endswith(" sdpa=unknown status=oom"), pt.summary_line(r))
# the fields round.sh reads by name are still there, once each
for key in ("step_s=", " mfu=", "tokens_per_s=", "peak_mem_gib=", "std_s="):
    check(line.count(key) == 1, "%s in %s" % (key, line))

# the SDPA backend from a profile's event names
names = ["aten::linear", "aten::_scaled_dot_product_flash_attention",
         "aten::_scaled_dot_product_flash_attention_backward"]
check(pt.sdpa_backend_of(names) == "flash", "flash")
check(pt.sdpa_backend_of(["aten::_scaled_dot_product_cudnn_attention"]) == "cudnn", "cudnn")
check(pt.sdpa_backend_of(["aten::_scaled_dot_product_efficient_attention"]) == "efficient", "efficient")
check(pt.sdpa_backend_of(["aten::_scaled_dot_product_attention_math"]) == "math", "math")
check(pt.sdpa_backend_of(["aten::mm", "void flash_fwd_kernel<...>"]) is None, "no SDPA op")
check(pt.json_safe({"x": float("nan")}) == {"x": None}, "json_safe")

# in-place copies into the parameters happen inside a `with torch.no_grad():` block
import ast
tree = ast.parse(open("bench/peer_torch.py").read())
parents = {}
for node in ast.walk(tree):
    for child in ast.iter_child_nodes(node):
        parents[child] = node
def under_no_grad(node):
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.With) and any(
                "no_grad" in ast.unparse(item.context_expr) for item in node.items):
            return True
    return False
copies = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
          and ast.unparse(n.func) in ("torch._foreach_copy_",)
          and n.args and ast.unparse(n.args[0]) == "params"]
check(len(copies) >= 1, "the bf16 recipe copies its masters back into params")
for n in copies:
    check(under_no_grad(n), "line %d: an in-place copy into params outside torch.no_grad()"
          % n.lineno)

# --data: the token file as layoutbench-train reads it (docs/trainer.md, "Data")
import os, tempfile
d = tempfile.mkdtemp()
f100 = os.path.join(d, "ids100.u16")
check(pt.write_tokens(f100, list(range(100)), 256) == "u16", "u16 where every id fits")
bt = pt.file_batches(f100, "u16", 256, 4, 2, 2)
check(len(bt) == 2 and all(len(b) == 2 for b in bt), "steps x global batch")
check(bt[0][0] == [0, 1, 2, 3, 4] and bt[1][0] == [8, 9, 10, 11, 12],
      "sequence g is ids [g*S, g*S + S]: %r" % bt)
f10 = os.path.join(d, "ids10.u32")
check(pt.write_tokens(f10, list(range(10)), 1 << 17) == "u32", "u32 above 65536 ids")
check(pt.file_batches(f10, "u32", 1 << 17, 4, 2, 2)[1][0] == [8, 9, 0, 1, 2], "wraps at the end")
try:
    pt.file_batches(f100, "u16", 50, 4, 2, 20)
    check(False, "an id >= vocab accepted")
except ValueError as e:
    check("token id 50 at token offset 50 (byte offset 100) is >= vocab 50" in str(e), str(e))
odd = os.path.join(d, "odd")
open(odd, "wb").write(b"abc")
try:
    pt.file_batches(odd, "u16", 256, 4, 2, 1)
    check(False, "a file of 3 bytes accepted as u16 ids")
except ValueError as e:
    check("not a whole number of u16 token ids" in str(e), str(e))
m1, m2 = pt.markov_tokens(256, 20000), pt.markov_tokens(256, 20000)
check(m1 == m2, "the chain is fixed by its seed")
check(all(0 <= v < 256 for v in m1), "ids below vocab")
from collections import Counter
pairs = Counter(zip(m1, m1[1:]))
top = Counter()
for (x, y), c in pairs.items():
    top[x] = max(top[x], c)
share = sum(top.values()) / (len(m1) - 1)
check(0.72 < share < 0.80, "the first successor taken about 3/4 of the time: %.3f" % share)
check(pt.parse_args(["--data", f100, "--data-dtype", "u32"]).data_dtype == "u32", "--data flags")
r["data"] = f100
r["sdpa_backend"], r["status"] = "cudnn", "ok"
check(pt.summary_line(r).endswith(" sdpa=cudnn data=file"), pt.summary_line(r))
check(pt.main(["--make-data", os.path.join(d, "m.u16"), "--vocab", "256",
               "--data-tokens", "1000"]) == 0, "--make-data exits 0")
check(os.path.getsize(os.path.join(d, "m.u16")) == 2000, "--make-data writes 1000 u16 ids")
if fail:
    print("\n".join("FAIL: " + f for f in fail))
    sys.exit(1)
print("peer_torch: all checks passed")
PY
# a file --make-data writes is one layoutbench-train reads, and its loss falls on it
BUILD=${BUILD:-build}
TRAIN="$BUILD/layoutbench-train"
if [ -x "$TRAIN" ]; then
	PYTHONPATH="$tmp/stub" python3 bench/peer_torch.py --make-data "$tmp/m.u16" --vocab 256 \
		--data-tokens 20000 2>/dev/null || { echo "FAIL: --make-data"; exit 1; }
	"$TRAIN" --model tiny --seq-len 32 --global-batch 8 --micro-batch 4 --steps 8 --warmup 1 \
		--device cpu --quiet --data "$tmp/m.u16" --run-dir "$tmp/run" >"$tmp/train.out" 2>&1 ||
		{ cat "$tmp/train.out"; echo "FAIL: the trainer on the peer's token file"; exit 1; }
	awk '/"type":"step"/ { match($0, /"loss":[-0-9.eE+]+/); l[++n] = substr($0, RSTART + 7, RLENGTH - 7) + 0 }
		END { if (!(n == 8 && l[8] < l[1] - 0.3)) { print "FAIL: the loss on the token file: " l[1] " -> " l[n]; exit 1 }
			print "peer_torch: the trainer on the --make-data file: loss " l[1] " -> " l[8] }' \
		"$tmp"/run/run-*.jsonl || exit 1
else
	echo "peer_torch: no $TRAIN: the trainer on the peer's token file not checked"
fi

