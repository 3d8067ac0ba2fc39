#!/bin/sh
# bench/gpu/halving.sh over calls of a time limit, on the CPU: a halving of 8 tiny layouts
# (the quickstart's single-rank ones, eta 2) through the local executor. The first call
# (5 s) submits and stops; each call leaves nothing of the halving running (no worker of
# its database, no trainer of its runs: a later part of a device call must not share the
# machine with it); further calls resume it until it is done, with its report written.
set -u
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
[ -x "$LB" ] && [ -x "$BUILD/layoutbench-train" ] || { echo "no $LB or trainer (make first)"; exit 1; }
tmp=$(mktemp -d) || exit 1
D="$tmp/state"
# anything of this halving still running: its worker, or a trainer writing under its runs
running() {
	for d in /proc/[0-9]*; do
		tr '\0' ' ' <"$d/cmdline" 2>/dev/null
		echo
	done | grep -F -e "--local-worker --db $D/h.db " -e "--run-dir $D/runs/" | grep -v grep
}
cleanup() {
	for d in /proc/[0-9]*; do
		tr '\0' ' ' <"$d/cmdline" 2>/dev/null | grep -qF -e "--db $D/h.db" -e "$D/runs/" &&
			kill "${d#/proc/}" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
cat >"$tmp/spec.json" <<'SPEC'
{
  "name": "halving-host",
  "model": "tiny",
  "fixed": {"seq_len": 64, "global_batch": 8, "tp": 1, "pp": 1, "dp": 1},
  "union": [
    {"grid": {"micro_batch": [1, 2, 4], "checkpointing": ["none", "full"]},
     "fixed": {"attention": "flash", "norm": "fused"}},
    {"zip": [{"attention": ["naive", "fused_softmax"], "norm": ["unfused", "unfused"]}],
     "fixed": {"micro_batch": 1}}
  ],
  "run": {"steps": 12, "warmup": 2, "seed": 1},
  "step_time_guess_s": 0.5,
  "cluster": {"time_limit": 10, "gpus_per_node": 1, "gpu": "cpu", "device": "cpu"}
}
SPEC
"$LB" plan "$tmp/spec.json" >"$tmp/plan.txt" 2>&1 || { cat "$tmp/plan.txt"; echo "FAIL: the test's spec does not plan"; exit 1; }
grep -q "8 layout" "$tmp/plan.txt" || { head -n 3 "$tmp/plan.txt"; echo "FAIL: want the 8 single-rank layouts"; exit 1; }

call() { # N BUDGET
	LB_HALVING_DIR="$D" OUT="$tmp/out$1" BUILD=$BUILD sh bench/gpu/halving.sh "$2" \
		"$tmp/spec.json" 2 >"$tmp/call$1.txt" 2>&1 || { cat "$tmp/call$1.txt"; echo "FAIL: call $1 exits non-zero"; fail=1; }
	sleep 1
	r=$(running)
	[ -z "$r" ] || { echo "$r"; echo "FAIL: call $1 left the halving running"; fail=1; }
	[ -f "$tmp/out$1/state/h.db" ] || { echo "FAIL: call $1 wrote no state"; fail=1; }
}
call 1 5
grep -q "halving of 'halving-host': running" "$tmp/call1.txt" ||
	{ cat "$tmp/call1.txt"; echo "FAIL: the first call should end with the halving running"; fail=1; }
n=1
while [ $n -lt 8 ] && ! grep -q "halving of 'halving-host': done" "$tmp/call$n.txt"; do
	n=$((n + 1))
	call $n 45
done
grep -q "halving of 'halving-host': done" "$tmp/call$n.txt" ||
	{ tail -n 5 "$tmp/call$n.txt"; echo "FAIL: not done after $n calls"; fail=1; }
[ -s "$tmp/out$n/report.md" ] || { echo "FAIL: no report after the halving is done"; fail=1; }
[ "$fail" = 0 ] && echo "halving_host: ok ($n calls)"
exit "$fail"
