#!/bin/sh
# tp=2, pp=2, dp=2 (8 ranks, --nproc-per-node 8, ZeRO-1, sequence parallelism) trains
# the tiny preset: the run ends ok, the header says world_size 8, each step line has 8
# per-rank peaks and the phase times of docs/run-log.md, the losses equal the single
# rank's to 1e-5, and `layoutbench collect` takes the log with its per-rank memory. Also:
# GPipe's stage 0 peaks above 1F1B's (all 8 micro-batches held, not 2).
BUILD=${BUILD:-build}
LB="$(pwd)/$BUILD/layoutbench"
TRAIN="$(pwd)/$BUILD/layoutbench-train"

[ -x "$TRAIN" ] || { echo "error: '$TRAIN' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
lay="--model tiny --seq-len 32 --global-batch 8 --steps 4 --warmup 1 --quiet"

t0=$(date +%s.%N)
"$TRAIN" $lay --tp 2 --pp 2 --dp 2 --gpus-per-node 8 --nproc-per-node 8 --zero-stage 1 \
	--sequence-parallel 1 --run-dir "$tmp/p8" 2>"$tmp/err" ||
	{ cat "$tmp/err"; echo "FAIL: the 8-rank run exited $?"; exit 1; }
echo "8 ranks: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s"
"$TRAIN" $lay --run-dir "$tmp/p1" 2>"$tmp/err1" || { cat "$tmp/err1"; echo "FAIL: one rank"; exit 1; }
log=$(ls "$tmp"/p8/run-*.jsonl)
grep -q '"world_size":8,"hosts":\["[^"]*"\]' "$log" || { head -n 1 "$log"; echo "FAIL: header world_size/hosts"; fail=1; }
tail -n 1 "$log" | grep -q '"type":"end","status":"ok"' || { tail -n 1 "$log"; echo "FAIL: end"; fail=1; }
n=$(grep -c '"rank_peak_mem_bytes":\[[0-9]*\(,[0-9]*\)\{7\}\]' "$log")
[ "$n" = 4 ] || { echo "FAIL: $n of 4 step lines with 8 per-rank peaks"; fail=1; }
n=$(grep '"type":"step"' "$log" | grep -c '"comm_exposed_s":[0-9.e-]*,"bubble_s":[0-9.e-]*')
[ "$n" = 4 ] || { echo "FAIL: $n of 4 step lines with comm_exposed_s and bubble_s"; fail=1; }
losses() { grep '"type":"step"' "$1" | sed 's/.*"loss":\([^,]*\),.*/\1/'; }
losses "$log" >"$tmp/l8"
losses "$tmp"/p1/run-*.jsonl >"$tmp/l1"
paste "$tmp/l1" "$tmp/l8" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1) bad = 1 }
	END { exit bad }' || { paste "$tmp/l1" "$tmp/l8"; echo "FAIL: losses differ"; fail=1; }
if [ -x "$LB" ]; then
	"$LB" collect --db "$tmp/r.db" "$tmp/p8" >"$tmp/out" 2>&1 ||
		{ cat "$tmp/out"; echo "FAIL: collect refused the 8-rank log"; fail=1; }
	grep -q "1 new run.*4 steps; 0 warnings, 0 errors" "$tmp/out" ||
		{ cat "$tmp/out"; echo "FAIL: collect summary"; fail=1; }
	got=$("$LB" sql --db "$tmp/r.db" --format csv \
		"SELECT count(*) FROM steps WHERE rank_peak_mem LIKE '[%,%,%,%,%,%,%,%]' AND bubble_s IS NOT NULL AND comm_exposed_s IS NOT NULL" | tail -n 1)
	[ "$got" = 4 ] || { echo "FAIL: collected steps with per-rank memory and phases: '$got', want 4"; fail=1; }
fi

# GPipe holds every micro-batch's activations on stage 0, 1F1B pp - stage of them
peak0() { # schedule -> rank 0's peak bytes
	"$TRAIN" --model tiny --seq-len 64 --global-batch 8 --steps 1 --warmup 0 --quiet --pp 2 \
		--gpus-per-node 2 --nproc-per-node 2 --pipeline-schedule "$1" --run-dir "$tmp/$1" \
		2>/dev/null && grep -o '"rank_peak_mem_bytes":\[[0-9]*' "$tmp/$1"/run-*.jsonl | sed 's/.*\[//'
}
p1=$(peak0 1f1b)
pg=$(peak0 gpipe)
echo "stage 0 peak: 1f1b $p1 bytes, gpipe $pg bytes"
[ -n "$p1" ] && [ -n "$pg" ] && [ "$pg" -gt "$p1" ] ||
	{ echo "FAIL: gpipe should hold more activations than 1f1b on stage 0"; fail=1; }
[ $fail = 0 ] && echo "par 8 ranks: ok"
exit $fail
