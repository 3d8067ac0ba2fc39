#!/bin/sh
# bench/gpu/grid.sh, the runner of a rendered job array on a host without Slurm, against
# the real job scripts of `plan gpu-tiny --render` and a stand-in trainer (a script that
# takes a second, writes a run log ending ok, or fails for one layout): every index given
# runs in order while its expected wall fits the budget, the rest are listed as left; a
# failing task does not stop the others; LB_GRID_DONE skips an index whose layout already
# has a run log that ended ok, and only those; LB_GRID_EST's per-index estimates replace
# EST_S; a missing script or an unreadable or malformed estimates file is a usage error.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
[ -x "$LB" ] || { echo "no $LB (make BUILD=$BUILD first)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
LAYOUTBENCH_RUNS="$tmp/runs" "$LB" plan gpu-tiny --render "$tmp/s" >/dev/null 2>&1 ||
	{ echo "FAIL: plan gpu-tiny --render"; exit 1; }
script="$tmp/s/a0.sbatch"
bad=$(sed -n 's/^3) layout=\([0-9a-f]*\)$/\1/p' "$script")
[ -n "$bad" ] || { echo "FAIL: no layout for index 3 in $script"; exit 1; }
cat >"$tmp/train" <<EOF
#!/bin/sh
# stand-in trainer: the run log in --run-dir, ok; the layout of index 3 fails
while [ \$# -gt 0 ]; do [ "\$1" = --run-dir ] && dir=\$2; shift; done
sleep 1
[ "\$LAYOUTBENCH_LAYOUT" = "$bad" ] && exit 3
printf '%s\n' '{"type":"header"}' '{"type":"end","status":"ok","class":null}' >"\$dir/run-x.jsonl"
EOF
chmod +x "$tmp/train"
export LAYOUTBENCH_TRAIN="$tmp/train"

# a budget of 3 s at an expected 3 s a task: index 0 starts at once; a second later (a task
# takes at least one) the next would not fit, so 1..5 are left
OUT="$tmp/o1" sh bench/gpu/grid.sh "$script" 3 3 0 1 2 3 4 5 >"$tmp/o1.out" 2>&1 ||
	{ cat "$tmp/o1.out"; echo "FAIL: grid.sh exited non-zero"; fail=1; }
[ "$(cut -f1,2 "$tmp/o1/grid.tsv" | tr '\t\n' ': ')" = "0:0 " ] ||
	{ cat "$tmp/o1/grid.tsv"; echo "FAIL: the tasks started within the budget"; fail=1; }
[ "$(tr '\n' ' ' <"$tmp/o1/grid-left.txt")" = "1 2 3 4 5 " ] ||
	{ cat "$tmp/o1/grid-left.txt"; echo "FAIL: the indices left"; fail=1; }
tail -n 1 "$tmp/o1.out" | grep -q '^| 1 | 1 | 0 | 5 | ' ||
	{ cat "$tmp/o1.out"; echo "FAIL: the table"; fail=1; }

# the whole list again, with the first call's run as done: 0 skipped, 3 fails without
# stopping 4
LB_GRID_DONE="$tmp/runs/gpu-tiny" OUT="$tmp/o2" sh bench/gpu/grid.sh "$script" 60 2 0 1 2 3 4 \
	>"$tmp/o2.out" 2>&1 || { cat "$tmp/o2.out"; echo "FAIL: grid.sh exited non-zero (2)"; fail=1; }
[ "$(cut -f1,2 "$tmp/o2/grid.tsv" | tr '\t\n' ': ')" = "0:done 1:0 2:0 3:3 4:0 " ] ||
	{ cat "$tmp/o2/grid.tsv"; echo "FAIL: skip the done, run the rest"; fail=1; }
[ -s "$tmp/o2/grid-left.txt" ] && { echo "FAIL: indices left with time to spare"; fail=1; }
# a failed run is not done: index 3 runs again
LB_GRID_DONE="$tmp/runs/gpu-tiny" OUT="$tmp/o3" sh bench/gpu/grid.sh "$script" 60 2 3 \
	>/dev/null 2>&1
[ "$(cut -f1,2 "$tmp/o3/grid.tsv")" = "$(printf '3\t3')" ] ||
	{ cat "$tmp/o3/grid.tsv"; echo "FAIL: a failed layout counted as done"; fail=1; }

# per-index estimates: with 4 s of budget, index 1 (listed at 1 s) starts after index 0 (4 s
# by EST_S) where the default alone would stop; index 2 (listed at 30 s) never fits
printf '1 1\n2 30\n' >"$tmp/est"
LB_GRID_EST="$tmp/est" OUT="$tmp/o5" sh bench/gpu/grid.sh "$script" 4 4 0 1 2 >/dev/null 2>&1
[ "$(cut -f1,2 "$tmp/o5/grid.tsv" | tr '\t\n' ': ')" = "0:0 1:0 " ] &&
	[ "$(tr '\n' ' ' <"$tmp/o5/grid-left.txt")" = "2 " ] ||
	{ cat "$tmp/o5/grid.tsv" "$tmp/o5/grid-left.txt"; echo "FAIL: per-index estimates"; fail=1; }
LB_GRID_EST="$tmp/nofile" OUT="$tmp/o6" sh bench/gpu/grid.sh "$script" 4 3 0 >/dev/null 2>"$tmp/o6.err"
[ $? = 2 ] && grep -q "^error: LB_GRID_EST" "$tmp/o6.err" ||
	{ cat "$tmp/o6.err"; echo "FAIL: an unreadable LB_GRID_EST"; fail=1; }
printf '1 1\n2 ten\n' >"$tmp/est-bad"
LB_GRID_EST="$tmp/est-bad" OUT="$tmp/o7" sh bench/gpu/grid.sh "$script" 4 3 0 >/dev/null 2>"$tmp/o7.err"
[ $? = 2 ] && grep -q "line 2: 2 ten: want 'INDEX SECONDS'" "$tmp/o7.err" && [ ! -s "$tmp/o7/grid.tsv" ] ||
	{ cat "$tmp/o7.err"; echo "FAIL: a malformed LB_GRID_EST line"; fail=1; }

OUT="$tmp/o4" sh bench/gpu/grid.sh "$tmp/none.sbatch" 10 1 0 >/dev/null 2>"$tmp/o4.err"
[ $? = 2 ] && grep -q "^error: no job script '$tmp/none.sbatch'" "$tmp/o4.err" ||
	{ cat "$tmp/o4.err"; echo "FAIL: a missing script"; fail=1; }

[ $fail = 0 ] && echo "grid_runner: all checks passed"
exit $fail
