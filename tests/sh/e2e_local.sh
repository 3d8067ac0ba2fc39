#!/bin/sh
# End to end through one executor (LB_E2E_EXECUTOR: local, the default, needs no Slurm;
# e2e_slurm.sh and e2e_rest.sh run this with slurm and rest against the single-node
# cluster of scripts/slurm-local.sh):
#   1. the quickstart sweep: submit --wait, every layout's run and steps in the database,
#      a report from it, a second submit skips everything;
#   2. failures injected by the test through a wrapper trainer (LAYOUTBENCH_TRAIN) and
#      fault files: a run past a 1-minute time limit (timeout), an allocation cap (oom),
#      an exit 127 (launch_error), and a sweep cancelled while running (cancelled);
#      `status` must class each; the test removes the faults and `resubmit --wait` must
#      bring every layout to completion (the oom only with --force: it warns without).
# LB_E2E_FAILURES=0 skips part 2 (the rest test only runs part 1 and the cancel case).
set -u
BUILD=${BUILD:-build}
EXECUTOR=${LB_E2E_EXECUTOR:-local}
FAILURES=${LB_E2E_FAILURES:-1}
ROOT=$(pwd)
LB="$ROOT/$BUILD/layoutbench"
TRAIN="$ROOT/$BUILD/layoutbench-train"
unset SLURM_JWT LAYOUTBENCH_TRAIN LAYOUTBENCH_DB LAYOUTBENCH_MEM_LIMIT

if [ "$EXECUTOR" != local ]; then
	skip="no Slurm (set LB_SLURM_TESTS=1 and run scripts/slurm-local.sh start)"
	[ "${LB_SLURM_TESTS:-0}" = 1 ] || { echo "$skip"; exit 77; }
	envf=${LB_SLURM_DIR:-/run/layoutbench-slurm}/env
	# shellcheck disable=SC1090
	[ -r "$envf" ] && . "$envf"
	out=$(scontrol ping 2>&1)
	case "$out" in *"is UP"*) ;; *) echo "$skip"; exit 77 ;; esac
	if [ "$EXECUTOR" = rest ] && [ -z "${SLURMRESTD_URL:-}" ]; then
		echo "$skip"
		exit 77
	fi
fi

[ -x "$LB" ] && [ -x "$TRAIN" ] || { echo "no $LB or $TRAIN (make BUILD=$BUILD first)"; exit 1; }

W=$(mktemp -d /tmp/lb-e2e-$EXECUTOR.XXXXXX)
trap '"$LB" cancel --db "$W/e2e.db" >/dev/null 2>&1; rm -rf "$W"' EXIT
cd "$W" || exit 1
DB="$W/e2e.db"
RUNS="$W/runs"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
q() { sqlite3 -cmd ".timeout 10000" "$DB" "$1"; } # a worker may hold a write lock a moment
T0=$(date +%s)
lap() { echo "  ($(($(date +%s) - T0)) s) $*"; }
SUB="--executor $EXECUTOR --db $DB --runs $RUNS --slots 8"

# ---------------------------------------------------------------- 1. quickstart
# every runnable layout of the embedded quickstart sweep, as plan counts them
N=$("$LB" plan quickstart --format csv 2>/dev/null | awk -F, 'NR > 1 && $16 == "ok"' | wc -l)
[ "$N" -gt 0 ] || bad "plan quickstart lists no runnable layout"
"$LB" submit quickstart $SUB --wait >q.out 2>q.err
rc=$?
[ $rc = 0 ] || { bad "quickstart submit --wait exited $rc"; tail -n 20 q.err; }
grep -q "^sweep 'quickstart': $N completed, 0 failed" q.out || bad "quickstart: $(cat q.out)"
[ "$(q "SELECT COUNT(*) FROM jobs WHERE sweep='quickstart' AND state='COMPLETED' AND executor='$EXECUTOR'")" = "$N" ] ||
	bad "quickstart: not $N COMPLETED jobs: $(q "SELECT job_id, state FROM jobs")"
[ "$(q "SELECT COUNT(*) FROM runs WHERE sweep='quickstart' AND status='ok' AND job_ref IS NOT NULL")" = "$N" ] ||
	bad "quickstart: not $N ok runs tied to their jobs"
[ "$(q "SELECT COUNT(*) FROM steps JOIN runs ON runs.id = steps.run_id WHERE runs.sweep='quickstart'")" = $((N * 8)) ] ||
	bad "quickstart: not $N x 8 steps in the database"
"$LB" report --db "$DB" --sweep quickstart --figure all --format md >report.md 2>report.err ||
	bad "report failed: $(cat report.err)"
