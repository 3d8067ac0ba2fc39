#!/bin/sh
# End-to-end test of `layoutbench collect` on the run-log fixtures: the summary line, the
# warnings' FILE:LINE form, the refused newer version (exit 1), idempotency (a second
# collect reports every run unchanged and leaves the tables as they were), a log that
# grows between collects, the default run directory ./runs, and --sweep for runs started
# by hand.
BUILD=${BUILD:-build}
LB="$(pwd)/$BUILD/layoutbench"
FIX=tests/fixtures/runlogs

[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
db="$tmp/r.db"
cp -r "$FIX" "$tmp/runs"

"$LB" collect --db "$db" "$tmp/runs" >"$tmp/out1" 2>"$tmp/err1"
rc=$?
[ $rc = 1 ] || { echo "FAIL: first collect exited $rc, want 1 (a newer-version log)"; fail=1; }
want='collected 11 files: 9 new runs, 0 updated, 0 unchanged; 37 steps; 3 warnings, 1 error'
[ "$(cat "$tmp/out1")" = "$want" ] || { cat "$tmp/out1"; echo "FAIL: summary 1"; fail=1; }
grep -q "^warning: $tmp/runs/run-20261202T120000Z-node1-1008-corrupt.jsonl:5: 'time_s': expected a number, got \"fast\"$" "$tmp/err1" ||
	{ cat "$tmp/err1"; echo "FAIL: corrupt-line warning"; fail=1; }
grep -q "^warning: $tmp/runs/run-20261202T120000Z-node1-1008-corrupt.jsonl:7: not JSON" "$tmp/err1" ||
	{ echo "FAIL: second corrupt-line warning"; fail=1; }
grep -q "^error: $tmp/runs/run-20261202T120000Z-node1-1010-newer.jsonl:1: run log version 2 is newer than this build reads (1); use a newer layoutbench$" "$tmp/err1" ||
	{ echo "FAIL: newer-version error"; fail=1; }

snapshot() {
	"$LB" sql --db "$db" --format csv "SELECT run_uid, status, failure_class, n_steps,
	  step_time_mean, mfu FROM run_summary ORDER BY run_uid;
	  SELECT count(*) FROM steps; SELECT count(*) FROM layouts; SELECT count(*) FROM sweeps"
}
snapshot >"$tmp/snap1"
"$LB" collect --db "$db" "$tmp/runs" >"$tmp/out2" 2>/dev/null
want='collected 11 files: 0 new runs, 0 updated, 9 unchanged; 0 steps; 1 warning, 1 error'
[ "$(cat "$tmp/out2")" = "$want" ] || { cat "$tmp/out2"; echo "FAIL: summary 2"; fail=1; }
snapshot >"$tmp/snap2"
diff -u "$tmp/snap1" "$tmp/snap2" || { echo "FAIL: a second collect changed the tables"; fail=1; }

# the running log grows and ends
log="$tmp/runs/run-20261202T120000Z-node1-1009-running.jsonl"
printf '%s\n' '{"type":"step","step":4,"warmup":false,"time_s":1.5,"tokens":1024,"loss":5.0}' \
	'{"type":"end","status":"ok","class":null,"message":"done","exit_code":0}' >>"$log"
rm "$tmp/runs/run-20261202T120000Z-node1-1010-newer.jsonl"
"$LB" collect --db "$db" "$log" >"$tmp/out3" 2>&1 || { cat "$tmp/out3"; echo "FAIL: collect 3"; fail=1; }
want='collected 1 file: 0 new runs, 1 updated, 0 unchanged; 1 step; 0 warnings, 0 errors'
[ "$(cat "$tmp/out3")" = "$want" ] || { cat "$tmp/out3"; echo "FAIL: summary 3"; fail=1; }
got=$("$LB" sql --db "$db" --format csv "SELECT status, n_steps FROM run_summary WHERE run_uid LIKE '%1009-running'" | tail -n 1)
[ "$got" = "ok,3" ] || { echo "FAIL: grown run: got '$got', want 'ok,3'"; fail=1; }

# no arguments: ./runs, and LAYOUTBENCH_DB
(cd "$tmp" && LAYOUTBENCH_DB="$tmp/env.db" "$LB" collect >"$tmp/out4" 2>/dev/null)
grep -q '^collected 10 files: 9 new runs' "$tmp/out4" || { cat "$tmp/out4"; echo "FAIL: default ./runs"; fail=1; }
(cd "$tmp/runs" && "$LB" collect --db "$tmp/x.db" >/dev/null 2>"$tmp/err5")
[ $? = 1 ] && grep -q "^error: 'runs': no such directory" "$tmp/err5" || { echo "FAIL: missing ./runs"; fail=1; }
"$LB" collect --db "$db" --bogus >/dev/null 2>&1
[ $? = 2 ] || { echo "FAIL: an unknown option is not a usage error"; fail=1; }

# --sweep: a run whose log names no sweep (started by hand) is filed under NAME; a run
# of a job script keeps its own; a bad name is a usage error
"$LB" collect --db "$tmp/s.db" --sweep by-hand "$tmp/runs" >/dev/null 2>&1
got=$("$LB" sql --db "$tmp/s.db" --format csv "SELECT sweep, count(*) FROM runs GROUP BY sweep ORDER BY sweep" | tr '\n' ' ')
[ "$got" = "sweep,count(*) by-hand,1 fixture-sweep,8 " ] ||
	{ echo "FAIL: collect --sweep: runs by sweep: $got"; fail=1; }
"$LB" collect --db "$tmp/s.db" --sweep 'no spaces' "$tmp/runs" >/dev/null 2>"$tmp/err6"
[ $? = 2 ] && grep -q "^error: --sweep: sweep name 'no spaces' has ' ' at character 3: a sweep name is" "$tmp/err6" ||
	{ cat "$tmp/err6"; echo "FAIL: collect --sweep with a bad name"; fail=1; }

[ $fail = 0 ] && echo "collect cli: ok"
exit $fail
