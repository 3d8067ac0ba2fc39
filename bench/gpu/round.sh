#!/bin/sh
# make bench-gpu: the trainer's speed on this machine's GPU, with the PyTorch peer run in
# the same call, side by side. Prints one table last:
#   setting (seq, global batch, micro-batch), kernels, checkpointing, step time (mean and
#   standard deviation over the timed steps), tokens/s, MFU and HFU (the paper's
#   definitions: PaLM FLOPs, 6N + 12*L*h*s per token, dense bf16 peak from the header),
#   peak memory
# for Llama-13B width (hidden 5120, 40 heads, FFN 13824) cut to 8 layers, vocabulary
# 32000. The kernel table (bench_kernels) runs first unless LB_BENCH_KERNELS=0.
# The trainer's losses are checked (finite, falling) before its times count: a run that
# fails or diverges prints FAIL and the script exits non-zero.
#
# Env: BUILD (build folder), LB_BENCH_OUT (logs; default $BUILD/bench-gpu),
#   LB_BENCH_SET: main (default: flash/fused at the four settings, plus full checkpointing
#     at seq 2048 micro-batch 1, and cuDNN's attention (cudnn/fused) at seq 2048 micro-batch
#     1 and 2 and seq 8192) | kernels (every attention x norm at seq 2048
#     micro-batch 1) | all (both),
#   LB_BENCH_STEPS (default 8), LB_BENCH_WARMUP (default 3), LB_BENCH_LR (default 1e-4),
#   LB_BENCH_PEER: 1 (default) runs bench/peer_torch.py eager and compiled at seq 2048
#     micro-batch 1 and seq 8192 micro-batch 1 when python3 has torch; 0 skips it.
set -u
BUILD=${BUILD:-build}
OUTD=${LB_BENCH_OUT:-$BUILD/bench-gpu}
TRAIN="$BUILD/layoutbench-train"
STEPS=${LB_BENCH_STEPS:-8}
WARMUP=${LB_BENCH_WARMUP:-3}
SET=${LB_BENCH_SET:-main}
# a learning rate this width trains at (the trainer's default 0.003 diverges here on
# random tokens, and the losses must fall for a run to count)
LR=${LB_BENCH_LR:-1e-4}
. "$(dirname "$0")/env.sh"
mkdir -p "$OUTD" || exit 1
rows="$OUTD/rows.tsv"
: >"$rows"
rc=0
model="--model llama-13b --layers 8 --vocab 32000"

if [ "${LB_BENCH_KERNELS:-1}" = 1 ] && [ -x "$BUILD/bench/bench_kernels" ]; then
	"$BUILD/bench/bench_kernels" --csv "$OUTD/kernels.csv" >"$OUTD/kernels.log" 2>&1 || rc=1
	cat "$OUTD/kernels.log"
fi

# one trainer run -> one row: name seq gbs mbs attn norm ckpt
one() {
	name=$1 seq=$2 gbs=$3 mbs=$4 attn=$5 norm=$6 ckpt=$7
	dir="$OUTD/$name"
	rm -rf "$dir"
	"$TRAIN" $model --seq-len "$seq" --global-batch "$gbs" --micro-batch "$mbs" \
		--attention "$attn" --norm "$norm" --checkpointing "$ckpt" --steps "$STEPS" --lr "$LR" \
		--warmup "$WARMUP" --device cuda --quiet --run-dir "$dir" >"$dir.log" 2>&1
	st=$?
	log=$(ls "$dir"/run-*.jsonl 2>/dev/null | head -n 1)
	if [ -z "$log" ]; then
		printf '%s\t%s\t%s\t%s\t%s/%s\t%s\tFAIL(exit %s, no log)\n' "$name" "$seq" "$gbs" \
			"$mbs" "$attn" "$norm" "$ckpt" "$st" >>"$rows"
		rc=1
		return
	fi
	awk -v name="$name" -v seq="$seq" -v gbs="$gbs" -v mbs="$mbs" -v k="$attn/$norm" \
		-v ck="$ckpt" -v st="$st" '
		function num(key,   r) { if (match($0, "\"" key "\":[-0-9.eE+]+")) {
			r = substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3); return r + 0 }
			return -1 }
		/"type":"header"/ { flops = num("flops_per_step"); hw = num("hw_flops_per_step");
			peak = num("peak_tflops") }
		/"type":"step"/ { loss[++n] = num("loss"); mem = num("peak_mem_bytes")
			if ($0 ~ /"warmup":false/) { t = num("time_s"); s += t; ss += t * t; c++ }
			tok = num("tokens") }
		/"type":"end"/ { cls = $0; sub(/.*"status":"/, "", cls); sub(/".*/, "", cls) }
		END {
			ok = (st == 0 && cls == "ok" && c > 0 && loss[n] == loss[n] && loss[n] < loss[1])
			if (!ok) { printf "%s\t%s\t%s\t%s\t%s\t%s\tFAIL(exit %s, %s)\n", name, seq, gbs,
				mbs, k, ck, st, cls; exit 1 }
			m = s / c; sd = (c > 1) ? sqrt((ss - c * m * m) / (c - 1)) : 0; if (sd != sd) sd = 0
			printf "%s\t%s\t%s\t%s\t%s\t%s\t%.3f\t%.3f\t%.0f\t%.1f\t%.1f\t%.1f\t%.4f->%.4f\n",
				name, seq, gbs, mbs, k, ck, m, sd, tok / m, 100 * flops / m / (peak * 1e12),
				100 * hw / m / (peak * 1e12), mem / 1073741824, loss[1], loss[n] }' \
		"$log" >>"$rows" || rc=1
}

