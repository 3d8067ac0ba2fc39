#!/bin/sh
# The planner's cost, counted rather than timed: `bench_plan --slice 1` plans 100,000
# points (80 layers: every pipeline size up to 80 is valid there, so the memory model runs
# its deepest pipelines) on one thread under callgrind, which counts the instructions
# executed whatever else the machine runs, and fails when they exceed the budget per
# point. The wall-clock benchmark (make bench) says how fast; this says that a change did
# not make it slower, on a shared, loaded machine too: a pipeline schedule built for each
# stage of every layout (O(pp^2) steps a layout), which made `make bench` 5x slower,
# counts 198,855 per point here. Budget: LB_PLAN_COST_BUDGET (instructions per point);
# measured 9,810 with gcc 12 -O2 on Debian 12 (docs/performance.md, "Planner").
set -u
B=${BUILD:-build}
budget=${LB_PLAN_COST_BUDGET:-12000}
grep -q 'SAN=1' "$B/gen/config.txt" 2>/dev/null && {
	echo "a sanitizer build: its instruction counts are not the planner's"
	exit 77
}
command -v valgrind >/dev/null 2>&1 || {
	echo "FAIL: valgrind not installed (Debian package valgrind; make deps installs it)"
	exit 1
}
[ -x "$B/bench/bench_plan" ] || {
	echo "FAIL: $B/bench/bench_plan is not built (make $B/bench/bench_plan)"
	exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LB_BENCH_THREADS=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
	"$B/bench/bench_plan" --slice 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] || {
	cat "$tmp/out" "$tmp/err"
	echo "FAIL: bench_plan --slice 1 exited $rc under callgrind"
	exit 1
}
ir=$(sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$tmp/err")
points=$(sed -n 's/^points \([0-9]*\)$/\1/p' "$tmp/out")
[ -n "$ir" ] && [ -n "$points" ] || {
	cat "$tmp/out" "$tmp/err"
	echo "FAIL: no instruction count or point count in callgrind's output"
	exit 1
}
per=$((ir / points))
echo "planner: $ir instructions for $points points: $per per point (budget $budget)"
[ "$per" -le "$budget" ] || {
	echo "FAIL: the planner costs $per instructions per point, over its budget of $budget (what made it slower? callgrind_annotate on a --callgrind-out-file says where they go)"
	exit 1
}