grep -q "quickstart" report.md || bad "the report does not name the sweep"
"$LB" submit quickstart $SUB >q2.out 2>&1 || bad "second submit failed: $(cat q2.out)"
grep -q "nothing to submit ($N layout(s) done" q2.out || bad "second submit: $(cat q2.out)"
lap "quickstart: $N layouts completed and collected"
# REST: with no --rest-version the client spoke the newest version both sides know (we
# speak v0.0.38 .. v0.0.42), as the server's log of the submission shows
if [ "$EXECUTOR" = rest ] && [ -r "${SLURMRESTD_LOG:-}" ]; then
	want=$(curl -s -H "X-SLURM-USER-NAME: ${SLURMRESTD_USER:-root}" \
		-H "X-SLURM-USER-TOKEN: ${SLURMRESTD_TOKEN:-}" "$SLURMRESTD_URL/openapi/v3" |
		tr -d '\\' | grep -o '"/slurm/v0\.0\.[0-9]*/job/submit/\{0,1\}"' |
		sed 's|.*/v0\.0\.\([0-9]*\)/.*|\1|' | awk '$1 >= 38 && $1 <= 42' | sort -n | tail -n 1)
	if [ -z "$want" ]; then
		bad "slurmrestd's OpenAPI document lists no version we speak"
	elif ! grep -q "POST /slurm/v0\.0\.$want/job/submit" "$SLURMRESTD_LOG"; then
		bad "the rest executor did not speak v0.0.$want: $(grep -o 'POST /slurm/[^ ]*' "$SLURMRESTD_LOG" | sort | uniq -c)"
	fi
	lap "rest: spoke v0.0.$want, the newest the server and layoutbench share"
fi

# ---------------------------------------------------------------- 2. failures
cat >"$W/train-wrap" <<EOF
#!/bin/sh
# the trainer with faults the test injects (files in $W)
mb=
prev=
for a in "\$@"; do [ "\$prev" = --micro-batch ] && mb=\$a; prev=\$a; done
case \$mb in
1) [ -e "$W/fault-slow" ] && exec sleep 600 ;;
2) [ -e "$W/fault-oom" ] && exec "$TRAIN" "\$@" --mem-limit 1K ;;
4) [ -e "$W/fault-launch" ] && exit 127 ;;
esac
exec "$TRAIN" "\$@"
EOF
chmod +x "$W/train-wrap"
cat >fail.json <<'EOF'
{"name": "e2e-fail", "model": "tiny", "fixed": {"seq_len": 64, "global_batch": 8},
 "grid": {"micro_batch": [1, 2, 4, 8]}, "run": {"steps": 3, "warmup": 1},
 "cluster": {"time_limit": 1, "gpus_per_node": 1, "device": "cpu"}}
EOF
cat >cancel.json <<'EOF'
{"name": "e2e-cancel", "model": "tiny", "fixed": {"seq_len": 64, "global_batch": 8},
 "grid": {"micro_batch": [1]}, "run": {"steps": 3, "warmup": 1},
 "cluster": {"time_limit": 5, "gpus_per_node": 1, "device": "cpu"}}
EOF
touch fault-slow fault-oom fault-launch
export LAYOUTBENCH_TRAIN="$W/train-wrap"
specs="cancel.json"
[ "$FAILURES" = 1 ] && specs="fail.json cancel.json"
for s in $specs; do
	"$LB" submit "$s" $SUB >>f.out 2>>f.err || { bad "submit $s failed"; cat f.err; }
done
# a sweep in flight is not submitted twice
"$LB" submit cancel.json $SUB >dup.out 2>&1 || bad "second submit of e2e-cancel failed"
grep -q "nothing to submit (0 layout(s) done, 1 pending or running" dup.out ||
	bad "e2e-cancel submitted twice: $(cat dup.out)"
# cancel e2e-cancel once its job runs
n=0
until q "SELECT state FROM jobs WHERE sweep='e2e-cancel'" | grep -q RUNNING; do
	"$LB" status --db "$DB" --sweep e2e-cancel >/dev/null 2>&1
	n=$((n + 1))
	[ $n -gt 60 ] && { bad "e2e-cancel never ran: $(q "SELECT state FROM jobs WHERE sweep='e2e-cancel'")"; break; }
	sleep 1
done
"$LB" cancel --db "$DB" --sweep e2e-cancel >c.out 2>&1 || bad "cancel failed: $(cat c.out)"
grep -q "^cancelled 1 job" c.out || bad "cancel said: $(cat c.out)"
lap "e2e-cancel cancelled"
# wait until the failure sweep has ended (the time limit is 1 minute)
sweeps="e2e-cancel"
[ "$FAILURES" = 1 ] && sweeps="e2e-fail e2e-cancel"
n=0
while :; do
	"$LB" status --db "$DB" >st.out 2>&1
	left=$(q "SELECT COUNT(*) FROM jobs WHERE sweep LIKE 'e2e-%' AND state IN ('PENDING','RUNNING','COMPLETING','CONFIGURING')")
	[ "$left" = 0 ] && break
	n=$((n + 1))
	[ $n -gt 200 ] && { bad "failure sweeps did not end: $(cat st.out)"; break; }
	sleep 1
