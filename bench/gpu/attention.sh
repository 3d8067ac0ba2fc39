#!/bin/sh
# One call on a GPU machine: the attention kernels side by side. Checks the GPU ops against
# the fp64 reference first (test_gpu_ops, cuDNN's attention included), then times the
# attention kernels alone (bench_kernels --only attn: forward, backward and both together,
# B 1, 40 heads of 128, causal, seq 2048 and 8192) and the trainer end to end with our flash
# kernel and with cuDNN's (Llama-13B width, 8 layers: seq 2048 micro-batch 1 global batch 16,
# seq 8192 micro-batch 1 global batch 4). Beside them, in the same call, PyTorch's own
# attention kernels at the same shapes (bench/gpu/attn_peer.py: SDPA with its cuDNN and its
# FlashAttention-2 backend), when python3 has torch. LB_ALT_CUDNN=DIR times the cudnn rows
# once more with the libcudnn.so.9 in DIR (another cuDNN release, e.g. the one PyTorch
# bundles); LB_ATTN_QUICK=1 leaves out test_gpu_ops and the trainer runs (bench_kernels checks
# each kernel against the fp64 reference before timing it). Full logs under $OUT (or
# $BUILD/attention); a short table last. Exit 0 when every part passed.
set -u
BUILD=${BUILD:-build}
OUTD=${OUT:-$BUILD/attention}
. "$(dirname "$0")/env.sh"
mkdir -p "$OUTD" || exit 1
rows="$OUTD/table.tsv"
: >"$rows"
rc=0

quick=${LB_ATTN_QUICK:-0}
if [ "$quick" != 1 ]; then
	t0=$(date +%s)
	timeout 300 "$BUILD/tests/test_gpu_ops" >"$OUTD/test_gpu_ops.log" 2>&1
	st=$?
	[ "$st" = 0 ] || rc=1
	printf 'test_gpu_ops\t%s\texit %s: %s\n' "$(($(date +%s) - t0))" "$st" \
		"$(grep -E '^\[  (PASSED|FAILED)' "$OUTD/test_gpu_ops.log" | tr '\n' ' ')" >>"$rows"
	grep -i "cudnn" "$OUTD/test_gpu_ops.log" | grep -i "fail\|error" | head -n 5
fi

t0=$(date +%s)
timeout 300 "$BUILD/bench/bench_kernels" --only attn --csv "$OUTD/kernels.csv" \
	>"$OUTD/kernels.log" 2>&1 || rc=1
results() { # log, suffix: its RESULT lines as table rows
	grep '^RESULT' "$1" | sed 's/^RESULT\t//' | while IFS='	' read -r what v unit check; do
		printf '%s%s\t-\t%s %s %s\n' "$what" "$2" "$v" "$unit" "$check" >>"$rows"
	done
}
results "$OUTD/kernels.log" ""
if [ -n "${LB_ALT_CUDNN:-}" ]; then
	if [ -f "$LB_ALT_CUDNN/libcudnn.so.9" ]; then
		LD_LIBRARY_PATH="$LB_ALT_CUDNN:${LD_LIBRARY_PATH:-}" timeout 300 \
			"$BUILD/bench/bench_kernels" --only attn.cudnn --csv "$OUTD/kernels-alt.csv" \
			>"$OUTD/kernels-alt.log" 2>&1 || rc=1
		results "$OUTD/kernels-alt.log" " (cuDNN of LB_ALT_CUDNN)"
	else
		echo "LB_ALT_CUDNN: no libcudnn.so.9 in '$LB_ALT_CUDNN'" >&2
		rc=1
	fi
fi
if python3 -c 'import torch' 2>/dev/null; then
	timeout 300 python3 "$(dirname "$0")/attn_peer.py" >"$OUTD/peer.log" 2>&1 || rc=1
	results "$OUTD/peer.log" ""
else
	printf 'torch sdpa\t-\tskip: python3 has no torch\n' >>"$rows"
fi

mfu() { # run dir -> MFU line
	awk '
	function num(key,   r) { if (match($0, "\"" key "\":[-0-9.eE+]+")) {
		r = substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3); return r + 0 }
		return -1 }
	/"type":"header"/ { flops = num("flops_per_step"); peak = num("peak_tflops") }
	/"type":"step"/ { l[++n] = num("loss") }
	/"type":"step"/ && /"warmup":false/ { s += num("time_s"); c++ }
	END { if (c) printf "%.1f%% MFU (%.3f s/step over %d steps; loss %.4f -> %.4f)",
		100 * flops / (s / c) / (peak * 1e12), s / c, c, l[1], l[n] }' "$1"/run-*.jsonl 2>/dev/null
}
if [ "$quick" = 1 ]; then
	set --
else
	set -- "2048 16 flash" "2048 16 cudnn" "8192 4 flash" "8192 4 cudnn"
fi
for set in "$@"; do
	set -- $set
	d="$OUTD/s$1-$3"
	t0=$(date +%s)
	timeout 300 "$BUILD/layoutbench-train" --model llama-13b --layers 8 --vocab 32000 \
		--seq-len "$1" --global-batch "$2" --micro-batch 1 --attention "$3" --norm fused \
		--lr 1e-4 --steps 8 --warmup 3 --device cuda --quiet --run-dir "$d" >"$d.log" 2>&1
	st=$?
	m=$(mfu "$d")
	{ [ "$st" = 0 ] && [ -n "$m" ]; } || { rc=1; tail -n 3 "$d.log"; }
	printf 'train seq %s mb 1 gbs %s %s/fused\t%s\t%s (exit %s)\n' "$1" "$2" "$3" \
		"$(($(date +%s) - t0))" "${m:-FAIL}" "$st" >>"$rows"
done

echo
printf '%-58s %5s  %s\n' part s result
awk -F '\t' '{ printf "%-58s %5s  %s\n", $1, $2, $3 }' "$rows"
exit "$rc"
