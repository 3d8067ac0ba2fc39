#!/bin/sh
# `layoutbench quickstart` end to end (plan, train every layout on the CPU, collect,
# report) into a folder of its own: every layout completes, and an MFU without a peak
# reads the same word in its table of runs as in the report's tables ("n/a"; the runs'
# table said "unknown"), never a number.
set -u
B=${BUILD:-build}
root=$(pwd)
case "$B" in /*) ;; *) B="$root/$B" ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
LAYOUTBENCH_TRAIN="$B/layoutbench-train" "$B/layoutbench" quickstart --out "$tmp/qs" --jobs 2 \
	>"$tmp/out" 2>&1 || { tail -n 30 "$tmp/out"; echo "FAIL: quickstart exited non-zero"; exit 1; }
grep -q "^sweep 'quickstart': 12 completed, 0 failed" "$tmp/out" ||
	{ tail -n 30 "$tmp/out"; echo "FAIL: not every quickstart layout completed"; fail=1; }
# the runs' table: the last column of each row is the MFU
runs=$(awk '/^== 3\/4/ { on = 1; next } /^== 4\/4/ { on = 0 } on && /^[0-9a-f][0-9a-f]*  [a-z]/ { print $NF }' "$tmp/out" | sort -u)
[ "$runs" = "n/a" ] || { echo "FAIL: the runs' table's MFU column reads '$runs', want n/a"; fail=1; }
grep -q '^| .* | n/a | ' "$tmp/out" || { echo "FAIL: the report's tables do not read n/a"; fail=1; }
grep -w 'unknown' "$tmp/out" | grep -q . &&
	{ grep -nw unknown "$tmp/out"; echo "FAIL: the quickstart says 'unknown' where its tables say n/a"; fail=1; }
exit $fail
