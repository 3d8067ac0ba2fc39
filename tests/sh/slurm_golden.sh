#!/bin/sh
# Golden test of job-script rendering: `layoutbench plan SPEC --render DIR` for the
# quickstart spec and tests/golden/render/cluster.json (every cluster field, two shapes,
# a hostile env value) must give exactly tests/golden/render/<name>/. Trainer path, runs
# folder and throttle are pinned through the environment. Regenerate with
# LB_UPDATE_GOLDEN=1 sh tests/sh/slurm_golden.sh (then read the diff before committing).
set -u
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
[ -x "$LB" ] || { echo "no $LB (make BUILD=$BUILD first)"; exit 1; }
tmp=$(mktemp -d)
# rendering creates the scripts' log folder under the pinned runs folder (/scratch/runs);
# as root that succeeds, so remove what this test made there and nothing else
scratch_was_there=0
[ -e /scratch ] && scratch_was_there=1
cleanup() {
	rm -rf "$tmp"
	if [ "$scratch_was_there" = 0 ]; then
		rm -rf /scratch
	else
		rm -rf /scratch/runs/quickstart/logs /scratch/runs/render-cluster/logs 2>/dev/null
	fi
}
trap cleanup EXIT
export LAYOUTBENCH_TRAIN=/opt/layoutbench/bin/layoutbench-train
export LAYOUTBENCH_RUNS=/scratch/runs
export LAYOUTBENCH_THROTTLE=4
rc=0
for spec in quickstart tests/golden/render/cluster.json; do
	name=$(basename "$spec" .json)
	out="$tmp/$name"
	if ! "$LB" plan "$spec" --render "$out" >"$tmp/$name.plan" 2>"$tmp/$name.err"; then
		echo "FAIL: plan $spec --render failed:"
		cat "$tmp/$name.err"
		rc=1
		continue
	fi
	if [ "${LB_UPDATE_GOLDEN:-0}" = 1 ]; then
		rm -rf "tests/golden/render/$name"
		cp -r "$out" "tests/golden/render/$name"
		echo "updated tests/golden/render/$name"
		continue
	fi
	if ! diff -ru "tests/golden/render/$name" "$out"; then
		echo "FAIL: rendered scripts of $spec differ from tests/golden/render/$name"
		rc=1
	else
		echo "ok: $spec"
	fi
	# every rendered script is valid bash
	for s in "$out"/*.sbatch; do
		bash -n "$s" || { echo "FAIL: $s is not valid bash"; rc=1; }
	done
done
# the dry run of the cluster spec: arrays, shapes, time limits, GPU-hours, layout ids
"$LB" submit tests/golden/render/cluster.json --executor local --dry-run --throttle 4 \
	--db "$tmp/none.db" --runs /scratch/runs >"$tmp/dryrun.txt" 2>"$tmp/dryrun.err" ||
	{ echo "FAIL: dry run failed: $(cat "$tmp/dryrun.err")"; rc=1; }
[ -e "$tmp/none.db" ] && { echo "FAIL: the dry run created the database"; rc=1; }
if [ "${LB_UPDATE_GOLDEN:-0}" = 1 ]; then
	cp "$tmp/dryrun.txt" tests/golden/render/cluster.dryrun
	echo "updated tests/golden/render/cluster.dryrun"
elif ! diff -u tests/golden/render/cluster.dryrun "$tmp/dryrun.txt"; then
	echo "FAIL: the dry run differs from tests/golden/render/cluster.dryrun"
	rc=1
else
	echo "ok: dry run"
fi
exit $rc