done
cls() { q "SELECT failure_class FROM jobs j JOIN layouts l USING (layout_id) WHERE j.sweep='$1' AND l.micro_batch=$2 ORDER BY j.id DESC LIMIT 1"; }
[ "$(cls e2e-cancel 1)" = cancelled ] || bad "cancelled job classed '$(cls e2e-cancel 1)'"
if [ "$FAILURES" = 1 ]; then
	[ "$(cls e2e-fail 1)" = timeout ] || bad "time limit classed '$(cls e2e-fail 1)'"
	[ "$(cls e2e-fail 2)" = oom ] || bad "allocation cap classed '$(cls e2e-fail 2)'"
	[ "$(cls e2e-fail 4)" = launch_error ] || bad "exit 127 classed '$(cls e2e-fail 4)'"
	[ -z "$(cls e2e-fail 8)" ] || bad "the good layout classed '$(cls e2e-fail 8)'"
	grep -q "class timeout *1" st.out || bad "status does not count the timeout: $(cat st.out)"
	grep -q "class oom *1" st.out || bad "status does not count the oom"
	grep -q "class launch_error *1" st.out || bad "status does not count the launch error"
fi
grep -q "class cancelled *1" st.out || bad "status does not count the cancellation"
lap "failures classed: $(grep -c '^  failed ' st.out) failed layouts"

# ---------------------------------------------------------------- 3. resubmit
rm -f fault-slow fault-oom fault-launch
"$LB" resubmit --db "$DB" --wait >r.out 2>r.err
rc=$?
[ $rc = 0 ] || { bad "resubmit --wait exited $rc: $(cat r.out r.err | tail -n 20)"; }
if [ "$FAILURES" = 1 ]; then
	# an out-of-memory failure repeats itself: left out with a warning, unless --force
	grep -q "^warning: sweep 'e2e-fail': 1 layout(s) ran out of memory, .*--force resubmits them" r.err ||
		bad "resubmit did not warn about the oom: $(cat r.err)"
	[ "$(cls e2e-fail 2)" = oom ] || bad "resubmit reran the oom without --force"
	"$LB" resubmit --db "$DB" --class oom --wait >r2.out 2>r2.err
	grep -q "^sweep 'e2e-fail': nothing to resubmit" r2.out && grep -q "ran out of memory" r2.err ||
		bad "resubmit --class oom: $(cat r2.out r2.err)"
	"$LB" resubmit --db "$DB" --class oom --force --wait >r3.out 2>r3.err ||
		bad "resubmit --class oom --force --wait: $(cat r3.out r3.err | tail -n 20)"
fi
"$LB" status --db "$DB" >st2.out 2>&1
for s in $sweeps; do
	total=$(q "SELECT COUNT(DISTINCT layout_id) FROM jobs WHERE sweep='$s'")
	ok=$(q "SELECT COUNT(*) FROM (SELECT layout_id, state, failure_class, MAX(id) FROM jobs WHERE sweep='$s' GROUP BY layout_id) WHERE state='COMPLETED' AND failure_class IS NULL")
	[ "$ok" = "$total" ] || bad "$s: $ok of $total layouts completed after resubmit: $(cat st2.out)"
done
[ "$FAILURES" = 1 ] && { [ "$(q "SELECT MAX(attempt) FROM jobs WHERE sweep='e2e-fail'")" = 2 ] ||
	bad "resubmitted jobs are not attempt 2"; }
lap "resubmit: every layout completed"

# ---------------------------------------------------------------- 4. lost jobs
# a job the scheduler no longer knows (Slurm: purged after MinJobAge; local: its worker
# is gone) and that left no run log
lid=$(q "SELECT layout_id FROM jobs WHERE sweep='quickstart' LIMIT 1")
q "INSERT INTO jobs (executor, sweep, layout_id, job_id, array_job_id, array_index, state,
	submit_time, run_dir) VALUES ('$EXECUTOR', 'quickstart', '$lid', '999999_0', '999999', 0,
	'RUNNING', strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), '$W/nowhere')"
"$LB" status --db "$DB" --sweep quickstart >st3.out 2>&1
lost=$(q "SELECT state || ' ' || failure_class FROM jobs WHERE job_id='999999_0'")
if [ "$EXECUTOR" = local ]; then
	[ "$lost" = "NODE_FAIL node_fail" ] || bad "a job whose worker is gone is '$lost'"
else
	[ "$lost" = "UNKNOWN unknown" ] || bad "a job unknown to slurmctld is '$lost'"
fi
grep -q "^  failed $lid" st3.out || bad "status does not list the lost job: $(cat st3.out)"
lap "a lost job: $lost"

# ---------------------------------------------------------------- 5. REST over the socket
if [ "$EXECUTOR" = rest ] && [ -n "${SLURMRESTD_SOCKET:-}" ]; then
	SLURMRESTD_URL="unix:$SLURMRESTD_SOCKET" "$LB" submit cancel.json $SUB --force --wait \
		>u.out 2>&1 || bad "submit through the unix socket: $(cat u.out)"
	grep -q "^sweep 'e2e-cancel': 1 completed, 0 failed" u.out || bad "unix socket: $(cat u.out)"
	lap "slurmrestd over unix:$SLURMRESTD_SOCKET"
fi
[ "$fail" = 0 ] && echo "e2e ($EXECUTOR): all passed in $(($(date +%s) - T0)) s"
exit $fail
