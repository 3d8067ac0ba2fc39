#!/bin/sh
# The trainer on the GPU against the CPU reference, end to end (make test-gpu runs it; on
# a machine without a GPU, or with a build without CUDA, it skips with the reason).
#
#  1. The tiny model, 50 steps, on the GPU (bf16 parameters and activations, fp32 master
#     weights, main gradients and statistics) follows the CPU's fp32 run: the relative
#     loss difference is at most 2% at the last step and at most 3% at every step.
#     Why that bound holds: each step's loss is a mean over 512 tokens; bf16 rounding of
#     activations and parameters (relative 2^-8 each) perturbs each token's logits by
#     about 1e-2 relative in the worst case but by far less on average (the errors are
#     unbiased and averaged over 64-wide dot products), and AdamW with fp32 master
#     weights keeps the parameter trajectories within bf16 rounding of each other, so the
#     mean losses agree to well under 1% in practice; 2% leaves room, and a wrong index
#     or a missing gradient term moves the loss by far more (tens of percent by step 50).
#  2. Every attention x norm x checkpointing combination (3 x 2 x 3) on the GPU gives the
#     same losses as the flash/fused/none GPU run within 2% at every step: the kernels
#     compute the same function, differing only in bf16 rounding of intermediates.
#  3. Three of those combinations (naive/unfused/full, fused_softmax/fused/selective,
#     flash/unfused/none) also follow their CPU runs within the bound of 1.
#  4. cuDNN's fused attention (--attention cudnn), on a tiny model widened to head dim 64
#     (its engines' range) with grouped-query heads, at learning rate 0.001 (at the default
#     0.003 this wider model's trajectory is chaotic: two CPU kernels of the same math part
#     by 0.3% at step 50, where at 0.001 they agree to 6 digits): GPU flash and cudnn follow
#     the CPU's flash run (the same math) within the bound of 1, and cudnn with every
#     checkpointing mode the GPU's flash run within 2%; the CPU refuses --attention cudnn
#     (exit 2, naming the fix).
#  5. --mem-limit forces an out-of-memory on the GPU: exit 3, a complete log ending in
#     class oom; the run log names the device and carries a peak for MFU.
BUILD=${BUILD:-build}
TRAIN="$(pwd)/$BUILD/layoutbench-train"

[ -x "$TRAIN" ] || { echo "error: '$TRAIN' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
extra=
tiny="--model tiny --seq-len 64 --global-batch 8 --micro-batch 2 --steps 50 --warmup 1 --quiet"

# is there a GPU to run on?
"$TRAIN" --model tiny --seq-len 16 --global-batch 1 --micro-batch 1 --steps 1 --warmup 0 \
	--quiet --device cuda --run-dir "$tmp/probe" >"$tmp/probe.out" 2>"$tmp/probe.err"
rc=$?
if [ "$rc" != 0 ]; then
	why=$(grep -o "built without the CUDA backend\|no CUDA device[^(]*" "$tmp/probe.err" | head -n 1 | sed "s/ *$//")
	if [ -n "$why" ] && [ "${LB_REQUIRE_GPU:-0}" != 1 ]; then
		echo "skip: the GPU tests need a GPU: $why"
		exit 77
	fi
	cat "$tmp/probe.err"
	echo "FAIL: the GPU probe run exited $rc"
	exit 1
fi

losses() { # run dir -> one loss per line, step order
	grep '"type":"step"' "$1"/run-*.jsonl | sed 's/.*"loss":\([^,]*\),.*/\1/'
}
# compare A B max_rel last_rel name: every step within max_rel, the last within last_rel
compare() {
	losses "$1" >"$tmp/a" && losses "$2" >"$tmp/b"
	paste "$tmp/a" "$tmp/b" | awk -v m="$3" -v l="$4" -v name="$5" '
		{ d = $1 - $2; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2); n++
		  if (r > worst) { worst = r; at = NR } last = r; la = $1; lb = $2 }
		END { if (n != 50) { printf "FAIL: %s: %d steps, want 50\n", name, n; exit 1 }
		      printf "%s: worst %.4f at step %d, last %.4f (%.5f vs %.5f)\n",
			     name, worst, at, last, la, lb
		      if (worst > m || last > l) { print "FAIL: " name; exit 1 } }' || fail=1
}
run() { # dir device attention norm ckpt
	"$TRAIN" $tiny $extra --device "$2" --attention "$3" --norm "$4" --checkpointing "$5" \
		--run-dir "$1" >"$1.out" 2>"$1.err" ||
		{ echo "FAIL: $2 $3/$4/$5 exited $?"; cat "$1.err"; fail=1; }
}

