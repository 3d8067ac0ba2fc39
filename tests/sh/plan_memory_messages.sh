#!/bin/sh
# The planner's memory verdicts say why: an oom reason prints enough digits that the need
# and the capacity differ (1.004 GiB of 1.000 GiB, not 1.0 of 1.0), and a GPU sweep without
# cluster.gpu_mem_gib is warned about on stderr (nothing was pruned), not passed silently.
set -u
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
[ -x "$LB" ] || { echo "no $LB (make BUILD=$BUILD first)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
spec() { # gpu_mem_gib or "" -> a one-layout spec on stdout
	mem=${1:+\"gpu_mem_gib\": $1,}
	printf '{"name": "m", "model": "tiny", "fixed": {"seq_len": 64, "global_batch": 8},
	  "cluster": {"gpus_per_node": 1, %s "gpu": "H200", "device": "cuda", "memory_model": "paper"}}\n' "$mem"
}
spec 1.0 >"$tmp/a.json"
"$LB" plan "$tmp/a.json" --format csv >"$tmp/a.csv" 2>"$tmp/a.err" || { cat "$tmp/a.err"; fail=1; }
grep -q ',oom,,needs 1\.00[0-9] GiB of 1\.000 GiB\(,[^,]*\)*$' "$tmp/a.csv" ||
	{ echo "FAIL: oom reason: $(tail -n 1 "$tmp/a.csv")"; fail=1; }
grep -q "gpu_mem_gib is not set" "$tmp/a.err" && { echo "FAIL: warned with gpu_mem_gib set"; fail=1; }
spec "" >"$tmp/b.json"
"$LB" plan "$tmp/b.json" >"$tmp/b.out" 2>"$tmp/b.err" || { cat "$tmp/b.err"; fail=1; }
grep -q "^warning: plan 'm': cluster.gpu_mem_gib is not set, so no layout was checked against GPU memory" "$tmp/b.err" ||
	{ echo "FAIL: no warning without gpu_mem_gib: $(cat "$tmp/b.err")"; fail=1; }
grep -q "warning" "$tmp/b.out" && { echo "FAIL: the warning went to stdout"; fail=1; }
[ "$fail" = 0 ] && echo "ok: oom reasons with enough digits, unpruned GPU sweeps warned"
exit "$fail"
