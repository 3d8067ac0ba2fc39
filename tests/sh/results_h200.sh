#!/bin/sh
# The published H200 results never drift from the code that reads them: the run logs in
# docs/results/h200/runs are collected into a fresh database and the report regenerated
# from them must equal docs/results/h200/report.md, the tables of the published page
# docs/results/h200/report/report.html must equal those of a fresh page (the plots, drawn
# by whatever gnuplot is installed, are left out of the comparison), and the headline numbers quoted in
# docs/results/h200/README.md and docs/performance.md must come out of the views; likewise
# the runs of cuDNN's attention in docs/results/h200/cudnn and the MFU its README quotes.
# Regenerate after a deliberate change with LB_UPDATE_GOLDEN=1 (then read the diff).
set -u
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
D=docs/results/h200
[ -x "$LB" ] || { echo "no $LB (make BUILD=$BUILD first)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$LB" collect --db "$tmp/r.db" "$D/runs" >"$tmp/collect.out" 2>&1 ||
	{ cat "$tmp/collect.out"; echo "FAIL: collect"; exit 1; }
grep -q "9 new runs.*0 warnings, 0 errors" "$tmp/collect.out" ||
	{ cat "$tmp/collect.out"; echo "FAIL: collect did not take all 9 runs cleanly"; fail=1; }
"$LB" report --db "$tmp/r.db" --sweep h200-1gpu --figure all --format md >"$tmp/report.md" ||
	{ echo "FAIL: report"; exit 1; }
if [ "${LB_UPDATE_GOLDEN:-0}" = 1 ]; then
	cp "$tmp/report.md" "$D/report.md"
	echo "updated $D/report.md"
	"$LB" report --db "$tmp/r.db" --sweep h200-1gpu --figure all --format html --out "$D/report" ||
		{ echo "FAIL: report --format html"; exit 1; }
elif ! diff -u "$D/report.md" "$tmp/report.md"; then
	echo "FAIL: the report from the published runs differs from $D/report.md"
	fail=1
fi
# the page without its plots: each <div class="plot"> ... </div> dropped
tables() { awk '/^<div class="plot">$/ { skip = 1; next } skip && /^<\/div>$/ { skip = 0; next } !skip' "$1"; }
LB_GNUPLOT=/nonexistent "$LB" report --db "$tmp/r.db" --sweep h200-1gpu --figure all --format html \
	>"$tmp/report.html" 2>/dev/null || { echo "FAIL: report --format html"; fail=1; }
grep -q '<svg' "$D/report/report.html" || { echo "FAIL: $D/report/report.html has no plots"; fail=1; }
tables "$D/report/report.html" >"$tmp/published.tables"
tables "$tmp/report.html" >"$tmp/fresh.tables"
if ! diff -u "$tmp/published.tables" "$tmp/fresh.tables"; then
	echo "FAIL: the tables of $D/report/report.html differ from the runs' (LB_UPDATE_GOLDEN=1 regenerates it)"
	fail=1
fi
# the quoted figures: MFU % by layout (seq, micro-batch, checkpointing, attention, norm)
q() {
	"$LB" sql --db "$tmp/r.db" --format tsv "SELECT printf('%.1f', 100 * max(mfu)) FROM run_summary
		WHERE sweep = 'h200-1gpu' AND seq_len = $1 AND micro_batch = $2 AND
		checkpointing = '$3' AND attention = '$4' AND norm = '$5'" | tail -n 1
}
want() { # value seq mbs ckpt attn norm
	got=$(q "$2" "$3" "$4" "$5" "$6")
	[ "$got" = "$1" ] || { echo "FAIL: MFU of $2/$3/$4/$5/$6 is $got, the docs say $1"; fail=1; }
}
want 59.0 2048 1 none flash fused
want 60.5 2048 4 none flash fused
want 59.6 2048 2 none flash fused
want 54.0 8192 1 none flash fused
want 57.0 2048 1 none flash unfused
want 56.8 2048 1 none fused_softmax unfused
want 54.4 2048 1 none naive unfused
want 45.6 2048 1 full flash fused
# cuDNN's attention (docs/results/h200/cudnn): its runs, and the MFU its README quotes
"$LB" collect --db "$tmp/c.db" "$D/cudnn/runs" >"$tmp/collect-c.out" 2>&1 ||
	{ cat "$tmp/collect-c.out"; echo "FAIL: collect cudnn"; exit 1; }
grep -q "13 new runs.*0 warnings, 0 errors" "$tmp/collect-c.out" ||
	{ cat "$tmp/collect-c.out"; echo "FAIL: collect did not take all 13 cudnn runs cleanly"; fail=1; }
wantc() { # value seq mbs ckpt norm
	got=$("$LB" sql --db "$tmp/c.db" --format tsv "SELECT printf('%.1f', 100 * max(mfu))
		FROM run_summary WHERE attention = 'cudnn' AND seq_len = $2 AND micro_batch = $3 AND
		checkpointing = '$4' AND norm = '$5'" | tail -n 1)
	[ "$got" = "$1" ] || { echo "FAIL: MFU of cudnn $2/$3/$4/$5 is $got, the docs say $1"; fail=1; }
}
wantc 63.9 2048 1 none fused
wantc 63.0 2048 1 selective fused
wantc 49.1 2048 1 full fused
wantc 61.4 2048 1 none unfused
wantc 65.0 2048 2 none fused
wantc 64.0 2048 2 selective fused
wantc 66.3 2048 4 none fused
wantc 66.9 2048 8 none fused
wantc 68.9 8192 1 none fused
wantc 66.3 8192 1 selective fused
wantc 53.1 8192 1 full fused
wantc 67.5 8192 1 none unfused
wantc 68.9 8192 2 none fused
[ "$fail" = 0 ] && echo "ok: the published H200 results reproduce"
exit "$fail"
