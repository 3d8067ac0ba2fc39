#!/bin/sh
# The step-time model's published validation, recomputed (docs/prediction.md):
# - the paper's A100 grids (../shared/paper-data, or $LB_PAPER_DATA) imported into a
#   temporary database; `calibrate --holdout` from the nominal A100 table fits the terms on
#   seven grids and predicts the eighth, every way; the in-sample fit on all eight is the
#   shipped a100-paper calibration;
# - the H200 one-GPU grid: its published runs under docs/results/h200 collected (runs
#   without a sweep filed under h200-1gpu; calibrate prefers a healthy run of a layout to
#   one whose loss rose); the fit from the measured kernel table is the shipped h200
#   calibration; and a harder check: fit on one sequence length, predict the other;
# - the kernel table h200-kernels is what calibrate makes of the published bench_kernels CSV.
# Each table must equal the one between its markers in docs/prediction.md, and each shipped
# machine file the one calibrate writes: a figure that drifts fails here. After an intended
# change, regenerate both with LB_UPDATE=1 sh tests/sh/prediction_validation.sh and review
# the diff.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
DATA=${LB_PAPER_DATA:-../shared/paper-data}
DOC=docs/prediction.md
MD=common/machines
[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# The lines between "<!-- validation:NAME -->" and "<!-- /validation:NAME -->" of the doc.
doc_table() {
	awk -v b="<!-- validation:$1 -->" -v e="<!-- /validation:$1 -->" \
		'$0 == e { on = 0 } on { print } $0 == b { on = 1 }' "$DOC"
}
# Replace them with file $2 (LB_UPDATE=1).
doc_put() {
	awk -v b="<!-- validation:$1 -->" -v e="<!-- /validation:$1 -->" -v f="$2" '
		$0 == e { while ((getline l < f) > 0) print l; on = 0 }
		!on { print } $0 == b { on = 1 }' "$DOC" >"$tmp/doc" && cp "$tmp/doc" "$DOC"
}
# The markdown table that follows line $2 of report $1 (up to the next blank line).
table_after() {
	awk -v h="$2" 'on && /^$/ && n { exit } on && /^\|/ { print; n++ } index($0, h) == 1 { on = 1 }' "$1"
}
check() { # name file
	grep -q "<!-- validation:$1 -->" "$DOC" || { echo "FAIL: $DOC has no marker validation:$1"; fail=1; return; }
	if [ "${LB_UPDATE:-0}" = 1 ]; then
		doc_put "$1" "$2"
		echo "updated $DOC: $1"
		return
	fi
	doc_table "$1" >"$tmp/doc.$1"
	if diff -u "$tmp/doc.$1" "$2" >"$tmp/diff.$1"; then
		echo "ok: $1 matches $DOC"
	else
		cat "$tmp/diff.$1"
		echo "FAIL: validation:$1 differs from $DOC (regenerate: LB_UPDATE=1 sh $0)"
		fail=1
	fi
}
same_file() { # shipped made
	if [ "${LB_UPDATE:-0}" = 1 ]; then
		cp "$2" "$1"
		echo "updated $1"
	elif diff -u "$1" "$2"; then
		echo "ok: $1 is what calibrate makes"
	else
		echo "FAIL: $1 is not what calibrate makes now (regenerate: LB_UPDATE=1 sh $0)"
		fail=1
	fi
}

# ---- the H200's kernel table
"$LB" calibrate --machine h100-nominal --kernels docs/results/h200/targets/kernels.csv \
	--name h200-kernels --gpu H200 --out "$tmp/h200-kernels.json" >"$tmp/kern.out" 2>&1 ||
	{ cat "$tmp/kern.out"; echo "FAIL: calibrate --kernels"; exit 1; }
same_file "$MD/h200-kernels.json" "$tmp/h200-kernels.json"

# ---- the H200 grid
# the grid's runs (the graphs call's runs are other layouts, and another binary's)
"$LB" collect --db "$tmp/h200.db" --sweep h200-1gpu docs/results/h200/runs \
	docs/results/h200/healthy/runs docs/results/h200/cudnn/runs docs/results/h200/memory/runs \
	>"$tmp/collect.out" 2>&1 ||
	{ cat "$tmp/collect.out"; echo "FAIL: collect docs/results/h200"; exit 1; }
# (from the shipped table, checked above; after LB_UPDATE=1 changed it, build and run again)
"$LB" calibrate --db "$tmp/h200.db" --sweep h200-1gpu --machine h200-kernels \
	--name h200 --out "$tmp/h200.json" >"$tmp/h200.rep" 2>&1 ||
	{ cat "$tmp/h200.rep"; echo "FAIL: calibrate h200-1gpu"; exit 1; }
same_file "$MD/h200.json" "$tmp/h200.json"
{
	table_after "$tmp/h200.rep" "per sweep, predicted with this fit"
	echo
	grep '^h200-1gpu: runs whose loss rose' "$tmp/h200.rep"
} >"$tmp/v.h200"
check h200 "$tmp/v.h200"
# one sequence length fitted, the other predicted: the seq 8192 runs made a sweep of their own
"$LB" sql --write --db "$tmp/h200.db" "INSERT INTO sweeps (name, source) VALUES ('h200-1gpu-8192', 'spec')" >/dev/null &&
	"$LB" sql --write --db "$tmp/h200.db" "UPDATE runs SET sweep = 'h200-1gpu-8192' WHERE sweep = 'h200-1gpu' AND layout_id IN (SELECT layout_id FROM layouts WHERE seq_len = 8192)" >/dev/null ||
	{ echo "FAIL: splitting the H200 grid by sequence"; fail=1; }
"$LB" sql --write --db "$tmp/h200.db" "UPDATE sweeps SET name = 'h200-1gpu-2048' WHERE name = 'h200-1gpu'" >/dev/null 2>&1 ||
	"$LB" sql --write --db "$tmp/h200.db" "INSERT INTO sweeps (name, source) VALUES ('h200-1gpu-2048', 'spec')" >/dev/null
"$LB" sql --write --db "$tmp/h200.db" "UPDATE runs SET sweep = 'h200-1gpu-2048' WHERE sweep = 'h200-1gpu'" >/dev/null
"$LB" calibrate --db "$tmp/h200.db" --sweep h200-1gpu-2048 h200-1gpu-8192 \
	--machine h200-kernels --holdout --out "$tmp/h200s.json" >"$tmp/h200s.rep" 2>&1 ||
	{ cat "$tmp/h200s.rep"; echo "FAIL: calibrate --holdout on the H200 grid by sequence"; fail=1; }
table_after "$tmp/h200s.rep" "leave one sweep out" >"$tmp/v.h200-seq"
check h200-seq "$tmp/v.h200-seq"

# ---- the paper's grids
if ! ls "$DATA"/*.csv >/dev/null 2>&1; then
	echo "paper data not found in '$DATA' (set LB_PAPER_DATA): the A100 figures are not checked"
	[ $fail = 0 ] && exit 77
	exit 1
fi
"$LB" import --format paper --db "$tmp/paper.db" "$DATA"/*.csv >"$tmp/import.out" 2>&1 ||
	{ cat "$tmp/import.out"; echo "FAIL: import the paper data"; exit 1; }
sweeps=$("$LB" sql --db "$tmp/paper.db" --format tsv "SELECT name FROM sweeps ORDER BY name" | tail -n +2)
# shellcheck disable=SC2086
"$LB" calibrate --db "$tmp/paper.db" --sweep $sweeps --machine a100-nominal --name a100-paper \
	--holdout --out "$tmp/a100-paper.json" >"$tmp/paper.rep" 2>&1 ||
	{ cat "$tmp/paper.rep"; echo "FAIL: calibrate the paper's grids"; exit 1; }
same_file "$MD/a100-paper.json" "$tmp/a100-paper.json"
table_after "$tmp/paper.rep" "leave one sweep out" >"$tmp/v.paper"
check paper "$tmp/v.paper"
table_after "$tmp/paper.rep" "per sweep, predicted with this fit" >"$tmp/v.paper-in"
check paper-in "$tmp/v.paper-in"
table_after "$tmp/paper.rep" "| term | value" >"$tmp/v.paper-terms"
sed -i '1i | term | value | bounds | fitted | what it stands for |' "$tmp/v.paper-terms"
check paper-terms "$tmp/v.paper-terms"

# Two checks of the sheets that need no model (docs/prediction.md, "Where the bounds are
# missed"). The pipeline bound: under 1F1B a rank with N samples a step in micro-batches of
# b on p stages takes (N/b + p - 1) micro-batch times, so where a sample takes no longer in
# a larger micro-batch, the same layout at micro-batch b2 > b1 takes at most
# (N + (p-1) b2) / (N + (p-1) b1) times as long; at p = 1 the bound is 1 (the premise).
# Per sweep and label family: the pairs, those over the bound by more than 5%, the most over.
md_of_tsv() { # a tsv with a header row -> a markdown table
	awk -F '\t' 'NR == 1 { s = "|"; for (i = 1; i <= NF; i++) s = s " " $i " |"; print s
		s = "|"; for (i = 1; i <= NF; i++) s = s (i <= 2 ? " --- |" : " ---: |"); print s; next }
		{ s = "|"; for (i = 1; i <= NF; i++) s = s " " $i " |"; print s }'
}
pipeline_sql="WITH r AS (
  SELECT r.sweep AS sweep, r.label AS label, l.tp AS tp, l.pp AS pp, l.dp AS dp, l.micro_batch AS b,
         l.checkpointing AS ck, l.sequence_parallel AS sp, l.global_batch AS gb, avg(r.measured_step_time) AS t
  FROM runs r JOIN layouts l USING (layout_id) WHERE r.status = 'ok' AND r.source = 'paper'
  GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9),
p AS (
  SELECT a.sweep AS sweep, CASE WHEN a.label LIKE 'flash_attention2%' THEN 'flash_attention2, + RMS kernel'
         ELSE 'the others' END AS labels, a.pp AS pp,
         c.t / a.t / CASE WHEN a.pp > 1 THEN (1.0 * a.gb / a.dp + (a.pp - 1) * c.b) /
                                             (1.0 * a.gb / a.dp + (a.pp - 1) * a.b) ELSE 1 END AS over
  FROM r a JOIN r c ON c.sweep = a.sweep AND c.label = a.label AND c.tp = a.tp AND c.pp = a.pp
       AND c.dp = a.dp AND c.ck = a.ck AND c.sp = a.sp AND c.b > a.b)
SELECT sweep, labels AS \"labels\", sum(pp = 1) AS \"pairs, pp = 1\", sum(pp = 1 AND over > 1.05) AS \"over 1 by > 5%\",
       sum(pp > 1) AS \"pairs, pp > 1\", sum(pp > 1 AND over > 1.05) AS \"over the bound by > 5%\",
       CASE WHEN sum(pp > 1) > 0 THEN printf('%+.1f%%', 100 * (max(CASE WHEN pp > 1 THEN over END) - 1))
            ELSE '-' END AS \"most over the bound\"
FROM p GROUP BY 1, 2 ORDER BY 1, 2"
# Scaling: one layout (label, shape, tp, pp, micro-batch, checkpointing) on more nodes at the
# same global batch; GPU-seconds per step on the larger over the smaller. What does not
# shrink as each rank's share does (the data-parallel reduction, the bubble) raises it.
scaling_sql="WITH r AS (
  SELECT r.label AS label, l.n_layers AS nl, l.seq_len AS s, l.tp AS tp, l.pp AS pp, l.micro_batch AS b,
         l.checkpointing AS ck, CASE WHEN l.tp = 1 THEN 0 ELSE l.sequence_parallel END AS sp,
         l.gpus AS n, l.nodes AS nodes, avg(r.measured_step_time) AS t
  FROM runs r JOIN layouts l USING (layout_id) WHERE r.status = 'ok' AND r.source = 'paper'
  GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
p AS (
  SELECT a.nl AS nl, a.s AS s, a.nodes AS na, c.nodes AS nc, a.pp AS pp, c.t * c.n / (a.t * a.n) AS ratio
  FROM r a JOIN r c ON c.label = a.label AND c.nl = a.nl AND c.s = a.s AND c.tp = a.tp AND c.pp = a.pp
       AND c.b = a.b AND c.ck = a.ck AND c.sp = a.sp AND c.n > a.n)
SELECT CASE nl WHEN 40 THEN '13B' WHEN 60 THEN '30B' ELSE nl END AS model, s AS sequence,
       na || ' -> ' || nc AS nodes, count(*) AS \"layouts on both\",
       printf('%.3f', min(ratio)) || ' - ' || printf('%.3f', max(ratio)) AS \"GPU-seconds ratio\",
       CASE WHEN sum(pp = 1) > 0 THEN printf('%.3f', min(CASE WHEN pp = 1 THEN ratio END)) || ' - ' ||
            printf('%.3f', max(CASE WHEN pp = 1 THEN ratio END)) ELSE '-' END AS \"pp = 1 only\"
FROM p GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
for q in pipeline scaling; do
	eval "sql=\$${q}_sql"
	"$LB" sql --db "$tmp/paper.db" --format tsv "$sql" >"$tmp/$q.tsv" 2>&1 ||
		{ cat "$tmp/$q.tsv"; echo "FAIL: the sheets' $q check"; fail=1; continue; }
	md_of_tsv <"$tmp/$q.tsv" >"$tmp/v.paper-$q"
	check "paper-$q" "$tmp/v.paper-$q"
done
# calibrate finds the same pairs over the pipeline bound as the query above, sweep by sweep
awk -F '\t' 'NR > 1 { p[$1] += $5; o[$1] += $6 } END { for (s in p) if (p[s]) print s ": " p[s] " pairs with a pipeline, " o[s] " over the bound" }' \
	"$tmp/pipeline.tsv" | sort >"$tmp/bound.sql"
grep ' pairs with a pipeline, ' "$tmp/paper.rep" | sort >"$tmp/bound.cal"
if [ -s "$tmp/bound.cal" ] && diff -u "$tmp/bound.sql" "$tmp/bound.cal"; then
	echo "ok: calibrate's pipeline-bound pairs are the query's"
else
	echo "FAIL: calibrate's pipeline-bound pairs (right) differ from the query's (left)"
	fail=1
fi
table_after "$tmp/h200.rep" "| term | value" >"$tmp/v.h200-terms"
sed -i '1i | term | value | bounds | fitted | what it stands for |' "$tmp/v.h200-terms"
check h200-terms "$tmp/v.h200-terms"
[ $fail = 0 ] && echo "prediction validation: every figure as published"
exit $fail
