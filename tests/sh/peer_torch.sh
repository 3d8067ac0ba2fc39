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
# "a leaf Variable that requires grad is being used in an in-place operation"). Training
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
if fail:
    print("\n".join("FAIL: " + f for f in fail))
    sys.exit(1)
print("peer_torch: all checks passed")
PY
