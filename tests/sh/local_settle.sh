#!/bin/sh
# Settling jobs of the local executor, no Slurm needed:
#   1. cancel, then status: the run whose trainer wrote its end record ('killed', by
#      SIGTERM) after the cancel reads 'failed'/'killed', not 'running';
#   2. a trainer killed before it could write its end record: status closes the run as
#      failed/killed and says why;
#   3. submit --wait on a job that fails at once without a run log reports it at once
#      (the 20 s grace for late logs is for shared file systems, not for this machine's).
set -u
BUILD=${BUILD:-build}
ROOT=$(pwd)
LB="$ROOT/$BUILD/layoutbench"
TRAIN="$ROOT/$BUILD/layoutbench-train"
[ -x "$LB" ] && [ -x "$TRAIN" ] || { echo "no $LB or $TRAIN (make BUILD=$BUILD first)"; exit 1; }
unset SLURM_JWT LAYOUTBENCH_TRAIN LAYOUTBENCH_DB LAYOUTBENCH_MEM_LIMIT
W=$(mktemp -d /tmp/lb-settle.XXXXXX)
trap '"$LB" cancel --db "$W/s.db" >/dev/null 2>&1; rm -rf "$W"' EXIT
cd "$W" || exit 1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
q() { sqlite3 -cmd ".timeout 10000" "$W/s.db" "$1"; } # the local worker may hold a write lock a moment
SUB="--executor local --db $W/s.db --runs $W/runs"

# spec NAME: one tiny single-rank layout that trains for long
spec() {
	cat >"$1.json" <<EOF2
{"name": "$1", "model": "tiny", "fixed": {"seq_len": 32, "global_batch": 4, "micro_batch": 1,
 "gpus": 1}, "run": {"steps": 1000000, "warmup": 1}, "cluster": {"time_limit": 5, "device": "cpu"}}
EOF2
}
# run_of SWEEP: "status class message" of its run
run_of() { q "SELECT r.status || '|' || ifnull(r.failure_class, '') || '|' || ifnull(r.message, '')
	FROM runs r JOIN jobs j ON r.job_ref = j.id WHERE j.sweep = '$1'"; }
# cancel_when_logging SWEEP: wait until its trainer writes steps, then cancel it
cancel_when_logging() {
	n=0
	until grep -qs '"type":"step"' "$W/runs/$1"/*/run-*.jsonl; do
		n=$((n + 1))
		[ $n -gt 120 ] && { bad "$1: no step logged"; return; }
		sleep 0.5
	done
	"$LB" cancel --db "$W/s.db" --sweep "$1" >"$1.cancel" 2>&1 || bad "$1: cancel: $(cat "$1.cancel")"
}
# settle SWEEP: status until the run is no longer running (at most 20 s)
settle() {
	n=0
	while :; do
		"$LB" status --db "$W/s.db" --sweep "$1" >"$1.status" 2>&1 || bad "$1: status: $(cat "$1.status")"
		case "$(run_of "$1")" in running*) ;; *) return ;; esac
		n=$((n + 1))
		[ $n -gt 20 ] && return
		sleep 1
	done
}

# 1. the trainer writes its end record after the cancel
spec s1
"$LB" submit s1.json $SUB >s1.out 2>&1 || bad "s1: submit: $(cat s1.out)"
cancel_when_logging s1
settle s1
got=$(run_of s1)
case "$got" in
"failed|killed|stopped by signal 15 (SIGTERM)") echo "ok: cancel, then status: the run is $got" ;;
*) bad "cancel, then status: the run is '$got', want failed|killed from its log" ;;
esac

# 2. a trainer that dies by SIGKILL on SIGTERM: no end record, ever
# (in a session of its own, so that the cancel's SIGTERM to the job's process group reaches
# only this wrapper, which answers with SIGKILL before the trainer could write its end)
cat >"$W/train-kill9" <<EOF2
#!/bin/sh
setsid "$TRAIN" "\$@" &
pid=\$!
trap 'kill -9 \$pid' TERM
wait \$pid
wait \$pid
EOF2
chmod +x "$W/train-kill9"
spec s2
LAYOUTBENCH_TRAIN="$W/train-kill9" "$LB" submit s2.json $SUB >s2.out 2>&1 || bad "s2: submit: $(cat s2.out)"
cancel_when_logging s2
settle s2
got=$(run_of s2)
case "$got" in
"failed|killed|the job ended (CANCELLED) before the run log's end record") echo "ok: a log without its end: $got" ;;
*) bad "a log without its end record: the run is '$got'" ;;
esac

# 3. a job that fails at once, no log: --wait says so at once
cat >"$W/train-fail" <<'EOF2'
#!/bin/sh
echo "this trainer fails at once" >&2
exit 1
EOF2
chmod +x "$W/train-fail"
cat >s3.json <<'EOF2'
{"name": "s3", "model": "tiny", "fixed": {"seq_len": 32, "global_batch": 4, "micro_batch": 1,
 "gpus": 1}, "run": {"steps": 2, "warmup": 1}, "cluster": {"time_limit": 5, "device": "cpu"}}
EOF2
t0=$(date +%s)
LAYOUTBENCH_TRAIN="$W/train-fail" "$LB" submit s3.json $SUB --wait >s3.out 2>&1
rc=$?
dt=$(($(date +%s) - t0))
[ $rc = 1 ] || bad "s3: submit --wait exited $rc, want 1: $(cat s3.out)"
grep -q "^sweep 's3': 0 completed, 1 failed" s3.out || bad "s3: $(cat s3.out)"
if [ $dt -lt 12 ]; then
	echo "ok: a job that failed at once reported in $dt s"
else
	bad "s3: --wait took $dt s to report a job that failed at once"
fi
exit $fail
