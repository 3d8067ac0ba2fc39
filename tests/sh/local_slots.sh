#!/bin/sh
# Timed runs do not share the machine unless asked: the local executor runs one job at a
# time by default (three jobs, no two of them running at once), and --slots 3 lets the
# same three run side by side (which shows that the check can see an overlap). A wrapper
# trainer writes each job's start and end times.
set -u
BUILD=${BUILD:-build}
ROOT=$(pwd)
LB="$ROOT/$BUILD/layoutbench"
TRAIN="$ROOT/$BUILD/layoutbench-train"
[ -x "$LB" ] && [ -x "$TRAIN" ] || { echo "no $LB or $TRAIN (make BUILD=$BUILD first)"; exit 1; }
unset SLURM_JWT LAYOUTBENCH_DB LAYOUTBENCH_MEM_LIMIT
W=$(mktemp -d /tmp/lb-slots.XXXXXX)
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 1
fail=0
cat >"$W/train-timed" <<EOF2
#!/bin/sh
# start and end of this job, in nanoseconds, one line each to a file per job
f="$W/times.\$SLURM_JOB_ID"
echo "start \$(date +%s%N)" >>"\$f"
sleep 1
"$TRAIN" "\$@"
rc=\$?
echo "end \$(date +%s%N)" >>"\$f"
exit \$rc
EOF2
chmod +x "$W/train-timed"
export LAYOUTBENCH_TRAIN="$W/train-timed"

# overlaps: the number of pairs of jobs whose [start, end] intersect
overlaps() {
	cat "$W"/times.* | awk '
		$1 == "start" { s[++n] = $2 } $1 == "end" { e[++m] = $2 }
		END {
			k = 0
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
				if (s[i] < e[j] && s[j] < e[i]) k++
			print k
		}'
}
cat >three.json <<'EOF2'
{"name": "three", "model": "tiny", "fixed": {"seq_len": 32, "global_batch": 4, "gpus": 1},
 "grid": {"micro_batch": [1, 2, 4]}, "run": {"steps": 2, "warmup": 1},
 "cluster": {"time_limit": 5, "device": "cpu"}}
EOF2
for slots in default 3; do
	rm -f "$W"/times.*
	extra=
	[ $slots = default ] || extra="--slots $slots"
	# shellcheck disable=SC2086
	"$LB" submit three.json --executor local --db "$W/$slots.db" --runs "$W/runs-$slots" \
		--wait $extra >"$slots.out" 2>&1 || { echo "FAIL: slots $slots: $(cat "$slots.out")"; fail=1; }
	n=$(overlaps)
	echo "slots $slots: $n overlapping pair(s) of 3 jobs"
	if [ $slots = default ] && [ "$n" != 0 ]; then
		echo "FAIL: by default the local executor ran timed jobs side by side"
		fail=1
	fi
	if [ $slots = 3 ] && [ "$n" = 0 ]; then
		echo "FAIL: --slots 3 ran the jobs one at a time"
		fail=1
	fi
done
exit $fail
