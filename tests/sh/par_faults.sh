#!/bin/sh
# A rank that hangs, exits early or runs out of memory brings the run down within the
# --comm-timeout, and the launcher's exit status and the run log's end record name the
# rank and the class (hang and early exit: timeout, exit 6; oom: oom, exit 3). The same
# with the ranks started as srun would (SLURM_PROCID etc. set by hand, no Slurm needed):
# a good run ends ok, and when rank 0 itself dies rank 1 writes the end record. The faults
# come from LAYOUTBENCH_FAULT=KIND@RANK:STEP (docs/trainer.md, a testing aid).
BUILD=${BUILD:-build}
TRAIN="$(pwd)/$BUILD/layoutbench-train"

[ -x "$TRAIN" ] || { echo "error: '$TRAIN' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
lay="--model tiny --seq-len 16 --global-batch 8 --steps 3 --warmup 0 --quiet --comm-timeout 2"

# fault want-rc want-class want-rank max-seconds
launch() {
	dir="$tmp/$1"
	t0=$(date +%s)
	LAYOUTBENCH_FAULT=$1 "$TRAIN" $lay --tp 2 --dp 2 --gpus-per-node 4 --nproc-per-node 4 \
		--run-dir "$dir" 2>"$dir.err"
	rc=$?
	dt=$(($(date +%s) - t0))
	end=$(tail -n 1 "$dir"/run-*.jsonl)
	[ "$rc" = "$2" ] || { echo "FAIL: $1: exit $rc, want $2"; cat "$dir.err"; fail=1; }
	case "$end" in *'"type":"end"'*'"class":"'"$3"'"'*'"rank":'"$4"','*) ;;
	*) echo "FAIL: $1: end record '$end', want class $3 rank $4"; fail=1 ;; esac
	grep -q "(class $3, rank $4)" "$dir.err" ||
		{ echo "FAIL: $1: the launcher's message does not name class $3 rank $4"; cat "$dir.err"; fail=1; }
	[ "$dt" -le "$5" ] || { echo "FAIL: $1: took ${dt}s, want <= $5"; fail=1; }
	echo "$1: exit $rc, class $3, rank $4, ${dt}s"
}
launch hang@2:1 6 timeout 2 10
launch hang@0:1 6 timeout 0 10
launch exit@3:1 6 timeout 3 10
launch exit@0:2 6 timeout 0 10
launch oom@1:0 3 oom 1 10
# 8 ranks: a hung rank's neighbours wait on it through others (pipeline, dp); the
# waiting chain's end is named, not a rank in between
for i in 1 2 3; do
	dir="$tmp/h8-$i"
	LAYOUTBENCH_FAULT=hang@3:1 "$TRAIN" $lay --tp 2 --pp 2 --dp 2 --gpus-per-node 8 \
		--nproc-per-node 8 --comm-timeout 1 --run-dir "$dir" 2>"$dir.err"
	tail -n 1 "$dir"/run-*.jsonl | grep -q '"class":"timeout".*"rank":3,' ||
		{ echo "FAIL: 8 ranks, rank 3 hung: $(tail -n 1 "$dir"/run-*.jsonl)"; fail=1; }
done

# the srun way: four processes with SLURM_* set by hand
srun_like() { # fault dir step
	for r in 0 1 2 3; do
		LAYOUTBENCH_FAULT=$1 SLURM_PROCID=$r SLURM_NTASKS=4 SLURM_LOCALID=$r \
			SLURM_NNODES=1 SLURM_JOB_ID=$$ SLURM_STEP_ID=$3 \
			"$TRAIN" $lay --tp 2 --pp 2 --gpus-per-node 4 --run-dir "$2" 2>"$2.err$r" &
	done
	wait
}
srun_like none "$tmp/s-ok" 1
tail -n 1 "$tmp"/s-ok/run-*.jsonl | grep -q '"type":"end","status":"ok"' ||
	{ echo "FAIL: srun-like run did not end ok"; cat "$tmp"/s-ok.err*; fail=1; }
grep -q '"world_size":4' "$tmp"/s-ok/run-*.jsonl ||
	{ echo "FAIL: srun-like header world_size"; fail=1; }
srun_like exit@0:1 "$tmp/s-dead0" 2
tail -n 1 "$tmp"/s-dead0/run-*.jsonl | grep -q '"class":"timeout".*"rank":0,"exit_code":6' ||
	{ echo "FAIL: rank 0 died under srun: no end record from rank 1"; tail -n 1 "$tmp"/s-dead0/run-*.jsonl; fail=1; }
# a task count that is not tp*pp*dp
SLURM_PROCID=0 SLURM_NTASKS=3 SLURM_JOB_ID=1 "$TRAIN" $lay --tp 2 --gpus-per-node 2 \
	--run-dir "$tmp/none" 2>"$tmp/err3"
rc=$?
[ $rc = 2 ] && grep -q "^error: srun started 3 task(s) but the layout has tp\*pp\*dp=2 rank(s); run it with srun -n 2$" "$tmp/err3" ||
	{ echo "FAIL: 3 tasks for 2 ranks: exit $rc"; cat "$tmp/err3"; fail=1; }

[ $fail = 0 ] && echo "par faults: ok"
exit $fail
