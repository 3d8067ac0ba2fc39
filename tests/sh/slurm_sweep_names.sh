#!/bin/sh
# A misspelled --sweep is an error, not an empty answer: status, cancel, resubmit and
# report name the sweep, the database and the sweeps it knows, and exit 1; a known sweep
# without jobs still answers. resubmit of a sweep with no stored spec names the sweep
# once. plan --render creates the folder of #SBATCH --output/--error (Slurm does not) and
# only warns where it cannot.
set -u
BUILD=${BUILD:-build}
LB="$(pwd)/$BUILD/layoutbench"
[ -x "$LB" ] || { echo "no $LB (make BUILD=$BUILD first)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
cd "$tmp" || exit 1

# a database with three sweeps (one with a failed job of a layout) and nothing else
"$LB" status --db results.db >/dev/null 2>&1 # creates it with the schema
"$LB" sql --db results.db --write "
INSERT INTO sweeps (name, source) VALUES ('a', 'adhoc'), ('b', 'adhoc'), ('c', 'paper');
INSERT INTO layouts (layout_id, model, n_layers, hidden, n_heads, n_kv_heads, ffn, vocab,
	tied, seq_len, global_batch, micro_batch, tp, pp, dp, gpus, gpus_per_node, nodes,
	sequence_parallel, zero_stage, checkpointing, attention, norm, canonical)
VALUES ('00000000000000aa', 'tiny', 4, 64, 4, 4, 256, 512, 0, 64, 8, 1, 1, 1, 1, 1, 1, 1,
	0, 0, 'none', 'flash', 'fused', 'x');
INSERT INTO jobs (executor, sweep, layout_id, job_id, state, failure_class, run_dir)
VALUES ('local', 'b', '00000000000000aa', '1_0', 'FAILED', 'failed', '$tmp/runs/b/x');
" >/dev/null || { echo "FAIL: could not make the test database"; exit 1; }

want="error: no sweep 'nosuch' in database 'results.db' (known: a, b, c)"
for cmd in status cancel resubmit "report --figure all"; do
	# shellcheck disable=SC2086 # $cmd is the command and its flags
	"$LB" $cmd --sweep nosuch >out 2>err
	rc=$?
	[ $rc = 1 ] || bad "$cmd --sweep nosuch exits $rc, not 1"
	[ "$(cat err)" = "$want" ] || bad "$cmd --sweep nosuch says '$(cat err)', not '$want'"
	[ -s out ] && bad "$cmd --sweep nosuch printed to stdout: $(cat out)"
done
# --db names the database as given
"$LB" status --db "$tmp/results.db" --sweep nosuch 2>err
grep -q "in database '$tmp/results.db' (known: a, b, c)" err || bad "status --db: $(cat err)"
echo "ok: status, cancel, resubmit, report refuse an unknown sweep"

# known sweeps still answer
"$LB" status --sweep a >out 2>err || bad "status --sweep a failed: $(cat err)"
grep -q "sweep 'a': 0 layout(s)" out || bad "status --sweep a: $(cat out)"
"$LB" cancel --sweep a >out 2>err || bad "cancel --sweep a failed: $(cat err)"
"$LB" resubmit --sweep a >out 2>err || bad "resubmit --sweep a failed: $(cat err)"
grep -q "sweep 'a': nothing to resubmit" out || bad "resubmit --sweep a: $(cat out)"
"$LB" report --sweep c --figure all >out 2>err || bad "report --sweep c failed: $(cat err)"
echo "ok: known sweeps answer"

# resubmit of a failed job whose sweep has no stored spec: the sweep named once
"$LB" resubmit --sweep b >out 2>err && bad "resubmit --sweep b (no spec) succeeded"
msg=$(cat err)
case $msg in
"error: sweep 'b': no spec stored to plan it again"*) ;;
*) bad "resubmit --sweep b says '$msg'" ;;
esac
[ "$(grep -o "'b'" err | wc -l)" = 1 ] || bad "resubmit names the sweep more than once: $msg"
echo "ok: resubmit without a stored spec names the sweep once"

# plan --render creates <runs>/<sweep>/logs, the folder of #SBATCH --output
LAYOUTBENCH_RUNS="$tmp/runs" "$LB" plan quickstart --render r >/dev/null 2>err ||
	bad "plan --render failed: $(cat err)"
[ -d "$tmp/runs/quickstart/logs" ] || bad "plan --render did not create runs/quickstart/logs"
grep -q "^#SBATCH --output=$tmp/runs/quickstart/logs/a0-%A_%a.out$" r/a0.sbatch ||
	bad "a0.sbatch writes its output elsewhere: $(grep output r/a0.sbatch)"
grep -q warning err && bad "plan --render warned: $(cat err)"
# a runs folder that cannot be made here: a warning naming the folder, scripts written
mkdir ro && touch ro/file
LAYOUTBENCH_RUNS="$tmp/ro/file/runs" "$LB" plan quickstart --render r2 >/dev/null 2>err ||
	bad "plan --render with an unmakeable runs folder failed: $(cat err)"
grep -q "^warning: .*create '$tmp/ro/file/runs/quickstart/logs' before submitting with sbatch" err ||
	bad "no warning for an unmakeable log folder: $(cat err)"
[ -f r2/a0.sbatch ] || bad "no scripts written when the log folder cannot be made"
echo "ok: plan --render creates the log folder, or warns"
exit $fail
