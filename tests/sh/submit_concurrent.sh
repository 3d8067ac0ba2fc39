#!/bin/sh
# Four `submit`s of one spec started at the same moment submit each layout once (the
# in-flight check and the recording of the jobs hold one lock): one says "submitted 3
# layout(s)", the three others "nothing to submit (... 3 pending or running ...)", and the
# jobs table has one row per layout; three tries. Then two `resubmit`s at once after the
# jobs were cancelled: each layout once more. The trainer is a stand-in that sleeps, so
# the jobs stay in flight (the local executor runs one at a time) until cancelled.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
case "$LB" in /*) ;; *) LB="$PWD/$LB" ;; esac
unset LAYOUTBENCH_DB LB_SUBMIT_HOLD
tmp=$(mktemp -d) || exit 1
cleanup() {
	for d in "$tmp"/try*; do
		[ -f "$d/r.db" ] && "$LB" cancel --db "$d/r.db" >/dev/null 2>&1
	done
	sleep 1
	rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
printf '#!/bin/sh\nexec sleep 120\n' >"$tmp/train"
chmod +x "$tmp/train"
LAYOUTBENCH_TRAIN="$tmp/train"
export LAYOUTBENCH_TRAIN
cat >"$tmp/spec.json" <<'EOF2'
{"name": "four-at-once", "model": "tiny",
 "fixed": {"seq_len": 32, "global_batch": 4, "gpus": 1},
 "grid": {"micro_batch": [1, 2, 4]},
 "run": {"steps": 2, "warmup": 1},
 "cluster": {"time_limit": 5, "gpus_per_node": 1, "device": "cpu"}}
EOF2

for t in 1 2 3; do
	d="$tmp/try$t"
	mkdir "$d"
	pids=""
	for k in 1 2 3 4; do
		"$LB" submit "$tmp/spec.json" --executor local --db "$d/r.db" --runs "$d/runs" \
			>"$d/out$k" 2>"$d/err$k" &
		pids="$pids $!"
	done
	k=0
	for p in $pids; do
		k=$((k + 1))
		wait "$p" || { cat "$d/err$k"; echo "FAIL: try $t: submit $k failed"; fail=1; }
	done
	cat "$d"/out? >"$d/all"
	n_sub=$(grep -c "^sweep 'four-at-once': submitted 3 layout(s)" "$d/all")
	n_skip=$(grep -c "^sweep 'four-at-once': nothing to submit (0 layout(s) done, 3 pending or running" "$d/all")
	jobs=$("$LB" sql --db "$d/r.db" --format csv "SELECT count(*), count(DISTINCT layout_id) FROM jobs" | tail -n 1)
	if [ "$n_sub" != 1 ] || [ "$n_skip" != 3 ] || [ "$jobs" != "3,3" ]; then
		cat "$d/all"
		echo "FAIL: try $t: $n_sub submitted, $n_skip skipped, jobs (rows, layouts) $jobs; want 1, 3, 3,3"
		fail=1
	fi
done

# two resubmits at once after a cancel: each layout once more
d="$tmp/try1"
"$LB" cancel --db "$d/r.db" >/dev/null 2>&1 || { echo "FAIL: cancel"; fail=1; }
"$LB" status --db "$d/r.db" >/dev/null 2>&1
"$LB" resubmit --db "$d/r.db" >"$d/re1" 2>&1 &
p1=$!
"$LB" resubmit --db "$d/r.db" >"$d/re2" 2>&1 &
p2=$!
wait $p1
wait $p2
jobs=$("$LB" sql --db "$d/r.db" --format csv "SELECT count(*), count(DISTINCT layout_id), max(attempt) FROM jobs" | tail -n 1)
[ "$jobs" = "6,3,2" ] || { cat "$d/re1" "$d/re2"; echo "FAIL: two resubmits: jobs (rows, layouts, attempts) $jobs, want 6,3,2"; fail=1; }

[ $fail = 0 ] && echo "four submits at once: ok"
exit $fail
