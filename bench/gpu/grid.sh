#!/bin/sh
# Runs a rendered job array's tasks on this GPU host, without Slurm, the way README
# "Running on a GPU machine" does by hand, in the order given, within a time budget:
#
#   sh bench/gpu/grid.sh SCRIPT BUDGET_S EST_S INDEX...
#
# SCRIPT is a rendered array script (`layoutbench plan SPEC --render DIR`: DIR/a0.sbatch);
# each INDEX runs as `SLURM_ARRAY_TASK_ID=INDEX bash SCRIPT` (the script starts the trainer
# itself when there is no SLURM_JOB_ID; LAYOUTBENCH_TRAIN names the trainer). An index is
# started only while the time used plus EST_S (a task's expected wall) fits in BUDGET_S,
# so the call ends inside its limit with every started task finished and its run log
# whole; the indices left are listed so that the next call can take them. A task that
# fails (out of memory included: the run log's end record says why) does not stop the rest.
#
# Writes $OUT/grid.tsv (index, exit status, wall seconds) and $OUT/grid-left.txt (the
# indices not started); prints a short table last. Exit 0 when every started task ran,
# whatever its status (the run logs are the result).
set -u
[ $# -ge 3 ] || { echo "usage: sh bench/gpu/grid.sh SCRIPT BUDGET_S EST_S INDEX..." >&2; exit 2; }
script=$1 budget=$2 est=$3
shift 3
[ -f "$script" ] || { echo "error: no job script '$script' (render it with layoutbench plan SPEC --render DIR)" >&2; exit 2; }
OUTD=${OUT:-.}
export NCCL_NVLS_ENABLE=0
mkdir -p "$OUTD" || exit 1
tsv="$OUTD/grid.tsv"
: >"$tsv"
: >"$OUTD/grid-left.txt"
t0=$(date +%s)
ran=0 ok=0 left=0
for i in "$@"; do
	now=$(date +%s)
	if [ $((now - t0 + est)) -gt "$budget" ]; then
		echo "$i" >>"$OUTD/grid-left.txt"
		left=$((left + 1))
		continue
	fi
	s=$(date +%s)
	SLURM_ARRAY_TASK_ID=$i bash "$script" >"$OUTD/task-$i.log" 2>&1
	st=$?
	printf '%s\t%s\t%s\n' "$i" "$st" "$(($(date +%s) - s))" >>"$tsv"
	ran=$((ran + 1))
	[ "$st" = 0 ] && ok=$((ok + 1))
done
echo
echo "| tasks run | exit 0 | not started (time) | wall s |"
echo "|---|---|---|---|"
echo "| $ran | $ok | $left | $(($(date +%s) - t0)) |"
exit 0
