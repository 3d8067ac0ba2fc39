#!/bin/sh
# The one-GPU grid by successive halving on a GPU host without Slurm, over as many calls
# of a time limit as it takes: the local executor runs the job scripts there (--device cuda
# from the spec's cluster.device, one job at a time), the halving's state lives in its
# results database, and each call follows it until its budget is spent, then writes the
# state out; the next call (on the same machine, or on a fresh one given that state)
# resumes it (docs/halving.md, "On a GPU host"). Nothing of the halving runs on after a
# call: its local worker and running jobs are stopped when the budget is spent.
#
#   BUILD=carry sh bench/gpu/halving.sh BUDGET_S [SPEC [ETA]]
#
# SPEC defaults to h200-1gpu-halving (embedded), ETA to 8. BUILD names the folder of the
# binaries: layoutbench (a CLI built without libslurm and libcurl, which the local
# executor does not need: make BUILD=build-host WITH_SLURM=0 WITH_CURL=0 WITH_CUDA=0
# build-host/layoutbench, copied there) and layoutbench-train (with CUDA); $BUILD/lib,
# when present, goes on LD_LIBRARY_PATH (libsqlite3.so.0 and libcjson.so.1 where the host
# lacks them). docs/halving.md, "On a GPU host", has the steps.
#
# LB_HALVING_ARGS: more options for the first call's submit (e.g. "--top 16": rung 0 runs
# the 16 layouts of best predicted MFU).
#
# The working state is in LB_HALVING_DIR (default /tmp/lbh: h.db and runs/, paths the
# job scripts hold absolutely). When it has no database and $BUILD/halving/h.db exists (an
# earlier call's $OUT/state carried here), that state is copied in first. A job the last
# call left running on a machine that is gone reads node_fail and runs once more.
#
# Writes $OUT/state/ (h.db, a consistent copy made with VACUUM INTO, and runs/: carry it
# as $BUILD/halving to resume on a fresh machine), $OUT/status.txt (the rungs so far),
# and once the halving is done $OUT/report.md (report --figure halving). Exit 0 whether or
# not the halving ended in this call (status.txt says); 1 on an error.
set -u
[ $# -ge 1 ] || { echo "usage: sh bench/gpu/halving.sh BUDGET_S [SPEC [ETA]]" >&2; exit 2; }
budget=$1
spec=${2:-h200-1gpu-halving}
eta=${3:-8}
BUILD=${BUILD:-build}
ROOT=$(pwd)
OUTD=${OUT:-$ROOT/$BUILD/halving-out}
DIR=${LB_HALVING_DIR:-/tmp/lbh}
LB="$ROOT/$BUILD/layoutbench"
export LAYOUTBENCH_TRAIN="$ROOT/$BUILD/layoutbench-train"
. "$(dirname "$0")/env.sh"
[ -x "$LB" ] && [ -x "$LAYOUTBENCH_TRAIN" ] ||
	{ echo "error: no $LB or $LAYOUTBENCH_TRAIN (build them, or set BUILD to their folder)" >&2; exit 1; }
"$LB" version >/dev/null 2>&1 ||
	{ echo "error: $LB does not start here (copy libsqlite3.so.0 and libcjson.so.1 into $BUILD/lib)" >&2; exit 1; }
mkdir -p "$OUTD" "$DIR" || exit 1
DB="$DIR/h.db"
t0=$(date +%s)

if [ ! -f "$DB" ] && [ -f "$BUILD/halving/h.db" ]; then
	cp "$BUILD/halving/h.db" "$DB" && cp -R "$BUILD/halving/runs" "$DIR/" ||
		{ echo "error: cannot copy the carried state into $DIR" >&2; exit 1; }
	echo "resuming from the carried state in $BUILD/halving"
fi
name=$("$LB" plan "$spec" 2>/dev/null | sed -n "s/^plan '\([^']*\)': .*/\1/p")
[ -n "$name" ] || { echo "error: cannot plan '$spec'" >&2; exit 1; }
# the first call submits; every later one (and this one) follows the running halving
state=$("$LB" sql --db "$DB" --format tsv "SELECT state FROM halvings WHERE sweep = '$name'
	ORDER BY id DESC LIMIT 1" 2>/dev/null | tail -n 1)
if [ -z "$state" ] || [ "$state" = state ]; then
	"$LB" submit "$spec" --executor local --db "$DB" --runs "$DIR/runs" --halving "$eta" \
		${LB_HALVING_ARGS:-} --quiet >"$OUTD/submit.txt" 2>&1 || { cat "$OUTD/submit.txt"; exit 1; }
	cat "$OUTD/submit.txt"
fi
left=$((budget - ($(date +%s) - t0) - 20))
[ $left -gt 0 ] && timeout "$left" "$LB" status --db "$DB" --sweep "$name" --wait \
	>"$OUTD/wait.txt" 2>"$OUTD/wait.err"
"$LB" status --db "$DB" --sweep "$name" >"$OUTD/status.txt" 2>&1
# the budget is spent: this halving's local worker and the jobs it runs (each in a process
# group of its own, slurm_local_tasks) stop here, after the last command that polls (a
# poll starts a worker again where jobs wait), so that nothing of it runs on beside
# whatever the machine does next; the next call's status finds the worker gone, reads its
# running jobs as node_fail (submitted once more on their rung) and starts a worker
tasks() { "$LB" sql --db "$DB" --format tsv "SELECT pid FROM slurm_local_tasks" 2>/dev/null |
	tail -n +2; }
pids=$(tasks)
for d in /proc/[0-9]*; do # the worker (no pkill: minimal hosts lack procps)
	tr '\0' ' ' <"$d/cmdline" 2>/dev/null | grep -qF -- "--local-worker --db $DB " &&
		kill "${d#/proc/}" 2>/dev/null
done
for p in $pids $(tasks); do
	[ "$p" -gt 1 ] 2>/dev/null && kill -- "-$p" 2>/dev/null
done
# the state (VACUUM INTO: a consistent copy)
mkdir -p "$OUTD/state"
rm -f "$OUTD/state/h.db"
"$LB" sql --db "$DB" --write "VACUUM INTO '$OUTD/state/h.db'" >/dev/null ||
	{ echo "error: cannot copy the database to $OUTD/state" >&2; exit 1; }
cp -R "$DIR/runs" "$OUTD/state/" || exit 1
state=$("$LB" sql --db "$DB" --format tsv "SELECT state FROM halvings WHERE sweep = '$name'
	ORDER BY id DESC LIMIT 1" | tail -n 1)
[ "$state" = done ] && "$LB" report --db "$DB" --sweep "$name" --figure halving \
	>"$OUTD/report.md" 2>/dev/null
grep -A 12 "^halving " "$OUTD/status.txt"
echo "halving of '$name': $state after this call's $(($(date +%s) - t0)) s"
exit 0
