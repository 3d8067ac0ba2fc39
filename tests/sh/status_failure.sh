#!/bin/sh
# `status` says why a run failed in the trainer's words: a layout trained at run.lr 1e6
# diverges, and its line shows the run log's class and message ("diverged: loss is nan at
# step 2 (lower --lr or --clip)") with the scheduler's class and reason after them, not
# only "failed: NonZeroExitCode"; a reason that repeats the class is not repeated
# ("cancelled", not "cancelled: cancelled").
set -u
B=${BUILD:-build}
root=$(pwd)
case "$B" in /*) ;; *) B="$root/$B" ;; esac
LB=$B/layoutbench
export LAYOUTBENCH_TRAIN="$B/layoutbench-train"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail=0
printf '{"name": "lrbig", "model": "tiny", "fixed": {"seq_len": 32, "global_batch": 4, "micro_batch": 2}, "run": {"steps": 4, "warmup": 1, "lr": 1e6}, "cluster": {"device": "cpu", "gpus_per_node": 1}}\n' >s.json
"$LB" submit s.json --executor local --db r.db --runs runs --wait --quiet >submit.out 2>&1
grep -q "^sweep 'lrbig': 0 completed, 1 failed" submit.out ||
	{ cat submit.out; echo "FAIL: the lr 1e6 layout did not fail"; exit 1; }
"$LB" status --db r.db --sweep lrbig >out 2>err || { cat err; echo "FAIL: status exited non-zero"; fail=1; }
grep -qE '^  failed [0-9a-f]{16}  job [^ ]+ \(local\)  FAILED  diverged: loss is nan at step [0-9]+ \(lower --lr or --clip\) \(scheduler: failed, NonZeroExitCode\)$' out ||
	{ cat out; echo "FAIL: status does not show the trainer's class and message"; fail=1; }

# a cancelled job without a run: its class once
id=$(sed -n 's/^  failed \([0-9a-f]*\) .*/\1/p' out)
"$LB" sql --db r.db --write "INSERT INTO sweeps (name, source) VALUES ('c2', 'adhoc');
INSERT INTO jobs (executor, sweep, layout_id, job_id, state, reason, failure_class, run_dir)
VALUES ('local', 'c2', '$id', '9_0', 'CANCELLED', 'cancelled', 'cancelled', '$tmp/runs/c2/$id')" >/dev/null ||
	{ echo "FAIL: could not add the cancelled job"; exit 1; }
"$LB" status --db r.db --sweep c2 >out 2>err
grep -qx "  failed $id  job 9_0 (local)  CANCELLED  cancelled" out ||
	{ cat out err; echo "FAIL: a cancelled job's line is not '... CANCELLED  cancelled'"; fail=1; }
exit $fail
