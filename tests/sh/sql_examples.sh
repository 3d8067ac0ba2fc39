#!/bin/sh
# The README's example queries (`layoutbench sql`) on the paper's imported runs: best
# layout per model, MFU by micro-batch size, failures by class; each output compared with
# the expected text below, in the three output formats. Also the sql command's errors.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
DATA=${LB_PAPER_DATA:-../shared/paper-data}

[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
if ! ls "$DATA"/*.csv >/dev/null 2>&1; then
	echo "paper data not found in '$DATA' (set LB_PAPER_DATA)"
	exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
db="$tmp/paper.db"

"$LB" import --format paper --db "$db" "$DATA"/*.csv >"$tmp/import.out" || {
	cat "$tmp/import.out"
	echo "error: import failed"
	exit 1
}
grep -q '^imported 8 files: 803 runs (303 ok, 500 failed); 0 warnings$' "$tmp/import.out" || {
	cat "$tmp/import.out"
	echo "FAIL: import summary"
	fail=1
}

check() { # name format query (expected text on stdin)
	cat >"$tmp/$1.want"
	if ! "$LB" sql --db "$db" --format "$2" "$3" >"$tmp/$1.got" 2>"$tmp/$1.err"; then
		cat "$tmp/$1.err"
		echo "FAIL: $1: sql exited non-zero"
		fail=1
	elif ! diff -u "$tmp/$1.want" "$tmp/$1.got"; then
		echo "FAIL: $1"
		fail=1
	fi
}

# 1. The best layout per model, sequence length and GPU count.
check best tsv "SELECT model, seq_len, gpus, tp, pp, micro_batch, checkpointing, label,
       round(100 * mfu_best, 1) AS mfu_pct
FROM best_layout ORDER BY model, seq_len, gpus" <<'T'
model	seq_len	gpus	tp	pp	micro_batch	checkpointing	label	mfu_pct
llama-13b	2048	32	1	1	1	none	flash_attention2 + RMS kernel	69.7
llama-13b	2048	64	1	1	1	none	flash_attention2 + RMS kernel	70.6
llama-13b	8192	64	2	2	1	none	flash_attention2 + RMS kernel	62.8
llama-13b	8192	128	2	2	1	none	flash_attention2 + RMS kernel	59.4
llama-30b	2048	64	1	4	1	none	flash_attention2 + RMS kernel	62.0
llama-30b	2048	256	2	4	1	none	flash_attention2 + RMS kernel	49.2
llama-30b	8192	64	4	2	1	none	flash_attention2 + RMS kernel	60.2
llama-30b	8192	128	4	4	1	none	flash_attention2 + RMS kernel	51.4
T

# 2. MFU by micro-batch size (the best run of each size).
check microbatch table "SELECT model, seq_len, gpus, micro_batch,
       round(100 * max(COALESCE(mfu_reported, mfu)), 1) AS best_mfu_pct, count(*) AS runs
FROM run_summary WHERE status = 'ok' AND model = 'llama-13b' AND seq_len = 2048
GROUP BY model, seq_len, gpus, micro_batch ORDER BY gpus, micro_batch" <<'T'
model      seq_len  gpus  micro_batch  best_mfu_pct  runs
---------  -------  ----  -----------  ------------  ----
llama-13b  2048     32    1            69.7          8
llama-13b  2048     32    2            65.0          6
llama-13b  2048     32    4            55.4          2
llama-13b  2048     64    1            70.6          29
llama-13b  2048     64    2            63.0          24
llama-13b  2048     64    4            51.0          16
llama-13b  2048     64    8            43.3          5
T

# 3. Failures by class.
check failures csv "SELECT failure_class, count(*) AS runs FROM run_summary
WHERE status = 'failed' GROUP BY failure_class ORDER BY runs DESC" <<'T'
failure_class,runs
oom,480
kernel_unavailable,19
error,1
T

# CSV quoting, NULL as an empty field, several statements.
check quoting csv "SELECT 'a,b' AS x, 'say \"hi\"' AS y, NULL AS z; SELECT 1 AS one" <<'T'
x,y,z
"a,b","say ""hi""",

one
1
T

# Micro-batch 1 is the best size for every model, length and GPU count (the paper's finding).
check mb1 csv "SELECT count(*) AS groups_where_mb1_loses FROM (
  SELECT model, seq_len, gpus, micro_batch,
         max(COALESCE(mfu_reported, mfu)) AS m,
         max(max(COALESCE(mfu_reported, mfu))) OVER (PARTITION BY model, seq_len, gpus) AS top
  FROM run_summary WHERE status = 'ok' GROUP BY model, seq_len, gpus, micro_batch)
WHERE micro_batch = 1 AND m < top" <<'T'
groups_where_mb1_loses
0
T

# Errors: a bad query, a missing database, an unknown format.
if "$LB" sql --db "$db" "SELECT x FROM nowhere" >/dev/null 2>"$tmp/e1"; then
	echo "FAIL: a bad query succeeded"
	fail=1
fi
grep -q "^error: query: no such table: nowhere$" "$tmp/e1" || { cat "$tmp/e1"; echo "FAIL: bad-query message"; fail=1; }
if "$LB" sql --db "$tmp/none.db" "SELECT 1" >/dev/null 2>"$tmp/e2"; then
	echo "FAIL: a missing database succeeded"
	fail=1
fi
grep -q "database '$tmp/none.db' does not exist" "$tmp/e2" || { cat "$tmp/e2"; echo "FAIL: missing-db message"; fail=1; }
[ -e "$tmp/none.db" ] && { echo "FAIL: sql created a database"; fail=1; }
"$LB" sql --db "$db" --format xml "SELECT 1" >/dev/null 2>&1
[ $? = 2 ] || { echo "FAIL: an unknown format is not a usage error"; fail=1; }
# LAYOUTBENCH_DB is the default database
LAYOUTBENCH_DB="$db" "$LB" sql --format csv "SELECT count(*) AS n FROM runs" >"$tmp/env.got"
printf 'n\n803\n' | diff -u - "$tmp/env.got" || { echo "FAIL: LAYOUTBENCH_DB"; fail=1; }

[ $fail = 0 ] && echo "sql examples: ok"
exit $fail
