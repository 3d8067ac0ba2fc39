#!/bin/sh
# Golden test of `layoutbench report` on the paper's published runs: imports all eight
# sheets (../shared/paper-data, or $LB_PAPER_DATA) into a temporary database, renders every
# figure as CSV and markdown and compares each with tests/golden/report/, checks values read
# off the sheets by hand, and checks the HTML page's structure (one <svg> per figure but phases, every
# bar's value present, no external assets). Regenerate the golden files after an intended
# change with: LB_UPDATE_GOLDEN=1 sh tests/sh/report_paper.sh (then review the diff).
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
DATA=${LB_PAPER_DATA:-../shared/paper-data}
GOLDEN=tests/golden/report
FIGURES="kernels checkpointing microbatch tp-pp seqpar rms best"
HEADER='group,series,mfu,micro_batch,tp,pp,checkpointing,dp,sequence_parallel,model,seq_len,gpus,tflops_per_gpu,mfu_sd,step_time_s,step_time_sd_s,steps,mfu_no_embed,health'

[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
if ! ls "$DATA"/*.csv >/dev/null 2>&1; then
	echo "paper data not found in '$DATA' (set LB_PAPER_DATA)"
	exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
db="$tmp/paper.db"

if ! "$LB" import --format paper --db "$db" "$DATA"/*.csv >"$tmp/import.out" 2>&1; then
	cat "$tmp/import.out"
	echo "error: import of the paper data failed"
	exit 1
fi

. tests/sh/lib/golden.sh
check_golden() { golden "$GOLDEN/$1" "$2" "$1"; } # name file

for fig in $FIGURES; do
	if ! "$LB" report --db "$db" --figure "$fig" --format csv >"$tmp/$fig.csv"; then
		echo "FAIL: report --figure $fig --format csv exited non-zero"
		fail=1
		continue
	fi
	[ "$(head -n 1 "$tmp/$fig.csv")" = "$HEADER" ] ||
		{ echo "FAIL: $fig.csv header"; fail=1; }
	[ "$(wc -l <"$tmp/$fig.csv")" -gt 1 ] || { echo "FAIL: $fig.csv has no rows"; fail=1; }
	check_golden "$fig.csv" "$tmp/$fig.csv"
done
# phases: imported runs have no phase times, so the figure is its header alone
PHASES_HEADER='group,label,micro_batch,tp,pp,dp,sequence_parallel,step_time_s,forward_s,backward_s,optimizer_s,comm_exposed_s,bubble_s,peak_mem_mib,rank_peak_mem_min_mib,rank_peak_mem_max_mib,ranks,checkpointing,model,seq_len,gpus,run_id,step_time_sd_s,steps,health'
"$LB" report --db "$db" --figure phases --format csv >"$tmp/phases.csv" &&
	[ "$(cat "$tmp/phases.csv")" = "$PHASES_HEADER" ] ||
	{ echo "FAIL: phases.csv is not its header alone"; fail=1; }
"$LB" report --db "$db" --figure all --format md >"$tmp/all.md" || { echo "FAIL: md"; fail=1; }
check_golden all.md "$tmp/all.md"

# Values read off the sheets by hand (grep of the CSVs, Average MFU column): a row that
# starts with the given fields.
expect() { # figure fields description
	awk -v s="$2," 'index($0, s) == 1 { found = 1 } END { exit !found }' "$tmp/$1.csv" ||
		{ echo "FAIL: $1: expected a row '$2,...' ($3)"; fail=1; }
}
S13=llama_13B_bfloat16_64_GPUs_all_runs
S30=llama_30B_bfloat16_256_GPUs_all_runs
expect kernels "$S13,flash_attention2 + RMS kernel,70.57,1,1,1,none" "13B 64 GPUs best, 0.70573"
expect kernels "$S13,torch,37.89,1,2,2,none" "13B torch, trial 97685, 0.37889"
expect kernels "$S30,flash_attention,OOM,,,," "30B flash_attention: 3 runs, all OOM"
expect tp-pp "$S30,\"2,4\",49.22,1,2,4,none" "30B TP 2 PP 4, trial 132266, 0.49217"
expect tp-pp "$S30,\"1,1\",OOM,1,1,1,none" "30B TP 1 PP 1 at mbs 1 ran out of memory"
expect checkpointing "$S13,disabled,55.71,1,1,2,none" "best non-RMS kernel without ckpt: v1.0.8"
expect checkpointing "$S13,enabled,51.04,4,1,1,full" "best every_layer: trial 132394"
expect microbatch "$S13,8,43.26,8,2,1,full" "13B mbs 8 flash_attention2"
expect rms "$S13,no_rms_at_rms_layout,49.89,1,1,1,full" "flash_attention2 at (1,1,1)"
expect seqpar "llama_30B_8k_seq_length_bfloat16_64_GPUs_sequence_parallelism,on,60.22,1,4,2,none" \
	"30B 8k with sequence parallelism"
expect best "llama-13b/2048/64,flash_attention2 + RMS kernel,70.57,1,1,1,none" "70.5% MFU for 13B"
# DP and sequence parallelism, model, sequence length and GPUs of the group, the paper's
# TFLOP/s and step time; no spread (the sheets give one mean step time per run)
expect seqpar "llama_30B_8k_seq_length_bfloat16_64_GPUs_sequence_parallelism,on,60.22,1,4,2,none,8,1,llama-30b,8192,64" \
	"30B 8k: DP 64 / (4 x 2) = 8, sequence parallel"
expect best "llama-13b/2048/64,flash_attention2 + RMS kernel,70.57,1,1,1,none,64,0,llama-13b,2048,64,219.84,,26.5395," \
	"the winner's DP, its step time, no spread for an imported run"

# --figure all --format csv --out DIR: one file per figure, equal to the single-figure output.
"$LB" report --db "$db" --figure all --format csv --out "$tmp/csvdir" 2>/dev/null ||
	{ echo "FAIL: csv --out"; fail=1; }
for fig in $FIGURES phases; do
	cmp -s "$tmp/csvdir/$fig.csv" "$tmp/$fig.csv" || { echo "FAIL: csvdir/$fig.csv differs"; fail=1; }
done

# HTML: structure, not bytes.
if command -v "${LB_GNUPLOT:-gnuplot}" >/dev/null 2>&1; then
	"$LB" report --db "$db" --figure all --format html --out "$tmp/html" 2>"$tmp/html.err" ||
		{ cat "$tmp/html.err"; echo "FAIL: html"; fail=1; }
	page="$tmp/html/report.html"
	n=$(grep -o '<svg' "$page" | wc -l)
	# one plot per figure but phases and memory (imported runs have neither phases nor a
	# model figure: both say "No runs")
	[ "$n" = 7 ] || { echo "FAIL: html has $n <svg> elements, expected 7 (one per figure)"; fail=1; }
	[ "$(grep -c '<h2>' "$page")" = 9 ] || { echo "FAIL: html headings"; fail=1; }
	grep -q '<h2>Figure 4: tensor vs pipeline parallelism</h2>' "$page" ||
		{ echo "FAIL: html lacks the paper's figure names"; fail=1; }
	grep -qiE '<(script|link|img)[ >]|src=|url\(' "$page" &&
		{ echo "FAIL: html refers to external assets"; fail=1; }
	grep -q '<?xml' "$page" && { echo "FAIL: html inlines an XML prologue"; fail=1; }
	for fig in $FIGURES; do
		tail -n +2 "$tmp/$fig.csv" | grep -oE ',[0-9]+\.[0-9]{2},' | tr -d , | sort -u |
			while read -r v; do
				grep -q ">$v<" "$page" || { echo "FAIL: html lacks $fig value $v"; exit 1; }
			done || fail=1
	done
	# the plot annotates bars with value and (mbs,TP,PP)
	grep -q '70.57 (1,1,1)' "$page" || { echo "FAIL: html plot lacks the bar label"; fail=1; }
else
	echo "note: gnuplot not installed; html plots not checked"
fi

# Without gnuplot: tables still written, the reason said clearly, exit 0.
LB_GNUPLOT=/nonexistent/gnuplot "$LB" report --db "$db" --figure kernels --format html \
	>"$tmp/nogp.html" 2>"$tmp/nogp.err" || { echo "FAIL: html without gnuplot"; fail=1; }
grep -q 'gnuplot not found' "$tmp/nogp.err" || { echo "FAIL: no gnuplot warning"; fail=1; }
grep -q '<svg' "$tmp/nogp.html" && { echo "FAIL: svg without gnuplot"; fail=1; }
grep -q '>70.57<' "$tmp/nogp.html" || { echo "FAIL: tables missing without gnuplot"; fail=1; }

[ $fail = 0 ] && echo "report_paper: all checks passed"
exit $fail
