#!/bin/sh
# The trainer's run log is what the collector reads: train the tiny preset into a temp
# run directory, `layoutbench collect` it, and find the run in `report --figure best`.
BUILD=${BUILD:-build}
LB="$(pwd)/$BUILD/layoutbench"
TRAIN="$(pwd)/$BUILD/layoutbench-train"

[ -x "$TRAIN" ] || { echo "error: '$TRAIN' not built (make BUILD=$BUILD)"; exit 1; }
[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
LAYOUTBENCH_SWEEP=train-collect "$TRAIN" --model tiny --seq-len 32 --global-batch 4 \
	--micro-batch 2 --steps 4 --warmup 1 --quiet --run-dir "$tmp/runs" 2>"$tmp/err" ||
	{ cat "$tmp/err"; echo "FAIL: training exited $?"; exit 1; }
"$LB" collect --db "$tmp/r.db" "$tmp/runs" >"$tmp/out" 2>&1 ||
	{ cat "$tmp/out"; echo "FAIL: collect refused the trainer's log"; fail=1; }
grep -q "1 new run.*4 steps; 0 warnings, 0 errors" "$tmp/out" ||
	{ cat "$tmp/out"; echo "FAIL: collect summary"; fail=1; }
uid=$(basename "$tmp"/runs/run-*.jsonl .jsonl | sed 's/^run-//')
got=$("$LB" sql --db "$tmp/r.db" --format csv \
	"SELECT status, n_steps FROM run_summary WHERE run_uid = '$uid'" | tail -n 1)
[ "$got" = "ok,3" ] || { echo "FAIL: run_summary: got '$got', want 'ok,3' (warmup excluded)"; fail=1; }
"$LB" report --db "$tmp/r.db" --figure best >"$tmp/report" 2>&1 ||
	{ cat "$tmp/report"; echo "FAIL: report --figure best"; fail=1; }
grep -q "^| tiny | 32 | 1 | n/a |" "$tmp/report" || { cat "$tmp/report"; echo "FAIL: the run is not in the report"; fail=1; }

[ $fail = 0 ] && echo "train collect: ok"
exit $fail