case "$SET" in
main | all)
	one s2k-mb1 2048 16 1 flash fused none
	one s2k-mb2 2048 16 2 flash fused none
	one s2k-mb4 2048 16 4 flash fused none
	one s8k-mb1 8192 4 1 flash fused none
	one s2k-mb1-full 2048 16 1 flash fused full
	one s2k-mb1-cudnn 2048 16 1 cudnn fused none
	one s2k-mb2-cudnn 2048 16 2 cudnn fused none
	one s8k-mb1-cudnn 8192 4 1 cudnn fused none
	;;
esac
case "$SET" in
kernels | all)
	for a in naive fused_softmax flash cudnn; do
		for n in unfused fused; do
			[ "$SET" = all ] && [ "$a/$n" = flash/fused ] && continue
			one "s2k-mb1-$a-$n" 2048 16 1 "$a" "$n" none
		done
	done
	;;
esac

# the peer, in the same call
peer="$OUTD/peer.tsv"
: >"$peer"
if [ "${LB_BENCH_PEER:-1}" = 1 ] && python3 -c 'import torch' 2>/dev/null; then
	for mode in eager compile; do
		for set in "2048 16 1" "8192 4 1"; do
			set -- $set
			python3 bench/peer_torch.py --mode "$mode" --seq-len "$1" --global-batch "$2" \
				--micro-batch "$3" --steps "$STEPS" --warmup "$WARMUP" \
				>"$OUTD/peer-$mode-$1.log" 2>&1
			line=$(grep '^peer=' "$OUTD/peer-$mode-$1.log" | tail -n 1)
			printf 'torch-%s\t%s\t%s\t%s\t%s\n' "$mode" "$1" "$2" "$3" "$line" >>"$peer"
		done
	done
fi

echo
printf '| %-22s | %5s | %3s | %3s | %-20s | %-9s | %7s | %6s | %8s | %5s | %5s | %7s |\n' \
	run seq gbs mbs kernels ckpt "step s" "std s" "tok/s" "MFU%" "HFU%" "mem GiB"
printf '|%s|\n' "------------------------|-------|-----|-----|----------------------|-----------|---------|--------|----------|-------|-------|---------"
while IFS='	' read -r n s g m k c t sd tok mfu hfu mem loss; do
	case "$t" in FAIL*) printf '| %-22s | %5s | %3s | %3s | %-20s | %-9s | %s |\n' "$n" "$s" \
		"$g" "$m" "$k" "$c" "$t"; continue ;; esac
	printf '| %-22s | %5s | %3s | %3s | %-20s | %-9s | %7s | %6s | %8s | %5s | %5s | %7s |\n' \
		"$n" "$s" "$g" "$m" "$k" "$c" "$t" "$sd" "$tok" "$mfu" "$hfu" "$mem"
done <"$rows"
while IFS='	' read -r n s g m line; do
	step=$(echo "$line" | sed -n 's/.*step_s=\([^ ]*\).*/\1/p')
	sd=$(echo "$line" | sed -n 's/.*std_s=\([^ ]*\).*/\1/p')
	tok=$(echo "$line" | sed -n 's/.*tokens_per_s=\([^ ]*\).*/\1/p')
	mfu=$(echo "$line" | sed -n 's/.*mfu=\([^ ]*\).*/\1/p')
	mem=$(echo "$line" | sed -n 's/.*peak_mem_gib=\([^ ]*\).*/\1/p')
	mfu=$(awk -v x="${mfu:-nan}" 'BEGIN { if (x == "nan" || x == "") print "-"; else printf "%.1f", 100 * x }')
	printf '| %-22s | %5s | %3s | %3s | %-20s | %-9s | %7s | %6s | %8s | %5s | %5s | %7s |\n' \
		"$n" "$s" "$g" "$m" "sdpa/torch" none "${step:--}" "${sd:--}" "${tok:--}" "$mfu" - \
		"${mem:--}"
done <"$peer"
exit "$rc"
