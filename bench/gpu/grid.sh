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
# LB_GRID_EST names a file of "INDEX SECONDS" lines, each index's own expected wall (e.g.
# from a short probe of the same layouts: 3 s + steps x its step time); an index it does
# not list expects EST_S. Long and short layouts then pack a call's budget closely.
#
# LB_GRID_DONE names folders of run logs already made (the layout-id folders a job script
# writes, e.g. an earlier call's $LAYOUTBENCH_RUNS/SWEEP, or published runs): an index whose
# layout has a run log there that ended ok is skipped, so a grid larger than one call's
# time is finished over several calls by giving each the whole index list.
#
# Writes $OUT/grid.tsv (index, exit status, wall seconds; "done" for a skipped index) and
# $OUT/grid-left.txt (the indices not started); prints a short table last. Exit 0 when
# every started task ran, whatever its status (the run logs are the result).
set -u
[ $# -ge 3 ] || { echo "usage: sh bench/gpu/grid.sh SCRIPT BUDGET_S EST_S INDEX..." >&2; exit 2; }
script=$1 budget=$2 est=$3
shift 3
[ -f "$script" ] || { echo "error: no job script '$script' (render it with layoutbench plan SPEC --render DIR)" >&2; exit 2; }
if [ -n "${LB_GRID_EST:-}" ]; then
	[ -r "$LB_GRID_EST" ] ||
		{ echo "error: LB_GRID_EST '$LB_GRID_EST' is not a readable file of 'INDEX SECONDS' lines" >&2; exit 2; }
	bad=$(awk 'NF && (NF != 2 || $1 !~ /^[0-9]+$/ || $2 !~ /^[0-9]+([.][0-9]+)?$/) { print NR ": " $0; exit }' "$LB_GRID_EST")
	[ -z "$bad" ] ||
		{ echo "error: LB_GRID_EST '$LB_GRID_EST' line $bad: want 'INDEX SECONDS' (an array index, a number of seconds)" >&2; exit 2; }
fi
OUTD=${OUT:-.}
. "$(dirname "$0")/env.sh"
mkdir -p "$OUTD" || exit 1
tsv="$OUTD/grid.tsv"
: >"$tsv"
: >"$OUTD/grid-left.txt"
# 1 when the layout of index $1 already has a run log that ended ok in LB_GRID_DONE
done_before() {
	[ -n "${LB_GRID_DONE:-}" ] || return 1
	id=$(sed -n "s/^$1) layout=\([0-9a-f]*\)$/\1/p" "$script")
	[ -n "$id" ] || return 1
	for d in $LB_GRID_DONE; do
		for f in "$d/$id"/run-*.jsonl; do
			[ -f "$f" ] && tail -n 1 "$f" | grep -q '"type":"end","status":"ok"' && return 0
		done
	done
	return 1
}
t0=$(date +%s)
ran=0 ok=0 left=0 skipped=0
for i in "$@"; do
	if done_before "$i"; then
		printf '%s\tdone\t0\n' "$i" >>"$tsv"
		skipped=$((skipped + 1))
		continue
	fi
	now=$(date +%s)
	e=$est
	if [ -n "${LB_GRID_EST:-}" ]; then
		e=$(awk -v i="$i" -v d="$est" '$1 == i { v = $2 } END { print (v == "" ? d : int(v + 0.999)) }' "$LB_GRID_EST")
	fi
	if [ $((now - t0 + e)) -gt "$budget" ]; then
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
echo "| tasks run | exit 0 | done before | not started (time) | wall s |"
echo "|---|---|---|---|---|"
echo "| $ran | $ok | $skipped | $left | $(($(date +%s) - t0)) |"
exit 0