run "$tmp/cpu" cpu flash fused none
run "$tmp/gpu" cuda flash fused none
compare "$tmp/gpu" "$tmp/cpu" 0.03 0.02 "gpu vs cpu flash/fused/none"

for a in naive fused_softmax flash; do
	for n in unfused fused; do
		for c in none selective full; do
			run "$tmp/g-$a-$n-$c" cuda "$a" "$n" "$c"
			compare "$tmp/g-$a-$n-$c" "$tmp/gpu" 0.02 0.02 "gpu $a/$n/$c vs gpu flash/fused/none"
		done
	done
done
for combo in "naive unfused full" "fused_softmax fused selective" "flash unfused none"; do
	set -- $combo
	run "$tmp/c-$1-$2-$3" cpu "$1" "$2" "$3"
	compare "$tmp/g-$1-$2-$3" "$tmp/c-$1-$2-$3" 0.03 0.02 "gpu vs cpu $1/$2/$3"
done

extra="--hidden 256 --heads 4 --kv-heads 2 --lr 0.001"
run "$tmp/w-cpu" cpu flash fused none
run "$tmp/w-gpu" cuda flash fused none
compare "$tmp/w-gpu" "$tmp/w-cpu" 0.03 0.02 "gpu vs cpu flash/fused/none (head dim 64, GQA)"
for c in none selective full; do
	run "$tmp/w-cudnn-$c" cuda cudnn fused "$c"
	compare "$tmp/w-cudnn-$c" "$tmp/w-gpu" 0.02 0.02 "gpu cudnn/fused/$c vs gpu flash/fused/none (head dim 64, GQA)"
done
compare "$tmp/w-cudnn-none" "$tmp/w-cpu" 0.03 0.02 "gpu cudnn/fused/none vs cpu flash/fused/none (head dim 64, GQA)"
extra=
"$TRAIN" $tiny --attention cudnn --run-dir "$tmp/cpu-cudnn" >/dev/null 2>"$tmp/cpu-cudnn.err"
rc=$?
{ [ "$rc" = 2 ] && grep -q "add --device cuda, or use --attention flash" "$tmp/cpu-cudnn.err"; } ||
	{ echo "FAIL: --attention cudnn on the CPU: exit $rc, want 2 and the fix"; cat "$tmp/cpu-cudnn.err"; fail=1; }

# the header names the GPU and its peak; every step has a peak memory
head -n 1 "$tmp"/gpu/run-*.jsonl | grep -q '"backend":"cuda"' || { echo "FAIL: backend"; fail=1; }
head -n 1 "$tmp"/gpu/run-*.jsonl | grep -q '"device":{"name":"[^"]' || { echo "FAIL: device"; fail=1; }
grep '"type":"step"' "$tmp"/gpu/run-*.jsonl | grep -q '"peak_mem_bytes":0,' &&
	{ echo "FAIL: a step without a peak"; fail=1; }

# a forced out-of-memory: exit 3 and a complete log
"$TRAIN" $tiny --device cuda --mem-limit 1M --run-dir "$tmp/oom" >/dev/null 2>"$tmp/oom.err"
rc=$?
[ "$rc" = 3 ] || { echo "FAIL: oom: exit $rc, want 3"; cat "$tmp/oom.err"; fail=1; }
tail -n 1 "$tmp"/oom/run-*.jsonl | grep -q '"status":"failed","class":"oom".*"exit_code":3' ||
	{ echo "FAIL: oom: end record"; tail -n 1 "$tmp"/oom/run-*.jsonl; fail=1; }

[ "$fail" = 0 ] && echo "ok: the GPU trainer follows the CPU reference"
exit "$fail"
