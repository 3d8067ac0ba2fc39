#!/bin/sh
# End to end of one 8-rank job (tp=2, pp=2, dp=2 on one node of 8 CPUs): through the local
# executor (lb-srun: the trainer starts its 8 ranks) and, with LB_SLURM_TESTS=1 and the
# cluster of scripts/slurm-local.sh, through libslurm (srun starts 8 tasks). The run must
# complete with world_size 8 in the database.
set -u
BUILD=${BUILD:-build}
ROOT=$(pwd)
LB="$ROOT/$BUILD/layoutbench"
TRAIN="$ROOT/$BUILD/layoutbench-train"
[ -x "$LB" ] && [ -x "$TRAIN" ] || { echo "no $LB or $TRAIN (make BUILD=$BUILD first)"; exit 1; }
unset SLURM_JWT LAYOUTBENCH_TRAIN LAYOUTBENCH_DB LAYOUTBENCH_MEM_LIMIT
W=$(mktemp -d /tmp/lb-e2e-par.XXXXXX)
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 1
cat >par.json <<'EOF2'
{"name": "e2e-parallel", "model": "tiny",
 "fixed": {"seq_len": 64, "global_batch": 8, "micro_batch": 1, "tp": 2, "pp": 2, "gpus": 8},
 "run": {"steps": 3, "warmup": 1},
 "cluster": {"time_limit": 5, "gpus_per_node": 8, "device": "cpu"}}
EOF2
fail=0
execs=local
if [ "${LB_SLURM_TESTS:-0}" = 1 ]; then
	case "$(scontrol ping 2>&1)" in *"is UP"*) execs="local slurm" ;; esac
fi
for ex in $execs; do
	db="$W/$ex.db"
	"$LB" submit par.json --executor "$ex" --db "$db" --runs "$W/runs-$ex" --wait \
		>"$ex.out" 2>&1 || { echo "FAIL: $ex: $(tail -n 20 "$ex.out")"; fail=1; }
	got=$(sqlite3 "$db" "SELECT j.state || ' ' || r.status || ' ' || r.world_size FROM jobs j
		JOIN runs r ON r.job_ref = j.id")
	[ "$got" = "COMPLETED ok 8" ] || {
		echo "FAIL: $ex: job and run are '$got'"
		cat "$W/runs-$ex"/e2e-parallel/logs/*.err 2>/dev/null | tail -n 20
		fail=1
	}
	[ "$fail" = 0 ] && echo "ok: $ex: one 8-rank job completed"
done
exit $fail
