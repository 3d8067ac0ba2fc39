#!/bin/sh
# Submission speed: render and submit a 1,000-layout sweep through job arrays (libslurm:
# one slurm_submit_batch_job per array) against one submission per layout (--max-array 1),
# side by side, and the array path through slurmrestd when its env file is there. Jobs are
# submitted held (LB_SUBMIT_HOLD=1: priority 0) and cancelled at once. Each path is
# checked: squeue must show 1000 held tasks, else FAIL. Target: arrays under 5 s wall.
# Without a reachable Slurm: one INFO line, exit 0.
set -u
BUILD=${BUILD:-build}
ROOT=$(pwd)
LB="$ROOT/$BUILD/layoutbench"
N=1000
envf=${LB_SLURM_DIR:-/run/layoutbench-slurm}/env
out=$(scontrol ping 2>&1)
case "$out" in
*"is UP"*) ;;
*)
	printf 'RESULT\tsubmit_%d_layouts_arrays\tn/a\ts\t< 5\tINFO\n' "$N"
	echo "no Slurm (run scripts/slurm-local.sh start): skipped"
	exit 0
	;;
esac
[ -x "$LB" ] || { echo "no $LB"; exit 1; }
unset SLURM_JWT
W=$(mktemp -d /tmp/lb-bench-submit.XXXXXX)
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 1

# 10 sequence lengths x 100 global batches of the tiny model: 1000 distinct layouts
gb=$(seq -s, 1 100)
cat >big.json <<EOF
{"name": "bench-submit", "model": "tiny", "fixed": {"micro_batch": 1, "tp": 1, "pp": 1, "dp": 1},
 "grid": {"seq_len": [16, 24, 32, 40, 48, 56, 64, 72, 80, 88], "global_batch": [$gb]},
 "run": {"steps": 2, "warmup": 1},
 "cluster": {"time_limit": 5, "gpus_per_node": 1, "device": "cpu"}}
EOF
rc=0
now() { date +%s.%N; }
held() { squeue -h -r -t PD -n "$1" -o %i 2>/dev/null | wc -l; }

run() { # name db executor extra-args...
	name=$1 db=$2 ex=$3
	shift 3
	t0=$(now)
	LB_SUBMIT_HOLD=1 "$LB" submit big.json --executor "$ex" --db "$db" --runs "$W/runs" \
		--quiet "$@" >"$name.out" 2>&1
	src=$?
	t1=$(now)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	got=$(squeue -h -r -t PD -o '%j' 2>/dev/null | grep -c '^bench-submit')
	ids=$(squeue -h -t PD -o '%F' 2>/dev/null | sort -u | tr '\n' ' ')
	# shellcheck disable=SC2086
	[ -n "$ids" ] && scancel $ids
	n=0
	while [ "$(squeue -h -r -o %i 2>/dev/null | wc -l)" != 0 ] && [ $n -lt 100 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	if [ $src != 0 ] || [ "$got" != "$N" ]; then
		echo "$name: submit exited $src, $got of $N tasks held in squeue" >&2
		cat "$name.out" >&2
		echo "$secs FAIL"
		return 1
	fi
	echo "$secs"
}

arr=$(run arrays a.db slurm) || rc=1
one=$(run per_layout p.db slurm --max-array 1) || rc=1
arr_s=${arr%% *}
one_s=${one%% *}
res=PASS
case "$arr" in *FAIL*) res=FAIL ;; esac
awk -v s="$arr_s" 'BEGIN { exit !(s < 5) }' || res=FAIL
printf 'RESULT\tsubmit_%d_layouts_arrays_libslurm\t%s\ts\t< 5\t%s\n' "$N" "$arr_s" "$res"
res1=INFO
case "$one" in *FAIL*) res1=FAIL ;; esac
printf 'RESULT\tsubmit_%d_layouts_one_job_each_libslurm\t%s\ts\tcompare\t%s\n' "$N" "$one_s" "$res1"
awk -v a="$arr_s" -v b="$one_s" 'BEGIN { if (a > 0) printf "RESULT\tsubmit_arrays_speedup\t%.1f\tx\t> 1\t%s\n", b / a, (b > a ? "PASS" : "FAIL") }'
[ "$res" = PASS ] && [ "$res1" = INFO ] || rc=1

if [ -r "$envf" ]; then
	# shellcheck disable=SC1090
	. "$envf"
	rest=$(run rest r.db rest) || rc=1
	rest_s=${rest%% *}
	res=PASS
	case "$rest" in *FAIL*) res=FAIL ;; esac
	awk -v s="$rest_s" 'BEGIN { exit !(s < 5) }' || res=FAIL
	printf 'RESULT\tsubmit_%d_layouts_arrays_rest\t%s\ts\t< 5\t%s\n' "$N" "$rest_s" "$res"
	[ "$res" = PASS ] || rc=1
fi
exit $rc
