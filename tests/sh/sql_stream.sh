#!/bin/sh
# `sql` streams in its default table format too: 400,000 rows of 250 characters (about
# 100 MB of text, which the table once held whole: a cross join was killed at 23.7 GB)
# print in the memory of the first 1000 rows (GNU time's maximum resident set under
# 64 MiB); the table is aligned to those rows' widths and has every row.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
FIX=tests/fixtures/runlogs
[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
[ -x /usr/bin/time ] || { echo "no /usr/bin/time (apt-get install time)"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
"$LB" collect --db "$tmp/r.db" "$FIX/run-20261202T120000Z-node1-1001-ok.jsonl" >/dev/null 2>&1 ||
	{ echo "FAIL: collect"; exit 1; }
# under AddressSanitizer (make asan) freed blocks wait in a quarantine and count as
# resident: keep none, so that the peak is what the program holds
ASAN_OPTIONS="quarantine_size_mb=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export ASAN_OPTIONS
q="WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 400000)
   SELECT i AS n, printf('%0250d', i) AS wide, 'x' AS last FROM c"
/usr/bin/time -f '%M' -o "$tmp/rss" "$LB" sql --db "$tmp/r.db" "$q" >"$tmp/out" 2>"$tmp/err" ||
	{ cat "$tmp/err"; echo "FAIL: sql"; fail=1; }
rss=$(tail -n 1 "$tmp/rss")
echo "peak resident memory: $rss KiB for $(wc -c <"$tmp/out") bytes of table"
[ "$rss" -le 65536 ] || { echo "FAIL: sql's table held $rss KiB"; fail=1; }
[ "$(wc -l <"$tmp/out")" = 400002 ] || { echo "FAIL: $(wc -l <"$tmp/out") lines, want 400002"; fail=1; }
head -n 3 "$tmp/out" | cut -c1-10 >"$tmp/head" # n is 4 wide in the first 1000 rows
printf '%s\n' 'n     wide' '----  ----' '1     0000' >"$tmp/want"
diff -u "$tmp/want" "$tmp/head" || { echo "FAIL: table head"; fail=1; }
# a row after the sample is padded to the sample's widths (a wider cell: two spaces)
grep -q '^400000  0*400000  x$' "$tmp/out" || { tail -n 1 "$tmp/out" | cut -c1-40; echo "FAIL: the last row"; fail=1; }
[ $fail = 0 ] && echo "sql table streams: ok"
exit $fail
