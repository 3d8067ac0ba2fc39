#!/bin/sh
# End-to-end test of the report's phases figure: two two-rank CPU runs of the trainer
# (TP 2; PP 2), collected into a temporary database; `report --figure phases` must show
# one row per run with a step time, every phase (exposed communication and pipeline
# bubble included; the bubble positive with PP 2, zero with PP 1), the peaks of both
# ranks and the run's health (ok: the tiny model's loss falls), in CSV (the documented
# header), markdown and HTML.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
TRAIN="$BUILD/layoutbench-train"

[ -x "$LB" ] && [ -x "$TRAIN" ] || { echo "error: '$LB' or '$TRAIN' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
db="$tmp/r.db"
HEADER='group,label,micro_batch,tp,pp,dp,sequence_parallel,step_time_s,forward_s,backward_s,optimizer_s,comm_exposed_s,bubble_s,peak_mem_mib,rank_peak_mem_min_mib,rank_peak_mem_max_mib,ranks,checkpointing,model,seq_len,gpus,run_id,step_time_sd_s,steps,health'

for layout in "--tp 2 --pp 1" "--tp 1 --pp 2"; do
	# shellcheck disable=SC2086
	LAYOUTBENCH_SWEEP=phases-sweep "$TRAIN" --model tiny --seq-len 32 --global-batch 8 $layout \
		--dp 1 --gpus-per-node 2 --nproc-per-node 2 --steps 4 --warmup 1 \
		--run-dir "$tmp/runs" >"$tmp/train.out" 2>&1 ||
		{ cat "$tmp/train.out"; echo "FAIL: trainer $layout"; fail=1; }
done
"$LB" collect --db "$db" "$tmp/runs" >"$tmp/collect.out" 2>&1 ||
	{ cat "$tmp/collect.out"; echo "FAIL: collect"; exit 1; }

# CSV: the header, then one row per run (TP 2 first: run_id order)
"$LB" report --db "$db" --figure phases --format csv >"$tmp/p.csv" ||
	{ echo "FAIL: report --figure phases"; fail=1; }
[ "$(head -n 1 "$tmp/p.csv")" = "$HEADER" ] || { echo "FAIL: phases csv header"; fail=1; }
[ "$(wc -l <"$tmp/p.csv")" = 3 ] || { cat "$tmp/p.csv"; echo "FAIL: expected 2 rows"; fail=1; }
tail -n +2 "$tmp/p.csv" | awk -F, '
	$1 != "phases-sweep" { print "FAIL: group " $1; bad = 1 }
	{ for (i = 8; i <= 16; i++) if ($i == "") { print "FAIL: row " NR ": column " i " empty"; bad = 1 } }
	$17 != 2 { print "FAIL: row " NR ": " $17 " rank peaks, expected 2"; bad = 1 }
	$15 + 0 > $16 + 0 || $16 + 0 > $14 + 0.0005 { print "FAIL: row " NR ": rank peaks outside the peak"; bad = 1 }
	$12 + 0 <= 0 { print "FAIL: row " NR ": no exposed communication with two ranks"; bad = 1 }
	$5 == 2 && $13 + 0 <= 0 { print "FAIL: PP 2 without a pipeline bubble"; bad = 1 }
	$5 == 1 && $13 + 0 != 0 { print "FAIL: PP 1 with a pipeline bubble"; bad = 1 }
	$4 * $5 != 2 { print "FAIL: row " NR ": layout " $4 "x" $5; bad = 1 }
	$18 != "none" || $19 != "tiny" || $20 != 32 || $21 != 2 { print "FAIL: row " NR ": group fields " $18 "," $19 "," $20 "," $21; bad = 1 }
	$22 != NR { print "FAIL: row " NR ": run id " $22; bad = 1 }
	$23 == "" || $24 != 3 { print "FAIL: row " NR ": step sd " $23 " over " $24 " steps"; bad = 1 }
	$25 != "ok" { print "FAIL: row " NR ": health " $25 ", the loss falls"; bad = 1 }
	END { exit bad }' || { cat "$tmp/p.csv"; fail=1; }

# markdown: a table under the sweep, every cell filled, both ranks counted
"$LB" report --db "$db" --figure phases >"$tmp/p.md" || fail=1
grep -q '^### tiny, seq 32, 2 GPUs (sweep phases-sweep)$' "$tmp/p.md" || { echo "FAIL: md group"; fail=1; }
grep -q '^| run | label | mbs | TP | PP | DP | SP | ckpt | step s | step sd | forward s | backward s | optimizer s | exposed comm s | bubble s | peak MiB | rank peaks | health |$' "$tmp/p.md" ||
	{ echo "FAIL: md header"; fail=1; }
[ "$(grep -c 'MiB over 2 ranks | ok |$' "$tmp/p.md")" = 2 ] || { cat "$tmp/p.md"; echo "FAIL: md rank peaks"; fail=1; }
grep '^| flash' "$tmp/p.md" | grep -q ' - ' && { cat "$tmp/p.md"; echo "FAIL: md has empty cells"; fail=1; }

# --figure all includes it; HTML has its table, and a stacked bar plot where gnuplot is
"$LB" report --db "$db" --figure all >"$tmp/all.md" || fail=1
grep -q '^## Step phases and peak memory per rank (phases)$' "$tmp/all.md" ||
	{ echo "FAIL: all lacks phases"; fail=1; }
LB_GNUPLOT=/nonexistent/gnuplot "$LB" report --db "$db" --figure phases --format html \
	>"$tmp/p.html" 2>/dev/null || { echo "FAIL: html"; fail=1; }
grep -q '<th>rank peaks</th>' "$tmp/p.html" || { echo "FAIL: html table"; fail=1; }
grep -q 'No plot: gnuplot not found' "$tmp/p.html" || { echo "FAIL: html without gnuplot"; fail=1; }
if command -v "${LB_GNUPLOT:-gnuplot}" >/dev/null 2>&1; then
	"$LB" report --db "$db" --figure phases --format html >"$tmp/g.html" 2>"$tmp/g.err" ||
		{ cat "$tmp/g.err"; echo "FAIL: html with gnuplot"; fail=1; }
	[ "$(grep -c '<svg' "$tmp/g.html")" = 1 ] || { echo "FAIL: html phases plot"; fail=1; }
	grep -q 'pipeline bubble' "$tmp/g.html" || { echo "FAIL: plot key"; fail=1; }
fi

# a sweep without runs: the header alone
"$LB" sql --db "$db" --write "INSERT INTO sweeps (name, source) VALUES ('empty', 'adhoc')" \
	>/dev/null || fail=1
"$LB" report --db "$db" --sweep empty --figure phases --format csv >"$tmp/n.csv" || fail=1
[ "$(cat "$tmp/n.csv")" = "$HEADER" ] || { echo "FAIL: --sweep empty"; fail=1; }

[ $fail = 0 ] && echo "report_phases: all checks passed"
exit $fail
