#!/bin/sh
# tp=2, pp=2, dp=2 under real Slurm: `sbatch --wait -n 8` runs `srun layoutbench-train`
# (8 tasks; each reads SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_ID) and the
# run log ends ok with world_size 8, 8 per-rank peaks per step and the job id; a rank
# that hangs (LAYOUTBENCH_FAULT=hang@3:1) is named in the end record, class timeout.
# Skips (77) unless LB_SLURM_TESTS=1 and slurmctld answers (scripts/slurm-local.sh start,
# whose node declares 8 CPUs).
BUILD=${BUILD:-build}
TRAIN="$(pwd)/$BUILD/layoutbench-train"

. tests/sh/lib/need_slurm.sh
[ -x "$TRAIN" ] || { echo "error: '$TRAIN' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d /tmp/lb-par-slurm.XXXXXX) || exit 1
chmod 777 "$tmp"
trap 'rm -rf "$tmp"' EXIT
fail=0

cat >"$tmp/job.sh" <<EOS
#!/bin/sh
srun "$TRAIN" --model tiny --seq-len 32 --global-batch 8 --steps 3 --warmup 1 --quiet \
	--tp 2 --pp 2 --dp 2 --gpus-per-node 8 --zero-stage 1 --comm-timeout 60 \
	--run-dir "$tmp/runs"
EOS
out=$(sbatch --wait -n 8 -N 1 -t 5 -o "$tmp/job.out" --parsable "$tmp/job.sh" 2>&1)
rc=$?
job=${out%%;*}
[ $rc = 0 ] || { echo "FAIL: sbatch --wait: exit $rc: $out"; cat "$tmp/job.out"; fail=1; }
log=$(ls "$tmp"/runs/run-*.jsonl 2>/dev/null | head -n 1)
[ -n "$log" ] || { echo "FAIL: no run log"; cat "$tmp/job.out"; exit 1; }
grep -q '"world_size":8' "$log" || { echo "FAIL: world_size"; fail=1; }
grep -q "\"job_id\":\"$job\"" "$log" || { head -n 1 "$log"; echo "FAIL: job_id $job"; fail=1; }
n=$(grep -c '"rank_peak_mem_bytes":\[[0-9]*\(,[0-9]*\)\{7\}\]' "$log")
[ "$n" = 3 ] || { echo "FAIL: $n of 3 steps with 8 per-rank peaks"; fail=1; }
tail -n 1 "$log" | grep -q '"type":"end","status":"ok"' || { tail -n 1 "$log"; echo "FAIL: end"; fail=1; }

# a rank that hangs under srun: rank 0 writes the end record naming it within the timeout
cat >"$tmp/hang.sh" <<EOS
#!/bin/sh
LAYOUTBENCH_FAULT=hang@3:1 srun --kill-on-bad-exit=1 "$TRAIN" --model tiny --seq-len 32 \
	--global-batch 8 --steps 3 --warmup 1 --quiet --tp 2 --pp 2 --dp 2 --gpus-per-node 8 \
	--comm-timeout 3 --run-dir "$tmp/hang"
EOS
sbatch --wait -n 8 -N 1 -t 5 -o "$tmp/hang.out" --parsable "$tmp/hang.sh" >/dev/null 2>&1
end=$(tail -n 1 "$tmp"/hang/run-*.jsonl 2>/dev/null)
case "$end" in *'"type":"end","status":"failed","class":"timeout"'*'"rank":3,'*) ;;
*) echo "FAIL: hung rank 3 under srun: end record '$end'"; cat "$tmp/hang.out"; fail=1 ;; esac
[ $fail = 0 ] && echo "par slurm: ok (job $job)"
exit $fail
