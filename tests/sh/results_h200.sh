#!/bin/sh
# The published H200 results never drift from the code that reads them: the run logs in
# docs/results/h200/runs (the lr 3e-3 grid, diverged) and docs/results/h200/healthy/runs
# (its lr 1e-4 re-run) are collected into a fresh database and the reports regenerated
# from them must equal docs/results/h200/report.md (diverged runs left out) and
# report-all.md (kept and marked), the tables of the published page
# docs/results/h200/report/report.html must equal those of a fresh page (the plots, drawn
# by whatever gnuplot is installed, are left out of the comparison), and every MFU of the
# tables of docs/results/h200/README.md must come out of the views from a healthy run; likewise
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
. tests/sh/lib/golden.sh
"$LB" collect --db "$tmp/r.db" "$D/runs" "$D/healthy/runs" >"$tmp/collect.out" 2>&1 ||
	{ cat "$tmp/collect.out"; echo "FAIL: collect"; exit 1; }
grep -q "194 new runs.*0 warnings, 0 errors" "$tmp/collect.out" ||
	{ cat "$tmp/collect.out"; echo "FAIL: collect did not take all 194 runs cleanly"; fail=1; }
# the runs of cuDNN's attention, started by hand, are layouts of the same grid: those whose
# layout has no job-script run in runs/ would be filed under the grid (a job-script run of the
# layout supersedes them there); every one of them now has one
set --
for d in "$D"/cudnn/runs/*/; do
	[ -d "$D/runs/$(basename "$d")" ] || set -- "$@" "$d"
done
[ $# = 0 ] || { echo "FAIL: $# cudnn layouts without a job-script run, want 0"; fail=1; }
if [ $# -gt 0 ]; then
	"$LB" collect --db "$tmp/r.db" --sweep h200-1gpu "$@" >"$tmp/collect-c1.out" 2>&1 ||
		{ cat "$tmp/collect-c1.out"; echo "FAIL: collect cudnn into the grid"; exit 1; }
fi
# the grid first trained at lr 3e-3 and its loss rose: those 162 runs are diverged, which the
# report leaves out unless told to keep (and mark) them; the 32 layouts re-run at lr 1e-4 are
# ok. report.md is the default report (healthy runs), report-all.md keeps and marks the rest
h=$("$LB" sql --db "$tmp/r.db" --format tsv "SELECT group_concat(health || ' ' || n, ', ') FROM
	(SELECT health, count(*) AS n FROM run_summary WHERE sweep = 'h200-1gpu' GROUP BY health
	 ORDER BY health)" | tail -n 1)
[ "$h" = "diverged 162, ok 32" ] ||
	{ echo "FAIL: the grid's runs are '$h', want 'diverged 162, ok 32'"; fail=1; }
"$LB" report --db "$tmp/r.db" --sweep h200-1gpu --figure all --format md >"$tmp/report.md" ||
	{ echo "FAIL: report"; exit 1; }
grep -q '^162 diverged runs left out' "$tmp/report.md" ||
	{ echo "FAIL: the report does not say it left the 162 diverged runs out"; fail=1; }
golden "$D/report.md" "$tmp/report.md" "the report from the published runs"
"$LB" report --db "$tmp/r.db" --sweep h200-1gpu --keep-diverged --figure all --format md \
	>"$tmp/report-all.md" || { echo "FAIL: report --keep-diverged"; exit 1; }
golden "$D/report-all.md" "$tmp/report-all.md" "the report with the diverged runs kept and marked"
if [ "${LB_UPDATE_GOLDEN:-0}" = 1 ]; then
	"$LB" report --db "$tmp/r.db" --sweep h200-1gpu --figure all --format html \
		--out "$D/report" || { echo "FAIL: report --format html"; exit 1; }
fi
# the page without its plots: each <div class="plot"> ... </div> dropped
tables() { awk '/^<div class="plot">$/ { skip = 1; next } skip && /^<\/div>$/ { skip = 0; next } !skip' "$1"; }
LB_GNUPLOT=/nonexistent "$LB" report --db "$tmp/r.db" --sweep h200-1gpu --figure all \
	--format html >"$tmp/report.html" 2>/dev/null || { echo "FAIL: report --format html"; fail=1; }
grep -q '<svg' "$D/report/report.html" || { echo "FAIL: $D/report/report.html has no plots"; fail=1; }
tables "$D/report/report.html" >"$tmp/published.tables"
tables "$tmp/report.html" >"$tmp/fresh.tables"
if ! diff -u "$tmp/published.tables" "$tmp/fresh.tables"; then
	echo "FAIL: the tables of $D/report/report.html differ from the runs' (LB_UPDATE_GOLDEN=1 regenerates it)"
	fail=1
fi
# the tables of docs/results/h200/README.md: MFU % by the paper's count and without the input
# embedding, from the healthy run of each layout (health ok), by seq, micro-batch,
# checkpointing, attention, norm; each must also be shown in that README
q() {
	"$LB" sql --db "$tmp/r.db" --format tsv "SELECT printf('%.1f / %.1f', 100 * max(mfu),
		100 * max(mfu_no_embed)) FROM run_summary WHERE sweep = 'h200-1gpu' AND health = 'ok' AND
		seq_len = $1 AND micro_batch = $2 AND checkpointing = '$3' AND attention = '$4' AND
		norm = '$5'" | tail -n 1
}
want() { # mfu mfu_no_embed seq mbs ckpt attn norm
	got=$(q "$3" "$4" "$5" "$6" "$7")
	[ "$got" = "$1 / $2" ] || { echo "FAIL: MFU of $3/$4/$5/$6/$7 is $got, the docs say $1 / $2"; fail=1; }
	grep -qF "$1 / $2 (" "$D/README.md" || { echo "FAIL: $D/README.md does not show $1 / $2"; fail=1; }
}
while read -r v e s m c a n; do
	want "$v" "$e" "$s" "$m" "$c" "$a" "$n"
done <<EOF
49.1 46.4 2048 1 full cudnn fused
51.3 48.5 2048 8 full cudnn fused
63.6 60.2 2048 1 none cudnn fused
61.4 58.1 2048 1 none cudnn unfused
58.9 55.7 2048 1 none flash fused
56.9 53.8 2048 1 none flash unfused
58.2 55.0 2048 1 none fused_softmax fused
56.5 53.5 2048 1 none fused_softmax unfused
56.3 53.2 2048 1 none naive fused
54.5 51.6 2048 1 none naive unfused
65.1 61.6 2048 2 none cudnn fused
66.3 62.7 2048 4 none cudnn fused
66.6 63.0 2048 8 none cudnn fused
62.8 59.4 2048 1 selective cudnn fused
65.2 61.7 2048 4 selective cudnn fused
63.7 60.3 2048 4 selective cudnn unfused
65.7 62.2 2048 8 selective cudnn fused
64.5 61.0 2048 8 selective cudnn unfused
53.0 50.6 8192 1 full cudnn fused
54.1 51.6 8192 4 full cudnn fused
69.1 65.9 8192 1 none cudnn fused
67.6 64.4 8192 1 none cudnn unfused
53.6 51.1 8192 1 none flash fused
52.4 49.9 8192 1 none flash unfused
50.3 48.0 8192 1 none fused_softmax fused
49.7 47.4 8192 1 none fused_softmax unfused
45.6 43.5 8192 1 none naive fused
44.5 42.5 8192 1 none naive unfused
69.5 66.3 8192 2 none cudnn fused
70.5 67.2 8192 4 none cudnn fused
66.4 63.3 8192 1 selective cudnn fused
67.5 64.4 8192 4 selective cudnn fused
EOF
n=$("$LB" sql --db "$tmp/r.db" --format tsv "SELECT count(DISTINCT layout_id) || ' ' || count(*)
	FROM run_summary WHERE sweep = 'h200-1gpu' AND health = 'diverged'" | tail -n 1)
[ "$n" = "160 162" ] || { echo "FAIL: the lr 3e-3 grid has $n layouts and runs, the docs say 160 and 162"; fail=1; }
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
# the memory probe (docs/results/h200/memory): every layout of the grid run for 2 steps; its
# counted peak against the planner's model (the plan's figure less the 1 GiB it reserves
# for the CUDA runtime), and the planned OOMs against the device's
M="$D/memory"
"$LB" collect --db "$tmp/m.db" "$M/runs" >"$tmp/collect-m.out" 2>&1 ||
	{ cat "$tmp/collect-m.out"; echo "FAIL: collect the memory probe"; exit 1; }
grep -q "168 new runs.*0 warnings, 0 errors" "$tmp/collect-m.out" ||
	{ cat "$tmp/collect-m.out"; echo "FAIL: collect did not take all 168 probe runs cleanly"; fail=1; }
"$LB" plan h200-1gpu --format json 2>/dev/null | awk '
	function val(   v) { v = $0; sub(/^[^:]*:[ \t]*/, "", v); sub(/,$/, "", v); gsub(/"/, "", v); return v }
	/"status":/ { st = val() } /"mem_gib":/ { mem = val() } /"seq_len":/ { s = val() }
	/"micro_batch":/ { b = val() } /"checkpointing":/ { c = val() } /"attention":/ { a = val() }
	/"norm":/ { n = val() } /"seed":/ { printf "%s|%s|%s|%s|%s\t%s\t%s\n", s, b, c, a, n, mem, st }' \
	>"$tmp/planned.tsv"
"$LB" sql --db "$tmp/m.db" --format tsv "SELECT seq_len || '|' || micro_batch || '|' ||
	checkpointing || '|' || attention || '|' || norm, coalesce(peak_mem_bytes, 0), status,
	coalesce(failure_class, '') FROM run_summary ORDER BY seq_len, micro_batch, checkpointing,
	attention, norm" | tail -n +2 >"$tmp/measured.tsv"
awk -F '\t' -v reserve=1.0 '
	NR == FNR { mem[$1] = $2; st[$1] = $3; next }
	{
		k = $1; split(k, f, "|"); seen++
		if (!(k in st)) { print "FAIL: probe layout " k " is not in the plan" > "/dev/stderr"; bad = 1; next }
		model = mem[k] - reserve
		if ($3 == "ok") {
			got = $2 / 1073741824; d = 100 * (got - model) / got
			if (st[k] != "ok") { print "FAIL: " k ": planned oom, fits on the device" > "/dev/stderr"; bad = 1 }
			if (d > 0.5 || d < -0.5) { printf "FAIL: %s: measured %.2f GiB, model %.2f GiB\n", k, got, model > "/dev/stderr"; bad = 1 }
			printf "| %s | %s | %s | %s | %s | %.2f | %.2f | %+.2f%% | %s | fits |\n", f[1], f[2], f[3], f[4], f[5], model, got, d, st[k]
		} else {
			if (st[k] != "oom" || $4 != "oom") { print "FAIL: " k ": planned " st[k] ", ended " $3 " " $4 > "/dev/stderr"; bad = 1 }
			printf "| %s | %s | %s | %s | %s | %.2f | - | - | %s | %s |\n", f[1], f[2], f[3], f[4], f[5], model, st[k], $4 == "oom" ? "out of memory" : $3
		}
	}
	END { if (seen != 168) { print "FAIL: " seen " probe layouts, want 168" > "/dev/stderr"; bad = 1 }; exit bad }' \
	"$tmp/planned.tsv" "$tmp/measured.tsv" >"$tmp/memory-rows.md" 2>"$tmp/memory.err" ||
	{ cat "$tmp/memory.err"; echo "FAIL: the memory model against the probe"; fail=1; }
{
	echo "| seq | mbs | checkpointing | attention | norm | model GiB | measured GiB | measured - model | planned (139.8 GiB) | on the H200 |"
	echo "| ---: | ---: | --- | --- | --- | ---: | ---: | ---: | --- | --- |"
	cat "$tmp/memory-rows.md"
} >"$tmp/memory-table.md"
golden "$M/table.md" "$tmp/memory-table.md" "the memory table from the probe's runs"
# docs/memory-model.md's table of planned, counted and device peaks: scripts/memory-table.sh
# over the same runs, between its markers
LB="$LB" sh scripts/memory-table.sh --usable 139.8 "$tmp/m.db" h200-1gpu-memory >"$tmp/mm.md" ||
	{ cat "$tmp/mm.md"; echo "FAIL: scripts/memory-table.sh: a wrong verdict on the probe's runs"; fail=1; }
begin='<!-- memory-table begin: generated by scripts/memory-table.sh; do not edit -->'
endm='<!-- memory-table end -->'
awk -v b="$begin" -v e="$endm" '$0 == b { on = 1; next } $0 == e { on = 0 } on' docs/memory-model.md \
	>"$tmp/mm.published"
if [ "${LB_UPDATE_GOLDEN:-0}" = 1 ]; then
	awk -v b="$begin" -v e="$endm" -v t="$tmp/mm.md" '
		$0 == b { print; while ((getline l < t) > 0) print l; skip = 1; next }
		$0 == e { skip = 0 } !skip' docs/memory-model.md >"$tmp/mm.doc" &&
		cp "$tmp/mm.doc" docs/memory-model.md && echo "updated docs/memory-model.md's memory table"
elif ! diff -u "$tmp/mm.published" "$tmp/mm.md"; then
	echo "FAIL: docs/memory-model.md's memory table differs from the probe's runs (LB_UPDATE_GOLDEN=1 regenerates it)"
	fail=1
fi
# its first table: planned, counted and the device's own peak of the healthy re-run
"$LB" collect --db "$tmp/h.db" "$D/healthy/runs" >/dev/null 2>&1 || { echo "FAIL: collect healthy"; fail=1; }
LB="$LB" sh scripts/memory-table.sh --usable 139.8 "$tmp/h.db" h200-1gpu >"$tmp/hm.md" ||
	{ cat "$tmp/hm.md"; echo "FAIL: scripts/memory-table.sh: a wrong verdict on the healthy runs"; fail=1; }
begin='<!-- memory-table-device begin: generated by scripts/memory-table.sh; do not edit -->'
endm='<!-- memory-table-device end -->'
awk -v b="$begin" -v e="$endm" '$0 == b { on = 1; next } $0 == e { on = 0 } on' docs/memory-model.md \
	>"$tmp/hm.published"
if [ "${LB_UPDATE_GOLDEN:-0}" = 1 ]; then
	awk -v b="$begin" -v e="$endm" -v t="$tmp/hm.md" '
		$0 == b { print; while ((getline l < t) > 0) print l; skip = 1; next }
		$0 == e { skip = 0 } !skip' docs/memory-model.md >"$tmp/hm.doc" &&
		cp "$tmp/hm.doc" docs/memory-model.md && echo "updated docs/memory-model.md's device table"
elif ! diff -u "$tmp/hm.published" "$tmp/hm.md"; then
	echo "FAIL: docs/memory-model.md's device table differs from the healthy runs (LB_UPDATE_GOLDEN=1 regenerates it)"
	fail=1
fi
# the boundary probe (bench/gpu/boundary.sh), where its runs are published: its table
if [ -d "$D/boundary/runs" ]; then
	"$LB" collect --db "$tmp/b.db" "$D/boundary/runs" >"$tmp/collect-b.out" 2>&1 ||
		{ cat "$tmp/collect-b.out"; echo "FAIL: collect the boundary probe"; fail=1; }
	LB="$LB" sh scripts/memory-table.sh --usable 139.8 "$tmp/b.db" memory-boundary >"$tmp/b.md" ||
		{ cat "$tmp/b.md"; echo "FAIL: the boundary probe's published runs have a wrong verdict"; fail=1; }
	golden "$D/boundary/table.md" "$tmp/b.md" "the boundary probe's table"
fi
[ "$fail" = 0 ] && echo "ok: the published H200 results reproduce"
exit "$fail"
