#!/bin/sh
# The shipped paper specs sweep the paper's grids: for each spec and its sheet in the
# paper's data, the distinct GPU counts, micro-batch sizes, TP, PP, checkpointing modes,
# kernels (labels) and sequence-parallel settings of the plan equal those of the sheet.
# Skips when the paper's data is absent (LB_PAPER_DATA, default ../shared/paper-data).
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
data=${LB_PAPER_DATA:-../shared/paper-data}
if [ ! -d "$data" ]; then
	echo "the paper's data is not at '$data' (set LB_PAPER_DATA)"
	exit 77
fi
if [ ! -x "$LB" ]; then
	echo "plan_paper_grids: $LB is not built (make BUILD=$BUILD all)"
	exit 1
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
# distinct values of one column: plan CSV (after the header) or paper sheet (after 2 lines)
plan_set() { # file column
	awk -F, -v c="$2" 'NR > 1 { n = split($c, v, "|"); for (i = 1; i <= n; i++) print v[i] }' "$1" |
		sed -e 's/^none$/disabled/' -e 's/^full$/every_layer/' | sort -u | tr '\n' ' '
}
paper_set() { # file column
	tr -d '\r' <"$1" | awk -F, -v c="$2" 'NR > 2 { print $c }' | sort -u | tr '\n' ' '
}
while read -r spec sheet; do
	[ -n "$spec" ] || continue
	if ! "$LB" plan "sweeps/specs/$spec.json" --format csv >"$tmp/$spec.csv" 2>/dev/null; then
		echo "FAIL: plan $spec"
		fail=1
		continue
	fi
	# plan columns: gpus 5, micro_batch 6, tp 7, pp 8, sequence_parallel 10,
	# checkpointing 12, label 17; sheet: World Size 2, checkpointing 8, kernel 9,
	# micro_batch_size 10, model_parallel_size 11, pipe_parallel_size 12, sequence_parallel 13
	for pair in "gpus 5 2" "micro_batch 6 10" "tp 7 11" "pp 8 12" "checkpointing 12 8" \
		"kernel 17 9" "sequence_parallel 10 13"; do
		set -- $pair
		case "$sheet" in *sequence_parallelism*) ;; *) [ "$1" = sequence_parallel ] && continue ;; esac
		got=$(plan_set "$tmp/$spec.csv" "$2")
		want=$(paper_set "$data/$sheet" "$3")
		if [ "$got" != "$want" ]; then
			echo "FAIL: $spec: $1 values [$got] but $sheet has [$want]"
			fail=1
		fi
	done
	echo "$spec: the grid matches $sheet"
done <<'LIST'
paper-13b-2k llama_13B_bfloat16_64_GPUs_all_runs.csv
paper-13b-8k llama_13B_bfloat16_8k_seq_length_128_GPUs_all_runs.csv
paper-30b-2k llama_30B_bfloat16_256_GPUs_all_runs.csv
paper-30b-8k llama_30B_8k_seq_length_bfloat16_128_GPUs_all_runs.csv
paper-13b-2k-sp llama_13B_bfloat16_32_GPUs_sequence_parallelism.csv
paper-13b-8k-sp llama_13B_bfloat16_8k_seq_length_64_GPUs_sequence_parallelism.csv
paper-30b-2k-sp llama_30B_bfloat16_64_GPUs_sequence_parallelism.csv
paper-30b-8k-sp llama_30B_8k_seq_length_bfloat16_64_GPUs_sequence_parallelism.csv
LIST
exit $fail
